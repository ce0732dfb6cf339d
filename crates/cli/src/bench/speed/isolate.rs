//! Every run of a test on a target in a fresh process (`--isolation process`, the
//! default).
//!
//! Why: a process in which a target handed work to io-wq keeps a kernel worker thread,
//! and a second thread makes the process's later system calls dearer — WAL commits
//! 20–40 % slower here — for every target: measured in one process, `unix` paid for
//! io_uring's threads (ARCHITECTURE.md, "Threads the ring adds"). hyperfine runs each
//! command in its own process for the same reason.
//!
//! Protocol (bench/worker.rs): the parent re-executes this binary as `bench speed <one
//! run's flags> --worker-db FILE`. The worker builds the test's plan, runs it once on
//! FILE (a fresh database it removes again, as in-process runs do) and writes one line to
//! its stdout, `result JSON`, with the [`RunOutcome`]. A SIGINT/SIGTERM to the parent is
//! passed on to the worker, which stops before its next statement and removes FILE.

use std::path::Path;

use anyhow::{anyhow, bail};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::runner::{self, Mode, RunOutcome, TestPlan};
use super::targets::{self, IoCounts, JournalMode, Settings};
use super::workload::{Checksum, Sizes};
use super::{Combo, SpeedArgs};
use crate::bench::{signals, worker};

/// The hidden flag that makes `bench speed` a worker.
pub const WORKER_FLAG: &str = "--worker-db";

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

/// A clap value's name on the command line (`full`, `delete`).
fn flag_value(value: &impl ValueEnum) -> String {
    value
        .to_possible_value()
        .expect("no value of these enums is skipped")
        .get_name()
        .to_string()
}

/// The flags that make a worker run test `number` on `combo` once, with the run's
/// settings.
pub fn worker_args(args: &SpeedArgs, number: u32, combo: &Combo, database: &Path) -> Vec<String> {
    let mut words: Vec<String> = vec!["bench".into(), "speed".into()];
    let mut flag = |name: &str, value: String| {
        words.push(name.to_string());
        words.push(value);
    };
    flag("--tests", number.to_string());
    flag("--targets", combo.target.label.clone());
    flag("--baseline", combo.target.label.clone());
    // Memory has no journal file; any mode reproduces it.
    flag(
        "--journal",
        flag_value(&combo.journal.unwrap_or(JournalMode::Delete)),
    );
    flag("--synchronous", flag_value(&args.synchronous));
    // `{}` of an f64 prints the shortest text that parses back to the same value.
    flag("--scale", args.scale.to_string());
    flag("--warmup", "0".into());
    flag("--runs", "1".into());
    flag("--dir", args.dir.display().to_string());
    flag(WORKER_FLAG, database.display().to_string());
    if args.prepared {
        words.push("--prepared".into());
    }
    // The parent already refused (or allowed) a debug build.
    words.push("--allow-debug".into());
    words
}

/// Runs test `number` once on `combo` in a fresh process of `exe`.
pub fn run_in_worker(
    exe: &Path,
    args: &SpeedArgs,
    number: u32,
    combo: &Combo,
    database: &Path,
) -> anyhow::Result<RunOutcome> {
    let wire: WireOutcome = worker::run(
        exe,
        &worker_args(args, number, combo, database),
        &format!("test {number} on {}", combo.label()),
        &mut worker::no_other_lines,
        &signals::supervise_worker,
    )?;
    Ok(wire.into_outcome())
}

/// The worker side: runs the one test on the one target the flags describe and reports
/// the outcome on stdout.
pub fn serve(args: &SpeedArgs, database: &Path) -> anyhow::Result<()> {
    worker::die_with_parent();
    signals::install_handlers()?;
    let (&[number], [target], &[journal]) = (
        args.tests.as_slice(),
        args.targets.as_slice(),
        args.journal.as_slice(),
    ) else {
        bail!(
            "{WORKER_FLAG} is internal: it runs exactly one test on one target in one journal mode"
        );
    };
    let [target] = targets::resolve(std::slice::from_ref(target))?
        .try_into()
        .map_err(|_| anyhow!("one --targets name resolves to one target"))?;
    let mode = if args.prepared {
        Mode::Prepared
    } else {
        Mode::Text
    };
    let plan = TestPlan::new(number, Sizes { scale: args.scale }, mode);
    let settings = Settings {
        journal,
        synchronous: args.synchronous,
    };
    let outcome = runner::run_once(&target, settings, database, &plan, mode)?;
    worker::send_result(&WireOutcome::from_outcome(&outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::speed::parse_test_args;

    fn parse(words: &[&str]) -> SpeedArgs {
        parse_test_args(words.iter().copied()).unwrap()
    }

    /// A worker's flags describe exactly one run of the parent's test on one of its
    /// targets, for every combination, URI parameters and an odd scale included.
    #[test]
    fn worker_flags_reproduce_each_run_of_the_parent() {
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
            let words = worker_args(&parent, 12, combo, database);
            assert_eq!(words[..2], ["bench", "speed"]);
            let words: Vec<&str> = words[2..].iter().map(String::as_str).collect();
            let child = parse(&words);
            assert_eq!(child.tests, [12]);
            assert_eq!(child.targets, std::slice::from_ref(&combo.target.label));
            assert_eq!(child.baseline, combo.target.label);
            let journal = combo.journal.unwrap_or(JournalMode::Delete);
            assert_eq!(child.journal, [journal]);
            assert_eq!(child.synchronous, parent.synchronous);
            assert_eq!(child.scale.to_bits(), parent.scale.to_bits());
            assert_eq!((child.prepared, child.runs, child.warmup), (true, 1, 0));
            assert_eq!(child.dir, parent.dir);
            assert_eq!(child.worker_db.as_deref(), Some(database));
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
