//! The pipe between a benchmark and the worker processes it runs each measured run in
//! (`--isolation process`, see [`super::options::Isolation`]): both sides of the protocol.
//!
//! The parent re-executes this binary as `bench worker --job JSON`, where JSON is
//! `{"KIND": JOB}`: one job of a benchmark ([`WorkerJob`]), everything the run needs,
//! serialized once with serde rather than rebuilt flag by flag. A benchmark adds a job
//! kind by implementing [`WorkerJob`] and listing [`JobKind::of`] its job where `bench`
//! lists the kinds a worker serves; this module knows no benchmark. The worker's stdout
//! carries lines `KIND REST`; the last is `result JSON`, with what the run measured. Other
//! kinds (progress) go to the caller. The worker's stderr is the parent's, so a failing
//! worker's error reaches the user as is.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A run a worker process executes: what a benchmark sends to `bench worker`. Each
/// benchmark implements it for its own job, and `bench` lists the kinds it serves
/// ([`JobKind::of`]); this module knows none of them.
pub trait WorkerJob: Serialize + DeserializeOwned {
    /// The job's name on the worker's command line: `--job '{"KIND": …}'`.
    const KIND: &'static str;

    /// The worker side: runs the job and reports it on stdout ([`send_result`]).
    fn serve(self) -> anyhow::Result<()>;
}

/// One kind of job a worker process can run: its name, and how to check and run one
/// given as JSON.
#[derive(Clone, Copy)]
pub struct JobKind {
    pub name: &'static str,
    check: fn(&serde_json::Value) -> Result<(), serde_json::Error>,
    serve: fn(serde_json::Value) -> anyhow::Result<()>,
}

impl JobKind {
    /// The kind of `J`'s jobs.
    pub const fn of<J: WorkerJob>() -> JobKind {
        JobKind {
            name: J::KIND,
            check: check_as::<J>,
            serve: serve_as::<J>,
        }
    }
}

fn check_as<J: WorkerJob>(body: &serde_json::Value) -> Result<(), serde_json::Error> {
    J::deserialize(body).map(drop)
}

fn serve_as<J: WorkerJob>(body: serde_json::Value) -> anyhow::Result<()> {
    J::deserialize(body)
        .context("not a job this build understands")?
        .serve()
}

/// One job as the worker receives it: `{"KIND": JOB}`, its kind known and its body
/// readable as that kind's job.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    kind: &'static str,
    body: serde_json::Value,
}

impl Envelope {
    /// `text` (the `--job` value) as a job of one of `kinds`.
    pub fn parse(text: &str, kinds: &[JobKind]) -> Result<Envelope, String> {
        let refuse = |why: String| {
            format!("not a job this build understands ({why}); `bench worker` is internal")
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| refuse(error.to_string()))?;
        let (name, body) = match value {
            serde_json::Value::Object(map) if map.len() == 1 => {
                map.into_iter().next().expect("one entry")
            }
            _ => return Err(refuse("not an object with one kind of job".to_string())),
        };
        let Some(kind) = kinds.iter().find(|kind| kind.name == name) else {
            let known: Vec<String> = kinds.iter().map(|k| format!("`{}`", k.name)).collect();
            return Err(refuse(format!(
                "unknown variant `{name}`, expected one of {}",
                known.join(", ")
            )));
        };
        (kind.check)(&body).map_err(|error| refuse(error.to_string()))?;
        Ok(Envelope {
            kind: kind.name,
            body,
        })
    }

    /// The envelope of `job`.
    pub fn of<J: WorkerJob>(job: &J) -> anyhow::Result<Envelope> {
        Ok(Envelope {
            kind: J::KIND,
            body: serde_json::to_value(job).context("serializing a worker's job")?,
        })
    }

    /// The command-line form, `{"KIND": JOB}`.
    fn to_json(&self) -> String {
        let mut map = serde_json::Map::new();
        map.insert(self.kind.to_string(), self.body.clone());
        serde_json::Value::Object(map).to_string()
    }

    /// The job, as `J` (tests: what a worker would run).
    #[cfg(test)]
    pub fn job<J: WorkerJob>(&self) -> J {
        assert_eq!(
            self.kind,
            J::KIND,
            "a {} job came back as another kind",
            J::KIND
        );
        J::deserialize(&self.body).unwrap()
    }
}

/// The flag of `bench worker` that carries the job.
pub const JOB_FLAG: &str = "--job";

/// The worker side: runs the job of `envelope` with its kind among `kinds`, and reports it
/// on stdout. Dies with its parent, so that a killed parent never leaves a worker writing.
pub fn serve(envelope: Envelope, kinds: &[JobKind]) -> anyhow::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let kind = kinds
        .iter()
        .find(|kind| kind.name == envelope.kind)
        .ok_or_else(|| anyhow!("{JOB_FLAG}: no job kind {}", envelope.kind))?;
    (kind.serve)(envelope.body)
}

/// Runs `job` in a fresh process of `exe` and returns its `result` line, parsed. `on_line(kind, rest)` gets
/// every other line (an error there is a protocol error). `supervise` hears the worker's
/// pid after the spawn and `None` once it has exited; an error it returns then (an
/// interrupted run) takes precedence over the worker's failure, which it explains.
/// `what` names the run in errors.
pub fn run<T: DeserializeOwned>(
    exe: &Path,
    job: &impl WorkerJob,
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
pub fn command(exe: &Path, job: &impl WorkerJob) -> anyhow::Result<Command> {
    let job = Envelope::of(job)?.to_json();
    let mut command = Command::new(exe);
    command.args(["bench", "worker", JOB_FLAG, &job]);
    Ok(command)
}

/// `job` as a worker parses it from its command line (tests).
#[cfg(test)]
pub fn round_trip<J: WorkerJob>(job: &J) -> J {
    let text = Envelope::of(job).unwrap().to_json();
    Envelope::parse(&text, &[JobKind::of::<J>()])
        .unwrap()
        .job::<J>()
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
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Sleep {
        seconds: u32,
    }

    impl WorkerJob for Sleep {
        const KIND: &'static str = "sleep";

        fn serve(self) -> anyhow::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_job_from_another_build_is_refused_clearly() {
        let kinds = [JobKind::of::<Sleep>()];
        for (text, why) in [
            (
                r#"{"fourth":{}}"#,
                "unknown variant `fourth`, expected one of `sleep`",
            ),
            (r#"{"sleep":{"minutes":1}}"#, "missing field `seconds`"),
            (r#"{"sleep":{"seconds":1},"two":{}}"#, "one kind of job"),
            ("sleep", "expected"),
        ] {
            let error = Envelope::parse(text, &kinds).unwrap_err();
            assert!(
                error.contains("not a job this build understands") && error.contains(why),
                "{text}: {error}"
            );
        }
        assert_eq!(round_trip(&Sleep { seconds: 3 }), Sleep { seconds: 3 });
    }
}
