//! What every benchmark measures on: this project's VFSes (each registered once per
//! process with the options the benchmarks compare), their `--targets` names, and the
//! `uring_*` URI parameters a target may carry. `bench speed` and `bench blobs` build
//! their own target types on top of this one list, so both measure identically
//! configured VFSes.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{bail, Result};

/// Name under which our io_uring VFS is registered.
pub const IO_URING_VFS: &str = "io_uring";
/// Our same VFS on plain syscalls: isolates what io_uring itself changes.
pub const SYNC_VFS: &str = "io_uring_sync";
/// Our io_uring VFS with reads, writes and syncs all submitted through the ring
/// (`Submission::Ring`), to measure that choice against the default routing.
pub const ALL_RING_VFS: &str = "io_uring_ring";
/// Our io_uring VFS with O_DIRECT for main databases (`Options::direct_io`): page writes
/// reach the device as overlapping ring batches, reads bypass the page cache.
pub const DIRECT_VFS: &str = "io_uring_direct";

/// Our VFSes, registered at most once per process (SQLite keeps them forever).
pub fn library_vfs(name: &'static str) -> &'static Result<sqlite_uring::Registration, String> {
    static IO_URING: OnceLock<Result<sqlite_uring::Registration, String>> = OnceLock::new();
    static ALL_RING: OnceLock<Result<sqlite_uring::Registration, String>> = OnceLock::new();
    static SYNC: OnceLock<Result<sqlite_uring::Registration, String>> = OnceLock::new();
    static DIRECT: OnceLock<Result<sqlite_uring::Registration, String>> = OnceLock::new();
    use sqlite_uring::{Backend, Submission};
    let defaults = sqlite_uring::Options::default();
    let (cell, backend, submission, direct_io) = match name {
        IO_URING_VFS => (&IO_URING, Backend::IoUring, None, false),
        ALL_RING_VFS => (&ALL_RING, Backend::IoUring, Some(Submission::Ring), false),
        DIRECT_VFS => (&DIRECT, Backend::IoUring, None, true),
        _ => (&SYNC, Backend::Syscall, None, false),
    };
    cell.get_or_init(|| {
        sqlite_uring::register(sqlite_uring::Options {
            vfs_name: name.to_string(),
            backend,
            make_default: false,
            // A silent fallback would measure syscalls under the name io_uring.
            fallback_to_syscall: false,
            sync_mode: sqlite_uring::SyncMode::Fsync,
            read_submission: submission.unwrap_or(defaults.read_submission),
            write_submission: submission.unwrap_or(defaults.write_submission),
            sync_submission: submission.unwrap_or(defaults.sync_submission),
            direct_io,
            // Measured as a URI choice: `io_uring_ring?uring_sqpoll=on`.
            sqpoll: false,
            // The VFS's default; `io_uring?uring_readahead=off` measures without it.
            readahead: defaults.readahead,
        })
        .map_err(|e| e.to_string())
    })
}

/// The library registration of `io_uring`, for the environment header.
pub fn io_uring_registration() -> &'static Result<sqlite_uring::Registration, String> {
    library_vfs(IO_URING_VFS)
}

/// This project's targets: `--targets` label and the VFS it opens.
pub const OUR_TARGETS: [(&str, &str); 4] = [
    ("io_uring", IO_URING_VFS),
    ("io_uring_ring", ALL_RING_VFS),
    ("io_uring_direct", DIRECT_VFS),
    ("sync", SYNC_VFS),
];

/// The VFS of one of this project's targets, by `--targets` label.
pub fn our_vfs(label: &str) -> Option<&'static str> {
    OUR_TARGETS
        .iter()
        .find(|(ours, _)| *ours == label)
        .map(|&(_, vfs)| vfs)
}

/// The `uring_*` parameters of a `--targets` entry such as
/// `io_uring?uring_sync_plan=separate&uring_direct=on`: only for this project's VFS
/// targets, every one `uring_KEY=VALUE` (the VFS itself rejects unknown keys and values
/// at open, with a message naming them).
pub(crate) fn checked_uri_parameters(name: &str, base: &str, parameters: &str) -> Result<String> {
    if our_vfs(base).is_none() {
        bail!(
            "--targets {name}: URI parameters are for this project's VFS targets ({}), not {base}",
            OUR_TARGETS.map(|(label, _)| label).join(", ")
        );
    }
    for pair in parameters.split('&') {
        let valid = pair.split_once('=').is_some_and(|(key, value)| {
            key.starts_with("uring_")
                && !value.is_empty()
                && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if !valid {
            bail!(
                "--targets {name}: {pair:?} is not a uring_KEY=VALUE parameter; \
                 e.g. io_uring?uring_sync_plan=separate (README lists the parameters)"
            );
        }
    }
    Ok(parameters.to_string())
}

/// `path` as a SQLite URI filename with `parameters` (uri.html: `%`, `?` and `#` in the
/// path must be escaped).
pub(crate) fn uri_filename(path: &Path, parameters: &str) -> String {
    let mut escaped = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => escaped.push_str(&format!("%{:02X}", c as u32)),
            c => escaped.push(c),
        }
    }
    format!("file:{escaped}?{parameters}")
}
