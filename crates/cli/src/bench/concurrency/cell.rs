//! What `bench concurrency` measures, cell by cell: a [`Cell`] of the results, and the
//! jobs of the worker processes that measure it (`bench worker`,
//! bench/common/worker.rs): one measured run of a cell on a target, or one reader
//! process of the processes pattern.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::workload::{Pattern, Shape};
use crate::bench::common::settings::JournalMode;

/// One line of results: a pattern with its N and journal mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub pattern: Pattern,
    pub journal: JournalMode,
    pub threads: u32,
}

impl Cell {
    pub fn title(&self) -> String {
        format!(
            "{} ({}), N = {}: {}",
            self.pattern.name(),
            self.journal.name(),
            self.threads,
            self.pattern.describe(self.threads, self.journal)
        )
    }
}

/// What a `bench worker` process of `bench concurrency` does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Job {
    /// One measured run.
    Run(RunJob),
    /// One reader process of the processes pattern.
    Reader(ReaderJob),
}

/// One measured run: a pattern with N, on one target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunJob {
    pub pattern: Pattern,
    /// Of the databases pattern; the others are WAL.
    pub journal: JournalMode,
    pub threads: u32,
    /// The `--targets` name (URI parameters included).
    pub target: String,
    pub shape: Shape,
    /// A directory the run creates for its databases and removes again.
    pub dir: PathBuf,
    /// The stock `sqlite3` program of the processes pattern.
    pub sqlite3: PathBuf,
}

impl RunJob {
    /// The run, in error messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, N = {}) on {}",
            self.pattern.name(),
            self.journal.name(),
            self.threads,
            self.target
        )
    }
}

/// One reader process of this program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReaderJob {
    /// The `--targets` name it reads through.
    pub target: String,
    pub database: PathBuf,
    pub shape: Shape,
    /// Which random stream it uses.
    pub index: u64,
}
