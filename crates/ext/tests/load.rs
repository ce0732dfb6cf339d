//! The built extension, loaded into programs that link their own SQLite: Debian's
//! `sqlite3` CLI and `/usr/bin/python3`'s sqlite3 module.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::extension;

fn sqlite3(script: &str, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new("sqlite3");
    command
        .arg("-bail")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Only what a test sets: an inherited RUST_LOG would add trace lines.
        .env_remove("RUST_LOG")
        .env_remove("SQLITE_URING_LOG");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command
        .spawn()
        .expect("Debian's sqlite3 CLI is required (apt-get install sqlite3)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn stock_sqlite3_cli_runs_a_script_on_io_uring() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    let script = format!(
        ".load {ext}
.open file:{db}?vfs=io_uring
.vfsname
PRAGMA journal_mode;
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c BLOB);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<5000)
  INSERT INTO t(b, c) SELECT printf('v%05d', x), zeroblob(x % 900) FROM n;
CREATE INDEX tb ON t(b);
BEGIN; UPDATE t SET b = b || '!' WHERE a % 3 = 0; SAVEPOINT s; DELETE FROM t; ROLLBACK TO s; COMMIT;
SELECT count(*), sum(length(b)), sum(length(c)) FROM t;
PRAGMA journal_mode=WAL;
INSERT INTO t(b) VALUES('wal row');
PRAGMA wal_checkpoint(TRUNCATE);
PRAGMA mmap_size=67108864;
SELECT count(*) FROM t WHERE b LIKE '%!';
VACUUM;
PRAGMA integrity_check;
",
        ext = extension().display(),
        db = db.display()
    );
    let output = sqlite3(&script, &[]);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "sqlite3 failed:\n{stdout}\n{}",
        text(&output.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "io_uring",
            "delete",
            "5000|31666|2148000",
            "wal",
            "0|0|0",
            "67108864",
            "1666",
            "ok"
        ],
        "{stdout}"
    );
    // The stock unix VFS reads what io_uring wrote.
    let output = Command::new("sqlite3")
        .arg(&db)
        .arg("SELECT count(*) FROM t; PRAGMA integrity_check;")
        .output()
        .unwrap();
    assert_eq!(text(&output.stdout), "5001\nok\n");
}

#[test]
fn default_entry_point_makes_io_uring_the_default_vfs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("default.db");
    let script = format!(
        "SELECT load_extension('{ext}', 'sqlite3_sqliteuring_default_init');
.open {db}
.vfsname
CREATE TABLE t(x); INSERT INTO t VALUES(1);
PRAGMA io_uring_stats;
",
        ext = extension().display(),
        db = db.display()
    );
    let output = sqlite3(&script, &[]);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[1], "io_uring", "{stdout}");
    assert!(
        lines[2].starts_with("{\"vfs\":\"io_uring\",\"engine\":\"io_uring\""),
        "{stdout}"
    );
}

#[test]
fn unavailable_io_uring_refuses_to_load_unless_fallback_requested() {
    let script = format!(".load {}\nSELECT 'loaded';\n", extension().display());
    let output = sqlite3(&script, &[("SQLITE_URING_SIMULATE_UNAVAILABLE", "EPERM")]);
    let stderr = text(&output.stderr);
    assert!(!output.status.success(), "load should fail");
    assert!(
        stderr.contains("io_uring is unavailable") && stderr.contains("Remedy"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Docker's default seccomp profile blocks io_uring_setup")
            && stderr.contains("--security-opt seccomp=unconfined"),
        "EPERM names the usual cause in a container: {stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        ".load {}\n.open file:{}?vfs=io_uring\nCREATE TABLE t(x); INSERT INTO t VALUES(7); SELECT x FROM t;\nPRAGMA io_uring_stats;\n",
        extension().display(),
        dir.path().join("fb.db").display()
    );
    let output = sqlite3(
        &script,
        &[
            ("SQLITE_URING_SIMULATE_UNAVAILABLE", "EPERM"),
            ("SQLITE_URING_FALLBACK", "syscall"),
        ],
    );
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(
        stdout.starts_with("7\n") && stdout.contains("\"engine\":\"syscall\""),
        "{stdout}"
    );
}

#[test]
fn debian_python3_sqlite3_module_uses_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let program = r#"
import sqlite3, sys
ext, db = sys.argv[1], sys.argv[2]
loader = sqlite3.connect(":memory:")
loader.enable_load_extension(True)
loader.load_extension(ext)
loader.close()  # SQLITE_OK_LOAD_PERMANENTLY keeps the VFS registered
conn = sqlite3.connect(f"file:{db}?vfs=io_uring", uri=True)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("CREATE TABLE t(x)")
with conn:
    conn.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(1000)])
print(conn.execute("SELECT count(*), sum(x) FROM t").fetchone())
print(conn.execute("PRAGMA journal_mode").fetchone()[0])
print(conn.execute("PRAGMA integrity_check").fetchone()[0])
"#;
    let output = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(program)
        .arg(extension())
        .arg(dir.path().join("py.db"))
        .output()
        .expect("Debian's /usr/bin/python3 is required");
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert_eq!(stdout, "(1000, 499500)\nwal\nok\n");
}

#[test]
fn extension_links_no_sqlite() {
    let so = extension().with_extension("so");
    let output = Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(&so)
        .output()
        .expect("nm (binutils)");
    let undefined = text(&output.stdout);
    assert!(
        !undefined.contains("sqlite3_"),
        "the extension must call SQLite only through sqlite3_api_routines:\n{undefined}"
    );
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .unwrap();
    let exported: Vec<String> = text(&output.stdout)
        .lines()
        .filter(|l| l.contains("sqlite3"))
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(
        exported,
        [
            "sqlite3_sqliteuring_default_init",
            "sqlite3_sqliteuring_init"
        ]
    );
}

/// The VFS crate's test machinery (feature `test-support`: the fault-injecting engine and
/// the power-loss recorder, `io/fault.rs` and `io/power_loss.rs`) is not in the shipped
/// extension: none of its symbols is in the `.so`'s symbol table.
#[test]
fn extension_carries_no_test_machinery() {
    let so = extension().with_extension("so");
    let output = Command::new("nm")
        .arg("--demangle")
        .arg(&so)
        .output()
        .expect("nm (binutils)");
    assert!(output.status.success(), "nm: {}", text(&output.stderr));
    let symbols = text(&output.stdout);
    // The symbol table is there to be read: the VFS's own functions are named in it.
    assert!(
        symbols.contains("sqlite_uring::io::submit::"),
        "no symbol of the VFS crate in {}: stripped?",
        so.display()
    );
    let machinery: Vec<&str> = symbols
        .lines()
        .filter(|line| {
            [
                "sqlite_uring::io::fault::",
                "sqlite_uring::io::power_loss::",
                "register_with_faults",
                "thread_ring_fixed_writes",
                "thread_ring_linked_syncs",
                "lock_owner_checks",
            ]
            .iter()
            .any(|name| line.contains(name))
        })
        .collect();
    assert!(
        machinery.is_empty(),
        "test machinery in the extension (feature test-support enabled?):\n{}",
        machinery.join("\n")
    );
}

/// `RUST_LOG=sqlite_uring=trace` read at load: records of every VFS call on stderr by
/// default, in a file or through the host's `sqlite3_log` callback with
/// `SQLITE_URING_LOG`; nothing at all without RUST_LOG.
#[test]
fn rust_log_traces_vfs_calls_where_sqlite_uring_log_says() {
    let dir = tempfile::tempdir().unwrap();
    let script = |name: &str, preamble: &str| {
        format!(
            "{preamble}.load {ext}\n.open file:{db}?vfs=io_uring\n\
             CREATE TABLE t(x); INSERT INTO t VALUES(1); SELECT count(*) FROM t;\n",
            ext = extension().display(),
            db = dir.path().join(name).display()
        )
    };
    let ok = |output: &Output| {
        assert!(
            output.status.success() && text(&output.stdout) == "1\n",
            "{}\n{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    };
    let has_calls = |trace: &str, db: &str| {
        let path = dir.path().join(db).display().to_string();
        for call in ["xOpen", "xLock", "xWrite", "xSync", "xUnlock"] {
            assert!(
                trace
                    .lines()
                    .any(|l| l.contains(&format!("sqlite_uring::vfs: {call} "))
                        && l.contains(&path)
                        && l.contains(" rc=0 ")),
                "no {call} record for {path}:\n{trace}"
            );
        }
        assert!(trace.contains("sqlite_uring::io: batch engine="), "{trace}");
    };

    // Off unless RUST_LOG asks; SQLITE_URING_LOG alone does not turn it on.
    let log_file = dir.path().join("trace.log");
    let log_path = log_file.display().to_string();
    let output = sqlite3(
        &script("off.db", ""),
        &[("SQLITE_URING_LOG", log_path.as_str())],
    );
    ok(&output);
    assert!(!text(&output.stderr).contains("sqlite_uring"));
    assert!(!log_file.exists());
    let output = sqlite3(&script("info.db", ""), &[("RUST_LOG", "info")]);
    ok(&output);
    assert_eq!(text(&output.stderr), "");

    // Default destination: stderr.
    let output = sqlite3(
        &script("stderr.db", ""),
        &[("RUST_LOG", "sqlite_uring=trace")],
    );
    ok(&output);
    has_calls(&text(&output.stderr), "stderr.db");

    // A file, appended to; stderr stays clean.
    let output = sqlite3(
        &script("file.db", ""),
        &[
            ("RUST_LOG", "sqlite_uring=trace"),
            ("SQLITE_URING_LOG", log_path.as_str()),
        ],
    );
    ok(&output);
    assert!(!text(&output.stderr).contains("sqlite_uring"));
    has_calls(&std::fs::read_to_string(&log_file).unwrap(), "file.db");

    // sqlite3_log: the shell's `.log stderr` callback prints "(27) message" (SQLITE_NOTICE).
    let output = sqlite3(
        &script("sqlite3_log.db", ".log stderr\n"),
        &[
            ("RUST_LOG", "sqlite_uring::vfs=trace"),
            ("SQLITE_URING_LOG", "sqlite3_log"),
        ],
    );
    ok(&output);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("(27) sqlite_uring::vfs: xWrite "),
        "{stderr}"
    );
    assert!(
        !stderr.contains("sqlite_uring::io"),
        "filtered out: {stderr}"
    );

    // A destination that cannot be opened fails the load, naming the variable.
    let output = sqlite3(
        &script("bad.db", ""),
        &[
            ("RUST_LOG", "sqlite_uring=trace"),
            ("SQLITE_URING_LOG", "/nonexistent/dir/trace.log"),
        ],
    );
    let stderr = text(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("SQLITE_URING_LOG=/nonexistent/dir/trace.log"),
        "{stderr}"
    );
}
