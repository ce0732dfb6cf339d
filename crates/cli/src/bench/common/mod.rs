//! What every benchmark builds on, and nothing benchmark-specific: the flags they share,
//! the SQLite targets with their settings and databases, the VFS counters, the worker
//! protocol, the interleaved rounds, paired statistics and verdicts, the result files,
//! and the page cache, signals, process usage and random numbers of a run. No module
//! here imports a benchmark (docs/ARCHITECTURE.md, "Module map").

pub mod checksum;
pub mod counts;
pub mod database;
pub mod export;
pub mod options;
pub mod pagecache;
pub mod paired;
pub mod process_usage;
pub mod rng;
pub mod rounds;
pub mod settings;
pub mod signals;
pub mod targets;
pub mod verdict;
pub mod worker;
