//! Results of `bench io --wal`: one record per run, per-case summaries with the ratio
//! to the baseline method of the same commit size and space (mean ± propagated σ, and
//! the median of the rounds' paired ratios with its 95 % interval), exports and chart.

use serde::Serialize;

use super::options::{WalMethod, WalSpace};
use super::output::round_warning;
use super::wal::{WalCase, WalOutcome, WalPlan, FRAME_BYTES, MIN_PAIRED_ROUNDS};
use crate::bench::common::export::Document;
use crate::report::chart::{BarChart, Series};
use crate::report::envinfo::EnvInfo;
use crate::report::stats::{self, Relative, Summary, Verdict};
use crate::report::table;

/// One run, flat so it exports as one CSV row; the first three columns are the ones
/// every `bench io` row starts with.
#[derive(Clone, Debug, Serialize)]
pub struct WalRunRecord {
    pub method: String,
    pub seconds: f64,
    /// Frame bytes committed per second (headers + pages, not the alignment padding).
    pub bytes_per_sec: f64,
    pub round: u32,
    pub wal_method: WalMethod,
    pub commit_frames: u32,
    pub space: WalSpace,
    pub commits: u32,
    pub commits_per_sec: f64,
    /// Median and 99th percentile of this run's commit times.
    pub commit_p50_us: f64,
    pub commit_p99_us: f64,
    /// `iou-wrk` threads alive when the run's last commit finished.
    pub io_wq_workers: usize,
    pub verified: Option<bool>,
}

impl WalRunRecord {
    pub fn new(plan: &WalPlan, round: u32, case: WalCase, outcome: &WalOutcome) -> WalRunRecord {
        let mut sorted = outcome.commit_s.clone();
        sorted.sort_by(f64::total_cmp);
        WalRunRecord {
            method: case.name(),
            seconds: outcome.elapsed_s,
            bytes_per_sec: case.frame_bytes(plan.commits) as f64 / outcome.elapsed_s,
            round,
            wal_method: case.method,
            commit_frames: case.frames,
            space: case.space,
            commits: plan.commits,
            commits_per_sec: f64::from(plan.commits) / outcome.elapsed_s,
            commit_p50_us: percentile(&sorted, 0.50) * 1e6,
            commit_p99_us: percentile(&sorted, 0.99) * 1e6,
            io_wq_workers: outcome.io_wq_workers,
            verified: outcome.verified,
        }
    }

    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.6},{:.0}",
            self.method, self.seconds, self.bytes_per_sec
        )
    }
}

/// Nearest-rank percentile of sorted samples (0 when there are none).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The rounds' paired time ratios against the baseline (< 1: faster).
#[derive(Clone, Debug, Serialize)]
pub struct PairedSummary {
    pub median: f64,
    /// 95 % interval of the median (sign test); `None` below 6 rounds.
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub pairs: usize,
    /// `faster`, `slower`, `no difference shown` or `too few rounds`.
    pub verdict: &'static str,
}

/// All runs of one case.
#[derive(Clone, Debug, Serialize)]
pub struct WalSummary {
    pub method: String,
    pub wal_method: WalMethod,
    pub commit_frames: u32,
    pub space: WalSpace,
    /// Seconds per run.
    pub time_s: Summary,
    pub commits_per_s: Summary,
    /// Mean time per commit, from the mean run time.
    pub commit_mean_us: f64,
    /// Medians over the runs of each run's p50 / p99 commit time.
    pub commit_p50_us: f64,
    pub commit_p99_us: f64,
    /// Baseline mean time / this mean time, ± propagated σ: > 1 is faster.
    pub speedup_vs_baseline: Option<Relative>,
    /// This run's time / the baseline's time in the same round, over the rounds.
    pub paired_time_ratio: Option<PairedSummary>,
    /// The same for the runs' median commit times: blind to the slow tail that other
    /// load on a shared disk adds to a few commits.
    pub paired_p50_ratio: Option<PairedSummary>,
    pub baseline: String,
    pub io_wq_workers_max: usize,
    pub warnings: Vec<String>,
}

/// Summaries in the plan's case order, each against the baseline method of its
/// commit size and space.
pub fn summarize(plan: &WalPlan, records: &[WalRunRecord]) -> Vec<WalSummary> {
    let runs_of = |case: &WalCase| -> Vec<&WalRunRecord> {
        let mut runs: Vec<&WalRunRecord> =
            records.iter().filter(|r| r.method == case.name()).collect();
        runs.sort_by_key(|r| r.round);
        runs
    };
    let mut summaries = Vec::new();
    for case in &plan.cases {
        let runs = runs_of(case);
        let times: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
        let rates: Vec<f64> = runs.iter().map(|r| r.commits_per_sec).collect();
        let (Some(time_s), Some(commits_per_s)) =
            (Summary::from_samples(&times), Summary::from_samples(&rates))
        else {
            continue;
        };
        let baseline_case = WalCase {
            method: plan.baseline(),
            ..*case
        };
        let baseline_runs = runs_of(&baseline_case);
        let baseline_times: Vec<f64> = baseline_runs.iter().map(|r| r.seconds).collect();
        let is_baseline = case.method == plan.baseline();
        let speedup = if is_baseline {
            Some(Relative {
                ratio: 1.0,
                error: None,
            })
        } else {
            Summary::from_samples(&baseline_times).and_then(|b| Relative::of(&b, &time_s))
        };
        let p50s: Vec<f64> = runs.iter().map(|r| r.commit_p50_us).collect();
        let baseline_p50s: Vec<f64> = baseline_runs.iter().map(|r| r.commit_p50_us).collect();
        let paired_of = |samples: &[f64], baseline: &[f64]| {
            if is_baseline || baseline.len() != samples.len() {
                return None;
            }
            stats::paired_ratio(samples, baseline).map(|p| PairedSummary {
                median: p.median,
                low: p.interval.map(|i| i.0),
                high: p.interval.map(|i| i.1),
                pairs: p.pairs,
                verdict: match p.verdict() {
                    Some(Verdict::Below) => "faster",
                    Some(Verdict::Above) => "slower",
                    Some(Verdict::Straddles) => "no difference shown",
                    None => "too few rounds",
                },
            })
        };
        let paired = paired_of(&times, &baseline_times);
        let paired_p50 = paired_of(&p50s, &baseline_p50s);
        let p99s: Vec<f64> = runs.iter().map(|r| r.commit_p99_us).collect();
        summaries.push(WalSummary {
            method: case.name(),
            wal_method: case.method,
            commit_frames: case.frames,
            space: case.space,
            commit_mean_us: time_s.mean / f64::from(plan.commits) * 1e6,
            commit_p50_us: stats::median(&p50s),
            commit_p99_us: stats::median(&p99s),
            speedup_vs_baseline: speedup,
            paired_time_ratio: paired,
            paired_p50_ratio: paired_p50,
            baseline: baseline_case.name(),
            io_wq_workers_max: runs.iter().map(|r| r.io_wq_workers).max().unwrap_or(0),
            warnings: stats::warnings(&times)
                .iter()
                .filter_map(|w| {
                    round_warning(
                        w,
                        "first round much slower than the rest",
                        "read the paired ratio, or use more --rounds",
                    )
                })
                .collect(),
            time_s,
            commits_per_s,
        });
    }
    summaries
}

const HEADERS: [&str; 12] = [
    "method",
    "frames",
    "space",
    "commit (mean)",
    "commits/s ± σ",
    "p50",
    "p99",
    "speed-up",
    "paired time ratio [95 %]",
    "verdict",
    "paired p50 ratio [95 %]",
    "iou-wrk",
];

fn format_paired(paired: Option<&PairedSummary>) -> String {
    paired.map_or_else(
        || "–".into(),
        |p| match (p.low, p.high) {
            (Some(low), Some(high)) => format!("{:.3} [{low:.3}, {high:.3}]", p.median),
            _ => format!("{:.3}", p.median),
        },
    )
}

fn format_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn row(summary: &WalSummary) -> Vec<String> {
    let paired = summary.paired_time_ratio.as_ref();
    vec![
        summary.wal_method.name().to_string(),
        summary.commit_frames.to_string(),
        summary.space.name().to_string(),
        format_us(summary.commit_mean_us),
        match summary.commits_per_s.stddev {
            Some(stddev) => format!("{:.0} ± {stddev:.0}", summary.commits_per_s.mean),
            None => format!("{:.0}", summary.commits_per_s.mean),
        },
        format_us(summary.commit_p50_us),
        format_us(summary.commit_p99_us),
        summary
            .speedup_vs_baseline
            .map_or_else(|| "–".into(), |r| r.display()),
        format_paired(paired),
        paired.map_or_else(|| "baseline".into(), |p| p.verdict.to_string()),
        format_paired(summary.paired_p50_ratio.as_ref()),
        if summary.wal_method.uses_ring() {
            summary.io_wq_workers_max.to_string()
        } else {
            "–".into()
        },
    ]
}

pub fn summary_table(summaries: &[WalSummary], output: table::Output) -> String {
    let rows: Vec<Vec<String>> = summaries.iter().map(row).collect();
    table::new(&HEADERS, &rows, 1, output).to_string()
}

pub fn plan_line(plan: &WalPlan) -> String {
    format!(
        "WAL commits: {} commits per run of {} frame(s) ({} bytes each: 24-byte header + 4096-byte page), space {}, {} round(s) × {} case(s) (odd rounds forwards, even rounds backwards), baseline {}{}",
        plan.commits,
        plan.frames
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join("/"),
        FRAME_BYTES,
        plan.spaces
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join("/"),
        plan.rounds,
        plan.cases.len(),
        plan.baseline().name(),
        if plan.verify { ", verified" } else { "" }
    )
}

pub fn notes(plan: &WalPlan) -> Vec<String> {
    let mut notes = Vec::new();
    if plan.rounds < MIN_PAIRED_ROUNDS {
        notes.push(format!(
            "{} round(s): the paired ratio gets a 95 % interval from {MIN_PAIRED_ROUNDS} rounds on; use --rounds 10 to tell a difference from the noise",
            plan.rounds
        ));
    }
    notes.push(format!(
        "speed-up = mean run time of {} / mean run time of the method (> 1: faster), ± propagated σ; paired time ratio = median over the rounds of (method's time / baseline's time in the same round) with its distribution-free 95 % interval: verdict faster or slower only when the whole interval is below or above 1; paired p50 ratio: the same for the runs' median commit times",
        plan.baseline().name()
    ));
    if plan.uses_direct() {
        notes.push("O_DIRECT methods write each commit's frames in SQLite's byte layout widened to 4 KiB blocks (the first block's head rewritten from memory, zeros after the last frame)".into());
    }
    notes
}

pub fn markdown_report(
    env: &EnvInfo,
    plan_line: &str,
    summaries: &[WalSummary],
    notes: &[String],
) -> String {
    let rows: Vec<Vec<String>> = summaries.iter().map(row).collect();
    let warnings = summaries
        .iter()
        .map(|s| (s.method.as_str(), s.warnings.as_slice()));
    super::output::markdown_text(
        "sqlite-uring bench io --wal",
        env,
        plan_line,
        &HEADERS,
        &rows,
        notes,
        warnings,
    )
}

/// Everything `--export-json` writes about one `--wal` invocation.
#[derive(Serialize)]
pub struct WalJsonReport<'a> {
    pub env: &'a EnvInfo,
    pub workload: &'static str,
    pub commits: u32,
    pub commit_frames: &'a [u32],
    pub spaces: &'a [WalSpace],
    pub frame_bytes: u64,
    pub baseline: &'static str,
    pub rounds: u32,
    pub seed: u64,
    pub runs: &'a [WalRunRecord],
    pub summaries: &'a [WalSummary],
    pub notes: &'a [String],
}

/// Commits per second: groups are (frames, space), bars the methods.
pub fn commits_chart(plan: &WalPlan, summaries: &[WalSummary]) -> BarChart {
    let mut groups: Vec<(u32, WalSpace)> = Vec::new();
    for case in &plan.cases {
        if !groups.contains(&(case.frames, case.space)) {
            groups.push((case.frames, case.space));
        }
    }
    let series = plan
        .methods
        .iter()
        .map(|&method| {
            let pick = |&(frames, space): &(u32, WalSpace)| {
                summaries.iter().find(|s| {
                    s.wal_method == method && s.commit_frames == frames && s.space == space
                })
            };
            Series {
                name: method.name().to_string(),
                values: groups
                    .iter()
                    .map(|g| pick(g).map(|s| s.commits_per_s.mean))
                    .collect(),
                errors: groups
                    .iter()
                    .map(|g| pick(g).and_then(|s| s.commits_per_s.stddev))
                    .collect(),
            }
        })
        .collect();
    BarChart {
        title: format!("WAL commits, {} per run", plan.commits),
        y_label: "commits/s (mean ± σ)".into(),
        categories: groups
            .iter()
            .map(|(frames, space)| format!("{frames} frame(s), {}", space.name()))
            .collect(),
        series,
        reference_line: None,
    }
}

/// Everything `bench io --wal` exports.
pub fn report<'a>(
    json: WalJsonReport<'a>,
    plan: &WalPlan,
    plan_line: &str,
) -> Document<'a, WalRunRecord, WalJsonReport<'a>, BarChart> {
    Document {
        rows: json.runs,
        markdown: markdown_report(json.env, plan_line, json.summaries, json.notes),
        chart: Ok(commits_chart(plan, json.summaries)),
        json,
    }
}
