//! The database every run of `bench cold` reads: built once per journal mode (untimed,
//! through SQLite's own `unix` VFS, so that every target reads the very same bytes),
//! kept in `--dir` under a name derived from its parameters, and reused by later
//! invocations while the spec row stored inside it matches and `PRAGMA quick_check`
//! passes.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

use super::workload::{self, CREATED_INDEX, CREATE_INDEX, SCHEMA, SEED};
use crate::bench::common::database::remove_database_files;
use crate::bench::common::settings::JournalMode;
use crate::bench::common::signals::check_interrupted;

/// Version of the generator: a change to the rows or the schema bumps it, so databases
/// built by an older generator are rebuilt rather than measured.
pub const FORMAT: u32 = 1;
/// SQLite's default page size, which every database here has.
pub const PAGE_SIZE: u32 = 4096;
/// Row pairs inserted per transaction of the build (the size is checked after each).
const BATCH_PAIRS: u64 = 500;

/// What a database is built from: equal specs give identical databases.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub format: u32,
    pub size_mib: u64,
    pub page_size: u32,
    pub seed: u64,
}

impl Spec {
    pub fn new(size_mib: u64) -> Spec {
        Spec {
            format: FORMAT,
            size_mib,
            page_size: PAGE_SIZE,
            seed: SEED,
        }
    }

    /// The database file of `journal` in `dir`.
    pub fn path(&self, dir: &Path, journal: JournalMode) -> PathBuf {
        dir.join(format!(
            "sqlite-uring-cold-{}mib-p{}-v{}-{}.db",
            self.size_mib,
            self.page_size,
            self.format,
            journal.name()
        ))
    }
}

/// A database ready to be measured.
#[derive(Clone, Debug)]
pub struct Database {
    pub path: PathBuf,
    pub journal: JournalMode,
    /// Row pairs (rows of `w`, and of `r`).
    pub rows: u64,
    /// Pages in the file (`PRAGMA page_count`), free ones included.
    pub pages: u64,
    /// Free pages: those the CREATE INDEX test writes its index into.
    pub free_pages: u64,
    pub page_size: u32,
    /// How it came to be: `built`, `copied from …`, `reused`, with a reason to rebuild.
    pub origin: String,
}

impl Database {
    pub fn bytes(&self) -> u64 {
        self.pages * u64::from(self.page_size)
    }

    pub fn mib(&self) -> f64 {
        self.bytes() as f64 / f64::from(1u32 << 20)
    }
}

/// An exclusive lock on `--dir` for the whole invocation (flock on the directory): two
/// `bench cold` runs in one directory would build, measure and undo each other's writes
/// on the same files. SQLite's locks are fcntl locks, which flock does not touch.
pub struct DirLock {
    /// The lock lasts as long as this descriptor is open.
    _directory: File,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let handle = File::open(dir)
            .with_context(|| format!("--dir {}: cannot open the directory", dir.display()))?;
        // SAFETY: flock only reads its arguments; the descriptor is open for the call.
        if unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                bail!(
                    "--dir {}: another `sqlite-uring bench cold` is using this directory's \
                     databases; wait for it to finish or give this run another --dir",
                    dir.display()
                );
            }
            return Err(error).with_context(|| format!("--dir {}: cannot lock it", dir.display()));
        }
        Ok(DirLock { _directory: handle })
    }
}

/// A file being built, removed unless it was finished (also on an error or Ctrl-C).
struct Unfinished(Option<PathBuf>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            remove_database_files(path);
        }
    }
}

/// The database of every journal mode in `journals`, reused from `dir` when valid (and
/// `rebuild` is false), else built (the first) or copied from one just made (the others,
/// page for page, so every journal mode reads the same layout). Says what it does on
/// stdout.
pub fn prepare(
    dir: &Path,
    spec: &Spec,
    journals: &[JournalMode],
    rebuild: bool,
) -> Result<Vec<Database>> {
    remove_stale_builds(dir, spec)?;
    let mut ready: Vec<Database> = Vec::new();
    for &journal in journals {
        let path = spec.path(dir, journal);
        let reason = if rebuild {
            "--rebuild".to_string()
        } else {
            match validate(&path, spec, journal) {
                Ok(mut database) => {
                    database.origin = "reused".into();
                    println!(
                        "database:    reusing {} ({:.1} MiB, spec and quick_check match)",
                        path.display(),
                        database.mib()
                    );
                    ready.push(database);
                    continue;
                }
                Err(why) => why,
            }
        };
        let building = Unfinished(Some(build_path(&path)));
        let scratch = building.0.clone().expect("set above");
        let origin = match ready.first() {
            Some(source) => {
                println!(
                    "database:    copying {} to {} ({reason})",
                    source.path.display(),
                    path.display()
                );
                std::fs::copy(&source.path, &scratch).with_context(|| {
                    format!("copying {} to {}", source.path.display(), scratch.display())
                })?;
                format!("copied from {}", source.path.display())
            }
            None => {
                println!(
                    "database:    building {} ({} MiB, once, untimed; {reason})",
                    path.display(),
                    spec.size_mib
                );
                build(&scratch, spec)?;
                "built".to_string()
            }
        };
        set_journal_mode(&scratch, journal)?;
        finish(building, &path)?;
        let mut database = validate(&path, spec, journal)
            .map_err(|why| anyhow::anyhow!("the database just made is not valid: {why}"))?;
        database.origin = origin;
        ready.push(database);
    }
    Ok(ready)
}

/// Where the database at `path` is built before it is renamed into place.
fn build_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".build-{}", std::process::id()));
    PathBuf::from(name)
}

/// Builds left by an interrupted invocation (this one holds the directory's lock, so no
/// other is building).
fn remove_stale_builds(dir: &Path, spec: &Spec) -> Result<()> {
    let prefix = format!("sqlite-uring-cold-{}mib-", spec.size_mib);
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("--dir {}: cannot list it", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.contains(".db.build-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

fn open_unix(path: &Path, flags: OpenFlags) -> Result<Connection> {
    Connection::open_with_flags_and_vfs(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX, "unix")
        .with_context(|| format!("cannot open {}", path.display()))
}

/// The first column of the first row of `sql`, as text.
fn text_of(connection: &Connection, sql: &str) -> rusqlite::Result<String> {
    connection.query_row(sql, [], |row| row.get::<_, String>(0))
}

fn integer_of(connection: &Connection, sql: &str) -> rusqlite::Result<i64> {
    connection.query_row(sql, [], |row| row.get::<_, i64>(0))
}

/// The database at `path` if it was built from `spec`, is in `journal` mode, holds
/// nothing else and passes `PRAGMA quick_check`; else why not (to rebuild it). An index
/// a killed run of the CREATE INDEX test left behind is dropped.
pub fn validate(path: &Path, spec: &Spec, journal: JournalMode) -> Result<Database, String> {
    if !path.exists() {
        return Err("none cached".into());
    }
    let connection = open_unix(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(|error| format!("cannot open the cached file: {error:#}"))?;
    let stored = connection
        .query_row("SELECT spec, rows FROM cold_spec", [], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })
        .map_err(|error| format!("the cached file has no readable spec row ({error})"))?;
    let (stored_spec, rows) = stored;
    match serde_json::from_str::<Spec>(&stored_spec) {
        Ok(found) if found == *spec => {}
        _ => {
            return Err(format!(
                "the cached file was built from another spec ({stored_spec})"
            ))
        }
    }
    let mode = text_of(&connection, "PRAGMA journal_mode").map_err(|e| e.to_string())?;
    let wanted = match journal {
        JournalMode::Wal => "wal",
        _ => "delete",
    };
    if mode.to_lowercase() != wanted {
        return Err(format!(
            "the cached file is in journal mode {mode}, not {wanted}"
        ));
    }
    connection
        .execute_batch(&format!("DROP INDEX IF EXISTS {CREATED_INDEX}"))
        .map_err(|error| format!("cannot drop a leftover index ({error})"))?;
    let mut objects: Vec<String> = connection
        .prepare("SELECT name FROM sqlite_schema ORDER BY name")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|error| format!("cannot read the schema ({error})"))?;
    objects.sort();
    if objects != ["cold_spec", "r", "r_a", "w"] {
        return Err(format!(
            "the cached file holds other objects ({})",
            objects.join(", ")
        ));
    }
    let check = text_of(&connection, "PRAGMA quick_check").map_err(|e| e.to_string())?;
    if check != "ok" {
        return Err(format!("PRAGMA quick_check of the cached file: {check}"));
    }
    let pages = integer_of(&connection, "PRAGMA page_count").map_err(|e| e.to_string())?;
    let free_pages = integer_of(&connection, "PRAGMA freelist_count").map_err(|e| e.to_string())?;
    drop(connection);
    Ok(Database {
        path: path.to_path_buf(),
        journal,
        rows: rows as u64,
        pages: pages as u64,
        free_pages: free_pages as u64,
        page_size: PAGE_SIZE,
        origin: String::new(),
    })
}

/// Builds the database of `spec` at `path`: the schema, row pairs in batches until the
/// file reaches the size, the spec row, then one CREATE INDEX and DROP INDEX of the
/// CREATE INDEX test, so that its index pages come from the free list in every run (the
/// first one included) rather than growing the file once.
fn build(path: &Path, spec: &Spec) -> Result<()> {
    remove_database_files(path);
    let connection = open_unix(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    )?;
    // Speed only: neither changes which page holds what. The journal mode is set after.
    connection.execute_batch(&format!(
        "PRAGMA page_size={}; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; \
         PRAGMA cache_size=-65536;",
        spec.page_size
    ))?;
    connection.execute_batch(SCHEMA)?;
    let target_bytes = spec.size_mib << 20;
    let progress = ProgressBar::new(target_bytes);
    progress.set_style(
        ProgressStyle::with_template(
            "{bar:32} {bytes}/{total_bytes} [{elapsed_precise}, ETA {eta}]",
        )
        .expect("the template is valid"),
    );
    let mut rows = 0u64;
    loop {
        check_interrupted()?;
        connection.execute_batch("BEGIN")?;
        workload::insert_pairs(&connection, rows, rows + BATCH_PAIRS)?;
        connection.execute_batch("COMMIT")?;
        rows += BATCH_PAIRS;
        let bytes =
            integer_of(&connection, "PRAGMA page_count")? as u64 * u64::from(spec.page_size);
        progress.set_position(bytes.min(target_bytes));
        if bytes >= target_bytes {
            break;
        }
    }
    progress.finish_and_clear();
    connection
        .execute_batch("CREATE TABLE cold_spec(spec TEXT NOT NULL, rows INTEGER NOT NULL)")?;
    connection.execute(
        "INSERT INTO cold_spec(spec, rows) VALUES (?1, ?2)",
        (serde_json::to_string(spec)?, rows as i64),
    )?;
    connection.execute_batch(CREATE_INDEX)?;
    connection.execute_batch(&format!("DROP INDEX {CREATED_INDEX}"))?;
    Ok(())
}

/// Puts the database at `path` in `journal` mode (a WAL database's header says so; the
/// rollback modes share one header).
fn set_journal_mode(path: &Path, journal: JournalMode) -> Result<()> {
    let connection = open_unix(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    let mode = match journal {
        JournalMode::Wal => "wal",
        _ => "delete",
    };
    let answer = text_of(&connection, &format!("PRAGMA journal_mode={mode}"))?;
    if answer.to_lowercase() != mode {
        bail!(
            "PRAGMA journal_mode={mode} on {} answered {answer}",
            path.display()
        );
    }
    Ok(())
}

/// Makes the finished build at `building` durable and renames it to `path`.
fn finish(mut building: Unfinished, path: &Path) -> Result<()> {
    let scratch = building.0.take().expect("an unfinished build");
    let result = (|| -> Result<()> {
        File::open(&scratch)?.sync_all()?;
        std::fs::rename(&scratch, path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            File::open(parent)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        remove_database_files(&scratch);
    }
    result.with_context(|| format!("moving the new database to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small database is built once, reused, rebuilt when its spec or contents
    /// differ, and copied page for page for a second journal mode.
    #[test]
    fn databases_are_built_reused_copied_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let spec = Spec::new(1);
        let journals = [JournalMode::Delete, JournalMode::Wal];
        let first = prepare(dir.path(), &spec, &journals, false).unwrap();
        assert_eq!(first[0].origin, "built");
        assert!(
            first[1].origin.starts_with("copied from"),
            "{}",
            first[1].origin
        );
        assert_eq!(
            (first[0].rows, first[0].pages),
            (first[1].rows, first[1].pages)
        );
        assert!(first[0].bytes() >= 1 << 20);
        assert!(
            first[0].free_pages > 0,
            "CREATE INDEX's pages are free pages"
        );
        // Both journal modes read the same layout: the files differ in the header only.
        let bytes = |d: &Database| std::fs::read(&d.path).unwrap();
        let (rollback, wal) = (bytes(&first[0]), bytes(&first[1]));
        assert_eq!(rollback.len(), wal.len());
        let differing: Vec<usize> = (0..rollback.len())
            .filter(|&i| rollback[i] != wal[i])
            .collect();
        assert!(differing.iter().all(|&i| i < 100), "{differing:?}");

        let again = prepare(dir.path(), &spec, &journals, false).unwrap();
        assert!(again.iter().all(|d| d.origin == "reused"));
        assert_eq!(again[0].rows, first[0].rows);

        // A leftover index is dropped; another spec row is rebuilt.
        let connection = Connection::open(&first[0].path).unwrap();
        connection
            .execute_batch("CREATE INDEX cold_b ON r(b)")
            .unwrap();
        drop(connection);
        assert_eq!(
            validate(&first[0].path, &spec, JournalMode::Delete)
                .unwrap()
                .rows,
            first[0].rows
        );
        let connection = Connection::open(&first[0].path).unwrap();
        connection
            .execute_batch("UPDATE cold_spec SET spec = '{}'")
            .unwrap();
        drop(connection);
        let why = validate(&first[0].path, &spec, JournalMode::Delete).unwrap_err();
        assert!(why.contains("another spec"), "{why}");
        // A damaged file is rebuilt too.
        std::fs::write(&first[1].path, b"not a database").unwrap();
        let why = validate(&first[1].path, &spec, JournalMode::Wal).unwrap_err();
        assert!(!why.is_empty());
        let rebuilt = prepare(dir.path(), &spec, &journals, false).unwrap();
        assert_eq!(rebuilt[0].origin, "built");
        assert!(rebuilt[1].origin.starts_with("copied"));
        assert_eq!(rebuilt[0].rows, first[0].rows, "the build is deterministic");
        let forced = prepare(dir.path(), &spec, &journals[..1], true).unwrap();
        assert_eq!(forced[0].origin, "built");
        // Only the two databases remain: no build left behind.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "sqlite-uring-cold-1mib-p4096-v1-delete.db",
                "sqlite-uring-cold-1mib-p4096-v1-wal.db"
            ]
        );
    }

    #[test]
    fn a_second_lock_on_a_directory_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let held = DirLock::acquire(dir.path()).unwrap();
        let message = DirLock::acquire(dir.path()).err().unwrap().to_string();
        assert!(
            message.contains("--dir") && message.contains("another"),
            "{message}"
        );
        drop(held);
        DirLock::acquire(dir.path()).unwrap();
    }
}
