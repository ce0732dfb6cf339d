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
