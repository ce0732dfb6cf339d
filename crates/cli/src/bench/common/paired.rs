//! The one statistics path of a row of results paired with its baseline's runs of the
//! same rounds (`speed`, `cold`, `concurrency`): the summary of its samples, the ratio of
//! its mean to the baseline's, and the run-by-run ratios with their interval
//! ([`crate::report::stats`] has the formulas).

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
}
