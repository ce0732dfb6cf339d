//! Power-loss crash states: a workload runs on a fault-injecting VFS whose power-loss
//! recorder (`src/io/power_loss.rs`, which documents the model) logs every write, truncate
//! and sync the engine hands the kernel, and the directory's entries and fsyncs. The
//! explorer then cuts power at every sync boundary (just before and just after each file,
//! directory or barrier sync) and at sampled points between, draws crash states at each
//! cut (all of them when the cut has few, else a seeded random sample: which unsynced
//! writes and truncates survive, the order of the ops of one engine batch, one torn write
//! at 512-byte sectors, lost appends leaving zeros, which directory changes survive), and
//! opens every distinct state with stock SQLite (`unix` VFS) and then, from a fresh copy,
//! with ours (`io_uring`). Each must pass:
//!
//! * `PRAGMA integrity_check` = ok on both databases (`main.db` and the attached
//!   `aux.db`);
//! * every transaction whose COMMIT had returned before the cut is present (with WAL and
//!   `synchronous=NORMAL`: every one followed, before the cut, by a sync of that
//!   database's WAL or database file — a checkpoint's);
//! * transactions are all-or-nothing: the `c` row of transaction `k` (row count, and
//!   which transaction it deletes) is there exactly when its rows are, with the payloads
//!   it wrote; nothing of an absent transaction is visible, and the visible ones are a
//!   prefix of the commit order;
//! * in rollback modes a two-database transaction (super-journal) is in both or neither.
//!
//! Workloads: rollback DELETE, TRUNCATE, PERSIST (`synchronous=FULL`) and WAL with
//! `synchronous=FULL` and `NORMAL`; each runs single-row commits, multi-page commits, a
//! cache-spilling transaction, a delete, VACUUM, two-database transactions under ATTACH,
//! and (WAL) PASSIVE/RESTART/TRUNCATE checkpoints. Routings: the default (`default`), the
//! syscall backend (`sync`), O_DIRECT with ring writes and syncs (`direct`), everything on
//! the ring (`ring`), and write-behind off (`write_behind_off`, the control).
//!
//! Reproduce: every test prints its seed; a failure prints its routing, cut and state.
//!
//! ```text
//! POWER_LOSS_SEED=<seed> cargo test --release -p sqlite-uring --test power_loss -- <test>
//! POWER_LOSS_SEED=<seed> POWER_LOSS_CUT=<position> cargo test --release -p sqlite-uring \
//!     --test power_loss -- <test>          # only that cut
//! POWER_LOSS_SOAK=20 cargo test --release -p sqlite-uring --test power_loss   # 20x states
//! ```
//!
//! `tests/power_loss_corpus.txt` keeps interesting states (cut named by the sync it is
//! next to, so it survives changes of batching) and replays them (`corpus_states`).
//! `misordered_flush_is_caught` proves the explorer can fail: the recorder's test-only
//! knob defers a journal's (or WAL's) fsync past the next batch of writes.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rusqlite::{Connection, OpenFlags};
use sqlite_uring::power_loss::{CrashChoice, Cut, History, Metadata, PowerLossLog};
use sqlite_uring::{Backend, FaultPlan, Options, Submission};

// ─── Configuration ───────────────────────────────────────────────────────────

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Journal {
    Delete,
    Truncate,
    Persist,
    WalFull,
    WalNormal,
}

impl Journal {
    fn name(self) -> &'static str {
        match self {
            Journal::Delete => "delete",
            Journal::Truncate => "truncate",
            Journal::Persist => "persist",
            Journal::WalFull => "wal_full",
            Journal::WalNormal => "wal_normal",
        }
    }

    fn parse(text: &str) -> Journal {
        [
            Journal::Delete,
            Journal::Truncate,
            Journal::Persist,
            Journal::WalFull,
            Journal::WalNormal,
        ]
        .into_iter()
        .find(|j| j.name() == text)
        .unwrap_or_else(|| panic!("unknown workload {text}"))
    }

    fn wal(self) -> bool {
        matches!(self, Journal::WalFull | Journal::WalNormal)
    }

    fn pragmas(self) -> (&'static str, &'static str) {
        match self {
            Journal::Delete => ("DELETE", "FULL"),
            Journal::Truncate => ("TRUNCATE", "FULL"),
            Journal::Persist => ("PERSIST", "FULL"),
            Journal::WalFull => ("WAL", "FULL"),
            Journal::WalNormal => ("WAL", "NORMAL"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Routing {
    name: &'static str,
    backend: Backend,
    submissions: [Submission; 3],
    direct: bool,
    write_behind: bool,
    /// `uring_wal_direct=on`: synced WAL commits written as whole O_DIRECT blocks.
    wal_direct: bool,
}

const SYSCALLS: [Submission; 3] = [Submission::Syscall; 3];

const ROUTINGS: [Routing; 6] = [
    Routing {
        name: "default",
        backend: Backend::IoUring,
        submissions: SYSCALLS,
        direct: false,
        write_behind: true,
        wal_direct: false,
    },
    Routing {
        name: "sync",
        backend: Backend::Syscall,
        submissions: SYSCALLS,
        direct: false,
        write_behind: true,
        wal_direct: false,
    },
    Routing {
        name: "direct",
        backend: Backend::IoUring,
        submissions: [Submission::Syscall, Submission::Ring, Submission::Ring],
        direct: true,
        write_behind: true,
        wal_direct: false,
    },
    Routing {
        name: "ring",
        backend: Backend::IoUring,
        submissions: [Submission::Ring; 3],
        direct: false,
        write_behind: true,
        wal_direct: false,
    },
    Routing {
        name: "write_behind_off",
        backend: Backend::IoUring,
        submissions: SYSCALLS,
        direct: false,
        write_behind: false,
        wal_direct: false,
    },
    Routing {
        name: "wal_direct",
        backend: Backend::IoUring,
        submissions: SYSCALLS,
        direct: false,
        write_behind: true,
        wal_direct: true,
    },
];

fn routing(name: &str) -> Routing {
    *ROUTINGS
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("unknown routing {name}"))
}

/// Default seed (a run prints the one it used; `POWER_LOSS_SEED` overrides it).
const DEFAULT_SEED: u64 = 0x5EED_0FF0_2026;
/// Random cut points between the sync boundaries, per workload and routing.
const SAMPLED_CUTS: usize = 150;
/// A cut with at most this many simple states (entry choices × pending-op subsets) is
/// enumerated exhaustively.
const EXHAUSTIVE_LIMIT: u64 = 32;
/// Random states drawn at a cut (besides exhaustive enumeration).
const STATES_PER_CUT: usize = 20;

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text} is not a number")))
}

fn seed() -> u64 {
    env_u64("POWER_LOSS_SEED").unwrap_or(DEFAULT_SEED)
}

fn soak() -> usize {
    env_u64("POWER_LOSS_SOAK").unwrap_or(1).max(1) as usize
}

// ─── The workload ────────────────────────────────────────────────────────────

#[derive(Clone, Copy, Debug)]
enum Step {
    /// Transaction: `rows` rows of `payload` bytes into main (and `aux_rows` into aux),
    /// optionally deleting an earlier transaction's rows, optionally with a tiny page
    /// cache so it spills.
    Txn {
        rows: usize,
        payload: usize,
        aux_rows: usize,
        deletes: Option<u64>,
        spill: bool,
    },
    Vacuum,
    /// `PRAGMA wal_checkpoint(mode)` (WAL only).
    Checkpoint(&'static str),
}

const fn txn(rows: usize, payload: usize) -> Step {
    Step::Txn {
        rows,
        payload,
        aux_rows: 0,
        deletes: None,
        spill: false,
    }
}

const SCRIPT: &[Step] = &[
    txn(1, 200),
    txn(1, 300),
    txn(12, 3000),
    txn(1, 100),
    Step::Checkpoint("PASSIVE"),
    Step::Txn {
        rows: 80,
        payload: 1500,
        aux_rows: 0,
        deletes: None,
        spill: true,
    },
    Step::Txn {
        rows: 2,
        payload: 500,
        aux_rows: 2,
        deletes: None,
        spill: false,
    },
    Step::Txn {
        rows: 1,
        payload: 100,
        aux_rows: 0,
        deletes: Some(3),
        spill: false,
    },
    Step::Vacuum,
    Step::Checkpoint("RESTART"),
    txn(1, 200),
    Step::Txn {
        rows: 3,
        payload: 2000,
        aux_rows: 3,
        deletes: None,
        spill: false,
    },
    txn(6, 3000),
    Step::Checkpoint("TRUNCATE"),
    txn(1, 150),
    txn(1, 150),
];

/// The transactions of [`SCRIPT`], numbered from 1.
fn transactions() -> Vec<Step> {
    SCRIPT
        .iter()
        .copied()
        .filter(|s| matches!(s, Step::Txn { .. }))
        .collect()
}

/// The deterministic payload of row `index` of transaction `txn`.
fn payload(txn: u64, index: u64, len: usize) -> Vec<u8> {
    let mut state = txn
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index.wrapping_mul(0xD1B5_4A32_D192_ED03))
        | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// [`payload`], generated once per row for the whole test binary.
fn expected_payload(txn: u64, index: u64, len: usize) -> &'static [u8] {
    static ALL: std::sync::OnceLock<BTreeMap<(u64, u64), Vec<u8>>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = BTreeMap::new();
        for (k, step) in transactions().iter().enumerate() {
            if let Step::Txn {
                rows,
                payload: len,
                aux_rows,
                ..
            } = *step
            {
                let k = k as u64 + 1;
                for index in 0..rows.max(aux_rows) as u64 {
                    all.insert((k, index), payload(k, index, len));
                }
            }
        }
        all
    })
    .get(&(txn, index))
    .map_or(&[], |bytes| &bytes[..len.min(bytes.len())])
}

/// What the workload's run recorded: the history and, per transaction, the positions at
/// which it began and at which its COMMIT returned.
struct Run {
    history: History,
    setup_end: usize,
    begun: Vec<usize>,
    returned: Vec<usize>,
}

/// Workload runs exclude each other and every check with our VFS: the write-behind queue
/// is one per process, so another connection's writes would flush this workload's queued
/// ones and change where its batches break (the recorded history, and so what a seed
/// reproduces). Checks share the lock among themselves.
static RUN_LOCK: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn run_lock() -> std::sync::RwLockWriteGuard<'static, ()> {
    RUN_LOCK
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn check_lock() -> std::sync::RwLockReadGuard<'static, ()> {
    RUN_LOCK
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn uri(path: &Path, routing: &Routing) -> String {
    format!(
        "file:{}?uring_direct={}&uring_write_behind={}&uring_wal_direct={}",
        path.display(),
        if routing.direct { "on" } else { "off" },
        if routing.write_behind { "on" } else { "off" },
        if routing.wal_direct { "on" } else { "off" }
    )
}

fn run_workload(journal: Journal, routing: &Routing, misorder: Option<&str>, dir: &Path) -> Run {
    let _serial = run_lock();
    // A fresh name per run: a name is registered for good, with the plan it was given.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let vfs_name = format!(
        "power_loss_{}_{}_{}",
        journal.name(),
        routing.name,
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let plan = FaultPlan::with_submissions(routing.backend, routing.submissions);
    sqlite_uring::register_with_faults(
        Options {
            vfs_name: vfs_name.clone(),
            backend: routing.backend,
            ..Default::default()
        },
        plan.clone(),
    )
    .expect("register the recording VFS");
    let log: Arc<PowerLossLog> = plan.record_power_loss(dir).expect("start recording");
    let conn = Connection::open_with_flags_and_vfs(
        uri(&dir.join("main.db"), routing),
        OpenFlags::default(),
        vfs_name.as_str(),
    )
    .expect("open the workload database");
    let (mode, sync) = journal.pragmas();
    let schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, txn INTEGER NOT NULL, \
                      idx INTEGER NOT NULL, payload BLOB NOT NULL);
                  CREATE TABLE c(txn INTEGER PRIMARY KEY, nrows INTEGER NOT NULL, \
                      deletes INTEGER);";
    conn.execute_batch(&format!(
        "PRAGMA journal_mode={mode}; PRAGMA synchronous={sync}; PRAGMA wal_autocheckpoint=0;
         {schema}"
    ))
    .unwrap();
    conn.execute("ATTACH ?1 AS aux", [uri(&dir.join("aux.db"), routing)])
        .unwrap();
    conn.execute_batch(&format!(
        "PRAGMA aux.journal_mode={mode}; PRAGMA aux.synchronous={sync};
         {}",
        schema
            .replace("TABLE t(", "TABLE aux.t(")
            .replace("TABLE c(", "TABLE aux.c(")
    ))
    .unwrap();
    if routing.direct {
        assert!(
            has_direct_descriptor(&dir.join("main.db")),
            "uring_direct=on opened no O_DIRECT descriptor on main.db"
        );
    }
    let setup_end = log.barrier();
    if misorder.is_some() {
        log.defer_syncs(misorder);
    }
    let mut begun = Vec::new();
    let mut returned = Vec::new();
    let mut next_txn = 1u64;
    for step in SCRIPT {
        match *step {
            Step::Txn {
                rows,
                payload: len,
                aux_rows,
                deletes,
                spill,
            } => {
                let k = next_txn;
                next_txn += 1;
                if spill {
                    conn.execute_batch("PRAGMA cache_size=8;").unwrap();
                }
                begun.push(log.mark());
                conn.execute_batch("BEGIN").unwrap();
                for (schema, count) in [("main", rows), ("aux", aux_rows)] {
                    if count == 0 {
                        continue;
                    }
                    let mut insert = conn
                        .prepare(&format!(
                            "INSERT INTO {schema}.t(txn, idx, payload) VALUES (?1, ?2, ?3)"
                        ))
                        .unwrap();
                    for index in 0..count as u64 {
                        insert
                            .execute(rusqlite::params![
                                k as i64,
                                index as i64,
                                payload(k, index, len)
                            ])
                            .unwrap();
                    }
                    if let Some(victim) = deletes.filter(|_| schema == "main") {
                        conn.execute("DELETE FROM main.t WHERE txn = ?1", [victim as i64])
                            .unwrap();
                    }
                    conn.execute(
                        &format!("INSERT INTO {schema}.c(txn, nrows, deletes) VALUES (?1, ?2, ?3)"),
                        rusqlite::params![
                            k as i64,
                            count as i64,
                            deletes.filter(|_| schema == "main").map(|v| v as i64)
                        ],
                    )
                    .unwrap();
                }
                conn.execute_batch("COMMIT").unwrap();
                returned.push(log.mark());
                if spill {
                    conn.execute_batch("PRAGMA cache_size=-2000;").unwrap();
                }
            }
            Step::Vacuum => conn.execute_batch("VACUUM").unwrap(),
            Step::Checkpoint(checkpoint) if journal.wal() => {
                for schema in ["main", "aux"] {
                    conn.query_row(
                        &format!("PRAGMA {schema}.wal_checkpoint({checkpoint})"),
                        [],
                        |_| Ok(()),
                    )
                    .unwrap();
                }
            }
            Step::Checkpoint(_) => {}
        }
    }
    if routing.wal_direct && journal == Journal::WalFull {
        let direct_writes = sqlite_uring::vfs_stats(&vfs_name)
            .expect("the recording VFS is registered")
            .wal_direct_writes;
        assert!(
            direct_writes > 0,
            "uring_wal_direct=on wrote no synced commit O_DIRECT"
        );
    }
    drop(conn);
    let history = log.history();
    plan.stop_power_loss();
    Run {
        history,
        setup_end,
        begun,
        returned,
    }
}

/// Whether this process holds a descriptor of `path` opened with O_DIRECT (so the
/// `direct` routing really writes around the page cache).
fn has_direct_descriptor(path: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_link(entry.path()).is_ok_and(|target| target == path)
            && std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                entry.file_name().to_string_lossy()
            ))
            .ok()
            .and_then(|info| {
                let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
                i64::from_str_radix(flags.trim(), 8).ok()
            })
            .is_some_and(|flags| flags & libc::O_DIRECT as i64 != 0)
    })
}

// ─── Checking one crash state ────────────────────────────────────────────────

/// What one database shows: its visible transactions.
struct DbView {
    visible: BTreeSet<u64>,
}

/// Checks one database (`main` or `aux`) of an opened crash state against the script.
fn check_database(conn: &Connection, schema: &str) -> Result<DbView, String> {
    let integrity: Vec<String> = conn
        .prepare(&format!("PRAGMA {schema}.integrity_check"))
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| format!("{schema}: integrity_check failed: {e}"))?;
    if integrity != ["ok"] {
        return Err(format!("{schema}: integrity_check: {integrity:?}"));
    }
    let script = transactions();
    let mut committed: BTreeMap<u64, (i64, Option<i64>)> = BTreeMap::new();
    let mut statement = conn
        .prepare(&format!("SELECT txn, nrows, deletes FROM {schema}.c"))
        .map_err(|e| format!("{schema}: read c: {e}"))?;
    let rows = statement
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{schema}: read c: {e}"))?;
    for (k, nrows, deletes) in rows {
        committed.insert(k as u64, (nrows, deletes));
    }
    let deleted: BTreeSet<u64> = committed
        .values()
        .filter_map(|(_, deletes)| deletes.map(|v| v as u64))
        .collect();
    let mut counts: BTreeMap<u64, i64> = BTreeMap::new();
    let mut statement = conn
        .prepare(&format!("SELECT txn, idx, payload FROM {schema}.t"))
        .map_err(|e| format!("{schema}: read t: {e}"))?;
    let rows = statement
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{schema}: read t: {e}"))?;
    for (k, index, bytes) in rows {
        let k = k as u64;
        let Some(Step::Txn { payload: len, .. }) = script.get((k as usize).wrapping_sub(1)) else {
            return Err(format!("{schema}: a row of unknown transaction {k}"));
        };
        if !committed.contains_key(&k) {
            return Err(format!(
                "{schema}: row {index} of transaction {k} is visible but its commit row is not \
                 (uncommitted data)"
            ));
        }
        if bytes != expected_payload(k, index as u64, *len) {
            return Err(format!(
                "{schema}: row {index} of transaction {k} has wrong bytes"
            ));
        }
        *counts.entry(k).or_default() += 1;
    }
    for (&k, &(nrows, _)) in &committed {
        let expected = if deleted.contains(&k) && schema == "main" {
            0
        } else {
            nrows
        };
        let found = counts.get(&k).copied().unwrap_or(0);
        if found != expected {
            return Err(format!(
                "{schema}: transaction {k} shows {found} rows, expected {expected} (partial)"
            ));
        }
    }
    Ok(DbView {
        visible: committed.keys().copied().collect(),
    })
}

/// What the cut allows: per database, transactions that must be there and the most that
/// may be.
struct Expectation {
    required_main: BTreeSet<u64>,
    required_aux: BTreeSet<u64>,
    begun: BTreeSet<u64>,
    atomic_across: bool,
}

fn expectation(run: &Run, journal: Journal, cut: usize) -> Expectation {
    let script = transactions();
    let durable_after = |k: usize, files: &[&str]| -> bool {
        let returned = run.returned[k];
        if returned > cut {
            return false;
        }
        match journal {
            // DELETE at synchronous=FULL does not sync the directory after unlinking the
            // journal (only EXTRA does, pager.c): until a later directory sync the unlink
            // may be undone by a power cut, and the journal, still hot, rolls the
            // transaction back — durable only once a directory sync followed.
            Journal::Delete => {
                return run
                    .history
                    .sync_positions()
                    .iter()
                    .any(|&p| p >= returned && p < cut && run.history.is_directory_sync(p))
            }
            Journal::Truncate | Journal::Persist | Journal::WalFull => return true,
            Journal::WalNormal => {}
        }
        files.iter().any(|suffix| {
            run.history
                .file_sync_positions(suffix)
                .iter()
                .any(|&p| p >= returned && p < cut)
        })
    };
    let mut required_main = BTreeSet::new();
    let mut required_aux = BTreeSet::new();
    let mut begun = BTreeSet::new();
    for (k, step) in script.iter().enumerate() {
        let id = k as u64 + 1;
        if run.begun[k] < cut {
            begun.insert(id);
        }
        if durable_after(k, &["main.db", "main.db-wal"]) {
            required_main.insert(id);
        }
        if matches!(step, Step::Txn { aux_rows, .. } if *aux_rows > 0)
            && durable_after(k, &["aux.db", "aux.db-wal"])
        {
            required_aux.insert(id);
        }
    }
    Expectation {
        required_main,
        required_aux,
        begun,
        atomic_across: !journal.wal(),
    }
}

fn check_views(main: &DbView, aux: &DbView, expect: &Expectation) -> Result<(), String> {
    let script = transactions();
    let aux_txns: BTreeSet<u64> = script
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Step::Txn { aux_rows, .. } if *aux_rows > 0))
        .map(|(k, _)| k as u64 + 1)
        .collect();
    for (name, view, required, universe) in [
        (
            "main",
            main,
            &expect.required_main,
            (1..=script.len() as u64).collect::<BTreeSet<u64>>(),
        ),
        ("aux", aux, &expect.required_aux, aux_txns.clone()),
    ] {
        if let Some(lost) = required.difference(&view.visible).next() {
            return Err(format!(
                "{name}: transaction {lost} was acknowledged (durable) but is lost"
            ));
        }
        if let Some(extra) = view.visible.difference(&expect.begun).next() {
            return Err(format!("{name}: transaction {extra} had not begun"));
        }
        // Visible ones are a prefix of the commit order.
        if let Some(&last) = view.visible.iter().next_back() {
            if let Some(gap) = universe
                .iter()
                .find(|&&k| k < last && !view.visible.contains(&k))
            {
                return Err(format!(
                    "{name}: transaction {last} is visible but earlier {gap} is not"
                ));
            }
        }
    }
    if expect.atomic_across {
        for k in &aux_txns {
            if main.visible.contains(k) != aux.visible.contains(k) {
                return Err(format!(
                    "two-database transaction {k} is in one database only (main: {}, aux: {})",
                    main.visible.contains(k),
                    aux.visible.contains(k)
                ));
            }
        }
    }
    Ok(())
}

/// Writes a crash state's files (the WAL index dropped) into the empty `dir`.
fn write_state(dir: &Path, files: &[(String, Vec<u8>)]) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    for (name, bytes) in files {
        if name.ends_with("-shm") {
            continue;
        }
        std::fs::write(dir.join(name), bytes).expect("write crash state");
    }
}

fn check_state_with(
    dir: &Path,
    files: &[(String, Vec<u8>)],
    vfs: &str,
    expect: &Expectation,
) -> Result<(), String> {
    write_state(dir, files);
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags_and_vfs(dir.join("main.db"), flags, vfs)
        .map_err(|e| format!("{vfs}: open main.db: {e}"))?;
    conn.execute(
        "ATTACH ?1 AS aux",
        [dir.join("aux.db").display().to_string()],
    )
    .map_err(|e| format!("{vfs}: attach aux.db: {e}"))?;
    let main = check_database(&conn, "main").map_err(|e| format!("{vfs}: {e}"))?;
    let aux = check_database(&conn, "aux").map_err(|e| format!("{vfs}: {e}"))?;
    check_views(&main, &aux, expect).map_err(|e| format!("{vfs}: {e}"))
}

fn check_state(
    dir: &Path,
    files: &[(String, Vec<u8>)],
    expect: &Expectation,
) -> Result<(), String> {
    if !files.iter().any(|(name, _)| name == "main.db") {
        return Err("main.db is missing".into());
    }
    check_state_with(dir, files, "unix", expect)?;
    common::register();
    let _shared = check_lock();
    check_state_with(dir, files, common::VFS, expect)
}

// ─── Drawing crash states ────────────────────────────────────────────────────

fn random_choice(cut: &Cut, rng: &mut Xoshiro256PlusPlus) -> CrashChoice {
    let m = cut.metadata.len();
    let metadata = Metadata::Prefix(match rng.random_range(0..5) {
        0 => 0,
        1 | 2 => rng.random_range(0..=m),
        _ => m,
    });
    let n = cut.pending.len();
    let survives: Vec<bool> = match rng.random_range(0..5) {
        0 => vec![true; n],
        1 => vec![false; n],
        2 => {
            // In issue order up to a point, as plain write-back would.
            let keep = rng.random_range(0..=n);
            (0..n).map(|i| i < keep).collect()
        }
        _ => {
            let p: f64 = rng.random_range(0.1..0.9);
            (0..n).map(|_| rng.random_bool(p)).collect()
        }
    };
    let order = if rng.random_bool(0.5) {
        // Shuffle the ops of each batch among themselves.
        let mut order: Vec<usize> = (0..n).collect();
        let mut start = 0;
        while start < n {
            let batch = cut.pending[start].batch;
            let mut end = start;
            while end < n && cut.pending[end].batch == batch {
                end += 1;
            }
            order[start..end].shuffle(rng);
            start = end;
        }
        Some(order)
    } else {
        None
    };
    let writes: Vec<usize> = (0..n).filter(|&i| cut.pending[i].sectors > 1).collect();
    let torn = if !writes.is_empty() && rng.random_bool(0.5) {
        let index = writes[rng.random_range(0..writes.len())];
        let sectors = (0..cut.pending[index].sectors)
            .map(|_| rng.random_bool(0.5))
            .collect();
        Some((index, sectors))
    } else {
        None
    };
    CrashChoice {
        metadata,
        survives,
        order,
        torn,
        zero_extend: rng.random_bool(0.25),
    }
}

/// Every metadata prefix × subset of pending writes of a small cut, in issue order,
/// untorn.
fn exhaustive_choices(cut: &Cut) -> Vec<CrashChoice> {
    let writes: Vec<usize> = (0..cut.pending.len())
        .filter(|&i| cut.pending[i].sectors > 0)
        .collect();
    let mut out = Vec::new();
    for kept in 0..=cut.metadata.len() {
        for mask in 0..(1u64 << writes.len()) {
            let mut survives = vec![true; cut.pending.len()];
            for (bit, &index) in writes.iter().enumerate() {
                survives[index] = mask & (1 << bit) != 0;
            }
            out.push(CrashChoice {
                metadata: Metadata::Prefix(kept),
                survives,
                ..CrashChoice::default()
            });
        }
    }
    out
}

/// A named cut: next to the `ordinal`-th (from 1) sync of a file ending with `suffix`
/// (`dir` for the directory), before or after it — stable across changes of batching.
fn cut_name(history: &History, position: usize) -> String {
    use sqlite_uring::power_loss::Event;
    let describe = |at: usize| -> Option<(String, usize)> {
        let key = match &history.events[at] {
            Event::Sync { inode } => history.inode_names[*inode].clone(),
            Event::DirectorySync => "dir".into(),
            _ => return None,
        };
        let ordinal = history.events[..=at]
            .iter()
            .filter(|e| match e {
                Event::Sync { inode } => history.inode_names[*inode] == key,
                Event::DirectorySync => key == "dir",
                _ => false,
            })
            .count();
        Some((key, ordinal))
    };
    if position < history.len() {
        if let Some((key, ordinal)) = describe(position) {
            return format!("before:{key}:{ordinal}");
        }
    }
    if position > 0 {
        if let Some((key, ordinal)) = describe(position - 1) {
            return format!("after:{key}:{ordinal}");
        }
    }
    format!("at:{position}")
}

fn resolve_cut(history: &History, name: &str) -> usize {
    if let Some(position) = name.strip_prefix("at:") {
        return position.parse().expect("cut position");
    }
    (0..=history.len())
        .find(|&p| cut_name(history, p) == name)
        .unwrap_or_else(|| panic!("cut {name} not in this history"))
}

struct Explored {
    cuts: usize,
    states: usize,
    distinct: usize,
    failures: Vec<String>,
}

fn fingerprint(files: &[(String, Vec<u8>)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut hasher);
    hasher.finish()
}

/// How a cut is explored: the seed of its draws, the base number of draws, and after how
/// many failures to stop.
#[derive(Clone, Copy)]
struct Budget {
    /// The test whose command reproduces a failure.
    test: &'static str,
    seed: u64,
    states_per_cut: usize,
    max_failures: usize,
}

/// Explores the crash states at `cuts`; stops after `budget.max_failures` failures.
fn explore(
    scratch: &Path,
    journal: Journal,
    routing: &Routing,
    run: &Run,
    cuts: &[usize],
    budget: Budget,
) -> Explored {
    let mut seen = HashSet::new();
    let mut explored = Explored {
        cuts: cuts.len(),
        states: 0,
        distinct: 0,
        failures: Vec::new(),
    };
    for &position in cuts {
        let cut = run.history.cut(position);
        let expect = expectation(run, journal, position);
        let Budget {
            test,
            seed,
            states_per_cut,
            max_failures,
        } = budget;
        let mut rng =
            Xoshiro256PlusPlus::seed_from_u64(seed ^ (position as u64).wrapping_mul(0x9E37_79B9));
        let mut choices = if cut.simple_state_count() <= EXHAUSTIVE_LIMIT {
            exhaustive_choices(&cut)
        } else {
            Vec::new()
        };
        // More draws where more is unsynced: a cut with a dozen pending ops has far
        // more distinct states than one right after a sync.
        let draws = (states_per_cut + 6 * cut.pending.len()).min(states_per_cut * 4);
        for _ in 0..draws {
            choices.push(random_choice(&cut, &mut rng));
        }
        for (index, choice) in choices.iter().enumerate() {
            let files = cut.materialize(choice);
            explored.states += 1;
            if !seen.insert(fingerprint(&files)) {
                continue;
            }
            explored.distinct += 1;
            if let Err(failure) = check_state(scratch, &files, &expect) {
                if let Some(keep) = std::env::var_os("POWER_LOSS_KEEP") {
                    // The failing state's files, for a look with the sqlite3 shell.
                    let keep = Path::new(&keep).join(format!("{position}-{index}"));
                    std::fs::create_dir_all(&keep).unwrap();
                    write_state(&keep, &files);
                }
                explored.failures.push(format!(
                    "{failure}\n    workload {} routing {} seed {seed:#x} cut {position} \
                     ({}) state {index}: {choice:?}\n    corpus line: {} {} {} {seed:#x}\n    \
                     reproduce: POWER_LOSS_SEED={seed:#x} POWER_LOSS_CUT={position} cargo test \
                     --release -p sqlite-uring --test power_loss -- --exact {test}",
                    journal.name(),
                    routing.name,
                    cut_name(&run.history, position),
                    journal.name(),
                    routing.name,
                    cut_name(&run.history, position),
                ));
                if explored.failures.len() >= max_failures {
                    return explored;
                }
            }
        }
    }
    explored
}

/// Where a workload runs and its crash states are checked (the same directory: a
/// journal names its super-journal by absolute path). tmpfs (`/dev/shm`) when there is
/// one, since checking thousands of states makes SQLite's recovery fsync thousands of
/// times and the states need no durability; `POWER_LOSS_DIR` chooses another parent.
fn state_directory() -> tempfile::TempDir {
    let parent = std::env::var_os("POWER_LOSS_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let shm = Path::new("/dev/shm");
            shm.is_dir().then(|| shm.to_path_buf())
        })
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new()
        .prefix("power_loss")
        .tempdir_in(&parent)
        .unwrap_or_else(|e| panic!("a directory in {}: {e}", parent.display()))
}

/// The cuts of a run: just before and just after every sync after set-up, the end, and
/// `sampled` random points between.
fn cut_points(run: &Run, seed: u64, sampled: usize) -> Vec<usize> {
    if let Some(position) = env_u64("POWER_LOSS_CUT") {
        return vec![position as usize];
    }
    let mut cuts = BTreeSet::new();
    for position in run.history.sync_positions() {
        if position > run.setup_end {
            cuts.insert(position);
            cuts.insert(position + 1);
        }
    }
    cuts.insert(run.history.len());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..sampled {
        cuts.insert(rng.random_range(run.setup_end + 1..=run.history.len()));
    }
    cuts.into_iter().collect()
}

fn explorer(journal: Journal, routing_name: &str, test: &'static str) {
    let routing = routing(routing_name);
    let seed = seed();
    let started = Instant::now();
    let dir = state_directory();
    let run = run_workload(journal, &routing, None, dir.path());
    let cuts = cut_points(&run, seed, SAMPLED_CUTS * soak());
    if std::env::var_os("POWER_LOSS_DUMP").is_some() {
        dump(&run);
    }
    let explored = explore(
        dir.path(),
        journal,
        &routing,
        &run,
        &cuts,
        Budget {
            test,
            seed,
            states_per_cut: STATES_PER_CUT * soak(),
            max_failures: 10,
        },
    );
    println!(
        "power_loss {} {}: seed {seed:#x}, {} events, {} cuts, {} states drawn, {} distinct \
         states checked (unix + io_uring), {} failures, {:.1} s",
        journal.name(),
        routing.name,
        run.history.len(),
        explored.cuts,
        explored.states,
        explored.distinct,
        explored.failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        explored.failures.is_empty(),
        "{} crash states failed:\n{}",
        explored.failures.len(),
        explored.failures.join("\n")
    );
    // The explorer must have explored: a history without syncs or a cut set that
    // materialises nothing would pass vacuously.
    assert!(
        env_u64("POWER_LOSS_CUT").is_some() || explored.distinct >= 100,
        "only {} distinct states",
        explored.distinct
    );
}

/// Prints the history (`POWER_LOSS_DUMP=1`): one line per event, with the transaction
/// markers.
fn dump(run: &Run) {
    use sqlite_uring::power_loss::Event;
    for (position, event) in run.history.events.iter().enumerate() {
        for (k, &at) in run.begun.iter().enumerate() {
            if at == position {
                println!("{position:5} -- transaction {} begins", k + 1);
            }
        }
        for (k, &at) in run.returned.iter().enumerate() {
            if at == position {
                println!("{position:5} -- transaction {} returned", k + 1);
            }
        }
        let name = |inode: &usize| run.history.inode_names[*inode].clone();
        let line = match event {
            Event::Write {
                inode,
                offset,
                data,
                batch,
            } => format!(
                "write {} @{offset} +{} batch {batch}",
                name(inode),
                data.len()
            ),
            Event::Truncate { inode, len, batch } => {
                format!("truncate {} to {len} batch {batch}", name(inode))
            }
            Event::Sync { inode } => format!("sync {} (inode {inode})", name(inode)),
            other => format!("{other:?}"),
        };
        println!(
            "{position:5} {line}  [{}]",
            cut_name(&run.history, position)
        );
    }
}

macro_rules! explorer_tests {
    ($($name:ident: $journal:expr, $routing:expr;)*) => {
        $(
            #[test]
            fn $name() {
                explorer($journal, $routing, stringify!($name));
            }
        )*
    };
}

explorer_tests! {
    delete_default: Journal::Delete, "default";
    delete_sync: Journal::Delete, "sync";
    delete_direct: Journal::Delete, "direct";
    delete_ring: Journal::Delete, "ring";
    delete_write_behind_off: Journal::Delete, "write_behind_off";
    truncate_default: Journal::Truncate, "default";
    truncate_sync: Journal::Truncate, "sync";
    truncate_direct: Journal::Truncate, "direct";
    truncate_ring: Journal::Truncate, "ring";
    truncate_write_behind_off: Journal::Truncate, "write_behind_off";
    persist_default: Journal::Persist, "default";
    persist_sync: Journal::Persist, "sync";
    persist_direct: Journal::Persist, "direct";
    persist_ring: Journal::Persist, "ring";
    persist_write_behind_off: Journal::Persist, "write_behind_off";
    wal_full_default: Journal::WalFull, "default";
    wal_full_sync: Journal::WalFull, "sync";
    wal_full_direct: Journal::WalFull, "direct";
    wal_full_ring: Journal::WalFull, "ring";
    wal_full_write_behind_off: Journal::WalFull, "write_behind_off";
    wal_full_wal_direct: Journal::WalFull, "wal_direct";
    wal_normal_default: Journal::WalNormal, "default";
    wal_normal_sync: Journal::WalNormal, "sync";
    wal_normal_direct: Journal::WalNormal, "direct";
    wal_normal_ring: Journal::WalNormal, "ring";
    wal_normal_write_behind_off: Journal::WalNormal, "write_behind_off";
    wal_normal_wal_direct: Journal::WalNormal, "wal_direct";
}

/// The explorer can fail: with the recorder's test-only misorder knob deferring each
/// fsync of the rollback journal (or the WAL) past the engine's next batch — so the
/// database's writes reach the kernel before the journal they depend on is durable, or a
/// WAL commit returns before its frames are — it must find crash states that lose an
/// acknowledged commit, show a partial transaction or fail `integrity_check`.
#[test]
fn misordered_flush_is_caught() {
    let seed = seed();
    for (journal, suffix) in [
        (Journal::Delete, "main.db-journal"),
        (Journal::WalFull, "main.db-wal"),
    ] {
        let routing = routing("default");
        let dir = state_directory();
        let run = run_workload(journal, &routing, Some(suffix), dir.path());
        let cuts = cut_points(&run, seed, SAMPLED_CUTS);
        let explored = explore(
            dir.path(),
            journal,
            &routing,
            &run,
            &cuts,
            Budget {
                test: "misordered_flush_is_caught",
                seed,
                states_per_cut: STATES_PER_CUT,
                max_failures: usize::MAX,
            },
        );
        println!(
            "power_loss misordered {} (syncs of {suffix} deferred): {} distinct states, {} \
             failures; first: {}",
            journal.name(),
            explored.distinct,
            explored.failures.len(),
            explored.failures.first().map_or("none", String::as_str)
        );
        assert!(
            !explored.failures.is_empty(),
            "{}: deferring the syncs of {suffix} went unnoticed in {} states",
            journal.name(),
            explored.distinct
        );
    }
}

/// One line of `tests/power_loss_corpus.txt`.
struct CorpusEntry {
    journal: Journal,
    routing: Routing,
    cut: String,
    seed: u64,
    misorder: Option<String>,
    expect_failure: bool,
}

fn corpus() -> Vec<CorpusEntry> {
    let text = include_str!("power_loss_corpus.txt");
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert!(
                fields.len() == 5 || fields.len() == 6,
                "corpus line {line:?}: want workload routing cut seed expect [deferred-sync-suffix]"
            );
            let seed = fields[3]
                .strip_prefix("0x")
                .map_or_else(|| fields[3].parse(), |hex| u64::from_str_radix(hex, 16))
                .unwrap_or_else(|_| panic!("corpus line {line:?}: bad seed"));
            CorpusEntry {
                journal: Journal::parse(fields[0]),
                routing: routing(fields[1]),
                cut: fields[2].to_string(),
                seed,
                expect_failure: match fields[4] {
                    "ok" => false,
                    "caught" => true,
                    other => panic!("corpus line {line:?}: expect {other} is not ok or caught"),
                },
                misorder: fields.get(5).map(|s| s.to_string()),
            }
        })
        .collect()
}

/// Replays the regression corpus: each entry's cut of its workload and routing, drawn
/// with its seed, passes (`ok`) or — with its deferred-sync knob — fails (`caught`).
#[test]
fn corpus_states() {
    let entries = corpus();
    assert!(!entries.is_empty());
    let mut states = 0;
    for entry in &entries {
        let dir = state_directory();
        let run = run_workload(
            entry.journal,
            &entry.routing,
            entry.misorder.as_deref(),
            dir.path(),
        );
        let position = resolve_cut(&run.history, &entry.cut);
        let explored = explore(
            dir.path(),
            entry.journal,
            &entry.routing,
            &run,
            &[position],
            Budget {
                test: "corpus_states",
                seed: entry.seed,
                states_per_cut: STATES_PER_CUT * 4,
                max_failures: usize::MAX,
            },
        );
        states += explored.distinct;
        let line = format!(
            "{} {} {} {:#x}",
            entry.journal.name(),
            entry.routing.name,
            entry.cut,
            entry.seed
        );
        if entry.expect_failure {
            assert!(
                !explored.failures.is_empty(),
                "{line}: the misordered flush is no longer caught ({} states)",
                explored.distinct
            );
        } else {
            assert!(
                explored.failures.is_empty(),
                "{line}:\n{}",
                explored.failures.join("\n")
            );
        }
    }
    println!(
        "power_loss corpus: {} entries, {states} distinct states",
        entries.len()
    );
}
