//! Shared reporting for every `sqlite-uring bench …` command.
//!
//! * [`stats`]: hyperfine-style summaries (mean ± σ, median, min … max), relative speed
//!   against a baseline with its propagated error, outlier and variance warnings;
//! * [`export`]: Markdown, CSV and JSON files from any `serde::Serialize` records;
//! * [`chart`]: an SVG grouped bar chart (categories × series), e.g. relative time per test;
//! * [`envinfo`]: the environment header (kernel, filesystem and device, CPUs, memory,
//!   build profile, SQLite version and compile options) that makes a result interpretable.
//!
//! Nothing here knows about a particular benchmark, so `bench io` and `bench blobs` use it
//! as is. A typical benchmark:
//!
//! ```ignore
//! let debug_warning = envinfo::check_release_build(args.allow_debug)?; // refuse debug
//! let env = envinfo::EnvInfo::collect(&args.dir);
//! for line in env.lines() { println!("{line}"); }
//! // … measure, collecting seconds per run …
//! let summary = stats::Summary::from_samples(&times_s).context("no valid runs")?;
//! let relative = summary.relative_to(&baseline_summary); // Option<Relative>
//! println!("{} {}", stats::format_mean_stddev(&summary), relative.map(|r| r.display()).unwrap_or_default());
//! for warning in stats::warnings(&times_s) { println!("warning: {}", warning.message()); }
//! export::export_json(path, &records)?;   // records: &[impl Serialize]
//! export::export_csv(path, &records)?;    // flat records only
//! export::export_markdown(path, &["Command", "Mean"], &rows)?;
//! chart::BarChart { title, y_label, categories, series, reference_line: Some(1.0) }.write_svg(path)?;
//! ```

// Each benchmark uses a different subset of this shared API.
#![allow(dead_code)]

pub mod chart;
pub mod envinfo;
pub mod export;
pub mod stats;
pub mod table;
