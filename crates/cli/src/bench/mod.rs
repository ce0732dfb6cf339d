//! `sqlite-uring bench …`

use clap::{Subcommand, ValueEnum};

mod blobs;
mod cold;
pub(crate) mod concurrency;
mod export;
mod io;
mod options;
mod pagecache;
mod process_usage;
mod rng;
mod signals;
pub mod speed;
pub mod targets;
mod worker;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// The 16 classic SQLite speed tests over memory / unix / io_uring and rollback / WAL.
    Speed(Box<speed::SpeedArgs>),
    /// IO models: 1 GiB in 4 KiB writes through blocking write, pwrite threads, io_uring.
    Io(Box<io::IoArgs>),
    /// Files stored in SQLite: blob sizes, commit batching, zstd, backends.
    Blobs(Box<blobs::BlobsArgs>),
    /// Connection pools and many databases: reader threads beside a WAL writer, one
    /// database per thread, readers in other processes (stock sqlite3 among them).
    Concurrency(Box<concurrency::ConcurrencyArgs>),
    /// Reads of a database several times larger than SQLite's page cache, with its pages
    /// evicted from the OS page cache (cold) or cached (hot): scans, an index range,
    /// CREATE INDEX, integrity_check, VACUUM INTO, point lookups; time and bytes read
    /// from the device.
    Cold(Box<cold::ColdArgs>),
    /// Internal: one measured run, in a fresh process, for `speed`, `blobs`,
    /// `concurrency` and `cold`.
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
}

/// Where the measured runs of `bench speed` and `bench blobs` execute.
///
/// A fresh process per run is the default because the state of a process changes what
/// it measures, beyond what rotating the order of targets can spread: allocator history
/// (BENCH_BLOBS.md, "Position in the process"), and threads. A run that handed work to
/// io-wq leaves a kernel worker thread in the process until it exits, and a second
/// thread makes every later file-descriptor system call dearer and, measured here, WAL
/// commits 20–40 % slower — for every target measured after it in that process
/// (ARCHITECTURE.md, "Threads the ring adds").
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Isolation {
    /// A fresh process of this binary per run (as hyperfine runs each command).
    Process,
    /// Every run in this process, one after the other.
    None,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Process => "process",
            Isolation::None => "none",
        }
    }

    /// `--isolation` as given, or its default: `process`, except with `--trace`, whose
    /// file one process writes.
    pub fn resolve(given: Option<Isolation>, tracing: bool) -> anyhow::Result<Isolation> {
        match (given, tracing) {
            (Some(Isolation::Process), true) => anyhow::bail!(
                "--trace with --isolation process: the trace file is written by one process; \
                 use --isolation none (the default with --trace)"
            ),
            (Some(isolation), _) => Ok(isolation),
            (None, true) => Ok(Isolation::None),
            (None, false) => Ok(Isolation::Process),
        }
    }

    /// The binary to re-execute for `Process`, resolved before any run.
    pub fn worker_exe(self) -> anyhow::Result<Option<std::path::PathBuf>> {
        use anyhow::Context;
        match self {
            Isolation::Process => std::env::current_exe()
                .context(
                    "--isolation process: cannot find this program's path to re-run it; \
                     use --isolation none",
                )
                .map(Some),
            Isolation::None => Ok(None),
        }
    }
}

/// A benchmark's flags (without the subcommand words) parsed as the command line is, for
/// the tests of its parts.
#[cfg(test)]
pub(crate) fn parse_flags<'a, T: clap::Args>(
    words: impl IntoIterator<Item = &'a str>,
) -> Result<T, clap::Error> {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli<T: clap::Args> {
        #[command(flatten)]
        args: T,
    }
    Cli::<T>::try_parse_from(std::iter::once("bench").chain(words)).map(|cli| cli.args)
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Speed(args) => speed::run(*args),
        BenchCommand::Io(args) => io::run(*args),
        BenchCommand::Blobs(args) => blobs::run(*args),
        BenchCommand::Concurrency(args) => concurrency::run(*args),
        BenchCommand::Cold(args) => cold::run(*args),
        BenchCommand::Worker(args) => worker::serve(args),
    }
}
