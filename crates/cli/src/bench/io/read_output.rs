//! Results of `bench io --reads`: one record per run, per-case summaries (IOPS and
//! MiB/s, mean ± σ over the rounds) with the ratio of each queue depth's IOPS to the
//! smallest depth's (QD 1) of the same method and cache, exports and chart.

use serde::Serialize;

use super::options::{ReadCache, ReadMethod};
use super::output::{format_iops, round_warning, NOISE};
use super::read::{ReadCase, ReadOutcome, ReadPlan};
use crate::bench::common::export::Document;
use crate::report::chart::{BarChart, Series};
use crate::report::envinfo::EnvInfo;
use crate::report::stats::{self, format_bytes, Relative, Summary};
use crate::report::table;

const MIB: f64 = (1u64 << 20) as f64;

/// One run, flat so it exports as one CSV row; the first three columns are the ones
/// every `bench io` row starts with.
#[derive(Clone, Debug, Serialize)]
pub struct ReadRunRecord {
    pub method: String,
    pub seconds: f64,
    pub bytes_per_sec: f64,
    pub round: u32,
    pub read_method: ReadMethod,
    pub cache: ReadCache,
    pub queue_depth: u32,
    pub threads: u32,
    /// Blocks read in full, and bytes read.
    pub reads: u64,
    pub bytes: u64,
    pub block_size_bytes: u64,
    pub file_size_bytes: u64,
    pub iops: f64,
    pub mib_per_sec: f64,
    /// Most `iou-wrk` threads seen during the run (io_uring only).
    pub io_wq_workers_max: usize,
    /// Pages of the file in the page cache when the clock started, of `file_pages`.
    pub resident_pages: u64,
    pub file_pages: u64,
    pub verified: Option<bool>,
}

impl ReadRunRecord {
    pub fn new(plan: &ReadPlan, round: u32, case: ReadCase, outcome: &ReadOutcome) -> Self {
        ReadRunRecord {
            method: case.name(),
            seconds: outcome.elapsed_s,
            bytes_per_sec: outcome.bytes as f64 / outcome.elapsed_s,
            round,
            read_method: case.method,
            cache: case.cache,
            queue_depth: case.depth,
            threads: case.threads(),
            reads: outcome.reads,
            bytes: outcome.bytes,
            block_size_bytes: plan.block_size_bytes,
            file_size_bytes: plan.size_bytes,
            iops: outcome.reads as f64 / outcome.elapsed_s,
            mib_per_sec: outcome.bytes as f64 / outcome.elapsed_s / MIB,
            io_wq_workers_max: outcome.io_wq_workers_max,
            resident_pages: outcome.resident_pages,
            file_pages: outcome.file_pages,
            verified: outcome.verified,
        }
    }

    /// `method,seconds,bytes_per_sec`, as every `bench io` run prints on stdout.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.6},{:.0}",
            self.method, self.seconds, self.bytes_per_sec
        )
    }
}

/// All runs of one case.
#[derive(Clone, Debug, Serialize)]
pub struct ReadSummary {
    pub method: String,
    pub read_method: ReadMethod,
    pub cache: ReadCache,
    pub queue_depth: u32,
    pub threads: u32,
    /// Seconds per run.
    pub time_s: Summary,
    /// Reads per second per run.
    pub iops: Summary,
    /// MiB (2^20 bytes) per second per run.
    pub mib_per_s: Summary,
    /// Mean IOPS / mean IOPS of the same method and cache at `base_depth`, ± propagated
    /// σ: what keeping this many reads in flight multiplies one reader's rate by.
    pub iops_ratio: Option<Relative>,
    pub base_depth: u32,
    pub baseline: String,
    pub io_wq_workers_max: usize,
    /// Most pages of the file found in the page cache at the start of a run.
    pub resident_pages_max: u64,
    pub warnings: Vec<String>,
}

/// Summaries in the plan's case order.
pub fn summarize(plan: &ReadPlan, records: &[ReadRunRecord]) -> Vec<ReadSummary> {
    let base_depth = plan.base_depth();
    let runs_of = |case: &ReadCase| -> Vec<&ReadRunRecord> {
        let mut runs: Vec<&ReadRunRecord> =
            records.iter().filter(|r| r.method == case.name()).collect();
        runs.sort_by_key(|r| r.round);
        runs
    };
    let iops_of = |runs: &[&ReadRunRecord]| {
        Summary::from_samples(&runs.iter().map(|r| r.iops).collect::<Vec<f64>>())
    };
    let mut summaries = Vec::new();
    for case in &plan.cases {
        let runs = runs_of(case);
        let times: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
        let rates: Vec<f64> = runs.iter().map(|r| r.mib_per_sec).collect();
        let (Some(time_s), Some(iops), Some(mib_per_s)) = (
            Summary::from_samples(&times),
            iops_of(&runs),
            Summary::from_samples(&rates),
        ) else {
            continue;
        };
        let base_case = ReadCase {
            depth: base_depth,
            ..*case
        };
        let iops_ratio = if case.depth == base_depth {
            // The baseline against itself is exactly 1, not 1 ± its own noise.
            Some(Relative {
                ratio: 1.0,
                error: None,
            })
        } else {
            iops_of(&runs_of(&base_case)).and_then(|base| Relative::of(&iops, &base))
        };
        summaries.push(ReadSummary {
            method: case.name(),
            read_method: case.method,
            cache: case.cache,
            queue_depth: case.depth,
            threads: case.threads(),
            iops_ratio,
            base_depth,
            baseline: base_case.name(),
            io_wq_workers_max: runs.iter().map(|r| r.io_wq_workers_max).max().unwrap_or(0),
            resident_pages_max: runs.iter().map(|r| r.resident_pages).max().unwrap_or(0),
            warnings: stats::warnings(&times)
                .iter()
                .filter_map(|w| round_warning(w, "first round much slower than the rest", NOISE))
                .collect(),
            time_s,
            iops,
            mib_per_s,
        });
    }
    summaries
}

/// `mean ± σ` (just the mean with one run), each formatted by `format`.
fn mean_stddev(summary: &Summary, format: impl Fn(f64) -> String) -> String {
    match summary.stddev {
        Some(stddev) => format!("{} ± {}", format(summary.mean), format(stddev)),
        None => format(summary.mean),
    }
}

/// Column headers; the ratio column names the depth it divides by. Run times are in
/// the exports and the per-run lines: the table keeps to what fits 100 columns.
pub fn headers(base_depth: u32) -> Vec<String> {
    ["method", "cache", "QD", "IOPS ± σ", "MiB/s ± σ"]
        .iter()
        .map(|h| h.to_string())
        .chain([
            format!("× QD{base_depth}"),
            "iou-wrk".to_string(),
            "rounds".to_string(),
        ])
        .collect()
}

fn row(summary: &ReadSummary) -> Vec<String> {
    vec![
        summary.read_method.name().to_string(),
        summary.cache.name().to_string(),
        summary.queue_depth.to_string(),
        mean_stddev(&summary.iops, format_iops),
        mean_stddev(&summary.mib_per_s, |v| format!("{v:.1}")),
        summary
            .iops_ratio
            .map_or_else(|| "–".into(), |r| r.display()),
        if summary.read_method == ReadMethod::IoUring {
            summary.io_wq_workers_max.to_string()
        } else {
            "–".into()
        },
        summary.time_s.runs.to_string(),
    ]
}

pub fn summary_table(plan: &ReadPlan, summaries: &[ReadSummary], output: table::Output) -> String {
    let rows: Vec<Vec<String>> = summaries.iter().map(row).collect();
    table::new(&headers(plan.base_depth()), &rows, 2, output).to_string()
}

fn names<T>(items: &[T], name: impl Fn(&T) -> String) -> String {
    items.iter().map(name).collect::<Vec<_>>().join("/")
}

pub fn plan_line(plan: &ReadPlan) -> String {
    let size = format_bytes(plan.size_bytes);
    let source = match &plan.existing {
        Some(path) => format!("--read-file {} ({size})", path.display()),
        None => format!("a {size} test file written once and fsynced"),
    };
    let mut line = format!(
        "random reads: {} distinct {}-byte blocks per run out of {source}; cold: the file's page cache is emptied (posix_fadvise POSIX_FADV_DONTNEED) before every run; QD {} × {} × {}, {} round(s) × {} case(s) (odd rounds forwards, even rounds backwards){}",
        plan.reads_per_run,
        plan.block_size_bytes,
        names(&plan.depths, u32::to_string),
        names(&plan.methods, |m| m.name().to_string()),
        names(&plan.caches, |c| c.name().to_string()),
        plan.rounds,
        plan.cases.len(),
        if plan.verify { ", verified" } else { "" },
    );
    let mut extras = Vec::new();
    if plan.ring.register_buffers {
        extras.push("registered buffers");
    }
    if plan.ring.register_files {
        extras.push("registered file");
    }
    if plan.ring.sqpoll {
        extras.push("SQPOLL");
    }
    if !extras.is_empty() {
        line.push_str(&format!(", io_uring with {}", extras.join(", ")));
    }
    line
}

/// Observations a reader needs next to the numbers.
pub fn notes(plan: &ReadPlan, summaries: &[ReadSummary]) -> Vec<String> {
    let mut notes = Vec::new();
    if plan.rounds == 1 {
        notes.push("one round only: no σ, no outlier detection; use --rounds 3 or more".into());
    }
    let pages = plan.size_bytes.div_ceil(4096);
    let resident = summaries
        .iter()
        .filter(|s| s.cache == ReadCache::Buffered)
        .map(|s| s.resident_pages_max)
        .max()
        .unwrap_or(0);
    if !plan.caches.contains(&ReadCache::Buffered) {
        notes.push("O_DIRECT reads bypass the page cache (the file's pages are dropped before every run all the same)".into());
    } else if resident == 0 {
        notes.push(format!(
            "cold reads: before every run the file's pages were dropped from the page cache (posix_fadvise POSIX_FADV_DONTNEED), and mincore found 0 of its {pages} pages cached when the clock started"
        ));
    } else {
        notes.push(format!(
            "NOT fully cold: after posix_fadvise(POSIX_FADV_DONTNEED) up to {resident} of the file's {pages} pages were still cached when a run started (tmpfs keeps every page; pages mapped or locked by another process stay): buffered reads of those pages came from memory"
        ));
    }
    notes.push(format!(
        "each run reads {} distinct blocks of {} bytes in random order, out of the file's {} (seeded sample; every case of a round reads the same blocks); buffered descriptors use POSIX_FADV_RANDOM (no read-ahead), as fio does for random I/O",
        plan.reads_per_run,
        plan.block_size_bytes,
        plan.blocks()
    ));
    let base = plan.base_depth();
    notes.push(format!(
        "× QD{base} = mean IOPS / mean IOPS at queue depth {base} of the same method and cache, ± propagated σ; io_uring keeps QD reads in flight on one thread, pread runs QD threads; MiB/s = 2^20 bytes/s"
    ));
    for cache in &plan.caches {
        let ring: Vec<&ReadSummary> = summaries
            .iter()
            .filter(|s| s.read_method == ReadMethod::IoUring && s.cache == *cache)
            .collect();
        if ring.is_empty() {
            continue;
        }
        let workers = ring.iter().map(|s| s.io_wq_workers_max).max().unwrap_or(0);
        notes.push(if workers > 0 {
            format!(
                "{} io_uring reads were handed to io-wq kernel workers (up to {workers} iou-wrk threads at once): the ring did not issue them all inline",
                cache.name()
            )
        } else {
            format!(
                "{} io_uring reads needed no io-wq worker (no iou-wrk thread seen; sampled from 1 ms into each run, then every 20 ms)",
                cache.name()
            )
        });
    }
    if plan.verify {
        notes.push("--verify compared every block with the file's data inside the timed loop: its CPU time is in these numbers; use it to check the tool, not to measure".into());
    }
    notes
}

pub fn markdown_report(
    env: &EnvInfo,
    plan: &ReadPlan,
    plan_line: &str,
    summaries: &[ReadSummary],
    notes: &[String],
) -> String {
    let rows: Vec<Vec<String>> = summaries.iter().map(row).collect();
    let warnings = summaries
        .iter()
        .map(|s| (s.method.as_str(), s.warnings.as_slice()));
    let headers = headers(plan.base_depth());
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    super::output::markdown_text(
        "sqlite-uring bench io --reads",
        env,
        plan_line,
        &headers,
        &rows,
        notes,
        warnings,
    )
}

/// Everything `--export-json` writes about one `--reads` invocation.
#[derive(Serialize)]
pub struct ReadJsonReport<'a> {
    pub env: &'a EnvInfo,
    pub workload: &'static str,
    pub file_size_bytes: u64,
    pub read_file: Option<String>,
    pub block_size_bytes: u64,
    pub reads_per_run: u32,
    pub queue_depths: &'a [u32],
    pub read_methods: &'a [ReadMethod],
    pub read_cache: &'a [ReadCache],
    pub base_depth: u32,
    pub rounds: u32,
    pub seed: u64,
    pub runs: &'a [ReadRunRecord],
    pub summaries: &'a [ReadSummary],
    pub notes: &'a [String],
}

/// IOPS by queue depth: groups are the depths, bars the (method, cache) pairs.
pub fn iops_chart(plan: &ReadPlan, summaries: &[ReadSummary]) -> BarChart {
    let mut pairs: Vec<(ReadMethod, ReadCache)> = Vec::new();
    for case in &plan.cases {
        if !pairs.contains(&(case.method, case.cache)) {
            pairs.push((case.method, case.cache));
        }
    }
    let series = pairs
        .iter()
        .map(|&(method, cache)| {
            let pick = |depth: &u32| {
                summaries.iter().find(|s| {
                    s.read_method == method && s.cache == cache && s.queue_depth == *depth
                })
            };
            Series {
                name: format!("{} {}", method.name(), cache.name()),
                values: plan
                    .depths
                    .iter()
                    .map(|d| pick(d).map(|s| s.iops.mean))
                    .collect(),
                errors: plan
                    .depths
                    .iter()
                    .map(|d| pick(d).and_then(|s| s.iops.stddev))
                    .collect(),
            }
        })
        .collect();
    BarChart {
        title: format!(
            "random {}-byte reads of a {} file, {} per run, cold",
            plan.block_size_bytes,
            format_bytes(plan.size_bytes),
            plan.reads_per_run
        ),
        y_label: "IOPS (mean ± σ)".into(),
        categories: plan.depths.iter().map(|d| format!("QD {d}")).collect(),
        series,
        reference_line: None,
    }
}

/// Everything `bench io --reads` exports.
pub fn report<'a>(
    json: ReadJsonReport<'a>,
    plan: &ReadPlan,
    plan_line: &str,
) -> Document<'a, ReadRunRecord, ReadJsonReport<'a>, BarChart> {
    Document {
        rows: json.runs,
        markdown: markdown_report(json.env, plan, plan_line, json.summaries, json.notes),
        chart: Ok(iops_chart(plan, json.summaries)),
        json,
    }
}
