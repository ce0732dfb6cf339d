//! No database descriptor on 0, 1 or 2 (os_unix.c SQLITE_MINIMUM_FILE_DESCRIPTOR), where a
//! stray write to stdin/stdout/stderr would land in the database.
//!
//! This file holds a single test on purpose: it closes the process's descriptors 0, 1
//! and 2 for a moment, and integration-test files are separate processes, so no other
//! test can be handed them meanwhile (or print into the void).

mod common;

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

const STANDARD_DESCRIPTORS: [RawFd; 3] = [0, 1, 2];

/// What the standard descriptors refer to now (`None`: closed).
fn standard_targets() -> Vec<Option<PathBuf>> {
    STANDARD_DESCRIPTORS
        .iter()
        .map(|fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).ok())
        .collect()
}

/// The descriptors of this process that refer to `path`.
fn descriptors_of(path: &Path) -> Vec<RawFd> {
    let canonical = path.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            let fd: RawFd = entry.file_name().to_str()?.parse().ok()?;
            (target == canonical).then_some(fd)
        })
        .collect()
}

/// What [`open_and_commit_without_stdio`] saw.
struct Seen {
    /// The database's descriptors right after the open.
    descriptors: Vec<RawFd>,
    /// What 0, 1 and 2 referred to right after the open.
    at_open: Vec<Option<PathBuf>>,
    /// … and after a commit.
    after_commit: Vec<Option<PathBuf>>,
}

/// Opens `uri` and commits a transaction with 0, 1 and 2 closed.
/// Nothing in here may panic or print: stderr is closed.
fn open_and_commit_without_stdio(uri: &str, path: &Path) -> Result<Seen, String> {
    let mut saved = [-1; 3];
    for fd in STANDARD_DESCRIPTORS {
        // SAFETY: copies fd above the standard range, then closes it; restored below.
        unsafe {
            saved[fd as usize] = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
            libc::close(fd);
        }
    }
    let outcome = (|| {
        let conn = Connection::open_with_flags_and_vfs(
            uri,
            OpenFlags::default() | OpenFlags::SQLITE_OPEN_URI,
            "io_uring",
        )
        .map_err(|e| e.to_string())?;
        let descriptors = descriptors_of(path);
        let at_open = standard_targets();
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(randomblob(10000));")
            .map_err(|e| e.to_string())?;
        let after_commit = standard_targets();
        Ok(Seen {
            descriptors,
            at_open,
            after_commit,
        })
    })();
    for fd in STANDARD_DESCRIPTORS {
        // SAFETY: puts each saved descriptor back in its slot and closes the copy.
        unsafe {
            libc::dup2(saved[fd as usize], fd);
            libc::close(saved[fd as usize]);
        }
    }
    outcome
}

#[test]
fn database_descriptors_never_take_stdin_stdout_or_stderr() {
    common::register();
    let dir = tempfile::tempdir().unwrap();
    for (name, uri_suffix, expected_descriptors) in [
        ("buffered.db", "", 1),
        // The O_DIRECT mode opens the database twice: buffered, then O_DIRECT.
        ("direct.db", "?uring_direct=on", 2),
    ] {
        let path = dir.path().join(name);
        let uri = format!("file:{}{uri_suffix}", path.display());
        let Seen {
            descriptors,
            at_open,
            after_commit,
        } = open_and_commit_without_stdio(&uri, &path).unwrap();
        assert_eq!(
            descriptors.len(),
            expected_descriptors,
            "{uri}: {descriptors:?}"
        );
        assert!(
            descriptors.iter().all(|&fd| fd >= 3),
            "{uri}: {descriptors:?}"
        );
        // Each low slot a database open was handed is plugged with /dev/null (os_unix.c
        // robust_open), so the next open does not land there; SQLite's own /dev/urandom
        // read may plug another. Nothing else may sit there: not the journal, say.
        let null = Some(PathBuf::from("/dev/null"));
        let plugged = at_open.iter().filter(|t| **t == null).count();
        assert!(plugged >= expected_descriptors, "{uri}: {at_open:?}");
        for target in at_open.iter().chain(&after_commit) {
            assert!(
                target.is_none() || *target == null,
                "{uri}: {after_commit:?}"
            );
        }
    }
}
