//! Parallel writers: THREADS threads, each committing rows to a database of its own,
//! through SQLite's `unix` VFS and through ours, alternating in rounds; prints the median
//! of the paired per-round ratios of wall time. The 16 speed tests run one connection on
//! one thread; this is the multi-threaded, multi-database application they do not
//! cover, where anything the VFS shares between threads shows.
//!
//! `cargo run --release -p sqlite-uring --example parallel_writers -- [DIR] [THREADS] [ROUNDS] [ROWS_PER_COMMIT] [delete|wal]`
//! (defaults: the temp directory, 2 threads, 40 rounds, 100 rows per commit, delete;
//! 20000 rows per thread and round).

use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::time::Instant;

const ROWS_PER_THREAD: usize = 20_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let threads: usize = args.next().map_or(Ok(2), |v| v.parse())?;
    let rounds: usize = args.next().map_or(Ok(40), |v| v.parse())?;
    let rows_per_commit: usize = args.next().map_or(Ok(100), |v| v.parse())?;
    let journal_mode = args.next().unwrap_or_else(|| "delete".into());
    if threads == 0 || rounds == 0 || rows_per_commit == 0 || rows_per_commit > ROWS_PER_THREAD {
        return Err(format!(
            "THREADS and ROUNDS must be at least 1, ROWS_PER_COMMIT 1 to {ROWS_PER_THREAD}"
        )
        .into());
    }
    if !["delete", "wal"].contains(&journal_mode.as_str()) {
        return Err(format!("journal mode {journal_mode:?}: use delete or wal").into());
    }
    sqlite_uring::register(sqlite_uring::Options::default())?;
    let scratch = tempfile::tempdir_in(&dir)?;

    let fill = |path: &Path, vfs: &str| -> rusqlite::Result<()> {
        let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)?;
        conn.execute_batch(&format!(
            "PRAGMA journal_mode={journal_mode}; CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);"
        ))?;
        let mut insert = conn.prepare("INSERT INTO t(b) VALUES (printf('%0100d', ?1))")?;
        for first in (0..ROWS_PER_THREAD).step_by(rows_per_commit) {
            conn.execute_batch("BEGIN")?;
            for row in first..(first + rows_per_commit).min(ROWS_PER_THREAD) {
                insert.execute([row as i64])?;
            }
            conn.execute_batch("COMMIT")?;
        }
        Ok(())
    };
    let wall_seconds = |vfs: &str, round: usize| -> rusqlite::Result<f64> {
        let start = Instant::now();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|thread| {
                    let path = scratch.path().join(format!("{vfs}-{round}-{thread}.db"));
                    scope.spawn(move || fill(&path, vfs))
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|worker| worker.join().expect("a writer thread panicked"))
        })?;
        Ok(start.elapsed().as_secs_f64())
    };

    let mut ratios = Vec::new();
    for round in 0..rounds {
        // Alternate which VFS goes first, so neither always runs on a warmer cache.
        let (unix, ours) = if round % 2 == 0 {
            let unix = wall_seconds("unix", round)?;
            (unix, wall_seconds("io_uring", round)?)
        } else {
            let ours = wall_seconds("io_uring", round)?;
            (wall_seconds("unix", round)?, ours)
        };
        ratios.push(ours / unix);
    }
    ratios.sort_by(f64::total_cmp);
    let quartile = |q: usize| ratios[(ratios.len() - 1) * q / 4];
    println!(
        "{threads} threads × {ROWS_PER_THREAD} rows in commits of {rows_per_commit}, \
         {journal_mode}, {rounds} rounds: io_uring ÷ unix wall time, paired: median {:.3}, \
         quartiles {:.3} … {:.3}",
        quartile(2),
        quartile(1),
        quartile(3),
    );
    Ok(())
}
