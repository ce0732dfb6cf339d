//! Helpers shared by the multi-process and crash suites: locating the stock `sqlite3`
//! shell and the `torture` child driver, running them, and reporting failures with
//! everything needed to understand them (exit status, stdout tail, stderr).
#![allow(dead_code)] // each test crate uses a different subset

pub mod crash_sql;
pub mod rng;
pub mod system_calls;

#[allow(unused_imports)] // used by the suites that draw
pub use rng::Rng;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;

use rusqlite::{Connection, OpenFlags};

pub const VFS: &str = "io_uring";

/// Journal mode under test. Both the stock shell and our VFS must agree on the file
/// format and the locks of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Rollback,
    Wal,
}

impl Mode {
    /// Value for `PRAGMA journal_mode` (and what it reports back).
    pub fn pragma(self) -> &'static str {
        match self {
            Mode::Rollback => "delete",
            Mode::Wal => "wal",
        }
    }
}

pub fn register() {
    sqlite_uring::register(sqlite_uring::Options::default())
        .unwrap_or_else(|e| panic!("registering the io_uring VFS failed: {e}"));
}

/// Opens `path` with our VFS (creating it if needed).
pub fn open_ours(path: &Path) -> Connection {
    register();
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), VFS)
        .unwrap_or_else(|e| panic!("opening {} with the io_uring VFS: {e}", path.display()))
}

/// The stock `sqlite3` shell (unix VFS, POSIX locks). Missing is a test failure, not a
/// skip: without it the suite proves nothing about compatibility.
pub fn sqlite3_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join("sqlite3"))
            .find(|candidate| candidate.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "the stock `sqlite3` shell is required by the multi-process tests but was \
                     not found on PATH; install it (Debian: apt-get install -y sqlite3)"
                )
            })
    })
}

/// The child-process driver `examples/torture.rs`. Cargo builds examples before running
/// `cargo test`; they land next to `deps/`, where the test binary lives.
pub fn torture_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        let bin = exe
            .parent()
            .and_then(Path::parent)
            .map(|profile_dir| profile_dir.join("examples").join("torture"))
            .expect("test binary has no grandparent directory");
        assert!(
            bin.is_file(),
            "child driver {} not found. `cargo test` builds examples first; when running a \
             single test target, build it too: cargo build -p sqlite-uring --example torture \
             (with --release for a release test run)",
            bin.display()
        );
        bin
    })
}

/// A child process that is killed (and reaped) if the test panics before waiting for it,
/// so a failing test never leaves writers running against a deleted temp dir.
pub struct Guard {
    child: Option<Child>,
    pub what: String,
}

impl Guard {
    pub fn new(child: Child, what: impl Into<String>) -> Guard {
        Guard {
            child: Some(child),
            what: what.into(),
        }
    }

    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("child already waited for")
    }

    /// Waits for exit, collecting stdout and stderr (read concurrently by std).
    pub fn wait(mut self) -> Output {
        let child = self.child.take().expect("child already waited for");
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", self.what))
    }

    /// SIGKILL, then collect whatever it wrote.
    pub fn kill(mut self) -> Output {
        let _ = self.child().kill();
        self.wait()
    }

    /// Whether the child has exited (without reaping its output).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child().try_wait().expect("try_wait")
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A child whose stdout has been read up to some line (a readiness marker, or a first
/// report); the rest of stdout is drained by a thread, so the child can never block on a
/// full pipe, and is handed back with the exit status by [`Started::wait`]/[`Started::kill`].
pub struct Started {
    guard: Guard,
    seen: Vec<u8>,
    rest: std::thread::JoinHandle<Vec<u8>>,
}

/// Reads `guard`'s stdout until a line satisfies `wanted` (a pipe handshake with the
/// child; no sleeping). Panics with the child's stderr if it exits first.
pub fn await_line(mut guard: Guard, wanted: impl Fn(&str) -> bool) -> Started {
    let stdout = guard.child().stdout.take().expect("stdout was not piped");
    let mut reader = BufReader::new(stdout);
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("reading child stdout");
        if n == 0 {
            let what = guard.what.clone();
            let mut output = guard.wait();
            output.stdout = seen;
            panic!(
                "{what} exited before printing the line the test waits for.\n{}",
                describe(&what, &output)
            );
        }
        seen.extend_from_slice(line.as_bytes());
        if line.ends_with('\n') && wanted(line.trim_end()) {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut reader, &mut rest);
        rest
    });
    Started { guard, seen, rest }
}

impl Started {
    pub fn what(&self) -> &str {
        &self.guard.what
    }

    fn finish(self, kill: bool) -> Output {
        let Started { guard, seen, rest } = self;
        let mut output = if kill { guard.kill() } else { guard.wait() };
        let mut stdout = seen;
        stdout.extend(rest.join().expect("stdout drain thread"));
        output.stdout = stdout;
        output
    }

    pub fn wait(self) -> Output {
        self.finish(false)
    }

    /// SIGKILL, then everything the child printed.
    pub fn kill(self) -> Output {
        self.finish(true)
    }
}

/// Last `max` bytes of `text`, for failure messages.
pub fn tail(text: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(text);
    let chars: Vec<char> = text.chars().collect();
    let start = chars.len().saturating_sub(max);
    let prefix = if start > 0 { "…" } else { "" };
    format!("{prefix}{}", chars[start..].iter().collect::<String>())
}

pub fn describe(what: &str, output: &Output) -> String {
    format!(
        "{what}: exit status {}\n--- stdout (tail) ---\n{}\n--- stderr ---\n{}",
        output.status,
        tail(&output.stdout, 2000),
        tail(&output.stderr, 4000)
    )
}

/// Panics unless the process exited 0 with an empty stderr.
pub fn expect_success(what: &str, output: &Output) {
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "expected {} to succeed with no error output; it did not.\n{}",
        what,
        describe(what, output)
    );
}

/// Spawns the torture driver with `key=value` arguments; stdout and stderr are piped.
pub fn spawn_torture(command: &str, args: &[String]) -> Guard {
    let child = Command::new(torture_bin())
        .arg(command)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {} {command}: {e}", torture_bin().display()));
    Guard::new(
        child,
        format!("io_uring child `torture {command} {}`", args.join(" ")),
    )
}

/// Spawns the stock shell on `db` with `-bail` (stop at the first error) and the given
/// script on stdin (written from a file, so a killed shell cannot block us on a pipe).
pub fn spawn_stock_script(db: &Path, script: &str, what: &str) -> Guard {
    let mut file = tempfile::NamedTempFile::new().expect("script temp file");
    file.write_all(script.as_bytes()).expect("write script");
    let stdin = file.reopen().expect("reopen script");
    let child = Command::new(sqlite3_bin())
        .arg("-bail")
        .arg("-batch")
        .arg(db)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {}: {e}", sqlite3_bin().display()));
    // The shell has its own descriptor of the script; the file may be unlinked now.
    drop(file);
    Guard::new(child, format!("stock sqlite3 ({what})"))
}

/// Runs the stock shell once: `-bail`, busy timeout `timeout_ms`, `sql` on stdin.
pub fn stock_run(db: &Path, timeout_ms: u32, sql: &str) -> Output {
    let mut child = Command::new(sqlite3_bin())
        .arg("-bail")
        .arg("-batch")
        .arg("-cmd")
        .arg(format!(".timeout {timeout_ms}"))
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {}: {e}", sqlite3_bin().display()));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(sql.as_bytes()).expect("write sql");
    drop(stdin);
    child.wait_with_output().expect("wait for sqlite3")
}

/// Runs `sql` in the stock shell, expecting success; returns stdout.
pub fn stock_ok(db: &Path, sql: &str) -> String {
    let output = stock_run(db, 10_000, sql);
    expect_success(&format!("stock sqlite3 running `{sql}`"), &output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `PRAGMA integrity_check` through the stock shell.
pub fn stock_integrity(db: &Path) {
    let out = stock_ok(db, "PRAGMA integrity_check;");
    assert_eq!(
        out.trim(),
        "ok",
        "stock sqlite3 integrity_check of {}",
        db.display()
    );
}

/// `PRAGMA integrity_check` through our VFS.
pub fn ours_integrity(db: &Path) {
    let conn = open_ours(db);
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let result: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("io_uring integrity_check of {}: {e}", db.display()));
    assert_eq!(result, "ok", "io_uring integrity_check of {}", db.display());
}

/// Creates a database through our VFS in `mode`, runs `schema`, and closes it.
pub fn create_db(path: &Path, mode: Mode, schema: &str) {
    let conn = open_ours(path);
    let reported: String = conn
        .query_row(&format!("PRAGMA journal_mode={}", mode.pragma()), [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(reported, mode.pragma(), "setting journal_mode");
    conn.execute_batch(schema).unwrap();
}

/// An interactive stock shell driven through a pipe on stdin. Its stderr is merged into
/// stdout (through `sh`), so error messages arrive in order with the output of the
/// statements around them, and each [`StockSession::run`] returns once the shell has
/// printed a marker that follows the given SQL: a pipe handshake, no sleeps.
pub struct StockSession {
    guard: Guard,
    stdin: Option<ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    transcript: String,
    markers: u32,
}

impl StockSession {
    /// `timeout_ms` is the shell's busy timeout (0: fail at once with "database is locked").
    pub fn start(db: &Path, timeout_ms: u32) -> StockSession {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" 2>&1")
            .arg(sqlite3_bin())
            .arg("-batch")
            .arg("-cmd")
            .arg(format!(".timeout {timeout_ms}"))
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning sh -c sqlite3: {e}"));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        StockSession {
            guard: Guard::new(child, "interactive stock sqlite3"),
            stdin,
            stdout,
            transcript: String::new(),
            markers: 0,
        }
    }

    /// Sends `sql`, waits until the shell has executed it, and returns what it printed
    /// (results and error messages).
    pub fn run(&mut self, sql: &str) -> String {
        self.markers += 1;
        let marker = format!("@@marker-{}@@", self.markers);
        let stdin = self.stdin.as_mut().expect("session closed");
        write!(stdin, "{sql}\nSELECT '{marker}';\n")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| {
                panic!(
                    "writing to the stock sqlite3 session failed ({e}); transcript:\n{}",
                    self.transcript
                )
            });
        self.transcript.push_str(&format!("> {sql}\n"));
        let mut printed = String::new();
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read session");
            assert!(
                n > 0,
                "the stock sqlite3 session exited before printing {marker}; transcript:\n{}{}",
                self.transcript,
                printed
            );
            if line.trim_end() == marker {
                break;
            }
            printed.push_str(&line);
        }
        self.transcript.push_str(&printed);
        printed
    }

    /// Like [`StockSession::run`] but panics if the shell printed an error.
    pub fn run_ok(&mut self, sql: &str) -> String {
        let printed = self.run(sql);
        assert!(
            !printed.contains("Error") && !printed.contains("error"),
            "stock sqlite3 session: `{sql}` failed: {printed}\ntranscript:\n{}",
            self.transcript
        );
        printed
    }

    pub fn transcript(&self) -> &str {
        &self.transcript
    }

    /// Closes stdin and waits for the shell to exit. Its exit status is 1 if any
    /// statement failed, which some tests provoke on purpose (and check in `run`); only
    /// death by a signal is a failure here.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        let output = self.guard.wait();
        assert!(
            output.status.code().is_some(),
            "stock sqlite3 session exited with {}; transcript:\n{}",
            output.status,
            self.transcript
        );
    }
}

// ─── Helpers of the single-process suites (parity, faults, errors, wal) ───

/// Opens `path` with the named VFS (`unix`, `io_uring`, or a test registration).
pub fn open(path: &Path, vfs: &str) -> Connection {
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)
        .unwrap_or_else(|e| panic!("open {} with vfs {vfs}: {e}", path.display()))
}

/// Every row of `sql` as text, columns joined with `|`.
pub fn rows(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn
        .prepare(sql)
        .unwrap_or_else(|e| panic!("prepare {sql}: {e}"));
    let columns = statement.column_count();
    let mut out = Vec::new();
    let mut rows = statement.query([]).unwrap();
    while let Some(row) = rows.next().unwrap_or_else(|e| panic!("step {sql}: {e}")) {
        let mut fields = Vec::with_capacity(columns);
        for i in 0..columns {
            let value: rusqlite::types::Value = row.get(i).unwrap();
            fields.push(match value {
                rusqlite::types::Value::Null => "NULL".to_string(),
                rusqlite::types::Value::Integer(v) => v.to_string(),
                rusqlite::types::Value::Real(v) => format!("{v:?}"),
                rusqlite::types::Value::Text(v) => v,
                rusqlite::types::Value::Blob(v) => format!("blob:{}:{:x}", v.len(), fnv(&v)),
            });
        }
        out.push(fields.join("|"));
    }
    out
}

pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    })
}

pub fn integrity_ok(conn: &Connection) {
    assert_eq!(rows(conn, "PRAGMA integrity_check"), vec!["ok".to_string()]);
}

/// The SQLite extended result code of a rusqlite error.
pub fn extended_code(error: &rusqlite::Error) -> i32 {
    match error {
        rusqlite::Error::SqliteFailure(e, _) => e.extended_code,
        other => panic!("not a SQLite failure: {other:?}"),
    }
}

/// Serialises the tests of a suite that change process-wide state other tests would see:
/// SQLite's PRNG seed (to make two runs write identical WAL salts and journal nonces) or
/// the system-call tables of `unix` and `io_uring`. Write failures no longer need it: a
/// failed queued write stays with its own database.
pub fn process_state_lock() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Seeds SQLite's process-wide PRNG, so WAL salts and journal nonces are the same in a
/// `unix` run and an `io_uring` run of one scenario.
pub fn seed_prng(seed: std::ffi::c_int) {
    // SAFETY: SQLITE_TESTCTRL_PRNG_SEED takes an int and a (null) sqlite3 pointer.
    unsafe {
        rusqlite::ffi::sqlite3_test_control(
            rusqlite::ffi::SQLITE_TESTCTRL_PRNG_SEED,
            seed,
            std::ptr::null_mut::<rusqlite::ffi::sqlite3>(),
        )
    };
}

/// Names of this process's io_uring kernel threads (io-wq workers are `iou-wrk-PID`,
/// SQPOLL pollers `iou-sqp-PID`).
pub fn io_uring_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .filter(|name| name.starts_with("iou-"))
        .collect()
}

/// Fills `r(id INTEGER PRIMARY KEY, v TEXT)` with 20,000 rows in random key order (a
/// fixed xorshift sequence), in one transaction, so its leaves are scattered in the file
/// and a cold scan of it wakes read-ahead.
pub fn fill_random_rowid_table(conn: &Connection) {
    conn.execute_batch("BEGIN").unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut insert = conn
        .prepare("INSERT OR IGNORE INTO r VALUES (?1, ?2)")
        .unwrap();
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let value = "v".repeat(40 + (state % 120) as usize);
        insert
            .execute(((state % 10_000_000) as i64, value))
            .unwrap();
    }
    drop(insert);
    conn.execute_batch("COMMIT").unwrap();
}

/// A counter from `PRAGMA io_uring_stats`' per-file object.
pub fn file_counter(conn: &Connection, name: &str) -> u64 {
    let json = rows(conn, "PRAGMA io_uring_stats").remove(0);
    let file = &json[json.find("\"file\":").expect("file counters")..];
    let key = format!("\"{name}\":");
    let at = file.find(&key).expect("the counter") + key.len();
    file[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|digits| digits.parse().ok())
        .expect("a number")
}

/// `writer` (a stock `sqlite3` that asked for EXCLUSIVE at once) was locked out by the
/// SHARED lock a `unix` connection of this process held on the database.
pub fn assert_unix_shared_lock_held(writer: &Output) {
    assert!(
        !writer.status.success() && String::from_utf8_lossy(&writer.stderr).contains("locked"),
        "another process took EXCLUSIVE while a unix connection here held SHARED: {}",
        describe("stock sqlite3", writer)
    );
}

/// A stock writer gets EXCLUSIVE on `path` (the `unix` connection's read has ended).
pub fn expect_stock_writer_gets_in(path: &Path) {
    expect_success(
        "stock writer after the unix connection's read ended",
        &stock_run(path, 1000, "BEGIN EXCLUSIVE; COMMIT;"),
    );
}
