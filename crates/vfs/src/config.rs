//! Options: set once at registration ([`Options`]) and per file by URI parameter
//! ([`UriOptions`]). A leaf: it names no other module of the crate.
//!
//! URI parameters owned by this VFS all start with `uring_`; an unknown `uring_*` key or a
//! malformed value makes `xOpen` fail with `SQLITE_CANTOPEN` and a `sqlite3_log` message
//! naming the parameter (see README, "URI parameters").

use crate::open_name::UriParameters;

/// Which engine performs the file I/O of a registered VFS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// io_uring: the ring of the calling thread for what the routing sends there
    /// ([`Submission`]; by default, for buffered files, nothing: reads, writes and syncs
    /// go by syscall, and the ring carries O_DIRECT batches and whatever a URI routes to
    /// it).
    IoUring,
    /// The same VFS code (write-behind, coalescing) with plain `pread`/`pwrite`/`fsync`/
    /// `ftruncate` syscalls and no ring at all.
    Syscall,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::IoUring => "io_uring",
            Backend::Syscall => "syscall",
        }
    }

    fn parse(text: &str) -> Option<Backend> {
        match text {
            "io_uring" => Some(Backend::IoUring),
            "syscall" => Some(Backend::Syscall),
            _ => None,
        }
    }
}

/// How `xSync` makes data durable.
///
/// SQLite's `unix` VFS calls `fdatasync()` only when compiled with `HAVE_FDATASYNC`
/// (Debian's libsqlite3 is); otherwise it calls `fsync()` (the amalgamation default,
/// which is what rusqlite's `bundled` build uses; see `os_unix.c`, "We do not trust
/// systems to provide a working fdatasync()"). `Fsync` is never weaker than `unix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncMode {
    Fsync,
    Fdatasync,
}

impl SyncMode {
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Fsync => "fsync",
            SyncMode::Fdatasync => "fdatasync",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<SyncMode> {
        match text {
            "fsync" => Some(SyncMode::Fsync),
            "fdatasync" => Some(SyncMode::Fdatasync),
            _ => None,
        }
    }
}

/// Whether the io_uring backend issues a kind of operation through the ring or with a
/// plain syscall from the calling thread (reads, writes, and syncs: see
/// [`Options::sync_submission`]). Unless all three are `Ring`, a batch left with a single
/// ring operation runs it as a syscall: alone it cannot overlap with anything.
///
/// A lone buffered read or write through the ring costs one `io_uring_enter` like the
/// syscall, plus a hand-off to an io-wq worker thread whenever the filesystem cannot
/// complete it without blocking — every buffered write on ext4, reads on tmpfs — which
/// makes it slower than `pread`/`pwrite` (the measurements: docs/DESIGN.md, "Buffered
/// files use system calls by default").
/// `Syscall` (the default for reads and writes) keeps write-behind and coalescing, so a
/// commit still makes a fraction of `unix`'s kernel entries. `Ring` is for ring I/O the
/// kernel completes inline: O_DIRECT overwrites on ext4. Buffered ring writes of a commit
/// go to io-wq workers on ext4, XFS, btrfs and tmpfs alike (XFS completes them inline
/// only while the file's mtime needs no update, which a commit's first write never finds;
/// docs/FILESYSTEMS.md); `sqlite-uring probe --dir DIR` checks a filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Submission {
    /// Through the ring (IORING_OP_READ / IORING_OP_WRITE / IORING_OP_FSYNC).
    Ring,
    /// pread(2) / pwrite(2) / fsync(2) from the calling thread.
    Syscall,
}

impl Submission {
    pub fn name(self) -> &'static str {
        match self {
            Submission::Ring => "ring",
            Submission::Syscall => "syscall",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Submission> {
        match text {
            "ring" => Some(Submission::Ring),
            "syscall" => Some(Submission::Syscall),
            _ => None,
        }
    }
}

/// How a flush that ends in a sync is submitted on the ring (URI `uring_sync_plan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPlan {
    /// Writes →link→ fsync in one submission.
    Linked,
    /// Writes in one submission, then the fsync in another.
    Separate,
}

/// Registration options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Name under which the VFS is registered (default `io_uring`).
    pub vfs_name: String,
    /// I/O engine (default [`Backend::IoUring`]).
    pub backend: Backend,
    /// Register as the default VFS, so plain opens use it.
    pub make_default: bool,
    /// When io_uring is unavailable, fall back to [`Backend::Syscall`] instead of failing.
    /// The fallback is reported in [`crate::Registration::fallback_reason`].
    pub fallback_to_syscall: bool,
    /// Default sync primitive for files of this VFS (URI `uring_sync` overrides it).
    pub sync_mode: SyncMode,
    /// How the io_uring backend issues reads (URI `uring_reads` overrides it).
    pub read_submission: Submission,
    /// How the io_uring backend issues writes (URI `uring_writes` overrides it).
    pub write_submission: Submission,
    /// How the io_uring backend issues fsync/fdatasync (URI `uring_syncs` overrides it).
    /// `Syscall` (the default) runs them in turn from the calling thread, as `unix` does.
    /// `Ring` submits a new journal's fsync together with its directory's, so the two
    /// overlap, and links queued ring writes to their fsync; a lone sync still runs as a
    /// syscall. The ring runs every fsync on an io-wq worker thread, and the first one
    /// stays for the life of the calling thread: in a process that was single-threaded,
    /// that thread makes its WAL commits and every file-descriptor system call slower,
    /// which costs more than the overlap gains (ARCHITECTURE.md, "Threads the ring
    /// adds"; the measurements: DESIGN.md, "Buffered files use system calls by
    /// default"). `Ring` is for processes that already run threads on several CPUs.
    pub sync_submission: Submission,
    /// Open main databases with an additional O_DIRECT descriptor for their aligned page
    /// I/O, and submit its queued writes through the ring (URI `uring_direct` overrides
    /// it). Off by default: without the page cache every cold read reaches the device.
    pub direct_io: bool,
    /// Give io_uring files a ring with a kernel submission thread (IORING_SETUP_SQPOLL,
    /// URI `uring_sqpoll` overrides it), and wait for its completions by spinning on the
    /// completion queue for up to `SQPOLL_SPIN_US` before entering the kernel: a batch
    /// that completes meanwhile costs no system call at all. Off by default: the poller
    /// and the spinning waiter each keep a CPU busy (docs/DESIGN.md, "SQPOLL is opt-in").
    pub sqpoll: bool,
    /// Read-ahead that follows SQLite's B-trees (URI `uring_readahead` overrides it): when
    /// SQLite reads the children of an interior page in order (a scan), the pages it will
    /// read next are asked of the kernel in one submission, so many reads are in flight
    /// where SQLite would wait for one page at a time. A point lookup starts none, and
    /// none starts while the pages are already cached (`readahead.rs`; docs/DESIGN.md,
    /// "Read-ahead").
    pub readahead: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            vfs_name: "io_uring".to_string(),
            backend: Backend::IoUring,
            make_default: false,
            fallback_to_syscall: false,
            sync_mode: SyncMode::Fsync,
            read_submission: Submission::Syscall,
            write_submission: Submission::Syscall,
            sync_submission: Submission::Syscall,
            direct_io: false,
            sqpoll: false,
            readahead: true,
        }
    }
}

/// The URI parameters this VFS owns; any other `uring_*` key is rejected at open.
pub(crate) const URI_PARAMETERS: [&str; 12] = [
    "uring_direct",
    "uring_readahead",
    "uring_wal_direct",
    "uring_sqpoll",
    "uring_reads",
    "uring_writes",
    "uring_syncs",
    "uring_backend",
    "uring_fallback",
    "uring_sync",
    "uring_sync_plan",
    "uring_write_behind",
];

/// What one file's URI parameters say (a journal or WAL sees its database's): the
/// `uring_*` parameters, `None` where absent (the VFS's default then applies), and the
/// SQLite parameters os_unix.c reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UriOptions {
    pub(crate) backend: Option<Backend>,
    pub(crate) fallback_to_syscall: Option<bool>,
    pub(crate) sync_mode: Option<SyncMode>,
    pub(crate) direct: Option<bool>,
    /// `uring_wal_direct`: the WAL's synced commits go O_DIRECT (`direct.rs`, `WalDirect`).
    pub(crate) wal_direct: bool,
    pub(crate) sqpoll: Option<bool>,
    /// `uring_readahead`: B-tree read-ahead for the main database (`readahead.rs`).
    pub(crate) readahead: Option<bool>,
    pub(crate) reads: Option<Submission>,
    pub(crate) writes: Option<Submission>,
    pub(crate) syncs: Option<Submission>,
    pub(crate) write_behind: bool,
    pub(crate) sync_plan: SyncPlan,
    /// os_unix.c: SQLITE_POWERSAFE_OVERWRITE defaults to 1; `psow=0` turns it off.
    pub(crate) psow: bool,
    pub(crate) readonly_shm: bool,
    pub(crate) nolock: bool,
}

impl UriOptions {
    /// What a filename without URI parameters says: nothing of its own (a rollback
    /// commit opens its journal under such a name, so this is not parsed each time).
    const NONE_GIVEN: UriOptions = UriOptions {
        backend: None,
        fallback_to_syscall: None,
        sync_mode: None,
        direct: None,
        wal_direct: false,
        sqpoll: None,
        readahead: None,
        reads: None,
        writes: None,
        syncs: None,
        write_behind: true,
        sync_plan: SyncPlan::Linked,
        psow: true,
        readonly_shm: false,
        nolock: false,
    };

    /// Parses the URI parameters of one filename. The error names the parameter and the
    /// values it takes.
    pub(crate) fn parse(uri: &UriParameters) -> Result<UriOptions, String> {
        if uri.is_empty() {
            return Ok(UriOptions::NONE_GIVEN);
        }
        for key in uri.keys() {
            if key.starts_with("uring_") && !URI_PARAMETERS.contains(&key) {
                return Err(format!(
                    "unknown URI parameter `{key}`; this VFS knows {}",
                    URI_PARAMETERS.join(", ")
                ));
            }
        }
        let choice = |key: &str, values: &str| -> Result<Option<&str>, String> {
            match uri.get(key) {
                Some(text) if !values.split(" or ").any(|v| v == text) => {
                    Err(format!("{key}={text} is not valid; use {values}"))
                }
                other => Ok(other),
            }
        };
        let on_off = |key: &str| -> Result<Option<bool>, String> {
            Ok(choice(key, "on or off")?.map(|v| v == "on"))
        };
        let submission = |key: &str| -> Result<Option<Submission>, String> {
            Ok(choice(key, "ring or syscall")?.and_then(Submission::parse))
        };
        let write_behind = on_off("uring_write_behind")?.unwrap_or(true);
        let wal_direct = on_off("uring_wal_direct")?.unwrap_or(false);
        if wal_direct && !write_behind {
            return Err(
                "uring_wal_direct=on writes the write-behind queue's flushes O_DIRECT, \
                        so it needs write-behind: drop uring_write_behind=off or \
                        uring_wal_direct=on"
                    .to_string(),
            );
        }
        Ok(UriOptions {
            backend: choice("uring_backend", "io_uring or syscall")?.and_then(Backend::parse),
            fallback_to_syscall: choice("uring_fallback", "syscall or none")?
                .map(|v| v == "syscall"),
            sync_mode: choice("uring_sync", "fsync or fdatasync")?.and_then(SyncMode::parse),
            direct: on_off("uring_direct")?,
            wal_direct,
            sqpoll: on_off("uring_sqpoll")?,
            readahead: on_off("uring_readahead")?,
            reads: submission("uring_reads")?,
            writes: submission("uring_writes")?,
            syncs: submission("uring_syncs")?,
            write_behind,
            sync_plan: match choice("uring_sync_plan", "linked or separate")? {
                Some("separate") => SyncPlan::Separate,
                _ => SyncPlan::Linked,
            },
            psow: uri_boolean(uri.get("psow"), true),
            readonly_shm: uri_boolean(uri.get("readonly_shm"), false),
            nolock: uri_boolean(uri.get("nolock"), false),
        })
    }
}

/// SQLite's boolean URI values (sqlite3GetBoolean): digits, on/yes/true/full/extra,
/// off/no/false; anything else is `default`.
fn uri_boolean(value: Option<&str>, default: bool) -> bool {
    let Some(value) = value else { return default };
    if let Ok(number) = value.parse::<i64>() {
        return number != 0;
    }
    match value.to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" | "full" | "extra" => true,
        "off" | "no" | "false" => false,
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<UriOptions, String> {
        UriOptions::parse(&UriParameters::from_pairs(pairs))
    }

    #[test]
    fn absent_parameters_leave_the_vfs_defaults() {
        assert_eq!(parse(&[]).unwrap(), UriOptions::NONE_GIVEN);
        assert_eq!(
            parse(&[("cache", "shared")]).unwrap(),
            UriOptions::NONE_GIVEN
        );
        // What "none given" means: every `uring_*` choice left to the VFS, write-behind
        // on, os_unix.c's defaults for the rest.
        let options = UriOptions::NONE_GIVEN;
        let choices = (
            options.backend,
            options.sync_mode,
            options.reads,
            options.writes,
        );
        assert_eq!(choices, (None, None, None, None));
        assert!(options.fallback_to_syscall.is_none() && options.syncs.is_none());
        assert!(
            options.direct.is_none() && options.sqpoll.is_none() && options.readahead.is_none()
        );
        assert!(
            options.write_behind && !options.wal_direct && options.sync_plan == SyncPlan::Linked
        );
        assert!(options.psow && !options.readonly_shm && !options.nolock);
    }

    #[test]
    fn every_parameter_is_read() {
        let options = parse(&[
            ("uring_backend", "syscall"),
            ("uring_fallback", "syscall"),
            ("uring_sync", "fdatasync"),
            ("uring_direct", "on"),
            ("uring_wal_direct", "off"),
            ("uring_sqpoll", "off"),
            ("uring_reads", "ring"),
            ("uring_writes", "syscall"),
            ("uring_syncs", "ring"),
            ("uring_write_behind", "off"),
            ("uring_sync_plan", "separate"),
            ("psow", "0"),
            ("readonly_shm", "yes"),
            ("nolock", "2"),
        ])
        .unwrap();
        assert_eq!(options.backend, Some(Backend::Syscall));
        assert_eq!(options.fallback_to_syscall, Some(true));
        assert_eq!(options.sync_mode, Some(SyncMode::Fdatasync));
        assert_eq!(options.direct, Some(true));
        assert!(!options.wal_direct);
        assert!(parse(&[("uring_wal_direct", "on")]).unwrap().wal_direct);
        assert_eq!(options.sqpoll, Some(false));
        assert_eq!(options.reads, Some(Submission::Ring));
        assert_eq!(options.writes, Some(Submission::Syscall));
        assert_eq!(options.syncs, Some(Submission::Ring));
        assert!(!options.write_behind);
        assert_eq!(options.sync_plan, SyncPlan::Separate);
        assert!(!options.psow && options.readonly_shm && options.nolock);
    }

    #[test]
    fn errors_name_the_parameter_and_its_values() {
        assert_eq!(
            parse(&[("uring_reads", "fast")]).unwrap_err(),
            "uring_reads=fast is not valid; use ring or syscall"
        );
        assert_eq!(
            parse(&[("uring_backend", "uring")]).unwrap_err(),
            "uring_backend=uring is not valid; use io_uring or syscall"
        );
        assert!(
            parse(&[("uring_wal_direct", "on"), ("uring_write_behind", "off")])
                .unwrap_err()
                .contains("needs write-behind")
        );
        let unknown = parse(&[("uring_turbo", "on")]).unwrap_err();
        assert!(
            unknown.starts_with("unknown URI parameter `uring_turbo`; this VFS knows uring_direct"),
            "{unknown}"
        );
    }
}
