//! Registration of the VFS object.

use crate::{Backend, Error, IoStats, Options};

/// What [`register`] did.
#[derive(Clone, Debug)]
pub struct Registration {
    pub vfs_name: String,
    /// The engine the VFS uses.
    pub backend: Backend,
    /// Set when io_uring was unavailable and the caller allowed the syscall fallback.
    pub fallback_reason: Option<String>,
}

/// Registers the VFS with the SQLite linked into this program (rusqlite `bundled`).
pub fn register(options: Options) -> Result<Registration, Error> {
    let _ = options;
    Err(Error::NoParentVfs)
}

/// Registers the VFS through the `sqlite3_api_routines` handed to a loadable extension.
///
/// # Safety
/// `api_routines` must be the pointer SQLite passed to the extension entry point.
pub unsafe fn register_with_api_routines(
    api_routines: *const std::ffi::c_void,
    options: Options,
) -> Result<Registration, Error> {
    let _ = (api_routines, options);
    Err(Error::NoParentVfs)
}

/// Totals of every file opened through the VFS registered as `vfs_name`.
pub fn vfs_stats(vfs_name: &str) -> Option<IoStats> {
    let _ = vfs_name;
    None
}

/// Sets the totals of `vfs_name` back to zero.
pub fn reset_vfs_stats(vfs_name: &str) {
    let _ = vfs_name;
}
