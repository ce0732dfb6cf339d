//! Command-line options every benchmark shares, declared once and flattened into each
//! benchmark's own arguments (`#[command(flatten)]`).

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use super::settings::{JournalMode, Synchronous};
use super::targets::{self, Target};

/// The most measured (and warm-up) runs a benchmark takes per case: far more than any
/// interval needs, and small enough that their sum never overflows a run counter.
pub const MAX_RUNS: i64 = 100_000;

/// Where the measured runs of `bench speed` and `bench blobs` execute.
///
/// A fresh process per run is the default because the state of a process changes what
/// it measures, beyond what rotating the order of targets can spread: allocator history
/// (BENCH_BLOBS.md, "Position in the process"), and threads. A run that handed work to
/// io-wq leaves a kernel worker thread in the process until it exits, and a second
/// thread makes every later file-descriptor system call dearer and, measured here, WAL
/// commits 20–40 % slower — for every target measured after it in that process
/// (ARCHITECTURE.md, "Threads the ring adds").
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Isolation {
    /// A fresh process of this binary per run (as hyperfine runs each command).
    Process,
    /// Every run in this process, one after the other.
    None,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Process => "process",
            Isolation::None => "none",
        }
    }

    /// `--isolation` as given, or its default: `process`, except with `--trace`, whose
    /// file one process writes.
    pub fn resolve(given: Option<Isolation>, tracing: bool) -> anyhow::Result<Isolation> {
        match (given, tracing) {
            (Some(Isolation::Process), true) => anyhow::bail!(
                "--trace with --isolation process: the trace file is written by one process; \
                 use --isolation none (the default with --trace)"
            ),
            (Some(isolation), _) => Ok(isolation),
            (None, true) => Ok(Isolation::None),
            (None, false) => Ok(Isolation::Process),
        }
    }

    /// The binary to re-execute for `Process`, resolved before any run.
    pub fn worker_exe(self) -> anyhow::Result<Option<std::path::PathBuf>> {
        use anyhow::Context;
        match self {
            Isolation::Process => std::env::current_exe()
                .context(
                    "--isolation process: cannot find this program's path to re-run it; \
                     use --isolation none",
                )
                .map(Some),
            Isolation::None => Ok(None),
        }
    }
}

/// Where a benchmark writes and whether it may run at all.
#[derive(Args, Debug, Clone)]
pub struct PlaceOptions {
    /// Directory for the benchmark's files (it must exist): its filesystem and device are
    /// what gets measured.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,

    /// Measure even in a debug build (its timings are meaningless; for testing the tool).
    #[arg(long)]
    pub allow_debug: bool,
}

impl PlaceOptions {
    /// `--dir` exists and takes new files: said before any run rather than after one.
    pub fn check_dir(&self) -> anyhow::Result<()> {
        let dir = &self.dir;
        if !dir.is_dir() {
            bail!(
                "--dir {}: no such directory; create it or point --dir at an existing directory",
                dir.display()
            );
        }
        let probe = dir.join(format!(".sqlite-uring-probe-{}", std::process::id()));
        std::fs::write(&probe, b"probe").with_context(|| {
            format!(
                "--dir {} is not writable; choose a directory you can write to with --dir",
                dir.display()
            )
        })?;
        let _ = std::fs::remove_file(&probe);
        Ok(())
    }
}

/// How the runs of a benchmark that repeats cases (`speed`, `blobs`) are made: where,
/// in which process, traced or not. The number of runs is each benchmark's own option:
/// their defaults differ.
#[derive(Args, Debug, Clone)]
pub struct RunOptions {
    #[command(flatten)]
    pub place: PlaceOptions,

    /// Where each run executes: `process` (a fresh process of this binary per run, like
    /// hyperfine; the default) or `none` (every run in this process; the default with
    /// --trace, whose file one process writes). In one process, a kernel worker thread
    /// io_uring leaves behind slows every target measured after it (WAL commits 20–40 %
    /// on the project machine; docs/BENCH_SPEED.md), and the allocation history changes
    /// large-blob reads (docs/BENCH_BLOBS.md).
    #[arg(long, value_enum, value_name = "WHERE")]
    pub isolation: Option<Isolation>,

    /// Write the VFS's trace of this run to FILE: every call SQLite makes to this
    /// project's VFS (targets io_uring, io_uring_ring, sync: file, offset, length, result,
    /// duration), every engine batch and ring submission, with a mark at each test, phase,
    /// target and run. Traced runs are slower; trace few runs (e.g. --runs 1 --warmup 0)
    /// to explain one number.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

impl RunOptions {
    /// `--isolation` as given or its default (see [`Isolation::resolve`]).
    pub fn isolation(&self) -> anyhow::Result<Isolation> {
        Isolation::resolve(self.isolation, self.trace.is_some())
    }

    /// The checks every repeating benchmark makes before its first run: the build, `--dir`,
    /// the `--trace` path. Returns the debug-build warning to show, if any.
    pub fn check(&self) -> anyhow::Result<Option<String>> {
        let debug_warning = crate::report::envinfo::check_release_build(self.place.allow_debug)?;
        self.place.check_dir()?;
        if let Some(path) = &self.trace {
            check_output_path("--trace", path)?;
        }
        Ok(debug_warning)
    }
}

/// What a benchmark of SQLite targets pairs its runs against, with which durability,
/// after how many unmeasured runs (`speed`, `concurrency`).
#[derive(Args, Debug, Clone)]
pub struct PairingOptions {
    /// Target the others are compared to (relative columns, paired ratios, verdict,
    /// chart); must be in --targets.
    #[arg(long, default_value = "unix", value_name = "TARGET")]
    pub baseline: String,

    /// PRAGMA synchronous, applied identically to every file target.
    #[arg(long, value_enum, default_value = "full", value_name = "LEVEL")]
    pub synchronous: Synchronous,

    /// Unmeasured runs per case and target before the measured ones (warm caches).
    #[arg(long, default_value_t = 1, value_name = "RUNS",
          value_parser = clap::value_parser!(u32).range(0..=MAX_RUNS))]
    pub warmup: u32,
}

impl PairingOptions {
    /// `--baseline` must name one of `labels`, the `--targets` as given in `targets`.
    pub fn check_baseline<'a>(
        &self,
        mut labels: impl Iterator<Item = &'a str>,
        targets: &[String],
    ) -> anyhow::Result<()> {
        if !labels.any(|label| label == self.baseline) {
            bail!(
                "--baseline {} is not among --targets ({}); add it to --targets or choose one of them",
                self.baseline,
                targets.join(",")
            );
        }
        Ok(())
    }
}

/// What one benchmark's [`TargetOptions`] default to and say in `--help`.
pub trait TargetHelp: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// `--targets` when not given.
    const DEFAULT_TARGETS: &'static str;
    /// The help of `--targets`: which targets this benchmark takes.
    const TARGETS: &'static str;
    /// The help of `--journal`: what a journal mode means to this benchmark.
    const JOURNAL: &'static str;
}

/// The SQLite targets a benchmark compares (`speed`, `concurrency`, `cold`): `--targets`,
/// what they are paired against ([`PairingOptions`]) and `--journal`, declared once with
/// each benchmark's defaults and help ([`TargetHelp`]).
#[derive(Args, Debug, Clone)]
pub struct TargetOptions<H: TargetHelp> {
    #[arg(
        long,
        value_delimiter = ',',
        default_value = H::DEFAULT_TARGETS,
        value_name = "LIST",
        help = H::TARGETS
    )]
    pub targets: Vec<String>,

    #[command(flatten)]
    pub pairing: PairingOptions,

    #[arg(
        long,
        value_delimiter = ',',
        default_value = "delete,wal",
        value_name = "LIST",
        help = H::JOURNAL
    )]
    pub journal: Vec<JournalMode>,

    #[arg(skip)]
    pub help: PhantomData<H>,
}

impl<H: TargetHelp> TargetOptions<H> {
    /// `--targets` resolved (their VFSes registered), `--baseline` among them.
    pub fn resolve(&self) -> anyhow::Result<Vec<Target>> {
        let resolved = targets::resolve(&self.targets)?;
        self.pairing
            .check_baseline(resolved.iter().map(|t| t.label.as_str()), &self.targets)?;
        Ok(resolved)
    }

    /// `--journal` in the user's order, each mode once.
    pub fn journals(&self) -> Vec<JournalMode> {
        once_each(&self.journal)
    }
}

/// Each value once, in the order of its first appearance.
pub fn once_each<T: Copy + PartialEq>(values: &[T]) -> Vec<T> {
    let mut found: Vec<T> = Vec::new();
    for value in values {
        if !found.contains(value) {
            found.push(*value);
        }
    }
    found
}

/// The result files of a benchmark; [`super::export::ExportManager`] writes them.
#[derive(Args, Debug, Clone, Default)]
pub struct ExportOptions {
    /// Write the environment header and the result tables as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,

    /// Write one flat record per result row (times in seconds) as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,

    /// Write the results (every measured number, VFS call counts, checksums) as JSON to
    /// FILE.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,

    /// Draw the main comparison of the results as an SVG bar chart to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
}

/// Catches a path a result file cannot be written to before a long benchmark, not after
/// it: its directory must exist and the path must not be a directory.
pub fn check_output_path(flag: &str, path: &Path) -> anyhow::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        bail!(
            "{flag} {}: the directory {} does not exist; create it or choose another path",
            path.display(),
            parent.display()
        );
    }
    if path.is_dir() {
        bail!(
            "{flag} {} is a directory; give a file name, e.g. {}",
            path.display(),
            path.join("results").display()
        );
    }
    Ok(())
}

/// A benchmark's flags (without the subcommand words) parsed as the command line is, for
/// the tests of its parts.
#[cfg(test)]
pub(crate) fn parse_flags<'a, T: clap::Args>(
    words: impl IntoIterator<Item = &'a str>,
) -> Result<T, clap::Error> {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli<T: clap::Args> {
        #[command(flatten)]
        args: T,
    }
    Cli::<T>::try_parse_from(std::iter::once("bench").chain(words)).map(|cli| cli.args)
}

/// The flags of a unit test's tiny real run of a benchmark: two measured runs, no warm-up,
/// every run in this process (a unit test's executable is the test harness: it cannot be
/// a worker; each benchmark's tests/*.rs run the binary).
#[cfg(test)]
pub const TINY_RUN: [&str; 7] = [
    "--allow-debug",
    "--runs",
    "2",
    "--warmup",
    "0",
    "--isolation",
    "none",
];
