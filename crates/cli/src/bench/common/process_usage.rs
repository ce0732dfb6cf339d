//! What this whole process has consumed so far, all its threads together (io_uring's
//! io-wq workers are threads of the process, so their work counts too): CPU time, and
//! bytes read from storage. A benchmark takes one snapshot before its timed part and one
//! after.

use anyhow::{anyhow, Context, Result};

/// User + system CPU seconds consumed by this process so far.
pub fn cpu_s() -> f64 {
    // SAFETY: rusage is plain old data (zeroes are valid) and getrusage only writes it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return f64::NAN;
        }
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Where the kernel counts a process's storage reads.
const PROC_IO: &str = "/proc/self/io";

/// `read_bytes` of `/proc/self/io`: the bytes this process has caused to be fetched from
/// the storage layer (page-cache misses and their read-ahead, direct I/O), summed over
/// all its threads, exited ones included. Reads served by the page cache count nothing.
pub fn read_bytes() -> Result<u64> {
    let text = std::fs::read_to_string(PROC_IO).with_context(|| {
        format!(
            "cannot read {PROC_IO}, where the kernel counts a process's storage reads \
             (a kernel built without CONFIG_TASK_IO_ACCOUNTING has none)"
        )
    })?;
    parse_read_bytes(&text)
}

fn parse_read_bytes(text: &str) -> Result<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("read_bytes:"))
        .ok_or_else(|| anyhow!("{PROC_IO} has no read_bytes line"))?
        .trim()
        .parse()
        .with_context(|| format!("{PROC_IO}: read_bytes is not a number"))
}

/// One snapshot of this process's consumption.
#[derive(Clone, Copy, Debug)]
pub struct ProcessUsage {
    pub cpu_s: f64,
    pub read_bytes: u64,
}

impl ProcessUsage {
    pub fn now() -> Result<ProcessUsage> {
        Ok(ProcessUsage {
            cpu_s: cpu_s(),
            read_bytes: read_bytes()?,
        })
    }

    /// What was consumed between `earlier` and this snapshot.
    pub fn since(&self, earlier: &ProcessUsage) -> ProcessUsage {
        ProcessUsage {
            cpu_s: self.cpu_s - earlier.cpu_s,
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_bytes_is_parsed_from_proc_self_io() {
        let text = "rchar: 3795\nwchar: 0\nsyscr: 9\nsyscw: 0\nread_bytes: 40960\n\
                    write_bytes: 0\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_read_bytes(text).unwrap(), 40960);
        assert!(parse_read_bytes("rchar: 1\n").is_err());
        // This kernel counts: the benchmarks that report device reads need it.
        let first = ProcessUsage::now().unwrap();
        let later = ProcessUsage::now().unwrap().since(&first);
        assert!(later.cpu_s >= 0.0);
    }
}
