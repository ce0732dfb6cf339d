//! The processes pattern: one writer thread in the measuring process, N readers in other
//! processes sharing its WAL database. Readers alternate between stock `sqlite3`
//! processes (Debian's, on its own libsqlite3 and `unix` VFS: what other tools on the
//! same machine are) and processes of this program reading through the target, as
//! another service using the VFS would.
//!
//! A reader process of this program is a worker (`bench worker`, [`ReaderJob`]): it
//! opens the database, checks one lookup, prints `ready`, waits for `go` on its stdin,
//! reads for the window and sends its latencies as its `result` line. A stock `sqlite3`
//! is driven over its stdin and stdout by a thread here, one lookup at a time (its
//! latency includes the round trip through the pipes, the same for every target).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::cell::{Job, ReaderJob};
use super::workload::{
    self, create, lookup, open, reader_processes, resolve_target, run_role, run_threads, Kind,
    Latencies, Role, Shape, ThreadPlan, PAYLOAD_BYTES,
};
use crate::bench::common::rng::SplitMix64;
use crate::bench::common::settings::JournalMode;
use crate::bench::common::targets::Target;
use crate::bench::common::worker;

/// Index offset of reader processes' random streams (threads use 0..N).
const PROCESS_STREAMS: u64 = 1 << 20;

/// The reader process's side.
pub fn serve_reader(job: &ReaderJob) -> Result<()> {
    let target = resolve_target(&job.target)?;
    let connection = open(&target, &job.database, job.shape.settings(JournalMode::Wal))?;
    let mut rng = job.shape.rng(job.index);
    lookup(&connection, &mut rng, job.shape.rows)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready")?;
    stdout.flush()?;
    drop(stdout);
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    if line.trim_end() != "go" {
        bail!("reader process: expected `go` on stdin, got {line:?}");
    }
    let deadline = Instant::now() + job.shape.duration();
    let latencies = run_role(
        Role::Reader,
        &connection,
        &mut rng,
        job.shape.rows,
        deadline,
    )?;
    worker::send_result(&latencies)
}

/// A child process killed (and reaped) if dropped before it was finished with.
struct Guarded {
    child: Child,
    finished: bool,
}

impl Guarded {
    fn wait(&mut self) -> Result<std::process::ExitStatus> {
        let status = self.child.wait().context("waiting for a reader process")?;
        self.finished = true;
        Ok(status)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn pipes(child: &mut Child) -> (ChildStdin, BufReader<ChildStdout>) {
    (
        child.stdin.take().expect("stdin was piped"),
        BufReader::new(child.stdout.take().expect("stdout was piped")),
    )
}

/// A reader process of this program, started and ready.
struct OurReader {
    process: Guarded,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl OurReader {
    fn start(exe: &Path, job: ReaderJob) -> Result<OurReader> {
        let job = Job::Reader(job);
        let mut child = worker::command(exe, &job)?
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting a reader process ({})", exe.display()))?;
        let (stdin, stdout) = pipes(&mut child);
        let mut reader = OurReader {
            process: Guarded {
                child,
                finished: false,
            },
            stdin,
            stdout,
        };
        let line = reader.line()?;
        if line != "ready" {
            bail!("a reader process said {line:?} instead of `ready`");
        }
        Ok(reader)
    }

    fn line(&mut self) -> Result<String> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            let status = self.process.wait()?;
            bail!("a reader process ended early ({status}); its error is printed above");
        }
        Ok(line.trim_end().to_string())
    }

    fn go(&mut self) -> Result<()> {
        self.stdin
            .write_all(b"go\n")
            .context("starting a reader process's window")
    }

    fn finish(mut self) -> Result<Latencies> {
        let line = self.line()?;
        let latencies = line
            .strip_prefix("result ")
            .ok_or_else(|| anyhow!("a reader process said {line:?} instead of its result"))
            .and_then(|json| {
                serde_json::from_str(json).context("unreadable result of a reader process")
            })?;
        let status = self.process.wait()?;
        if !status.success() {
            bail!("a reader process failed ({status}); its error is printed above");
        }
        Ok(latencies)
    }
}

/// A stock `sqlite3` process with the database open, answering one query at a time.
struct StockReader {
    process: Guarded,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    program: PathBuf,
    /// The query being sent and the answer read: reused, so the loop does not allocate.
    query: String,
    answer: String,
    expected: String,
}

impl StockReader {
    fn start(program: &Path, database: &Path) -> Result<StockReader> {
        let mut child = std::process::Command::new(program)
            .args(["-bail", "-batch", "-noheader", "-list", "-cmd"])
            .arg(format!(".timeout {}", workload::BUSY_TIMEOUT_MS))
            .arg(database)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!(
                    "--sqlite3 {}: cannot start it; install Debian's sqlite3 (apt-get install \
                     sqlite3), point --sqlite3 at a sqlite3 program, or leave processes out of \
                     --patterns",
                    program.display()
                )
            })?;
        let (stdin, stdout) = pipes(&mut child);
        let mut reader = StockReader {
            process: Guarded {
                child,
                finished: false,
            },
            stdin: Some(stdin),
            stdout,
            program: program.to_path_buf(),
            query: String::new(),
            answer: String::new(),
            expected: String::new(),
        };
        reader.query.push_str("SELECT 'ready';\n");
        reader.expected.push_str("ready");
        reader.ask()?;
        Ok(reader)
    }

    /// Sends `self.query` and checks that the answer is `self.expected`.
    fn ask(&mut self) -> Result<()> {
        let stdin = self.stdin.as_mut().expect("open until finish");
        if stdin.write_all(self.query.as_bytes()).is_err() {
            return Err(self.failure("stopped reading its input"));
        }
        self.answer.clear();
        if self.stdout.read_line(&mut self.answer)? == 0 {
            return Err(self.failure("ended without answering"));
        }
        if self.answer.trim_end() != self.expected {
            bail!(
                "stock sqlite3 answered {:?} to {:?} instead of {:?}",
                self.answer.trim_end(),
                self.query.trim_end(),
                self.expected
            );
        }
        Ok(())
    }

    fn lookup(&mut self, rng: &mut SplitMix64, rows: u64) -> Result<()> {
        let id = 1 + rng.below(rows);
        self.query.clear();
        self.expected.clear();
        let _ = writeln!(
            self.query,
            "SELECT id, length(payload) FROM kv WHERE id = {id};"
        );
        let _ = write!(self.expected, "{id}|{PAYLOAD_BYTES}");
        self.ask()
    }

    /// What went wrong, with what the process printed on its stderr.
    fn failure(&mut self, what: &str) -> anyhow::Error {
        drop(self.stdin.take());
        let status = self
            .process
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        let mut stderr = String::new();
        if let Some(mut pipe) = self.process.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        anyhow!(
            "stock sqlite3 ({}) {what} ({status}): {}",
            self.program.display(),
            stderr.trim()
        )
    }

    /// Closes its input, and checks that it exits cleanly with nothing on stderr.
    fn finish(mut self) -> Result<()> {
        drop(self.stdin.take());
        let mut stderr = String::new();
        if let Some(mut pipe) = self.process.child.stderr.take() {
            pipe.read_to_string(&mut stderr)?;
        }
        let status = self.process.wait()?;
        if !status.success() || !stderr.trim().is_empty() {
            bail!(
                "stock sqlite3 ({}) failed ({status}): {}",
                self.program.display(),
                stderr.trim()
            );
        }
        Ok(())
    }

    /// Lookups until `deadline`, then the one in flight.
    fn read_until(&mut self, shape: &Shape, index: u64, deadline: Instant) -> Result<Latencies> {
        let mut latencies = Latencies::for_kinds(&[Kind::Sqlite3Lookup]);
        let mut rng = shape.rng(index);
        loop {
            let started = Instant::now();
            if started >= deadline {
                return Ok(latencies);
            }
            crate::bench::common::signals::check_interrupted()?;
            self.lookup(&mut rng, shape.rows)?;
            latencies.record(Kind::Sqlite3Lookup, started.elapsed().as_nanos() as u64);
        }
    }
}

/// One run of the processes pattern with `threads` reader processes, in `run_dir`.
pub fn run(
    target: &Target,
    target_name: &str,
    shape: &Shape,
    run_dir: &Path,
    threads: u32,
    sqlite3: &Path,
) -> Result<workload::CellOutcome> {
    let database = run_dir.join("shared.db");
    create(
        target,
        &database,
        shape.settings(JournalMode::Wal),
        shape.rows,
    )?;
    let (stock, ours) = reader_processes(threads);
    let mut stock_readers = (0..stock)
        .map(|_| StockReader::start(sqlite3, &database))
        .collect::<Result<Vec<_>>>()?;
    let mut our_readers = Vec::new();
    if ours > 0 {
        let exe = std::env::current_exe()
            .context("cannot find this program's path to start reader processes")?;
        for index in 0..ours {
            our_readers.push(OurReader::start(
                &exe,
                ReaderJob {
                    target: target_name.to_string(),
                    database: database.clone(),
                    shape: shape.clone(),
                    index: PROCESS_STREAMS + u64::from(index),
                },
            )?);
        }
    }
    let writer = [ThreadPlan {
        role: Role::Writer,
        database: database.clone(),
        journal: JournalMode::Wal,
    }];
    run_threads(target, shape, &writer, move |deadline| {
        for reader in &mut our_readers {
            reader.go()?;
        }
        let mut all = std::thread::scope(|scope| -> Result<Latencies> {
            let drivers: Vec<_> = stock_readers
                .iter_mut()
                .enumerate()
                .map(|(index, reader)| {
                    let stream = 2 * PROCESS_STREAMS + index as u64;
                    scope.spawn(move || reader.read_until(shape, stream, deadline))
                })
                .collect();
            let mut all = Latencies::default();
            for driver in drivers {
                all.merge(
                    driver
                        .join()
                        .map_err(|_| anyhow!("a sqlite3 driver thread panicked"))??,
                );
            }
            Ok(all)
        })?;
        let end = Instant::now();
        for reader in our_readers {
            all.merge(reader.finish()?);
        }
        for reader in stock_readers {
            reader.finish()?;
        }
        Ok((all, end))
    })
}
