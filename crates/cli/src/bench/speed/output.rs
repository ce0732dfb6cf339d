//! Results of `bench speed`: terminal tables, exports and the chart.

use comfy_table::Table;
use serde::{Deserialize, Serialize};
use sqlite_uring::IoStats;

use super::breakdown::{self, Share, ShareRecord};
use crate::bench::common::checksum::Checksum;
use crate::bench::common::export::{Exportable, Markdown};
use crate::bench::common::paired::{relative_time_chart, ChartRow};
use crate::report::chart::BarChart;
use crate::report::export::markdown_table;
use crate::report::stats::{
    format_bytes, format_mean_stddev, format_mean_stddev_compact, format_seconds, PairedRatio,
    Relative, Summary, Warning,
};
use crate::report::table;

/// The measured runs of one target in one journal mode for one test.
#[derive(Clone, Debug)]
pub struct ComboResult {
    /// `memory`, `unix (wal)`, …
    pub label: String,
    pub target: String,
    pub vfs: String,
    /// Journal mode in effect (`memory` for `:memory:`).
    pub journal: String,
    pub summary: Summary,
    /// Mean user + system CPU time of the process per run.
    pub cpu_mean_s: f64,
    pub checksum: Checksum,
    /// VFS calls per measured run (mean over runs); `None` where nothing is counted.
    pub io: Option<IoStats>,
    /// Whether `io` has the engine's counters (`fsyncs`, `kernel_entries`): this
    /// project's VFS only.
    pub engine_counted: bool,
    pub warnings: Vec<Warning>,
    /// Index of the result this one is compared to (itself for the baseline).
    pub baseline: Option<usize>,
    /// Whether this is the baseline itself.
    pub is_baseline: bool,
    /// Mean ÷ the baseline's mean (exactly 1 for the baseline itself).
    pub relative: Option<Relative>,
    /// Run-by-run ratios to the baseline's runs of the same rounds (`None` for the
    /// baseline itself).
    pub paired: Option<PairedRatio>,
    /// Where the time went, by VFS method (`--breakdown`; file targets only).
    pub breakdown: Option<Vec<Share>>,
}

impl ComboResult {
    /// The counters of the engine, where counted.
    fn engine(&self) -> Option<IoStats> {
        self.io.filter(|_| self.engine_counted)
    }
}

/// Everything measured for one test.
#[derive(Clone, Debug)]
pub struct TestResult {
    pub number: u32,
    pub name: &'static str,
    pub combos: Vec<ComboResult>,
    /// Comparisons that are not like for like (differing sync counts).
    pub unfair: Vec<String>,
}

/// Settings shared by every record, for the exports.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub synchronous: String,
    pub mode: String,
    pub scale: f64,
    /// `hot` or `cold` (`--cache`).
    pub cache: String,
}

/// One JSON/CSV record: one test × target × journal mode. Flat, so CSV can hold it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeedRecord {
    pub test: u32,
    pub name: String,
    pub target: String,
    pub vfs: String,
    pub journal: String,
    pub synchronous: String,
    pub mode: String,
    pub scale: f64,
    /// `hot`, or `cold`: every timed test started with the database's pages evicted.
    #[serde(default = "hot")]
    pub cache: String,
    pub runs: usize,
    pub mean_s: f64,
    pub median_s: f64,
    pub stddev_s: Option<f64>,
    pub min_s: f64,
    pub max_s: f64,
    /// Mean user + system CPU seconds of the process during the body.
    pub cpu_mean_s: f64,
    /// Label of the result this one is compared to.
    pub baseline: Option<String>,
    /// mean / baseline mean (> 1: slower than the baseline).
    pub relative: Option<f64>,
    pub relative_error: Option<f64>,
    /// Median of the run-by-run ratios to the baseline (same rounds).
    pub paired_median: Option<f64>,
    /// 95 % confidence interval of that median (sign test; needs ≥ 6 runs).
    pub paired_ci_low: Option<f64>,
    pub paired_ci_high: Option<f64>,
    pub checksum: String,
    pub read_calls: Option<u64>,
    pub write_calls: Option<u64>,
    pub sync_calls: Option<u64>,
    pub truncate_calls: Option<u64>,
    pub bytes_read: Option<u64>,
    pub bytes_written: Option<u64>,
    pub fsyncs: Option<u64>,
    pub kernel_entries: Option<u64>,
    /// Warnings joined with "; ".
    pub warnings: String,
}

/// One element of the JSON export: the record, and with `--breakdown` where its time
/// went by VFS method (the CSV rows are the records alone).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeedJson {
    #[serde(flatten)]
    pub record: SpeedRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Vec<ShareRecord>>,
}

/// The cache state of records written before `--cache` existed.
fn hot() -> String {
    "hot".to_string()
}

pub fn records(results: &[TestResult], info: &RunInfo) -> Vec<SpeedRecord> {
    let mut out = Vec::new();
    for test in results {
        for combo in &test.combos {
            let relative = combo.relative;
            let io = combo.io;
            out.push(SpeedRecord {
                test: test.number,
                name: test.name.to_string(),
                target: combo.target.clone(),
                vfs: combo.vfs.clone(),
                journal: combo.journal.clone(),
                synchronous: info.synchronous.clone(),
                mode: info.mode.clone(),
                scale: info.scale,
                cache: info.cache.clone(),
                runs: combo.summary.runs,
                mean_s: combo.summary.mean,
                median_s: combo.summary.median,
                stddev_s: combo.summary.stddev,
                min_s: combo.summary.min,
                max_s: combo.summary.max,
                cpu_mean_s: combo.cpu_mean_s,
                baseline: combo.baseline.map(|i| test.combos[i].label.clone()),
                relative: relative.map(|r| r.ratio),
                relative_error: relative.and_then(|r| r.error),
                paired_median: combo.paired.map(|p| p.median),
                paired_ci_low: combo.paired.and_then(|p| p.interval).map(|(low, _)| low),
                paired_ci_high: combo.paired.and_then(|p| p.interval).map(|(_, high)| high),
                checksum: combo.checksum.hex(),
                read_calls: io.map(|c| c.read_calls),
                write_calls: io.map(|c| c.write_calls),
                sync_calls: io.map(|c| c.sync_calls),
                truncate_calls: io.map(|c| c.truncate_calls),
                bytes_read: io.map(|c| c.bytes_read),
                bytes_written: io.map(|c| c.bytes_written),
                fsyncs: combo.engine().map(|c| c.fsyncs),
                kernel_entries: combo.engine().map(|c| c.kernel_entries),
                warnings: combo
                    .warnings
                    .iter()
                    .map(Warning::message)
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
    }
    out
}

const HEADERS: [&str; 10] = [
    "Command",
    "Mean ± σ",
    "Min",
    "Max",
    "Relative",
    "Paired [95 % CI]",
    "CPU",
    "xRead / xWrite / xSync",
    "Written",
    "Kernel entries",
];

fn io_cell(io: Option<IoStats>) -> String {
    io.map_or_else(
        || "–".into(),
        |c| format!("{} / {} / {}", c.read_calls, c.write_calls, c.sync_calls),
    )
}

/// One row of cells per result, shared by the terminal and Markdown tables.
/// The Relative cell: `1.85 ± 0.07`, or `None` for the baseline itself.
fn relative_cell(combo: &ComboResult) -> Option<String> {
    (!combo.is_baseline).then(|| combo.relative.map_or_else(|| "–".into(), |r| r.display()))
}

fn paired_cell(combo: &ComboResult) -> String {
    combo.paired.map_or_else(|| "–".into(), |p| p.display())
}

fn written_cell(combo: &ComboResult) -> String {
    combo
        .io
        .map_or_else(|| "–".into(), |c| format_bytes(c.bytes_written))
}

fn rows(test: &TestResult) -> Vec<Vec<String>> {
    test.combos
        .iter()
        .map(|combo| {
            vec![
                combo.label.clone(),
                format_mean_stddev(&combo.summary),
                format_seconds(combo.summary.min),
                format_seconds(combo.summary.max),
                relative_cell(combo).unwrap_or_else(|| "1.00 (baseline)".into()),
                paired_cell(combo),
                format_seconds(combo.cpu_mean_s),
                io_cell(combo.io),
                written_cell(combo),
                combo
                    .engine()
                    .map_or_else(|| "–".into(), |c| c.kernel_entries.to_string()),
            ]
        })
        .collect()
}

/// Wall time / CPU time of `:memory:` above which the machine is reported busy.
const BUSY_WALL_OVER_CPU: f64 = 1.5;

/// What each result is compared to, unfairness flags and warnings, under a test's table.
pub fn notes(test: &TestResult) -> Vec<String> {
    let mut notes = Vec::new();
    let cross_journal: Vec<String> = test
        .combos
        .iter()
        .filter_map(|combo| {
            let baseline = &test.combos[combo.baseline?];
            (baseline.journal != combo.journal && baseline.label != combo.label)
                .then(|| format!("{} is relative to {}", combo.label, baseline.label))
        })
        .collect();
    if !cross_journal.is_empty() {
        notes.push(format!("note: {}", cross_journal.join("; ")));
    }
    notes.extend(test.unfair.iter().map(|u| format!("UNFAIR: {u}")));
    for combo in test.combos.iter().filter(|c| c.vfs == ":memory:") {
        // `:memory:` does no I/O, so wall time well above CPU time means it waited for a
        // CPU: other processes competed, and every timing of this test is inflated.
        if combo.cpu_mean_s > 0.0 && combo.summary.mean > BUSY_WALL_OVER_CPU * combo.cpu_mean_s {
            notes.push(format!(
                "warning: the machine was busy: {} (no I/O) took {:.1}× its CPU time in wall \
                 time; rerun on a quiet machine",
                combo.label,
                combo.summary.mean / combo.cpu_mean_s
            ));
        }
    }
    let warned: Vec<String> = test
        .combos
        .iter()
        .filter(|combo| !combo.warnings.is_empty())
        .map(|combo| {
            let shorts: Vec<String> = combo.warnings.iter().map(Warning::short).collect();
            format!("{} ({})", combo.label, shorts.join(", "))
        })
        .collect();
    if !warned.is_empty() {
        notes.push(format!("warning: {}", warned.join("; ")));
    }
    notes
}

/// Each kind of warning that occurred, with its remedy, once for the whole suite.
pub fn warning_remedies(results: &[TestResult]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for warning in results
        .iter()
        .flat_map(|t| &t.combos)
        .flat_map(|c| &c.warnings)
    {
        let message = warning.message();
        // Messages differ by number only within a kind; keep one per kind.
        let kind = std::mem::discriminant(warning);
        let new = !results
            .iter()
            .flat_map(|t| &t.combos)
            .flat_map(|c| &c.warnings)
            .take_while(|w| !std::ptr::eq(*w, warning))
            .any(|w| std::mem::discriminant(w) == kind);
        if new {
            seen.push(message);
        }
    }
    seen
}

/// The columns of the terminal table: what decides a comparison, narrow enough for a
/// 100-column terminal. Min, max, CPU time and kernel entries are in the exports.
const TERMINAL_HEADERS: [&str; 6] = [
    "Command",
    "Mean ± σ",
    "Relative",
    "Paired [95 % CI]",
    "xRead / xWrite / xSync",
    "Written",
];

/// What the terminal table leaves to the exports.
pub const TERMINAL_OMITS: &str =
    "min, max, CPU time and kernel entries of every row: --export-markdown or --export-json";

/// One row of the terminal table per result.
fn terminal_rows(test: &TestResult) -> Vec<Vec<String>> {
    test.combos
        .iter()
        .map(|combo| {
            vec![
                combo.label.clone(),
                format_mean_stddev_compact(&combo.summary),
                relative_cell(combo).unwrap_or_else(|| "baseline".into()),
                paired_cell(combo),
                io_cell(combo.io),
                written_cell(combo),
            ]
        })
        .collect()
}

/// The table of one test, laid out for `output` (see [`crate::report::table`]).
pub fn terminal_table(test: &TestResult, output: table::Output) -> Table {
    table::new(&TERMINAL_HEADERS, &terminal_rows(test), 1, output)
}

pub fn title(test: &TestResult) -> String {
    format!("Test {}: {}", test.number, test.name)
}

/// Geometric mean over tests of each result's relative time: one number per
/// target × journal that does not let one long test dominate.
pub fn geometric_means(results: &[TestResult]) -> Vec<(String, f64, usize)> {
    let mut labels: Vec<String> = Vec::new();
    for test in results {
        for combo in &test.combos {
            if !labels.contains(&combo.label) {
                labels.push(combo.label.clone());
            }
        }
    }
    labels
        .into_iter()
        .filter_map(|label| {
            let ratios: Vec<f64> = results
                .iter()
                .filter_map(|test| {
                    let combo = test.combos.iter().find(|c| c.label == label)?;
                    combo.relative.map(|r| r.ratio).filter(|r| *r > 0.0)
                })
                .collect();
            (!ratios.is_empty()).then(|| {
                let mean_log = ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64;
                (label, mean_log.exp(), ratios.len())
            })
        })
        .collect()
}

/// The Markdown report: the header, a section per test, the geometric means and the
/// verdict.
pub fn markdown(header: &[String], results: &[TestResult], verdict: &[String]) -> String {
    let mut out = Markdown::new("sqlite-uring bench speed", header);
    for test in results {
        out.section(&title(test), &markdown_table(&HEADERS, &rows(test)));
        out.notes(&notes(test));
        if let Some((headers, rows)) = breakdown_rows(test) {
            out.subsection(BREAKDOWN_TITLE, &markdown_table(&headers, &rows));
            out.notes(&[BREAKDOWN_NOTE.to_string()]);
        }
    }
    let summary: Vec<Vec<String>> = geometric_means(results)
        .into_iter()
        .map(|(label, mean, n)| vec![label, format!("{mean:.3}"), n.to_string()])
        .collect();
    out.section(
        "Geometric mean of relative time over the tests",
        &markdown_table(
            &["Command", "Geometric mean of Relative", "Tests"],
            &summary,
        ),
    );
    out.block("Verdict", "text", verdict);
    out.finish()
}

/// Relative time per test (categories) and result (series).
pub fn chart(results: &[TestResult], baseline_name: &str) -> BarChart {
    let cases: Vec<Vec<ChartRow>> = results
        .iter()
        .map(|test| {
            test.combos
                .iter()
                .map(|combo| ChartRow {
                    label: combo.label.clone(),
                    is_baseline: combo.is_baseline,
                    relative: combo.relative,
                })
                .collect()
        })
        .collect();
    let categories = results.iter().map(|t| t.number.to_string()).collect();
    relative_time_chart("speed", baseline_name, categories, &cases)
}

/// Everything `bench speed` exports, once the run is over: `header` is the environment
/// and settings printed above the tables.
pub fn report(
    header: &[String],
    results: &[TestResult],
    info: &RunInfo,
    verdict: &[String],
    baseline: &str,
) -> SpeedReport {
    let records = records(results, info);
    let breakdowns = results
        .iter()
        .flat_map(|test| &test.combos)
        .map(|combo| combo.breakdown.as_deref().map(breakdown::records));
    let json = records
        .iter()
        .cloned()
        .zip(breakdowns)
        .map(|(record, breakdown)| SpeedJson { record, breakdown })
        .collect();
    SpeedReport {
        records,
        json,
        markdown: markdown(header, results, verdict),
        chart: Ok(chart(results, baseline)),
    }
}

/// `bench speed`'s exports: flat records for CSV, the same with their breakdowns for
/// JSON, the Markdown report and the chart.
pub struct SpeedReport {
    pub records: Vec<SpeedRecord>,
    pub json: Vec<SpeedJson>,
    pub markdown: String,
    pub chart: Result<BarChart, String>,
}

impl Exportable for SpeedReport {
    type CsvRow = SpeedRecord;
    type JsonItem = SpeedJson;
    type Chart = BarChart;

    fn csv_rows(&self) -> &[SpeedRecord] {
        &self.records
    }

    fn json_items(&self) -> &[SpeedJson] {
        &self.json
    }

    fn markdown(&self) -> String {
        self.markdown.clone()
    }

    fn chart(&self) -> Result<BarChart, String> {
        self.chart.clone()
    }
}

/// The heading of the breakdown table under a test.
pub const BREAKDOWN_TITLE: &str = "Where the time goes, by VFS method (--breakdown)";

/// How to read the breakdown table.
pub const BREAKDOWN_NOTE: &str = "baseline: median time per run in each method (×calls per \
     run); others: paired median difference from the baseline [95 % CI] (their own times \
     when the baseline is not timed, as memory); outside the VFS: the rest of the body, \
     SQLite's and the benchmark's work between the timed calls. A method can cost more \
     because another does its work later (write-behind's writes show in xFileControl or \
     xSync instead of xWrite): read the differences together";

/// Headers and rows of a test's breakdown table: a row per VFS method any target called,
/// then the time outside the VFS and the whole test; a column per timed target. `None`
/// when no target was timed.
fn breakdown_rows(test: &TestResult) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let timed: Vec<&ComboResult> = test
        .combos
        .iter()
        .filter(|combo| combo.breakdown.is_some())
        .collect();
    if timed.is_empty() {
        return None;
    }
    let mut parts: Vec<&'static str> = Vec::new();
    for share in timed
        .iter()
        .flat_map(|combo| combo.breakdown.iter().flatten())
    {
        if !parts.contains(&share.part) {
            parts.push(share.part);
        }
    }
    parts.sort_by_key(|part| breakdown::rank(part));
    let mut headers = vec!["VFS method".to_string()];
    headers.extend(timed.iter().map(|combo| combo.label.clone()));
    let rows = parts
        .iter()
        .map(|part| {
            let mut row = vec![part.to_string()];
            row.extend(timed.iter().map(|combo| {
                breakdown::cell(
                    combo
                        .breakdown
                        .iter()
                        .flatten()
                        .find(|share| share.part == *part),
                )
            }));
            row
        })
        .collect();
    Some((headers, rows))
}

/// The breakdown table of one test for the terminal, if any target was timed.
pub fn breakdown_table(test: &TestResult, output: table::Output) -> Option<Table> {
    let (headers, rows) = breakdown_rows(test)?;
    Some(table::new(&headers, &rows, 1, output))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::{assert_fits_piped, Output};

    fn combo(label: &str, baseline: usize, samples: &[f64], paired: bool) -> ComboResult {
        ComboResult {
            label: label.into(),
            target: label.split(' ').next().unwrap().into(),
            vfs: "io_uring".into(),
            journal: "wal".into(),
            summary: Summary::from_samples(samples).unwrap(),
            cpu_mean_s: 0.01,
            checksum: Checksum::default(),
            io: Some(IoStats {
                read_calls: 123_456,
                write_calls: 234_567,
                sync_calls: 34_567,
                bytes_written: 987_654_321,
                kernel_entries: 1_234_567,
                ..IoStats::default()
            }),
            engine_counted: true,
            warnings: vec![],
            baseline: Some(baseline),
            is_baseline: false,
            relative: None,
            paired: paired.then_some(PairedRatio {
                median: 0.9712,
                interval: Some((0.9512, 0.9912)),
                pairs: 10,
            }),
            breakdown: None,
        }
    }

    /// Each result's mean relative to its baseline's, the baseline itself exactly 1.
    fn with_relatives(mut combos: Vec<ComboResult>) -> Vec<ComboResult> {
        let summaries: Vec<Summary> = combos.iter().map(|c| c.summary.clone()).collect();
        for (index, combo) in combos.iter_mut().enumerate() {
            let baseline = combo.baseline.unwrap();
            combo.is_baseline = baseline == index;
            combo.relative = if combo.is_baseline {
                Some(Relative {
                    ratio: 1.0,
                    error: None,
                })
            } else {
                combo.summary.relative_to(&summaries[baseline])
            };
        }
        combos
    }

    /// The widest rows a default run produces (and a long URI-parameter label) still
    /// give a piped table of at most 100 columns with whole borders.
    #[test]
    fn the_piped_table_fits_100_columns() {
        let test = TestResult {
            number: 12,
            name: "DELETE with an index",
            combos: with_relatives(vec![
                combo("unix (delete)", 0, &[1.234_567, 1.3, 1.25], false),
                combo(
                    "io_uring?uring_sync_plan=separate&uring_write_behind=off (delete)",
                    0,
                    &[0.123_456, 0.13, 0.125],
                    true,
                ),
                combo("io_uring (delete)", 0, &[0.000_123, 0.000_13], true),
            ]),
            unfair: vec![],
        };
        let rendered = terminal_table(&test, Output::Piped).to_string();
        assert_fits_piped(&rendered);
        assert!(rendered.contains("baseline"), "{rendered}");
        assert!(
            rendered.contains("0.97 [0.95,") && rendered.contains("_behind=off"),
            "{rendered}"
        );
        // The Markdown export keeps every column.
        let markdown = markdown(&[], std::slice::from_ref(&test), &[]);
        assert!(markdown.contains("1.00 (baseline)") && markdown.contains("1234567"));
    }

    /// Runs of a target with every method of a WAL-and-rollback test called, times
    /// scaled by `factor` (for wide cells: differences in the hundreds of microseconds).
    fn timed_runs(factor: f64) -> Vec<breakdown::TimedRun> {
        use crate::counting_vfs::{Method, MethodTimes};
        (0..10)
            .map(|round| {
                let mut times = MethodTimes::default();
                for (i, method) in Method::ALL.into_iter().enumerate() {
                    times.calls[method as usize] = 100 + i as u64;
                    times.ns[method as usize] =
                        ((123_456 + 1_000 * (i as u64 + round)) as f64 * factor) as u64;
                }
                (0.012_345 * factor, times)
            })
            .collect()
    }

    /// With --breakdown, each test gets a table of every VFS method called, the time
    /// outside the VFS and the whole test, a column per timed target: it fits a piped
    /// terminal of 100 columns with four targets, the Markdown report has it under the
    /// test, and the JSON export carries it while the CSV rows stay flat.
    #[test]
    fn the_breakdown_is_shown_under_each_test_and_exported() {
        let base = timed_runs(1.0);
        let slower = timed_runs(1.9);
        let mut combos = with_relatives(vec![
            combo("unix (delete)", 0, &[1.0, 1.1, 1.2], false),
            combo("io_uring (delete)", 0, &[1.0, 1.1, 1.2], true),
            combo("unix (wal)", 2, &[1.0, 1.1, 1.2], false),
            combo(
                "io_uring?uring_write_behind=off (wal)",
                2,
                &[1.0, 1.1, 1.2],
                true,
            ),
        ]);
        for (index, combo) in combos.iter_mut().enumerate() {
            combo.breakdown = match index {
                0 | 2 => breakdown::of(&base, None),
                _ => breakdown::of(&slower, Some(&base)),
            };
        }
        let test = TestResult {
            number: 16,
            name: "DROP TABLE",
            combos,
            unfair: vec![],
        };
        let rendered = breakdown_table(&test, Output::Piped).unwrap().to_string();
        assert_fits_piped(&rendered);
        for part in ["xOpen", "xUnfetch", breakdown::OUTSIDE, breakdown::WHOLE] {
            assert!(rendered.contains(part), "{part}: {rendered}");
        }
        assert!(rendered.contains("×100"), "{rendered}");

        let markdown = markdown(&[], std::slice::from_ref(&test), &[]);
        let table_at = markdown.find(&format!("### {BREAKDOWN_TITLE}")).unwrap();
        assert!(markdown[..table_at].contains("## Test 16: DROP TABLE"));
        assert!(markdown[table_at..].contains(BREAKDOWN_NOTE));

        let info = RunInfo {
            synchronous: "full".into(),
            mode: "text".into(),
            scale: 1.0,
            cache: "hot".into(),
        };
        let report = report(&[], std::slice::from_ref(&test), &info, &[], "unix");
        let json = serde_json::to_string(report.json_items()).unwrap();
        let items: Vec<SpeedJson> = serde_json::from_str(&json).unwrap();
        let shares = items[1].breakdown.as_ref().unwrap();
        assert_eq!(shares.len(), 21 + 2);
        assert!(shares.iter().all(|s| s.difference_s.unwrap() > 0.0));
        assert!(items[0].breakdown.as_ref().unwrap()[0]
            .difference_s
            .is_none());
        // Records read back from the JSON as before, and the CSV has no breakdown.
        let records: Vec<SpeedRecord> = serde_json::from_str(&json).unwrap();
        let (read, written) = (&records[1], &report.csv_rows()[1]);
        assert_eq!(
            (
                &read.target,
                &read.journal,
                read.paired_median,
                &read.checksum
            ),
            (
                &written.target,
                &written.journal,
                written.paired_median,
                &written.checksum
            )
        );
        let mut csv = csv::Writer::from_writer(Vec::new());
        for row in report.csv_rows() {
            csv.serialize(row).unwrap();
        }
        let csv = String::from_utf8(csv.into_inner().unwrap()).unwrap();
        assert!(!csv.contains("xRead"), "{csv}");
    }
}
