//! Results of `bench concurrency`: per cell, target and kind of operation, the rate over
//! the runs (mean ± σ), its ratio to the baseline (of the means, and the paired median
//! with its 95 % interval), and latency percentiles; the terminal tables, the verdict,
//! and the exports (records, Markdown, the throughput-by-threads chart).

use anyhow::{bail, Result};
use comfy_table::Table;
use serde::{Deserialize, Serialize};

use super::cell::Cell;
use super::workload::{resolve_target, CellOutcome, Kind, Pattern};
use crate::bench::common::export::{Markdown, Report};
use crate::bench::common::paired::Compared;
use crate::bench::common::verdict::{chance_limit, entry, first_appearances, Comparison};
use crate::report::chart::{Line, LineChart};
use crate::report::export::markdown_table;
use crate::report::stats::{self, PairedRatio, Relative, Summary, Verdict, Warning};
use crate::report::table;

/// One target's numbers for one kind of operation in one cell.
#[derive(Clone, Debug)]
pub struct KindRow {
    pub target: String,
    pub vfs: String,
    pub kind: Kind,
    /// Operations per second, one sample per measured run.
    pub rates: Summary,
    pub ops_mean: f64,
    /// Median over the runs of each run's percentile (runs without an operation of the
    /// kind have none); `None` when no run has one.
    pub p50_s: Option<f64>,
    pub p99_s: Option<f64>,
    /// Mean rate ÷ the baseline's (above 1: more operations per second).
    pub relative: Option<Relative>,
    /// Run-by-run rate ratios to the baseline's runs of the same rounds; `None` for the
    /// baseline itself.
    pub paired: Option<PairedRatio>,
    /// Warnings on the per-run time per operation (so that "first run slow" means slow).
    pub warnings: Vec<Warning>,
}

/// Everything measured in one cell, rows by kind, then in `--targets` order.
#[derive(Clone, Debug)]
pub struct CellResult {
    pub cell: Cell,
    pub rows: Vec<KindRow>,
}

/// Median of the values there are (a run with no operation of a kind has no percentile).
fn median_of_some(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let some: Vec<f64> = values.flatten().collect();
    (!some.is_empty()).then(|| stats::median(&some))
}

/// A latency, or `–` where there is none.
fn format_latency(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "–".into(), stats::format_seconds)
}

/// The rows of one cell from the outcomes of each target (in round order).
pub fn summarise(
    cell: Cell,
    targets: &[String],
    outcomes: &[Vec<CellOutcome>],
    baseline: &str,
) -> Result<CellResult> {
    let mut kinds: Vec<Kind> = outcomes
        .iter()
        .flatten()
        .flat_map(|o| o.kinds.iter().map(|k| k.kind))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let baseline_index = targets.iter().position(|t| t == baseline);
    let mut rows = Vec::new();
    for &kind in &kinds {
        let mut of_kind = Vec::new();
        for (target, runs) in targets.iter().zip(outcomes) {
            let mut found = Vec::new();
            for run in runs {
                match run.kinds.iter().find(|k| k.kind == kind) {
                    Some(k) => found.push(k.clone()),
                    None => bail!("a run on {target} reported no {} operations", kind.name()),
                }
            }
            of_kind.push(found);
        }
        let rates_of =
            |index: usize| -> Vec<f64> { of_kind[index].iter().map(|k| k.rate_per_s).collect() };
        let baseline_rates = baseline_index.map(rates_of);
        for (index, target) in targets.iter().enumerate() {
            let rates = rates_of(index);
            let is_baseline = Some(index) == baseline_index;
            // The baseline's own row keeps the ratio of its mean to itself, with its error.
            let Some(compared) = Compared::of(&rates, baseline_rates.as_deref(), false) else {
                bail!("{target}: no valid {} rate", kind.name());
            };
            let per_op_s: Vec<f64> = rates.iter().map(|r| 1.0 / r).collect();
            let warnings = if rates.iter().all(|r| *r > 0.0) {
                stats::warnings(&per_op_s)
            } else {
                Vec::new()
            };
            let runs = &of_kind[index];
            rows.push(KindRow {
                target: target.clone(),
                vfs: resolve_target(target)?.vfs.unwrap_or_default(),
                kind,
                relative: compared.relative,
                ops_mean: runs.iter().map(|k| k.ops as f64).sum::<f64>() / runs.len() as f64,
                p50_s: median_of_some(runs.iter().map(|k| k.p50_s)),
                p99_s: median_of_some(runs.iter().map(|k| k.p99_s)),
                rates: compared.summary,
                paired: compared.paired.filter(|_| !is_baseline),
                warnings,
            });
        }
    }
    Ok(CellResult { cell, rows })
}

/// `12345`, `812.4`: operations per second.
fn format_rate(rate: f64) -> String {
    if !rate.is_finite() {
        "n/a".into()
    } else if rate >= 100.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.1}")
    }
}

fn format_rate_summary(summary: &Summary) -> String {
    match summary.stddev {
        Some(stddev) => format!("{} ± {}", format_rate(summary.mean), format_rate(stddev)),
        None => format_rate(summary.mean),
    }
}

fn display_paired(paired: &Option<PairedRatio>) -> String {
    paired.map_or_else(|| "–".into(), |p| p.display())
}

const HEADERS: [&str; 8] = [
    "Target",
    "Kind",
    "Rate/s mean ± σ",
    "× base",
    "Paired × base [95 % CI]",
    "p50",
    "p99",
    "Ops/run",
];

fn table_rows(result: &CellResult) -> Vec<Vec<String>> {
    result
        .rows
        .iter()
        .map(|row| {
            vec![
                row.target.clone(),
                row.kind.name().to_string(),
                format_rate_summary(&row.rates),
                row.relative.map_or_else(|| "–".into(), |r| r.display()),
                display_paired(&row.paired),
                format_latency(row.p50_s),
                format_latency(row.p99_s),
                format!("{:.0}", row.ops_mean),
            ]
        })
        .collect()
}

pub fn terminal_table(result: &CellResult, output: table::Output) -> Table {
    table::new(&HEADERS, &table_rows(result), 2, output)
}

/// Warnings under a cell's table.
pub fn notes(result: &CellResult) -> Vec<String> {
    result
        .rows
        .iter()
        .flat_map(|row| {
            row.warnings.iter().map(move |w| {
                format!(
                    "warning: {} {}: {}",
                    row.target,
                    row.kind.name(),
                    w.message()
                )
            })
        })
        .collect()
}

/// The comparisons of every target but the baseline, per pattern, journal mode and kind
/// (`databases (wal) commits/s`), over N.
fn comparisons(results: &[CellResult], baseline: &str) -> Vec<Comparison> {
    let mut found: Vec<Comparison> = Vec::new();
    for result in results {
        let cell = result.cell;
        for row in result.rows.iter().filter(|r| r.target != baseline) {
            let what = format!(
                "{} ({}) {}",
                cell.pattern.name(),
                cell.journal.name(),
                row.kind.rate_unit()
            );
            // Rate ratios: above 1 is faster. No ratio files the cell as unpaired.
            entry(&mut found, &row.target, &what).add(cell.threads, row.paired, true);
        }
    }
    found
}

fn list_n(threads: &[u32]) -> String {
    if threads.is_empty() {
        return "no N".into();
    }
    let numbers: Vec<String> = threads.iter().map(u32::to_string).collect();
    format!("N = {}", numbers.join(", "))
}

/// The closing verdict: per target, per pattern, journal mode and kind, the N where the
/// target's rate is higher (faster), lower (slower) or the same as the baseline's beyond
/// the noise; then a count over all of them with what chance alone would give.
pub fn verdict(results: &[CellResult], baseline: &str) -> Vec<String> {
    let comparisons = comparisons(results, baseline);
    let mut lines = vec![
        format!("Verdict against {baseline}, run by run: faster or slower where the 95 % interval of the"),
        format!("median rate ratio (target ÷ {baseline}; above 1: more operations per second) excludes 1;"),
        "rate ×: geometric mean over N of the median rate ratio.".to_string(),
    ];
    if comparisons.is_empty() {
        lines.push(format!(
            "  nothing to compare: no target besides {baseline}, or too few runs for pairs"
        ));
        return lines;
    }
    for target in first_appearances(comparisons.iter().map(|c| c.target.as_str())) {
        lines.push(format!("  {target}"));
        let (mut faster, mut slower, mut same, mut undecided) = (0, 0, 0, 0);
        let mut unpaired = 0;
        for c in comparisons.iter().filter(|c| c.target == target) {
            let mut line = format!(
                "    {}: faster at {} · slower at {} · same at {}",
                c.journal,
                list_n(&c.faster),
                list_n(&c.slower),
                list_n(&c.same)
            );
            if !c.undecided.is_empty() {
                line.push_str(&format!(
                    " · too few runs at {} (need ≥ 6)",
                    list_n(&c.undecided)
                ));
            }
            if !c.unpaired.is_empty() {
                line.push_str(&format!(
                    " · no ratio at {} (a {baseline} run made none in its window: raise --duration-ms)",
                    list_n(&c.unpaired)
                ));
            }
            if let Some(ratio) = c.typical_ratio() {
                line.push_str(&format!(" · rate ×{ratio:.2}"));
                if c.medians_left_out > 0 {
                    line.push_str(&format!(
                        " (over {} N: {} rate(s) of 0 left out)",
                        c.medians.len(),
                        c.medians_left_out
                    ));
                }
            }
            lines.push(line);
            faster += c.faster.len();
            slower += c.slower.len();
            same += c.same.len();
            undecided += c.undecided.len();
            unpaired += c.unpaired.len();
        }
        let decided = faster + slower + same;
        if decided == 0 {
            lines.push(format!(
                "  => no verdict on {target}: too few paired runs; rerun with --runs 6 or more"
            ));
            continue;
        }
        let per_side = comparisons
            .iter()
            .filter(|c| c.target == target)
            .map(|c| c.chance_per_side)
            .fold(0.0, f64::max);
        let limit = chance_limit(decided, per_side);
        let side = |count: usize| {
            if count > limit {
                format!("{count} (beyond chance)")
            } else {
                format!("{count} (within chance)")
            }
        };
        lines.push(format!(
            "  => {target}: faster in {}, slower in {}, the same in {same} of {decided} comparisons{}; with no real difference, chance puts up to {limit} on each side",
            side(faster),
            side(slower),
            match (undecided, unpaired) {
                (0, 0) => String::new(),
                (_, 0) => format!(" ({undecided} more without enough runs)"),
                (0, _) => format!(" ({unpaired} more without a ratio)"),
                _ => format!(
                    " ({undecided} more without enough runs, {unpaired} without a ratio)"
                ),
            }
        ));
    }
    lines
}

/// One exported record: a target's numbers for one kind in one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConcurrencyRecord {
    pub pattern: String,
    pub journal: String,
    pub threads: u32,
    pub target: String,
    pub vfs: String,
    pub kind: String,
    pub synchronous: String,
    pub duration_ms: u64,
    pub rows: u64,
    pub runs: usize,
    pub ops_mean: f64,
    pub rate_mean_per_s: f64,
    pub rate_stddev_per_s: Option<f64>,
    pub rate_median_per_s: f64,
    pub rate_min_per_s: f64,
    pub rate_max_per_s: f64,
    /// Median over the runs of each run's latency percentile; null when no run
    /// completed an operation of the kind.
    pub p50_latency_us: Option<f64>,
    pub p99_latency_us: Option<f64>,
    pub baseline: String,
    pub relative: Option<f64>,
    pub relative_error: Option<f64>,
    pub paired_median: Option<f64>,
    pub paired_ci_low: Option<f64>,
    pub paired_ci_high: Option<f64>,
    /// `faster`, `slower`, `same` (rate against the baseline beyond the noise), or null.
    pub verdict: Option<String>,
    pub warnings: String,
}

/// What every record shares: the settings of the run.
pub struct RecordInfo {
    pub synchronous: String,
    pub duration_ms: u64,
    pub rows: u64,
    pub baseline: String,
}

pub fn records(results: &[CellResult], info: &RecordInfo) -> Vec<ConcurrencyRecord> {
    let mut records = Vec::new();
    for result in results {
        for row in &result.rows {
            let interval = row.paired.and_then(|p| p.interval);
            records.push(ConcurrencyRecord {
                pattern: result.cell.pattern.name().into(),
                journal: result.cell.journal.name().into(),
                threads: result.cell.threads,
                target: row.target.clone(),
                vfs: row.vfs.clone(),
                kind: row.kind.name().into(),
                synchronous: info.synchronous.clone(),
                duration_ms: info.duration_ms,
                rows: info.rows,
                runs: row.rates.runs,
                ops_mean: row.ops_mean,
                rate_mean_per_s: row.rates.mean,
                rate_stddev_per_s: row.rates.stddev,
                rate_median_per_s: row.rates.median,
                rate_min_per_s: row.rates.min,
                rate_max_per_s: row.rates.max,
                p50_latency_us: row.p50_s.map(|s| s * 1e6),
                p99_latency_us: row.p99_s.map(|s| s * 1e6),
                baseline: info.baseline.clone(),
                relative: row.relative.map(|r| r.ratio),
                relative_error: row.relative.and_then(|r| r.error),
                paired_median: row.paired.map(|p| p.median),
                paired_ci_low: interval.map(|(low, _)| low),
                paired_ci_high: interval.map(|(_, high)| high),
                verdict: row.paired.and_then(|p| p.verdict()).map(|v| {
                    match v {
                        Verdict::Above => "faster",
                        Verdict::Below => "slower",
                        Verdict::Straddles => "same",
                    }
                    .to_string()
                }),
                warnings: row
                    .warnings
                    .iter()
                    .map(Warning::short)
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
    }
    records
}

/// The summary table of the Markdown report: one line per pattern, journal, kind and N,
/// the baseline's rate and p99, every other target's paired rate ratio and p99.
fn summary_table(results: &[CellResult], baseline: &str) -> String {
    let others = first_appearances(
        results
            .iter()
            .flat_map(|r| &r.rows)
            .map(|row| row.target.as_str())
            .filter(|target| *target != baseline),
    );
    let mut headers = vec![
        "pattern".to_string(),
        "N".into(),
        "kind".into(),
        format!("{baseline} rate/s"),
        format!("{baseline} p99"),
    ];
    for other in &others {
        headers.push(format!("{other} ÷ {baseline} [95 % CI]"));
        headers.push(format!("{other} p99"));
    }
    let mut rows = Vec::new();
    let mut kinds: Vec<Kind> = results
        .iter()
        .flat_map(|r| r.rows.iter().map(|row| row.kind))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut groups: Vec<(Pattern, &str)> = Vec::new();
    for result in results {
        let group = (result.cell.pattern, result.cell.journal.name());
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    for (pattern, journal) in groups {
        for &kind in &kinds {
            for result in results
                .iter()
                .filter(|r| r.cell.pattern == pattern && r.cell.journal.name() == journal)
            {
                let find = |target: &str| {
                    result
                        .rows
                        .iter()
                        .find(|row| row.kind == kind && row.target == target)
                };
                let Some(base) = find(baseline) else { continue };
                let mut line = vec![
                    format!("{} ({journal})", pattern.name()),
                    result.cell.threads.to_string(),
                    kind.name().to_string(),
                    format_rate(base.rates.mean),
                    format_latency(base.p99_s),
                ];
                for other in &others {
                    match find(other) {
                        Some(row) => {
                            let ratio = display_paired(&row.paired);
                            line.push(match row.paired.and_then(|p| p.verdict()) {
                                Some(Verdict::Above) => format!("**{ratio}**"),
                                Some(Verdict::Below) => format!("_{ratio}_"),
                                _ => ratio,
                            });
                            line.push(format_latency(row.p99_s));
                        }
                        None => line.extend(["–".to_string(), "–".to_string()]),
                    }
                }
                rows.push(line);
            }
        }
    }
    markdown_table(&headers, &rows)
}

/// The Markdown report: the header, the summary table, the verdict, and a section per
/// cell.
pub fn markdown(
    header: &[String],
    results: &[CellResult],
    verdict: &[String],
    baseline: &str,
) -> String {
    let mut out = Markdown::new("sqlite-uring bench concurrency", header);
    out.section(
        "Summary",
        &format!(
            "Paired median of the rate ratio to {baseline} [95 % interval]; **bold**: more \
             operations per second than {baseline} beyond the noise, _italic_: fewer.\n\n{}",
            summary_table(results, baseline)
        ),
    );
    out.block("Verdict", "", verdict);
    for result in results {
        out.section(
            &result.cell.title(),
            &markdown_table(&HEADERS, &table_rows(result)),
        );
        out.notes(&notes(result));
    }
    out.finish()
}

/// Mean rate against N: one colour per pattern, journal mode and kind, one marker per
/// target.
pub fn chart(results: &[CellResult], targets: &[String]) -> Result<LineChart, String> {
    let mut lines: Vec<Line> = Vec::new();
    let mut quantities: Vec<String> = Vec::new();
    for result in results {
        for row in &result.rows {
            let quantity = match result.cell.pattern {
                Pattern::Databases => format!(
                    "databases ({}) {}",
                    result.cell.journal.name(),
                    row.kind.rate_unit()
                ),
                pattern => format!("{} {}", pattern.name(), row.kind.rate_unit()),
            };
            let color = match quantities.iter().position(|q| *q == quantity) {
                Some(index) => index,
                None => {
                    quantities.push(quantity.clone());
                    quantities.len() - 1
                }
            };
            let marker = targets.iter().position(|t| *t == row.target).unwrap_or(0);
            let name = format!("{quantity} · {}", row.target);
            let point = (f64::from(result.cell.threads), row.rates.mean);
            match lines.iter_mut().find(|line| line.name == name) {
                Some(line) => line.points.push(point),
                None => lines.push(Line {
                    name,
                    color,
                    marker,
                    points: vec![point],
                }),
            }
        }
    }
    if lines.is_empty() {
        return Err("no results to chart".into());
    }
    Ok(LineChart {
        title: "bench concurrency: operations per second by N (log-log)".into(),
        x_label: "N (threads or reader processes)".into(),
        y_label: "operations/s (mean over runs)".into(),
        lines,
    })
}

/// Everything `bench concurrency` exports, once the run is over: `header` is the
/// environment and settings printed above the tables.
pub fn report(
    header: &[String],
    results: &[CellResult],
    info: &RecordInfo,
    verdict: &[String],
) -> Report<ConcurrencyRecord, LineChart> {
    let records = records(results, info);
    let targets: Vec<String> = first_appearances(records.iter().map(|r| r.target.as_str()))
        .into_iter()
        .map(String::from)
        .collect();
    Report {
        markdown: markdown(header, results, verdict, &info.baseline),
        chart: chart(results, &targets),
        records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::common::settings::JournalMode;
    use crate::bench::concurrency::workload::KindOutcome;

    fn outcome(commit_rate: f64) -> CellOutcome {
        CellOutcome {
            elapsed_s: 1.0,
            kinds: vec![KindOutcome {
                kind: Kind::Commit,
                ops: commit_rate as u64,
                rate_per_s: commit_rate,
                p50_s: Some(1e-3),
                p99_s: Some(4e-3),
            }],
        }
    }

    fn cell(threads: u32) -> Cell {
        Cell {
            pattern: Pattern::Databases,
            journal: JournalMode::Wal,
            threads,
        }
    }

    /// Rates are "higher is better": a target with more commits per second in every
    /// round is faster, fewer slower, and the verdict says so per N.
    #[test]
    fn rate_ratios_read_the_right_way_round() {
        let _counters = crate::bench::common::targets::counters_lock();
        let targets = vec!["unix".to_string(), "io_uring".to_string()];
        let unix: Vec<CellOutcome> = (0..8).map(|i| outcome(100.0 + i as f64)).collect();
        let run = |factor: f64, threads| {
            let other = unix
                .iter()
                .map(|o| outcome(o.kinds[0].rate_per_s * factor))
                .collect();
            summarise(cell(threads), &targets, &[unix.clone(), other], "unix").unwrap()
        };
        let results = vec![run(1.2, 1), run(0.8, 2), run(1.0, 4)];
        let io_uring = &results[0].rows[1];
        assert_eq!(io_uring.target, "io_uring");
        assert!((io_uring.paired.unwrap().median - 1.2).abs() < 1e-9);
        assert!(
            results[0].rows[0].paired.is_none(),
            "the baseline is not paired"
        );
        let lines = verdict(&results, "unix");
        let line = lines
            .iter()
            .find(|l| l.contains("databases (wal) commits/s"))
            .unwrap();
        assert!(
            line.contains("faster at N = 1 · slower at N = 2 · same at N = 4"),
            "{line}"
        );
        // Equal rates make the interval [1, 1], which contains 1.
        let same = &results[2].rows[1];
        assert_eq!(same.paired.unwrap().verdict(), Some(Verdict::Straddles));
        let info = RecordInfo {
            synchronous: "FULL".into(),
            duration_ms: 250,
            rows: 10_000,
            baseline: "unix".into(),
        };
        let records = records(&results, &info);
        let verdicts: Vec<Option<&str>> = records.iter().map(|r| r.verdict.as_deref()).collect();
        assert_eq!(
            verdicts,
            [
                None,
                Some("faster"),
                None,
                Some("slower"),
                None,
                Some("same")
            ]
        );
        assert_eq!(records[1].p99_latency_us, Some(4000.0));
        // A baseline run with no commit in its window leaves no ratio: said, not skipped.
        let mut idle = unix.clone();
        idle[2] = outcome(0.0);
        let other: Vec<CellOutcome> = unix
            .iter()
            .map(|o| outcome(o.kinds[0].rate_per_s))
            .collect();
        let with_idle = vec![
            run(1.0, 1),
            summarise(cell(64), &targets, &[idle, other], "unix").unwrap(),
        ];
        let lines = verdict(&with_idle, "unix");
        assert!(
            lines.iter().any(|l| l.contains("same at N = 1")
                && l.contains("no ratio at N = 64")
                && l.contains("--duration-ms")),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("(1 more without a ratio)")),
            "{lines:#?}"
        );
        // A run missing a kind the others have is an error, not a silent gap.
        let mut broken = unix.clone();
        broken[3].kinds.clear();
        let error = summarise(cell(1), &targets, &[unix.clone(), broken], "unix").unwrap_err();
        assert!(
            error.to_string().contains("no commit operations"),
            "{error}"
        );
    }
}
