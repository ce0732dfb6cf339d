//! Error paths driven by the fault-injecting engine: each injected kernel error surfaces
//! as the right SQLite code at the right call, transient ones are retried, short
//! completions are finished, and the database is never corrupted.

mod common;

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use common::{extended_code, integrity_ok, open, rows};
use rusqlite::{ffi, Connection};
use sqlite_uring::{Backend, FaultKind, FaultPlan, FaultRule, OpKind, Options, Submission};

const SQLITE_CORRUPT: i32 = 11;
const SQLITE_FULL: i32 = 13;
const SQLITE_IOERR_READ: i32 = 10 | (1 << 8);
const SQLITE_IOERR_FSYNC: i32 = 10 | (4 << 8);
const SQLITE_IOERR_TRUNCATE: i32 = 10 | (6 << 8);

fn faulty_vfs(name: &str, backend: Backend) -> Arc<FaultPlan> {
    faulty_vfs_with(name, backend, false, Submission::Ring)
}

/// A fault-injecting VFS; `direct_io` opens main databases with O_DIRECT too; `syncs`
/// routes the io_uring backend's syncs (reads and writes stay on the ring).
fn faulty_vfs_with(
    name: &str,
    backend: Backend,
    direct_io: bool,
    syncs: Submission,
) -> Arc<FaultPlan> {
    let plan = FaultPlan::with_submissions(backend, [Submission::Ring, Submission::Ring, syncs]);
    sqlite_uring::register_with_faults(
        Options {
            vfs_name: name.into(),
            backend,
            direct_io,
            ..Default::default()
        },
        plan.clone(),
    )
    .expect("register fault-injecting VFS");
    plan
}

fn rule(op: OpKind, path_suffix: &str, count: u64, kind: FaultKind) -> FaultRule {
    FaultRule {
        op,
        path_suffix: Some(path_suffix.into()),
        skip: 0,
        count,
        kind,
    }
}

fn seeded(dir: &std::path::Path, vfs: &str) -> Connection {
    let conn = open(&dir.join("f.db"), vfs);
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<500)
           INSERT INTO t(v) SELECT printf('%0100d', x) FROM n;",
    )
    .unwrap();
    conn
}

/// The rollback journal of the database `seeded` made in `dir`, named as the fault
/// engine records it (symlinks resolved, as SQLite's xFullPathname resolves them).
fn journal_as_recorded(dir: &std::path::Path) -> String {
    format!(
        "{}-journal",
        dir.join("f.db").canonicalize().unwrap().display()
    )
}

fn count(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn fsync_error_fails_the_commit_and_keeps_old_data() {
    let plan = faulty_vfs("fault_fsync", Backend::IoUring);
    let dir = tempfile::tempdir().unwrap();
    let conn = seeded(dir.path(), "fault_fsync");
    plan.add(rule(
        OpKind::Sync,
        "f.db-journal",
        1,
        FaultKind::Errno(libc::EIO),
    ));
    let error = conn
        .execute_batch("BEGIN; DELETE FROM t WHERE id < 100; COMMIT;")
        .unwrap_err();
    assert_eq!(extended_code(&error), SQLITE_IOERR_FSYNC, "{error}");
    assert_eq!(plan.injected(), 1);
    let _ = conn.execute_batch("ROLLBACK");
    drop(conn);
    let conn = open(&dir.path().join("f.db"), "fault_fsync");
    integrity_ok(&conn);
    assert_eq!(
        count(&conn),
        500,
        "a commit whose journal sync failed must not be visible"
    );
}

#[test]
fn enospc_on_journal_write_is_sqlite_full_and_keeps_old_data() {
    let plan = faulty_vfs("fault_enospc", Backend::IoUring);
    let dir = tempfile::tempdir().unwrap();
    let conn = seeded(dir.path(), "fault_enospc");
    plan.add(rule(
        OpKind::Write,
        "f.db-journal",
        u64::MAX,
        FaultKind::Errno(libc::ENOSPC),
    ));
    let error = conn.execute_batch("UPDATE t SET v = v || 'x'").unwrap_err();
    assert_eq!(extended_code(&error) & 0xff, SQLITE_FULL, "{error}");
    plan.clear();
    integrity_ok(&conn);
    assert_eq!(
        rows(&conn, "SELECT count(*) FROM t WHERE v LIKE '%x'"),
        vec!["0"]
    );
    conn.execute_batch("UPDATE t SET v = v || 'y'").unwrap();
    assert_eq!(
        rows(&conn, "SELECT count(*) FROM t WHERE v LIKE '%y'"),
        vec!["500"]
    );
}

#[test]
fn short_and_interrupted_completions_are_finished_transparently() {
    for (backend, direct_io, syncs) in [
        (Backend::IoUring, false, Submission::Ring),
        (Backend::Syscall, false, Submission::Ring),
        // Ring writes (O_DIRECT) with syscall syncs: a short write must not let its sync run.
        (Backend::IoUring, true, Submission::Syscall),
    ] {
        let name = format!(
            "fault_short_{}{}_syncs_{}",
            backend.name(),
            if direct_io { "_direct" } else { "" },
            syncs.name()
        );
        let plan = faulty_vfs_with(&name, backend, direct_io, syncs);
        let dir = tempfile::tempdir().unwrap();
        let conn = seeded(dir.path(), &name);
        // An O_DIRECT write completes short only at a block boundary (the device transfers
        // whole blocks), so that is where its injected short completions stop.
        let db_short_bytes = if direct_io { 4096 } else { 100 };
        plan.add(rule(
            OpKind::Write,
            "f.db",
            50,
            FaultKind::Short(db_short_bytes),
        ));
        plan.add(rule(OpKind::Write, "f.db-journal", 50, FaultKind::Short(7)));
        plan.add(rule(
            OpKind::Write,
            "f.db",
            20,
            FaultKind::Errno(libc::EINTR),
        ));
        plan.add(rule(OpKind::Sync, "f.db", 3, FaultKind::Errno(libc::EINTR)));
        conn.execute_batch("UPDATE t SET v = upper(v) || 'short'; DELETE FROM t WHERE id > 400;")
            .unwrap();
        plan.add(rule(OpKind::Read, "f.db", 40, FaultKind::Short(1000)));
        plan.add(rule(
            OpKind::Read,
            "f.db",
            10,
            FaultKind::Errno(libc::EAGAIN),
        ));
        drop(conn);
        let conn = open(&dir.path().join("f.db"), &name);
        integrity_ok(&conn);
        assert_eq!(
            rows(&conn, "SELECT count(*), min(v LIKE '%short') FROM t"),
            vec!["400|1"]
        );
        assert!(
            plan.injected() >= 100,
            "{}: faults were not exercised: {}",
            backend.name(),
            plan.injected()
        );
    }
}

#[test]
fn read_errors_map_like_unix() {
    let plan = faulty_vfs("fault_read", Backend::IoUring);
    let dir = tempfile::tempdir().unwrap();
    drop(seeded(dir.path(), "fault_read"));
    let conn = open(&dir.path().join("f.db"), "fault_read");
    conn.execute_batch("PRAGMA cache_size=1").unwrap();
    plan.add(rule(OpKind::Read, "f.db", 1, FaultKind::Errno(libc::EBADF)));
    let error = conn
        .query_row("SELECT sum(length(v)) FROM t", [], |r| r.get::<_, i64>(0))
        .unwrap_err();
    assert_eq!(extended_code(&error), SQLITE_IOERR_READ, "{error}");
    // os_unix.c reports EIO on read as SQLITE_IOERR_CORRUPTFS, which SQLite's API turns
    // into SQLITE_CORRUPT.
    plan.add(rule(OpKind::Read, "f.db", 1, FaultKind::Errno(libc::EIO)));
    let error = conn
        .query_row("SELECT sum(length(v)) FROM t", [], |r| r.get::<_, i64>(0))
        .unwrap_err();
    assert_eq!(extended_code(&error) & 0xff, SQLITE_CORRUPT, "{error}");
    plan.clear();
    integrity_ok(&conn);
    assert_eq!(count(&conn), 500);
}

#[test]
fn truncate_error_is_ioerr_truncate() {
    let plan = faulty_vfs("fault_truncate", Backend::IoUring);
    let dir = tempfile::tempdir().unwrap();
    let conn = seeded(dir.path(), "fault_truncate");
    conn.execute_batch("PRAGMA journal_mode=TRUNCATE").unwrap();
    plan.add(rule(
        OpKind::Truncate,
        "f.db-journal",
        1,
        FaultKind::Errno(libc::EIO),
    ));
    let error = conn
        .execute_batch("DELETE FROM t WHERE id < 10")
        .unwrap_err();
    assert_eq!(extended_code(&error), SQLITE_IOERR_TRUNCATE, "{error}");
    plan.clear();
    drop(conn);
    let conn = open(&dir.path().join("f.db"), "fault_truncate");
    integrity_ok(&conn);
    // The database was synced before the journal truncation failed, so the delete is
    // durable; either way the database must be consistent and readable.
    let remaining = count(&conn);
    assert!(
        remaining == 491 || remaining == 500,
        "unexpected row count {remaining}"
    );
}

/// Write-behind sweep: fail the N-th write (or sync) of the journal, the WAL or the
/// database, for every N a transaction makes. Whatever the statement returns, the
/// connection's own view afterwards must equal what a fresh connection reads from disk
/// (no stale cache), be all-old or all-new, and pass integrity_check. The database cases
/// run again with O_DIRECT (`direct_io`), whose page writes take the aligned queue, and
/// with those writes on the ring but their syncs by syscall (`uring_syncs=syscall`), where
/// a sync must wait for, and be cancelled by, the ring writes before it.
#[test]
fn failing_any_queued_write_never_leaves_a_wrong_view() {
    let (ring, syscall) = (Submission::Ring, Submission::Syscall);
    for (journal_mode, suffix, op, direct_io, syncs) in [
        ("delete", "f.db-journal", OpKind::Write, false, ring),
        ("delete", "f.db", OpKind::Write, false, ring),
        ("delete", "f.db", OpKind::Sync, false, ring),
        ("wal", "f.db-wal", OpKind::Write, false, ring),
        ("wal", "f.db", OpKind::Write, false, ring),
        ("persist", "f.db-journal", OpKind::Write, false, ring),
        ("delete", "f.db", OpKind::Write, true, ring),
        ("delete", "f.db", OpKind::Sync, true, ring),
        ("delete", "f.db", OpKind::Read, true, ring),
        ("wal", "f.db", OpKind::Write, true, ring),
        ("delete", "f.db", OpKind::Write, true, syscall),
        ("delete", "f.db", OpKind::Sync, true, syscall),
        ("delete", "f.db-journal", OpKind::Write, false, syscall),
    ] {
        let name = format!(
            "fault_sweep_{journal_mode}_{}_{op:?}{}_syncs_{}",
            suffix.replace('.', "_"),
            if direct_io { "_direct" } else { "" },
            syncs.name()
        );
        let plan = faulty_vfs_with(&name, Backend::IoUring, direct_io, syncs);
        let mut failures_seen = 0;
        let mut injected_any = false;
        for skip in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let conn = seeded(dir.path(), &name);
            conn.execute_batch(&format!(
                "PRAGMA journal_mode={journal_mode}; PRAGMA cache_size=8;"
            ))
            .unwrap();
            if journal_mode == "wal" {
                // Frames must reach the database file too: checkpoint inside the sweep.
                conn.execute_batch("PRAGMA wal_autocheckpoint=3").unwrap();
            }
            plan.clear();
            plan.add(FaultRule {
                op,
                path_suffix: Some(suffix.into()),
                skip,
                count: 1,
                kind: FaultKind::Errno(libc::ENOSPC),
            });
            let outcome = conn.execute_batch("BEGIN; UPDATE t SET v = v || 'x' WHERE id % 3 = 0; DELETE FROM t WHERE id > 450; COMMIT;");
            let injected = plan.injected() > 0;
            plan.clear();
            let _ = conn.execute_batch("ROLLBACK");
            let own_view = rows(&conn, "SELECT count(*), sum(v LIKE '%x') FROM t");
            let fresh = open(&dir.path().join("f.db"), &name);
            integrity_ok(&fresh);
            let disk_view = rows(&fresh, "SELECT count(*), sum(v LIKE '%x') FROM t");
            assert_eq!(
                own_view, disk_view,
                "{name} skip {skip}: connection view differs from disk ({outcome:?})"
            );
            let expected = if outcome.is_ok() { "450|150" } else { "500|0" };
            assert!(
                disk_view == [expected] || (disk_view == ["450|150"] && injected),
                "{name} skip {skip}: {disk_view:?} after {outcome:?}"
            );
            failures_seen += outcome.is_err() as u32;
            injected_any |= injected;
            if !injected {
                break;
            }
        }
        assert!(injected_any, "{name}: no fault was injected");
        // Database writes in WAL mode happen only in (auto)checkpoints, whose errors SQLite
        // ignores by design; everywhere else the failure must reach the statement.
        if !(journal_mode == "wal" && suffix == "f.db") {
            assert!(
                failures_seen > 0,
                "{name}: no injected failure reached SQLite"
            );
        }
    }
}

/// The syncs of a rollback commit run in `unix`'s order (os_unix.c unixSync: the file,
/// then its directory once after creating it): journal, directory, journal, database.
/// Syscalls in turn run in the order the engine is handed them; the other order made
/// rollback commits slower on ext4 (the directory's fsync then commits the journal's
/// creation itself, and the journal's fsync needs a second commit).
#[test]
fn rollback_commit_syncs_in_unix_order_file_before_its_directory() {
    for (name, backend) in [
        ("order_syscall", Backend::Syscall),
        ("order_uring", Backend::IoUring),
    ] {
        let plan = faulty_vfs_with(name, backend, false, Submission::Syscall);
        let dir = tempfile::tempdir().unwrap();
        let conn = seeded(dir.path(), name);
        plan.start_recording();
        conn.execute("INSERT INTO t(v) VALUES('one more')", [])
            .unwrap();
        let database = dir.path().join("f.db").canonicalize().unwrap();
        let journal = journal_as_recorded(dir.path());
        let directory = dir.path().canonicalize().unwrap().display().to_string();
        let syncs: Vec<String> = plan
            .recorded()
            .into_iter()
            .filter(|op| op.kind == OpKind::Sync)
            .map(|op| op.path)
            .collect();
        assert_eq!(
            syncs,
            vec![
                journal.clone(),
                directory,
                journal,
                database.display().to_string()
            ],
            "{name}"
        );
        assert_eq!(count(&conn), 501);
        integrity_ok(&conn);
    }
}

/// Write-behind of a rollback journal: the header and the first record reach the kernel
/// as one write, each later record as one write ending at its checksum (the flush point
/// that lets a failed journal write surface before SQLite changes the page), and the
/// header's record count as one more. The page number that follows the header is not
/// mistaken for a record's checksum (both are 4 bytes after ≥ 512).
#[test]
fn journal_writes_coalesce_per_record_and_the_header_joins_the_first() {
    let plan = faulty_vfs_with(
        "journal_records",
        Backend::Syscall,
        false,
        Submission::Syscall,
    );
    let dir = tempfile::tempdir().unwrap();
    let conn = seeded(dir.path(), "journal_records");
    let page_bytes = conn
        .query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0))
        .unwrap() as u64;
    plan.start_recording();
    // Changes rows on three pages far apart: three journal records.
    conn.execute_batch("UPDATE t SET v = 'x' || v WHERE id IN (1, 250, 500)")
        .unwrap();
    let journal = journal_as_recorded(dir.path());
    let journal_writes: Vec<(u64, u32)> = plan
        .recorded()
        .into_iter()
        .filter(|op| op.kind == OpKind::Write && op.path == journal)
        .map(|op| op.range.unwrap())
        .collect();
    let header_bytes = 512; // the sector size SQLite uses with POWERSAFE_OVERWRITE
    let record_bytes = page_bytes + 8;
    // All writes but the last (the record count) end a record; the first also holds the
    // header.
    let records = journal_writes.len() as u64 - 1;
    assert!(records >= 3, "{journal_writes:?}");
    let mut expected = vec![(0, (header_bytes + record_bytes) as u32)];
    for record in 1..records {
        expected.push((header_bytes + record * record_bytes, record_bytes as u32));
    }
    // The record count, rewritten into the header before the second journal sync.
    expected.push((0, 12));
    assert_eq!(journal_writes, expected);
    assert_eq!(count(&conn), 500);
    integrity_ok(&conn);
}

/// A thread at fsync does not hold up another thread's commit to another database:
/// while one thread's commit is held at its journal's second fsync (the one that follows
/// the queued header rewrite), another thread commits to another database. With syncs by
/// syscall the fsync waits without the queue's lock; with ring syncs (linked to the
/// queued writes, as an O_DIRECT database's are) the batch is taken out of the queue and
/// submitted without it; and the two databases' queues are separate anyway. With one
/// process-wide queue whose lock a ring sync held, commits on two databases took turns
/// at the disk.
#[test]
fn a_thread_at_fsync_does_not_hold_up_another_threads_commit() {
    for syncs in [Submission::Syscall, Submission::Ring] {
        commit_while_another_thread_is_at_fsync(syncs);
    }
}

fn commit_while_another_thread_is_at_fsync(syncs: Submission) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    let name = format!("sync_off_lock_{}", syncs.name());
    let plan = faulty_vfs_with(&name, Backend::IoUring, false, syncs);
    let dir = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let conn_a = seeded(&dir_a, &name);
    let conn_b = seeded(&dir_b, &name);

    let (held_tx, held_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let held_tx = std::sync::Mutex::new(held_tx);
    let journal_a = journal_as_recorded(&dir_a);
    let journal_a_syncs = AtomicUsize::new(0);
    plan.before_sync(move |path| {
        if path == journal_a && journal_a_syncs.fetch_add(1, Ordering::SeqCst) == 1 {
            held_tx.lock().unwrap().send(()).unwrap();
            // Bounded, so the old behaviour fails the test instead of hanging it.
            let released = release_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(20));
            assert!(released.is_ok(), "the other thread never committed");
        }
    });

    let a = std::thread::spawn(move || {
        conn_a
            .execute("UPDATE t SET v = 'a' WHERE id = 1", [])
            .unwrap();
        conn_a
    });
    held_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("thread A never reached its journal's second fsync");
    conn_b
        .execute("UPDATE t SET v = 'b' WHERE id = 1", [])
        .unwrap();
    release_tx.send(()).unwrap();
    let conn_a = a.join().unwrap();
    plan.before_sync(|_| {});
    assert_eq!(rows(&conn_a, "SELECT v FROM t WHERE id = 1"), vec!["a"]);
    assert_eq!(rows(&conn_b, "SELECT v FROM t WHERE id = 1"), vec!["b"]);
    integrity_ok(&conn_a);
    integrity_ok(&conn_b);
}

/// Opens `f.db` in `dir` (seeded) in WAL mode with a tiny page cache, and leaves a
/// transaction open whose inserts spilled WAL frames that are still queued (write-behind
/// submits non-commit frames only at the database's next flush point).
fn open_with_queued_frames(dir: &std::path::Path, vfs: &str) -> Connection {
    let conn = seeded(dir, vfs);
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA cache_size=2;
         BEGIN;
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<2000)
           INSERT INTO t(v) SELECT printf('%0100d', x) FROM n;",
    )
    .unwrap();
    conn
}

/// One database's writes fail while another database of the same process, written
/// through the same VFS on another thread, commits 1,000 transactions: the healthy
/// database never sees the failure, and the failing one reports its own error. Thread A
/// leaves spilled WAL frames queued, then the disk "fills up" for A's WAL only; thread B
/// commits meanwhile. With one queue per process, B's first call flushed A's frames and
/// B's commit failed with A's error.
#[test]
fn a_failing_database_leaves_another_database_of_the_process_working() {
    use std::sync::mpsc;

    let plan = faulty_vfs_with(
        "isolated_failure",
        Backend::IoUring,
        false,
        Submission::Syscall,
    );
    let dir = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let conn_b = seeded(&dir_b, "isolated_failure");
    conn_b
        .execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        .unwrap();

    let (queued_tx, queued_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let a_dir = dir_a.clone();
    let a = std::thread::spawn(move || {
        let conn = open_with_queued_frames(&a_dir, "isolated_failure");
        queued_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        conn
    });
    queued_rx.recv().unwrap();
    plan.add(rule(
        OpKind::Write,
        "a/f.db-wal",
        u64::MAX,
        FaultKind::Errno(libc::ENOSPC),
    ));
    let b = std::thread::spawn(move || {
        for i in 0..1000 {
            conn_b
                .execute("INSERT INTO t(v) VALUES(?1)", [format!("b{i}")])
                .unwrap_or_else(|e| panic!("database B's commit {i} failed: {e}"));
        }
        conn_b
    });
    let conn_b = b
        .join()
        .expect("database B must commit all 1,000 transactions");
    assert_eq!(
        plan.injected(),
        0,
        "database A's queued frames were submitted by database B's calls"
    );
    go_tx.send(()).unwrap();
    let conn_a = a.join().unwrap();
    // A's next call flushes its own queue: the frames held back all along fail now.
    let _ = conn_a.query_row("PRAGMA io_uring_stats", [], |_| Ok(()));
    assert!(
        plan.injected() > 0,
        "database A had no frames queued: the test proved nothing"
    );
    let error = conn_a.execute_batch("COMMIT").unwrap_err();
    assert_eq!(extended_code(&error) & 0xff, SQLITE_FULL, "{error}");
    plan.clear();
    let _ = conn_a.execute_batch("ROLLBACK");
    assert_eq!(
        count(&conn_a),
        500,
        "A's failed transaction must not be visible"
    );
    integrity_ok(&conn_a);
    assert_eq!(count(&conn_b), 1500);
    integrity_ok(&conn_b);
    drop(conn_b);
    let fresh = open(&dir_b.join("f.db"), "isolated_failure");
    assert_eq!(count(&fresh), 1500);
}

/// Two databases written by two threads never flush each other's queue: while thread A
/// holds queued WAL frames, every op thread B's transactions submit is B's own (the fault
/// engine records each op as it is submitted); A's frames are submitted by A's next call.
#[test]
fn a_database_never_submits_another_databases_queued_writes() {
    use std::sync::mpsc;

    let plan = faulty_vfs_with(
        "isolated_flush",
        Backend::IoUring,
        false,
        Submission::Syscall,
    );
    let dir = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let conn_b = seeded(&dir_b, "isolated_flush");
    let a_prefix = format!("{}/", dir_a.canonicalize().unwrap().display());
    let b_directory = dir_b.canonicalize().unwrap().display().to_string();
    let b_prefix = format!("{b_directory}/");

    let (queued_tx, queued_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (flushed_tx, flushed_rx) = mpsc::channel::<()>();
    let (commit_tx, commit_rx) = mpsc::channel::<()>();
    let a_dir = dir_a.clone();
    let a = std::thread::spawn(move || {
        let conn = open_with_queued_frames(&a_dir, "isolated_flush");
        queued_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // A file control on A's database: a quiet flush point of A's queue.
        conn.query_row("PRAGMA io_uring_stats", [], |_| Ok(()))
            .unwrap();
        flushed_tx.send(()).unwrap();
        commit_rx.recv().unwrap();
        conn.execute_batch("COMMIT").unwrap();
        conn
    });
    queued_rx.recv().unwrap();
    plan.start_recording();
    let b = std::thread::spawn(move || {
        // Rollback-mode commits (journal, database, deletes) and reads.
        for i in 0..20 {
            conn_b
                .execute(
                    "UPDATE t SET v = ?1 WHERE id = ?2",
                    (format!("b{i}"), i + 1),
                )
                .unwrap();
            assert_eq!(count(&conn_b), 500);
        }
        conn_b
    });
    let conn_b = b.join().unwrap();
    let during_b = plan.recorded();
    assert!(!during_b.is_empty(), "database B submitted nothing");
    for op in &during_b {
        assert!(
            op.path.starts_with(&b_prefix) || op.path == b_directory,
            "a call on database B submitted {op:?}"
        );
    }
    go_tx.send(()).unwrap();
    flushed_rx.recv().unwrap();
    let by_a = plan.recorded().split_off(during_b.len());
    assert!(
        by_a.iter().any(|op| op.kind == OpKind::Write),
        "database A had nothing queued: the test proved nothing"
    );
    for op in &by_a {
        assert!(
            op.kind == OpKind::Write && op.path == format!("{a_prefix}f.db-wal"),
            "A's flush point submitted {op:?}"
        );
    }
    commit_tx.send(()).unwrap();
    let conn_a = a.join().unwrap();
    assert_eq!(count(&conn_a), 2500);
    integrity_ok(&conn_a);
    assert_eq!(rows(&conn_b, "SELECT v FROM t WHERE id = 20"), vec!["b19"]);
    integrity_ok(&conn_b);
}

/// With `synchronous=OFF` a rollback commit in `journal_mode=PERSIST` or
/// `locking_mode=EXCLUSIVE` ends by zeroing the journal's header (pager.c
/// `zeroJournalHdr`), a write that no call on the journal follows: the next call is
/// SQLITE_FCNTL_COMMIT_PHASETWO on the database, whose result SQLite checks. A failure of
/// that write fails the COMMIT there, as the failed `pwrite` does under `unix`, and the
/// connection's view stays the disk's.
#[test]
fn a_failed_write_of_the_journal_header_reset_fails_the_commit() {
    const SQLITE_IOERR: i32 = 10;
    let plan = faulty_vfs("journal_header_reset", Backend::IoUring);
    for mode in ["journal_mode=PERSIST", "locking_mode=EXCLUSIVE"] {
        let dir = tempfile::tempdir().unwrap();
        let conn = seeded(dir.path(), "journal_header_reset");
        conn.execute_batch(&format!(
            "PRAGMA {mode}; PRAGMA synchronous=OFF;
             BEGIN; UPDATE t SET v = 'x' WHERE id <= 10; PRAGMA user_version = 7;"
        ))
        .unwrap();
        // Every page the commit changes is in the journal now, page 1 too (the header
        // the commit changes): the only journal write left is the reset.
        let injected = plan.injected();
        plan.add(rule(
            OpKind::Write,
            "f.db-journal",
            u64::MAX,
            FaultKind::Errno(libc::EIO),
        ));
        let outcome = conn.execute_batch("COMMIT");
        plan.clear();
        assert_eq!(
            plan.injected(),
            injected + 1,
            "{mode}: the commit's journal writes"
        );
        let error = outcome.expect_err(&format!(
            "{mode}: the journal header's reset failed, yet COMMIT succeeded"
        ));
        assert_eq!(
            extended_code(&error) & 0xff,
            SQLITE_IOERR,
            "{mode}: {error}"
        );
        let _ = conn.execute_batch("ROLLBACK");
        // The first read after the error may roll the journal back, or fail once more.
        let changed = |conn: &Connection| {
            conn.query_row("SELECT count(*) FROM t WHERE v = 'x'", [], |r| {
                r.get::<_, i64>(0)
            })
        };
        let own_view = (0..3)
            .find_map(|_| changed(&conn).ok())
            .expect("the connection reads again");
        drop(conn);
        let fresh = open(&dir.path().join("f.db"), "journal_header_reset");
        integrity_ok(&fresh);
        assert_eq!(changed(&fresh).unwrap(), own_view, "{mode}");
    }
}

/// One file opened through a VFS's xOpen as SQLite opens it (named from one
/// `sqlite3_create_filename` block, so a WAL is `<database>-wal`), its methods called one
/// by one: calls of two connections interleaved as their threads can interleave them.
struct RawFile {
    file: *mut ffi::sqlite3_file,
    _storage: Vec<u64>,
    names: *const c_char,
}

impl RawFile {
    /// xOpen of `database` (a main database), or of its WAL when `wal`.
    fn open(vfs_name: &str, database: &std::path::Path, wal: bool) -> RawFile {
        let vfs = common::system_calls::vfs(vfs_name);
        let text = database.to_str().unwrap();
        let c_database = CString::new(text).unwrap();
        let c_journal = CString::new(format!("{text}-journal")).unwrap();
        let c_wal = CString::new(format!("{text}-wal")).unwrap();
        let kind = if wal {
            ffi::SQLITE_OPEN_WAL
        } else {
            ffi::SQLITE_OPEN_MAIN_DB
        };
        let flags = kind | ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE;
        // SAFETY: NUL-terminated strings, copied by sqlite3_create_filename; the block
        // is freed in Drop, after xClose; `storage` has szOsFile bytes, 8-aligned, for
        // xOpen to fill.
        unsafe {
            let names = ffi::sqlite3_create_filename(
                c_database.as_ptr(),
                c_journal.as_ptr(),
                c_wal.as_ptr(),
                0,
                std::ptr::null_mut(),
            );
            let name = if wal {
                ffi::sqlite3_filename_wal(names)
            } else {
                names
            };
            let mut storage = vec![0u64; ((*vfs).szOsFile as usize).div_ceil(8)];
            let file = storage.as_mut_ptr() as *mut ffi::sqlite3_file;
            let mut out_flags = 0;
            let rc = ((*vfs).xOpen.unwrap())(vfs, name, file, flags, &mut out_flags);
            assert_eq!(rc, ffi::SQLITE_OK, "xOpen of {text} (wal: {wal})");
            RawFile {
                file,
                _storage: storage,
                names,
            }
        }
    }

    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: xOpen succeeded, so pMethods is set and static.
        unsafe { &*(*self.file).pMethods }
    }

    fn write(&self, data: &[u8], offset: i64) -> c_int {
        let amount = data.len() as c_int;
        // SAFETY: a live file; `data` holds `amount` bytes.
        unsafe { (self.methods().xWrite.unwrap())(self.file, data.as_ptr().cast(), amount, offset) }
    }

    fn file_size(&self) -> c_int {
        let mut size = 0;
        // SAFETY: a live file and a writable i64.
        unsafe { (self.methods().xFileSize.unwrap())(self.file, &mut size) }
    }

    /// xFileControl of an opcode that takes no argument.
    fn file_control(&self, op: c_int) -> c_int {
        // SAFETY: a live file; `op` reads no argument.
        unsafe { (self.methods().xFileControl.unwrap())(self.file, op, std::ptr::null_mut()) }
    }
}

impl Drop for RawFile {
    fn drop(&mut self) {
        // SAFETY: the file is open and closed once; the names outlive the close.
        unsafe {
            (self.methods().xClose.unwrap())(self.file);
            ffi::sqlite3_free_filename(self.names);
        }
    }
}

/// A checkpoint's writes reach the database at once even when SQLITE_FCNTL_CKPT_START
/// returned a failure: SQLite ignores its result and checkpoints anyway, and held back
/// until CKPT_DONE, whose result it ignores too, the writes could fail there unreported
/// while SQLite records the frames as copied. Here the checkpointer's CKPT_START flushes
/// a writer's spilled WAL frame, which fails; the writer's next call (on its own thread,
/// in SQLite) learns of it; then the checkpoint copies page 1, whose write fails and must
/// say so.
#[test]
fn a_checkpoint_whose_start_failed_still_writes_every_page_at_once() {
    const VFS: &str = "checkpoint_start_failed";
    let plan = faulty_vfs_with(VFS, Backend::IoUring, false, Submission::Syscall);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let database = RawFile::open(VFS, &path, false);
    let wal = RawFile::open(VFS, &path, true);
    // A frame of page 2 with no commit size, then its page: both queued.
    let mut header = [0u8; 24];
    header[3] = 2;
    assert_eq!(wal.write(&header, 32), ffi::SQLITE_OK);
    assert_eq!(wal.write(&[7; 4096], 56), ffi::SQLITE_OK);
    plan.add(rule(
        OpKind::Write,
        "f.db-wal",
        u64::MAX,
        FaultKind::Errno(libc::ENOSPC),
    ));
    assert_eq!(
        database.file_control(ffi::SQLITE_FCNTL_CKPT_START) & 0xff,
        SQLITE_FULL,
        "the checkpoint's start flushes the writer's frame"
    );
    assert!(
        plan.injected() > 0,
        "nothing was queued: the test proved nothing"
    );
    assert_eq!(
        wal.file_size() & 0xff,
        SQLITE_FULL,
        "the writer learns that its frame was lost"
    );
    plan.add(rule(
        OpKind::Write,
        "f.db",
        u64::MAX,
        FaultKind::Errno(libc::ENOSPC),
    ));
    assert_eq!(
        database.write(&[1; 4096], 0) & 0xff,
        SQLITE_FULL,
        "the checkpoint's write of page 1 must reach the kernel before it returns"
    );
    assert_eq!(
        database.file_control(ffi::SQLITE_FCNTL_CKPT_DONE),
        ffi::SQLITE_NOTFOUND
    );
}

/// Names the backend of the child process of
/// `a_panic_with_ring_io_in_flight_aborts_the_process`.
const PANIC_CHILD_ENV: &str = "SQLITE_URING_TEST_PANIC_IN_FLIGHT";
const RETURNED: &str = "the injected panic returned to SQLite:";
const ABORT_MESSAGE: &str = "sqlite-uring: a panic while ring I/O was in flight; aborting \
                             rather than freeing buffers the kernel may use";

/// A broken invariant while the kernel holds a batch's buffers stops the process with a
/// message: unwinding would return to SQLite, which frees or reuses the buffers the
/// kernel may still read or write. The same injected panic with nothing in flight (the
/// syscall backend) does unwind, to an I/O error, which is what the ring case would do
/// without its abort guard. Each case runs in a child process: this test binary re-run.
#[test]
fn a_panic_with_ring_io_in_flight_aborts_the_process() {
    if let Ok(backend) = std::env::var(PANIC_CHILD_ENV) {
        let backend = match backend.as_str() {
            "io_uring" => Backend::IoUring,
            _ => Backend::Syscall,
        };
        let plan = faulty_vfs("panicking", backend);
        let dir = tempfile::tempdir().unwrap();
        let conn = seeded(dir.path(), "panicking");
        // The commit writes dozens of database pages: one write-behind batch on the ring.
        plan.add(rule(OpKind::Write, "f.db", 1, FaultKind::PanicInFlight));
        let result = conn.execute_batch("UPDATE t SET v = upper(v) || 'x';");
        println!("{RETURNED} {result:?}");
        assert_eq!(plan.injected(), 1);
        return;
    }
    let run = |backend: &str| {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "a_panic_with_ring_io_in_flight_aborts_the_process",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(PANIC_CHILD_ENV, backend);
        // SAFETY: setrlimit is async-signal-safe; the child dumps no core when it aborts.
        unsafe {
            command.pre_exec(|| {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &none);
                Ok(())
            });
        }
        let output = command.output().unwrap();
        let said = format!(
            "status {}\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output, said)
    };

    use std::os::unix::process::ExitStatusExt;
    let (output, said) = run("io_uring");
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGABRT),
        "a panic with ring I/O in flight must abort the process:\n{said}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("ring ops in flight (FaultKind::PanicInFlight)")
            && stderr.contains(ABORT_MESSAGE),
        "the abort must say why:\n{said}"
    );
    assert!(!said.contains(RETURNED), "{said}");

    let (output, said) = run("syscall");
    assert!(
        output.status.success(),
        "a panic with nothing in flight must not stop the process:\n{said}"
    );
    assert!(
        said.contains(&format!("{RETURNED} Err(")) && said.contains("disk I/O error"),
        "a panic with nothing in flight must reach SQLite as an I/O error:\n{said}"
    );
    assert!(!said.contains(ABORT_MESSAGE), "{said}");
}
