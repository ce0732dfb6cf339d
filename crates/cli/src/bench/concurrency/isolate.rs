//! One measured run of `bench concurrency` in a fresh process (`--isolation process`,
//! the default), and the reader processes of the processes pattern: both are jobs of
//! `bench worker` (bench/common/worker.rs).
//!
//! Why a fresh process per run: a run's threads, its ring and the io-wq workers a ring
//! leaves behind stay in the process, and later runs in that process would pay for them
//! (ARCHITECTURE.md, "Threads the ring adds"); a fresh process also starts every target
//! with the same empty page cache of SQLite and the same allocator state.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use super::cell::{Job, RunJob};
use super::processes;
use super::workload::{
    create, databases_plans, readers_plans, resolve_target, run_threads, CellOutcome, Latencies,
    Pattern,
};
use crate::bench::common::{signals, worker};

/// Runs `job` in a fresh process of `exe`.
pub fn run_in_worker(exe: &Path, job: &RunJob) -> Result<CellOutcome> {
    worker::run(
        exe,
        &Job::Run(job.clone()),
        &job.describe(),
        &mut worker::no_other_lines,
        &signals::supervise_worker,
    )
}

impl worker::WorkerJob for Job {
    const KIND: &'static str = "concurrency";

    /// The worker side.
    fn serve(self) -> Result<()> {
        signals::install_handlers()?;
        match self {
            Job::Run(run) => worker::send_result(&run_here(&run)?),
            Job::Reader(reader) => processes::serve_reader(&reader),
        }
    }
}

/// The run directory, removed with everything in it when dropped.
struct RunDir(PathBuf);

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `job` in this process: creates its databases through the target, runs the
/// window, and removes the databases.
pub fn run_here(job: &RunJob) -> Result<CellOutcome> {
    let target = resolve_target(&job.target)?;
    let _ = std::fs::remove_dir_all(&job.dir);
    std::fs::create_dir(&job.dir)
        .with_context(|| format!("cannot create the run directory {}", job.dir.display()))?;
    let dir = RunDir(job.dir.clone());
    let shape = &job.shape;
    let nothing_beside = |_| Ok((Latencies::default(), Instant::now()));
    let outcome = match job.pattern {
        Pattern::Readers => {
            let database = dir.0.join("shared.db");
            create(&target, &database, shape.settings(job.journal), shape.rows)?;
            run_threads(
                &target,
                shape,
                &readers_plans(&database, job.threads, job.journal),
                nothing_beside,
            )
        }
        Pattern::Databases => {
            let plans = databases_plans(&dir.0, job.threads, job.journal);
            // One database made through the target, copied for the others (the same
            // bytes, sooner).
            let first = &plans[0].database;
            create(&target, first, shape.settings(job.journal), shape.rows)?;
            for plan in &plans[1..] {
                std::fs::copy(first, &plan.database).with_context(|| {
                    format!("copying {} to {}", first.display(), plan.database.display())
                })?;
            }
            run_threads(&target, shape, &plans, nothing_beside)
        }
        Pattern::Processes => processes::run(
            &target,
            &job.target,
            shape,
            &dir.0,
            job.threads,
            &job.sqlite3,
        ),
    };
    outcome.with_context(|| job.describe())
}
