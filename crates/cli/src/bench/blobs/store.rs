//! Where the blobs go: targets, and the small [`BlobStore`] trait every backend implements
//! (SQLite through a VFS, or DuckDB when built with the `duckdb` feature).
//!
//! The schema and statements are EZFS's: `files(file TEXT PRIMARY KEY, content BLOB)`,
//! an upsert to write, a point `SELECT` to read.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::ValueEnum;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::Serialize;

/// A storage target on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize)]
pub enum Target {
    /// SQLite `:memory:` database: no file, no VFS, no fsync.
    #[value(name = "memory")]
    #[serde(rename = "memory")]
    Memory,
    /// SQLite's built-in `unix` VFS (the baseline).
    #[value(name = "unix")]
    #[serde(rename = "unix")]
    Unix,
    /// This project's VFS, I/O through io_uring.
    #[value(name = "io_uring")]
    #[serde(rename = "io_uring")]
    IoUring,
    /// This project's VFS with plain syscalls (VFS `io_uring_sync`): separates the cost of
    /// the VFS code from the cost of the ring.
    #[value(name = "sync")]
    #[serde(rename = "sync")]
    Sync,
    /// DuckDB database file (needs a build with `--features duckdb`).
    #[value(name = "duckdb")]
    #[serde(rename = "duckdb")]
    Duckdb,
    /// DuckDB in-memory database (needs a build with `--features duckdb`).
    #[value(name = "duckdb-memory")]
    #[serde(rename = "duckdb-memory")]
    DuckdbMemory,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Memory => "memory",
            Target::Unix => "unix",
            Target::IoUring => "io_uring",
            Target::Sync => "sync",
            Target::Duckdb => "duckdb",
            Target::DuckdbMemory => "duckdb-memory",
        }
    }

    /// Whether the case writes files under `--dir` (and needs room there).
    pub fn on_disk(self) -> bool {
        !matches!(self, Target::Memory | Target::DuckdbMemory)
    }

    /// Whether `--journal` applies (SQLite on a file).
    pub fn has_journal(self) -> bool {
        matches!(self, Target::Unix | Target::IoUring | Target::Sync)
    }

    pub fn is_duckdb(self) -> bool {
        matches!(self, Target::Duckdb | Target::DuckdbMemory)
    }

    /// The SQLite VFS name to open files with.
    fn vfs_name(self) -> Option<&'static str> {
        match self {
            Target::Unix => Some("unix"),
            Target::IoUring => Some("io_uring"),
            Target::Sync => Some("io_uring_sync"),
            _ => None,
        }
    }

    /// VFS whose I/O counters [`sqlite_uring::vfs_stats`] can report.
    pub fn stats_vfs(self) -> Option<&'static str> {
        match self {
            Target::IoUring | Target::Sync => self.vfs_name(),
            _ => None,
        }
    }
}

/// SQLite journal mode of on-disk SQLite targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Journal {
    /// Rollback journal, deleted at each commit (SQLite's default).
    Delete,
    /// Write-ahead log.
    Wal,
}

impl Journal {
    pub fn name(self) -> &'static str {
        match self {
            Journal::Delete => "delete",
            Journal::Wal => "wal",
        }
    }
}

/// The operations a benchmark case needs from a storage backend.
pub trait BlobStore {
    fn begin(&mut self) -> anyhow::Result<()>;
    /// Write (insert or replace) one file; part of the open transaction.
    fn put(&mut self, key: &str, stored: &[u8]) -> anyhow::Result<()>;
    fn commit(&mut self) -> anyhow::Result<()>;
    /// The stored bytes of one file, `None` if it does not exist.
    fn get(&mut self, key: &str) -> anyhow::Result<Option<Vec<u8>>>;
    /// Number of files stored.
    fn count(&mut self) -> anyhow::Result<u64>;
    /// Between the write and the read phases (not timed): brings the store to one layout
    /// whatever the write phase's time box left behind. Default: nothing to do.
    fn settle(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

const UPSERT: &str = "INSERT INTO files(file, content) VALUES (?1, ?2) \
                      ON CONFLICT(file) DO UPDATE SET content = excluded.content";
const SELECT: &str = "SELECT content FROM files WHERE file = ?1";
const CREATE: &str = "CREATE TABLE IF NOT EXISTS files(file TEXT PRIMARY KEY, content BLOB)";

/// SQLite through one VFS (or `:memory:`).
pub struct SqliteStore {
    conn: Connection,
}

impl SqliteStore {
    /// Opens (creating) the database of a case. `path` is ignored for `memory`.
    pub fn open(target: Target, journal: Journal, path: &Path) -> anyhow::Result<SqliteStore> {
        let conn = match target.vfs_name() {
            None => Connection::open_in_memory().context("opening an SQLite :memory: database")?,
            Some(vfs) => {
                ensure_registered(target)?;
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags_and_vfs(path, flags, vfs)
                    .with_context(|| format!("opening {} with the {vfs} VFS", path.display()))?;
                let mode: String = conn
                    .query_row(
                        &format!("PRAGMA journal_mode={}", journal.name()),
                        [],
                        |r| r.get(0),
                    )
                    .with_context(|| format!("setting journal_mode={}", journal.name()))?;
                if !mode.eq_ignore_ascii_case(journal.name()) {
                    bail!(
                        "{}: SQLite kept journal_mode={mode} when asked for {} (does the {vfs} \
                         VFS support shared memory for WAL?)",
                        path.display(),
                        journal.name()
                    );
                }
                // FULL is SQLite's default; set it so a changed default cannot make the
                // commits cheaper without anybody noticing.
                conn.execute_batch("PRAGMA synchronous=FULL")?;
                conn
            }
        };
        conn.execute_batch(CREATE).context("creating table files")?;
        Ok(SqliteStore { conn })
    }
}

impl BlobStore for SqliteStore {
    fn begin(&mut self) -> anyhow::Result<()> {
        self.conn.execute_batch("BEGIN")?;
        Ok(())
    }

    fn put(&mut self, key: &str, stored: &[u8]) -> anyhow::Result<()> {
        self.conn
            .prepare_cached(UPSERT)?
            .execute(rusqlite::params![key, stored])?;
        Ok(())
    }

    fn commit(&mut self) -> anyhow::Result<()> {
        self.conn.execute_batch("COMMIT")?;
        Ok(())
    }

    fn get(&mut self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self
            .conn
            .prepare_cached(SELECT)?
            .query_row([key], |row| row.get::<_, Vec<u8>>(0))
            .optional()?)
    }

    fn count(&mut self) -> anyhow::Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM files", [], |r| r.get::<_, i64>(0))? as u64)
    }

    /// In WAL mode, copies every frame into the database and empties the WAL. Without
    /// it the read phases compare different layouts: a SELECT of a page that is in the
    /// WAL goes through SQLite's page cache (`sqlite3PagerDirectReadOk` refuses WAL
    /// pages), and how many files the last commit left there depends on where each
    /// target's time box ended — `unix` and `io_uring` read 2 MB blobs at rates 2×
    /// apart for that reason alone (docs/BENCH_BLOBS.md, "Session 4"). A no-op in
    /// rollback mode and in memory.
    fn settle(&mut self) -> anyhow::Result<()> {
        let (busy, wal_frames, checkpointed): (i64, i64, i64) =
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?;
        if busy != 0 || wal_frames != checkpointed {
            bail!(
                "the checkpoint before the read phases did not complete \
                 ({checkpointed} of {wal_frames} WAL frames copied)"
            );
        }
        Ok(())
    }
}

/// Opens the store of one case.
pub fn open_store(
    target: Target,
    journal: Journal,
    path: &Path,
) -> anyhow::Result<Box<dyn BlobStore>> {
    if target.is_duckdb() {
        return open_duckdb(target, path);
    }
    Ok(Box::new(SqliteStore::open(target, journal, path)?))
}

#[cfg(any(feature = "duckdb", feature = "duckdb-system"))]
fn open_duckdb(target: Target, path: &Path) -> anyhow::Result<Box<dyn BlobStore>> {
    let memory = target == Target::DuckdbMemory;
    Ok(Box::new(super::duck::DuckStore::open(if memory {
        None
    } else {
        Some(path)
    })?))
}

#[cfg(not(any(feature = "duckdb", feature = "duckdb-system")))]
fn open_duckdb(target: Target, _path: &Path) -> anyhow::Result<Box<dyn BlobStore>> {
    Err(duckdb_missing(target))
}

/// Whether this binary has the DuckDB backend.
pub const DUCKDB_BUILT: bool = cfg!(any(feature = "duckdb", feature = "duckdb-system"));

fn duckdb_missing(target: Target) -> anyhow::Error {
    anyhow!(
        "--targets {}: this binary was built without DuckDB; rebuild with \
         `cargo build --release -p sqlite-uring-cli --features duckdb` (compiles DuckDB from \
         source, about 45 minutes on 2 cores) or drop it from --targets",
        target.name()
    )
}

/// Files a case's database may leave behind: SQLite's journal, WAL and shared-memory
/// files and DuckDB's WAL, all removed after the case and on interruption.
pub fn database_files(target: Target, path: &Path) -> Vec<PathBuf> {
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    if target.is_duckdb() {
        vec![path.to_path_buf(), with(".wal"), with(".tmp")]
    } else {
        vec![
            path.to_path_buf(),
            with("-journal"),
            with("-wal"),
            with("-shm"),
        ]
    }
}

/// Registers the VFS a target needs, once per process (shared with `bench speed`, so both
/// benchmarks measure identically configured VFSes), and says clearly when it cannot.
pub fn ensure_registered(target: Target) -> anyhow::Result<()> {
    let vfs = match target {
        Target::IoUring => crate::bench::speed::targets::IO_URING_VFS,
        Target::Sync => crate::bench::speed::targets::SYNC_VFS,
        Target::Duckdb | Target::DuckdbMemory if !DUCKDB_BUILT => {
            return Err(duckdb_missing(target))
        }
        _ => return Ok(()),
    };
    match crate::bench::speed::targets::library_vfs(vfs) {
        Ok(_) => Ok(()),
        Err(why) => bail!(
            "--targets {}: the VFS cannot be registered here: {why}; run `sqlite-uring probe` \
             to see why, or drop {} from --targets (e.g. --targets memory,unix)",
            target.name(),
            target.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_store_round_trips_on_memory_and_unix() {
        let dir = tempfile::tempdir().unwrap();
        for (target, journal) in [
            (Target::Memory, Journal::Delete),
            (Target::Unix, Journal::Delete),
            (Target::Unix, Journal::Wal),
        ] {
            let path = dir
                .path()
                .join(format!("{}-{}.db", target.name(), journal.name()));
            let mut store = open_store(target, journal, &path).unwrap();
            store.begin().unwrap();
            store.put("a", b"one").unwrap();
            store.put("b", b"two").unwrap();
            store.put("a", b"uno").unwrap();
            store.commit().unwrap();
            assert_eq!(store.get("a").unwrap().as_deref(), Some(&b"uno"[..]));
            assert_eq!(store.get("zzz").unwrap(), None);
            assert_eq!(store.count().unwrap(), 2);
            store.settle().unwrap();
            assert_eq!(store.get("b").unwrap().as_deref(), Some(&b"two"[..]));
        }
    }

    /// After `settle` a WAL database holds everything in its main file: the read phases
    /// start from the same layout whatever the write phase left in the WAL.
    #[test]
    fn settle_empties_the_wal_into_the_database() {
        let dir = tempfile::tempdir().unwrap();
        for target in [Target::Unix, Target::IoUring] {
            let path = dir.path().join(format!("{}.db", target.name()));
            let wal = dir.path().join(format!("{}.db-wal", target.name()));
            let mut store = open_store(target, Journal::Wal, &path).unwrap();
            store.begin().unwrap();
            for i in 0..20 {
                store.put(&format!("f{i}"), &vec![i as u8; 10_000]).unwrap();
            }
            store.commit().unwrap();
            assert!(std::fs::metadata(&wal).unwrap().len() > 0);
            store.settle().unwrap();
            assert_eq!(
                std::fs::metadata(&wal).unwrap().len(),
                0,
                "{}",
                target.name()
            );
            assert_eq!(store.count().unwrap(), 20);
            assert_eq!(store.get("f7").unwrap(), Some(vec![7u8; 10_000]));
        }
    }

    #[test]
    fn database_files_include_journals() {
        let files = database_files(Target::Unix, Path::new("/d/x.db"));
        let names: Vec<_> = files.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            ["/d/x.db", "/d/x.db-journal", "/d/x.db-wal", "/d/x.db-shm"]
        );
    }
}
