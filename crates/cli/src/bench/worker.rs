//! The pipe between a benchmark and the worker processes it runs each measured run in
//! (`--isolation process`, see [`super::Isolation`]): both sides of the protocol.
//!
//! The parent re-executes this binary with one run's flags. The worker's stdout carries
//! lines `KIND REST`; the last is `result JSON`, with what the run measured. Other kinds
//! (progress) go to the caller. The worker's stderr is the parent's, so a failing
//! worker's error reaches the user as is.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Runs `exe args` and returns its `result` line, parsed. `on_line(kind, rest)` gets
/// every other line (an error there is a protocol error). `supervise` hears the worker's
/// pid after the spawn and `None` once it has exited; an error it returns then (an
/// interrupted run) takes precedence over the worker's failure, which it explains.
/// `what` names the run in errors.
pub fn run<T: DeserializeOwned>(
    exe: &Path,
    args: &[String],
    what: &str,
    on_line: &mut dyn FnMut(&str, &str) -> anyhow::Result<()>,
    supervise: &dyn Fn(Option<u32>) -> anyhow::Result<()>,
) -> anyhow::Result<T> {
    let mut child = Command::new(exe)
        .args(args)
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

/// An `on_line` for workers that send nothing but their result.
pub fn no_other_lines(kind: &str, rest: &str) -> anyhow::Result<()> {
    bail!(
        "unexpected worker output line {:?}",
        format!("{kind} {rest}")
    )
}

/// The worker side, first thing: die with the parent, so that a killed parent never
/// leaves a worker writing.
pub fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
}

/// The worker side, last thing: the `result` line (one line: JSON has no raw newline).
pub fn send_result(value: &impl Serialize) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "result {}", serde_json::to_string(value)?)?;
    stdout.flush()?;
    Ok(())
}
