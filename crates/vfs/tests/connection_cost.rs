//! What opening and closing a connection costs beyond `unix`, held to the cheap path:
//!
//! * Closing a database or -shm descriptor must not release POSIX locks this process
//!   holds on the same file (a `unix`-VFS connection's; `tests/multiprocess.rs` checks
//!   that they survive), and must not pay for finding out when nobody holds any lock:
//!   one `fcntl` probe then, no look at whose locks they are.
//! * A thread that opens only files whose I/O all goes by syscall (the default for
//!   buffered files) sets up no ring.
//!
//! Its own binary, so no other test's closes move the process-wide lock-check counter.

mod common;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use common::{open, register, rows};
use sqlite_uring::{lock_owner_checks, thread_has_ring};

/// A descriptor for reading the locks on a file with `F_OFD_GETLK`. It holds no lock
/// itself, and it must outlive every POSIX lock of this process on the file: closing it
/// would release them, as closing any descriptor of the file does.
struct LockView(File);

impl LockView {
    fn open(path: &Path) -> LockView {
        LockView(File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())))
    }

    /// Every lock on the file as (type, start, length), lowest start first. Only this
    /// process touches the test's files, so each must be one of its POSIX locks.
    fn process_posix_locks(&self) -> Vec<(i16, i64, i64)> {
        let mut locks = Vec::new();
        let mut start = 0;
        loop {
            // SAFETY: flock is plain data; all-zero is valid (and l_pid must be 0).
            let mut lock: libc::flock = unsafe { std::mem::zeroed() };
            lock.l_type = libc::F_WRLCK as i16;
            lock.l_whence = libc::SEEK_SET as i16;
            lock.l_start = start;
            lock.l_len = 0;
            // SAFETY: `lock` is a valid, writable flock for the call; the fd is open.
            let rc = unsafe { libc::fcntl(self.0.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
            assert_eq!(rc, 0, "F_OFD_GETLK: {}", std::io::Error::last_os_error());
            if lock.l_type == libc::F_UNLCK as i16 {
                return locks;
            }
            assert_eq!(
                lock.l_pid as u32,
                std::process::id(),
                "a lock not held by this process's POSIX locks: {:?}",
                (lock.l_type, lock.l_start, lock.l_len, lock.l_pid)
            );
            locks.push((lock.l_type, lock.l_start, lock.l_len));
            // One owner's locks never overlap, and the kernel keeps them in order.
            if lock.l_len == 0 {
                return locks;
            }
            assert!(lock.l_start + lock.l_len > start, "no progress at {start}");
            start = lock.l_start + lock.l_len;
        }
    }
}

#[test]
fn close_checks_lock_owners_only_when_a_lock_is_held() {
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

        let checks_before = lock_owner_checks();
        for _ in 0..3 {
            let conn = open(&path, "io_uring");
            assert_eq!(rows(&conn, "SELECT x FROM t"), vec!["1"]);
        }
        assert_eq!(
            lock_owner_checks(),
            checks_before,
            "{journal_mode}: a close with no lock on the file looked for lock owners"
        );

        // A unix-VFS connection of this process holds SHARED (and, in WAL mode, read
        // locks on the -shm): our close must look, and leave its locks in place.
        let db_view = LockView::open(&path);
        let unix = open(&path, "unix");
        unix.execute_batch("BEGIN; SELECT count(*) FROM t;")
            .unwrap();
        let shm_view = (journal_mode == "WAL")
            .then(|| LockView::open(&dir.path().join(format!("close-{journal_mode}.db-shm"))));
        let unix_locks = (
            db_view.process_posix_locks(),
            shm_view.as_ref().map(LockView::process_posix_locks),
        );
        assert!(
            !unix_locks.0.is_empty(),
            "{journal_mode}: the unix VFS holds no POSIX lock on the database"
        );
        assert!(
            unix_locks.1.as_ref().is_none_or(|shm| !shm.is_empty()),
            "{journal_mode}: the unix VFS holds no POSIX lock on the -shm"
        );
        {
            let conn = open(&path, "io_uring");
            assert_eq!(rows(&conn, "SELECT x FROM t"), vec!["1"]);
        }
        assert!(
            lock_owner_checks() > checks_before,
            "{journal_mode}: a close beside a unix-VFS lock did not check whose it is"
        );
        assert_eq!(
            (
                db_view.process_posix_locks(),
                shm_view.as_ref().map(LockView::process_posix_locks),
            ),
            unix_locks,
            "{journal_mode}: our close released the unix VFS's POSIX locks (database, -shm)"
        );
        unix.execute_batch("COMMIT").unwrap();
        // The views close only now: closing them earlier would drop the unix locks.
        drop(unix);
        drop((db_view, shm_view));
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
