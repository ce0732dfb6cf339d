//! Results of `bench cold`: per case (a test in a cache state) and target × journal mode,
//! the time over the runs (mean ± σ), its ratio to the baseline (of the means, and the
//! paired median with its 95 % interval), the bytes read from the device and their ratio
//! to the baseline's; the terminal tables, the verdict, and the exports.

use anyhow::{bail, Context, Result};
use comfy_table::Table;
use serde::{Deserialize, Serialize};
use sqlite_uring::IoStats;

use super::workload::{RunOutcome, Test};
use crate::bench::common::checksum;
use crate::bench::common::counts;
use crate::bench::common::export::{Markdown, Report};
use crate::bench::common::pagecache::CacheState;
use crate::bench::common::paired::{relative_time_chart, ChartRow, Compared};
use crate::bench::common::settings::JournalMode;
use crate::bench::common::verdict::{
    conclusion_line, first_appearances, geometric_mean, Comparison,
};
use crate::report::chart::BarChart;
use crate::report::export::markdown_table;
use crate::report::stats::{
    self, format_bytes, format_mean_stddev_compact, format_seconds, PairedRatio, Relative, Summary,
    Verdict, Warning,
};
use crate::report::table;

/// One test in one cache state: a table of results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub test: Test,
    pub cache: CacheState,
}

impl Case {
    /// `scan-rowid · cold: full scan of the rowid table r (pages evicted first)`
    pub fn title(&self) -> String {
        let state = match self.cache {
            CacheState::Cold => "pages evicted before the timed part",
            CacheState::Hot => "pages read into the page cache first",
        };
        format!(
            "{} · {}: {} ({state})",
            self.test.name(),
            self.cache.name(),
            self.test.describe()
        )
    }
}

/// One target in one journal mode: a line of the result tables.
#[derive(Clone, Debug)]
pub struct Combo {
    pub target: String,
    pub vfs: String,
    pub journal: JournalMode,
    /// Whether the target's VFS counts its engine's work (`kernel_entries`): this
    /// project's VFS only.
    pub engine_counted: bool,
}

impl Combo {
    pub fn label(&self) -> String {
        format!("{} ({})", self.target, self.journal.name())
    }
}

/// The measured runs of one combo in one case.
#[derive(Clone, Debug)]
pub struct ComboResult {
    pub combo: Combo,
    pub summary: Summary,
    pub cpu_mean_s: f64,
    /// Bytes read from the device per run (`/proc/self/io` read_bytes).
    pub read_bytes: Summary,
    /// Mean bytes read ÷ the baseline's mean (`None` for the baseline, or when the
    /// baseline read nothing).
    pub read_relative: Option<f64>,
    pub checksum: u64,
    /// VFS calls per run (mean).
    pub io: Option<IoStats>,
    /// Pages still cached right after the eviction, mean over the (cold) runs.
    pub resident_after_evict_pages: Option<f64>,
    pub warnings: Vec<Warning>,
    pub is_baseline: bool,
    pub relative: Option<Relative>,
    pub paired: Option<PairedRatio>,
}

/// Everything measured in one case.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub case: Case,
    pub rows: Vec<ComboResult>,
}

/// The results of one case from the outcomes of each combo (in round order), each
/// paired with the baseline target's in the same journal mode. Every run must have
/// returned the same results.
pub fn summarise(
    case: Case,
    combos: &[Combo],
    outcomes: &[Vec<RunOutcome>],
    baseline: &str,
) -> Result<CaseResult> {
    check_checksums(&case, combos, outcomes)?;
    let baseline_of = |combo: &Combo| {
        combos
            .iter()
            .position(|c| c.target == baseline && c.journal == combo.journal)
    };
    let times = |runs: &[RunOutcome]| -> Vec<f64> { runs.iter().map(|o| o.elapsed_s).collect() };
    let bytes =
        |runs: &[RunOutcome]| -> Vec<f64> { runs.iter().map(|o| o.read_bytes as f64).collect() };
    let mut rows = Vec::new();
    for (index, (combo, runs)) in combos.iter().zip(outcomes).enumerate() {
        let samples = times(runs);
        let base = baseline_of(combo);
        let is_baseline = base == Some(index);
        let base_times = base.map(|b| times(&outcomes[b]));
        let compared =
            Compared::of(&samples, base_times.as_deref(), is_baseline).with_context(|| {
                format!("{} on {} has no valid timing", case.title(), combo.label())
            })?;
        let read_bytes = Summary::from_samples(&bytes(runs))
            .with_context(|| format!("{} on {} has no read count", case.title(), combo.label()))?;
        let read_relative = base
            .filter(|&b| b != index)
            .and_then(|b| Summary::from_samples(&bytes(&outcomes[b])))
            .filter(|b| b.mean > 0.0)
            .map(|b| read_bytes.mean / b.mean);
        let resident: Vec<f64> = runs
            .iter()
            .filter_map(|o| o.resident_after_evict_pages.map(|p| p as f64))
            .collect();
        rows.push(ComboResult {
            combo: combo.clone(),
            summary: compared.summary,
            cpu_mean_s: runs.iter().map(|o| o.cpu_s).sum::<f64>() / runs.len().max(1) as f64,
            read_bytes,
            read_relative,
            checksum: runs.first().map_or(0, |o| o.checksum),
            io: counts::mean(runs.iter().map(|o| o.io)),
            resident_after_evict_pages: (!resident.is_empty())
                .then(|| resident.iter().sum::<f64>() / resident.len() as f64),
            warnings: stats::warnings(&samples),
            is_baseline,
            relative: compared.relative,
            paired: compared.paired,
        });
    }
    Ok(CaseResult { case, rows })
}

/// Every run of every combo must have seen the same rows (and VACUUM INTO written a file
/// of the same size, CREATE INDEX left the same page count).
fn check_checksums(case: &Case, combos: &[Combo], outcomes: &[Vec<RunOutcome>]) -> Result<()> {
    let runs = combos.iter().zip(outcomes).flat_map(|(combo, runs)| {
        runs.iter()
            .map(move |o| (combo.label(), format!("{:016x}", o.checksum)))
    });
    match checksum::mismatch(runs) {
        None => Ok(()),
        Some(listing) => bail!(
            "CHECKSUM MISMATCH in {}: the targets returned different results from the same \
             database, so at least one storage layer is wrong and no timing of it can be \
             trusted. Checksums per run: {listing}",
            case.title(),
        ),
    }
}

fn relative_cell(row: &ComboResult) -> String {
    if row.is_baseline {
        return "baseline".into();
    }
    row.relative.map_or_else(|| "–".into(), |r| r.display())
}

fn paired_cell(row: &ComboResult) -> String {
    row.paired.map_or_else(|| "–".into(), |p| p.display())
}

fn read_cell(row: &ComboResult) -> String {
    format_bytes(row.read_bytes.mean.round() as u64)
}

fn read_relative_cell(row: &ComboResult) -> String {
    if row.is_baseline {
        return "baseline".into();
    }
    row.read_relative
        .map_or_else(|| "–".into(), |r| format!("{r:.2}"))
}

fn xread_cell(row: &ComboResult) -> String {
    row.io
        .map_or_else(|| "–".into(), |c| c.read_calls.to_string())
}

/// The columns of the terminal table: what decides a comparison, narrow enough for a
/// 100-column terminal. The rest is in the exports.
const TERMINAL_HEADERS: [&str; 6] = [
    "Command",
    "Mean ± σ",
    "Paired [95 % CI]",
    "Device read",
    "Read ÷ base",
    "xRead",
];

/// What the terminal table leaves to the exports.
pub const TERMINAL_OMITS: &str = "ratio of the means, min, max, CPU time, VFS bytes and pages \
     left cached after eviction: --export-markdown or --export-json";

fn terminal_rows(result: &CaseResult) -> Vec<Vec<String>> {
    result
        .rows
        .iter()
        .map(|row| {
            vec![
                row.combo.label(),
                format_mean_stddev_compact(&row.summary),
                if row.is_baseline {
                    "baseline".into()
                } else {
                    paired_cell(row)
                },
                read_cell(row),
                read_relative_cell(row),
                xread_cell(row),
            ]
        })
        .collect()
}

pub fn terminal_table(result: &CaseResult, output: table::Output) -> Table {
    table::new(&TERMINAL_HEADERS, &terminal_rows(result), 1, output)
}

const HEADERS: [&str; 13] = [
    "Command",
    "Mean ± σ",
    "Min",
    "Max",
    "Relative",
    "Paired [95 % CI]",
    "CPU",
    "Device read",
    "Read ÷ base",
    "xRead",
    "VFS bytes read",
    "Written (VFS)",
    "Cached after eviction",
];

fn rows(result: &CaseResult) -> Vec<Vec<String>> {
    result
        .rows
        .iter()
        .map(|row| {
            vec![
                row.combo.label(),
                format_mean_stddev_compact(&row.summary),
                format_seconds(row.summary.min),
                format_seconds(row.summary.max),
                relative_cell(row),
                paired_cell(row),
                format_seconds(row.cpu_mean_s),
                read_cell(row),
                read_relative_cell(row),
                xread_cell(row),
                row.io
                    .map_or_else(|| "–".into(), |c| format_bytes(c.bytes_read)),
                row.io
                    .map_or_else(|| "–".into(), |c| format_bytes(c.bytes_written)),
                row.resident_after_evict_pages
                    .map_or_else(|| "–".into(), |p| format!("{p:.0} pages")),
            ]
        })
        .collect()
}

/// Pages left cached after an eviction, per run, above which the eviction is reported
/// as not having worked.
const LINGERING_PAGES: f64 = 16.0;

/// Warnings under a case's table.
pub fn notes(result: &CaseResult) -> Vec<String> {
    let mut notes = Vec::new();
    for row in &result.rows {
        if let Some(pages) = row
            .resident_after_evict_pages
            .filter(|p| *p > LINGERING_PAGES)
        {
            notes.push(format!(
                "warning: {}: {pages:.0} pages of the database stayed in the page cache after \
                 the eviction (a filesystem that keeps them, such as tmpfs, or a process \
                 mapping the file): these runs were not cold",
                row.combo.label()
            ));
        }
    }
    let warned: Vec<String> = result
        .rows
        .iter()
        .filter(|row| !row.warnings.is_empty())
        .map(|row| {
            let shorts: Vec<String> = row.warnings.iter().map(Warning::short).collect();
            format!("{} ({})", row.combo.label(), shorts.join(", "))
        })
        .collect();
    if !warned.is_empty() {
        notes.push(format!("warning: {}", warned.join("; ")));
    }
    notes
}

/// The comparisons of every target but the baseline, per journal mode and cache state,
/// in the order the results list them, with each one's geometric mean of the paired
/// median time ratios and of the read ratios.
struct Found {
    comparison: Comparison,
    cache: CacheState,
    read_ratios: Vec<f64>,
}

fn comparisons(results: &[CaseResult], baseline: &str) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    for result in results {
        for row in result.rows.iter().filter(|r| r.combo.target != baseline) {
            let journal = row.combo.journal.name();
            let index = match found.iter().position(|f| {
                f.comparison.target == row.combo.target
                    && f.comparison.journal == journal
                    && f.cache == result.case.cache
            }) {
                Some(index) => index,
                None => {
                    found.push(Found {
                        comparison: Comparison::new(&row.combo.target, journal),
                        cache: result.case.cache,
                        read_ratios: vec![],
                    });
                    found.len() - 1
                }
            };
            let entry = &mut found[index];
            entry
                .comparison
                .add(result.case.test.number(), row.paired, false);
            if let Some(ratio) = row.read_relative.filter(|r| *r > 0.0 && r.is_finite()) {
                entry.read_ratios.push(ratio);
            }
        }
    }
    found
}

/// `scan-rowid, index-range`: the tests of a verdict line by name (their numbers are
/// those of `results`' tests).
fn test_names(results: &[CaseResult], numbers: &[u32]) -> String {
    let names: Vec<String> = numbers
        .iter()
        .map(|&n| {
            results
                .iter()
                .find(|r| r.case.test.number() == n)
                .map_or_else(|| n.to_string(), |r| r.case.test.name())
        })
        .collect();
    names.join(", ")
}

/// The closing verdict: per target, per journal mode and cache state, the tests on which
/// it was faster or slower than the baseline beyond the noise, then one conclusion per
/// cache state.
pub fn verdict(results: &[CaseResult], baseline: &str) -> Vec<String> {
    let found = comparisons(results, baseline);
    let mut lines = vec![
        format!(
            "Verdict against {baseline}, run by run: faster or slower where the 95 % interval of the"
        ),
        "median time ratio excludes 1; a side counts when it has more tests than chance gives;"
            .to_string(),
        "time ×: geometric mean over the tests of the median time ratio (below 1: faster);"
            .to_string(),
        format!(
            "read ×: geometric mean over the tests of the bytes read from the device ÷ {baseline}'s."
        ),
    ];
    if found.is_empty() {
        lines.push(format!(
            "  nothing to compare: --targets has no target besides {baseline}"
        ));
        return lines;
    }
    for target in first_appearances(found.iter().map(|f| f.comparison.target.as_str())) {
        lines.push(format!("  {target}"));
        let of_target: Vec<&Found> = found
            .iter()
            .filter(|f| f.comparison.target == target)
            .collect();
        for entry in &of_target {
            let c = &entry.comparison;
            let mut line = format!(
                "    {}",
                c.line(
                    &format!("{} · {}", c.journal, entry.cache.name()),
                    |numbers: &[u32]| test_names(results, numbers)
                )
            );
            if let Some(ratio) = geometric_mean(&entry.read_ratios) {
                line.push_str(&format!(" · read ×{ratio:.2}"));
            }
            lines.push(line);
        }
        for cache in [CacheState::Cold, CacheState::Hot] {
            let of_cache: Vec<&Comparison> = of_target
                .iter()
                .filter(|f| f.cache == cache)
                .map(|f| &f.comparison)
                .collect();
            if !of_cache.is_empty() {
                lines.push(format!(
                    "  => {}: {}",
                    cache.name(),
                    conclusion_line(target, baseline, &of_cache)
                ));
            }
        }
    }
    lines
}

/// One exported record: one test × cache state × target × journal mode. Flat, so CSV
/// can hold it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColdRecord {
    pub test: String,
    pub cache: String,
    pub target: String,
    pub vfs: String,
    pub journal: String,
    pub synchronous: String,
    /// The statement of a `--query` test (absent for the built-in tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The `--database` file (absent for the built database).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The database: its size in MiB and pages, the page size, the row pairs (0 for a
    /// `--database` file).
    pub database_mib: f64,
    pub database_pages: u64,
    pub page_size: u32,
    pub rows: u64,
    pub runs: usize,
    pub mean_s: f64,
    pub median_s: f64,
    pub stddev_s: Option<f64>,
    pub min_s: f64,
    pub max_s: f64,
    pub cpu_mean_s: f64,
    /// Bytes read from the device per run (`/proc/self/io` read_bytes over the timed
    /// part, every thread of the worker process), mean over the runs.
    pub read_bytes: u64,
    pub read_bytes_min: u64,
    pub read_bytes_max: u64,
    /// read_bytes ÷ the baseline's (same test, cache state and journal mode).
    pub read_bytes_relative: Option<f64>,
    pub baseline: String,
    /// mean ÷ baseline mean (> 1: slower than the baseline).
    pub relative: Option<f64>,
    pub relative_error: Option<f64>,
    pub paired_median: Option<f64>,
    pub paired_ci_low: Option<f64>,
    pub paired_ci_high: Option<f64>,
    /// `faster`, `slower`, `same` (beyond the noise), or null.
    pub verdict: Option<String>,
    pub checksum: String,
    /// VFS calls and bytes of the timed part (mean per run).
    pub read_calls: Option<u64>,
    pub vfs_bytes_read: Option<u64>,
    pub write_calls: Option<u64>,
    pub vfs_bytes_written: Option<u64>,
    pub kernel_entries: Option<u64>,
    /// Pages of the database still cached right after the eviction (cold), mean.
    pub resident_after_evict_pages: Option<f64>,
    pub warnings: String,
}

/// What every record shares: the database and the settings.
pub struct RecordInfo {
    pub synchronous: String,
    /// The `--database` file, if one was given.
    pub database: Option<String>,
    pub baseline: String,
    pub database_mib: f64,
    pub database_pages: u64,
    pub page_size: u32,
    pub rows: u64,
}

pub fn records(results: &[CaseResult], info: &RecordInfo) -> Vec<ColdRecord> {
    let mut records = Vec::new();
    for result in results {
        for row in &result.rows {
            let interval = row.paired.and_then(|p| p.interval);
            let io = row.io;
            records.push(ColdRecord {
                test: result.case.test.name(),
                cache: result.case.cache.name().into(),
                target: row.combo.target.clone(),
                vfs: row.combo.vfs.clone(),
                journal: row.combo.journal.name().into(),
                synchronous: info.synchronous.clone(),
                query: result.case.test.query().map(super::workload::one_line),
                database: info.database.clone(),
                database_mib: info.database_mib,
                database_pages: info.database_pages,
                page_size: info.page_size,
                rows: info.rows,
                runs: row.summary.runs,
                mean_s: row.summary.mean,
                median_s: row.summary.median,
                stddev_s: row.summary.stddev,
                min_s: row.summary.min,
                max_s: row.summary.max,
                cpu_mean_s: row.cpu_mean_s,
                read_bytes: row.read_bytes.mean.round() as u64,
                read_bytes_min: row.read_bytes.min as u64,
                read_bytes_max: row.read_bytes.max as u64,
                read_bytes_relative: row.read_relative,
                baseline: info.baseline.clone(),
                relative: row.relative.map(|r| r.ratio),
                relative_error: row.relative.and_then(|r| r.error),
                paired_median: row.paired.map(|p| p.median),
                paired_ci_low: interval.map(|(low, _)| low),
                paired_ci_high: interval.map(|(_, high)| high),
                verdict: row.paired.and_then(|p| p.verdict()).map(|v| {
                    match v {
                        Verdict::Below => "faster",
                        Verdict::Above => "slower",
                        Verdict::Straddles => "same",
                    }
                    .to_string()
                }),
                checksum: format!("{:016x}", row.checksum),
                read_calls: io.map(|c| c.read_calls),
                vfs_bytes_read: io.map(|c| c.bytes_read),
                write_calls: io.map(|c| c.write_calls),
                vfs_bytes_written: io.map(|c| c.bytes_written),
                kernel_entries: io
                    .filter(|_| row.combo.engine_counted)
                    .map(|c| c.kernel_entries),
                resident_after_evict_pages: row.resident_after_evict_pages,
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

/// Relative time per case (categories `1 cold`, `1 hot`, … by test number) and
/// non-baseline combo (series).
pub fn chart(results: &[CaseResult], baseline: &str) -> Result<BarChart, String> {
    if results
        .iter()
        .flat_map(|r| &r.rows)
        .all(|row| row.is_baseline)
    {
        return Err(format!("no target besides {baseline} to chart"));
    }
    let cases: Vec<Vec<ChartRow>> = results
        .iter()
        .map(|result| {
            result
                .rows
                .iter()
                .map(|row| ChartRow {
                    label: row.combo.label(),
                    is_baseline: row.is_baseline,
                    relative: row.relative,
                })
                .collect()
        })
        .collect();
    let categories = results
        .iter()
        .map(|r| format!("{} {}", r.case.test.number(), r.case.cache.name()))
        .collect();
    Ok(relative_time_chart("cold", baseline, categories, &cases))
}

/// The Markdown report: the header, the verdict, and a section per case.
pub fn markdown(header: &[String], results: &[CaseResult], verdict: &[String]) -> String {
    let mut out = Markdown::new("sqlite-uring bench cold", header);
    out.block("Verdict", "text", verdict);
    for result in results {
        out.section(
            &format!("{}. {}", result.case.test.number(), result.case.title()),
            &markdown_table(&HEADERS, &rows(result)),
        );
        out.notes(&notes(result));
    }
    out.finish()
}

/// Everything `bench cold` exports, once the run is over: `header` is the environment,
/// database and settings printed above the tables.
pub fn report(
    header: &[String],
    results: &[CaseResult],
    info: &RecordInfo,
    verdict: &[String],
) -> Report<ColdRecord, BarChart> {
    Report {
        records: records(results, info),
        markdown: markdown(header, results, verdict),
        chart: chart(results, &info.baseline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::cold::workload::ColdTest;
    use crate::report::table::{assert_fits_piped, Output};

    fn outcome(elapsed_s: f64, read_bytes: u64, checksum: u64) -> RunOutcome {
        RunOutcome {
            elapsed_s,
            cpu_s: elapsed_s / 2.0,
            read_bytes,
            checksum,
            io: Some(IoStats {
                read_calls: 1000,
                ..IoStats::default()
            }),
            resident_after_evict_pages: Some(0),
        }
    }

    fn combos() -> Vec<Combo> {
        let combo = |target: &str, journal| Combo {
            target: target.into(),
            vfs: target.into(),
            journal,
            engine_counted: target != "unix",
        };
        vec![
            combo("unix", JournalMode::Delete),
            combo("io_uring?uring_readahead=on", JournalMode::Delete),
            combo("unix", JournalMode::Wal),
            combo("io_uring?uring_readahead=on", JournalMode::Wal),
        ]
    }

    /// io_uring twice as fast with 1.5 times the reads in every round, in both modes.
    fn case_result(test: ColdTest, cache: CacheState, runs: usize) -> CaseResult {
        let base: Vec<RunOutcome> = (0..runs)
            .map(|i| outcome(1.0 + i as f64 * 0.01, 1 << 20, 7))
            .collect();
        let fast: Vec<RunOutcome> = (0..runs)
            .map(|i| outcome(0.5 + i as f64 * 0.01, 3 << 19, 7))
            .collect();
        let outcomes = vec![base.clone(), fast.clone(), base, fast];
        summarise(
            Case {
                test: Test::Builtin(test),
                cache,
            },
            &combos(),
            &outcomes,
            "unix",
        )
        .unwrap()
    }

    #[test]
    fn rows_pair_with_the_baseline_of_their_journal_mode() {
        let result = case_result(ColdTest::ScanRowid, CacheState::Cold, 10);
        let rows = &result.rows;
        assert!(rows[0].is_baseline && rows[2].is_baseline);
        assert_eq!(rows[0].relative.unwrap().ratio, 1.0);
        let fast = &rows[3];
        assert!(!fast.is_baseline);
        assert_eq!(fast.read_relative, Some(1.5));
        assert_eq!(fast.paired.unwrap().verdict(), Some(Verdict::Below));
        let records = records(
            std::slice::from_ref(&result),
            &RecordInfo {
                synchronous: "FULL".into(),
                database: None,
                baseline: "unix".into(),
                database_mib: 2.0,
                database_pages: 512,
                page_size: 4096,
                rows: 100,
            },
        );
        assert_eq!(records.len(), 4);
        assert_eq!(records[1].verdict.as_deref(), Some("faster"));
        assert_eq!(records[1].read_bytes, 3 << 19);
        assert_eq!(records[0].read_bytes_relative, None);
        let rendered = terminal_table(&result, Output::Piped).to_string();
        assert_fits_piped(&rendered);
        assert!(
            rendered.contains("1.50") && rendered.contains("baseline"),
            "{rendered}"
        );
    }

    #[test]
    fn differing_results_fail_loudly() {
        let outcomes = vec![
            vec![outcome(1.0, 0, 1)],
            vec![outcome(1.0, 0, 2)],
            vec![outcome(1.0, 0, 1)],
            vec![outcome(1.0, 0, 1)],
        ];
        let case = Case {
            test: Test::Builtin(ColdTest::PointLookups),
            cache: CacheState::Hot,
        };
        let message = summarise(case, &combos(), &outcomes, "unix")
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("CHECKSUM MISMATCH in point-lookups · hot"),
            "{message}"
        );
    }

    #[test]
    fn the_verdict_names_tests_per_journal_mode_and_cache_state() {
        let results: Vec<CaseResult> = ColdTest::ALL
            .iter()
            .flat_map(|&test| {
                [CacheState::Cold, CacheState::Hot].map(|cache| case_result(test, cache, 10))
            })
            .collect();
        let lines = verdict(&results, "unix");
        let joined = lines.join("\n");
        assert!(
            joined.contains(
                "    delete · cold: faster on scan-without-rowid, scan-rowid, index-range, \
                 create-index, integrity-check, vacuum-into, point-lookups · slower on no test \
                 · same on 0 of 7"
            ),
            "{joined}"
        );
        assert!(joined.contains("read ×1.50"), "{joined}");
        assert!(
            joined.contains(
                "  => cold: io_uring?uring_readahead=on is faster than unix in every journal mode measured."
            ),
            "{joined}"
        );
        assert!(joined.contains("  => hot: "), "{joined}");
        // Too few runs: no verdict, and the remedy.
        let few = vec![case_result(ColdTest::ScanRowid, CacheState::Cold, 3)];
        let joined = verdict(&few, "unix").join("\n");
        assert!(joined.contains("1 with too few runs"), "{joined}");
        assert!(joined.contains("rerun with --runs 6"), "{joined}");
        let chart = chart(&results, "unix").unwrap();
        assert_eq!(chart.categories.len(), 14);
        assert_eq!(chart.categories[0], "1 cold");
        assert_eq!(chart.series.len(), 2);
    }
}
