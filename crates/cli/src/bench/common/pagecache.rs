//! The operating system's page cache of a benchmark's database files: emptied before a
//! cold measurement, filled before a hot one, and inspected (which pages are resident)
//! to check both.
//!
//! Eviction needs no privilege: `posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)` drops the
//! clean pages of one file from the page cache, where `echo 3 > /proc/sys/vm/drop_caches`
//! would need root and empty every cache of the machine. Dirty pages are not dropped, so
//! the file is written back first (`fdatasync`). Pages some process has mapped stay, which
//! is why a WAL database's `-shm` (mapped by SQLite) is left alone.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::database::companion;

/// Whether a timed test starts with the database's pages in the OS page cache.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CacheState {
    /// The pages evicted right before the timed part: every page comes from the device.
    Cold,
    /// The pages in the page cache (as after any earlier use of the database).
    #[default]
    Hot,
}

impl CacheState {
    pub fn name(self) -> &'static str {
        match self {
            CacheState::Cold => "cold",
            CacheState::Hot => "hot",
        }
    }
}

/// The files of the database at `path` that hold its pages and exist: the database, its
/// WAL and its rollback journal (not the `-shm`, which SQLite maps into memory).
pub fn database_files(path: &Path) -> Vec<PathBuf> {
    ["", "-wal", "-journal"]
        .iter()
        .map(|suffix| companion(path, suffix))
        .filter(|file| file.is_file())
        .collect()
}

/// Writes back the dirty pages of the file at `path` and drops all its pages from the
/// page cache.
pub fn evict(path: &Path) -> Result<()> {
    let file = File::open(path)
        .with_context(|| format!("cannot open {} to evict its pages", path.display()))?;
    // DONTNEED skips dirty pages and pages under writeback; fdatasync leaves neither.
    file.sync_data()
        .with_context(|| format!("fdatasync of {} before evicting it", path.display()))?;
    if let Err(error) = drop_clean_pages(&file) {
        bail!(
            "posix_fadvise(POSIX_FADV_DONTNEED) on {} failed: {error}",
            path.display(),
        );
    }
    Ok(())
}

/// Drops the clean pages of `file` from the page cache (`POSIX_FADV_DONTNEED` on the
/// whole file); dirty pages and pages under writeback stay (see [`evict`]).
pub fn drop_clean_pages(file: &File) -> std::io::Result<()> {
    // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        // posix_fadvise returns the error number instead of setting errno.
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Evicts every file of the database at `path` ([`database_files`]); returns them.
pub fn evict_database(path: &Path) -> Result<Vec<PathBuf>> {
    let files = database_files(path);
    for file in &files {
        evict(file)?;
    }
    Ok(files)
}

/// Reads the file at `path` once from start to end, so that its pages are in the page
/// cache; returns the bytes read.
pub fn warm(path: &Path) -> Result<u64> {
    let mut file = File::open(path).with_context(|| {
        format!(
            "cannot open {} to read it into the page cache",
            path.display()
        )
    })?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let read = file
            .read(&mut buffer)
            .with_context(|| format!("reading {} into the page cache", path.display()))?;
        if read == 0 {
            return Ok(total);
        }
        total += read as u64;
    }
}

/// Reads every file of the database at `path` ([`database_files`]) into the page cache;
/// returns them.
pub fn warm_database(path: &Path) -> Result<Vec<PathBuf>> {
    let files = database_files(path);
    for file in &files {
        warm(file)?;
    }
    Ok(files)
}

/// How much of a file the page cache holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Residency {
    /// Pages of the file in the page cache.
    pub resident_pages: u64,
    /// Pages the file spans (of the system's page size).
    pub pages: u64,
}

/// Which pages of the file at `path` are in the page cache ([`resident_pages`]).
pub fn residency(path: &Path) -> Result<Residency> {
    let file = File::open(path)
        .with_context(|| format!("cannot open {} to look at its pages", path.display()))?;
    let length = file
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len();
    if length == 0 {
        return Ok(Residency::default());
    }
    let length = usize::try_from(length)
        .with_context(|| format!("{} is too large to map", path.display()))?;
    let resident_pages = match resident_pages(&file, length) {
        Ok(pages) => pages,
        Err(Failed::Map(error)) => {
            return Err(error)
                .with_context(|| format!("cannot map {} to look at its pages", path.display()))
        }
        Err(Failed::Mincore(error)) => {
            return Err(error).with_context(|| format!("mincore on {}", path.display()))
        }
    };
    Ok(Residency {
        resident_pages,
        pages: length.div_ceil(page_size()) as u64,
    })
}

/// Which call of [`resident_pages`] failed.
#[derive(Debug)]
pub enum Failed {
    Map(std::io::Error),
    Mincore(std::io::Error),
}

impl Failed {
    /// The error, whichever call it came from.
    pub fn into_error(self) -> std::io::Error {
        match self {
            Failed::Map(error) | Failed::Mincore(error) => error,
        }
    }
}

/// The system's page size, which `mincore` reports residency in.
fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page_size).unwrap_or(4096).max(1)
}

/// Pages of the first `length` bytes of `file` in the page cache, from `mincore` on a
/// mapping of them that is never touched (so looking reads nothing). Linux answers for
/// a file this process owns or may write, which a benchmark's own files are.
pub fn resident_pages(file: &File, length: usize) -> Result<u64, Failed> {
    if length == 0 {
        return Ok(0);
    }
    // SAFETY: a fresh shared read-only mapping of an open file, at an address the kernel
    // chooses; it is only passed to mincore and unmapped below, never dereferenced.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            length,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(Failed::Map(std::io::Error::last_os_error()));
    }
    let mut vector = vec![0u8; length.div_ceil(page_size())];
    // SAFETY: `address` is a mapping of `length` bytes made above, and `vector` has one
    // byte for each of its pages, as mincore writes.
    let rc = unsafe { libc::mincore(address, length, vector.as_mut_ptr()) };
    let error = std::io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above, which nothing refers to any more.
    unsafe { libc::munmap(address, length) };
    if rc != 0 {
        return Err(Failed::Mincore(error));
    }
    Ok(vector.iter().filter(|&&flags| flags & 1 != 0).count() as u64)
}

/// Resident pages of every file of the database at `path`, summed.
pub fn database_residency(path: &Path) -> Result<Residency> {
    let mut total = Residency::default();
    for file in database_files(path) {
        let one = residency(&file)?;
        total.resident_pages += one.resident_pages;
        total.pages += one.pages;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A directory on a disk filesystem: tmpfs pages cannot be evicted (they are the
    /// file), so the page cache is only observable elsewhere.
    fn disk_dir() -> tempfile::TempDir {
        tempfile::tempdir_in("/var/tmp").unwrap()
    }

    fn is_tmpfs(dir: &Path) -> bool {
        crate::report::envinfo::EnvInfo::collect(dir).filesystem == "tmpfs"
    }

    /// At most a twentieth of the pages may linger: pages the kernel keeps for its own
    /// reasons must not make the test flaky, and an eviction that did nothing leaves all.
    fn mostly_gone(residency: Residency) -> bool {
        residency.resident_pages * 20 <= residency.pages
    }

    #[test]
    fn eviction_drops_the_pages_and_warming_brings_them_back() {
        let dir = disk_dir();
        if is_tmpfs(dir.path()) {
            eprintln!("skipped: /var/tmp is tmpfs, whose pages cannot be evicted");
            return;
        }
        let path = dir.path().join("pages");
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![7u8; 1 << 20]).unwrap();
        // Written but not yet synced: evict must write the dirty pages back first.
        drop(file);
        let before = residency(&path).unwrap();
        assert_eq!(before.pages, (1 << 20) / 4096);
        assert_eq!(
            before.resident_pages, before.pages,
            "just written: resident"
        );

        evict(&path).unwrap();
        let after = residency(&path).unwrap();
        assert!(mostly_gone(after), "{after:?}");

        assert_eq!(warm(&path).unwrap(), 1 << 20);
        assert_eq!(residency(&path).unwrap().resident_pages, before.pages);
    }

    /// A WAL database: eviction reaches the database and its WAL, not the mapped -shm.
    #[test]
    fn a_database_is_evicted_with_its_wal() {
        let dir = disk_dir();
        if is_tmpfs(dir.path()) {
            eprintln!("skipped: /var/tmp is tmpfs, whose pages cannot be evicted");
            return;
        }
        let path = dir.path().join("w.db");
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
                 INSERT INTO t SELECT zeroblob(1000) FROM n;",
            )
            .unwrap();
        let wal = dir.path().join("w.db-wal");
        assert!(
            residency(&wal).unwrap().pages > 100,
            "the WAL holds the rows"
        );
        let files = evict_database(&path).unwrap();
        assert_eq!(files, [path.clone(), wal.clone()]);
        assert!(mostly_gone(residency(&wal).unwrap()));
        assert!(mostly_gone(database_residency(&path).unwrap()));
        // The connection still reads its rows (from the device now).
        let count: i64 = connection
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(count, 500);
        let shm = dir.path().join("w.db-shm");
        assert!(shm.exists() && !files.contains(&shm));
        assert_eq!(warm_database(&path).unwrap(), files);
        let warm = database_residency(&path).unwrap();
        assert_eq!(warm.resident_pages, warm.pages);
    }

    #[test]
    fn missing_files_are_errors_naming_them_and_empty_files_have_no_pages() {
        let dir = disk_dir();
        let missing = dir.path().join("missing");
        let message = format!("{:#}", evict(&missing).unwrap_err());
        assert!(message.contains("missing"), "{message}");
        assert!(database_files(&missing).is_empty());
        let empty = dir.path().join("empty");
        File::create(&empty).unwrap();
        assert_eq!(residency(&empty).unwrap(), Residency::default());
        evict(&empty).unwrap();
    }
}
