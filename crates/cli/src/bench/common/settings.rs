//! The durability settings every file target gets, identically: the journal mode and
//! `PRAGMA synchronous`.

use serde::{Deserialize, Serialize};

/// Journal modes a file target can be measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    Delete,
    Truncate,
    Persist,
    Wal,
}

impl JournalMode {
    pub fn name(self) -> &'static str {
        match self {
            JournalMode::Delete => "delete",
            JournalMode::Truncate => "truncate",
            JournalMode::Persist => "persist",
            JournalMode::Wal => "wal",
        }
    }
}

/// `PRAGMA synchronous` levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    Off,
    Normal,
    Full,
    Extra,
}

impl Synchronous {
    pub fn name(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
            Synchronous::Extra => "EXTRA",
        }
    }

    /// What `PRAGMA synchronous` reads back.
    pub fn level(self) -> i64 {
        match self {
            Synchronous::Off => 0,
            Synchronous::Normal => 1,
            Synchronous::Full => 2,
            Synchronous::Extra => 3,
        }
    }
}

/// The settings every file target gets, identically.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub journal: JournalMode,
    pub synchronous: Synchronous,
}
