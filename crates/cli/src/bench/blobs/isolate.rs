//! Every run of a storage case in a fresh process (`--isolation process`, the default).
//!
//! Why: blob-read rates depend on the state of the process more than on the VFS — a
//! connection opened second in a process read 2 MB blobs up to 6× slower than the first,
//! whatever its VFS, from page faults on fresh destination buffers (BENCH_BLOBS.md,
//! "Position in the process"). Rotating the target order spreads that bias but does not
//! remove it; a fresh process per run does, as hyperfine runs each command in its own.
//!
//! Protocol (bench/common/worker.rs): the parent re-executes this binary as a worker with
//! one [`Job`] (the case, its data settings and RUN_DIR). The worker runs that case once
//! in RUN_DIR (which the parent created and removes) and writes lines to its stdout:
//! `phase LEN LABEL` when a phase starts, `at N` as it progresses (at most every 100 ms,
//! outside the timed part), and finally `result JSON` with what
//! [`run_storage_case`](super::case::run_storage_case) measured.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use super::case::{self, Measured, Progress};
use super::plan::{BlobsArgs, Data, StorageCase};
use super::runner::{Phase, PhaseResult, StopReason};
use super::store;
use crate::bench::common::counts;
use crate::bench::common::{signals, worker};

const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// One [`Measured`] as it crosses the pipe.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct WireMeasured {
    phase: Phase,
    ops_planned: u64,
    ops_done: u64,
    stopped_by: StopReason,
    elapsed_ns: u64,
    logical_bytes: u64,
    stored_bytes: u64,
    verified: u64,
    commits: Option<u64>,
    #[serde(with = "counts::wire")]
    io: Option<sqlite_uring::IoStats>,
    db_bytes: Option<u64>,
}

impl WireMeasured {
    fn from_measured(measured: &Measured) -> WireMeasured {
        let r = &measured.result;
        WireMeasured {
            phase: r.phase,
            ops_planned: r.ops_planned,
            ops_done: r.ops_done,
            stopped_by: r.stopped_by,
            elapsed_ns: u64::try_from(r.elapsed.as_nanos()).unwrap_or(u64::MAX),
            logical_bytes: r.logical_bytes,
            stored_bytes: r.stored_bytes,
            verified: r.verified,
            commits: r.commits,
            io: measured.io,
            db_bytes: measured.db_bytes,
        }
    }

    fn into_measured(self) -> Measured {
        Measured {
            result: PhaseResult {
                phase: self.phase,
                ops_planned: self.ops_planned,
                ops_done: self.ops_done,
                stopped_by: self.stopped_by,
                elapsed: Duration::from_nanos(self.elapsed_ns),
                logical_bytes: self.logical_bytes,
                stored_bytes: self.stored_bytes,
                verified: self.verified,
                commits: self.commits,
            },
            io: self.io,
            db_bytes: self.db_bytes,
        }
    }
}

/// One run of one storage case, as the parent sends it to a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub case: StorageCase,
    pub data: Data,
    pub max_seconds: f64,
    /// The run's directory, which the parent created and removes.
    pub run_dir: PathBuf,
}

impl Job {
    pub fn new(case: &StorageCase, args: &BlobsArgs, run_dir: &Path) -> Job {
        Job {
            case: case.clone(),
            data: args.data(),
            max_seconds: args.max_seconds,
            run_dir: run_dir.to_path_buf(),
        }
    }
}

impl worker::WorkerJob for Job {
    const KIND: &'static str = "blobs";

    fn serve(self) -> anyhow::Result<()> {
        serve(&self)
    }
}

/// Runs one run of `case` in a fresh process of `exe`, showing its progress on `bar`.
pub fn run_in_worker(exe: &Path, job: &Job, bar: &ProgressBar) -> anyhow::Result<Vec<Measured>> {
    let mut show_progress = |kind: &str, rest: &str| -> anyhow::Result<()> {
        match kind {
            "phase" => {
                let (len, label) = rest.split_once(' ').unwrap_or((rest, ""));
                case::show_phase(bar, label, len.parse().unwrap_or(0));
            }
            "at" => bar.set_position(rest.parse().unwrap_or(0)),
            _ => worker::no_other_lines(kind, rest)?,
        }
        Ok(())
    };
    let phases: Vec<WireMeasured> = worker::run(
        exe,
        job,
        &format!("case {}", job.case.label()),
        &mut show_progress,
        &signals::supervise_worker,
    )?;
    Ok(phases
        .into_iter()
        .map(WireMeasured::into_measured)
        .collect())
}

/// Progress as lines on stdout, read by [`run_in_worker`]. Called outside the timed
/// part of each operation; printing at most every 100 ms keeps the pipe negligible.
#[derive(Default)]
struct ThrottledLines {
    last_sent: Option<Instant>,
}

impl Progress for ThrottledLines {
    fn phase(&mut self, label: &str, len: u64) {
        println!("phase {len} {label}");
        self.last_sent = Some(Instant::now());
    }

    fn at(&mut self, done: u64) {
        let now = Instant::now();
        if self
            .last_sent
            .is_none_or(|sent| now.duration_since(sent) >= PROGRESS_INTERVAL)
        {
            println!("at {done}");
            self.last_sent = Some(now);
        }
    }
}

/// The worker side: runs the job's case once and reports it on stdout.
fn serve(job: &Job) -> anyhow::Result<()> {
    // Before any allocation of the run, as in the parent.
    super::guard::pin_malloc_thresholds();
    if !job.run_dir.is_dir() {
        bail!(
            "worker: the run directory {} does not exist",
            job.run_dir.display()
        );
    }
    if !(job.max_seconds.is_finite() && job.max_seconds > 0.0) {
        bail!(
            "worker: --max-seconds {} is not a positive duration",
            job.max_seconds
        );
    }
    signals::install_handlers()?;
    store::ensure_registered(job.case.target)?;
    let mut progress = ThrottledLines::default();
    let max = Duration::from_secs_f64(job.max_seconds);
    let measured = case::run_storage_case(&job.case, &job.data, &job.run_dir, max, &mut progress)?;
    let wire: Vec<WireMeasured> = measured.iter().map(WireMeasured::from_measured).collect();
    worker::send_result(&wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::blobs::plan::{parse_test_args, Plan};

    /// A worker's job describes exactly the parent's case and settings, for every
    /// target, journal, compression and an odd size typed in another unit, and crosses
    /// the command line unchanged.
    #[test]
    fn worker_jobs_reproduce_each_case_of_the_parent() {
        let parent = parse_test_args([
            "--targets",
            "memory,unix,io_uring,sync,io_uring?uring_write_behind=off&uring_syncs=ring",
            "--sizes",
            "4KiB,1500B",
            "--batch",
            "1,7",
            "--ops",
            "33",
            "--max-seconds",
            "0.25",
            "--content",
            "random",
            "--seed",
            "99",
            "--zstd-level",
            "-5",
            "--runs",
            "3",
            "--warmup",
            "2",
        ])
        .unwrap();
        let plan = Plan::from_args(&parent).unwrap();
        assert!(plan.storage.len() > 20);
        let run_dir = Path::new("/var/tmp/some run dir");
        for case in &plan.storage {
            let job = Job::new(case, &parent, run_dir);
            let child = worker::round_trip(&job);
            assert_eq!(&child.case, case);
            assert_eq!(
                Duration::from_secs_f64(child.max_seconds),
                plan.max,
                "the same time budget"
            );
            assert_eq!(
                (child.data.seed, child.data.content, child.data.zstd_level),
                (parent.seed, parent.content, parent.zstd_level)
            );
            assert_eq!(child.run_dir, run_dir);
        }
    }

    #[test]
    fn measurements_cross_the_pipe_unchanged() {
        let io = sqlite_uring::IoStats {
            read_calls: 3,
            bytes_written: 1 << 40,
            kernel_entries: 17,
            readahead_hits: 2,
            ..Default::default()
        };
        let phases = [
            Measured {
                result: PhaseResult {
                    phase: Phase::Write,
                    ops_planned: 100,
                    ops_done: 40,
                    stopped_by: StopReason::Time,
                    elapsed: Duration::new(2, 123_456_789),
                    logical_bytes: 2560,
                    stored_bytes: 900,
                    verified: 0,
                    commits: Some(4),
                },
                io: Some(io),
                db_bytes: Some(8192),
            },
            Measured {
                result: PhaseResult {
                    phase: Phase::ReadRandom,
                    ops_planned: 40,
                    ops_done: 40,
                    stopped_by: StopReason::Ops,
                    elapsed: Duration::from_nanos(1),
                    logical_bytes: 2560,
                    stored_bytes: 900,
                    verified: 40,
                    commits: None,
                },
                io: None,
                db_bytes: None,
            },
        ];
        let wire: Vec<WireMeasured> = phases.iter().map(WireMeasured::from_measured).collect();
        let text = serde_json::to_string(&wire).unwrap();
        assert!(!text.contains('\n'), "one line per result: {text}");
        let back: Vec<WireMeasured> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, wire);
        let back: Vec<Measured> = back.into_iter().map(WireMeasured::into_measured).collect();
        for (a, b) in phases.iter().zip(&back) {
            assert_eq!(format!("{:?}", a.result), format!("{:?}", b.result));
            assert_eq!((a.io, a.db_bytes), (b.io, b.db_bytes));
        }
        // A worker from a build with other counters is an error, not a silent mix-up.
        let short = text.replacen(
            &format!("\"io\":{}", serde_json::to_string(&io.as_array()).unwrap()),
            "\"io\":[1,2,3]",
            1,
        );
        assert_ne!(short, text);
        let error = serde_json::from_str::<Vec<WireMeasured>>(&short).unwrap_err();
        assert!(error.to_string().contains("3 I/O counters"), "{error}");
    }
}
