//! The closing verdict of a benchmark that pairs its runs with the baseline's (`speed`,
//! `cold`, `concurrency`): per target and group (journal mode, cache state, pattern …),
//! the items (tests, thread counts) on which it was faster or slower than the baseline
//! beyond the noise, and one line a person can act on, as hyperfine closes with "X ran
//! 1.23 ± 0.04 times faster than Y".
//!
//! "Beyond the noise" is the paired comparison's own rule: the 95 % interval of the
//! median run-by-run ratio (sign test, [`crate::report::stats::paired_ratio`]) lies
//! wholly below 1 (faster) or above it (slower). Where there is no difference, a test
//! still lands on one side by chance, at most 1 time in 40 per side and exactly as often
//! as the interval's rank gives for the number of runs (1 in 93 with 10 runs, 1 in 52 with
//! 40: [`crate::report::stats::chance_per_side`]), so over 16 tests one such call is
//! expected now and then from chance alone: a side counts towards the conclusion only
//! with more calls than chance makes in 95 % of suites ([`chance_limit`]).

use crate::report::stats::{self, PairedRatio, Verdict, PAIRED_CONFIDENCE};

/// What the items of one target in one group showed against the baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The target's name (`io_uring`), without the journal mode.
    pub target: String,
    /// The journal mode (or whatever else groups the items: `databases (wal) commits/s`).
    pub journal: String,
    /// Items (test numbers, N) whose paired interval says faster.
    pub faster: Vec<u32>,
    /// … slower.
    pub slower: Vec<u32>,
    /// … contains 1: no difference beyond the noise.
    pub same: Vec<u32>,
    /// Too few paired runs for an interval (fewer than 6).
    pub undecided: Vec<u32>,
    /// No ratio at all: a baseline run measured nothing to divide by.
    pub unpaired: Vec<u32>,
    /// The paired median ratios of the items, where positive and finite.
    pub medians: Vec<f64>,
    /// Paired medians left out of `medians` (zero: the target measured nothing where
    /// the baseline did; or not finite), said in [`Comparison::line`].
    pub medians_left_out: usize,
    /// The largest chance, over the decided items, that an item's interval lies wholly
    /// on one given side with no real difference (it depends on the runs it had).
    pub chance_per_side: f64,
}

impl Comparison {
    pub fn new(target: &str, journal: &str) -> Comparison {
        Comparison {
            target: target.to_string(),
            journal: journal.to_string(),
            faster: vec![],
            slower: vec![],
            same: vec![],
            undecided: vec![],
            unpaired: vec![],
            medians: vec![],
            medians_left_out: 0,
            chance_per_side: 0.0,
        }
    }

    /// Files `item` by its paired ratio (`None`: no ratio, a baseline run measured
    /// nothing to divide by; one without an interval: too few runs for one). The ratio
    /// is of times (below 1 is faster) unless `rates`: of operations per second (above 1
    /// is faster).
    pub fn add(&mut self, item: u32, paired: Option<PairedRatio>, rates: bool) {
        let Some(paired) = paired else {
            self.unpaired.push(item);
            return;
        };
        let faster = if rates {
            Verdict::Above
        } else {
            Verdict::Below
        };
        match paired.verdict() {
            Some(Verdict::Straddles) => self.same.push(item),
            Some(verdict) if verdict == faster => self.faster.push(item),
            Some(_) => self.slower.push(item),
            None => self.undecided.push(item),
        }
        if let Some(chance) = stats::chance_per_side(paired.pairs) {
            self.chance_per_side = self.chance_per_side.max(chance);
        }
        if paired.median > 0.0 && paired.median.is_finite() {
            self.medians.push(paired.median);
        } else {
            self.medians_left_out += 1;
        }
    }

    pub fn decided(&self) -> usize {
        self.faster.len() + self.slower.len() + self.same.len()
    }

    pub fn conclusion(&self) -> Conclusion {
        let decided = self.decided();
        if decided == 0 {
            return Conclusion::Undecided;
        }
        let limit = self.chance_limit();
        match (self.faster.len() > limit, self.slower.len() > limit) {
            (true, false) => Conclusion::Faster,
            (false, true) => Conclusion::Slower,
            (true, true) => Conclusion::Mixed,
            (false, false) => Conclusion::Same,
        }
    }

    /// The most calls on one side that chance alone makes among the decided items, in 95 %
    /// of suites ([`chance_limit`]).
    pub fn chance_limit(&self) -> usize {
        chance_limit(self.decided(), self.chance_per_side)
    }

    /// Geometric mean of the paired median ratios.
    pub fn typical_ratio(&self) -> Option<f64> {
        geometric_mean(&self.medians)
    }

    /// `delete: faster on tests 2, 5, 9 · slower on test 12 (within chance) · same on 12
    /// of 16 · time ×0.94`, `label` first, the items of a side written by `items`.
    pub fn line(&self, label: &str, items: impl Fn(&[u32]) -> String) -> String {
        let limit = self.chance_limit();
        let side = |found: &[u32]| {
            if found.is_empty() {
                return "no test".to_string();
            }
            let within = if found.len() <= limit {
                " (within chance)"
            } else {
                ""
            };
            format!("{}{within}", items(found))
        };
        let mut line = format!(
            "{label}: faster on {} · slower on {} · same on {} of {}",
            side(&self.faster),
            side(&self.slower),
            self.same.len(),
            self.decided() + self.undecided.len() + self.unpaired.len(),
        );
        if !self.undecided.is_empty() {
            line.push_str(&format!(
                " · {} with too few runs (need ≥ 6)",
                self.undecided.len()
            ));
        }
        if !self.unpaired.is_empty() {
            line.push_str(&format!(
                " · {} without a ratio (a baseline run measured nothing)",
                self.unpaired.len()
            ));
        }
        if let Some(ratio) = self.typical_ratio() {
            line.push_str(&format!(" · time ×{ratio:.2}"));
            if self.medians_left_out > 0 {
                line.push_str(&format!(
                    " (over {} of them: {} ratio(s) of 0 left out)",
                    self.medians.len(),
                    self.medians_left_out
                ));
            }
        }
        line
    }
}

/// The comparison of `target` in `journal` among `found`, added at the end if new: the
/// comparisons keep the order in which the results list them.
pub fn entry<'a>(
    found: &'a mut Vec<Comparison>,
    target: &str,
    journal: &str,
) -> &'a mut Comparison {
    let index = match found
        .iter()
        .position(|c| c.target == target && c.journal == journal)
    {
        Some(index) => index,
        None => {
            found.push(Comparison::new(target, journal));
            found.len() - 1
        }
    };
    &mut found[index]
}

/// `tests 1, 2` (`test 3` alone): test numbers as the verdict lists them.
pub fn test_numbers(numbers: &[u32]) -> String {
    let list = numbers
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match numbers.len() {
        1 => format!("test {list}"),
        _ => format!("tests {list}"),
    }
}

/// Geometric mean of `values`, `None` when there are none.
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty())
        .then(|| (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// What a comparison amounts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conclusion {
    /// Faster on more tests than chance explains, slower on no more than chance.
    Faster,
    Slower,
    /// Both: faster on some workloads, slower on others.
    Mixed,
    /// Neither side beyond chance.
    Same,
    /// No test had enough paired runs for an interval.
    Undecided,
}

/// The most calls on one side that chance alone makes, among `tests` tests without any
/// real difference, each landing on that side with probability `per_side`, in 95 % of
/// suites: the largest `k` with P(X ≥ k) > 5 % for X ~ Binomial(tests, per_side). A side
/// with more calls than this is a finding.
pub fn chance_limit(tests: usize, per_side: f64) -> usize {
    let p = per_side.clamp(0.0, (1.0 - PAIRED_CONFIDENCE) / 2.0);
    if tests == 0 || p == 0.0 {
        return 0;
    }
    // P(X = 0), then P(X = i) from P(X = i − 1).
    let mut term = (1.0 - p).powi(tests as i32);
    let mut at_least = 1.0; // P(X ≥ 0)
    for k in 0..tests {
        at_least -= term; // now P(X ≥ k + 1)
        if at_least <= 1.0 - PAIRED_CONFIDENCE {
            return k;
        }
        term *= (tests - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
    }
    tests
}

/// The one-line conclusion for `target` from its comparisons (one per journal mode).
pub fn conclusion_line(target: &str, baseline: &str, comparisons: &[&Comparison]) -> String {
    let phrase = |conclusion: Conclusion| match conclusion {
        Conclusion::Faster => format!("{target} is faster than {baseline}"),
        Conclusion::Slower => format!("{target} is slower than {baseline}"),
        Conclusion::Mixed => {
            format!("{target} is faster than {baseline} on some tests and slower on others")
        }
        Conclusion::Same => format!("{target} and {baseline} perform the same within the noise"),
        Conclusion::Undecided => format!(
            "no verdict on {target}: too few paired runs; rerun with --runs 6 or more (10 \
             gives most tests a verdict)"
        ),
    };
    let conclusions: Vec<Conclusion> = comparisons.iter().map(|c| c.conclusion()).collect();
    let journals = |wanted: Conclusion| -> Vec<&str> {
        comparisons
            .iter()
            .zip(&conclusions)
            .filter(|(_, c)| **c == wanted)
            .map(|(comparison, _)| comparison.journal.as_str())
            .collect()
    };
    match conclusions.first() {
        None => phrase(Conclusion::Undecided),
        Some(&first) if conclusions.iter().all(|c| *c == first) => {
            let modes = if comparisons.len() == 1 {
                format!("in journal mode {}", comparisons[0].journal)
            } else {
                "in every journal mode measured".to_string()
            };
            match first {
                Conclusion::Undecided => phrase(first),
                _ => format!("{} {modes}.", phrase(first)),
            }
        }
        Some(_) => {
            let mut parts = Vec::new();
            for (wanted, words) in [
                (Conclusion::Faster, "faster"),
                (Conclusion::Slower, "slower"),
                (Conclusion::Mixed, "faster on some tests, slower on others"),
                (Conclusion::Same, "the same within the noise"),
                (Conclusion::Undecided, "undecided (too few runs)"),
            ] {
                let modes = journals(wanted);
                if !modes.is_empty() {
                    parts.push(format!("{words} in {}", modes.join(" and ")));
                }
            }
            format!(
                "{target} against {baseline} depends on the journal mode: {}.",
                parts.join("; ")
            )
        }
    }
}

/// Each name once, in the order of its first appearance: the targets of a verdict.
pub fn first_appearances<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut found: Vec<&str> = Vec::new();
    for name in names {
        if !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_limit_is_what_chance_alone_gives_in_95_percent_of_suites() {
        let nominal = 1.0 / 40.0;
        // 16 tests at 1/40 per side: P(X ≥ 2) = 5.9 % > 5 %, P(X ≥ 3) = 0.7 %.
        assert_eq!(chance_limit(16, nominal), 2);
        // 32: P(X ≥ 3) = 4.5 % ≤ 5 %.
        assert_eq!(chance_limit(32, nominal), 2);
        // 1 test: P(X ≥ 1) = 2.5 %: a single call is a finding.
        assert_eq!(chance_limit(1, nominal), 0);
        assert_eq!(chance_limit(0, nominal), 0);
        // The exact rate of 10 runs (11/1024) and of 40 (1.92 %): over 16 tests
        // P(X ≥ 2) = 1.3 % and 3.7 %, so one call is chance and two are a finding.
        let ten = stats::chance_per_side(10).unwrap();
        let forty = stats::chance_per_side(40).unwrap();
        assert_eq!(chance_limit(16, ten), 1);
        assert_eq!(chance_limit(16, forty), 1);
        for tests in 1..200 {
            assert!(chance_limit(tests, forty) <= chance_limit(tests + 1, forty));
            assert!(chance_limit(tests, forty) <= chance_limit(tests, nominal));
        }
    }

    /// The limit follows the runs the items had: two slower tests of 16 are within chance
    /// at the nominal 1/40, a finding at 40 runs' exact rate.
    #[test]
    fn two_slower_tests_of_sixteen_count_at_forty_runs() {
        let mut forty = Comparison::new("io_uring", "delete");
        for test in 1..=16 {
            let (low, high) = match test {
                7 | 16 => (1.01, 1.03),
                _ => (0.99, 1.01),
            };
            forty.add(
                test,
                Some(PairedRatio {
                    median: (low + high) / 2.0,
                    interval: Some((low, high)),
                    pairs: 40,
                }),
                false,
            );
        }
        assert_eq!(forty.slower, [7, 16]);
        assert_eq!(forty.conclusion(), Conclusion::Slower);
        assert!(forty
            .line("delete", test_numbers)
            .contains("slower on tests 7, 16 · "));
    }

    #[test]
    fn rate_ratios_read_the_other_way_round() {
        let ratio = |low: f64, high: f64| {
            Some(PairedRatio {
                median: (low + high) / 2.0,
                interval: Some((low, high)),
                pairs: 10,
            })
        };
        let mut times = Comparison::new("io_uring", "wal");
        let mut rates = Comparison::new("io_uring", "wal");
        times.add(1, ratio(0.8, 0.9), false);
        times.add(2, ratio(1.1, 1.2), false);
        times.add(
            3,
            Some(PairedRatio {
                median: 1.0,
                interval: None,
                pairs: 3,
            }),
            false,
        );
        times.add(4, None, false);
        rates.add(1, ratio(0.8, 0.9), true);
        rates.add(2, ratio(1.1, 1.2), true);
        rates.add(3, ratio(0.9, 1.1), true);
        assert_eq!(
            (times.faster.clone(), times.slower.clone()),
            (vec![1], vec![2])
        );
        assert_eq!(times.undecided, [3]);
        assert_eq!(times.unpaired, [4]);
        assert_eq!(
            (rates.faster.clone(), rates.slower.clone()),
            (vec![2], vec![1])
        );
        assert_eq!(rates.same, [3]);
        assert_eq!(
            times.line("wal", test_numbers),
            "wal: faster on test 1 · slower on test 2 · same on 0 of 4 · 1 with too few runs \
             (need ≥ 6) · 1 without a ratio (a baseline run measured nothing) · time ×0.99"
        );
    }

    /// A target that measured nothing where the baseline did (a rate of 0) cannot enter
    /// the geometric mean; the line says the mean is over the others.
    #[test]
    fn a_zero_ratio_left_out_of_the_mean_is_said() {
        let mut rates = Comparison::new("io_uring", "databases (wal) commits/s");
        for (n, median) in [(1, 1.05), (2, 1.05), (4, 1.05), (64, 0.0)] {
            rates.add(
                n,
                Some(PairedRatio {
                    median,
                    interval: Some((median * 0.99, median * 1.01)),
                    pairs: 10,
                }),
                true,
            );
        }
        assert_eq!(rates.slower, [64]);
        assert_eq!(rates.medians_left_out, 1);
        let line = rates.line("databases", test_numbers);
        assert!(
            line.ends_with("time ×1.05 (over 3 of them: 1 ratio(s) of 0 left out)"),
            "{line}"
        );
    }
}
