//! Trace records of the I/O layer: one per batch an engine performs and one per ring
//! submission (targets `sqlite_uring::io` and `sqlite_uring::ring`, see `trace.rs`), and
//! how an [`Op`] is written in them. Only called when the target is enabled.

use std::fmt::Write as _;
use std::time::Instant;

use crate::trace::{emit, quietly, TARGET_IO, TARGET_RING};

use super::op::Op;

/// Writes the record of one batch performed by the engine (`Submitter::perform`).
#[cold]
#[inline(never)]
pub(crate) fn batch(
    started: Instant,
    engine: &str,
    ops: &[Op],
    results: &[i32],
    outcome: Result<u64, i32>,
) {
    quietly(|| {
        let duration_ns = started.elapsed().as_nanos();
        let mut line = format!("batch engine={engine} ops={}", ops.len());
        match outcome {
            Ok(kernel_entries) => {
                let _ = write!(line, " kernel_entries={kernel_entries}");
            }
            Err(errno) => {
                let _ = write!(line, " failed errno={errno} ({})", errno_text(errno));
            }
        }
        let _ = write!(line, " duration_ns={duration_ns} [");
        for (index, op) in ops.iter().enumerate() {
            if index > 0 {
                line.push_str("; ");
            }
            write_op(&mut line, op);
            if let (Ok(_), Some(&result)) = (outcome, results.get(index)) {
                if result >= 0 {
                    let _ = write!(line, " -> {result}");
                } else {
                    let _ = write!(line, " -> error {} ({})", -result, errno_text(-result));
                }
            }
        }
        line.push(']');
        emit(TARGET_IO, &line);
    });
}

/// Writes the record of one ring submission (`Ring::perform_on_ring`): `entries` SQEs
/// pushed, `linked` of them with IOSQE_IO_LINK, `kernel_entries` io_uring_enter calls,
/// and as many completions reaped as entries (the ring is empty when it returns).
#[cold]
#[inline(never)]
pub(crate) fn ring_submission(
    ops: &[Op],
    linked: &[bool],
    kernel_entries: u64,
    has_ftruncate: bool,
) {
    quietly(|| {
        let by_syscall = ops
            .iter()
            .filter(|op| matches!(op, Op::Truncate { .. }) && !has_ftruncate)
            .count();
        let entries = ops.len() - by_syscall;
        let linked = linked.iter().take(ops.len()).filter(|l| **l).count();
        let mut line = format!(
            "submit entries={entries} linked={linked} kernel_entries={kernel_entries} completions={entries}"
        );
        if by_syscall > 0 {
            let _ = write!(line, " ftruncate_by_syscall={by_syscall}");
        }
        emit(TARGET_RING, &line);
    });
}

fn write_op(line: &mut String, op: &Op) {
    let len = op.buffer_len();
    let _ = match *op {
        Op::Read { fd, offset, .. } => write!(line, "read fd={fd} offset={offset} len={len}"),
        Op::Write { fd, offset, .. } => write!(line, "write fd={fd} offset={offset} len={len}"),
        Op::Sync { fd, data_only } => write!(line, "{} fd={fd}", sync_name(data_only)),
        Op::SyncAfterWrites { fd, data_only } => {
            write!(line, "{} fd={fd} after_writes", sync_name(data_only))
        }
        Op::Truncate { fd, len } => write!(line, "ftruncate fd={fd} len={len}"),
        Op::Prefetch { fd, offset, len } => {
            write!(line, "fadvise_willneed fd={fd} offset={offset} len={len}")
        }
    };
}

fn sync_name(data_only: bool) -> &'static str {
    if data_only {
        "fdatasync"
    } else {
        "fsync"
    }
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_records_list_ops_and_results() {
        let buf = [0u8; 8];
        let ops = [
            Op::Write {
                fd: 5,
                buf: &buf,
                offset: 16,
            },
            Op::SyncAfterWrites {
                fd: 5,
                data_only: false,
            },
        ];
        let mut line = String::new();
        for op in &ops {
            write_op(&mut line, op);
            line.push(';');
        }
        assert_eq!(line, "write fd=5 offset=16 len=8;fsync fd=5 after_writes;");
    }
}
