//! The I/O layer: the one interface between the SQLite-facing code and the kernel.
//!
//! ```text
//! file/ · shm · direct · write_behind
//!        ──► Submitter::{read_at, write_at, sync, truncate, write_batch, flush}   submit.rs
//!                           │  (retries EINTR/EAGAIN, continues short transfers,
//!                           │   returns errno, or a typed FlushFailure)
//!                           ▼
//!                 EngineKind::perform(ops, results)   one call = one batch    engine.rs
//!                 ┌─────────┼──────────────┐
//!            uring.rs   syscall.rs     fault.rs (wraps either; tests)
//! ```
//!
//! `fault.rs` and `power_loss.rs` are test machinery, compiled only with the
//! `test-support` feature (this crate's own tests turn it on; no shipped build does).
//!
//! Inside `io/`, files import downward too: `op` (the [`Op`] type, the `Engine` trait,
//! retry rules) and the leaves `fixed`, `diagnose`, `routing`, `record` → the
//! engines `syscall`, `uring` → `fault` → `engine` → `submit`. This file only declares
//! and re-exports; nothing in `io/` names it.
//!
//! The rules that keep the kernel from touching freed memory: the buffer-lifetime rule,
//! stated in `op.rs` (an `Op` borrows its buffer) and kept by `uring.rs`, the one file
//! that hands buffers to the kernel; the registered-buffer rule in `fixed.rs`.

pub(crate) mod diagnose;
pub(crate) mod engine;
#[cfg(feature = "test-support")]
pub(crate) mod fault;
pub(crate) mod fixed;
pub(crate) mod op;
#[cfg(feature = "test-support")]
pub(crate) mod power_loss;
pub(crate) mod record;
pub(crate) mod routing;
pub(crate) mod submit;
pub(crate) mod syscall;
pub(crate) mod uring;

pub(crate) use engine::{EngineKind, FileRole};
pub(crate) use op::MAX_BATCH;
pub(crate) use routing::Routing;
pub(crate) use submit::{FlushFailure, Submitter, SyncRequest, WriteFailure};
