//! Why io_uring cannot be used here, in words a user can act on: the setup errno, the
//! `kernel.io_uring_disabled` sysctl, seccomp and containers. And the [`ProbeReport`]
//! that `sqlite-uring probe` prints. A leaf of `io/`.

/// What `sqlite_uring::probe` found.
#[derive(Clone, Debug)]
pub struct ProbeReport {
    /// `uname -r`.
    pub kernel_release: String,
    /// `None` when a ring could be created; otherwise the cause and the remedy.
    pub unavailable_reason: Option<String>,
    /// Ring features the VFS uses, as `(name, available)`.
    pub features: Vec<(&'static str, bool)>,
    /// Opcodes the VFS submits, as `(name, supported)`.
    pub opcodes: Vec<(&'static str, bool)>,
}

impl ProbeReport {
    pub fn available(&self) -> bool {
        self.unavailable_reason.is_none()
    }
}

/// How the kernel completed a batch of ring operations of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingCompletion {
    /// Inside the submitting thread's `io_uring_enter`: no io-wq worker was started.
    Inline,
    /// Handed to io-wq: this many `iou-wrk-<tid>` worker threads of the submitting thread
    /// existed once the batch had completed.
    Workers(usize),
    /// Not possible on this filesystem (O_DIRECT refused with EINVAL).
    Unsupported,
}

impl RingCompletion {
    pub fn is_inline(self) -> bool {
        self == RingCompletion::Inline
    }

    /// `inline`, `io-wq workers (N)` or `unsupported`.
    pub fn describe(self) -> String {
        match self {
            RingCompletion::Inline => "inline".into(),
            RingCompletion::Workers(n) => format!("io-wq workers ({n})"),
            RingCompletion::Unsupported => "unsupported".into(),
        }
    }
}

/// Where ring writes and fsyncs to a file in one directory complete: each kind is
/// submitted as one batch from a fresh thread, whose `iou-wrk-<tid>` threads are counted
/// in `/proc/self/task/*/comm` before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingPlacement {
    /// Buffered 4 KiB writes that extend an empty file, one batch. In every write case
    /// but the next the file's mtime is in the past, so the first write must update it,
    /// as a commit's first write must.
    pub buffered_append: RingCompletion,
    /// The same right after the file was created, its mtime still current: what a
    /// benchmark that writes a fresh file in a tight loop sees.
    pub buffered_append_current_times: RingCompletion,
    /// Buffered 4 KiB writes into non-adjacent blocks the file already has (a commit's
    /// database pages).
    pub buffered_overwrite: RingCompletion,
    /// O_DIRECT 4 KiB writes that extend an empty file.
    pub direct_append: RingCompletion,
    /// O_DIRECT 4 KiB writes into non-adjacent blocks already written and synced.
    pub direct_overwrite: RingCompletion,
    /// One `IORING_OP_FSYNC` of a file with dirty pages.
    pub fsync: RingCompletion,
}

fn io_uring_disabled_sysctl() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .map(|text| text.trim().to_string())
}

const FALLBACK_HINT: &str = "or opt into the plain-syscall fallback (URI parameter \
    `uring_fallback=syscall`, `Options::fallback_to_syscall`, or SQLITE_URING_FALLBACK=syscall \
    for the loadable extension)";

pub(crate) fn explain_setup_failure(errno: i32) -> String {
    match errno {
        libc::ENOSYS => format!(
            "io_uring_setup returned ENOSYS: this kernel has no io_uring (older than 5.1 or \
             built without CONFIG_IO_URING). Remedy: run on Linux 5.6 or newer with io_uring, {FALLBACK_HINT}."
        ),
        libc::EPERM | libc::EACCES => {
            let sysctl = match io_uring_disabled_sysctl().as_deref() {
                Some("2") => "kernel.io_uring_disabled=2 forbids io_uring for every process".to_string(),
                Some("1") => "kernel.io_uring_disabled=1 allows io_uring only to members of kernel.io_uring_group".to_string(),
                Some(value) => eperm_cause(&format!("kernel.io_uring_disabled={value}")),
                None => eperm_cause("kernel.io_uring_disabled is absent"),
            };
            format!(
                "io_uring_setup was refused with {}: {sysctl}. Remedy: `sysctl kernel.io_uring_disabled=0`, \
                 a seccomp profile that allows io_uring_setup/io_uring_enter/io_uring_register \
                 (Docker: `--security-opt seccomp=unconfined`), {FALLBACK_HINT}.",
                if errno == libc::EPERM { "EPERM" } else { "EACCES" }
            )
        }
        libc::ENOMEM => format!(
            "io_uring_setup returned ENOMEM: the ring could not be allocated (before Linux 5.12 \
             rings count against RLIMIT_MEMLOCK). Remedy: raise `ulimit -l`, {FALLBACK_HINT}."
        ),
        libc::EMFILE | libc::ENFILE => format!(
            "io_uring_setup returned EMFILE/ENFILE: too many open files. Remedy: raise `ulimit -n`, {FALLBACK_HINT}."
        ),
        other => format!(
            "io_uring_setup failed with errno {other} ({}). Remedy: {FALLBACK_HINT}.",
            std::io::Error::from_raw_os_error(other)
        ),
    }
}

pub(crate) fn kernel_release() -> String {
    crate::sys::kernel_release()
}

/// Why `io_uring_setup` was refused with EPERM although `kernel.io_uring_disabled` (as
/// described by `sysctl`) allows it, with the evidence this process can see.
fn eperm_cause(sysctl: &str) -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let seccomp = status
        .lines()
        .find_map(|line| line.strip_prefix("Seccomp:"))
        .map(|mode| mode.trim().to_string());
    let container = ["/.dockerenv", "/run/.containerenv"]
        .iter()
        .any(|marker| std::path::Path::new(marker).exists());
    explain_eperm(sysctl, seccomp.as_deref(), container)
}

/// Docker's default seccomp profile blocks io_uring_setup, io_uring_enter and
/// io_uring_register since Docker 25 (moby/moby#46762, following containerd#9320).
const DOCKER_SECCOMP: &str = "Docker's default seccomp profile blocks io_uring_setup, \
    io_uring_enter and io_uring_register since Docker 25";

fn explain_eperm(sysctl: &str, seccomp_mode: Option<&str>, container: bool) -> String {
    let place = if container {
        "this process runs in a container"
    } else {
        "no container marker (/.dockerenv, /run/.containerenv) is visible"
    };
    match seccomp_mode {
        Some("2") => format!(
            "{sysctl}, and this process runs under a seccomp filter (Seccomp: 2 in \
             /proc/self/status; {place}): the cause is almost certainly that filter — \
             {DOCKER_SECCOMP}"
        ),
        Some(mode) => format!(
            "{sysctl}, and no seccomp filter is visible on this process (Seccomp: {mode}; \
             {place}), so an LSM (SELinux, AppArmor) or a sandbox is the likely cause; in a \
             container, note that {DOCKER_SECCOMP}"
        ),
        None => format!(
            "{sysctl}, so a seccomp filter or an LSM is the likely cause ({place}); \
             {DOCKER_SECCOMP}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::explain_eperm;

    #[test]
    fn eperm_names_dockers_seccomp_profile() {
        let filtered = explain_eperm("kernel.io_uring_disabled=0", Some("2"), true);
        assert!(
            filtered.contains("seccomp filter (Seccomp: 2"),
            "{filtered}"
        );
        assert!(
            filtered.contains("this process runs in a container"),
            "{filtered}"
        );
        for mode in [Some("2"), Some("0"), None] {
            let text = explain_eperm("kernel.io_uring_disabled=0", mode, false);
            assert!(
                text.contains("Docker's default seccomp profile blocks io_uring_setup")
                    && text.contains("Docker 25"),
                "{text}"
            );
        }
        let unfiltered = explain_eperm("kernel.io_uring_disabled=0", Some("0"), false);
        assert!(unfiltered.contains("LSM"), "{unfiltered}");
    }
}
