//! Where a test runs (the targets), how its database is opened and configured, and where
//! its VFS call counts come from.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{types::ValueRef, Connection, OpenFlags};
use serde::{Deserialize, Serialize};

use crate::bench::targets::{
    checked_uri_parameters, library_vfs, our_vfs, uri_filename, OUR_TARGETS,
};
use crate::counting_vfs::{self, Behaviour, CountingVfs};

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
    fn level(self) -> i64 {
        match self {
            Synchronous::Off => 0,
            Synchronous::Normal => 1,
            Synchronous::Full => 2,
            Synchronous::Extra => 3,
        }
    }
}

/// Where the VFS call counts of a target come from.
#[derive(Clone, Copy)]
pub enum Counter {
    /// `:memory:` does no file I/O.
    None,
    /// Our pass-through wrapper around a VFS that counts nothing itself (e.g. `unix`).
    Wrapper(&'static CountingVfs),
    /// The io_uring library's own counters of the VFS with this name.
    Library(&'static str),
}

/// One thing to compare.
#[derive(Clone)]
pub struct Target {
    /// What the user typed and the tables show: `memory`, `unix`, `io_uring`, …
    pub label: String,
    /// VFS to open the database with; `None` for `:memory:`.
    pub vfs: Option<String>,
    /// `uring_*` URI parameters the database is opened with (`io_uring?uring_direct=on`).
    pub uri_parameters: Option<String>,
    pub counter: Counter,
}

impl Target {
    pub fn is_memory(&self) -> bool {
        self.vfs.is_none()
    }
}

/// VFS call counts of one measured run (the body only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounts {
    pub read_calls: u64,
    pub write_calls: u64,
    pub sync_calls: u64,
    pub truncate_calls: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// fsync/fdatasync actually issued (our VFS only).
    pub fsyncs: Option<u64>,
    /// `io_uring_enter` calls or syscalls made for I/O (our VFS only).
    pub kernel_entries: Option<u64>,
}

impl Counter {
    pub fn reset(&self) {
        match self {
            Counter::None => {}
            Counter::Wrapper(vfs) => vfs.reset(),
            Counter::Library(name) => sqlite_uring::reset_vfs_stats(name),
        }
    }

    pub fn read(&self) -> Option<IoCounts> {
        match self {
            Counter::None => None,
            Counter::Wrapper(vfs) => {
                let c = vfs.counts();
                Some(IoCounts {
                    read_calls: c.read_calls,
                    write_calls: c.write_calls,
                    sync_calls: c.sync_calls,
                    truncate_calls: c.truncate_calls,
                    bytes_read: c.bytes_read,
                    bytes_written: c.bytes_written,
                    fsyncs: None,
                    kernel_entries: None,
                })
            }
            Counter::Library(name) => sqlite_uring::vfs_stats(name).map(|s| IoCounts {
                read_calls: s.read_calls,
                write_calls: s.write_calls,
                sync_calls: s.sync_calls,
                truncate_calls: s.truncate_calls,
                bytes_read: s.bytes_read,
                bytes_written: s.bytes_written,
                fsyncs: Some(s.fsyncs),
                kernel_entries: Some(s.kernel_entries),
            }),
        }
    }
}

/// Turns `--targets` names into targets, registering VFSes as needed.
pub fn resolve(names: &[String]) -> Result<Vec<Target>> {
    let mut targets: Vec<Target> = Vec::new();
    for raw in names {
        let name = raw.trim();
        if name.is_empty() {
            bail!("--targets contains an empty name; separate targets with commas, e.g. --targets memory,unix,io_uring");
        }
        if targets.iter().any(|t| t.label == name) {
            bail!("--targets names {name} twice; list each target once");
        }
        let (base, uri_parameters) = match name.split_once('?') {
            Some((base, parameters)) => {
                (base, Some(checked_uri_parameters(name, base, parameters)?))
            }
            None => (name, None),
        };
        let target = match (base, our_vfs(base)) {
            ("memory", _) => Target {
                label: name.into(),
                vfs: None,
                uri_parameters: None,
                counter: Counter::None,
            },
            ("unix", _) => counted_target(name, "unix")?,
            (_, Some(vfs)) => match library_vfs(vfs) {
                Ok(_) => Target {
                    label: name.into(),
                    vfs: Some(vfs.into()),
                    uri_parameters,
                    counter: Counter::Library(vfs),
                },
                Err(why) => bail!(
                    "--targets {name}: the {vfs} VFS cannot be registered here: {why}; \
                         run `sqlite-uring probe` for details, or leave {name} out of --targets"
                ),
            },
            (other, None) => {
                if counting_vfs::registered_vfs_names()
                    .iter()
                    .any(|n| n == other)
                {
                    counted_target(other, other)?
                } else {
                    bail!(
                        "--targets: unknown target {other:?}; use memory, unix, {}, \
                         or the name of a registered VFS ({})",
                        OUR_TARGETS.map(|(label, _)| label).join(", "),
                        counting_vfs::registered_vfs_names().join(", ")
                    )
                }
            }
        };
        targets.push(target);
    }
    if targets.is_empty() {
        bail!("--targets is empty; name at least one target, e.g. --targets memory,unix");
    }
    Ok(targets)
}

fn counted_target(label: &str, parent: &str) -> Result<Target> {
    let wrapper =
        counting_vfs::register(&format!("{parent}_counted"), parent, Behaviour::Faithful)?;
    Ok(Target {
        label: label.into(),
        vfs: Some(wrapper.name().to_string()),
        uri_parameters: None,
        counter: Counter::Wrapper(wrapper),
    })
}

/// The settings every file target gets, identically.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub journal: JournalMode,
    pub synchronous: Synchronous,
}

/// A database of one measured run: a fresh file (removed on drop) or `:memory:`.
pub struct Database {
    /// Always `Some` until dropped; an Option so that Drop can close it before unlinking.
    connection: Option<Connection>,
    path: Option<PathBuf>,
}

impl Database {
    pub fn connection(&self) -> &Connection {
        self.connection.as_ref().expect("open until dropped")
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // Close first: unlinking files SQLite still has open would make its final
        // checkpoint write into a deleted file.
        drop(self.connection.take());
        if let Some(path) = &self.path {
            remove_database_files(path);
        }
    }
}

/// The database file and its journal, WAL and shared-memory companions.
pub fn remove_database_files(path: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

/// A connection to the database file at `path` (created if missing) through the VFS
/// `vfs` of `target`, with the target's URI parameters; for one thread
/// (`SQLITE_OPEN_NO_MUTEX`). No PRAGMA is applied: see [`configure`].
pub fn connect(target: &Target, vfs: &str, path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let opened = match &target.uri_parameters {
        None => Connection::open_with_flags_and_vfs(path, flags, vfs),
        Some(parameters) => Connection::open_with_flags_and_vfs(
            uri_filename(path, parameters),
            flags | OpenFlags::SQLITE_OPEN_URI,
            vfs,
        ),
    };
    opened.with_context(|| {
        format!(
            "cannot open {} with VFS {vfs} (target {})",
            path.display(),
            target.label
        )
    })
}

/// Opens a fresh database for `target` at `path` (ignored for memory) and applies and
/// verifies the PRAGMAs.
pub fn open(target: &Target, path: &Path, settings: Settings) -> Result<Database> {
    let database = match &target.vfs {
        None => Database {
            connection: Some(Connection::open_in_memory()?),
            path: None,
        },
        Some(vfs) => {
            remove_database_files(path);
            Database {
                connection: Some(connect(target, vfs, path)?),
                path: Some(path.to_path_buf()),
            }
        }
    };
    configure(database.connection(), target, settings)?;
    Ok(database)
}

/// Applies the journal mode and synchronous level and refuses to continue unless both read
/// back as requested: a VFS that claims `SQLITE_FCNTL_PRAGMA` without acting on it would
/// otherwise silently benchmark different durability.
pub fn configure(connection: &Connection, target: &Target, settings: Settings) -> Result<()> {
    let vfs = target.vfs.as_deref().unwrap_or(":memory:");
    // `:memory:` databases only journal in memory; asking for WAL would be refused.
    let journal = if target.is_memory() {
        "memory"
    } else {
        settings.journal.name()
    };
    let answer = pragma_value(connection, &format!("PRAGMA journal_mode={journal}"))?;
    verify(
        target,
        vfs,
        &format!("journal_mode={journal}"),
        answer,
        journal,
    )?;
    let read_back = pragma_value(connection, "PRAGMA journal_mode")?;
    verify(target, vfs, "journal_mode (read back)", read_back, journal)?;

    connection
        .execute_batch(&format!(
            "PRAGMA synchronous={}",
            settings.synchronous.name()
        ))
        .with_context(|| format!("PRAGMA synchronous failed on target {}", target.label))?;
    let read_back = pragma_value(connection, "PRAGMA synchronous")?;
    let expected = settings.synchronous.level().to_string();
    verify(
        target,
        vfs,
        &format!("synchronous={}", settings.synchronous.name()),
        read_back,
        &expected,
    )
}

/// First column of the first row as text, `None` when the PRAGMA returned no row.
fn pragma_value(connection: &Connection, sql: &str) -> Result<Option<String>> {
    let mut statement = connection
        .prepare(sql)
        .with_context(|| format!("cannot prepare {sql}"))?;
    let mut rows = statement
        .query([])
        .with_context(|| format!("{sql} failed"))?;
    let Some(row) = rows.next().with_context(|| format!("{sql} failed"))? else {
        return Ok(None);
    };
    Ok(Some(match row.get_ref(0)? {
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).to_lowercase(),
        other => format!("{other:?}"),
    }))
}

fn verify(
    target: &Target,
    vfs: &str,
    what: &str,
    got: Option<String>,
    expected: &str,
) -> Result<()> {
    match got {
        Some(value) if value == expected => Ok(()),
        got => Err(anyhow!(
            "PRAGMA {what} did not take effect on target {} (VFS {vfs}): it reads back as {} \
             instead of {expected:?}; refusing to measure different settings. A VFS that answers \
             SQLITE_OK to SQLITE_FCNTL_PRAGMA without applying it causes this: fix the VFS or \
             leave this target out of --targets",
            target.label,
            got.map_or_else(|| "nothing".to_string(), |v| format!("{v:?}")),
        )),
    }
}

/// VFS counters are process-wide, so tests that read them must not run while another
/// test resets them.
#[cfg(test)]
pub(crate) fn counters_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            journal: JournalMode::Wal,
            synchronous: Synchronous::Full,
        }
    }

    #[test]
    fn pragmas_are_verified_on_a_real_target() {
        let _counters = counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let targets = resolve(&["memory".into(), "unix".into()]).unwrap();
        for target in &targets {
            let db = open(target, &dir.path().join("ok.db"), settings()).unwrap();
            drop(db);
        }
        assert!(
            !dir.path().join("ok.db").exists(),
            "database files are removed"
        );
    }

    #[test]
    fn a_vfs_that_ignores_pragmas_is_refused() {
        let broken = counting_vfs::register(
            "unix_ignores_pragmas",
            "unix",
            Behaviour::AnswersOkToPragmas,
        )
        .unwrap();
        let target = Target {
            label: "broken".into(),
            vfs: Some(broken.name().to_string()),
            uri_parameters: None,
            counter: Counter::Wrapper(broken),
        };
        let dir = tempfile::tempdir().unwrap();
        let error = open(&target, &dir.path().join("b.db"), settings())
            .err()
            .unwrap();
        let message = format!("{error:#}");
        assert!(
            message.contains("journal_mode=wal did not take effect"),
            "{message}"
        );
        assert!(message.contains("refusing"), "{message}");
    }

    #[test]
    fn unknown_targets_are_rejected_with_the_flag_name() {
        let error = resolve(&["memory".into(), "floppy".into()]).err().unwrap();
        let message = error.to_string();
        assert!(
            message.contains("--targets") && message.contains("floppy"),
            "{message}"
        );
        assert!(resolve(&["unix".into(), "unix".into()]).is_err());
        // Any registered VFS works by name, counted through a wrapper.
        let other = resolve(&["unix-none".into()]).unwrap();
        assert_eq!(other[0].vfs.as_deref(), Some("unix-none_counted"));
    }

    #[test]
    fn uri_parameters_reach_the_vfs_and_bad_ones_name_the_flag() {
        let _counters = counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let targets = resolve(&["io_uring?uring_syncs=syscall&uring_direct=on".into()]).unwrap();
        let db = open(&targets[0], &dir.path().join("p?#%.db"), settings()).unwrap();
        let stats: String = db
            .connection()
            .query_row("PRAGMA io_uring_stats", [], |row| row.get(0))
            .unwrap();
        assert!(
            !stats.contains("\"direct_align_bytes\":null"),
            "uring_direct=on ignored: {stats}"
        );
        assert!(
            stats.contains("\"vfs\":\"io_uring\"")
                && stats.contains("\"engine\":\"io_uring\"")
                && stats.contains("\"syncs\":\"syscall\""),
            "io_uring?… must open through the io_uring VFS with its parameters: {stats}"
        );
        assert!(
            dir.path().join("p?#%.db").exists(),
            "the escaped path names the file"
        );
        drop(db);
        for (bad, wanted) in [
            ("unix?uring_direct=on", "not unix"),
            ("io_uring?direct=on", "not a uring_KEY=VALUE"),
            ("io_uring?uring_direct=", "not a uring_KEY=VALUE"),
            ("io_uring?uring_direct=on&x", "not a uring_KEY=VALUE"),
        ] {
            let message = resolve(&[bad.into()]).err().unwrap().to_string();
            assert!(
                message.contains("--targets") && message.contains(wanted),
                "{bad}: {message}"
            );
        }
        // A key the VFS does not know fails at open, naming it.
        let targets = resolve(&["io_uring?uring_nonsense=1".into()]).unwrap();
        let message = format!(
            "{:#}",
            open(&targets[0], &dir.path().join("n.db"), settings())
                .err()
                .unwrap()
        );
        assert!(message.contains("io_uring?uring_nonsense=1"), "{message}");
    }
}
