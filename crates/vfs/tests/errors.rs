//! Error paths against the real kernel: missing directory, read-only file, full disk,
//! io_uring unavailable. Each gives the SQLite error `unix` gives and leaves the database
//! intact.

mod common;

use common::{extended_code, integrity_ok, open, register, rows};
use rusqlite::{Connection, OpenFlags};
use std::process::Command;

const SQLITE_READONLY: i32 = 8;
const SQLITE_CANTOPEN: i32 = 14;
const SQLITE_FULL: i32 = 13;

#[test]
fn missing_directory_is_cantopen() {
    register();
    let error = Connection::open_with_flags_and_vfs(
        "/nonexistent-dir/sub/x.db",
        OpenFlags::default(),
        "io_uring",
    )
    .unwrap_err();
    assert_eq!(extended_code(&error) & 0xff, SQLITE_CANTOPEN, "{error}");
}

#[test]
fn unknown_or_malformed_uri_parameters_are_rejected() {
    register();
    let dir = tempfile::tempdir().unwrap();
    for query in [
        "uring_backend=fast",
        "uring_sync=sometimes",
        "uring_fallback=maybe",
        "uring_typo=1",
    ] {
        let uri = format!("file:{}?{query}", dir.path().join("u.db").display());
        let error = Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), "io_uring")
            .unwrap_err();
        assert_eq!(
            extended_code(&error) & 0xff,
            SQLITE_CANTOPEN,
            "{query}: {error}"
        );
    }
    for query in [
        "uring_backend=syscall",
        "uring_sync=fdatasync",
        "uring_fallback=none",
        "psow=0",
    ] {
        let uri = format!("file:{}?{query}", dir.path().join("u.db").display());
        let conn =
            Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), "io_uring").unwrap();
        conn.execute_batch("CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES(1);")
            .unwrap();
    }
}

/// An immutable file (chattr +i) cannot be opened for writing even by root: SQLite gets
/// a read-only handle, reads work, writes fail with SQLITE_READONLY.
#[test]
fn read_only_file_opens_read_only() {
    register();
    // tmpfs has no immutable attribute: use the target directory (ext4 in CI).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("ro.db");
    {
        let conn = open(&path, "io_uring");
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(42);")
            .unwrap();
    }
    let chattr = |flag: &str| Command::new("chattr").arg(flag).arg(&path).status();
    let status = chattr("+i").expect("chattr (e2fsprogs) is needed for this test");
    assert!(
        status.success(),
        "chattr +i failed on {}: this test needs ext4 and CAP_LINUX_IMMUTABLE",
        path.display()
    );
    let result = std::panic::catch_unwind(|| {
        let conn = open(&path, "io_uring");
        assert_eq!(rows(&conn, "SELECT x FROM t"), vec!["42"]);
        let error = conn.execute("INSERT INTO t VALUES(1)", []).unwrap_err();
        assert_eq!(extended_code(&error) & 0xff, SQLITE_READONLY, "{error}");
    });
    chattr("-i").unwrap();
    result.unwrap();
    integrity_ok(&open(&path, "io_uring"));
}

/// SQLite asks the VFS, before each write transaction, whether the database's path still
/// names the open file (SQLITE_FCNTL_HAS_MOVED). Renamed away, or replaced by another
/// file, it must not be written: SQLITE_READONLY_DBMOVED, as `unix` answers. Left where
/// it is, or reached through a second hard link, it is written normally.
#[test]
fn moved_database_is_readonly_dbmoved_like_unix() {
    const SQLITE_READONLY_DBMOVED: i32 = SQLITE_READONLY | (4 << 8);
    register();
    for vfs in ["unix", "io_uring"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let conn = open(&path, vfs);
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
            .unwrap();

        std::fs::hard_link(&path, dir.path().join("link.db")).unwrap();
        conn.execute("INSERT INTO t VALUES(2)", []).unwrap();

        std::fs::rename(&path, dir.path().join("renamed.db")).unwrap();
        let error = conn.execute("INSERT INTO t VALUES(3)", []).unwrap_err();
        assert_eq!(
            extended_code(&error),
            SQLITE_READONLY_DBMOVED,
            "{vfs}: {error}"
        );

        std::fs::copy(dir.path().join("renamed.db"), &path).unwrap();
        let error = conn.execute("INSERT INTO t VALUES(4)", []).unwrap_err();
        assert_eq!(
            extended_code(&error),
            SQLITE_READONLY_DBMOVED,
            "{vfs}: {error}"
        );
        drop(conn);

        let moved = open(&dir.path().join("renamed.db"), vfs);
        assert_eq!(rows(&moved, "SELECT x FROM t"), vec!["1", "2"], "{vfs}");
        integrity_ok(&moved);
    }
}

/// A symlink where SQLite will create the rollback journal is not followed: the write
/// fails as under `unix` (which opens every file O_NOFOLLOW) and nothing is created at the
/// symlink's target. A database reached through a symlink opens normally (its name is
/// resolved first, by xFullPathname).
#[test]
fn symlinked_journal_is_refused_like_unix() {
    register();
    let mut codes = Vec::new();
    for vfs in ["unix", "io_uring"] {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.db");
        {
            let conn = open(&real, vfs);
            conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
                .unwrap();
        }
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let through_link = open(&link, vfs);
        through_link.execute("INSERT INTO t VALUES(2)", []).unwrap();
        drop(through_link);

        let victim = dir.path().join("victim");
        std::os::unix::fs::symlink(&victim, dir.path().join("real.db-journal")).unwrap();
        let conn = open(&real, vfs);
        let error = conn.execute("INSERT INTO t VALUES(3)", []).unwrap_err();
        codes.push(extended_code(&error));
        assert!(!victim.exists(), "{vfs} created the symlink's target");
        assert_eq!(rows(&conn, "SELECT x FROM t"), vec!["1", "2"], "{vfs}");
    }
    assert_eq!(codes[0] & 0xff, SQLITE_CANTOPEN, "unix: {}", codes[0]);
    assert_eq!(codes[1], codes[0], "io_uring's error differs from unix's");
}

/// A tiny tmpfs fills up: SQLITE_FULL, and the database keeps its committed content.
#[test]
fn full_disk_is_sqlite_full_and_loses_nothing() {
    register();
    let mount = tempfile::tempdir().unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(mount.path())
        .status()
        .expect("mount(8) is needed for this test");
    assert!(
        status.success(),
        "mounting a tmpfs needs root (CI runs as root)"
    );
    let result = std::panic::catch_unwind(|| {
        let conn = open(&mount.path().join("full.db"), "io_uring");
        conn.execute_batch("CREATE TABLE t(x BLOB); INSERT INTO t VALUES(zeroblob(1000));")
            .unwrap();
        let mut full = None;
        for _ in 0..200 {
            if let Err(error) = conn.execute("INSERT INTO t VALUES(randomblob(20000))", []) {
                full = Some(error);
                break;
            }
        }
        let error = full.expect("512 KiB tmpfs never filled up");
        assert_eq!(extended_code(&error) & 0xff, SQLITE_FULL, "{error}");
        integrity_ok(&conn);
        let committed: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        drop(conn);
        let conn = open(&mount.path().join("full.db"), "io_uring");
        integrity_ok(&conn);
        assert_eq!(
            conn.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
                .unwrap(),
            committed
        );
    });
    let _ = Command::new("umount").arg(mount.path()).status();
    result.unwrap();
}

const CHILD_ENV: &str = "SQLITE_URING_TEST_CHILD";

/// Re-runs one test of this binary in a child process with `env` set.
fn run_child(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, "1");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

#[test]
fn io_uring_unavailable_is_explained_and_fallback_is_opt_in() {
    if std::env::var(CHILD_ENV).is_ok() {
        // Child: io_uring_setup "fails" (SQLITE_URING_SIMULATE_UNAVAILABLE names the errno).
        let errno = std::env::var("SQLITE_URING_SIMULATE_UNAVAILABLE").unwrap();
        let error = sqlite_uring::register(sqlite_uring::Options::default()).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, sqlite_uring::Error::IoUringUnavailable(_)),
            "{message}"
        );
        assert!(
            message.contains(&errno) && message.contains("Remedy"),
            "{message}"
        );
        if errno == "EPERM" {
            // The usual cause in a container, and its remedy, are named.
            assert!(
                message.contains("Docker's default seccomp profile blocks io_uring_setup")
                    && message.contains("--security-opt seccomp=unconfined"),
                "{message}"
            );
        }
        let registration = sqlite_uring::register(sqlite_uring::Options {
            vfs_name: "io_uring_fallback".into(),
            fallback_to_syscall: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(registration.backend, sqlite_uring::Backend::Syscall);
        assert!(registration.fallback_reason.unwrap().contains(&errno));
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("fb.db"), "io_uring_fallback");
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
            .unwrap();
        assert!(rows(&conn, "PRAGMA io_uring_stats")[0].contains("\"engine\":\"syscall\""));
        // Asking for the ring and refusing the fallback: the open is refused.
        let uri = format!(
            "file:{}?uring_backend=io_uring&uring_fallback=none",
            dir.path().join("fb.db").display()
        );
        let error =
            Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), "io_uring_fallback")
                .unwrap_err();
        assert_eq!(extended_code(&error) & 0xff, SQLITE_CANTOPEN, "{error}");
        // …unless the URI opts into the fallback too.
        let uri = format!(
            "file:{}?uring_backend=io_uring&uring_fallback=syscall",
            dir.path().join("fb.db").display()
        );
        Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), "io_uring_fallback")
            .unwrap();
        return;
    }
    for errno in ["EPERM", "ENOSYS", "ENOMEM"] {
        let output = run_child(
            "io_uring_unavailable_is_explained_and_fallback_is_opt_in",
            &[("SQLITE_URING_SIMULATE_UNAVAILABLE", errno)],
        );
        assert!(
            output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
            "child failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A forked child must not submit on the ring it inherited from its parent, nor write the
/// parent's queued writes a second time.
#[test]
fn fork_child_uses_its_own_ring() {
    if std::env::var(CHILD_ENV).is_err() {
        // Run in a fresh single-threaded process: fork() from the multi-threaded test
        // harness would copy only the forking thread.
        let output = run_child("fork_child_uses_its_own_ring", &[]);
        assert!(
            output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
            "child failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        return;
    }
    register();
    let dir = tempfile::tempdir().unwrap();
    let parent_db = dir.path().join("parent.db");
    let child_db = dir.path().join("child.db");
    let parent = open(&parent_db, "io_uring");
    parent
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    // SAFETY: the child only opens its own connection, writes, and _exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(|| {
            let conn = open(&child_db, "io_uring");
            conn.execute_batch(
                "CREATE TABLE c(x); WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<500)
                 INSERT INTO c SELECT x FROM n;",
            )
            .unwrap();
            assert_eq!(rows(&conn, "SELECT sum(x) FROM c"), vec!["125250"]);
        })
        .map_or(1, |()| 0);
        // SAFETY: leave without running the parent's atexit handlers or test harness.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    // The parent's ring still works after the child used its own.
    parent.execute_batch("INSERT INTO t VALUES(2);").unwrap();
    assert_eq!(rows(&parent, "SELECT sum(x) FROM t"), vec!["3"]);
    integrity_ok(&open(&child_db, "io_uring"));
    assert_eq!(
        rows(&open(&child_db, "io_uring"), "SELECT count(*) FROM c"),
        vec!["500"]
    );
}
