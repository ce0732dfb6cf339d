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
//! as is.

// Each benchmark uses a different subset of this shared API.
#![allow(dead_code)]

pub mod chart;
pub mod envinfo;
pub mod export;
pub mod stats;
