//! Results of `bench blobs`: one flat record per (case, phase), the terminal tables,
//! warnings, and the JSON/CSV/Markdown/SVG files (through the shared `report` module).

use comfy_table::Table;
use serde::Serialize;

use super::case::Measured;
use super::codec::Compression;
use super::plan::{BlobsArgs, Plan};
use super::runner::{Phase, PhaseResult, StopReason};
use super::store::Target;
use crate::bench::common::export::{ExportManager, Report};
use crate::report::chart::{BarChart, Series};
use crate::report::envinfo::EnvInfo;
use crate::report::stats::{self, PairedRatio, Relative, Summary, Verdict, Warning};
use crate::report::{export, table};

/// One row of the results: a phase of a case, summarised over `--runs`.
#[derive(Clone, Debug, Serialize)]
pub struct BlobRecord {
    /// `storage` or `compressor`.
    pub suite: &'static str,
    /// memory, unix, io_uring, sync, duckdb, duckdb-memory; `zstd` for the compressor.
    pub target: String,
    /// delete or wal; empty where no SQLite journal applies.
    pub journal: String,
    pub compression: &'static str,
    pub zstd_level: Option<i32>,
    pub content: &'static str,
    pub size: String,
    pub size_bytes: u64,
    /// Writes per commit (storage cases).
    pub batch: Option<u64>,
    /// write, read-seq, read-random; compress, decompress.
    pub phase: &'static str,
    pub runs: usize,
    pub ops_planned: u64,
    /// Operations the shortest run completed.
    pub ops_done: u64,
    /// `ops` (all planned done), `time` (--max-seconds ran out), or `mixed` over runs.
    pub stopped_by: &'static str,
    /// Mean measured seconds per run.
    pub elapsed_s: f64,
    /// Mean over runs of operations (files) per second.
    pub rate_ops_per_s: Option<f64>,
    pub rate_ops_per_s_stddev: Option<f64>,
    pub rate_ops_per_s_median: Option<f64>,
    /// Mean over runs of uncompressed MB (10^6 B) per second.
    pub rate_mb_per_s: Option<f64>,
    /// Uncompressed bytes of one run (the first).
    pub logical_bytes: u64,
    /// Bytes stored or read from the store in that run (compressed when compressing).
    pub stored_bytes: u64,
    /// stored_bytes ÷ logical_bytes.
    pub stored_ratio: Option<f64>,
    /// Blobs verified by checksum, all runs together.
    pub verified: u64,
    /// Transactions committed per run (mean), write phases.
    pub commits: Option<f64>,
    /// Database + journal/WAL bytes on disk after the write phase (first run).
    pub db_bytes: Option<u64>,
    /// fsync/fdatasync calls per run (mean), from this VFS's counters (io_uring, sync).
    pub fsyncs: Option<f64>,
    /// Kernel entries for I/O per run (mean), same source.
    pub kernel_entries: Option<f64>,
    /// Rate ÷ unix rate on the same case and phase (> 1: faster than unix).
    pub vs_unix: Option<f64>,
    pub vs_unix_error: Option<f64>,
    /// Median of the run-by-run rate ratios to unix (run i of both targets ran back to
    /// back), and its 95 % confidence interval (sign test; needs ≥ 6 runs).
    pub vs_unix_paired_median: Option<f64>,
    pub vs_unix_paired_ci_low: Option<f64>,
    pub vs_unix_paired_ci_high: Option<f64>,
    /// Measurement warnings (variance, outliers, cold first run), `; `-separated.
    pub warnings: String,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let values: Vec<f64> = values.collect();
    Summary::from_samples(&values).map(|s| s.mean)
}

fn stop_name(results: &[&PhaseResult]) -> &'static str {
    let first = results[0].stopped_by;
    if results.iter().all(|r| r.stopped_by == first) {
        first.name()
    } else {
        "mixed"
    }
}

/// The rates of one phase, run by run, with their summary. `summarise` gives none when a
/// run did nothing measurable: the summary would cover fewer runs than the record says.
struct Rates {
    per_run: Vec<f64>,
    summary: Summary,
}

/// A record from the runs of one phase (`results[i]` = run i).
fn summarise(results: &[&PhaseResult], base: BlobRecord) -> (BlobRecord, Option<Rates>) {
    let rates: Vec<f64> = results.iter().filter_map(|r| r.ops_per_second()).collect();
    let rate = (rates.len() == results.len())
        .then(|| Summary::from_samples(&rates))
        .flatten();
    let warnings: Vec<String> = if results.len() > 1 {
        stats::warnings(&rates)
            .into_iter()
            .filter(|w| *w != Warning::SingleRun)
            .map(|w| w.short())
            .collect()
    } else {
        Vec::new()
    };
    let first = results[0];
    let record = BlobRecord {
        runs: results.len(),
        ops_planned: first.ops_planned,
        ops_done: results.iter().map(|r| r.ops_done).min().unwrap_or(0),
        stopped_by: stop_name(results),
        elapsed_s: mean(results.iter().map(|r| r.elapsed.as_secs_f64())).unwrap_or(0.0),
        rate_ops_per_s: rate.as_ref().map(|s| s.mean),
        rate_ops_per_s_stddev: rate.as_ref().and_then(|s| s.stddev),
        rate_ops_per_s_median: rate.as_ref().map(|s| s.median),
        rate_mb_per_s: mean(results.iter().filter_map(|r| r.megabytes_per_second())),
        logical_bytes: first.logical_bytes,
        stored_bytes: first.stored_bytes,
        stored_ratio: first.stored_ratio(),
        verified: results.iter().map(|r| r.verified).sum(),
        commits: mean(results.iter().filter_map(|r| r.commits.map(|c| c as f64))),
        warnings: warnings.join("; "),
        ..base
    };
    let rates = rate.map(|summary| Rates {
        per_run: rates,
        summary,
    });
    (record, rates)
}

fn empty_record(args: &BlobsArgs, phase: Phase) -> BlobRecord {
    BlobRecord {
        suite: "storage",
        target: String::new(),
        journal: String::new(),
        compression: "none",
        zstd_level: None,
        content: args.content.name(),
        size: String::new(),
        size_bytes: 0,
        batch: None,
        phase: phase.name(),
        runs: 0,
        ops_planned: 0,
        ops_done: 0,
        stopped_by: StopReason::Ops.name(),
        elapsed_s: 0.0,
        rate_ops_per_s: None,
        rate_ops_per_s_stddev: None,
        rate_ops_per_s_median: None,
        rate_mb_per_s: None,
        logical_bytes: 0,
        stored_bytes: 0,
        stored_ratio: None,
        verified: 0,
        commits: None,
        db_bytes: None,
        fsyncs: None,
        kernel_entries: None,
        vs_unix: None,
        vs_unix_error: None,
        vs_unix_paired_median: None,
        vs_unix_paired_ci_low: None,
        vs_unix_paired_ci_high: None,
        warnings: String::new(),
    }
}

/// Records of every storage case phase and compressor phase, with `vs_unix` filled in.
pub fn records(
    args: &BlobsArgs,
    plan: &Plan,
    storage_runs: &[Vec<Vec<Measured>>],
    compressor_runs: &[Vec<Vec<PhaseResult>>],
) -> Vec<BlobRecord> {
    let mut records = Vec::new();
    let mut summaries = Vec::new();
    for (case, runs) in plan.storage.iter().zip(storage_runs) {
        let phases = runs.first().map_or(0, Vec::len);
        for p in 0..phases {
            let results: Vec<&PhaseResult> = runs.iter().map(|run| &run[p].result).collect();
            let base = BlobRecord {
                target: case.target.name().to_string(),
                journal: case.journal.map_or(String::new(), |j| j.name().to_string()),
                compression: case.compression.name(),
                zstd_level: (case.compression != Compression::None).then_some(args.zstd_level),
                size: case.size.to_string(),
                size_bytes: case.size.bytes(),
                batch: Some(case.batch),
                db_bytes: runs[0][p].db_bytes,
                fsyncs: mean(
                    runs.iter()
                        .filter_map(|run| run[p].io.map(|io| io.fsyncs as f64)),
                ),
                kernel_entries: mean(
                    runs.iter()
                        .filter_map(|run| run[p].io.map(|io| io.kernel_entries as f64)),
                ),
                ..empty_record(args, results[0].phase)
            };
            let (record, summary) = summarise(&results, base);
            records.push(record);
            summaries.push(summary);
        }
    }
    // Relative to unix on the same journal, compression, size, batch and phase.
    for i in 0..records.len() {
        let r = &records[i];
        if r.target == Target::UNIX.name() || r.journal.is_empty() {
            continue;
        }
        let baseline = records.iter().position(|u| {
            u.target == Target::UNIX.name()
                && (&u.journal, u.compression, u.size_bytes, u.batch, u.phase)
                    == (&r.journal, r.compression, r.size_bytes, r.batch, r.phase)
        });
        let (Some(ours), Some(unix)) =
            (&summaries[i], baseline.and_then(|b| summaries[b].as_ref()))
        else {
            continue;
        };
        if let Some(relative) = Relative::of(&ours.summary, &unix.summary) {
            records[i].vs_unix = Some(relative.ratio);
            records[i].vs_unix_error = relative.error;
        }
        // Run i of every target of a case ran back to back (mod.rs interleaves them).
        if let Some(paired) = stats::paired_ratio(&ours.per_run, &unix.per_run) {
            let record = &mut records[i];
            record.vs_unix_paired_median = Some(paired.median);
            record.vs_unix_paired_ci_low = paired.interval.map(|(low, _)| low);
            record.vs_unix_paired_ci_high = paired.interval.map(|(_, high)| high);
        }
    }
    for ((mode, size, _), runs) in plan.compressor.iter().zip(compressor_runs) {
        let phases = runs.first().map_or(0, Vec::len);
        for p in 0..phases {
            let results: Vec<&PhaseResult> = runs.iter().map(|run| &run[p]).collect();
            let base = BlobRecord {
                suite: "compressor",
                target: "zstd".to_string(),
                compression: mode.name(),
                zstd_level: Some(args.zstd_level),
                size: size.to_string(),
                size_bytes: size.bytes(),
                ..empty_record(args, results[0].phase)
            };
            records.push(summarise(&results, base).0);
        }
    }
    records
}

/// A count per second (files/s, MB/s) with 3 significant digits, thousands separated:
/// 61.2, 1,234, 123,456. (`report::stats::format_rate` formats byte rates.)
pub fn format_count(value: Option<f64>) -> String {
    let Some(value) = value.filter(|v| v.is_finite()) else {
        return "-".to_string();
    };
    if value < 10.0 {
        return format!("{value:.2}");
    }
    if value < 100.0 {
        return format!("{value:.1}");
    }
    let digits = format!("{value:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn rate_cell(record: &BlobRecord) -> String {
    match (record.rate_ops_per_s, record.rate_ops_per_s_stddev) {
        (Some(mean), Some(sd)) => {
            format!("{} ± {}", format_count(Some(mean)), format_count(Some(sd)))
        }
        (mean, _) => format_count(mean),
    }
}

fn ratio_cell(record: &BlobRecord) -> String {
    match (record.vs_unix, record.vs_unix_error) {
        (Some(ratio), error) => Relative { ratio, error }.display(),
        _ => String::new(),
    }
}

/// The paired comparison of a record, when it has one.
fn paired(record: &BlobRecord) -> Option<PairedRatio> {
    Some(PairedRatio {
        median: record.vs_unix_paired_median?,
        interval: record
            .vs_unix_paired_ci_low
            .zip(record.vs_unix_paired_ci_high),
        pairs: record.runs,
    })
}

fn percent(ratio: Option<f64>) -> String {
    ratio.map_or("-".into(), |r| format!("{:.0}%", r * 100.0))
}

const STORAGE_HEADERS: [&str; 14] = [
    "target",
    "journal",
    "zstd",
    "size",
    "batch",
    "phase",
    "ops done",
    "stop",
    "files/s",
    "MB/s",
    "stored",
    "× unix",
    "paired [95 % CI]",
    "fsyncs",
];

fn storage_rows(records: &[BlobRecord]) -> Vec<Vec<String>> {
    records
        .iter()
        .filter(|r| r.suite == "storage")
        .map(|r| {
            vec![
                r.target.clone(),
                if r.journal.is_empty() {
                    "-".into()
                } else {
                    r.journal.clone()
                },
                r.compression.to_string(),
                r.size.clone(),
                r.batch.map_or(String::new(), |b| b.to_string()),
                r.phase.to_string(),
                format!("{}/{}", r.ops_done, r.ops_planned),
                r.stopped_by.to_string(),
                rate_cell(r),
                format_count(r.rate_mb_per_s),
                percent(r.stored_ratio),
                ratio_cell(r),
                paired(r).map_or(String::new(), |p| p.display()),
                r.fsyncs.map_or(String::new(), |f| format!("{f:.0}")),
            ]
        })
        .collect()
}

const COMPRESSOR_HEADERS: [&str; 8] = [
    "mode", "size", "phase", "ops done", "stop", "ops/s", "MB/s", "stored",
];

fn compressor_rows(records: &[BlobRecord]) -> Vec<Vec<String>> {
    records
        .iter()
        .filter(|r| r.suite == "compressor")
        .map(|r| {
            vec![
                r.compression.to_string(),
                r.size.clone(),
                r.phase.to_string(),
                format!("{}/{}", r.ops_done, r.ops_planned),
                r.stopped_by.to_string(),
                rate_cell(r),
                format_count(r.rate_mb_per_s),
                percent(r.stored_ratio),
            ]
        })
        .collect()
}

fn terminal_table(headers: &[&str], rows: &[Vec<String>], numeric_from: usize) -> Table {
    table::new(headers, rows, numeric_from, table::Output::stdout())
}

/// Lines that must not go unnoticed: every case where io_uring measured below unix, and
/// a count of the rows with noisy measurements (their details are in the `warnings` field
/// of the JSON/CSV: one line per row would bury the table).
pub fn warnings(args: &BlobsArgs, records: &[BlobRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    if args.runs == 1 {
        lines.push(
            "single run per case: no σ and no error on \"× unix\"; use --runs 3 for error bars"
                .to_string(),
        );
    }
    let case = |r: &BlobRecord| {
        format!(
            "{} {} {}×{} {}",
            r.journal,
            r.compression,
            r.size,
            r.batch.unwrap_or(0),
            r.phase
        )
    };
    let (mut below_within_noise, mut below_beyond_noise, mut with_interval) = (0, 0, 0);
    for r in records.iter().filter(|r| {
        // `io_uring` and the same VFS with URI parameters (`io_uring?uring_direct=on`).
        r.target
            .strip_prefix(Target::IO_URING.name())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('?'))
    }) {
        match paired(r) {
            // With an interval: only what lies below 1 beyond the noise is a finding.
            Some(p) if p.interval.is_some() => {
                with_interval += 1;
                match p.verdict() {
                    Some(Verdict::Below) => {
                        below_beyond_noise += 1;
                        lines.push(format!(
                            "{} below unix beyond the noise: {}: {} × the unix rate \
                             (paired, 95 % CI)",
                            r.target,
                            case(r),
                            p.display()
                        ));
                    }
                    _ if p.median < 1.0 => below_within_noise += 1,
                    _ => {}
                }
            }
            // Fewer than 6 runs: every ratio below 1 is shown, with its error.
            _ => {
                if let Some(ratio) = r.vs_unix.filter(|ratio| *ratio < 1.0) {
                    let relative = Relative {
                        ratio,
                        error: r.vs_unix_error,
                    }
                    .display();
                    lines.push(format!(
                        "{} below unix: {}: {relative} × the unix rate (use --runs 6 or \
                         more for a paired 95 % interval)",
                        r.target,
                        case(r)
                    ));
                }
            }
        }
    }
    if below_beyond_noise > 0 {
        // A two-sided 95 % interval misses an equal rate on the low side at most 2.5 % of
        // the time: many rows make a few such misses likely even without a difference.
        lines.push(format!(
            "{below_beyond_noise} of {with_interval} io_uring rows lie below unix beyond the \
             noise; with no difference at all, chance alone would put about {:.1} there \
             (2.5 % per row): a row means something when it repeats in another run",
            0.025 * with_interval as f64
        ));
    }
    if below_within_noise > 0 {
        lines.push(format!(
            "{below_within_noise} io_uring rows have a paired median below unix's rate, all \
             with 1 inside their 95 % interval: no difference shown"
        ));
    }
    let noisy = records.iter().filter(|r| !r.warnings.is_empty()).count();
    if noisy > 0 {
        lines.push(format!(
            "{noisy} of {} rows have noisy measurements (high variance, outliers or a cold \
             first run; details in the `warnings` field of --export-json/--export-csv): \
             differences within their σ mean nothing; use more --runs, --warmup 1, or a \
             quieter system",
            records.len()
        ));
    }
    lines
}

/// The chart: write rate by size × batch (categories), one bar per target and journal,
/// for the first compression mode of the run. log10 because rates span four orders of
/// magnitude (60 durable commits/s to 10^6 in-memory inserts/s) and the shared chart has
/// a linear axis only.
pub fn chart(records: &[BlobRecord]) -> Option<BarChart> {
    let writes: Vec<&BlobRecord> = records
        .iter()
        .filter(|r| r.suite == "storage" && r.phase == Phase::Write.name())
        .collect();
    let compression = writes.first()?.compression;
    let writes: Vec<&BlobRecord> = writes
        .into_iter()
        .filter(|r| r.compression == compression)
        .collect();
    let mut categories: Vec<(u64, u64, String)> = Vec::new();
    let mut series_names: Vec<String> = Vec::new();
    let series_of = |r: &BlobRecord| {
        if r.journal.is_empty() {
            r.target.clone()
        } else {
            format!("{} {}", r.target, r.journal)
        }
    };
    for r in &writes {
        let batch = r.batch.unwrap_or(0);
        if !categories
            .iter()
            .any(|(s, b, _)| (*s, *b) == (r.size_bytes, batch))
        {
            categories.push((r.size_bytes, batch, format!("{}×{batch}", r.size)));
        }
        let name = series_of(r);
        if !series_names.contains(&name) {
            series_names.push(name);
        }
    }
    categories.sort_by_key(|(s, b, _)| (*s, *b));
    let series = series_names
        .iter()
        .map(|name| Series {
            name: name.clone(),
            values: categories
                .iter()
                .map(|(size, batch, _)| {
                    writes
                        .iter()
                        .find(|r| {
                            &series_of(r) == name
                                && r.size_bytes == *size
                                && r.batch == Some(*batch)
                        })
                        .and_then(|r| r.rate_ops_per_s)
                        .map(f64::log10)
                })
                .collect(),
            errors: vec![None; categories.len()],
        })
        .collect();
    Some(BarChart {
        // Short: the chart is as wide as its bars, and a long title is clipped.
        title: format!("blobs: write rate, size × writes/commit, compression {compression}"),
        y_label: "log10(files written/s): 2 = 100/s, 5 = 100k/s".to_string(),
        categories: categories.into_iter().map(|(_, _, label)| label).collect(),
        series,
        reference_line: None,
    })
}

/// Prints the tables and warnings and writes the requested files.
/// Prints the tables and warnings and writes the exports; `settings` is the run's
/// settings line for the Markdown export.
/// Everything `bench blobs` exports.
/// The Markdown report: the environment, the settings, the tables and the warnings.
fn markdown(
    env: &EnvInfo,
    settings: &str,
    storage: &[Vec<String>],
    compressor: &[Vec<String>],
    warnings: &[String],
) -> String {
    let mut text = format!("# sqlite-uring bench blobs\n\n{}\n", env.markdown());
    text.push_str(&format!("{settings}\n\n"));
    if !storage.is_empty() {
        text.push_str("## Storage\n\n");
        text.push_str(&export::markdown_table(&STORAGE_HEADERS, storage));
        text.push('\n');
    }
    if !compressor.is_empty() {
        text.push_str("## Compressor alone\n\n");
        text.push_str(&export::markdown_table(&COMPRESSOR_HEADERS, compressor));
        text.push('\n');
    }
    if !warnings.is_empty() {
        text.push_str("## Warnings\n\n");
        for line in warnings {
            text.push_str(&format!("- {line}\n"));
        }
    }
    text
}

pub fn report(
    args: &BlobsArgs,
    env: &EnvInfo,
    settings: &str,
    records: Vec<BlobRecord>,
    exports: &ExportManager,
) -> anyhow::Result<()> {
    let storage = storage_rows(&records);
    let compressor = compressor_rows(&records);
    if !storage.is_empty() {
        println!("{}", terminal_table(&STORAGE_HEADERS, &storage, 6));
    }
    if !compressor.is_empty() {
        println!("{}", terminal_table(&COMPRESSOR_HEADERS, &compressor, 3));
    }
    let warnings = warnings(args, &records);
    for line in &warnings {
        eprintln!("warning: {line}");
    }
    let report = Report {
        markdown: markdown(env, settings, &storage, &compressor, &warnings),
        chart: chart(&records)
            .ok_or_else(|| "no storage write results to chart (--suite compressor only)".into()),
        records,
    };
    for warning in exports.write(&report)? {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::blobs::plan::{parse_test_args, StorageCase};
    use crate::bench::blobs::store::Journal;
    use crate::bench::blobs::units::ByteSize;
    use std::time::Duration;

    fn write_result(ops: u64, millis: u64) -> Measured {
        Measured {
            result: PhaseResult {
                phase: Phase::Write,
                ops_planned: 1000,
                ops_done: ops,
                stopped_by: StopReason::Time,
                elapsed: Duration::from_millis(millis),
                logical_bytes: ops * 64,
                stored_bytes: ops * 32,
                verified: 0,
                commits: Some(ops),
            },
            io: None,
            db_bytes: None,
        }
    }

    #[test]
    fn records_compute_rates_and_report_io_uring_below_unix() {
        let args = parse_test_args(["--runs", "2"]).unwrap();
        let case = |target| StorageCase {
            target,
            journal: Some(Journal::Wal),
            compression: Compression::None,
            size: ByteSize(64),
            batch: 1,
            ops: 1000,
        };
        let plan = Plan {
            storage: vec![case(Target::UNIX), case(Target::IO_URING)],
            compressor: vec![],
            max: Duration::from_secs(1),
        };
        // unix: 100 and 300 files in 1 s (mean 200/s); io_uring: 100 files in 1 s twice.
        let storage_runs = vec![
            vec![vec![write_result(100, 1000)], vec![write_result(300, 1000)]],
            vec![vec![write_result(100, 1000)], vec![write_result(100, 1000)]],
        ];
        let records = records(&args, &plan, &storage_runs, &[]);
        assert_eq!(records.len(), 2);
        let (unix, uring) = (&records[0], &records[1]);
        assert_eq!(unix.rate_ops_per_s, Some(200.0));
        assert_eq!(unix.ops_done, 100); // the shortest run
        assert_eq!(unix.stored_ratio, Some(0.5));
        assert_eq!(uring.rate_mb_per_s, Some(100.0 * 64.0 / 1e6));
        assert_eq!(uring.vs_unix, Some(0.5));
        assert!(uring.vs_unix_error.is_some());
        let lines = warnings(&args, &records);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("io_uring below unix: wal none 64B×1 write: 0.50")),
            "{lines:?}"
        );
        assert!(chart(&records).is_some());
    }

    /// With 6 runs each row gets a paired interval, and only a row whose whole interval
    /// lies below 1 is reported one by one; a row below 1 within the noise is counted.
    #[test]
    fn paired_runs_separate_a_real_deficit_from_noise() {
        let args = parse_test_args(["--runs", "6"]).unwrap();
        let case = |target, batch| StorageCase {
            target,
            journal: Some(Journal::Delete),
            compression: Compression::None,
            size: ByteSize(64),
            batch,
            ops: 1000,
        };
        let plan = Plan {
            storage: vec![
                case(Target::UNIX, 1),
                case(Target::IO_URING, 1),
                case(Target::UNIX, 100),
                case(Target::IO_URING, 100),
            ],
            compressor: vec![],
            max: Duration::from_secs(1),
        };
        // The machine drifts from 100 to 150 files/s over the runs, for both targets.
        let drift = |run: u64| 100 + 10 * run;
        let runs = |files: &dyn Fn(u64) -> u64| -> Vec<Vec<Measured>> {
            (0..6)
                .map(|run| vec![write_result(files(run), 1000)])
                .collect()
        };
        let storage_runs = vec![
            runs(&drift),
            // 10 % below unix in every run: hidden by the drift in mean ± σ, not paired.
            runs(&|run| drift(run) * 9 / 10),
            runs(&drift),
            // Alternately 10 % below and 5 % above: the median is below 1, the interval
            // holds 1.
            runs(&|run| {
                if run % 2 == 0 {
                    drift(run) * 9 / 10
                } else {
                    drift(run) * 105 / 100
                }
            }),
        ];
        let records = records(&args, &plan, &storage_runs, &[]);
        let deficit = &records[1];
        assert!((deficit.vs_unix_paired_median.unwrap() - 0.9).abs() < 0.01);
        assert!(deficit.vs_unix_paired_ci_high.unwrap() < 1.0);
        let relative = deficit.vs_unix.unwrap() + deficit.vs_unix_error.unwrap();
        assert!(
            relative > 1.0,
            "the unpaired error bar reaches 1: {relative}"
        );
        let mixed = &records[3];
        assert!(mixed.vs_unix_paired_median.unwrap() < 1.0);
        assert!(mixed.vs_unix_paired_ci_low.unwrap() < 1.0);
        assert!(mixed.vs_unix_paired_ci_high.unwrap() > 1.0);
        assert_eq!(
            records[0].vs_unix_paired_median, None,
            "unix is the baseline"
        );

        let lines = warnings(&args, &records);
        let below: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("io_uring below unix"))
            .collect();
        assert_eq!(below.len(), 1, "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("1 of 2 io_uring rows lie below unix beyond")),
            "{lines:?}"
        );
        assert!(
            below[0].starts_with(
                "io_uring below unix beyond the noise: delete none 64B×1 write: 0.90 ["
            ),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("1 io_uring rows have a paired median")),
            "{lines:?}"
        );
        let table = storage_rows(&records);
        assert!(table[1][12].starts_with("0.90 ["), "{:?}", table[1]);
    }

    #[test]
    fn rates_format_with_three_significant_digits() {
        assert_eq!(format_count(Some(1.234)), "1.23");
        assert_eq!(format_count(Some(61.25)), "61.2");
        assert_eq!(format_count(Some(1234.4)), "1,234");
        assert_eq!(format_count(Some(123456.0)), "123,456");
        assert_eq!(format_count(Some(1234567.0)), "1,234,567");
        assert_eq!(format_count(None), "-");
        assert_eq!(format_count(Some(f64::NAN)), "-");
    }
}
