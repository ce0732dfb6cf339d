//! `libsqlite_uring_preload.so` under unmodified programs: Debian's `sqlite3` CLI and
//! `/usr/bin/python3`'s sqlite3 module (the database bytes equal those of the same
//! workload without the preload, and `PRAGMA io_uring_stats` shows the VFS did the
//! I/O), a program without SQLite, and a program with SQLite linked statically.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The preload library, built for this test run with the cargo that runs the tests, in
/// the same profile, into a target directory of its own (`cargo test` does not build a
/// cdylib-only crate's library, and the shared target directory is locked by this run).
fn preload() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("preload-build");
            let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
            let mut command = Command::new(env!("CARGO"));
            command
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "sqlite-uring-preload",
                    "--manifest-path",
                ])
                .arg(&manifest)
                .env("CARGO_TARGET_DIR", &target_dir);
            let profile = if cfg!(debug_assertions) {
                "debug"
            } else {
                command.arg("--release");
                "release"
            };
            let output = command
                .output()
                .expect("running cargo to build the preload");
            assert!(
                output.status.success(),
                "building the preload library failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let so = target_dir.join(profile).join("libsqlite_uring_preload.so");
            assert!(so.exists(), "{} was not built", so.display());
            so
        })
        .clone()
}

/// Runs `command` with `stdin`, under the preload or not, with only the environment a
/// test sets (an inherited RUST_LOG would add trace lines).
fn run(mut command: Command, stdin: &str, preloaded: bool) -> Output {
    if !command
        .get_envs()
        .any(|(key, _)| key == "SQLITE_URING_FALLBACK")
    {
        command.env_remove("SQLITE_URING_FALLBACK");
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        .env_remove("SQLITE_URING_LOG")
        .env_remove("LD_PRELOAD");
    if preloaded {
        command.env("LD_PRELOAD", preload());
    }
    let mut child = command.spawn().expect("starting the program");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A deterministic workload: rollback-journal transactions (with a rollback and a
/// savepoint), then WAL, checkpointed; `PRAGMA io_uring_stats` last (no row on `unix`).
const WORKLOAD: &str = "
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c BLOB);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<3000)
  INSERT INTO t(b, c) SELECT printf('v%05d', x), zeroblob(x % 700) FROM n;
CREATE INDEX tb ON t(b);
BEGIN; DELETE FROM t WHERE a % 2 = 0; ROLLBACK;
BEGIN; UPDATE t SET b = b || '!' WHERE a % 3 = 0; SAVEPOINT s; DELETE FROM t; ROLLBACK TO s; COMMIT;
PRAGMA journal_mode=WAL;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<500)
  INSERT INTO t(b) SELECT printf('w%05d', x) FROM n;
DELETE FROM t WHERE a % 7 = 0;
PRAGMA wal_checkpoint(TRUNCATE);
SELECT count(*), sum(length(b)), sum(length(c)) FROM t;
PRAGMA integrity_check;
PRAGMA io_uring_stats;
";

/// The program's standard output, once it is known to have succeeded with nothing on
/// standard error (`what` prefixes the failure message).
fn clean_stdout(output: &Output, what: &str) -> String {
    let stdout = text(&output.stdout);
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "{what}{}\n{stdout}\n{}",
        output.status,
        text(&output.stderr)
    );
    stdout
}

/// The `vfs_total` bytes written in the `PRAGMA io_uring_stats` row printed by the
/// workload, if there is one.
fn stats_bytes_written(stdout: &str) -> Option<u64> {
    let row = stdout.lines().find(|line| line.contains("\"vfs_total\""))?;
    // The CLI prints the JSON; Python a tuple holding it.
    let row = &row[row.find('{')?..=row.rfind('}')?];
    let stats: serde_json::Value = serde_json::from_str(row).expect(row);
    assert_eq!(stats["vfs"], "io_uring", "{row}");
    stats["vfs_total"]["bytes_written"].as_u64()
}

/// Runs the workload under the preload and without it, each in a directory of its own;
/// returns (preloaded stdout, plain stdout) after checking exit status, stderr and bytes.
fn compare(program: impl Fn(&Path) -> (Command, String)) -> (String, String) {
    let mut outputs = Vec::new();
    let mut bytes = Vec::new();
    for preloaded in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.db");
        let (command, stdin) = program(&db);
        let output = run(command, &stdin, preloaded);
        let stdout = clean_stdout(&output, &format!("preloaded={preloaded}: "));
        bytes.push(std::fs::read(&db).unwrap());
        outputs.push(stdout);
    }
    assert!(
        bytes[0] == bytes[1],
        "the database differs with and without the preload ({} vs {} bytes)",
        bytes[0].len(),
        bytes[1].len()
    );
    let plain = outputs.pop().unwrap();
    let preloaded = outputs.pop().unwrap();
    (preloaded, plain)
}

#[test]
fn debian_sqlite3_cli_runs_on_io_uring_with_the_same_bytes() {
    let (preloaded, plain) = compare(|db| {
        let mut command = Command::new("sqlite3");
        command.arg("-bail").arg(db);
        (command, WORKLOAD.to_string())
    });
    let written = stats_bytes_written(&preloaded).unwrap_or_else(|| panic!("{preloaded}"));
    assert!(written > 1_000_000, "{preloaded}");
    assert_eq!(stats_bytes_written(&plain), None, "{plain}");
    // Everything but the stats row is the same.
    let without_stats = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.contains("vfs_total"))
            .map(String::from)
            .collect()
    };
    assert_eq!(without_stats(&preloaded), without_stats(&plain));
    assert_eq!(
        without_stats(&plain),
        ["wal", "0|0|0", "3000|18858|857258", "ok"]
    );
}

#[test]
fn debian_python3_sqlite3_module_runs_on_io_uring_with_the_same_bytes() {
    let script = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
for statement in sys.stdin.read().split(";"):
    if statement.strip():
        for row in db.execute(statement):
            print(row)
db.close()
"#;
    let (preloaded, plain) = compare(|db| {
        let mut command = Command::new("/usr/bin/python3");
        command.arg("-c").arg(script).arg(db);
        (command, WORKLOAD.to_string())
    });
    let written = stats_bytes_written(&preloaded).unwrap_or_else(|| panic!("{preloaded}"));
    assert!(written > 1_000_000, "{preloaded}");
    assert_eq!(stats_bytes_written(&plain), None, "{plain}");
    assert!(plain.contains("('ok',)"), "{plain}");
}

#[test]
fn after_sqlite3_shutdown_the_next_open_is_on_io_uring_again() {
    // SQLite's initialization after a shutdown makes `unix` the default again; the
    // preload's `sqlite3_shutdown` (first in the global scope, where ctypes finds it)
    // has the next open make `io_uring` the default once more.
    let script = r#"
import ctypes, json, sqlite3, sys
def vfs_of(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS t(x)")
    db.execute("INSERT INTO t VALUES (1)")
    row = db.execute("PRAGMA io_uring_stats").fetchone()
    db.close()
    return json.loads(row[0])["vfs"] if row else "not io_uring"
print(vfs_of(sys.argv[1]))
print(ctypes.CDLL(None).sqlite3_shutdown())
print(vfs_of(sys.argv[2]))
print(ctypes.CDLL(None).sqlite3_shutdown())
print(vfs_of(sys.argv[1]))
"#;
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new("/usr/bin/python3");
    command
        .arg("-c")
        .arg(script)
        .arg(dir.path().join("first.db"))
        .arg(dir.path().join("second.db"));
    let output = run(command, "", true);
    let stdout = clean_stdout(&output, "");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["io_uring", "0", "io_uring", "0", "io_uring"],
        "{stdout}"
    );
}

#[test]
fn programs_that_never_use_sqlite_print_nothing() {
    for program in [["/bin/true", ""], ["sqlite3", "--version"]] {
        let mut command = Command::new(program[0]);
        if !program[1].is_empty() {
            command.arg(program[1]);
        }
        let output = run(command, "", true);
        assert!(output.status.success(), "{program:?}: {}", output.status);
        assert!(
            output.stderr.is_empty(),
            "{program:?}: {}",
            text(&output.stderr)
        );
    }
}

/// Run by `statically_linked_sqlite_is_reported` in a child process: this test binary
/// carries rusqlite's bundled SQLite, linked statically without exported symbols.
#[test]
#[ignore = "run by statically_linked_sqlite_is_reported under the preload"]
fn static_sqlite_child() {
    let dir = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("static.db")).unwrap();
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    let vfs: String = conn
        .query_row("SELECT count(*) FROM pragma_io_uring_stats", [], |_| Ok(()))
        .map(|_| "io_uring".into())
        .unwrap_or_else(|_| "unix".into());
    println!("child vfs: {vfs}");
}

#[test]
fn statically_linked_sqlite_is_reported() {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args([
        "--exact",
        "static_sqlite_child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    let output = run(command, "", true);
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "{}\n{}\n{stderr}",
        output.status,
        text(&output.stdout)
    );
    assert!(
        text(&output.stdout).contains("child vfs: unix")
            && text(&output.stdout).contains("1 passed"),
        "{}",
        text(&output.stdout)
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("sqlite-uring preload: the io_uring VFS could not be installed")
            && lines[0].contains("linked statically into"),
        "{stderr}"
    );
}

#[test]
fn a_refused_registration_is_one_line_and_the_program_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new("sqlite3");
    command
        .arg(dir.path().join("refused.db"))
        .env("SQLITE_URING_FALLBACK", "sometimes");
    let output = run(
        command,
        "CREATE TABLE t(x); PRAGMA io_uring_stats; SELECT 42;",
        true,
    );
    assert!(output.status.success(), "{}", output.status);
    assert_eq!(text(&output.stdout), "42\n");
    assert_eq!(
        text(&output.stderr),
        "sqlite-uring preload: the io_uring VFS was not installed, SQLite keeps its default \
         VFS: SQLITE_URING_FALLBACK=sometimes is not valid; use syscall or none\n"
    );
}

#[test]
fn the_library_needs_no_sqlite_symbol_to_load() {
    let output = Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(preload())
        .output()
        .expect("nm (binutils) is required");
    assert!(output.status.success());
    let undefined = text(&output.stdout);
    assert!(!undefined.contains("sqlite3_"), "{undefined}");
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(preload())
        .output()
        .unwrap();
    let defined = text(&output.stdout);
    for name in [
        "sqlite3_initialize",
        "sqlite3_open",
        "sqlite3_open_v2",
        "sqlite3_open16",
    ] {
        assert!(
            defined
                .lines()
                .any(|line| line.ends_with(&format!(" {name}"))),
            "{name} is not exported:\n{defined}"
        );
    }
}
