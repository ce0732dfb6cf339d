//! The closing verdict of `bench speed` (common/verdict.rs has the rules): per target and
//! journal mode, the tests on which it was faster or slower than the baseline beyond the
//! noise, and one conclusion per target.

use super::output::TestResult;
use crate::bench::common::verdict::{
    conclusion_line, entry, first_appearances, test_numbers, Comparison,
};

/// The comparisons of every target but the baseline and `:memory:` (the CPU floor, not
/// a storage choice), per journal mode, in the order the results list them.
pub fn comparisons(results: &[TestResult], baseline: &str) -> Vec<Comparison> {
    let mut found: Vec<Comparison> = Vec::new();
    for test in results {
        for combo in &test.combos {
            if combo.target == baseline || combo.vfs == ":memory:" {
                continue;
            }
            entry(&mut found, &combo.target, &combo.journal).add(test.number, combo.paired, false);
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
            lines.push(format!(
                "    {}",
                comparison.line(&comparison.journal, test_numbers)
            ));
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
    use crate::bench::common::checksum::Checksum;
    use crate::bench::common::verdict::Conclusion;
    use crate::bench::speed::output::ComboResult;
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
            engine_counted: false,
            warnings: vec![],
            baseline: Some(0),
            is_baseline: target == "unix",
            relative: None,
            paired: (target != "unix").then(|| PairedRatio {
                median: interval.map_or(1.0, |(low, high)| (low + high) / 2.0),
                interval,
                pairs: if interval.is_some() { 10 } else { 3 },
            }),
            breakdown: None,
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
            found[0].line(&found[0].journal, test_numbers).starts_with(
                "delete: faster on test 3 (within chance) · slower on test 9 (within chance) \
                 · same on 14 of 16"
            ),
            "{}",
            found[0].line(&found[0].journal, test_numbers)
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
