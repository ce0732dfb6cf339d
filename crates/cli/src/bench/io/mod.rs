//! `sqlite-uring bench io`: the IO-models playground, done right.
//!
//! Writes one file of `--size` bytes in `--block-size` writes through `dd`
//! (control), a blocking write loop, pwrite on T threads, and io_uring with E
//! entries on T threads (batch or refill submission), with honest durability
//! (`--durability`), optional O_DIRECT, aligned disjoint ranges, seeded data
//! and `--verify`. With `--wal`, a WAL commit stream instead, made durable by
//! write + fdatasync or by O_DIRECT RWF_DSYNC writes (see [`wal`]). With `--reads`,
//! random reads by queue depth, cold or O_DIRECT, through io_uring and pread threads
//! (see [`read`]). See docs/BENCH_IO.md.

mod buffer;
mod cleanup;
mod engine;
mod options;
mod output;
mod pattern;
mod read;
mod read_output;
mod ring;
mod split;
mod wal;
mod wal_output;

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};

use super::common::export::{ExportManager, Exportable};
use super::common::pagecache;
use crate::report::envinfo::{self, EnvInfo};
use crate::report::stats::format_bytes;
pub use options::IoArgs;
use options::Plan;
use output::RunRecord;

/// Free space kept on top of `--size`, so the benchmark never fills the disk to the brim.
const SPACE_MARGIN_BYTES: u64 = 64 << 20;

pub fn run(args: IoArgs) -> anyhow::Result<()> {
    if let Some(warning) = envinfo::check_release_build(args.place.allow_debug)? {
        eprintln!("{warning}");
    }
    if args.wal {
        return run_wal(&args);
    }
    if args.reads {
        return run_reads(&args);
    }
    let plan = Plan::from_args(&args, engine::dd_available())?;
    let exports = ExportManager::new(&args.export)?;
    let env = EnvInfo::collect(&plan.dir);
    preflight(&plan)?;

    let plan_line = plan_line(&plan);
    print_plan(&env, &plan_line);
    if args.methods.contains(&options::MethodKind::Dd)
        && !plan.methods.contains(&options::Method::Dd)
    {
        eprintln!("note:        dd not found on PATH: no control row");
    }
    eprintln!();

    let records = execute(&plan, &mut |record: &RunRecord| {
        // Printed as each run ends, like IO Playground's programs: stdout is the CSV.
        print_csv_row(&record.csv_row());
        let workers = if record.kind == "io_uring" {
            format!(", {} iou-wrk", record.io_wq_workers_max)
        } else {
            String::new()
        };
        eprintln!(
            "  round {:>2}  {:<48} {:>10}  {:>11}{workers}",
            record.round,
            record.method,
            crate::report::stats::format_seconds(record.seconds),
            output::format_rate(record.bytes_per_sec)
        );
    })?;

    let summaries = output::summarize(&plan, &records);
    let notes = output::notes(&plan, &env, &summaries);
    print_summary(
        &output::summary_table(&summaries, crate::report::table::Output::stderr()),
        &notes,
        summaries
            .iter()
            .map(|s| (s.method.as_str(), s.warnings.as_slice())),
    );

    let report = output::JsonReport {
        env: &env,
        size_bytes: plan.size_bytes,
        block_size_bytes: plan.block_size_bytes,
        direct: plan.direct,
        preallocate: plan.preallocate,
        durability: plan.durability,
        rounds: plan.rounds,
        seed: plan.seed,
        runs: &records,
        summaries: &summaries,
        notes: &notes,
    };
    write_exports(&exports, &output::report(report, &plan, &plan_line))
}

/// `--wal`: the commit stream, with the same header, exports and statistics.
fn run_wal(args: &IoArgs) -> anyhow::Result<()> {
    let plan = wal::WalPlan::from_args(args)?;
    let exports = ExportManager::new(&args.export)?;
    let env = EnvInfo::collect(&plan.dir);
    let largest = u64::from(plan.frames.iter().copied().max().unwrap_or(1));
    let wal_bytes = wal::WAL_HEADER_BYTES + u64::from(plan.commits) * largest * wal::FRAME_BYTES;
    let free_bytes = free_space_bytes(&plan.dir)?;
    if free_bytes < wal_bytes.saturating_add(SPACE_MARGIN_BYTES) {
        bail!(
            "--commits {} of --commit-frames {largest} do not fit in --dir {}: its filesystem has {} free; lower --commits or choose another --dir",
            plan.commits,
            plan.dir.display(),
            format_bytes(free_bytes)
        );
    }
    wal::preflight(&plan)?;

    let plan_line = wal_output::plan_line(&plan);
    print_plan(&env, &plan_line);
    eprintln!();

    let mut records = Vec::new();
    wal::execute(&plan, &mut |round, case, outcome| {
        let record = wal_output::WalRunRecord::new(&plan, round, case, outcome);
        print_csv_row(&record.csv_row());
        eprintln!(
            "  round {:>2}  {:<42} {:>10}  {:>8.0} commits/s  p50 {:>7.0} µs  p99 {:>7.0} µs",
            record.round,
            record.method,
            crate::report::stats::format_seconds(record.seconds),
            record.commits_per_sec,
            record.commit_p50_us,
            record.commit_p99_us,
        );
        records.push(record);
    })?;

    let summaries = wal_output::summarize(&plan, &records);
    let notes = wal_output::notes(&plan);
    print_summary(
        &wal_output::summary_table(&summaries, crate::report::table::Output::stderr()),
        &notes,
        summaries
            .iter()
            .map(|s| (s.method.as_str(), s.warnings.as_slice())),
    );
    let exported = wal_output::report(
        wal_output::WalJsonReport {
            env: &env,
            workload: "wal",
            commits: plan.commits,
            commit_frames: &plan.frames,
            spaces: &plan.spaces,
            frame_bytes: wal::FRAME_BYTES,
            baseline: plan.baseline().name(),
            rounds: plan.rounds,
            seed: plan.seed,
            runs: &records,
            summaries: &summaries,
            notes: &notes,
        },
        &plan,
        &plan_line,
    );
    write_exports(&exports, &exported)
}

/// `--reads`: random reads by queue depth, with the same header, exports and statistics.
fn run_reads(args: &IoArgs) -> anyhow::Result<()> {
    let plan = read::ReadPlan::from_args(args)?;
    let exports = ExportManager::new(&args.export)?;
    let env = EnvInfo::collect(&plan.dir);
    if plan.existing.is_none() {
        let free_bytes = free_space_bytes(&plan.dir)?;
        if free_bytes < plan.size_bytes.saturating_add(SPACE_MARGIN_BYTES) {
            bail!(
                "--size {} does not fit in --dir {}: its filesystem has {} free (and {} is kept spare); lower --size or choose another --dir",
                format_bytes(plan.size_bytes),
                plan.dir.display(),
                format_bytes(free_bytes),
                format_bytes(SPACE_MARGIN_BYTES)
            );
        }
    }
    read::preflight(&plan)?;

    let plan_line = read_output::plan_line(&plan);
    print_plan(&env, &plan_line);
    if plan.existing.is_none() {
        eprintln!(
            "setup:       writing the {} test file once and fsyncing it (not timed)",
            format_bytes(plan.size_bytes)
        );
    }
    eprintln!();

    let mut records = Vec::new();
    read::execute(
        &plan,
        &mut pagecache::drop_clean_pages,
        &mut |round, case, outcome| {
            let record = read_output::ReadRunRecord::new(&plan, round, case, outcome);
            print_csv_row(&record.csv_row());
            let workers = if case.method == options::ReadMethod::IoUring {
                format!(", {} iou-wrk", record.io_wq_workers_max)
            } else {
                String::new()
            };
            eprintln!(
            "  round {:>2}  {:<36} {:>10}  {:>9.0} IOPS  {:>8.1} MiB/s  cached at start {}/{} pages{workers}",
            record.round,
            record.method,
            crate::report::stats::format_seconds(record.seconds),
            record.iops,
            record.mib_per_sec,
            record.resident_pages,
            record.file_pages,
        );
            records.push(record);
        },
    )?;

    let summaries = read_output::summarize(&plan, &records);
    let notes = read_output::notes(&plan, &summaries);
    print_summary(
        &read_output::summary_table(&plan, &summaries, crate::report::table::Output::stderr()),
        &notes,
        summaries
            .iter()
            .map(|s| (s.method.as_str(), s.warnings.as_slice())),
    );
    let exported = read_output::report(
        read_output::ReadJsonReport {
            env: &env,
            workload: "randread",
            file_size_bytes: plan.size_bytes,
            read_file: plan
                .existing
                .as_ref()
                .map(|path| path.display().to_string()),
            block_size_bytes: plan.block_size_bytes,
            reads_per_run: plan.reads_per_run,
            queue_depths: &plan.depths,
            read_methods: &plan.methods,
            read_cache: &plan.caches,
            base_depth: plan.base_depth(),
            rounds: plan.rounds,
            seed: plan.seed,
            runs: &records,
            summaries: &summaries,
            notes: &notes,
        },
        &plan,
        &plan_line,
    );
    write_exports(&exports, &exported)
}

/// The environment (without SQLite's lines) and the plan, on stderr: stdout is the CSV.
fn print_plan(env: &EnvInfo, plan_line: &str) {
    for line in output::header_lines(env) {
        eprintln!("{line}");
    }
    eprintln!("plan:        {plan_line}");
}

/// One run's CSV row on stdout, as each run ends, like IO Playground's programs.
fn print_csv_row(row: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{row}");
    let _ = out.flush();
}

/// The summary table, its notes and each method's warnings, on stderr.
fn print_summary<'a>(
    table: &str,
    notes: &[String],
    warnings: impl Iterator<Item = (&'a str, &'a [String])>,
) {
    eprintln!();
    eprintln!("{table}");
    for note in notes {
        eprintln!("note: {note}");
    }
    for (method, method_warnings) in warnings {
        for warning in method_warnings {
            eprintln!("warning: {method}: {warning}");
        }
    }
}

/// Writes the requested result files; a chart with nothing to draw is a warning.
fn write_exports(exports: &ExportManager, results: &impl Exportable) -> anyhow::Result<()> {
    for warning in exports.write(results)? {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

fn plan_line(plan: &Plan) -> String {
    let mut line = format!(
        "{} in {}-byte writes, {}, {}, durability {} ({}), {} round(s) × {} method(s){}",
        format_bytes(plan.size_bytes),
        plan.block_size_bytes,
        if plan.direct {
            "O_DIRECT"
        } else {
            "buffered (page cache)"
        },
        if plan.preallocate {
            "preallocated (fallocate, not timed)"
        } else {
            "file grows (no preallocation)"
        },
        plan.durability.name(),
        plan.durability.explain(),
        plan.rounds,
        plan.methods.len(),
        if plan.verify { ", verified" } else { "" },
    );
    if plan.uses_io_uring() {
        let flags = plan.ring;
        let mut extras = Vec::new();
        if flags.register_buffers {
            extras.push("registered buffers");
        }
        if flags.register_files {
            extras.push("registered file");
        }
        if flags.sqpoll {
            extras.push("SQPOLL (one shared poller)");
        }
        if !extras.is_empty() {
            line.push_str(&format!(", io_uring with {}", extras.join(", ")));
        }
    }
    line
}

/// Checks that can fail before anything is written: free space, O_DIRECT,
/// io_uring. Each error names the flag and the remedy.
fn preflight(plan: &Plan) -> anyhow::Result<()> {
    let free_bytes = free_space_bytes(&plan.dir)?;
    if free_bytes < plan.size_bytes.saturating_add(SPACE_MARGIN_BYTES) {
        bail!(
            "--size {} does not fit in --dir {}: its filesystem has {} free (and {} is kept spare); lower --size or choose another --dir",
            format_bytes(plan.size_bytes),
            plan.dir.display(),
            format_bytes(free_bytes),
            format_bytes(SPACE_MARGIN_BYTES)
        );
    }
    if plan.uses_io_uring() {
        let max_entries = plan
            .methods
            .iter()
            .filter_map(|m| match m {
                options::Method::IoUring { entries, .. } => Some(*entries),
                _ => None,
            })
            .max()
            .unwrap_or(1);
        ring::check_available(max_entries, plan.ring)?;
    }
    // Open the test file once with the run's flags (O_DIRECT, O_DSYNC): an
    // unsupported combination fails here, and the file is removed on drop.
    let probe = cleanup::TestFile::new(&plan.dir)?;
    engine::open_test_file(probe.path(), plan)?;
    Ok(())
}

fn free_space_bytes(dir: &Path) -> anyhow::Result<u64> {
    let c_dir = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
        .map_err(|_| anyhow::anyhow!("--dir {} contains a NUL byte", dir.display()))?;
    // SAFETY: statvfs is plain old data; zeroed is valid and the call fills it.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_dir is NUL-terminated, stat is a valid out pointer.
    if unsafe { libc::statvfs(c_dir.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("--dir {}: statvfs failed", dir.display()));
    }
    Ok((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

/// Runs every round of every method (interleaved: round 1 runs each method,
/// then round 2…), calling `on_record` after each run. The test file is
/// removed after every run and on every error path.
pub fn execute(
    plan: &Plan,
    on_record: &mut dyn FnMut(&RunRecord),
) -> anyhow::Result<Vec<RunRecord>> {
    let test_file = cleanup::TestFile::new(&plan.dir)?;
    let mut records = Vec::new();
    for round in 1..=plan.rounds {
        for &method in &plan.methods {
            let outcome = engine::run_once(plan, method, &test_file);
            test_file.remove().with_context(|| {
                format!("cannot remove the test file {}", test_file.path().display())
            })?;
            let outcome = outcome?;
            engine::settle(&plan.dir);
            let record = RunRecord::new(plan, method, round, &outcome);
            on_record(&record);
            records.push(record);
        }
    }
    Ok(records)
}

#[cfg(test)]
mod read_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wal_tests;
