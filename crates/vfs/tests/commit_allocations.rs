//! What a commit allocates on the Rust heap, held to the cheap path (a rollback commit
//! opens, syncs, closes and deletes its journal each time, so whatever those calls
//! allocate is paid per commit, from caches the commit's fsyncs have cooled):
//!
//! * a WAL commit allocates nothing, nor do the writes, syncs, locks and file controls
//!   of any commit;
//! * a rollback commit allocates only what its journal's open keeps — its name, its
//!   `File` and that file's counters — and its first read's counters: four allocations,
//!   however many pages the transaction writes.
//!
//! The same statements through `unix` allocate nothing on this thread (SQLite takes its
//! memory from `malloc` directly), so every allocation counted is the VFS's.
//!
//! Its own binary: the global allocator counts, on the test's thread only.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rusqlite::{Connection, OpenFlags};

struct Counting;

thread_local! {
    /// Allocations made on this thread while it counts; `None` while it does not.
    static COUNTED: Cell<Option<u64>> = const { Cell::new(None) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches
// only a thread-local `Cell` and allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        COUNTED.with(|counted| counted.set(counted.get().map(|n| n + 1)));
        // SAFETY: forwarded caller contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded caller contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        COUNTED.with(|counted| counted.set(counted.get().map(|n| n + 1)));
        // SAFETY: forwarded caller contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations `work` makes on this thread.
fn allocations_of(work: impl FnOnce()) -> u64 {
    COUNTED.with(|counted| counted.set(Some(0)));
    work();
    COUNTED
        .with(|counted| counted.replace(None))
        .expect("still counting")
}

/// A database at `path` through `vfs`, in `journal_mode`, with synced commits and a
/// table, after a few commits (the first open of anything, a first read, made once).
fn prepared(path: &std::path::Path, vfs: &str, journal_mode: &str) -> Connection {
    let connection = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)
        .unwrap_or_else(|e| panic!("opening {} with {vfs}: {e}", path.display()));
    connection
        .execute_batch(&format!(
            "PRAGMA journal_mode={journal_mode}; PRAGMA synchronous=FULL;
             PRAGMA cache_size=2000;
             CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB);"
        ))
        .unwrap();
    for _ in 0..3 {
        connection
            .execute("INSERT INTO t(b) VALUES(randomblob(100))", [])
            .unwrap();
    }
    connection
}

/// Allocations of `commits` one-row commits, and of one transaction that writes a few
/// hundred pages, through `vfs` in `journal_mode`.
fn commit_allocations(vfs: &str, journal_mode: &str) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{vfs}-{journal_mode}.db"));
    let connection = prepared(&path, vfs, journal_mode);
    let mut insert = connection
        .prepare("INSERT INTO t(b) VALUES(randomblob(100))")
        .unwrap();
    let mut big = connection
        .prepare(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400)
             INSERT INTO t(b) SELECT randomblob(3000) FROM n",
        )
        .unwrap();
    // Statements prepared (and their first steps taken) before counting.
    insert.execute([]).unwrap();
    let small = allocations_of(|| {
        for _ in 0..COMMITS {
            insert.execute([]).unwrap();
        }
    });
    let large = allocations_of(|| {
        big.execute([]).unwrap();
    });
    let count: i64 = connection
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 3 + 1 + COMMITS as i64 + 400);
    (small, large)
}

const COMMITS: u64 = 20;

#[test]
fn a_commit_allocates_only_what_its_journal_keeps() {
    common::register();
    for journal_mode in ["DELETE", "WAL"] {
        assert_eq!(
            commit_allocations("unix", journal_mode),
            (0, 0),
            "{journal_mode}: through unix nothing is allocated on the Rust heap"
        );
    }
    let (small, large) = commit_allocations(common::VFS, "WAL");
    assert_eq!((small, large), (0, 0), "WAL commits allocate nothing");
    let (small, large) = commit_allocations(common::VFS, "DELETE");
    assert_eq!(
        small,
        4 * COMMITS,
        "allocations in {COMMITS} rollback commits: the journal's four each"
    );
    assert_eq!(
        large, 4,
        "allocations in one rollback transaction of 400 rows: the journal's four"
    );
}
