//! The data of `bench cold` and its tests: the rows of the two tables (regenerated from
//! their index, so a run can look up keys the build inserted), and one measured run of
//! one test in one cache state.
//!
//! The tables, filled in random key order, pair by pair:
//!
//! * `w(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID`: random 17-character text keys, so a
//!   scan in key order visits its leaf pages in no particular order of the file;
//! * `r(id INTEGER PRIMARY KEY, a, b, v)` with the index `r_a` on `a`: random rowids,
//!   `a` and `b` random, so neither a rowid scan nor an `r_a` range follows the file.
//!
//! The rows of `w` and `r` are inserted alternately, so the pages of the two tables (and
//! of `r_a`) interleave in the file.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use rusqlite::{Connection, Statement};
use serde::{Deserialize, Serialize};
use sqlite_uring::IoStats;

use crate::bench::common::checksum::Checksum;
use crate::bench::common::counts;
use crate::bench::common::database;
use crate::bench::common::pagecache::{self, CacheState};
use crate::bench::common::process_usage::ProcessUsage;
use crate::bench::common::rng::{mix, SplitMix64, GOLDEN_GAMMA};
use crate::bench::common::settings::{JournalMode, Settings, Synchronous};
use crate::bench::common::signals::check_interrupted;
use crate::bench::common::targets::Target;

/// Seed of every row; changing it changes every database and checksum.
pub const SEED: u64 = 0xC01D_DA7A_5EED_0001;
/// Random keys looked up by the point-lookups test, each run alike.
pub const LOOKUPS: u64 = 200;
/// The values of `r.a` and `r.b` lie in `0..VALUE_RANGE`.
const VALUE_RANGE: u64 = 1 << 62;
/// Tenths of the `a` range the index-range test covers: from 4.5/10 to 5.5/10.
const RANGE_FROM_TENTHS: u64 = 45;
/// The index the CREATE INDEX test makes, dropped again after each run.
pub const CREATED_INDEX: &str = "cold_b";
/// The statement of the CREATE INDEX test.
pub const CREATE_INDEX: &str = "CREATE INDEX cold_b ON r(b)";

/// The tests, in the order they run and are listed.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ColdTest {
    /// `SELECT count(*), sum(length(v)) FROM w`: every leaf of the WITHOUT ROWID table.
    ScanWithoutRowid,
    /// `SELECT count(*), sum(length(v)) FROM r`: every leaf of the rowid table.
    ScanRowid,
    /// A tenth of the `r_a` index in order, each entry's row read from `r` (`v` is not
    /// in the index).
    IndexRange,
    /// `CREATE INDEX cold_b ON r(b)`: a scan of `r`, a sort, the index written and
    /// committed (dropped again untimed).
    CreateIndex,
    /// `PRAGMA integrity_check` of the whole database.
    IntegrityCheck,
    /// `VACUUM INTO` a new file in --dir (deleted again untimed).
    VacuumInto,
    /// 200 random rows by primary key, alternately from `w` (text key) and `r` (rowid).
    PointLookups,
}

impl ColdTest {
    pub const ALL: [ColdTest; 7] = [
        ColdTest::ScanWithoutRowid,
        ColdTest::ScanRowid,
        ColdTest::IndexRange,
        ColdTest::CreateIndex,
        ColdTest::IntegrityCheck,
        ColdTest::VacuumInto,
        ColdTest::PointLookups,
    ];

    /// The `--tests` name.
    pub fn name(self) -> &'static str {
        match self {
            ColdTest::ScanWithoutRowid => "scan-without-rowid",
            ColdTest::ScanRowid => "scan-rowid",
            ColdTest::IndexRange => "index-range",
            ColdTest::CreateIndex => "create-index",
            ColdTest::IntegrityCheck => "integrity-check",
            ColdTest::VacuumInto => "vacuum-into",
            ColdTest::PointLookups => "point-lookups",
        }
    }

    /// What the test does, for titles.
    pub fn describe(self) -> &'static str {
        match self {
            ColdTest::ScanWithoutRowid => "full scan of the WITHOUT ROWID table w",
            ColdTest::ScanRowid => "full scan of the rowid table r",
            ColdTest::IndexRange => "a tenth of index r_a in order, each row read from r",
            ColdTest::CreateIndex => "CREATE INDEX on r(b), committed",
            ColdTest::IntegrityCheck => "PRAGMA integrity_check",
            ColdTest::VacuumInto => "VACUUM INTO a new file",
            ColdTest::PointLookups => "200 random rows by primary key (w and r alternately)",
        }
    }

    /// 1-based position in [`ColdTest::ALL`].
    pub fn number(self) -> u32 {
        ColdTest::ALL
            .iter()
            .position(|t| *t == self)
            .map_or(0, |i| i as u32 + 1)
    }
}

/// What one case runs: a built-in test on the built database, or a statement given with
/// `--query` on the database given with `--database`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Test {
    Builtin(ColdTest),
    /// The `number`-th `--query` (from 1).
    Query {
        number: u32,
        sql: String,
    },
}

impl Test {
    /// The name in tables and exports: the built-in test's `--tests` name, or `query-N`.
    pub fn name(&self) -> String {
        match self {
            Test::Builtin(test) => test.name().to_string(),
            Test::Query { number, .. } => format!("query-{number}"),
        }
    }

    /// What the test does, for titles (a query: its statement).
    pub fn describe(&self) -> String {
        match self {
            Test::Builtin(test) => test.describe().to_string(),
            Test::Query { sql, .. } => format!("`{}`", one_line(sql)),
        }
    }

    /// A `--query` test's statement.
    pub fn query(&self) -> Option<&str> {
        match self {
            Test::Builtin(_) => None,
            Test::Query { sql, .. } => Some(sql),
        }
    }

    /// The test's number: a built-in test's position in [`ColdTest::ALL`], a query's
    /// position among the `--query` statements (a run has one kind or the other).
    pub fn number(&self) -> u32 {
        match self {
            Test::Builtin(test) => test.number(),
            Test::Query { number, .. } => *number,
        }
    }
}

/// The `index`-th value of the stream `stream` of row data.
fn value(stream: u64, index: u64) -> u64 {
    mix(SEED ^ stream.wrapping_mul(GOLDEN_GAMMA) ^ mix(index))
}

/// Key of row `index` of `w`: `k` and 16 hex digits.
pub fn w_key(index: u64) -> String {
    format!("k{:016x}", value(1, index))
}

/// Rowid of row `index` of `r`: positive, below 2^62.
pub fn r_id(index: u64) -> i64 {
    (value(2, index) % VALUE_RANGE) as i64 + 1
}

/// Column `a` of row `index` of `r` (indexed by `r_a`).
pub fn r_a(index: u64) -> i64 {
    (value(3, index) % VALUE_RANGE) as i64
}

/// Column `b` of row `index` of `r` (what CREATE INDEX indexes).
pub fn r_b(index: u64) -> i64 {
    (value(4, index) % VALUE_RANGE) as i64
}

/// Column `v` of row `index` of `w` (`stream` 5) or `r` (6): 100 to 299 letters.
pub fn text(stream: u64, index: u64) -> String {
    let mut rng = SplitMix64::new(value(stream, index));
    let length = 100 + rng.below(200) as usize;
    let mut out = String::with_capacity(length);
    while out.len() < length {
        let mut bits = rng.next_u64();
        for _ in 0..12 {
            if out.len() == length {
                break;
            }
            out.push(char::from(b'a' + (bits % 26) as u8));
            bits /= 26;
        }
    }
    out
}

/// The `a` range of the index-range test: a tenth of all values.
pub fn index_range() -> (i64, i64) {
    let low = VALUE_RANGE / 100 * RANGE_FROM_TENTHS;
    (low as i64, (low + VALUE_RANGE / 10) as i64)
}

/// The row indexes the point-lookups test reads, each run the same.
pub fn lookup_rows(rows: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(SEED ^ 0x100c_0095);
    (0..LOOKUPS).map(|_| rng.below(rows.max(1))).collect()
}

/// The schema of the database, as the build makes it.
pub const SCHEMA: &str = "
    CREATE TABLE w(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE r(id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER NOT NULL, v TEXT NOT NULL);
    CREATE INDEX r_a ON r(a);
";

/// Inserts row pairs `from..to` (a row of `w`, then a row of `r`, alternately).
pub fn insert_pairs(connection: &Connection, from: u64, to: u64) -> Result<()> {
    let mut into_w = connection.prepare_cached("INSERT INTO w(k, v) VALUES (?1, ?2)")?;
    let mut into_r =
        connection.prepare_cached("INSERT INTO r(id, a, b, v) VALUES (?1, ?2, ?3, ?4)")?;
    for index in from..to {
        into_w.execute((w_key(index), text(5, index)))?;
        into_r.execute((r_id(index), r_a(index), r_b(index), text(6, index)))?;
    }
    Ok(())
}

/// One run of one test on one target: what the worker process executes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub test: Test,
    pub cache: CacheState,
    /// The `--targets` name (URI parameters included).
    pub target: String,
    pub journal: JournalMode,
    pub synchronous: Synchronous,
    /// The database (built beforehand, or given with `--database`), read by every run.
    pub database: std::path::PathBuf,
    /// The database is the user's (`--database`): opened read-only, its journal mode
    /// left as it is, never checkpointed.
    pub given: bool,
    /// Row pairs of the database (0 for a given one).
    pub rows: u64,
    /// The file VACUUM INTO writes, removed after the run.
    pub scratch: std::path::PathBuf,
}

impl RunSpec {
    /// The run, in messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}) on {} ({})",
            self.test.name(),
            self.cache.name(),
            self.target,
            self.journal.name()
        )
    }
}

/// What one measured run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// Wall time of the timed part.
    pub elapsed_s: f64,
    /// User + system CPU time of the whole process during the timed part.
    pub cpu_s: f64,
    /// `read_bytes` of `/proc/self/io` over the timed part: bytes fetched from the
    /// storage device by every thread of the process (io-wq workers included).
    pub read_bytes: u64,
    /// The query results, folded (see [`Checksum`]).
    pub checksum: u64,
    /// VFS calls of the timed part.
    #[serde(with = "counts::wire")]
    pub io: Option<IoStats>,
    /// Pages of the database's files still in the page cache right after the eviction
    /// (cold runs): 0 unless the filesystem keeps them (tmpfs) or someone maps them.
    pub resident_after_evict_pages: Option<u64>,
}

/// The statements a test runs, prepared before the timed part.
enum Prepared<'c> {
    Query(Statement<'c>),
    Range(Statement<'c>),
    Lookups {
        w: Statement<'c>,
        r: Statement<'c>,
        rows: Vec<u64>,
    },
    Execute(&'static str),
    Vacuum(Statement<'c>),
}

fn prepare<'c>(connection: &'c Connection, spec: &RunSpec) -> Result<Prepared<'c>> {
    let test = match &spec.test {
        Test::Builtin(test) => *test,
        Test::Query { number, sql } => {
            return Ok(Prepared::Query(prepare_query(connection, *number, sql)?))
        }
    };
    Ok(match test {
        ColdTest::ScanWithoutRowid => {
            Prepared::Query(connection.prepare("SELECT count(*), sum(length(v)) FROM w")?)
        }
        ColdTest::ScanRowid => {
            Prepared::Query(connection.prepare("SELECT count(*), sum(length(v)) FROM r")?)
        }
        ColdTest::IndexRange => Prepared::Range(connection.prepare(
            "SELECT count(*), sum(length(v)) FROM r INDEXED BY r_a WHERE a BETWEEN ?1 AND ?2",
        )?),
        ColdTest::CreateIndex => Prepared::Execute(CREATE_INDEX),
        ColdTest::IntegrityCheck => Prepared::Query(connection.prepare("PRAGMA integrity_check")?),
        ColdTest::VacuumInto => Prepared::Vacuum(connection.prepare("VACUUM INTO ?1")?),
        ColdTest::PointLookups => Prepared::Lookups {
            w: connection.prepare("SELECT length(v), v FROM w WHERE k = ?1")?,
            r: connection.prepare("SELECT length(v), a, v FROM r WHERE id = ?1")?,
            rows: lookup_rows(spec.rows),
        },
    })
}

/// The `number`-th `--query`, `sql`, prepared on `connection`: refused, naming it, when
/// SQLite does not prepare it, when it is no statement at all (only a comment or a
/// semicolon), when it has parameters (nothing would bind them) or when SQLite does not
/// mark it read-only (`sqlite3_stmt_readonly`: it could change the database).
pub fn prepare_query<'c>(
    connection: &'c Connection,
    number: u32,
    sql: &str,
) -> Result<Statement<'c>> {
    let shown = one_line(sql);
    let statement = connection
        .prepare(sql)
        .with_context(|| format!("--query {number} ({shown}) does not prepare"))?;
    if statement.expanded_sql().is_none() {
        bail!("--query {number} ({shown}) holds no statement: give one, e.g. --query 'SELECT count(*) FROM t'");
    }
    if statement.parameter_count() > 0 {
        bail!(
            "--query {number} ({shown}) has parameters, which nothing binds: write their \
             values into the statement"
        );
    }
    if !statement.readonly() {
        bail!(
            "--query {number} ({shown}) is not read-only (SQLite's sqlite3_stmt_readonly): \
             bench cold times only statements that leave the database as it is, such as \
             SELECT and PRAGMAs that only read"
        );
    }
    Ok(statement)
}

/// `sql` on one line: its runs of white space (line breaks included) made one space.
pub fn one_line(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Steps `statement` to the end, folding every row into `checksum`; returns the rows.
fn fold_rows(statement: &mut Statement<'_>, checksum: &mut Checksum) -> Result<u64> {
    let columns = statement.column_count();
    let mut rows = statement.raw_query();
    let mut count = 0;
    while let Some(row) = rows.next()? {
        for column in 0..columns {
            checksum.value(row.get_ref(column)?);
        }
        checksum.end_of_row();
        count += 1;
    }
    Ok(count)
}

/// The timed part of a test.
fn body(
    connection: &Connection,
    prepared: &mut Prepared<'_>,
    spec: &RunSpec,
    checksum: &mut Checksum,
) -> Result<()> {
    match prepared {
        Prepared::Query(statement) => {
            fold_rows(statement, checksum)?;
        }
        Prepared::Range(statement) => {
            let (low, high) = index_range();
            statement.raw_bind_parameter(1, low)?;
            statement.raw_bind_parameter(2, high)?;
            fold_rows(statement, checksum)?;
        }
        Prepared::Lookups { w, r, rows } => {
            for (position, &index) in rows.iter().enumerate() {
                check_interrupted()?;
                let found = if position % 2 == 0 {
                    w.raw_bind_parameter(1, w_key(index).as_str())?;
                    fold_rows(w, checksum)?
                } else {
                    r.raw_bind_parameter(1, r_id(index))?;
                    fold_rows(r, checksum)?
                };
                if found != 1 {
                    bail!(
                        "point lookup of row {index} found {found} rows instead of 1: the \
                         database does not hold the rows its spec says; rebuild it with --rebuild"
                    );
                }
            }
        }
        Prepared::Execute(sql) => connection.execute_batch(sql)?,
        Prepared::Vacuum(statement) => {
            let into = spec.scratch.to_string_lossy().into_owned();
            statement.raw_bind_parameter(1, into.as_str())?;
            fold_rows(statement, checksum)?;
        }
    }
    Ok(())
}

/// The scratch file and its companions, removed when dropped (also on an error or an
/// interruption).
struct Scratch<'p>(&'p Path);

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        database::remove_database_files(self.0);
    }
}

/// Runs `spec` once on `target`, whose VFS reads the database:
///
/// 1. untimed: open, journal mode and synchronous verified, a WAL checkpointed (empty),
///    the statements prepared (the schema is read, as by any application that has
///    prepared its statement); a `--database` file is opened read-only instead, its
///    journal mode only checked, its WAL read as it is;
/// 2. untimed: SQLite's page cache emptied (`PRAGMA shrink_memory`), then cold: the
///    database's files written back and evicted from the page cache; hot: the files read
///    once, start to end, into the page cache (the warm-up read);
/// 3. timed: the test; CPU time and `/proc/self/io` read_bytes around it;
/// 4. untimed: a written change undone (CREATE INDEX: the index dropped, a WAL
///    checkpointed; VACUUM INTO: the new file's size folded into the checksum, the file
///    deleted).
pub fn run_once(target: &Target, spec: &RunSpec) -> Result<RunOutcome> {
    let vfs = target
        .vfs
        .as_deref()
        .context("bench cold measures file targets only")?;
    let settings = Settings {
        journal: spec.journal,
        synchronous: spec.synchronous,
    };
    let wal = spec.journal == JournalMode::Wal;
    let connection = if spec.given {
        // The user's database: read-only, as it is (no PRAGMA changes it, no checkpoint).
        let connection = database::connect_read_only(target, vfs, &spec.database)?;
        check_journal_mode(&connection, spec)?;
        connection
    } else {
        let connection = database::connect(target, vfs, &spec.database)?;
        database::configure(&connection, target, settings)?;
        if wal {
            checkpoint(&connection)?;
        }
        connection
    };
    let scratch = Scratch(&spec.scratch);
    database::remove_database_files(scratch.0);
    let mut prepared =
        prepare(&connection, spec).with_context(|| format!("preparing {}", spec.test.name()))?;

    connection.execute_batch("PRAGMA shrink_memory")?;
    let resident_after_evict_pages = match spec.cache {
        CacheState::Cold => {
            pagecache::evict_database(&spec.database)?;
            Some(pagecache::database_residency(&spec.database)?.resident_pages)
        }
        CacheState::Hot => {
            pagecache::warm_database(&spec.database)?;
            None
        }
    };
    check_interrupted()?;

    let mut checksum = Checksum::default();
    crate::trace_file::mark(format_args!("body of {} starts", spec.describe()));
    target.counter.reset();
    let before = ProcessUsage::now()?;
    let started = Instant::now();
    let result = body(&connection, &mut prepared, spec, &mut checksum);
    let elapsed_s = started.elapsed().as_secs_f64();
    let used = ProcessUsage::now()?.since(&before);
    let io = target.counter.read();
    crate::trace_file::mark(format_args!(
        "body of {} ends: {elapsed_s:.6} s",
        spec.describe()
    ));
    drop(prepared);
    let undone = undo(&connection, spec, wal, &mut checksum);
    result.with_context(|| spec.describe())?;
    undone.with_context(|| format!("undoing the writes of {}", spec.describe()))?;
    if spec.test == Test::Builtin(ColdTest::IntegrityCheck) && checksum != integrity_ok() {
        bail!(
            "PRAGMA integrity_check of {} through {} did not answer ok: the database or the \
             VFS is broken; rerun with --rebuild, and if it persists, with the target alone",
            spec.database.display(),
            spec.target
        );
    }
    Ok(RunOutcome {
        elapsed_s,
        cpu_s: used.cpu_s,
        read_bytes: used.read_bytes,
        checksum: checksum.as_u64(),
        io,
        resident_after_evict_pages,
    })
}

/// The checksum of integrity_check's answer on a sound database: one row, `ok`.
fn integrity_ok() -> Checksum {
    let mut ok = Checksum::default();
    ok.text("ok");
    ok.end_of_row();
    ok
}

/// A given database's journal mode must be the one the run was planned with (read from
/// its header): another process may have changed it since.
fn check_journal_mode(connection: &Connection, spec: &RunSpec) -> Result<()> {
    let mode: String = connection.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    let wal = mode.eq_ignore_ascii_case("wal");
    if wal != (spec.journal == JournalMode::Wal) {
        bail!(
            "--database {}: its journal mode changed to {mode} during the run",
            spec.database.display()
        );
    }
    Ok(())
}

/// Truncates the WAL after copying it into the database.
fn checkpoint(connection: &Connection) -> Result<()> {
    let busy: i64 =
        connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
    if busy != 0 {
        bail!("PRAGMA wal_checkpoint(TRUNCATE) could not complete: another connection reads the database");
    }
    Ok(())
}

/// Step 4 of [`run_once`].
fn undo(connection: &Connection, spec: &RunSpec, wal: bool, checksum: &mut Checksum) -> Result<()> {
    let Test::Builtin(test) = &spec.test else {
        // A query changed nothing (`prepare` refused any that would).
        return Ok(());
    };
    match *test {
        ColdTest::CreateIndex => {
            let pages: i64 = connection.query_row("PRAGMA page_count", [], |row| row.get(0))?;
            checksum.value(rusqlite::types::ValueRef::Integer(pages));
            connection.execute_batch(&format!("DROP INDEX IF EXISTS {CREATED_INDEX}"))?;
            if wal {
                checkpoint(connection)?;
            }
        }
        ColdTest::VacuumInto => {
            let length = std::fs::metadata(&spec.scratch)
                .with_context(|| format!("VACUUM INTO wrote no {}", spec.scratch.display()))?
                .len();
            checksum.value(rusqlite::types::ValueRef::Integer(length as i64));
            database::remove_database_files(&spec.scratch);
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_deterministic_and_spread() {
        assert_eq!(w_key(7), w_key(7));
        assert_ne!(w_key(7), w_key(8));
        assert_eq!(w_key(0).len(), 17);
        let ids: Vec<i64> = (0..1000).map(r_id).collect();
        assert!(ids.iter().all(|&id| id > 0 && id <= 1 << 62));
        // Random order: about half of consecutive rowids descend.
        let descending = ids.windows(2).filter(|p| p[1] < p[0]).count();
        assert!((400..600).contains(&descending), "{descending}");
        for index in 0..100 {
            let v = text(5, index);
            assert!((100..300).contains(&v.len()), "{}", v.len());
            assert!(v.bytes().all(|b| b.is_ascii_lowercase()));
        }
        assert_ne!(text(5, 1), text(6, 1));
        let (low, high) = index_range();
        assert!(low > 0 && high > low);
        assert_eq!((high - low) as u64, VALUE_RANGE / 10);
        let rows = lookup_rows(50);
        assert_eq!(rows.len() as u64, LOOKUPS);
        assert!(rows.iter().all(|&r| r < 50));
        assert_eq!(rows, lookup_rows(50));
    }

    #[test]
    fn test_names_match_their_command_line_values() {
        for test in ColdTest::ALL {
            let value = test.to_possible_value().unwrap();
            assert_eq!(value.get_name(), test.name());
            assert_eq!(ColdTest::ALL[test.number() as usize - 1], test);
        }
    }
}
