//! `sqlite-uring bench …`

use clap::Subcommand;

mod blobs;
mod io;
pub mod speed;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// The 16 classic SQLite speed tests over memory / unix / io_uring and rollback / WAL.
    Speed(Box<speed::SpeedArgs>),
    /// IO models: 1 GiB in 4 KiB writes through blocking write, pwrite threads, io_uring.
    Io(Box<io::IoArgs>),
    /// Files stored in SQLite: blob sizes, commit batching, zstd, backends.
    Blobs(Box<blobs::BlobsArgs>),
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Speed(args) => speed::run(*args),
        BenchCommand::Io(args) => io::run(*args),
        BenchCommand::Blobs(args) => blobs::run(*args),
    }
}
