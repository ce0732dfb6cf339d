//! What every benchmark measures on: this project's VFSes (each registered once per
//! process with the options the benchmarks compare), their `--targets` names, the
//! `uring_*` URI parameters a target may carry, and the SQLite targets of `speed`,
//! `concurrency` and `cold` ([`Target`], [`resolve`]) with where their VFS call counts
//! come from. `bench blobs` builds its own target type on top of the same list of VFSes,
//! so every benchmark measures identically configured VFSes.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{bail, Result};
use sqlite_uring::IoStats;

use crate::counting_vfs::{self, Behaviour, CountingVfs};

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

/// Where the VFS call counts of a target come from.
#[derive(Clone, Copy)]
pub enum Counter {
    /// `:memory:` does no file I/O.
    None,
    /// Our pass-through wrapper around a VFS that counts nothing itself (e.g. `unix`).
    Wrapper(&'static CountingVfs),
    /// The io_uring library's own counters of the VFS with this name.
    Library(&'static str),
}

/// One thing to compare.
#[derive(Clone)]
pub struct Target {
    /// What the user typed and the tables show: `memory`, `unix`, `io_uring`, …
    pub label: String,
    /// VFS to open the database with; `None` for `:memory:`.
    pub vfs: Option<String>,
    /// `uring_*` URI parameters the database is opened with (`io_uring?uring_direct=on`).
    pub uri_parameters: Option<String>,
    pub counter: Counter,
    /// The wrapper that times this target's VFS calls, by method (`bench speed
    /// --breakdown`, see [`with_method_times`]); `None` otherwise. The database is then
    /// opened through it ([`Target::open_vfs`]).
    pub timer: Option<&'static CountingVfs>,
}

impl Target {
    pub fn is_memory(&self) -> bool {
        self.vfs.is_none()
    }

    /// The VFS the database is opened with: the timing wrapper when there is one, else
    /// `vfs` (`None` for `:memory:`).
    pub fn open_vfs(&self) -> Option<&str> {
        self.timer.map(CountingVfs::name).or(self.vfs.as_deref())
    }
}

impl Counter {
    pub fn reset(&self) {
        match self {
            Counter::None => {}
            Counter::Wrapper(vfs) => vfs.reset(),
            Counter::Library(name) => sqlite_uring::reset_vfs_stats(name),
        }
    }

    /// What the VFS counted since the last reset: the call counts (`read_calls` …
    /// `bytes_written`) of every counted target, and the engine's counters (`fsyncs`,
    /// `kernel_entries`, …) where [`Counter::counts_engine`].
    pub fn read(&self) -> Option<IoStats> {
        match self {
            Counter::None => None,
            Counter::Wrapper(vfs) => Some(vfs.counts()),
            Counter::Library(name) => sqlite_uring::vfs_stats(name),
        }
    }

    /// Whether the engine's counters (`fsyncs`, `kernel_entries`, …) are counted: only
    /// this project's VFS keeps them; the counting wrapper sees SQLite's calls alone.
    pub fn counts_engine(&self) -> bool {
        matches!(self, Counter::Library(_))
    }
}

/// Turns `--targets` names into targets, registering VFSes as needed.
pub fn resolve(names: &[String]) -> Result<Vec<Target>> {
    let mut targets: Vec<Target> = Vec::new();
    for raw in names {
        let name = raw.trim();
        if name.is_empty() {
            bail!("--targets contains an empty name; separate targets with commas, e.g. --targets memory,unix,io_uring");
        }
        if targets.iter().any(|t| t.label == name) {
            bail!("--targets names {name} twice; list each target once");
        }
        let (base, uri_parameters) = match name.split_once('?') {
            Some((base, parameters)) => {
                (base, Some(checked_uri_parameters(name, base, parameters)?))
            }
            None => (name, None),
        };
        let target = match (base, our_vfs(base)) {
            ("memory", _) => Target {
                label: name.into(),
                vfs: None,
                uri_parameters: None,
                counter: Counter::None,
                timer: None,
            },
            ("unix", _) => counted_target(name, "unix")?,
            (_, Some(vfs)) => match library_vfs(vfs) {
                Ok(_) => Target {
                    label: name.into(),
                    vfs: Some(vfs.into()),
                    uri_parameters,
                    counter: Counter::Library(vfs),
                    timer: None,
                },
                Err(why) => bail!(
                    "--targets {name}: the {vfs} VFS cannot be registered here: {why}; \
                         run `sqlite-uring probe` for details, or leave {name} out of --targets"
                ),
            },
            (other, None) => {
                if counting_vfs::registered_vfs_names()
                    .iter()
                    .any(|n| n == other)
                {
                    counted_target(other, other)?
                } else {
                    bail!(
                        "--targets: unknown target {other:?}; use memory, unix, {}, \
                         or the name of a registered VFS ({})",
                        OUR_TARGETS.map(|(label, _)| label).join(", "),
                        counting_vfs::registered_vfs_names().join(", ")
                    )
                }
            }
        };
        targets.push(target);
    }
    if targets.is_empty() {
        bail!("--targets is empty; name at least one target, e.g. --targets memory,unix");
    }
    Ok(targets)
}

fn counted_target(label: &str, parent: &str) -> Result<Target> {
    let wrapper =
        counting_vfs::register(&format!("{parent}_counted"), parent, Behaviour::Faithful)?;
    Ok(Target {
        label: label.into(),
        vfs: Some(wrapper.name().to_string()),
        uri_parameters: None,
        counter: Counter::Wrapper(wrapper),
        timer: None,
    })
}

/// `targets` with every file target's VFS calls timed by method: a target already
/// opened through the counting wrapper (`unix`) has its wrapper time them; this
/// project's VFSes, which count their own calls, get a wrapper of their own
/// (`io_uring_counted`) to be opened through, which times and forwards but leaves the
/// counting to them. Every timed target pays the same clock reads per call.
pub fn with_method_times(targets: Vec<Target>) -> Result<Vec<Target>> {
    targets
        .into_iter()
        .map(|mut target| {
            let timer = match (target.counter, target.vfs.as_deref()) {
                (Counter::None, _) | (_, None) => None,
                (Counter::Wrapper(wrapper), _) => Some(wrapper),
                (Counter::Library(_), Some(vfs)) => Some(counting_vfs::register(
                    &format!("{vfs}_counted"),
                    vfs,
                    Behaviour::Faithful,
                )?),
            };
            if let Some(timer) = timer {
                timer.enable_timing();
            }
            target.timer = timer;
            Ok(target)
        })
        .collect()
}

/// VFS counters are process-wide, so tests that read them must not run while another
/// test resets them.
#[cfg(test)]
pub(crate) fn counters_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_targets_are_rejected_with_the_flag_name() {
        let error = resolve(&["memory".into(), "floppy".into()]).err().unwrap();
        let message = error.to_string();
        assert!(
            message.contains("--targets") && message.contains("floppy"),
            "{message}"
        );
        assert!(resolve(&["unix".into(), "unix".into()]).is_err());
        // Any registered VFS works by name, counted through a wrapper.
        let other = resolve(&["unix-none".into()]).unwrap();
        assert_eq!(other[0].vfs.as_deref(), Some("unix-none_counted"));
    }
}
