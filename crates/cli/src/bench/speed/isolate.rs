//! Every run of a test on a target in a fresh process (`--isolation process`, the
//! default).
//!
//! Why: a process in which a target handed work to io-wq keeps a kernel worker thread,
//! and a second thread makes the process's later system calls dearer — WAL commits
//! 20–40 % slower here — for every target: measured in one process, `unix` paid for
//! io_uring's threads (ARCHITECTURE.md, "Threads the ring adds"). hyperfine runs each
//! command in its own process for the same reason.
//!
//! Protocol (bench/worker.rs): the parent re-executes this binary as a worker with one
//! [`Job`] (the test, the target, the settings, the database FILE). The worker builds
//! the test's plan, runs it once on FILE (a fresh database it removes again, as
//! in-process runs do) and writes one line to its stdout, `result JSON`, with the
//! [`RunOutcome`]. A SIGINT/SIGTERM to the parent is
//! passed on to the worker, which stops before its next statement and removes FILE.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use serde::{Deserialize, Serialize};

use super::runner::{self, Mode, RunOutcome, TestPlan};
use super::targets::{self, IoCounts, JournalMode, Settings, Synchronous};
use super::workload::{Checksum, Sizes};
use super::{Combo, SpeedArgs};
use crate::bench::pagecache::CacheState;
use crate::bench::{signals, worker};

/// One [`RunOutcome`] as it crosses the pipe.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct WireOutcome {
    elapsed_s: f64,
    cpu_s: f64,
    checksum: u64,
    io: Option<IoCounts>,
}

impl WireOutcome {
    fn from_outcome(outcome: &RunOutcome) -> WireOutcome {
        WireOutcome {
            elapsed_s: outcome.elapsed_s,
            cpu_s: outcome.cpu_s,
            checksum: outcome.checksum.as_u64(),
            io: outcome.io,
        }
    }

    fn into_outcome(self) -> RunOutcome {
        RunOutcome {
            elapsed_s: self.elapsed_s,
            cpu_s: self.cpu_s,
            checksum: Checksum::from_u64(self.checksum),
            io: self.io,
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
}

impl Job {
    /// The job of test `number` on `combo`, with the parent's settings.
    pub(super) fn new(args: &SpeedArgs, number: u32, combo: &Combo, database: &Path) -> Job {
        Job {
            test: number,
            target: combo.target.label.clone(),
            journal: combo.journal.unwrap_or(JournalMode::Delete),
            synchronous: args.pairing.synchronous,
            scale: args.scale,
            prepared: args.prepared,
            cache: args.cache,
            database: database.to_path_buf(),
        }
    }

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
        &worker::Job::Speed(job.clone()),
        &format!("test {} on {}", job.test, job.target),
        &mut worker::no_other_lines,
        &signals::supervise_worker,
    )?;
    Ok(wire.into_outcome())
}

/// The worker side: runs the job's test once on its target and reports the outcome on
/// stdout.
pub fn serve(job: &Job) -> anyhow::Result<()> {
    signals::install_handlers()?;
    let [target] = targets::resolve(std::slice::from_ref(&job.target))?
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
    use crate::bench::speed::parse_test_args;

    fn parse(words: &[&str]) -> SpeedArgs {
        parse_test_args(words.iter().copied()).unwrap()
    }

    /// A worker's job describes exactly one run of the parent's test on one of its
    /// targets, for every combination, URI parameters and an odd scale included, and
    /// crosses the command line unchanged.
    #[test]
    fn worker_jobs_reproduce_each_run_of_the_parent() {
        let parent = parse(&[
            "--targets",
            "memory,unix,io_uring?uring_syncs=syscall&uring_sync_plan=separate,sync",
            "--journal",
            "wal,delete",
            "--synchronous",
            "normal",
            "--scale",
            "0.0123456789",
            "--prepared",
            "--cache",
            "cold",
            "--runs",
            "7",
            "--warmup",
            "2",
            "--dir",
            "/var/tmp/some dir",
        ]);
        let targets = targets::resolve(&parent.targets).unwrap();
        let combos = super::super::combos(&targets, &parent.journal);
        assert_eq!(combos.len(), 1 + 3 * 2);
        let database = Path::new("/var/tmp/some dir/x.db");
        for combo in &combos {
            let job = Job::new(&parent, 12, combo, database);
            let back = worker::Job::round_trip(&worker::Job::Speed(job.clone()));
            let worker::Job::Speed(child) = back else {
                panic!("a speed job came back as another kind")
            };
            assert_eq!(child, job);
            assert_eq!(child.test, 12);
            assert_eq!(child.target, combo.target.label);
            assert_eq!(child.journal, combo.journal.unwrap_or(JournalMode::Delete));
            assert_eq!(child.synchronous, parent.pairing.synchronous);
            assert_eq!(child.scale.to_bits(), parent.scale.to_bits());
            assert!(child.prepared);
            assert_eq!(child.cache, CacheState::Cold);
            assert_eq!(child.database, database);
            // The worker can resolve the target it is sent.
            let [resolved] = targets::resolve(std::slice::from_ref(&child.target))
                .unwrap()
                .try_into()
                .ok()
                .unwrap();
            assert_eq!(resolved.uri_parameters, combo.target.uri_parameters);
        }
    }

    #[test]
    fn outcomes_cross_the_pipe_unchanged() {
        let outcome = RunOutcome {
            elapsed_s: 0.123_456_789_012_345_6,
            cpu_s: 1e-9,
            checksum: Checksum::from_u64(u64::MAX - 5),
            io: Some(IoCounts {
                read_calls: 1,
                write_calls: 2,
                sync_calls: 3,
                truncate_calls: 4,
                bytes_read: 1 << 40,
                bytes_written: 6,
                fsyncs: Some(7),
                kernel_entries: None,
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
    }
}
