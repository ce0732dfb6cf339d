//! Child-process driver for the multi-process and crash suites (`tests/multiprocess.rs`,
//! `tests/crash.rs`). Each command opens the database with the `io_uring` VFS in its own
//! process, so its locks meet the stock `sqlite3` shell's (and other children's) exactly
//! as two unrelated programs' would.
//!
//! ```text
//! torture increment    db=PATH mode=delete|wal sync=off|normal|full count=N tag=NAME
//!                      [busy=timeout|spin] [pace_us=N]
//! torture bank-write   db=PATH mode=… sync=… count=N seed=S tag=NAME [busy=…] [pace_us=N]
//! torture bank-read    db=PATH mode=… total=T accounts=A writers=W seed=S
//! torture crash-writer db=PATH mode=… sync=full
//!
//! Every command also takes mmap=BYTES (PRAGMA mmap_size) and checkpoints=off (no
//! explicit or automatic WAL checkpoints).
//! ```
//!
//! Failures go to stderr with exit status 1; a broken invariant is exit status 2. The
//! parent includes stderr in its own failure message.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, ErrorCode, OpenFlags};

// The same transactions as the stock-sqlite3 writer of tests/crash.rs, which checks them.
#[path = "../tests/common/crash_sql.rs"]
mod crash_sql;
use crash_sql::crash_transaction_sql;
// The tests replay bank-write's transfers from its seed with the same generator.
#[path = "../tests/common/rng.rs"]
mod rng;
use rng::Rng;

/// Long enough that a busy timeout never fires in a healthy run (locks are held for
/// microseconds to milliseconds); short enough that a lock leak fails the test instead
/// of hanging it.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the whole run of one command, so a broken peer cannot hang the suite.
const DEADLINE: Duration = Duration::from_secs(150);

type Res<T> = Result<T, String>;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = argv.first().cloned() else {
        eprintln!("usage: torture COMMAND key=value…");
        std::process::exit(1);
    };
    let args = match Args::parse(&argv[1..]) {
        Ok(args) => args,
        Err(message) => fail(1, &command, &message),
    };
    let result = match command.as_str() {
        "increment" => increment(&args),
        "bank-write" => bank_write(&args),
        "bank-read" => bank_read(&args),
        "crash-writer" => crash_writer(&args),
        other => Err(Failure::Error(format!("unknown command `{other}`"))),
    };
    match result {
        Ok(()) => {}
        Err(Failure::Error(message) | Failure::Busy(message)) => fail(1, &command, &message),
        Err(Failure::Invariant(message)) => fail(2, &command, &message),
    }
}

fn fail(code: i32, command: &str, message: &str) -> ! {
    eprintln!("torture {command} (pid {}): {message}", std::process::id());
    std::process::exit(code)
}

enum Failure {
    /// SQLITE_BUSY (any extended code): the transaction attempt is retried.
    Busy(String),
    /// Something went wrong (I/O, SQL error other than BUSY, deadline).
    Error(String),
    /// The database showed a state that must be impossible.
    Invariant(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Error(message)
    }
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Failure {
        let message = format!("SQLite error: {e} ({:?})", e.sqlite_error_code());
        if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) {
            Failure::Busy(message)
        } else {
            Failure::Error(message)
        }
    }
}

struct Args(HashMap<String, String>);

impl Args {
    fn parse(raw: &[String]) -> Res<Args> {
        let mut map = HashMap::new();
        for arg in raw {
            let (key, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("argument `{arg}` is not key=value"))?;
            map.insert(key.to_string(), value.to_string());
        }
        Ok(Args(map))
    }

    fn get(&self, key: &str) -> Res<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("missing argument {key}="))
    }

    fn num(&self, key: &str) -> Res<u64> {
        let text = self.get(key)?;
        text.parse()
            .map_err(|_| format!("{key}={text} is not a non-negative integer"))
    }
}

/// Opens the database with our VFS and checks that it is in the journal mode the parent
/// set up (a mismatch would silently test the wrong thing).
fn open(args: &Args) -> Result<Connection, Failure> {
    sqlite_uring::register(sqlite_uring::Options {
        // direct=on: O_DIRECT for the database (the crash suite's third kind of writer).
        direct_io: args.get("direct").unwrap_or("off") == "on",
        ..sqlite_uring::Options::default()
    })
    .map_err(|e| format!("register: {e}"))?;
    let path = args.get("db")?;
    let mut conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), "io_uring")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Opening has not touched the file yet: tell a parent that holds the database lock
    // (to start several writers at once) that it may release it now.
    println!("ready");
    std::io::stdout()
        .flush()
        .map_err(|e| format!("stdout: {e}"))?;
    let expected = args.get("mode")?;
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if mode != expected {
        return Err(Failure::Error(format!(
            "database journal_mode is {mode}, expected {expected}"
        )));
    }
    if args.get("direct").unwrap_or("off") == "on" {
        let stats: String = conn.query_row("PRAGMA io_uring_stats", [], |r| r.get(0))?;
        if stats.contains("\"direct_align_bytes\":null") {
            return Err(Failure::Error(format!(
                "direct=on but the database has no O_DIRECT descriptor: {stats}"
            )));
        }
    }
    let sync = args.get("sync").unwrap_or("full");
    conn.execute_batch(&format!("PRAGMA synchronous={sync}"))?;
    if let Ok(bytes) = args.num("mmap") {
        // Memory-mapped reads (xFetch) see other processes' writes through the page
        // cache: a stale mapping would show up as a broken invariant.
        conn.query_row(&format!("PRAGMA mmap_size={bytes}"), [], |_| Ok(()))?;
    }
    if !checkpoints_on(args) {
        // Let the WAL grow without bound (the WAL index then spans several shm regions).
        conn.query_row("PRAGMA wal_autocheckpoint=0", [], |_| Ok(()))?;
    }
    if args.get("busy").unwrap_or("timeout") == "spin" {
        conn.busy_handler(Some(spin_busy_handler))?;
    }
    Ok(conn)
}

/// A busy handler that retries at once (yielding the CPU) for a while before it starts
/// sleeping. SQLite's default handler sleeps 1, 2, 5, 10, … ms, so two processes using it
/// tend to take turns in long runs: whoever holds the lock commits again before the
/// other wakes up. Retrying quickly lets this process slip into the other's gaps, so
/// commits of the two processes interleave finely (which is what the tests need to see).
/// Gives up after roughly BUSY_TIMEOUT, like a busy timeout.
fn spin_busy_handler(attempt: i32) -> bool {
    const SPINS: i32 = 2000;
    if attempt < SPINS {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_millis(1));
    }
    ((attempt - SPINS).max(0) as u128) < BUSY_TIMEOUT.as_millis()
}

/// Keeps the CPU busy for `micros` without holding any lock, between transactions, so
/// the other process gets a window to take the lock (see [`spin_busy_handler`]). Pacing
/// only: nothing waits for anything.
fn pace(micros: u64) {
    let until = Instant::now() + Duration::from_micros(micros);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Runs `body` as one transaction attempt until it does not fail with SQLITE_BUSY
/// (including BUSY_SNAPSHOT, and BUSY returned without waiting where waiting could
/// deadlock). A failed attempt is rolled back before the retry. Returns the retries.
fn retry_busy(
    conn: &Connection,
    started: Instant,
    mut body: impl FnMut(&Connection) -> Result<(), Failure>,
) -> Result<u64, Failure> {
    let mut retries = 0;
    loop {
        let attempt = body(conn);
        let error = match attempt {
            Ok(()) => return Ok(retries),
            Err(error) => error,
        };
        if !conn.is_autocommit() {
            // Ignore the result: the failed statement may already have rolled back.
            let _ = conn.execute_batch("ROLLBACK");
        }
        if !matches!(error, Failure::Busy(_)) {
            return Err(error);
        }
        if started.elapsed() > DEADLINE {
            return Err(Failure::Error(format!(
                "still SQLITE_BUSY after {retries} retries and {:?}",
                started.elapsed()
            )));
        }
        retries += 1;
        std::thread::yield_now();
    }
}

/// Increments the shared counter `count` times, logging each increment as (tag, i).
/// Two transaction shapes alternate: BEGIN IMMEDIATE, and a deferred transaction that
/// reads first and then writes an absolute value — the shape that loses updates if two
/// processes can both upgrade from the same snapshot.
fn increment(args: &Args) -> Result<(), Failure> {
    let conn = open(args)?;
    let count = args.num("count")?;
    let tag = args.get("tag")?.to_string();
    let pace_us = args.num("pace_us").unwrap_or(0);
    let started = Instant::now();
    let mut retries = 0;
    for i in 0..count {
        pace(pace_us);
        let begin = if i % 2 == 0 {
            "BEGIN IMMEDIATE"
        } else {
            "BEGIN"
        };
        retries += retry_busy(&conn, started, |conn| {
            conn.execute_batch(begin)?;
            let n: i64 = conn.query_row("SELECT n FROM counter WHERE id = 1", [], |r| r.get(0))?;
            conn.execute("UPDATE counter SET n = ?1 WHERE id = 1", [n + 1])?;
            conn.execute(
                "INSERT INTO log(who, seq) VALUES (?1, ?2)",
                params![tag, i as i64],
            )?;
            Ok(conn.execute_batch("COMMIT")?)
        })?;
    }
    println!(
        "committed {count} busy_retries {retries} in {:?}",
        started.elapsed()
    );
    Ok(())
}

/// `checkpoints=off`: no explicit checkpoints and no automatic ones.
fn checkpoints_on(args: &Args) -> bool {
    args.get("checkpoints").unwrap_or("on") != "off"
}

fn checkpoint(conn: &Connection, kind: &str) -> Result<(), Failure> {
    // The result row (busy, log, checkpointed) is not an error when busy=1: another
    // connection was in the way, which is normal under load.
    Ok(conn.query_row(&format!("PRAGMA wal_checkpoint({kind})"), [], |_| Ok(()))?)
}

/// Moves money between random accounts `count` times, then records itself in `done`.
/// Three of four transfers are deferred transactions that read both balances and write
/// absolute values; the fourth is an IMMEDIATE relative update. Checkpoints (PASSIVE and
/// RESTART) are interleaved so that they race with the other processes' reads and writes.
fn bank_write(args: &Args) -> Result<(), Failure> {
    let conn = open(args)?;
    let count = args.num("count")?;
    let tag = args.get("tag")?.to_string();
    let mut rng = Rng::new(args.num("seed")?);
    let accounts: i64 = conn.query_row("SELECT count(*) FROM accounts", [], |r| r.get(0))?;
    let pace_us = args.num("pace_us").unwrap_or(0);
    let checkpoints = checkpoints_on(args);
    let started = Instant::now();
    let mut retries = 0;
    for i in 0..count {
        pace(pace_us);
        let from = rng.below(accounts as u64) as i64 + 1;
        let to = (from + rng.below(accounts as u64 - 1) as i64) % accounts + 1;
        let amount = rng.below(50) as i64 + 1;
        let immediate = i % 4 == 0;
        retries += retry_busy(&conn, started, |conn| {
            if immediate {
                conn.execute_batch("BEGIN IMMEDIATE")?;
                conn.execute(
                    "UPDATE accounts SET balance = balance - ?1 WHERE id = ?2",
                    [amount, from],
                )?;
                conn.execute(
                    "UPDATE accounts SET balance = balance + ?1 WHERE id = ?2",
                    [amount, to],
                )?;
            } else {
                conn.execute_batch("BEGIN")?;
                let balance = |id: i64| {
                    conn.query_row("SELECT balance FROM accounts WHERE id = ?1", [id], |r| {
                        r.get::<_, i64>(0)
                    })
                };
                let (a, b) = (balance(from)?, balance(to)?);
                conn.execute(
                    "UPDATE accounts SET balance = ?1 WHERE id = ?2",
                    [a - amount, from],
                )?;
                conn.execute(
                    "UPDATE accounts SET balance = ?1 WHERE id = ?2",
                    [b + amount, to],
                )?;
            }
            Ok(conn.execute_batch("COMMIT")?)
        })?;
        if checkpoints && i % 97 == 50 {
            checkpoint(&conn, "PASSIVE")?;
        }
        if checkpoints && i % 389 == 200 {
            checkpoint(&conn, "RESTART")?;
        }
    }
    retry_busy(&conn, started, |conn| {
        conn.execute("INSERT INTO done(who) VALUES (?1)", [&tag])?;
        Ok(())
    })?;
    println!(
        "committed {count} busy_retries {retries} in {:?}",
        started.elapsed()
    );
    Ok(())
}

/// Reads until every writer has recorded itself in `done`, checking on every read that
/// the money is all there: single-statement sums, and multi-statement read transactions
/// that sum the accounts one row at a time (all statements must see one snapshot).
fn bank_read(args: &Args) -> Result<(), Failure> {
    let conn = open(args)?;
    let total = args.num("total")? as i64;
    let accounts = args.num("accounts")? as i64;
    let writers = args.num("writers")? as i64;
    let mut rng = Rng::new(args.num("seed")?);
    let checkpoints = checkpoints_on(args);
    let started = Instant::now();
    let mut reads = 0u64;
    loop {
        let mut finished = 0i64;
        let mut seen = (0i64, 0i64);
        let per_row = reads % 5 == 4;
        retry_busy(&conn, started, |conn| {
            if per_row {
                conn.execute_batch("BEGIN")?;
                let mut sum = 0i64;
                // Random order, so the reads straddle whatever pages writers touch.
                let start = rng.below(accounts as u64) as i64;
                for k in 0..accounts {
                    let id = (start + k) % accounts + 1;
                    sum +=
                        conn.query_row("SELECT balance FROM accounts WHERE id = ?1", [id], |r| {
                            r.get::<_, i64>(0)
                        })?;
                }
                finished = conn.query_row("SELECT count(*) FROM done", [], |r| r.get(0))?;
                conn.execute_batch("COMMIT")?;
                seen = (sum, accounts);
            } else {
                let (sum, n, done) = conn.query_row(
                    "SELECT sum(balance), count(*), (SELECT count(*) FROM done) FROM accounts",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?;
                seen = (sum, n);
                finished = done;
            }
            Ok(())
        })?;
        reads += 1;
        if seen != (total, accounts) {
            return Err(Failure::Invariant(format!(
                "read #{reads} ({}) saw sum(balance) = {}, count = {}; expected {total}, {accounts}",
                if per_row {
                    "row by row in one transaction"
                } else {
                    "one statement"
                },
                seen.0,
                seen.1
            )));
        }
        if checkpoints && reads % 50 == 25 {
            checkpoint(&conn, "PASSIVE")?;
        }
        if checkpoints && reads % 300 == 150 {
            checkpoint(&conn, "RESTART")?;
        }
        if finished >= writers {
            break;
        }
        if started.elapsed() > DEADLINE {
            return Err(Failure::Error(format!(
                "writers did not finish within {DEADLINE:?} ({finished} of {writers} done)"
            )));
        }
    }
    println!("reads {reads}");
    Ok(())
}

/// Appends rows with consecutive sequence numbers forever (until killed). A number is
/// printed (and flushed) only after its COMMIT returned, so every printed number must
/// survive a SIGKILL. Rows vary in size (some overflow pages), and WAL checkpoints run
/// now and then, so kills land in every phase of a write.
fn crash_writer(args: &Args) -> Result<(), Failure> {
    let conn = open(args)?;
    // A tiny page cache makes the big transactions spill dirty pages into the database
    // before COMMIT (rollback mode: EXCLUSIVE lock and a journal sync mid-transaction).
    conn.execute_batch("PRAGMA cache_size=16")?;
    let started = Instant::now();
    let mut stdout = std::io::stdout().lock();
    let mut seq: i64 =
        conn.query_row("SELECT coalesce(max(seq), 0) FROM seqs", [], |r| r.get(0))?;
    loop {
        seq += 1;
        let sql = crash_transaction_sql(seq);
        retry_busy(&conn, started, |conn| Ok(conn.execute_batch(&sql)?))?;
        writeln!(stdout, "{seq}")
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("writing to stdout: {e}"))?;
        if seq % 16 == 0 {
            checkpoint(&conn, "PASSIVE")?;
        }
    }
}
