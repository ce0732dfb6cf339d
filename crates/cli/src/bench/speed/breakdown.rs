//! `bench speed --breakdown`: where each target's time goes, by VFS method.
//!
//! Every file target's VFS is opened through the counting wrapper, which then times each
//! call of a file method and of xOpen, xDelete and xAccess (`counting_vfs`). Per test and
//! target, each method's time per run is summarised by its median and compared run by
//! run with the baseline's time in the same method: the paired median difference and its
//! 95 % interval, as the main table pairs whole runs. What is left of a run is "outside
//! the VFS": SQLite's and the benchmark's work between the timed calls (and the
//! wrapper's bookkeeping, the same for every target). A method can take more time under
//! one VFS only because another does its work later (write-behind's writes show in
//! xFileControl or xSync instead of xWrite): the differences are read together. Run by
//! run the parts add up to the whole test; their medians only roughly.

use serde::{Deserialize, Serialize};

use crate::counting_vfs::{Method, MethodTimes};
use crate::report::stats::{self, PairedDifference};

/// The part of a run that is not in any VFS method.
pub const OUTSIDE: &str = "outside the VFS";
/// The whole timed body.
pub const WHOLE: &str = "whole test";

/// One line of a breakdown: a VFS method, the time outside the VFS, or the whole test.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// `xRead`, …, [`OUTSIDE`], [`WHOLE`].
    pub part: &'static str,
    /// Calls per run (mean over the runs), for a method.
    pub calls_per_run: Option<f64>,
    /// Median over the runs of the time in this part.
    pub median_s: f64,
    /// Against the baseline's time in the same part, run by run; `None` for the baseline
    /// itself, and without a timed baseline.
    pub difference: Option<PairedDifference>,
}

/// One run's elapsed time and its time per VFS method.
pub type TimedRun = (f64, MethodTimes);

/// Where a part is listed: the methods in [`Method::ALL`]'s order, then [`OUTSIDE`] and
/// [`WHOLE`].
pub fn rank(part: &str) -> usize {
    match part {
        OUTSIDE => Method::ALL.len(),
        WHOLE => Method::ALL.len() + 1,
        method => Method::ALL
            .iter()
            .position(|m| m.name() == method)
            .unwrap_or(Method::ALL.len()),
    }
}

/// The breakdown of `runs` against `baseline`'s runs of the same rounds (`None` for the
/// baseline itself): every method either called, then the time outside the VFS and the
/// whole test. `None` without runs.
pub fn of(runs: &[TimedRun], baseline: Option<&[TimedRun]>) -> Option<Vec<Share>> {
    if runs.is_empty() {
        return None;
    }
    let called = |set: &[TimedRun], method: Method| {
        set.iter()
            .any(|(_, times)| times.calls[method as usize] > 0)
    };
    let mut parts: Vec<(&'static str, Option<Method>)> = Method::ALL
        .into_iter()
        .filter(|&method| called(runs, method) || baseline.is_some_and(|b| called(b, method)))
        .map(|method| (method.name(), Some(method)))
        .collect();
    parts.push((OUTSIDE, None));
    parts.push((WHOLE, None));
    let seconds = |set: &[TimedRun], part: &str, method: Option<Method>| -> Vec<f64> {
        set.iter()
            .map(|(elapsed_s, times)| match method {
                Some(method) => times.ns[method as usize] as f64 * 1e-9,
                None if part == OUTSIDE => elapsed_s - times.total_ns() as f64 * 1e-9,
                None => *elapsed_s,
            })
            .collect()
    };
    Some(
        parts
            .into_iter()
            .map(|(part, method)| {
                let mine = seconds(runs, part, method);
                Share {
                    part,
                    calls_per_run: method.map(|method| {
                        runs.iter()
                            .map(|(_, times)| times.calls[method as usize] as f64)
                            .sum::<f64>()
                            / runs.len() as f64
                    }),
                    median_s: stats::median(&mine),
                    difference: baseline.and_then(|base| {
                        stats::paired_difference(&mine, &seconds(base, part, method))
                    }),
                }
            })
            .collect(),
    )
}

/// One part of a breakdown in the JSON export.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShareRecord {
    pub part: String,
    pub calls_per_run: Option<f64>,
    pub median_s: f64,
    /// Paired median difference from the baseline in the same part (seconds).
    pub difference_s: Option<f64>,
    pub difference_ci_low_s: Option<f64>,
    pub difference_ci_high_s: Option<f64>,
}

pub fn records(shares: &[Share]) -> Vec<ShareRecord> {
    shares
        .iter()
        .map(|share| ShareRecord {
            part: share.part.to_string(),
            calls_per_run: share.calls_per_run,
            median_s: share.median_s,
            difference_s: share.difference.map(|d| d.median),
            difference_ci_low_s: share
                .difference
                .and_then(|d| d.interval)
                .map(|(low, _)| low),
            difference_ci_high_s: share
                .difference
                .and_then(|d| d.interval)
                .map(|(_, high)| high),
        })
        .collect()
}

/// The cell of one part of one target: `1.11 ms ×9` (median and calls) for a baseline,
/// `+22 µs [+2, +41]` (the difference from the baseline and its interval) for the
/// others, `–` where the target never made the call.
pub fn cell(share: Option<&Share>) -> String {
    let Some(share) = share else {
        return "–".into();
    };
    match share.difference {
        None => {
            let time = stats::format_seconds(share.median_s);
            match share.calls_per_run {
                Some(calls) => format!("{time} ×{}", format_calls(calls)),
                None => time,
            }
        }
        Some(difference) => signed_with_interval(difference),
    }
}

/// Calls per run: whole when they are (the same calls every run), else one decimal.
fn format_calls(calls: f64) -> String {
    if calls.fract() == 0.0 {
        format!("{calls:.0}")
    } else {
        format!("{calls:.1}")
    }
}

/// `+22 µs [+2, +41]`: the median and its interval in the unit of the largest bound,
/// whole above 10 of it, else to one decimal.
fn signed_with_interval(difference: PairedDifference) -> String {
    let largest = difference
        .interval
        .map_or(difference.median.abs(), |(low, high)| {
            difference.median.abs().max(low.abs()).max(high.abs())
        });
    let (scale, unit) = if largest >= 1.0 {
        (1.0, "s")
    } else if largest >= 1e-3 {
        (1e3, "ms")
    } else {
        (1e6, "µs")
    };
    let decimals = usize::from(largest * scale < 10.0);
    // `+ 0.0` turns a negative zero into a positive one.
    let signed = |value: f64| format!("{:+.*}", decimals, value * scale + 0.0);
    match difference.interval {
        Some((low, high)) => format!(
            "{} {unit} [{}, {}]",
            signed(difference.median),
            signed(low),
            signed(high)
        ),
        None => format!("{} {unit}", signed(difference.median)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(elapsed_s: f64, parts: &[(Method, u64, u64)]) -> TimedRun {
        let mut times = MethodTimes::default();
        for &(method, calls, ns) in parts {
            times.calls[method as usize] = calls;
            times.ns[method as usize] = ns;
        }
        (elapsed_s, times)
    }

    /// Each method's time and calls are summarised per run, the rest of the run is
    /// outside the VFS, and every part is paired with the baseline's same part.
    #[test]
    fn parts_are_summarised_and_paired_with_the_baseline() {
        let baseline: Vec<TimedRun> = (0..8)
            .map(|round| {
                let drift = round as u64 * 1_000;
                run(
                    0.010 + drift as f64 * 1e-9,
                    &[
                        (Method::Read, 89, 50_000 + drift),
                        (Method::Write, 48, 70_000),
                    ],
                )
            })
            .collect();
        // Reads 7 µs slower, writes 20 µs faster, the work between the calls 1 µs slower.
        let target: Vec<TimedRun> = baseline
            .iter()
            .map(|(elapsed_s, times)| {
                let mut times = *times;
                times.ns[Method::Read as usize] += 7_000;
                times.ns[Method::Write as usize] -= 20_000;
                times.calls[Method::Sync as usize] = 1;
                (elapsed_s - 12e-6, times)
            })
            .collect();
        let shares = of(&target, Some(&baseline)).unwrap();
        let parts: Vec<&str> = shares.iter().map(|s| s.part).collect();
        assert_eq!(parts, ["xRead", "xWrite", "xSync", OUTSIDE, WHOLE]);
        let difference = |part: &str| {
            shares
                .iter()
                .find(|s| s.part == part)
                .unwrap()
                .difference
                .unwrap()
                .median
        };
        assert!((difference("xRead") - 7e-6).abs() < 1e-12);
        assert!((difference("xWrite") + 20e-6).abs() < 1e-12);
        assert!((difference(OUTSIDE) - 1e-6).abs() < 1e-12);
        assert!((difference(WHOLE) + 12e-6).abs() < 1e-12);
        assert_eq!(shares[0].calls_per_run, Some(89.0));
        assert_eq!(shares[2].calls_per_run, Some(1.0));
        assert_eq!(shares[3].calls_per_run, None);
        assert!((shares[1].median_s - 50e-6).abs() < 1e-12);

        // The baseline shows its own times, and only the methods it called.
        let itself = of(&baseline, None).unwrap();
        assert_eq!(itself.len(), 4);
        assert!(itself.iter().all(|s| s.difference.is_none()));
        assert_eq!(cell(itself.first()), "53.5 µs ×89");
        assert_eq!(cell(None), "–");
        assert_eq!(cell(shares.first()), "+7.0 µs [+7.0, +7.0]");
        assert_eq!(cell(shares.get(1)), "-20 µs [-20, -20]");
        assert_eq!(of(&[], None), None);
    }

    /// Parts are listed in the wrapper's method order, whichever target called what,
    /// with the two summary rows last.
    #[test]
    fn parts_rank_in_method_order_then_the_summaries() {
        let mut parts = vec![WHOLE, "xShmBarrier", OUTSIDE, "xSync", "xOpen", "xRead"];
        parts.sort_by_key(|part| rank(part));
        assert_eq!(
            parts,
            ["xOpen", "xRead", "xSync", "xShmBarrier", OUTSIDE, WHOLE]
        );
        for (index, method) in Method::ALL.into_iter().enumerate() {
            assert_eq!(rank(method.name()), index);
        }
    }

    #[test]
    fn differences_take_the_unit_of_their_largest_bound() {
        let cell_of = |median: f64, interval: Option<(f64, f64)>| {
            signed_with_interval(PairedDifference { median, interval })
        };
        assert_eq!(cell_of(-2.26e-5, None), "-23 µs");
        assert_eq!(cell_of(-2.26e-6, None), "-2.3 µs");
        assert_eq!(cell_of(8e-4, Some((-2e-4, 1.2e-3))), "+0.8 ms [-0.2, +1.2]");
        assert_eq!(cell_of(1.5, Some((1.0, 2.0))), "+1.5 s [+1.0, +2.0]");
        assert_eq!(cell_of(-0.0, Some((-1e-8, 0.0))), "+0.0 µs [-0.0, +0.0]");
    }

    #[test]
    fn records_keep_every_number() {
        let shares = vec![Share {
            part: "xSync",
            calls_per_run: Some(9.0),
            median_s: 1.1e-3,
            difference: Some(PairedDifference {
                median: 2e-5,
                interval: Some((1e-5, 3e-5)),
            }),
        }];
        let [record] = records(&shares).try_into().unwrap();
        assert_eq!(record.part, "xSync");
        assert_eq!(record.calls_per_run, Some(9.0));
        assert_eq!(record.difference_s, Some(2e-5));
        assert_eq!(record.difference_ci_low_s, Some(1e-5));
        assert_eq!(record.difference_ci_high_s, Some(3e-5));
    }
}
