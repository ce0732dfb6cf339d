//! What opening and closing a connection costs beyond `unix`, held to the cheap path:
//!
//! * Closing a database or -shm descriptor must not release POSIX locks this process
//!   holds on the same file (a `unix`-VFS connection's; `tests/multiprocess.rs` checks
//!   that they survive), and must not pay for finding out when nobody holds any lock:
//!   one `fcntl` probe then, not a read of /proc/locks.
//! * A thread that opens only files whose I/O all goes by syscall (the default for
//!   buffered files) sets up no ring.
//!
//! Its own binary, so no other test's closes move the process-wide /proc/locks counter.

mod common;

use common::{open, register, rows};
use sqlite_uring::{proc_locks_scans, thread_has_ring};

fn process_posix_locks_on(path: &std::path::Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(path).unwrap().ino().to_string();
    let pid = std::process::id().to_string();
    std::fs::read_to_string("/proc/locks")
        .unwrap()
        .lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() >= 8
                && fields[1] == "POSIX"
                && fields[4] == pid
                && fields[5].rsplit(':').next() == Some(inode.as_str())
        })
        .count()
}

#[test]
fn close_reads_proc_locks_only_when_a_lock_is_held() {
    register();
    let dir = tempfile::tempdir().unwrap();
    for journal_mode in ["DELETE", "WAL"] {
        let path = dir.path().join(format!("close-{journal_mode}.db"));
        {
            let conn = open(&path, "io_uring");
            conn.execute_batch(&format!(
                "PRAGMA journal_mode={journal_mode}; CREATE TABLE t(x); INSERT INTO t VALUES(1);"
            ))
            .unwrap();
        }

        let scans_before = proc_locks_scans();
        for _ in 0..3 {
            let conn = open(&path, "io_uring");
            assert_eq!(rows(&conn, "SELECT x FROM t"), vec!["1"]);
        }
        assert_eq!(
            proc_locks_scans(),
            scans_before,
            "{journal_mode}: a close with no lock on the file read /proc/locks"
        );

        // A unix-VFS connection of this process holds SHARED (and, in WAL mode, a read
        // lock on the -shm): our close must look, and leave its locks in place.
        let unix = open(&path, "unix");
        unix.execute_batch("BEGIN; SELECT count(*) FROM t;")
            .unwrap();
        let unix_locks = process_posix_locks_on(&path);
        assert!(
            unix_locks > 0,
            "{journal_mode}: the unix VFS holds no POSIX lock"
        );
        {
            let conn = open(&path, "io_uring");
            assert_eq!(rows(&conn, "SELECT x FROM t"), vec!["1"]);
        }
        assert!(
            proc_locks_scans() > scans_before,
            "{journal_mode}: a close beside a unix-VFS lock did not check /proc/locks"
        );
        assert_eq!(
            process_posix_locks_on(&path),
            unix_locks,
            "{journal_mode}: our close released the unix VFS's POSIX locks"
        );
        unix.execute_batch("COMMIT").unwrap();
    }
}

#[test]
fn a_thread_makes_a_ring_only_for_files_that_submit() {
    register();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rings.db");
    let run_on_new_thread = |uri_query: &'static str| {
        let uri = format!("file:{}{uri_query}", path.display());
        std::thread::spawn(move || {
            let conn = rusqlite::Connection::open_with_flags_and_vfs(
                &uri,
                rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_URI,
                "io_uring",
            )
            .unwrap();
            conn.execute_batch("CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES(1);")
                .unwrap();
            thread_has_ring()
        })
        .join()
        .unwrap()
    };
    assert!(
        !run_on_new_thread(""),
        "default routing: the thread set up a ring it never submits to"
    );
    assert!(
        run_on_new_thread("?uring_reads=ring&uring_writes=ring&uring_syncs=ring"),
        "everything on the ring: the thread has no ring"
    );
}
