//! Results: IO Playground-compatible CSV rows, the per-method summary, exports and chart.
//! Statistics, file export and the chart come from the shared `report` module.

use serde::Serialize;

use super::options::{Durability, Method, Plan, Strategy};
use crate::bench::common::export::Document;
use crate::report::chart::{BarChart, Series};
use crate::report::envinfo::EnvInfo;
use crate::report::stats::{self, Relative, Summary, Warning};
use crate::report::{export, table};

/// One run, flat so it exports as one CSV row. The first three fields are the
/// IO Playground's columns, with IO Playground's names, so its DuckDB query works.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    pub method: String,
    pub seconds: f64,
    pub bytes_per_sec: f64,
    pub round: u32,
    pub kind: &'static str,
    pub threads: u32,
    pub entries: Option<u32>,
    pub strategy: Option<Strategy>,
    pub size_bytes: u64,
    pub block_size_bytes: u64,
    pub direct: bool,
    pub preallocate: bool,
    pub durability: Durability,
    pub register_buffers: bool,
    pub register_files: bool,
    pub sqpoll: bool,
    /// Most io-wq worker threads (`iou-wrk-*`) seen during the run.
    pub io_wq_workers_max: usize,
    pub sqpoll_threads_max: usize,
    pub verified: Option<bool>,
}

impl RunRecord {
    pub fn new(
        plan: &Plan,
        method: Method,
        round: u32,
        outcome: &super::engine::RunOutcome,
    ) -> RunRecord {
        let (kind, entries, strategy) = match method {
            Method::Dd => ("dd", None, None),
            Method::Blocking => ("blocking", None, None),
            Method::Pwrite { .. } => ("pwrite", None, None),
            Method::IoUring {
                entries, strategy, ..
            } => ("io_uring", Some(entries), Some(strategy)),
        };
        let ring = if method.is_io_uring() {
            plan.ring
        } else {
            Default::default()
        };
        RunRecord {
            method: method.name(plan.ring),
            seconds: outcome.elapsed_s,
            bytes_per_sec: plan.size_bytes as f64 / outcome.elapsed_s,
            round,
            kind,
            threads: method.threads(),
            entries,
            strategy,
            size_bytes: plan.size_bytes,
            block_size_bytes: plan.block_size_bytes,
            direct: plan.direct,
            preallocate: plan.preallocate,
            durability: plan.durability,
            register_buffers: ring.register_buffers,
            register_files: ring.register_files,
            sqpoll: ring.sqpoll,
            io_wq_workers_max: outcome.io_wq_workers_max,
            sqpoll_threads_max: outcome.sqpoll_threads_max,
            verified: outcome.verified,
        }
    }

    /// `method,seconds,bytes_per_sec` with no header, exactly what each program of
    /// IO Playground printed, so `… > out.csv` feeds its DuckDB query unchanged
    /// (DuckDB names header-less columns column0, column1, column2).
    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.6},{:.0}",
            self.method, self.seconds, self.bytes_per_sec
        )
    }
}

/// All runs of one method, summarized.
#[derive(Clone, Debug, Serialize)]
pub struct MethodSummary {
    pub method: String,
    pub kind: &'static str,
    pub threads: u32,
    pub entries: Option<u32>,
    pub strategy: Option<Strategy>,
    /// Seconds per run.
    pub time_s: Summary,
    /// Bytes per second per run (IO Playground averaged this, not size / mean time).
    pub throughput_bytes_per_s: Summary,
    pub iops_mean: f64,
    /// Speed-up against the baseline (blocking, else the first method): > 1 is faster.
    pub speedup_vs_baseline: Option<Relative>,
    pub baseline: String,
    pub io_wq_workers_max: usize,
    pub warnings: Vec<String>,
}

/// Summaries in the order the methods ran.
pub fn summarize(plan: &Plan, records: &[RunRecord]) -> Vec<MethodSummary> {
    let mut names: Vec<&str> = Vec::new();
    for record in records {
        if !names.contains(&record.method.as_str()) {
            names.push(&record.method);
        }
    }
    let mut summaries: Vec<MethodSummary> = names
        .iter()
        .filter_map(|name| {
            let runs: Vec<&RunRecord> = records.iter().filter(|r| r.method == *name).collect();
            let first = runs.first()?;
            let times: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
            let rates: Vec<f64> = runs.iter().map(|r| r.bytes_per_sec).collect();
            let time_s = Summary::from_samples(&times)?;
            let throughput = Summary::from_samples(&rates)?;
            Some(MethodSummary {
                method: name.to_string(),
                kind: first.kind,
                threads: first.threads,
                entries: first.entries,
                strategy: first.strategy,
                iops_mean: throughput.mean / plan.block_size_bytes as f64,
                time_s,
                throughput_bytes_per_s: throughput,
                speedup_vs_baseline: None,
                baseline: String::new(),
                io_wq_workers_max: runs.iter().map(|r| r.io_wq_workers_max).max().unwrap_or(0),
                warnings: stats::warnings(&times)
                    .iter()
                    .filter_map(|w| {
                        round_warning(
                            w,
                            "first round much slower than the rest (cold caches, writeback of \
                             an earlier run)",
                            NOISE,
                        )
                    })
                    .collect(),
            })
        })
        .collect();
    let baseline = summaries
        .iter()
        .find(|s| s.kind == "blocking")
        .or_else(|| summaries.first())
        .map(|s| (s.method.clone(), s.time_s.clone()));
    if let Some((name, baseline)) = baseline {
        for summary in &mut summaries {
            // baseline time / this time: how many times faster than the baseline.
            summary.speedup_vs_baseline = if summary.method == name {
                // The baseline against itself is exactly 1, not 1 ± its own noise.
                Some(Relative {
                    ratio: 1.0,
                    error: None,
                })
            } else {
                Relative::of(&baseline, &summary.time_s)
            };
            summary.baseline = name.clone();
        }
    }
    summaries
}

/// The shared warnings in this command's words (`--rounds`, not `--runs`): `first_round`
/// says why a first round is slow, `noise` what to make of a high variance.
pub fn round_warning(warning: &Warning, first_round: &str, noise: &str) -> Option<String> {
    Some(match warning {
        Warning::ColdFirstRun => first_round.to_string(),
        Warning::Outliers { count } => format!(
            "{count} outlier round(s): other load on the machine or disk interfered; rerun when quiet"
        ),
        Warning::HighVariance { percent } => format!("σ is {percent}% of the mean: {noise}"),
        // Said once for the whole run (see `notes`), not once per method.
        Warning::SingleRun => return None,
    })
}

/// What a high variance means, unless a benchmark says more.
pub const NOISE: &str = "differences smaller than that mean nothing; use more --rounds";

pub use crate::report::stats::format_rate;

/// `750`, `3.0k`, `45.2k`: IOPS short enough for a table.
pub fn format_iops(iops: f64) -> String {
    if iops >= 1e3 {
        format!("{:.1}k", iops / 1e3)
    } else {
        format!("{iops:.0}")
    }
}

const HEADERS: [&str; 9] = [
    "method",
    "mean time",
    "throughput",
    "IOPS",
    "min … max time",
    "σ time",
    "speed-up",
    "iou-wrk",
    "rounds",
];

fn row(summary: &MethodSummary) -> Vec<String> {
    vec![
        summary.method.clone(),
        stats::format_seconds(summary.time_s.mean),
        format_rate(summary.throughput_bytes_per_s.mean),
        format_iops(summary.iops_mean),
        format!(
            "{} … {}",
            stats::format_seconds(summary.time_s.min),
            stats::format_seconds(summary.time_s.max)
        ),
        summary
            .time_s
            .stddev
            .map_or_else(|| "–".into(), stats::format_seconds),
        summary
            .speedup_vs_baseline
            .map_or_else(|| "–".into(), |r| r.display()),
        if summary.kind == "io_uring" {
            summary.io_wq_workers_max.to_string()
        } else {
            "–".into()
        },
        summary.time_s.runs.to_string(),
    ]
}

pub fn summary_table(summaries: &[MethodSummary], output: table::Output) -> String {
    let rows: Vec<Vec<String>> = summaries.iter().map(row).collect();
    table::new(&HEADERS, &rows, 1, output).to_string()
}

/// Observations a reader needs next to the numbers.
pub fn notes(plan: &Plan, env: &EnvInfo, summaries: &[MethodSummary]) -> Vec<String> {
    let mut notes = Vec::new();
    if plan.rounds == 1 {
        notes.push("one round only: no σ, no outlier detection; use --rounds 3 or more".into());
    }
    if let Some(first) = summaries.first() {
        notes.push(format!(
            "speed-up = mean time of {} / mean time of the method (> 1: faster), ± propagated σ; throughput is the mean of the rounds' bytes/s, in decimal units (1 MB = 10^6 bytes) as IO Playground printed",
            first.baseline
        ));
    }
    if plan.durability == Durability::None && !plan.direct {
        let fits = plan.size_bytes < env.available_memory_bytes;
        notes.push(format!(
            "--durability none without --direct measures copies into the page cache{}: use --durability end for the disk",
            if fits { " (the file fits in free memory)" } else { "" }
        ));
    }
    let ring: Vec<&MethodSummary> = summaries.iter().filter(|s| s.kind == "io_uring").collect();
    if !ring.is_empty() {
        let workers = ring.iter().map(|s| s.io_wq_workers_max).max().unwrap_or(0);
        let mode = if plan.direct { "O_DIRECT" } else { "buffered" };
        notes.push(if workers > 0 {
            format!(
                "{mode} io_uring writes were punted to io-wq kernel workers (up to {workers} iou-wrk threads at once): the ring did not issue them inline, so each write costs a thread hand-off"
            )
        } else {
            format!(
                "{mode} io_uring writes ran inline (no iou-wrk worker thread seen; sampled from 1 ms into each run, then every 20 ms)"
            )
        });
    }
    if summaries.iter().any(|s| s.kind == "dd") {
        notes.push(
            "dd writes zeros from /dev/zero (IO Playground's control); it is not verified".into(),
        );
    }
    notes
}

pub fn markdown_report(
    env: &EnvInfo,
    plan_line: &str,
    summaries: &[MethodSummary],
    notes: &[String],
) -> String {
    let rows: Vec<Vec<String>> = summaries.iter().map(row).collect();
    let warnings = summaries
        .iter()
        .map(|s| (s.method.as_str(), s.warnings.as_slice()));
    markdown_text(
        "sqlite-uring bench io",
        env,
        plan_line,
        &HEADERS,
        &rows,
        notes,
        warnings,
    )
}

/// A `bench io` Markdown export: title, environment header, plan, the table, notes, then
/// each method's warnings.
pub fn markdown_text<'a>(
    title: &str,
    env: &EnvInfo,
    plan_line: &str,
    headers: &[&str],
    rows: &[Vec<String>],
    notes: &[String],
    warnings: impl Iterator<Item = (&'a str, &'a [String])>,
) -> String {
    let mut text = format!("# {title}\n\n");
    for line in header_lines(env) {
        text.push_str(&format!("- {line}\n"));
    }
    text.push_str(&format!("- plan:        {plan_line}\n\n"));
    text.push_str(&export::markdown_table(headers, rows));
    if !notes.is_empty() {
        text.push('\n');
        for note in notes {
            text.push_str(&format!("- {note}\n"));
        }
    }
    let warned: Vec<(&str, &[String])> = warnings.filter(|(_, w)| !w.is_empty()).collect();
    if !warned.is_empty() {
        text.push_str("\nWarnings:\n\n");
        for (method, method_warnings) in warned {
            for warning in method_warnings {
                text.push_str(&format!("- {method}: {warning}\n"));
            }
        }
    }
    text
}

/// The shared environment header without its SQLite lines (this benchmark
/// does not use SQLite); `--export-json` keeps the full `env`.
pub fn header_lines(env: &EnvInfo) -> Vec<String> {
    env.lines()
        .into_iter()
        .filter(|line| !line.starts_with("sqlite"))
        .collect()
}

/// Everything `--export-json` writes about one invocation.
#[derive(Serialize)]
pub struct JsonReport<'a> {
    pub env: &'a EnvInfo,
    pub size_bytes: u64,
    pub block_size_bytes: u64,
    pub direct: bool,
    pub preallocate: bool,
    pub durability: Durability,
    pub rounds: u32,
    pub seed: u64,
    pub runs: &'a [RunRecord],
    pub summaries: &'a [MethodSummary],
    pub notes: &'a [String],
}

/// Bar chart of mean throughput (MB/s): groups are thread counts, series are
/// IO models, so labels stay short and 1/10/100 threads compare side by side.
pub fn throughput_chart(plan: &Plan, summaries: &[MethodSummary]) -> BarChart {
    let mut threads: Vec<u32> = summaries.iter().map(|s| s.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let family = |s: &MethodSummary| match (s.kind, s.entries, s.strategy) {
        ("io_uring", Some(entries), Some(strategy)) => {
            let strategy = if strategy == Strategy::Batch {
                "batch"
            } else {
                "refill"
            };
            format!("io_uring {strategy} E={entries}")
        }
        (kind, _, _) => kind.to_string(),
    };
    let mut families: Vec<String> = Vec::new();
    for summary in summaries {
        let name = family(summary);
        if !families.contains(&name) {
            families.push(name);
        }
    }
    let series = families
        .iter()
        .map(|name| {
            let pick = |t: &u32| {
                summaries
                    .iter()
                    .find(|s| family(s) == *name && s.threads == *t)
            };
            Series {
                name: name.clone(),
                values: threads
                    .iter()
                    .map(|t| pick(t).map(|s| s.throughput_bytes_per_s.mean / 1e6))
                    .collect(),
                errors: threads
                    .iter()
                    .map(|t| pick(t).and_then(|s| s.throughput_bytes_per_s.stddev.map(|e| e / 1e6)))
                    .collect(),
            }
        })
        .collect();
    BarChart {
        title: format!(
            "{} in {}-byte writes, {}, durability {}",
            stats::format_bytes(plan.size_bytes),
            plan.block_size_bytes,
            if plan.direct { "O_DIRECT" } else { "buffered" },
            plan.durability.name()
        ),
        y_label: "throughput (MB/s, mean ± σ)".into(),
        categories: threads
            .iter()
            .map(|t| {
                if *t == 1 {
                    "1 thread".into()
                } else {
                    format!("{t} threads")
                }
            })
            .collect(),
        series,
        reference_line: None,
    }
}

/// Everything `bench io` exports: CSV holds every run, JSON one report per invocation
/// (files of several invocations concatenate into one array).
/// Everything `bench io` exports.
pub fn report<'a>(
    json: JsonReport<'a>,
    plan: &Plan,
    plan_line: &str,
) -> Document<'a, RunRecord, JsonReport<'a>, BarChart> {
    Document {
        rows: json.runs,
        markdown: markdown_report(json.env, plan_line, json.summaries, json.notes),
        chart: Ok(throughput_chart(plan, json.summaries)),
        json,
    }
}
