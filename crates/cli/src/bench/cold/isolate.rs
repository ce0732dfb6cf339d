//! Every run of `bench cold` in a fresh process (`--isolation process`, the default), as
//! `bench speed` runs (see its isolate.rs for why): the parent sends one [`Job`] through
//! `bench worker` (bench/common/worker.rs); the worker resolves the target, runs the test
//! once on the database (workload.rs, [`run_once`]) and answers with the [`RunOutcome`]. A
//! fresh process also starts every run with SQLite's page cache empty and its
//! `/proc/self/io` counters counting this run alone.

use std::path::Path;

use anyhow::{anyhow, Result};

use super::workload::{run_once, RunOutcome, RunSpec};
use crate::bench::common::targets;
use crate::bench::common::{signals, worker};

/// One run, as the parent sends it to a worker.
pub type Job = RunSpec;

/// Runs `job` in a fresh process of `exe`.
pub fn run_in_worker(exe: &Path, job: &Job) -> Result<RunOutcome> {
    worker::run(
        exe,
        job,
        &job.describe(),
        &mut worker::no_other_lines,
        &signals::supervise_worker,
    )
}

/// Runs `job` in this process.
pub fn run_here(job: &Job) -> Result<RunOutcome> {
    let [target] = targets::resolve(std::slice::from_ref(&job.target))?
        .try_into()
        .map_err(|_| anyhow!("one target name resolves to one target"))?;
    run_once(&target, job)
}

impl worker::WorkerJob for Job {
    const KIND: &'static str = "cold";

    /// The worker side: runs the job and reports its outcome on stdout.
    fn serve(self) -> Result<()> {
        signals::install_handlers()?;
        worker::send_result(&run_here(&self)?)
    }
}
