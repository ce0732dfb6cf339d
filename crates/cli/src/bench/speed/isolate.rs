//! Every run of a test on a target in a fresh process (`--isolation process`, the
//! default).
//!
//! Why: a process in which a target handed work to io-wq keeps a kernel worker thread,
//! and a second thread makes the process's later system calls dearer — WAL commits
//! 20–40 % slower here — for every target: measured in one process, `unix` paid for
//! io_uring's threads (ARCHITECTURE.md, "Threads the ring adds"). hyperfine runs each
//! command in its own process for the same reason.
//!
//! Protocol (bench/common/worker.rs): the parent re-executes this binary as a worker with
//! one [`Job`] (the test, the target, the settings, the database FILE). The worker builds
//! the test's plan, runs it once on FILE (a fresh database it removes again, as
//! in-process runs do) and writes one line to its stdout, `result JSON`, with the
//! [`RunOutcome`]. A SIGINT/SIGTERM to the parent is passed on to the worker, which
//! stops before its next statement and removes FILE.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use serde::{Deserialize, Serialize};
use sqlite_uring::IoStats;

use super::runner::{self, Mode, RunOutcome, TestPlan};
use super::workload::Sizes;
use crate::bench::common::checksum::Checksum;
use crate::bench::common::counts;
use crate::bench::common::pagecache::CacheState;
use crate::bench::common::settings::{JournalMode, Settings, Synchronous};
use crate::bench::common::targets;
use crate::bench::common::{signals, worker};
use crate::counting_vfs::MethodTimes;

/// One [`RunOutcome`] as it crosses the pipe.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct WireOutcome {
    elapsed_s: f64,
    cpu_s: f64,
    checksum: u64,
    #[serde(with = "counts::wire")]
    io: Option<IoStats>,
    #[serde(default)]
    methods: Option<MethodTimes>,
}

impl WireOutcome {
    fn from_outcome(outcome: &RunOutcome) -> WireOutcome {
        WireOutcome {
            elapsed_s: outcome.elapsed_s,
            cpu_s: outcome.cpu_s,
            checksum: outcome.checksum.as_u64(),
            io: outcome.io,
            methods: outcome.methods,
        }
    }

    fn into_outcome(self) -> RunOutcome {
        RunOutcome {
            elapsed_s: self.elapsed_s,
            cpu_s: self.cpu_s,
            checksum: Checksum::from_u64(self.checksum),
            io: self.io,
            methods: self.methods,
        }
    }
}

/// One run of one test on one target, as the parent sends it to a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub test: u32,
    /// The `--targets` name (URI parameters included).
    pub target: String,
    /// Memory has no journal file; any mode reproduces it.
    pub journal: JournalMode,
    pub synchronous: Synchronous,
    pub scale: f64,
    pub prepared: bool,
    /// Whether the body starts with the database's pages evicted (`--cache`).
    #[serde(default)]
    pub cache: CacheState,
    /// The database file of the run, which the worker creates and removes.
    pub database: PathBuf,
    /// Whether the target's VFS calls are timed by method (`--breakdown`).
    #[serde(default)]
    pub breakdown: bool,
}

impl Job {
    fn mode(&self) -> Mode {
        if self.prepared {
            Mode::Prepared
        } else {
            Mode::Text
        }
    }
}

/// Runs `job` in a fresh process of `exe`.
pub fn run_in_worker(exe: &Path, job: &Job) -> anyhow::Result<RunOutcome> {
    let wire: WireOutcome = worker::run(
        exe,
        job,
        &format!("test {} on {}", job.test, job.target),
        &mut worker::no_other_lines,
        &signals::supervise_worker,
    )?;
    Ok(wire.into_outcome())
}

impl worker::WorkerJob for Job {
    const KIND: &'static str = "speed";

    fn serve(self) -> anyhow::Result<()> {
        serve(&self)
    }
}

/// The worker side: runs the job's test once on its target and reports the outcome on
/// stdout.
fn serve(job: &Job) -> anyhow::Result<()> {
    signals::install_handlers()?;
    let mut resolved = targets::resolve(std::slice::from_ref(&job.target))?;
    if job.breakdown {
        resolved = targets::with_method_times(resolved)?;
    }
    let [target] = resolved
        .try_into()
        .map_err(|_| anyhow!("one target name resolves to one target"))?;
    let mode = job.mode();
    let plan = TestPlan::new(job.test, Sizes { scale: job.scale }, mode);
    let settings = Settings {
        journal: job.journal,
        synchronous: job.synchronous,
    };
    let outcome = runner::run_once(&target, settings, &job.database, &plan, mode, job.cache)?;
    worker::send_result(&WireOutcome::from_outcome(&outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_cross_the_pipe_unchanged() {
        let outcome = RunOutcome {
            elapsed_s: 0.123_456_789_012_345_6,
            cpu_s: 1e-9,
            checksum: Checksum::from_u64(u64::MAX - 5),
            io: Some(IoStats {
                read_calls: 1,
                write_calls: 2,
                sync_calls: 3,
                truncate_calls: 4,
                bytes_read: 1 << 40,
                bytes_written: 6,
                fsyncs: 7,
                ..IoStats::default()
            }),
            methods: Some(MethodTimes {
                calls: std::array::from_fn(|i| i as u64 + 1),
                ns: std::array::from_fn(|i| u64::MAX - i as u64),
            }),
        };
        let text = serde_json::to_string(&WireOutcome::from_outcome(&outcome)).unwrap();
        assert!(!text.contains('\n'), "one line per result: {text}");
        let back = serde_json::from_str::<WireOutcome>(&text)
            .unwrap()
            .into_outcome();
        assert_eq!(back.elapsed_s.to_bits(), outcome.elapsed_s.to_bits());
        assert_eq!(back.cpu_s.to_bits(), outcome.cpu_s.to_bits());
        assert_eq!(back.checksum, outcome.checksum);
        assert_eq!(back.io, outcome.io);
        assert_eq!(back.methods, outcome.methods);
    }
}
