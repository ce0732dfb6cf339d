//! The pipe between a benchmark and the worker processes it runs each measured run in
//! (`--isolation process`, see [`super::Isolation`]): both sides of the protocol.
//!
//! The parent re-executes this binary as `bench worker --job JSON`, where JSON is one
//! [`Job`]: everything the run needs, serialized once with serde rather than rebuilt
//! flag by flag (a benchmark adds a variant and a `serve`). The worker's stdout carries
//! lines `KIND REST`; the last is `result JSON`, with what the run measured. Other kinds
//! (progress) go to the caller. The worker's stderr is the parent's, so a failing
//! worker's error reaches the user as is.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// One run a worker process executes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Job {
    Speed(crate::bench::speed::isolate::Job),
    Blobs(crate::bench::blobs::isolate::Job),
    Concurrency(crate::bench::concurrency::isolate::Job),
    Cold(crate::bench::cold::isolate::Job),
}

impl Job {
    /// The job as the worker parses it from its command line (tests).
    #[cfg(test)]
    pub fn round_trip(&self) -> Job {
        let text = serde_json::to_string(self).unwrap();
        let parsed: WorkerArgs = super::parse_flags([JOB_FLAG, text.as_str()]).unwrap();
        parsed.job
    }
}

/// The flag of `bench worker` that carries the job.
const JOB_FLAG: &str = "--job";

/// `bench worker`: internal, started by a benchmark for one run.
#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    /// The run, as JSON.
    #[arg(long = "job", value_name = "JSON", value_parser = parse_job)]
    pub job: Job,
}

fn parse_job(text: &str) -> Result<Job, String> {
    serde_json::from_str(text).map_err(|error| {
        format!("not a job this build understands ({error}); `bench worker` is internal")
    })
}

/// The worker side: runs `job` and reports it on stdout. Dies with its parent, so that
/// a killed parent never leaves a worker writing.
pub fn serve(args: WorkerArgs) -> anyhow::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    match &args.job {
        Job::Speed(job) => crate::bench::speed::isolate::serve(job),
        Job::Blobs(job) => crate::bench::blobs::isolate::serve(job),
        Job::Concurrency(job) => crate::bench::concurrency::isolate::serve(job),
        Job::Cold(job) => crate::bench::cold::isolate::serve(job),
    }
}

/// Runs `job` in a fresh process of `exe` and returns its `result` line, parsed. `on_line(kind, rest)` gets
/// every other line (an error there is a protocol error). `supervise` hears the worker's
/// pid after the spawn and `None` once it has exited; an error it returns then (an
/// interrupted run) takes precedence over the worker's failure, which it explains.
/// `what` names the run in errors.
pub fn run<T: DeserializeOwned>(
    exe: &Path,
    job: &Job,
    what: &str,
    on_line: &mut dyn FnMut(&str, &str) -> anyhow::Result<()>,
    supervise: &dyn Fn(Option<u32>) -> anyhow::Result<()>,
) -> anyhow::Result<T> {
    let mut child = command(exe, job)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting a worker process ({})", exe.display()))?;
    // Only records the pid; its verdict comes after the wait.
    let _ = supervise(Some(child.id()));
    let stdout = child.stdout.take().expect("stdout was piped");
    let mut result = None;
    let mut protocol_error = None;
    for line in BufReader::new(stdout).lines() {
        let line = match line {
            Ok(line) => line,
            Err(error) => {
                protocol_error = Some(anyhow!("reading the worker's output: {error}"));
                break;
            }
        };
        let (kind, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let handled = match kind {
            "result" => serde_json::from_str::<T>(rest)
                .map(|value| result = Some(value))
                .map_err(|error| anyhow!("unreadable worker result: {error}")),
            _ => on_line(kind, rest),
        };
        if let Err(error) = handled {
            protocol_error = Some(error);
        }
    }
    let status = child.wait().context("waiting for the worker process")?;
    supervise(None)?;
    if !status.success() {
        bail!("{what}: its worker process failed ({status}); its error is printed above");
    }
    if let Some(error) = protocol_error {
        return Err(error.context(what.to_string()));
    }
    result.ok_or_else(|| anyhow!("{what}: the worker sent no result"))
}

/// The command line of a worker process of `exe` running `job` (its stdio still to be
/// chosen): for callers that talk to a worker while it runs rather than only reading
/// its result.
pub fn command(exe: &Path, job: &Job) -> anyhow::Result<Command> {
    let job = serde_json::to_string(job).context("serializing a worker's job")?;
    let mut command = Command::new(exe);
    command.args(["bench", "worker", JOB_FLAG, &job]);
    Ok(command)
}

/// An `on_line` for workers that send nothing but their result.
pub fn no_other_lines(kind: &str, rest: &str) -> anyhow::Result<()> {
    bail!(
        "unexpected worker output line {:?}",
        format!("{kind} {rest}")
    )
}

/// The worker side, last thing: the `result` line (one line: JSON has no raw newline).
pub fn send_result(value: &impl Serialize) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "result {}", serde_json::to_string(value)?)?;
    stdout.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_from_another_build_is_refused_clearly() {
        let error = super::super::parse_flags::<WorkerArgs>([JOB_FLAG, r#"{"fourth":{}}"#])
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("--job") && error.contains("not a job this build understands"),
            "{error}"
        );
    }
}
