//! A writer process that ends without closing its connection, in the middle of a
//! transaction large enough to spill SQLite's page cache (WAL frames, or in rollback mode
//! database pages, written before the commit):
//! * a normal exit (`exit()`, return from `main`) leaves the files byte-identical to
//!   `unix`'s: the VFS writes its queued writes at exit, as `unix` wrote them at `xWrite`;
//! * SIGKILL loses only WAL frames SQLite had not committed: the committed data, the
//!   rollback journal, the rollback-mode database (spilled pages included) and the
//!   committed part of the WAL are the same as `unix`'s;
//! * a `fork()`ed child's exit never writes its parent's queued writes.
//!
//! Each writer is this test binary re-run as a child (`SQLITE_URING_TEST_WRITER`), with
//! SQLite's PRNG seeded so WAL salts and journal nonces are the same under both VFSes.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{await_line, Guard, Mode};
use rusqlite::{Connection, OpenFlags};

const WRITER_ENV: &str = "SQLITE_URING_TEST_WRITER";
/// Rows committed before the large transaction.
const COMMITTED_ROWS: i64 = 200;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// `std::process::exit(0)` with the connection open.
    Exit,
    /// Print `spilled` and wait to be killed.
    Kill,
    /// `fork()`; the child exits at once, then the parent exits (both with `exit()`).
    ForkThenExit,
}

fn db_path(dir: &Path) -> PathBuf {
    dir.join("x.db")
}

/// Registers `vfs` alone (`unix` needs nothing): a process that only ever uses the
/// syscall backend must not have made a ring, whose fork handler would hide a missing one.
fn register_only(vfs: &str) {
    match vfs {
        "io_uring_sync" => {
            sqlite_uring::register(sqlite_uring::Options {
                vfs_name: "io_uring_sync".into(),
                backend: sqlite_uring::Backend::Syscall,
                ..Default::default()
            })
            .unwrap();
        }
        "unix" => {}
        _ => common::register(),
    }
}

fn seed_prng() {
    common::seed_prng(7);
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The child: commits some rows, then opens a transaction that spills, then ends.
fn writer(mode: Mode, vfs: &str, dir: &Path, ending: Ending) {
    register_only(vfs);
    seed_prng();
    let db = db_path(dir);
    let conn = Connection::open_with_flags_and_vfs(&db, OpenFlags::default(), vfs).unwrap();
    let reported: String = conn
        .query_row(&format!("PRAGMA journal_mode={}", mode.pragma()), [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(reported, mode.pragma());
    conn.execute_batch(&format!(
        "PRAGMA cache_size=10;
         CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<{COMMITTED_ROWS})
           INSERT INTO t(b) SELECT printf('%0300d', x) FROM n;"
    ))
    .unwrap();
    let wal = dir.join("x.db-wal");
    println!("committed db={} wal={}", file_len(&db), file_len(&wal));
    // ~600 KB of new rows through a 10-page cache: SQLite writes most of them before
    // the commit that never comes.
    conn.execute_batch(
        "BEGIN;
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<2000)
           INSERT INTO t(b) SELECT printf('%0300d', x + 1000000) FROM n;",
    )
    .unwrap();
    std::io::stdout().flush().unwrap();
    match ending {
        Ending::Exit => {
            std::mem::forget(conn);
            std::process::exit(0);
        }
        Ending::Kill => {
            println!("spilled");
            std::io::stdout().flush().unwrap();
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        Ending::ForkThenExit => {
            let before = file_len(&wal);
            // SAFETY: the child only calls exit(), whose handlers are ours (the queue's
            // flush, which must find nothing of its own to write) and libc's.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                // SAFETY: ends the forked child; atexit handlers run.
                unsafe { libc::exit(0) };
            }
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            println!(
                "wal before fork={before} after child exit={}",
                file_len(&wal)
            );
            std::io::stdout().flush().unwrap();
            std::mem::forget(conn);
            std::process::exit(0);
        }
    }
}

fn spawn_writer(test: &str, mode: Mode, vfs: &str, dir: &Path, ending: Ending) -> Guard {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(
            WRITER_ENV,
            format!("{mode:?}|{vfs}|{}|{ending:?}", dir.display()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Guard::new(child, format!("{vfs} writer ({mode:?}, {ending:?})"))
}

/// In a child: runs the writer the parent asked for and returns true.
fn run_writer_if_child() -> bool {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return false;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let mode = if parts[0] == "Wal" {
        Mode::Wal
    } else {
        Mode::Rollback
    };
    let ending = match parts[3] {
        "Exit" => Ending::Exit,
        "Kill" => Ending::Kill,
        _ => Ending::ForkThenExit,
    };
    writer(mode, parts[1], Path::new(parts[2]), ending);
    true
}

/// `committed db=N wal=M` from a writer's stdout.
fn committed_sizes(stdout: &[u8]) -> (u64, u64) {
    let text = String::from_utf8_lossy(stdout);
    // The test harness may have printed the test's name on the same line.
    let line = text
        .lines()
        .find_map(|l| l.find("committed db=").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no committed sizes in {text}"));
    let value = |key: &str| -> u64 {
        line.split(' ')
            .find_map(|f| f.strip_prefix(key))
            .unwrap()
            .parse()
            .unwrap()
    };
    (value("db="), value("wal="))
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Committed rows and their checksum, read through `unix` (which recovers a hot journal
/// or replays the WAL), then the connection is closed (checkpointing a WAL).
fn committed_content(dir: &Path) -> (i64, i64) {
    let conn = common::open(&db_path(dir), "unix");
    common::integrity_ok(&conn);
    conn.query_row("SELECT count(*), sum(length(b) * a) FROM t", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .unwrap()
}

fn exit_without_close_matches_unix(mode: Mode) {
    let test = format!("exit_without_close_leaves_the_files_unix_leaves_{mode:?}").to_lowercase();
    let mut sizes = Vec::new();
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    for (vfs, dir) in ["unix", common::VFS].iter().zip(&dirs) {
        let output = spawn_writer(&test, mode, vfs, dir.path(), Ending::Exit).wait();
        assert!(
            output.status.success(),
            "{}",
            common::describe(vfs, &output)
        );
        sizes.push(committed_sizes(&output.stdout));
    }
    assert_eq!(
        sizes[0], sizes[1],
        "sizes at the last commit (unix, io_uring)"
    );
    let (unix_dir, ours_dir) = (dirs[0].path(), dirs[1].path());
    // The scenario is one where SQLite wrote uncommitted pages before the exit.
    let (db_bytes, wal_bytes) = sizes[0];
    match mode {
        Mode::Wal => assert!(file_len(&unix_dir.join("x.db-wal")) > wal_bytes),
        Mode::Rollback => assert!(file_len(&unix_dir.join("x.db")) > db_bytes),
    }
    assert_eq!(names(unix_dir), names(ours_dir));
    for name in names(unix_dir) {
        let unix = std::fs::read(unix_dir.join(&name)).unwrap();
        let ours = std::fs::read(ours_dir.join(&name)).unwrap();
        assert!(
            unix == ours,
            "{mode:?}: {name} differs after an exit without close: unix {} bytes, io_uring {}",
            unix.len(),
            ours.len()
        );
    }
}

#[test]
fn exit_without_close_leaves_the_files_unix_leaves_rollback() {
    if !run_writer_if_child() {
        exit_without_close_matches_unix(Mode::Rollback);
    }
}

#[test]
fn exit_without_close_leaves_the_files_unix_leaves_wal() {
    if !run_writer_if_child() {
        exit_without_close_matches_unix(Mode::Wal);
    }
}

fn sigkill_loses_only_uncommitted_bytes(mode: Mode) {
    let test = format!("sigkill_loses_only_uncommitted_bytes_{mode:?}").to_lowercase();
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut sizes = Vec::new();
    for (vfs, dir) in ["unix", common::VFS].iter().zip(&dirs) {
        let guard = spawn_writer(&test, mode, vfs, dir.path(), Ending::Kill);
        let started = await_line(guard, |line| line == "spilled");
        let output = started.kill();
        sizes.push(committed_sizes(&output.stdout));
    }
    assert_eq!(
        sizes[0], sizes[1],
        "sizes at the last commit (unix, io_uring)"
    );
    let (unix_dir, ours_dir) = (dirs[0].path(), dirs[1].path());
    let read = |dir: &Path, name: &str| std::fs::read(dir.join(name)).unwrap_or_default();
    match mode {
        Mode::Wal => {
            // The database is untouched by both; the WAL's committed frames are the
            // same; what follows them (spilled, uncommitted frames) may be missing here.
            assert!(
                read(unix_dir, "x.db") == read(ours_dir, "x.db"),
                "x.db differs"
            );
            let committed = sizes[0].1 as usize;
            let (unix, ours) = (read(unix_dir, "x.db-wal"), read(ours_dir, "x.db-wal"));
            assert!(unix.len() > committed, "unix wrote no uncommitted frame");
            assert!(
                ours.len() >= committed && unix.starts_with(&ours),
                "the io_uring WAL ({} bytes) is not a prefix of unix's ({} bytes) holding \
                 the {committed} committed bytes",
                ours.len(),
                unix.len()
            );
        }
        Mode::Rollback => {
            // The journal (every record flushed before SQLite changes its page) and the
            // database (spilled pages are written before xWrite returns) are the same.
            assert!(
                read(unix_dir, "x.db-journal") == read(ours_dir, "x.db-journal"),
                "x.db-journal differs"
            );
            assert!(
                read(unix_dir, "x.db") == read(ours_dir, "x.db"),
                "x.db differs: a spilled page was lost with the process"
            );
        }
    }
    let unix = committed_content(unix_dir);
    let ours = committed_content(ours_dir);
    assert_eq!(unix.0, COMMITTED_ROWS);
    assert_eq!(
        ours, unix,
        "committed rows (count, checksum): io_uring vs unix"
    );
    // Recovered and closed by the same VFS, the files are the same again.
    assert_eq!(names(unix_dir), names(ours_dir));
    for name in names(unix_dir) {
        assert!(
            read(unix_dir, &name) == read(ours_dir, &name),
            "{mode:?}: {name} differs after recovery"
        );
    }
}

#[test]
fn sigkill_loses_only_uncommitted_bytes_rollback() {
    if !run_writer_if_child() {
        sigkill_loses_only_uncommitted_bytes(Mode::Rollback);
    }
}

#[test]
fn sigkill_loses_only_uncommitted_bytes_wal() {
    if !run_writer_if_child() {
        sigkill_loses_only_uncommitted_bytes(Mode::Wal);
    }
}

/// A forked child that exits while its parent has writes queued must not write them
/// (the parent writes them itself, and may have moved on by then); the parent's own
/// exit writes them. With the ring engine and with the syscall backend, whose files
/// never make a ring (so only the queue's own fork handler protects the child).
#[test]
fn forked_child_exit_never_writes_the_parents_queue() {
    if run_writer_if_child() {
        return;
    }
    for vfs in [common::VFS, "io_uring_sync"] {
        let dir = tempfile::tempdir().unwrap();
        let output = spawn_writer(
            "forked_child_exit_never_writes_the_parents_queue",
            Mode::Wal,
            vfs,
            dir.path(),
            Ending::ForkThenExit,
        )
        .wait();
        assert!(
            output.status.success(),
            "{}",
            common::describe(vfs, &output)
        );
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text
            .lines()
            .find_map(|l| l.find("wal before fork=").map(|at| &l[at..]))
            .unwrap_or_else(|| panic!("{vfs}: no WAL sizes in {text}"));
        let sizes: Vec<u64> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        let (before, after_child) = (sizes[0], sizes[1]);
        let at_parent_exit = file_len(&dir.path().join("x.db-wal"));
        assert_eq!(
            after_child, before,
            "{vfs}: the forked child's exit wrote to the WAL"
        );
        assert!(
            at_parent_exit > after_child,
            "{vfs}: the parent had nothing queued at the fork ({before} bytes before, \
             {at_parent_exit} at its exit), so the test proves nothing"
        );
    }
}
