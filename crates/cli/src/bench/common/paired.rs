//! The one statistics path of a row of results paired with its baseline's runs of the
//! same rounds (`speed`, `cold`, `concurrency`): the summary of its samples, the ratio of
//! its mean to the baseline's, and the run-by-run ratios with their interval
//! ([`crate::report::stats`] has the formulas).

use crate::report::chart::{BarChart, Series};
use crate::report::stats::{self, PairedRatio, Relative, Summary};

/// One row's samples, summarised and compared with the baseline's.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    pub summary: Summary,
    /// Mean ÷ the baseline's mean; exactly 1, with no error of its own, for the baseline
    /// itself (as hyperfine).
    pub relative: Option<Relative>,
    /// The run-by-run ratios to the baseline's runs of the same rounds; `None` for the
    /// baseline itself.
    pub paired: Option<PairedRatio>,
}

impl Compared {
    /// `samples`, one per measured round, against `baseline`'s of the same rounds (`None`:
    /// nothing to compare with); `is_baseline` for the baseline's own row. `None` when
    /// `samples` has no valid sample.
    pub fn of(samples: &[f64], baseline: Option<&[f64]>, is_baseline: bool) -> Option<Compared> {
        let summary = Summary::from_samples(samples)?;
        let (relative, paired) = match baseline {
            _ if is_baseline => (
                Some(Relative {
                    ratio: 1.0,
                    error: None,
                }),
                None,
            ),
            Some(base) => (
                Summary::from_samples(base).and_then(|base| summary.relative_to(&base)),
                stats::paired_ratio(samples, base),
            ),
            None => (None, None),
        };
        Some(Compared {
            summary,
            relative,
            paired,
        })
    }
}

/// One row of a case for [`relative_time_chart`].
pub struct ChartRow {
    pub label: String,
    pub is_baseline: bool,
    pub relative: Option<Relative>,
}

/// The time of every row relative to its baseline, per case (`categories`, one list of
/// rows each) and combination (a series each, in the order they first appear); the
/// baselines are the dashed line at 1.0 rather than bars.
pub fn relative_time_chart(
    benchmark: &str,
    baseline: &str,
    categories: Vec<String>,
    cases: &[Vec<ChartRow>],
) -> BarChart {
    let mut labels: Vec<&str> = Vec::new();
    for row in cases.iter().flatten().filter(|row| !row.is_baseline) {
        if !labels.contains(&row.label.as_str()) {
            labels.push(&row.label);
        }
    }
    let series = labels
        .into_iter()
        .map(|label| {
            let relatives: Vec<Option<Relative>> = cases
                .iter()
                .map(|rows| rows.iter().find(|row| row.label == label)?.relative)
                .collect();
            Series {
                name: label.to_string(),
                values: relatives.iter().map(|r| r.map(|r| r.ratio)).collect(),
                errors: relatives.iter().map(|r| r.and_then(|r| r.error)).collect(),
            }
        })
        .collect();
    BarChart {
        title: format!(
            "bench {benchmark}: time relative to {baseline} in the same journal mode (lower is faster)"
        ),
        y_label: format!("time / {baseline} time"),
        categories,
        series,
        reference_line: Some(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_compare_with_their_baseline_and_the_baseline_is_exactly_one() {
        let base = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95];
        let half: Vec<f64> = base.iter().map(|t| t / 2.0).collect();
        let row = Compared::of(&half, Some(&base), false).unwrap();
        assert!((row.relative.unwrap().ratio - 0.5).abs() < 1e-12);
        assert!(row.relative.unwrap().error.is_some());
        assert!((row.paired.unwrap().median - 0.5).abs() < 1e-12);
        let itself = Compared::of(&base, Some(&base), true).unwrap();
        assert_eq!(
            itself.relative,
            Some(Relative {
                ratio: 1.0,
                error: None
            })
        );
        assert_eq!(itself.paired, None);
        let alone = Compared::of(&half, None, false).unwrap();
        assert_eq!((alone.relative, alone.paired), (None, None));
        assert_eq!(Compared::of(&[f64::NAN], None, false), None);
    }

    #[test]
    fn the_chart_has_a_series_per_non_baseline_row_in_order_of_appearance() {
        let row = |label: &str, is_baseline: bool, ratio: Option<f64>| ChartRow {
            label: label.into(),
            is_baseline,
            relative: ratio.map(|ratio| Relative { ratio, error: None }),
        };
        let cases = vec![
            vec![row("unix", true, Some(1.0)), row("b", false, Some(0.5))],
            vec![
                row("unix", true, Some(1.0)),
                row("a", false, None),
                row("b", false, Some(2.0)),
            ],
        ];
        let chart = relative_time_chart("x", "unix", vec!["1".into(), "2".into()], &cases);
        let names: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(chart.series[0].values, [Some(0.5), Some(2.0)]);
        assert_eq!(chart.series[1].values, [None, None]);
        assert_eq!(chart.y_label, "time / unix time");
        assert_eq!(chart.reference_line, Some(1.0));
    }
}
