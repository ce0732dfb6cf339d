//! The closing verdict of `bench speed`: per target and journal mode, the tests on which
//! it was faster or slower than the baseline beyond the noise, and one line a person can
//! act on, as hyperfine closes with "X ran 1.23 ± 0.04 times faster than Y".
//!
//! "Beyond the noise" is the paired comparison's own rule: the 95 % interval of the
//! median run-by-run ratio (sign test, [`crate::report::stats::paired_ratio`]) lies
//! wholly below 1 (faster) or above it (slower). Where there is no difference, a test
//! still lands on one side by chance up to 1 time in 40 per side, so over 16 tests one or
//! two such calls are expected from chance alone: a side counts towards the conclusion
//! only with more calls than chance makes in 95 % of suites ([`chance_limit`]).

use super::output::TestResult;
use crate::report::stats::{Verdict, PAIRED_CONFIDENCE};

/// What the tests of one target in one journal mode showed against the baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The target's name (`io_uring`), without the journal mode.
    pub target: String,
    pub journal: String,
    /// Test numbers whose paired interval lies wholly below 1.
    pub faster: Vec<u32>,
    /// … wholly above 1.
    pub slower: Vec<u32>,
    /// … contains 1: no difference beyond the noise.
    pub same: Vec<u32>,
    /// Too few paired runs for an interval (fewer than 6).
    pub undecided: Vec<u32>,
    /// Geometric mean over the tests of the paired median ratios (time ÷ baseline time).
    pub typical_ratio: Option<f64>,
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

/// Probability that a test without a real difference still lands on a given side.
const CHANCE_PER_SIDE: f64 = (1.0 - PAIRED_CONFIDENCE) / 2.0;

/// The most calls on one side that chance alone makes, among `tests` tests without any
/// real difference, in 95 % of suites: the largest `k` with P(X ≥ k) > 5 % for
/// X ~ Binomial(tests, 1/40). A side with more calls than this is a finding.
pub fn chance_limit(tests: usize) -> usize {
    let p = CHANCE_PER_SIDE;
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

impl Comparison {
    pub fn decided(&self) -> usize {
        self.faster.len() + self.slower.len() + self.same.len()
    }

    pub fn conclusion(&self) -> Conclusion {
        let decided = self.decided();
        if decided == 0 {
            return Conclusion::Undecided;
        }
        let limit = chance_limit(decided);
        match (self.faster.len() > limit, self.slower.len() > limit) {
            (true, false) => Conclusion::Faster,
            (false, true) => Conclusion::Slower,
            (true, true) => Conclusion::Mixed,
            (false, false) => Conclusion::Same,
        }
    }

    /// `delete: faster on tests 2, 5, 9 · slower on test 12 (within chance) · same on 12
    /// of 16 · time ×0.94`
    pub fn line(&self) -> String {
        let limit = chance_limit(self.decided());
        let side = |tests: &[u32]| {
            let numbers = tests
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let within = if !tests.is_empty() && tests.len() <= limit {
                " (within chance)"
            } else {
                ""
            };
            match tests.len() {
                0 => "no test".to_string(),
                1 => format!("test {numbers}{within}"),
                _ => format!("tests {numbers}{within}"),
            }
        };
        let mut line = format!(
            "{}: faster on {} · slower on {} · same on {} of {}",
            self.journal,
            side(&self.faster),
            side(&self.slower),
            self.same.len(),
            self.decided() + self.undecided.len(),
        );
        if !self.undecided.is_empty() {
            line.push_str(&format!(
                " · {} with too few runs (need ≥ 6)",
                self.undecided.len()
            ));
        }
        if let Some(ratio) = self.typical_ratio {
            line.push_str(&format!(" · time ×{ratio:.2}"));
        }
        line
    }
}

/// The comparisons of every target but the baseline and `:memory:` (the CPU floor, not
/// a storage choice), per journal mode, in the order the results list them.
pub fn comparisons(results: &[TestResult], baseline: &str) -> Vec<Comparison> {
    let mut found: Vec<Comparison> = Vec::new();
    for test in results {
        for combo in &test.combos {
            if combo.target == baseline || combo.vfs == ":memory:" {
                continue;
            }
            let Some(paired) = combo.paired else { continue };
            let index = match found
                .iter()
                .position(|c| c.target == combo.target && c.journal == combo.journal)
            {
                Some(index) => index,
                None => {
                    found.push(Comparison {
                        target: combo.target.clone(),
                        journal: combo.journal.clone(),
                        faster: vec![],
                        slower: vec![],
                        same: vec![],
                        undecided: vec![],
                        typical_ratio: None,
                    });
                    found.len() - 1
                }
            };
            let comparison = &mut found[index];
            match paired.verdict() {
                Some(Verdict::Below) => comparison.faster.push(test.number),
                Some(Verdict::Above) => comparison.slower.push(test.number),
                Some(Verdict::Straddles) => comparison.same.push(test.number),
                None => comparison.undecided.push(test.number),
            }
        }
    }
    for comparison in &mut found {
        let medians: Vec<f64> = results
            .iter()
            .flat_map(|t| &t.combos)
            .filter(|c| c.target == comparison.target && c.journal == comparison.journal)
            .filter_map(|c| c.paired.map(|p| p.median))
            .filter(|m| *m > 0.0 && m.is_finite())
            .collect();
        comparison.typical_ratio = (!medians.is_empty())
            .then(|| (medians.iter().map(|m| m.ln()).sum::<f64>() / medians.len() as f64).exp());
    }
    found
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

/// The closing summary: a title, one line per target × journal mode, and one conclusion
/// per target.
pub fn summary(results: &[TestResult], baseline: &str) -> Vec<String> {
    let comparisons = comparisons(results, baseline);
    let mut lines = vec![
        format!(
            "Verdict against {baseline}, run by run: faster or slower where the 95 % interval \
             of the"
        ),
        "median time ratio excludes 1; a side counts when it has more tests than chance gives;"
            .to_string(),
        "time ×: geometric mean over the tests of the median time ratio (below 1: faster)."
            .to_string(),
    ];
    if comparisons.is_empty() {
        lines.push(format!(
            "  nothing to compare: --targets has no storage target besides {baseline}"
        ));
        return lines;
    }
    for target in first_appearances(comparisons.iter().map(|c| c.target.as_str())) {
        let of_target: Vec<&Comparison> =
            comparisons.iter().filter(|c| c.target == target).collect();
        lines.push(format!("  {target}"));
        for comparison in &of_target {
            lines.push(format!("    {}", comparison.line()));
        }
        lines.push(format!(
            "  => {}",
            conclusion_line(target, baseline, &of_target)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::speed::output::ComboResult;
    use crate::bench::speed::workload::Checksum;
    use crate::report::stats::{PairedRatio, Summary};

    /// A result whose paired interval is `interval` (`None`: too few runs).
    fn combo(target: &str, journal: &str, interval: Option<(f64, f64)>) -> ComboResult {
        let vfs = if target == "memory" {
            ":memory:"
        } else {
            target
        };
        ComboResult {
            label: format!("{target} ({journal})"),
            target: target.into(),
            vfs: vfs.into(),
            journal: journal.into(),
            summary: Summary::from_samples(&[1.0, 1.0]).unwrap(),
            cpu_mean_s: 1.0,
            checksum: Checksum::default(),
            io: None,
            warnings: vec![],
            baseline: Some(0),
            paired: (target != "unix").then(|| PairedRatio {
                median: interval.map_or(1.0, |(low, high)| (low + high) / 2.0),
                interval,
                pairs: if interval.is_some() { 10 } else { 3 },
            }),
        }
    }

    const FASTER: Option<(f64, f64)> = Some((0.80, 0.95));
    const SLOWER: Option<(f64, f64)> = Some((1.05, 1.20));
    const SAME: Option<(f64, f64)> = Some((0.95, 1.05));

    /// 16 tests: io_uring in delete with the intervals `delete`, in wal with `wal`.
    fn suite(
        delete: impl Fn(u32) -> Option<(f64, f64)>,
        wal: impl Fn(u32) -> Option<(f64, f64)>,
    ) -> Vec<TestResult> {
        (1..=16)
            .map(|number| TestResult {
                number,
                name: "test",
                combos: vec![
                    combo("unix", "delete", None),
                    combo("memory", "memory", FASTER),
                    combo("io_uring", "delete", delete(number)),
                    combo("unix", "wal", None),
                    combo("io_uring", "wal", wal(number)),
                ],
                unfair: vec![],
            })
            .collect()
    }

    #[test]
    fn chance_limit_is_what_chance_alone_gives_in_95_percent_of_suites() {
        // 16 tests at 1/40 per side: P(X ≥ 2) = 5.9 % > 5 %, P(X ≥ 3) = 0.7 %.
        assert_eq!(chance_limit(16), 2);
        // 32: P(X ≥ 3) = 4.5 % ≤ 5 %.
        assert_eq!(chance_limit(32), 2);
        // 1 test: P(X ≥ 1) = 2.5 %: a single call is a finding.
        assert_eq!(chance_limit(1), 0);
        assert_eq!(chance_limit(0), 0);
        for tests in 1..200 {
            assert!(chance_limit(tests) <= chance_limit(tests + 1));
        }
    }

    #[test]
    fn faster_in_both_modes_is_a_verdict_with_the_tests_named() {
        let results = suite(
            |n| if n <= 5 { FASTER } else { SAME },
            |n| if n % 2 == 0 { FASTER } else { SAME },
        );
        let found = comparisons(&results, "unix");
        assert_eq!(found.len(), 2, "memory and the baseline are not compared");
        assert_eq!(found[0].journal, "delete");
        assert_eq!(found[0].faster, [1, 2, 3, 4, 5]);
        assert_eq!(found[0].same.len(), 11);
        assert_eq!(found[0].conclusion(), Conclusion::Faster);
        assert_eq!(found[1].conclusion(), Conclusion::Faster);
        let lines = summary(&results, "unix");
        assert!(
            lines.contains(
                &"    delete: faster on tests 1, 2, 3, 4, 5 · slower on no test · same on 11 of 16 \
                  · time ×0.96"
                    .to_string()
            ),
            "{lines:#?}"
        );
        assert_eq!(
            lines.last().unwrap(),
            "  => io_uring is faster than unix in every journal mode measured."
        );
    }

    #[test]
    fn calls_within_chance_conclude_no_difference() {
        // One test on each side: what chance gives over 16 tests.
        let results = suite(
            |n| match n {
                3 => FASTER,
                9 => SLOWER,
                _ => SAME,
            },
            |n| if n == 16 { SLOWER } else { SAME },
        );
        let found = comparisons(&results, "unix");
        assert_eq!(found[0].faster, [3]);
        assert_eq!(found[0].slower, [9]);
        assert!(
            found[0].line().starts_with(
                "delete: faster on test 3 (within chance) · slower on test 9 (within chance) \
                 · same on 14 of 16"
            ),
            "{}",
            found[0].line()
        );
        assert!(found.iter().all(|c| c.conclusion() == Conclusion::Same));
        let last = summary(&results, "unix").pop().unwrap();
        assert!(
            last.contains("io_uring and unix perform the same within the noise"),
            "{last}"
        );
    }

    #[test]
    fn modes_that_disagree_are_named_each() {
        let results = suite(
            |n| if n <= 4 { SLOWER } else { SAME },
            |n| match n {
                1..=3 => FASTER,
                4..=6 => SLOWER,
                _ => SAME,
            },
        );
        let found = comparisons(&results, "unix");
        assert_eq!(found[0].conclusion(), Conclusion::Slower);
        assert_eq!(found[1].conclusion(), Conclusion::Mixed);
        let last = summary(&results, "unix").pop().unwrap();
        assert_eq!(
            last,
            "  => io_uring against unix depends on the journal mode: slower in delete; \
             faster on some tests, slower on others in wal."
        );
    }

    #[test]
    fn too_few_runs_give_no_verdict_and_say_what_to_do() {
        let results = suite(|_| None, |_| None);
        let found = comparisons(&results, "unix");
        assert!(found
            .iter()
            .all(|c| c.conclusion() == Conclusion::Undecided && c.undecided.len() == 16));
        let lines = summary(&results, "unix");
        assert!(
            lines[5].contains("16 with too few runs (need ≥ 6)"),
            "{lines:#?}"
        );
        assert!(
            lines
                .last()
                .unwrap()
                .contains("rerun with --runs 6 or more"),
            "{lines:#?}"
        );
        // Partly undecided: the decided tests still conclude.
        let results = suite(|n| if n <= 8 { None } else { FASTER }, |_| SAME);
        let found = comparisons(&results, "unix");
        assert_eq!(found[0].conclusion(), Conclusion::Faster);
        assert_eq!(found[1].conclusion(), Conclusion::Same);
    }

    #[test]
    fn only_the_baseline_has_nothing_to_compare() {
        let results: Vec<TestResult> = suite(|_| SAME, |_| SAME)
            .into_iter()
            .map(|mut test| {
                test.combos.retain(|c| c.target == "unix");
                test
            })
            .collect();
        let lines = summary(&results, "unix");
        assert!(lines[3].contains("nothing to compare"), "{lines:#?}");
    }
}
