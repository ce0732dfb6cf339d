//! How a benchmark that pairs its targets run by run (`speed`, `cold`, `concurrency`)
//! runs its cases, and what it prints around them.
//!
//! Per case, every combination (a target, in a journal mode) runs `--warmup` + `--runs`
//! times, interleaved round by round, the order rotating each round: slow drifts of the
//! machine hit all of them alike, and no combination always goes first. Outcomes are kept
//! in round order, so the i-th measured runs of two combinations are one pair.

use std::fmt::Display;

use indicatif::{ProgressBar, ProgressStyle};

use crate::report::envinfo::EnvInfo;
use crate::trace_file;

/// One run of a case: which combination, in which round, measured or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The combination's index.
    pub index: usize,
    /// Counted from 0.
    pub round: u32,
    /// `warmup` or `run`.
    pub phase: &'static str,
}

/// The rounds of a whole benchmark, with its progress bar.
pub struct Rounds {
    warmup: u32,
    runs: u32,
    progress: ProgressBar,
}

impl Rounds {
    /// `warmup` + `runs` rounds of `combinations` in each of `cases` cases.
    pub fn new(warmup: u32, runs: u32, cases: usize, combinations: usize) -> Rounds {
        let total = cases as u64 * u64::from(warmup + runs) * combinations as u64;
        let progress = ProgressBar::new(total);
        progress.set_style(
            ProgressStyle::with_template(
                "{bar:32} {pos}/{len} {msg} [{elapsed_precise}, ETA {eta}]",
            )
            .expect("the template is valid"),
        );
        Rounds {
            warmup,
            runs,
            progress,
        }
    }

    /// Runs one case: `run` for every combination of `combinations`, round after round
    /// in a rotating order. Returns each combination's measured outcomes, in round order.
    pub fn case<T>(
        &self,
        combinations: usize,
        mut run: impl FnMut(Step) -> anyhow::Result<T>,
    ) -> anyhow::Result<Vec<Vec<T>>> {
        let mut outcomes: Vec<Vec<T>> = (0..combinations).map(|_| Vec::new()).collect();
        for round in 0..self.warmup + self.runs {
            for offset in 0..combinations {
                // Rotating the order each round spreads any "goes first" effect over all.
                let index = (offset + round as usize) % combinations;
                let measured = round >= self.warmup;
                let phase = if measured { "run" } else { "warmup" };
                let outcome = run(Step {
                    index,
                    round,
                    phase,
                })?;
                if measured {
                    outcomes[index].push(outcome);
                }
                self.progress.inc(1);
            }
        }
        Ok(outcomes)
    }

    /// Says what runs now, beside the progress bar.
    pub fn message(&self, message: String) {
        self.progress.set_message(message);
    }

    /// Prints a finished case above the progress bar: its title, table and notes.
    pub fn show(&self, title: &str, table: impl Display, notes: &[String]) {
        self.progress.suspend(|| {
            println!("{title}");
            println!("{table}");
            for note in notes {
                println!("{note}");
            }
            println!();
        });
    }

    /// Removes the progress bar; ends the trace, if any, and says where it is.
    pub fn finish(self, trace: Option<trace_file::Session>) -> anyhow::Result<()> {
        self.progress.finish_and_clear();
        if let Some(trace) = trace {
            let path = trace.path().to_path_buf();
            trace.finish()?;
            println!("Trace written to {}", path.display());
            println!();
        }
        Ok(())
    }
}

/// Prints the header of a benchmark's output (the environment and settings, then the
/// cautions) and the line saying what its terminal tables leave out, and returns the
/// header with the cautions, as the Markdown export begins.
pub fn print_header(
    mut header: Vec<String>,
    cautions: Vec<String>,
    terminal_omits: Option<&str>,
) -> Vec<String> {
    for line in header.iter().chain(&cautions) {
        println!("{line}");
    }
    header.extend(cautions);
    if let Some(omits) = terminal_omits {
        println!("tables:      {omits}");
    }
    println!();
    header
}

/// Whether `--dir` is on a filesystem in memory (tmpfs, ramfs): no device behind it.
pub fn on_memory_filesystem(env: &EnvInfo) -> bool {
    matches!(env.filesystem.as_str(), "tmpfs" | "ramfs")
}

/// The caution for a `--dir` on a filesystem in memory, where fsync costs nothing.
pub fn memory_filesystem_caution(env: &EnvInfo) -> Option<String> {
    on_memory_filesystem(env).then(|| {
        format!(
            "WARNING: --dir is on {}: fsync costs nothing there, so these numbers say nothing \
             about a disk; point --dir at the disk you care about",
            env.filesystem
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every combination runs in every round, each round one place later, and only the
    /// rounds after the warm-up are kept, in round order.
    #[test]
    fn rounds_rotate_and_keep_the_measured_runs_in_order() {
        let rounds = Rounds::new(1, 3, 1, 3);
        let mut order = Vec::new();
        let outcomes = rounds
            .case(3, |step| {
                order.push((step.round, step.index, step.phase));
                Ok((step.index, step.round))
            })
            .unwrap();
        let firsts: Vec<usize> = order.chunks(3).map(|round| round[0].1).collect();
        assert_eq!(firsts, [0, 1, 2, 0]);
        assert!(order[..3].iter().all(|&(_, _, phase)| phase == "warmup"));
        assert!(order[3..].iter().all(|&(_, _, phase)| phase == "run"));
        for (index, kept) in outcomes.iter().enumerate() {
            assert_eq!(kept, &[(index, 1), (index, 2), (index, 3)]);
        }
        rounds.finish(None).unwrap();
    }
}
