//! `probe`: can this process use io_uring, and with which features?

/// What [`probe`] found.
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

/// Creates a ring, asks the kernel what it supports, and explains failures.
pub fn probe() -> ProbeReport {
    crate::io::uring::probe_report()
}

/// Why `io_uring_setup` was refused with EPERM although `kernel.io_uring_disabled` (as
/// described by `sysctl`) allows it, with the evidence this process can see.
pub(crate) fn eperm_cause(sysctl: &str) -> String {
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
