//! The database of a measured run on a [`Target`]: opened through the target's VFS with
//! its URI parameters, configured with the [`Settings`] every file target gets, the
//! settings verified, and its files removed afterwards.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rusqlite::{types::ValueRef, Connection, OpenFlags};

use super::settings::Settings;
use super::targets::{uri_filename, Target};

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

/// The file SQLite names `path` + `suffix` beside the database at `path` (`-wal`,
/// `-journal`, `-shm`; `""` is the database itself).
pub fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The database file and its journal, WAL and shared-memory companions.
pub fn remove_database_files(path: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(companion(path, suffix));
    }
}

/// A connection to the database file at `path` (created if missing) through the VFS
/// `vfs` of `target`, with the target's URI parameters; for one thread
/// (`SQLITE_OPEN_NO_MUTEX`). No PRAGMA is applied: see [`configure`].
pub fn connect(target: &Target, vfs: &str, path: &Path) -> Result<Connection> {
    open_with(
        target,
        vfs,
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    )
}

/// A read-only connection to the existing database file at `path` through the VFS `vfs`
/// of `target` (`bench cold --database`): SQLite writes nothing to the file (for a WAL
/// database it may create an empty `-wal` and a `-shm`, as for any reader).
pub fn connect_read_only(target: &Target, vfs: &str, path: &Path) -> Result<Connection> {
    open_with(target, vfs, path, OpenFlags::SQLITE_OPEN_READ_ONLY)
}

fn open_with(target: &Target, vfs: &str, path: &Path, flags: OpenFlags) -> Result<Connection> {
    let flags = flags | OpenFlags::SQLITE_OPEN_NO_MUTEX;
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
    let database = match target.open_vfs() {
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
    let vfs = target.open_vfs().unwrap_or(":memory:");
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

#[cfg(test)]
mod tests {
    use super::super::settings::{JournalMode, Synchronous};
    use super::super::targets::{counters_lock, resolve, Counter};
    use super::*;
    use crate::counting_vfs::{self, Behaviour};

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
            timer: None,
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
