//! `sqlite-uring`: probe io_uring and benchmark SQLite storage honestly.

use clap::{Parser, Subcommand};

mod bench;
mod counting_vfs;
mod probe_cmd;
mod report;
mod trace_file;

#[derive(Parser)]
#[command(
    name = "sqlite-uring",
    version,
    about = "io_uring VFS for SQLite: probe and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Say whether io_uring works here, why not if not, and which ring features the VFS uses.
    Probe {
        /// Also probe this directory's filesystem: whether ring writes and fsyncs complete
        /// inline or on io-wq worker threads there, and how the VFS routes a database there.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
    /// Benchmarks: `speed` (SQLite's 16 speed tests), `io` (IO models), `blobs` (files in SQLite),
    /// `concurrency` (threads and processes sharing databases), `cold` (reads of a database
    /// whose pages are not cached).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe { dir } => probe_cmd::run(dir.as_deref()),
        Command::Bench(command) => bench::run(command),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
