//! What the threads of `bench concurrency` do, and how their latencies become the
//! numbers of one run.
//!
//! Every database holds one table `kv(id INTEGER PRIMARY KEY, v, payload)` of `--rows`
//! rows with a [`PAYLOAD_BYTES`]-byte payload each. A reader alternates three point
//! lookups and one short range scan ([`SCAN_ROWS`] rows in key order); a writer commits
//! small transactions (`BEGIN IMMEDIATE`, [`ROWS_PER_COMMIT`] single-row UPDATEs,
//! `COMMIT`). Every operation checks its answer (the row exists and has its payload, the
//! scan returns consecutive keys, each UPDATE changed one row): a wrong answer or a
//! SQLite error ends the run with an error, so a rate is never made of failures.
//!
//! A run lasts a fixed wall-clock window (`--duration-ms`) rather than a fixed number of
//! operations: with N threads, a fixed count ends when the slowest thread ends, and the
//! tail of the run would measure fewer threads than N. Each thread runs until the
//! window closes and finishes the operation it is in; the rate of a kind is its
//! operations over the time from the common start to the last thread's end.

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

use crate::bench::common::database;
use crate::bench::common::rng::{mix, SplitMix64};
use crate::bench::common::settings::{JournalMode, Settings, Synchronous};
use crate::bench::common::signals;
use crate::bench::common::targets::{self, Target};

/// Bytes of each row's payload.
pub const PAYLOAD_BYTES: usize = 100;
/// Rows a range scan reads.
pub const SCAN_ROWS: u64 = 50;
/// Rows a writer's transaction updates.
pub const ROWS_PER_COMMIT: usize = 4;
/// Point lookups per range scan in a reader's mix.
const LOOKUPS_PER_SCAN: u64 = 3;
/// `busy_timeout` of every connection: a WAL reader never waits for the writer, but a
/// rare WAL-index recovery or a second writer process may hold a lock briefly.
pub const BUSY_TIMEOUT_MS: u64 = 5_000;
/// Latency samples reserved per kind and thread before the window opens, so that the
/// timed loop rarely grows a vector.
const RESERVED_SAMPLES: usize = 1 << 14;

/// What the threads of a run do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// One database, N reader threads in one process: beside one writer thread in WAL
    /// mode; alone in a rollback-journal mode, whose writer would lock them out (a
    /// rollback-mode pool serves reads only).
    Readers,
    /// N threads, each committing to its own database.
    Databases,
    /// One WAL database: a writer thread here, N readers in other processes (stock
    /// `sqlite3` and this program, alternately).
    Processes,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Readers => "readers",
            Pattern::Databases => "databases",
            Pattern::Processes => "processes",
        }
    }

    /// What N counts in this pattern, for titles.
    pub fn describe(self, threads: u32, journal: JournalMode) -> String {
        match self {
            Pattern::Readers if journal == JournalMode::Wal => {
                format!("{threads} reader thread(s) + 1 writer, one database")
            }
            Pattern::Readers => format!("{threads} reader thread(s), no writer, one database"),
            Pattern::Databases => format!("{threads} thread(s), one database each"),
            Pattern::Processes => {
                let (stock, ours) = reader_processes(threads);
                format!(
                    "1 writer + {threads} reader process(es): {stock} stock sqlite3, {ours} of \
                     this program"
                )
            }
        }
    }
}

/// The reader processes of the processes pattern with N readers: (stock `sqlite3`, this
/// program's), alternating from a stock one.
pub fn reader_processes(threads: u32) -> (u32, u32) {
    (threads.div_ceil(2), threads / 2)
}

/// One kind of operation, measured separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A point lookup by primary key, through the target.
    Lookup,
    /// A range scan of [`SCAN_ROWS`] rows, through the target.
    Scan,
    /// A small write transaction, through the target.
    Commit,
    /// A point lookup by a stock `sqlite3` process (its `unix` VFS), timed by the driving
    /// process around the pipe.
    Sqlite3Lookup,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lookup => "lookup",
            Kind::Scan => "scan",
            Kind::Commit => "commit",
            Kind::Sqlite3Lookup => "sqlite3 lookup",
        }
    }

    /// The unit of its rate.
    pub fn rate_unit(self) -> &'static str {
        match self {
            Kind::Lookup => "lookups/s",
            Kind::Scan => "scans/s",
            Kind::Commit => "commits/s",
            Kind::Sqlite3Lookup => "sqlite3 lookups/s",
        }
    }
}

/// One kind's numbers in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindOutcome {
    pub kind: Kind,
    /// Operations completed (and checked) in the run.
    pub ops: u64,
    /// `ops` over the run's elapsed time.
    pub rate_per_s: f64,
    /// Latency percentiles of the run's operations of this kind (nearest rank); `None`
    /// when a starved run completed no operation of the kind.
    pub p50_s: Option<f64>,
    pub p99_s: Option<f64>,
}

/// What one measured run reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellOutcome {
    /// From the common start to the last thread's end.
    pub elapsed_s: f64,
    /// One entry per kind the pattern runs, in [`Kind`] order.
    pub kinds: Vec<KindOutcome>,
}

/// The `percent`-th percentile of ascending `sorted` by nearest rank: the smallest
/// sample with at least `percent` % of the samples at or below it. `None` when empty.
pub fn percentile(sorted: &[u64], percent: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (percent / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Latencies in nanoseconds, per kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    by_kind: Vec<(Kind, Vec<u64>)>,
}

impl Latencies {
    /// Room for the kinds a thread will record, reserved before the window opens.
    pub fn for_kinds(kinds: &[Kind]) -> Latencies {
        Latencies {
            by_kind: kinds
                .iter()
                .map(|&kind| (kind, Vec::with_capacity(RESERVED_SAMPLES)))
                .collect(),
        }
    }

    pub fn record(&mut self, kind: Kind, nanos: u64) {
        match self.by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, samples)) => samples.push(nanos),
            None => self.by_kind.push((kind, vec![nanos])),
        }
    }

    pub fn merge(&mut self, other: Latencies) {
        for (kind, samples) in other.by_kind {
            match self.by_kind.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, mine)) => mine.extend(samples),
                None => self.by_kind.push((kind, samples)),
            }
        }
    }

    /// Rates over `elapsed_s` and percentiles, one entry per kind in [`Kind`] order.
    pub fn outcome(mut self, elapsed_s: f64) -> CellOutcome {
        self.by_kind.sort_by_key(|(kind, _)| *kind);
        let kinds = self
            .by_kind
            .into_iter()
            .map(|(kind, mut samples)| {
                samples.sort_unstable();
                let seconds = |p| percentile(&samples, p).map(|ns| ns as f64 / 1e9);
                KindOutcome {
                    kind,
                    ops: samples.len() as u64,
                    rate_per_s: samples.len() as f64 / elapsed_s,
                    p50_s: seconds(50.0),
                    p99_s: seconds(99.0),
                }
            })
            .collect();
        CellOutcome { elapsed_s, kinds }
    }
}

/// Everything a run needs to know besides its target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub rows: u64,
    pub synchronous: Synchronous,
    pub duration_ms: u64,
    pub seed: u64,
}

impl Shape {
    pub fn settings(&self, journal: JournalMode) -> Settings {
        Settings {
            journal,
            synchronous: self.synchronous,
        }
    }

    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }

    /// The random stream of thread or process `index`.
    pub fn rng(&self, index: u64) -> SplitMix64 {
        SplitMix64::new(mix(self.seed ^ mix(index.wrapping_add(1))))
    }
}

/// The one target a worker is sent, by its `--targets` name.
pub fn resolve_target(name: &str) -> Result<Target> {
    let [target] = targets::resolve(&[name.to_string()])?
        .try_into()
        .map_err(|_| anyhow!("one target name resolves to one target"))?;
    if target.is_memory() {
        bail!("--targets {name}: bench concurrency shares database files; memory has none");
    }
    Ok(target)
}

/// A connection of one thread to the database at `path`, with the busy timeout and the
/// run's journal mode and synchronous level applied and read back.
pub fn open(target: &Target, path: &Path, settings: Settings) -> Result<Connection> {
    let vfs = target
        .vfs
        .as_deref()
        .ok_or_else(|| anyhow!("target {} has no VFS", target.label))?;
    let connection = database::connect(target, vfs, path)?;
    connection.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))?;
    database::configure(&connection, target, settings)?;
    Ok(connection)
}

/// The payload of row `id` (and of its updates, `generation` > 0).
fn payload(id: u64, generation: u64) -> [u8; PAYLOAD_BYTES] {
    let mut bytes = [0u8; PAYLOAD_BYTES];
    let mut rng = SplitMix64::new(mix(id) ^ generation);
    for chunk in bytes.chunks_mut(8) {
        let word = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    bytes
}

/// Creates the database at `path` (removing any old one) with `rows` rows, through
/// `target`, and closes it.
pub fn create(target: &Target, path: &Path, settings: Settings, rows: u64) -> Result<()> {
    database::remove_database_files(path);
    let connection = open(target, path, settings)?;
    connection.execute_batch(
        "CREATE TABLE kv(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, payload BLOB NOT NULL)",
    )?;
    let transaction = connection.unchecked_transaction()?;
    {
        let mut insert =
            transaction.prepare("INSERT INTO kv(id, v, payload) VALUES (?1, 0, ?2)")?;
        for id in 1..=rows {
            insert.execute(params![id as i64, &payload(id, 0)[..]])?;
        }
    }
    transaction.commit()?;
    connection
        .close()
        .map_err(|(_, error)| error)
        .with_context(|| format!("closing {} after creating it", path.display()))
}

/// One point lookup: the row must exist with its full payload.
pub fn lookup(connection: &Connection, rng: &mut SplitMix64, rows: u64) -> Result<()> {
    let id = 1 + rng.below(rows);
    let mut statement =
        connection.prepare_cached("SELECT v, length(payload) FROM kv WHERE id = ?1")?;
    let length: i64 = statement
        .query_row([id as i64], |row| row.get(1))
        .with_context(|| format!("lookup of row {id}"))?;
    if length != PAYLOAD_BYTES as i64 {
        bail!("lookup of row {id}: payload of {length} bytes instead of {PAYLOAD_BYTES}");
    }
    Ok(())
}

/// One range scan: [`SCAN_ROWS`] consecutive keys from a random start.
pub fn scan(connection: &Connection, rng: &mut SplitMix64, rows: u64) -> Result<()> {
    let first = 1 + rng.below(rows - SCAN_ROWS + 1);
    let mut statement =
        connection.prepare_cached("SELECT id FROM kv WHERE id >= ?1 ORDER BY id LIMIT ?2")?;
    let mut answer = statement.query(params![first as i64, SCAN_ROWS as i64])?;
    let mut expected = first;
    while let Some(row) = answer.next()? {
        let id = row.get::<_, i64>(0)? as u64;
        if id != expected {
            bail!("scan from row {first}: row {id} where row {expected} was expected");
        }
        expected += 1;
    }
    if expected != first + SCAN_ROWS {
        bail!(
            "scan from row {first}: {} rows instead of {SCAN_ROWS}",
            expected - first
        );
    }
    Ok(())
}

/// One small write transaction; every UPDATE must change its row.
pub fn commit(connection: &Connection, rng: &mut SplitMix64, rows: u64) -> Result<()> {
    connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let updated = update_rows(connection, rng, rows);
    if updated.is_err() {
        // Leaves the connection usable; the run ends with the error anyway.
        let _ = connection.execute_batch("ROLLBACK");
    }
    updated?;
    connection.prepare_cached("COMMIT")?.execute([])?;
    Ok(())
}

fn update_rows(connection: &Connection, rng: &mut SplitMix64, rows: u64) -> Result<()> {
    let mut update =
        connection.prepare_cached("UPDATE kv SET v = v + 1, payload = ?2 WHERE id = ?1")?;
    for _ in 0..ROWS_PER_COMMIT {
        let id = 1 + rng.below(rows);
        let changed = update.execute(params![id as i64, &payload(id, rng.next_u64())[..]])?;
        if changed != 1 {
            bail!("update of row {id} changed {changed} rows instead of 1");
        }
    }
    Ok(())
}

/// What a thread of the run does in its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Three lookups, then a scan, and again.
    Reader,
    /// Small transactions.
    Writer,
}

impl Role {
    pub fn kinds(self) -> &'static [Kind] {
        match self {
            Role::Reader => &[Kind::Lookup, Kind::Scan],
            Role::Writer => &[Kind::Commit],
        }
    }
}

/// Runs `role` on `connection` until `deadline`, then finishes the operation it is in.
/// Stops with an error on a failed operation or a SIGINT/SIGTERM.
pub fn run_role(
    role: Role,
    connection: &Connection,
    rng: &mut SplitMix64,
    rows: u64,
    deadline: Instant,
) -> Result<Latencies> {
    let mut latencies = Latencies::for_kinds(role.kinds());
    let mut count: u64 = 0;
    loop {
        let started = Instant::now();
        if started >= deadline {
            return Ok(latencies);
        }
        signals::check_interrupted()?;
        let kind = match role {
            Role::Writer => {
                commit(connection, rng, rows)?;
                Kind::Commit
            }
            Role::Reader if count % (LOOKUPS_PER_SCAN + 1) == LOOKUPS_PER_SCAN => {
                scan(connection, rng, rows)?;
                Kind::Scan
            }
            Role::Reader => {
                lookup(connection, rng, rows)?;
                Kind::Lookup
            }
        };
        latencies.record(kind, started.elapsed().as_nanos() as u64);
        count += 1;
    }
}

/// A thread of a run: what it does and on which database file.
pub struct ThreadPlan {
    pub role: Role,
    pub database: PathBuf,
    pub journal: JournalMode,
}

/// Runs every thread of `plans` at once for the window of `shape`: each opens its
/// connection first, then all start together. `beside` runs on the calling thread once
/// all are open, as the window opens (the processes pattern drives its other processes
/// there); it gets the deadline and returns its latencies and when its last operation
/// ended, which are merged in.
pub fn run_threads(
    target: &Target,
    shape: &Shape,
    plans: &[ThreadPlan],
    beside: impl FnOnce(Instant) -> Result<(Latencies, Instant)>,
) -> Result<CellOutcome> {
    // Every thread opens its connection, then all wait for one window: its start and
    // deadline are set once all are open, so the elapsed time measured from the start
    // covers every thread's work and is never shorter than the window.
    let opened_all = Barrier::new(plans.len() + 1);
    let window_set = Barrier::new(plans.len() + 1);
    let window_deadline: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = plans
            .iter()
            .enumerate()
            .map(|(index, plan)| {
                let (opened_all, window_set) = (&opened_all, &window_set);
                let window_deadline = &window_deadline;
                std::thread::Builder::new()
                    .name(format!("{}-{index}", plan.role.kinds()[0].name()))
                    .spawn_scoped(scope, move || -> Result<(Latencies, Instant)> {
                        let opened = open(target, &plan.database, shape.settings(plan.journal));
                        let mut rng = shape.rng(index as u64);
                        opened_all.wait();
                        window_set.wait();
                        let connection = opened?;
                        let deadline = *window_deadline
                            .get()
                            .expect("the window is set before the second barrier");
                        let latencies =
                            run_role(plan.role, &connection, &mut rng, shape.rows, deadline)
                                .with_context(|| {
                                    format!(
                                        "{} thread {index} on {}",
                                        plan.role.kinds()[0].name(),
                                        plan.database.display()
                                    )
                                })?;
                        Ok((latencies, Instant::now()))
                    })
                    .context("starting a benchmark thread")
            })
            .collect::<Result<_>>()?;
        opened_all.wait();
        let start = Instant::now();
        let deadline = start + shape.duration();
        window_deadline
            .set(deadline)
            .expect("the window is set once");
        window_set.wait();
        let others = beside(deadline);
        let mut all = Latencies::default();
        let mut end = start;
        let mut first_error = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok((latencies, finished))) => {
                    all.merge(latencies);
                    end = end.max(finished);
                }
                Ok(Err(error)) => {
                    first_error.get_or_insert(error);
                }
                Err(_) => {
                    first_error.get_or_insert(anyhow!("a benchmark thread panicked"));
                }
            }
        }
        if let Some(error) = first_error {
            return Err(error);
        }
        let (others, others_end) = others?;
        all.merge(others);
        Ok(all.outcome((end.max(others_end) - start).as_secs_f64()))
    })
}

/// The plans of the readers pattern: N readers on one database, and one writer in WAL
/// mode (a rollback-journal writer takes the EXCLUSIVE lock, which waits for every
/// reader to finish and keeps new ones out: beside N busy readers it would measure
/// SQLite's busy handler, not the VFS).
pub fn readers_plans(database: &Path, threads: u32, journal: JournalMode) -> Vec<ThreadPlan> {
    let plan = |role| ThreadPlan {
        role,
        database: database.to_path_buf(),
        journal,
    };
    let writer = (journal == JournalMode::Wal).then(|| plan(Role::Writer));
    writer
        .into_iter()
        .chain((0..threads).map(|_| plan(Role::Reader)))
        .collect()
}

/// The plans of the databases pattern: N writers, each on its own file in `dir`.
pub fn databases_plans(dir: &Path, threads: u32, journal: JournalMode) -> Vec<ThreadPlan> {
    (0..threads)
        .map(|index| ThreadPlan {
            role: Role::Writer,
            database: dir.join(format!("db-{index}.db")),
            journal,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(50));
        assert_eq!(percentile(&sorted, 99.0), Some(99));
        assert_eq!(percentile(&sorted, 100.0), Some(100));
        assert_eq!(percentile(&sorted, 0.0), Some(1));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        // 1000 samples with 10 slow ones: p99 is the last fast one, not a slow one,
        // and the p99 of 1001 such samples is the first slow one.
        let mut latencies = vec![1_000u64; 990];
        latencies.extend([1_000_000; 10]);
        assert_eq!(percentile(&latencies, 99.0), Some(1_000));
        latencies.push(1_000_000);
        assert_eq!(percentile(&latencies, 99.0), Some(1_000_000));
    }

    #[test]
    fn outcomes_have_rates_and_percentiles_per_kind_in_order() {
        let mut first = Latencies::for_kinds(Role::Reader.kinds());
        let mut second = Latencies::default();
        // Synthetic latencies: lookups 1..=300 µs shuffled over two threads, commits
        // 2 and 4 ms.
        for micros in (1..=300u64).rev() {
            let target = if micros % 2 == 0 {
                &mut first
            } else {
                &mut second
            };
            target.record(Kind::Lookup, micros * 1_000);
        }
        second.record(Kind::Commit, 4_000_000);
        second.record(Kind::Commit, 2_000_000);
        first.merge(second);
        let outcome = first.outcome(0.5);
        let kinds: Vec<Kind> = outcome.kinds.iter().map(|k| k.kind).collect();
        // Scan was reserved but never run: it reports no operations.
        assert_eq!(kinds, [Kind::Lookup, Kind::Scan, Kind::Commit]);
        let lookup = &outcome.kinds[0];
        assert_eq!(lookup.ops, 300);
        assert_eq!(lookup.rate_per_s, 600.0);
        assert_eq!(lookup.p50_s, Some(150e-6));
        assert_eq!(lookup.p99_s, Some(297e-6));
        assert_eq!(outcome.kinds[1].ops, 0);
        assert_eq!(outcome.kinds[1].p50_s, None);
        // It crosses the worker pipe as it is.
        let text = serde_json::to_string(&outcome).unwrap();
        assert_eq!(serde_json::from_str::<CellOutcome>(&text).unwrap(), outcome);
        let commit = &outcome.kinds[2];
        assert_eq!(
            (commit.ops, commit.p50_s, commit.p99_s),
            (2, Some(2e-3), Some(4e-3))
        );
    }

    fn shape() -> Shape {
        Shape {
            rows: 200,
            synchronous: Synchronous::Normal,
            duration_ms: 1,
            seed: 1,
        }
    }

    #[test]
    fn every_operation_checks_its_answer() {
        let _counters = targets::counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.db");
        let target = resolve_target("unix").unwrap();
        let settings = shape().settings(JournalMode::Wal);
        create(&target, &path, settings, 200).unwrap();
        let connection = open(&target, &path, settings).unwrap();
        let mut rng = shape().rng(0);
        for _ in 0..50 {
            lookup(&connection, &mut rng, 200).unwrap();
            scan(&connection, &mut rng, 200).unwrap();
            commit(&connection, &mut rng, 200).unwrap();
        }
        let updates: i64 = connection
            .query_row("SELECT sum(v) FROM kv", [], |row| row.get(0))
            .unwrap();
        assert_eq!(updates, 50 * ROWS_PER_COMMIT as i64);
        // Rows missing from the database make each kind fail, naming what it saw.
        connection
            .execute_batch("DELETE FROM kv WHERE id % 10 = 3")
            .unwrap();
        let failing = |op: fn(&Connection, &mut SplitMix64, u64) -> Result<()>| {
            let mut rng = shape().rng(9);
            (0..100)
                .find_map(|_| op(&connection, &mut rng, 200).err())
                .map(|e| format!("{e:#}"))
                .unwrap()
        };
        assert!(failing(lookup).contains("lookup of row"));
        assert!(failing(scan).contains("scan from row"));
        assert!(failing(commit).contains("changed 0 rows instead of 1"));
        connection
            .execute_batch("UPDATE kv SET payload = x'00' WHERE id = 1")
            .unwrap();
        let mut rng = shape().rng(0);
        let error = (0..10_000)
            .find_map(|_| lookup(&connection, &mut rng, 1).err())
            .unwrap();
        assert!(
            format!("{error:#}").contains("payload of 1 bytes"),
            "{error:#}"
        );
    }

    #[test]
    fn threads_of_a_run_all_report() {
        let _counters = targets::counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let target = resolve_target("unix").unwrap();
        let shape = Shape {
            duration_ms: 20,
            ..shape()
        };
        let path = dir.path().join("shared.db");
        create(&target, &path, shape.settings(JournalMode::Wal), shape.rows).unwrap();
        let outcome = run_threads(
            &target,
            &shape,
            &readers_plans(&path, 2, JournalMode::Wal),
            |_| Ok((Latencies::default(), Instant::now())),
        )
        .unwrap();
        let kinds: Vec<Kind> = outcome.kinds.iter().map(|k| k.kind).collect();
        assert_eq!(kinds, [Kind::Lookup, Kind::Scan, Kind::Commit]);
        assert!(outcome.kinds.iter().all(|k| k.ops > 0), "{outcome:?}");
        assert!(outcome.elapsed_s >= 0.02);
        // A rollback-journal pool: readers only, each with its own connection.
        let path = dir.path().join("rollback.db");
        let delete = shape.settings(JournalMode::Delete);
        create(&target, &path, delete, shape.rows).unwrap();
        let plans = readers_plans(&path, 3, JournalMode::Delete);
        assert_eq!(plans.len(), 3);
        assert!(plans
            .iter()
            .all(|p| p.role == Role::Reader && p.journal == JournalMode::Delete));
        let outcome = run_threads(&target, &shape, &plans, |_| {
            Ok((Latencies::default(), Instant::now()))
        })
        .unwrap();
        let kinds: Vec<Kind> = outcome.kinds.iter().map(|k| k.kind).collect();
        assert_eq!(kinds, [Kind::Lookup, Kind::Scan]);
        assert!(outcome.kinds.iter().all(|k| k.ops > 0), "{outcome:?}");
        let mode: String = open(&target, &path, delete)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        let failing = run_threads(
            &target,
            &shape,
            &readers_plans(&dir.path().join("missing/x.db"), 1, JournalMode::Wal),
            |_| Ok((Latencies::default(), Instant::now())),
        )
        .unwrap_err();
        assert!(
            format!("{failing:#}").contains("missing/x.db"),
            "{failing:#}"
        );
    }
}
