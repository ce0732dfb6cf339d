//! One measured run: fresh database, untimed prologue, timed body, untimed checks.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use rusqlite::{Connection, Statement as SqlStatement};
use sqlite_uring::IoStats;

use crate::counting_vfs::MethodTimes;

use super::workload::{self, Param, Sizes, Statement};
use crate::bench::common::checksum::Checksum;
use crate::bench::common::database;
use crate::bench::common::pagecache::{self, CacheState};
use crate::bench::common::process_usage;
use crate::bench::common::settings::Settings;
use crate::bench::common::signals::check_interrupted;
use crate::bench::common::targets::Target;

/// How the body's statements reach SQLite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// SQL text with the values written in, parsed statement by statement (speed.html).
    Text,
    /// Each distinct statement prepared once, values bound.
    Prepared,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Text => "sql-text",
            Mode::Prepared => "prepared",
        }
    }
}

/// Everything one test needs, generated once before any run (generation is not timed).
pub struct TestPlan {
    pub number: u32,
    /// Statements of tests 1…N−1, replayed to rebuild the state test N starts from.
    pub prologue: Vec<Statement>,
    pub body: Vec<Statement>,
    /// `body` rendered as SQL text (empty in prepared mode).
    pub body_text: Vec<String>,
}

impl TestPlan {
    pub fn new(number: u32, sizes: Sizes, mode: Mode) -> TestPlan {
        let prologue = (1..number)
            .flat_map(|earlier| workload::statements(earlier, sizes))
            .filter(|s| !s.is_transaction_control())
            .collect();
        let body = workload::statements(number, sizes);
        let body_text = match mode {
            Mode::Text => body.iter().map(Statement::render).collect(),
            Mode::Prepared => Vec::new(),
        };
        TestPlan {
            number,
            prologue,
            body,
            body_text,
        }
    }
}

/// What one measured run produced.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub elapsed_s: f64,
    /// User + system CPU time of the whole process during the body, io_uring's kernel
    /// worker threads included (they belong to the process): wall time alone would hide
    /// work moved off the calling thread.
    pub cpu_s: f64,
    pub checksum: Checksum,
    pub io: Option<IoStats>,
    /// Calls and time per VFS method during the body, for a target timed by method
    /// (`--breakdown`).
    pub methods: Option<MethodTimes>,
}

/// Runs test `plan` once on `target`: a fresh database at `path`, PRAGMAs verified, the
/// prologue in one transaction, then the timed body, then the state folded into the
/// checksum. A SIGINT/SIGTERM stops it before the next statement (one atomic load per
/// statement, for every target alike), and the database's files are removed. The same
/// connection serves prologue and body, as the original suite ran all tests on one
/// connection (and `:memory:` has no other way to keep the state).
///
/// With `cache` cold, the body starts with no page of the database in any cache: SQLite's
/// page cache is emptied (`PRAGMA shrink_memory`) and the database's files (its WAL or
/// journal included) are written back and evicted from the OS page cache. `:memory:` has
/// no file: its runs are the same in both states.
pub fn run_once(
    target: &Target,
    settings: Settings,
    path: &Path,
    plan: &TestPlan,
    mode: Mode,
    cache: CacheState,
) -> Result<RunOutcome> {
    let database = database::open(target, path, settings)?;
    let connection = database.connection();
    run_prologue(connection, &plan.prologue)
        .with_context(|| format!("prologue of test {} on {}", plan.number, target.label))?;
    // The body prepares its own statements; the prologue's cached ones must not help it.
    connection.flush_prepared_statement_cache();
    if cache == CacheState::Cold && !target.is_memory() {
        connection
            .execute_batch("PRAGMA shrink_memory")
            .context("emptying SQLite's page cache before a cold test")?;
        pagecache::evict_database(path)?;
    }

    let mut checksum = Checksum::default();
    crate::trace_file::mark(format_args!("body of test {} starts", plan.number));
    target.counter.reset();
    if let Some(timer) = target.timer {
        timer.reset();
    }
    let cpu_before_s = process_usage::cpu_s();
    let started = Instant::now();
    let body = match mode {
        Mode::Text => run_text(connection, &plan.body_text, &mut checksum),
        Mode::Prepared => run_prepared(connection, &plan.body, &mut checksum),
    };
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_s = process_usage::cpu_s() - cpu_before_s;
    let io = target.counter.read();
    let methods = target.timer.map(|timer| timer.method_times());
    crate::trace_file::mark(format_args!(
        "body of test {} ends: {elapsed_s:.6} s",
        plan.number
    ));
    body.with_context(|| format!("test {} on {}", plan.number, target.label))?;

    fold_state(connection, &mut checksum)
        .with_context(|| format!("reading back the state after test {}", plan.number))?;
    Ok(RunOutcome {
        elapsed_s,
        cpu_s,
        checksum,
        io,
        methods,
    })
}

fn run_prologue(connection: &Connection, statements: &[Statement]) -> Result<()> {
    if statements.is_empty() {
        return Ok(());
    }
    connection.execute_batch("BEGIN")?;
    let mut ignored = Checksum::default();
    for statement in statements {
        check_interrupted()?;
        let mut prepared = connection.prepare_cached(statement.template)?;
        bind(&mut prepared, &statement.params)?;
        step_all(&mut prepared, &mut ignored)?;
    }
    connection.execute_batch("COMMIT")?;
    Ok(())
}

fn run_text(connection: &Connection, sql: &[String], checksum: &mut Checksum) -> Result<()> {
    for text in sql {
        check_interrupted()?;
        let mut statement = connection
            .prepare(text)
            .with_context(|| format!("in {text}"))?;
        step_all(&mut statement, checksum).with_context(|| format!("in {text}"))?;
    }
    Ok(())
}

fn run_prepared(
    connection: &Connection,
    statements: &[Statement],
    checksum: &mut Checksum,
) -> Result<()> {
    // A test has at most four distinct templates, so a list beats a map. Statements are
    // prepared on first use: a template may name a table an earlier statement creates.
    let mut prepared: Vec<(&'static str, SqlStatement<'_>)> = Vec::new();
    for statement in statements {
        check_interrupted()?;
        let index = match prepared.iter().position(|(t, _)| *t == statement.template) {
            Some(index) => index,
            None => {
                let compiled = connection
                    .prepare(statement.template)
                    .with_context(|| format!("in {}", statement.template))?;
                prepared.push((statement.template, compiled));
                prepared.len() - 1
            }
        };
        let compiled = &mut prepared[index].1;
        bind(compiled, &statement.params)?;
        step_all(compiled, checksum).with_context(|| format!("in {}", statement.template))?;
    }
    Ok(())
}

fn bind(statement: &mut SqlStatement<'_>, params: &[Param]) -> Result<()> {
    for (i, param) in params.iter().enumerate() {
        match param {
            Param::Int(value) => statement.raw_bind_parameter(i + 1, value)?,
            Param::Text(text) => statement.raw_bind_parameter(i + 1, text.as_str())?,
        }
    }
    Ok(())
}

/// Steps a statement to the end, folding every row into the checksum: SQLite computes a
/// SELECT's rows lazily, so an unread row is work not done.
fn step_all(statement: &mut SqlStatement<'_>, checksum: &mut Checksum) -> Result<()> {
    let columns = statement.column_count();
    let mut rows = statement.raw_query();
    while let Some(row) = rows.next()? {
        for column in 0..columns {
            checksum.value(row.get_ref(column)?);
        }
        checksum.end_of_row();
    }
    Ok(())
}

/// Folds the schema and every row of every table (in rowid order) into the checksum, so
/// a storage layer that loses or corrupts a write changes it even in tests without SELECTs.
fn fold_state(connection: &Connection, checksum: &mut Checksum) -> Result<()> {
    let mut schema = connection.prepare(
        "SELECT type, name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )?;
    let objects: Vec<(String, String)> = schema
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (kind, name) in objects {
        checksum.text(&kind);
        checksum.text(&name);
        if kind == "table" {
            let sql = format!(
                "SELECT * FROM \"{}\" ORDER BY rowid",
                name.replace('"', "\"\"")
            );
            step_all(&mut connection.prepare(&sql)?, checksum)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::common::settings::{JournalMode, Synchronous};
    use crate::bench::common::targets::resolve;

    /// Every test at a tiny scale gives the same checksum on memory and on unix in both
    /// journal modes, both statement modes and both cache states, and the checksums
    /// differ between tests.
    #[test]
    fn checksums_agree_across_targets_journals_and_modes() {
        let _counters = crate::bench::common::targets::counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let mut names = vec!["memory".to_string(), "unix".to_string()];
        // Once the real VFS is linked, it must agree too; until then it is not available.
        if resolve(&["io_uring".into()]).is_ok() {
            names.push("io_uring".into());
        }
        let targets = resolve(&names).unwrap();
        let sizes = Sizes { scale: 0.01 };
        let mut per_test = Vec::new();
        for (number, _) in workload::TESTS {
            let mut seen: Option<Checksum> = None;
            for (mode, cache) in [
                (Mode::Text, CacheState::Hot),
                (Mode::Prepared, CacheState::Hot),
                (Mode::Text, CacheState::Cold),
            ] {
                let plan = TestPlan::new(number, sizes, mode);
                for target in &targets {
                    for journal in [JournalMode::Delete, JournalMode::Wal] {
                        let settings = Settings {
                            journal,
                            synchronous: Synchronous::Normal,
                        };
                        let outcome = run_once(
                            target,
                            settings,
                            &dir.path().join("c.db"),
                            &plan,
                            mode,
                            cache,
                        )
                        .unwrap();
                        match seen {
                            None => seen = Some(outcome.checksum),
                            Some(first) => assert_eq!(
                                first, outcome.checksum,
                                "test {number} {} {journal:?} {mode:?} {cache:?}",
                                target.label
                            ),
                        }
                        if !target.is_memory() && number <= 3 {
                            let io = outcome.io.expect("file targets are counted");
                            assert!(io.write_calls > 0, "{io:?}");
                        }
                    }
                }
            }
            per_test.push(seen.unwrap());
        }
        per_test.sort_by_key(|c| c.hex());
        per_test.dedup();
        assert_eq!(
            per_test.len(),
            16,
            "each test leaves a different fingerprint"
        );
    }
}
