//! One run of one storage case: its write phase and both read phases, in a fresh
//! database, with the VFS's counters of each phase.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use indicatif::ProgressBar;

use super::codec::Codec;
use super::guard::RemoveOnDrop;
use super::plan::{Data, StorageCase};
use super::runner::{self, Budget, PhaseResult};
use super::store::{self, Journal};
use super::workload::{ReadOrder, Workload};

/// Where a case reports its progress: the terminal's bar, or a worker's pipe.
pub trait Progress {
    fn phase(&mut self, label: &str, len: u64);
    fn at(&mut self, done: u64);
}

pub fn show_phase(bar: &ProgressBar, label: &str, len: u64) {
    bar.set_prefix(label.to_string());
    bar.set_length(len);
    bar.set_position(0);
}

impl Progress for ProgressBar {
    fn phase(&mut self, label: &str, len: u64) {
        show_phase(self, label, len);
    }

    fn at(&mut self, done: u64) {
        self.set_position(done);
    }
}

/// One phase of one run, with the VFS's own I/O counters when it has them.
pub struct Measured {
    pub result: PhaseResult,
    pub io: Option<sqlite_uring::IoStats>,
    /// Database (+ journal/WAL) bytes at the end of the write phase.
    pub db_bytes: Option<u64>,
}

/// Runs the write and both read phases of one case once, in a fresh database that is
/// removed afterwards (also on error and on SIGINT/SIGTERM).
pub fn run_storage_case(
    case: &StorageCase,
    data: &Data,
    run_dir: &Path,
    max: Duration,
    progress: &mut dyn Progress,
) -> anyhow::Result<Vec<Measured>> {
    let path = run_dir.join(format!("blobs-{}.db", case.target.file_stem()));
    let files = RemoveOnDrop::new(store::database_files(case.target, &path));
    // Declared after `files`, so the connection closes before the files are removed.
    let mut store = store::open_store(case.target, case.journal.unwrap_or(Journal::Delete), &path)?;
    let mut codec = Codec::new(case.compression, data.zstd_level)?;
    let workload = Workload {
        seed: data.seed,
        size_bytes: case.size.bytes() as usize,
        content: data.content,
    };
    let budget = Budget { ops: case.ops, max };
    let stats_vfs = case.target.stats_vfs();
    let take_stats = || {
        stats_vfs.and_then(|name| {
            let stats = sqlite_uring::vfs_stats(name);
            sqlite_uring::reset_vfs_stats(name);
            stats
        })
    };

    let mut measured = Vec::new();
    progress.phase(&format!("{} write", case.label()), case.ops);
    crate::trace_file::mark(format_args!("blobs {} · write phase", case.label()));
    take_stats();
    let (write, checksums) = runner::write_phase(
        store.as_mut(),
        &mut codec,
        &workload,
        case.batch,
        budget,
        &mut |n| progress.at(n),
    )
    .with_context(|| format!("case {}: write phase", case.label()))?;
    measured.push(Measured {
        result: write,
        io: take_stats(),
        db_bytes: case.target.on_disk().then(|| files.size_bytes()),
    });
    store
        .settle()
        .with_context(|| format!("case {}: checkpoint after the write phase", case.label()))?;
    // The checkpoint's I/O belongs to neither phase.
    take_stats();
    for order in [ReadOrder::Sequential, ReadOrder::Random] {
        let phase_name = if order == ReadOrder::Sequential {
            "read-seq"
        } else {
            "read-random"
        };
        crate::trace_file::mark(format_args!("blobs {} · {phase_name} phase", case.label()));
        progress.phase(
            &format!("{} {phase_name}", case.label()),
            checksums.len().min(case.ops as usize) as u64,
        );
        let read = runner::read_phase(
            store.as_mut(),
            &mut codec,
            &workload,
            &checksums,
            order,
            budget,
            &mut |n| progress.at(n),
        )
        .with_context(|| format!("case {}: {phase_name} phase", case.label()))?;
        measured.push(Measured {
            result: read,
            io: take_stats(),
            db_bytes: None,
        });
    }
    drop(store);
    drop(files);
    Ok(measured)
}
