//! Connection churn: open a database, read one row, close, many times over, through
//! SQLite's `unix` VFS and through ours, alternating in rounds; prints the median of the
//! paired per-round ratios. The connection-per-request pattern the 16 speed tests do not
//! cover (each of them keeps one connection open).
//!
//! `cargo run --release -p sqlite-uring --example connection_churn -- [DIR] [ROUNDS] [OPENS] [delete|wal] [same-thread|new-thread|one-connection]`
//! (defaults: the temp directory, 30 rounds, 2000 opens per round and VFS, delete,
//! same-thread; `new-thread` opens each connection on a thread of its own, as a
//! thread-per-request server does; `one-connection` opens once and repeats only the
//! read transaction, which isolates what a short read transaction costs in the VFS).

use rusqlite::{Connection, OpenFlags};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let rounds: usize = args.next().map_or(Ok(30), |v| v.parse())?;
    let opens: usize = args.next().map_or(Ok(2000), |v| v.parse())?;
    let journal_mode = args.next().unwrap_or_else(|| "delete".into());
    let threading = args.next().unwrap_or_else(|| "same-thread".into());
    if !["same-thread", "new-thread", "one-connection"].contains(&threading.as_str()) {
        return Err(format!("{threading:?}: use same-thread, new-thread or one-connection").into());
    }
    if rounds == 0 || opens == 0 {
        return Err("ROUNDS and OPENS must be at least 1".into());
    }
    if !["delete", "wal"].contains(&journal_mode.as_str()) {
        return Err(format!("journal mode {journal_mode:?}: use delete or wal").into());
    }
    sqlite_uring::register(sqlite_uring::Options::default())?;
    let scratch = tempfile::tempdir_in(&dir)?;
    let path = scratch.path().join("churn.db");
    Connection::open(&path)?.execute_batch(&format!(
        "PRAGMA journal_mode={journal_mode}; CREATE TABLE t(x); INSERT INTO t VALUES(1);"
    ))?;

    let open_read_close = |vfs: &str| -> rusqlite::Result<()> {
        let conn = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), vfs)?;
        let x: i64 = conn.query_row("SELECT x FROM t", [], |row| row.get(0))?;
        assert_eq!(x, 1);
        Ok(())
    };
    let per_open_us = |vfs: &str| -> rusqlite::Result<f64> {
        let kept = if threading == "one-connection" {
            Some(Connection::open_with_flags_and_vfs(
                &path,
                OpenFlags::default(),
                vfs,
            )?)
        } else {
            None
        };
        let start = Instant::now();
        for _ in 0..opens {
            match &kept {
                Some(conn) => {
                    let x: i64 = conn
                        .prepare_cached("SELECT x FROM t")?
                        .query_row([], |row| row.get(0))?;
                    assert_eq!(x, 1);
                }
                None if threading == "new-thread" => {
                    std::thread::scope(|scope| scope.spawn(|| open_read_close(vfs)).join())
                        .expect("the connection's thread panicked")?
                }
                None => open_read_close(vfs)?,
            }
        }
        Ok(start.elapsed().as_secs_f64() * 1e6 / opens as f64)
    };
    let (mut unix_us, mut ours_us, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which VFS goes first, so neither always runs on a warmer cache.
        let (unix, ours) = if round % 2 == 0 {
            let unix = per_open_us("unix")?;
            (unix, per_open_us("io_uring")?)
        } else {
            let ours = per_open_us("io_uring")?;
            (per_open_us("unix")?, ours)
        };
        unix_us.push(unix);
        ours_us.push(ours);
        ratios.push(ours / unix);
    }
    for values in [&mut unix_us, &mut ours_us, &mut ratios] {
        values.sort_by(f64::total_cmp);
    }
    let quartile = |values: &[f64], q: usize| values[(values.len() - 1) * q / 4];
    println!(
        "1-row SELECT, {journal_mode}, {threading}, {rounds} rounds × {opens}: unix {:.1} µs, io_uring {:.1} µs \
         (medians); io_uring ÷ unix, paired: median {:.3}, quartiles {:.3} … {:.3}",
        quartile(&unix_us, 2),
        quartile(&ours_us, 2),
        quartile(&ratios, 2),
        quartile(&ratios, 1),
        quartile(&ratios, 3),
    );
    Ok(())
}
