//! Where the blobs go: targets, SQLite's [`BlobStore`] (through a VFS), and the opening of
//! a case's store (SQLite, or DuckDB when built with the `duckdb` feature).
//!
//! The schema and statements are EZFS's: `files(file TEXT PRIMARY KEY, content BLOB)`,
//! an upsert to write, a point `SELECT` to read.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::ValueEnum;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::backend::BlobStore;
use crate::bench::common::database::companion;

/// The backend of a storage target (its name on the command line: [`Target::PLAIN`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    /// SQLite `:memory:` database: no file, no VFS, no fsync.
    Memory,
    /// SQLite's built-in `unix` VFS (the baseline).
    Unix,
    /// This project's VFS, I/O through io_uring.
    IoUring,
    /// This project's VFS with plain syscalls (VFS `io_uring_sync`): separates the cost of
    /// the VFS code from the cost of the ring.
    Sync,
    /// DuckDB database file (needs a build with `--features duckdb`).
    Duckdb,
    /// DuckDB in-memory database (needs a build with `--features duckdb`).
    DuckdbMemory,
}

/// A storage target on the command line: a backend and, for this project's VFS, the
/// `uring_*` URI parameters its databases are opened with (`io_uring?uring_direct=on`),
/// so every URI choice of the VFS can be measured against the default in one run, as
/// `bench speed` allows. The strings live for the whole run (parsed once from the command
/// line, and leaked), which keeps the target `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    pub kind: TargetKind,
    /// What the user typed and the tables show.
    label: &'static str,
    uri_parameters: Option<&'static str>,
}

impl Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.label)
    }
}

/// A target crosses to a worker as its command-line name and is parsed again there.
impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Target::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Target {
    pub const MEMORY: Target = Target::plain(TargetKind::Memory, "memory");
    pub const UNIX: Target = Target::plain(TargetKind::Unix, "unix");
    pub const IO_URING: Target = Target::plain(TargetKind::IoUring, "io_uring");
    pub const SYNC: Target = Target::plain(TargetKind::Sync, "sync");
    pub const DUCKDB: Target = Target::plain(TargetKind::Duckdb, "duckdb");
    pub const DUCKDB_MEMORY: Target = Target::plain(TargetKind::DuckdbMemory, "duckdb-memory");
    /// Every backend under its command-line name.
    const PLAIN: [Target; 6] = [
        Target::MEMORY,
        Target::UNIX,
        Target::IO_URING,
        Target::SYNC,
        Target::DUCKDB,
        Target::DUCKDB_MEMORY,
    ];

    const fn plain(kind: TargetKind, label: &'static str) -> Target {
        Target {
            kind,
            label,
            uri_parameters: None,
        }
    }

    /// Parses one `--targets` entry: a backend name, or `io_uring`/`sync` followed by
    /// `?uring_KEY=VALUE&…` (the VFS rejects unknown keys and values when it opens the
    /// database, naming them).
    pub fn parse(text: &str) -> Result<Target, String> {
        let (base, parameters) = match text.split_once('?') {
            Some((base, parameters)) => (base, Some(parameters)),
            None => (text, None),
        };
        let plain = Target::PLAIN
            .into_iter()
            .find(|target| target.label == base)
            .ok_or_else(|| {
                format!(
                    "unknown target {base:?}: use memory, unix, io_uring, sync, duckdb or \
                     duckdb-memory, optionally io_uring?uring_KEY=VALUE&…"
                )
            })?;
        let Some(parameters) = parameters else {
            return Ok(plain);
        };
        let kind = plain.kind;
        if !matches!(kind, TargetKind::IoUring | TargetKind::Sync) {
            return Err(format!(
                "{text}: URI parameters are for this project's VFS targets (io_uring, sync), \
                 not {base}"
            ));
        }
        crate::bench::common::targets::checked_uri_parameters(text, base, parameters)
            .map_err(|error| error.to_string())?;
        Ok(Target {
            kind,
            label: Box::leak(text.to_owned().into_boxed_str()),
            uri_parameters: Some(Box::leak(parameters.to_owned().into_boxed_str())),
        })
    }

    pub fn name(self) -> &'static str {
        self.label
    }

    /// The name as a piece of a file name (URI parameters make it `io_uring_uring_direct_on`).
    pub fn file_stem(self) -> String {
        self.label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Whether the case writes files under `--dir` (and needs room there).
    pub fn on_disk(self) -> bool {
        !matches!(self.kind, TargetKind::Memory | TargetKind::DuckdbMemory)
    }

    /// Whether `--journal` applies (SQLite on a file).
    pub fn has_journal(self) -> bool {
        matches!(
            self.kind,
            TargetKind::Unix | TargetKind::IoUring | TargetKind::Sync
        )
    }

    pub fn is_duckdb(self) -> bool {
        matches!(self.kind, TargetKind::Duckdb | TargetKind::DuckdbMemory)
    }

    /// The SQLite VFS name to open files with.
    fn vfs_name(self) -> Option<&'static str> {
        match self.kind {
            TargetKind::Unix => Some("unix"),
            TargetKind::IoUring => Some("io_uring"),
            TargetKind::Sync => Some("io_uring_sync"),
            _ => None,
        }
    }

    /// VFS whose I/O counters [`sqlite_uring::vfs_stats`] can report (targets of one VFS
    /// share them; they are reset for each run).
    pub fn stats_vfs(self) -> Option<&'static str> {
        match self.kind {
            TargetKind::IoUring | TargetKind::Sync => self.vfs_name(),
            _ => None,
        }
    }
}

/// SQLite journal mode of on-disk SQLite targets.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize, Deserialize,
)]
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
                let opened = match target.uri_parameters {
                    None => Connection::open_with_flags_and_vfs(path, flags, vfs),
                    Some(parameters) => Connection::open_with_flags_and_vfs(
                        crate::bench::common::targets::uri_filename(path, parameters),
                        flags | OpenFlags::SQLITE_OPEN_URI,
                        vfs,
                    ),
                };
                let conn = opened.with_context(|| {
                    format!(
                        "opening {} with the {vfs} VFS (target {})",
                        path.display(),
                        target.name()
                    )
                })?;
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
    /// apart for that reason alone (docs/BENCH_BLOBS.md, "What one case does"). A no-op in
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
    let memory = target.kind == TargetKind::DuckdbMemory;
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
    let with = |suffix: &str| companion(path, suffix);
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
    let vfs = match target.kind {
        TargetKind::IoUring => crate::bench::common::targets::IO_URING_VFS,
        TargetKind::Sync => crate::bench::common::targets::SYNC_VFS,
        TargetKind::Duckdb | TargetKind::DuckdbMemory if !DUCKDB_BUILT => {
            return Err(duckdb_missing(target))
        }
        _ => return Ok(()),
    };
    match crate::bench::common::targets::library_vfs(vfs) {
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
            (Target::MEMORY, Journal::Delete),
            (Target::UNIX, Journal::Delete),
            (Target::UNIX, Journal::Wal),
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
        for target in [Target::UNIX, Target::IO_URING] {
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
        let files = database_files(Target::UNIX, Path::new("/d/x.db"));
        let names: Vec<_> = files.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            ["/d/x.db", "/d/x.db-journal", "/d/x.db-wal", "/d/x.db-shm"]
        );
    }

    /// `--targets` entries: plain names, our VFS with URI parameters, and errors that
    /// name the entry.
    #[test]
    fn targets_parse_with_and_without_uri_parameters() {
        assert_eq!(Target::parse("unix"), Ok(Target::UNIX));
        assert_eq!(Target::parse("duckdb-memory"), Ok(Target::DUCKDB_MEMORY));
        let ours = Target::parse("io_uring?uring_write_behind=off&uring_syncs=ring").unwrap();
        assert_eq!(ours.kind, TargetKind::IoUring);
        assert_eq!(
            ours.name(),
            "io_uring?uring_write_behind=off&uring_syncs=ring"
        );
        assert_eq!(
            ours.file_stem(),
            "io_uring_uring_write_behind_off_uring_syncs_ring"
        );
        assert_eq!(ours.stats_vfs(), Some("io_uring"));
        assert_ne!(ours, Target::IO_URING);
        assert_eq!(
            Target::parse("sync?uring_sync=fdatasync").unwrap().kind,
            TargetKind::Sync
        );
        for (bad, wanted) in [
            ("floppy", "unknown target \"floppy\""),
            ("unix?uring_direct=on", "not unix"),
            ("duckdb?uring_direct=on", "not duckdb"),
            ("io_uring?direct=on", "not a uring_KEY=VALUE"),
            ("io_uring?uring_direct=", "not a uring_KEY=VALUE"),
        ] {
            let message = Target::parse(bad).unwrap_err();
            assert!(message.contains(wanted), "{bad}: {message}");
            assert!(
                !message.contains("  "),
                "{bad}: a run of spaces in {message:?}"
            );
        }
    }

    /// A target's URI parameters reach the VFS when its store opens the database (and a
    /// path that needs escaping in a URI still names the file).
    #[test]
    fn uri_parameters_reach_the_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let target = Target::parse("io_uring?uring_reads=ring").unwrap();
        let path = dir.path().join("b?#%.db");
        let store = SqliteStore::open(target, Journal::Delete, &path).unwrap();
        let stats: String = store
            .conn
            .query_row("PRAGMA io_uring_stats", [], |row| row.get(0))
            .unwrap();
        assert!(
            stats.contains("\"reads\":\"ring\""),
            "uring_reads=ring ignored: {stats}"
        );
        drop(store);
        assert!(path.exists(), "the escaped path names the file");
        let plain = SqliteStore::open(Target::IO_URING, Journal::Delete, &path).unwrap();
        let stats: String = plain
            .conn
            .query_row("PRAGMA io_uring_stats", [], |row| row.get(0))
            .unwrap();
        assert!(stats.contains("\"reads\":\"syscall\""), "{stats}");
    }
}
