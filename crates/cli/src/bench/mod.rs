//! `sqlite-uring bench …`

use clap::Subcommand;

use common::worker;

mod blobs;
mod cold;
pub(crate) mod common;
mod concurrency;
mod io;
mod speed;

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
    Worker(WorkerArgs),
}

/// The jobs a `bench worker` process runs: one kind per benchmark that runs in workers.
const WORKER_JOBS: [worker::JobKind; 4] = [
    speed::WORKER_JOB,
    blobs::WORKER_JOB,
    concurrency::WORKER_JOB,
    cold::WORKER_JOB,
];

/// `bench worker`: internal, started by a benchmark for one run.
#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    /// The run, as JSON.
    #[arg(long = "job", value_name = "JSON", value_parser = parse_job)]
    pub job: worker::Envelope,
}

fn parse_job(text: &str) -> Result<worker::Envelope, String> {
    worker::Envelope::parse(text, &WORKER_JOBS)
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Speed(args) => speed::run(*args),
        BenchCommand::Io(args) => io::run(*args),
        BenchCommand::Blobs(args) => blobs::run(*args),
        BenchCommand::Concurrency(args) => concurrency::run(*args),
        BenchCommand::Cold(args) => cold::run(*args),
        BenchCommand::Worker(args) => worker::serve(args.job, &WORKER_JOBS),
    }
}

#[cfg(test)]
mod tests {
    use super::common::options::parse_flags;
    use super::*;

    #[test]
    fn a_job_from_another_build_is_refused_clearly() {
        let error = parse_flags::<WorkerArgs>([worker::JOB_FLAG, r#"{"fourth":{}}"#])
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("--job") && error.contains("not a job this build understands"),
            "{error}"
        );
        assert!(
            error.contains("expected one of `speed`, `blobs`, `concurrency`, `cold`"),
            "{error}"
        );
    }
}
