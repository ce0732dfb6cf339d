//! `libsqlite_uring.so`: the loadable-extension shape of the io_uring VFS.
//!
//! This crate is only the two entry points; everything else is in `sqlite-uring`
//! (`crates/vfs`). It links no SQLite: every SQLite call goes through the
//! `sqlite3_api_routines` table SQLite hands to the entry point.
//!
//! ```text
//! sqlite> .load target/release/libsqlite_uring
//! sqlite> .open file:test.db?vfs=io_uring
//! ```
//!
//! Environment, read at load:
//! * `SQLITE_URING_FALLBACK=syscall` lets the extension register with plain syscalls where
//!   io_uring is unavailable (it is refused otherwise);
//! * `RUST_LOG=sqlite_uring=trace` traces every VFS call and ring submission (a cdylib
//!   has its own copy of `log`'s statics, so the extension installs its own logger);
//!   `SQLITE_URING_LOG=stderr|sqlite3_log|<file>` says where the records go (default
//!   stderr; `sqlite3_log` reaches the host's `SQLITE_CONFIG_LOG` callback, if it set one).

use std::ffi::{c_char, c_int, c_void};

use sqlite_uring::{register_with_api_routines, Options};

const SQLITE_OK_LOAD_PERMANENTLY: c_int = 256;
const SQLITE_ERROR: c_int = 1;

/// Stores `message` in `*error_message` with sqlite3_malloc (through the API table, via
/// the library) so SQLite can free it.
///
/// # Safety
/// `api_routines` and `error_message` must be what SQLite passed to the entry point.
unsafe fn report(error_message: *mut *mut c_char, api_routines: *const c_void, message: &str) {
    if error_message.is_null() {
        return;
    }
    // SAFETY: forwarded caller contract.
    unsafe { *error_message = sqlite_uring::alloc_error_message(api_routines, message) };
}

/// # Safety
/// Called by SQLite's extension loader with its own arguments.
unsafe fn init(
    error_message: *mut *mut c_char,
    api_routines: *const c_void,
    make_default: bool,
) -> c_int {
    let fallback = std::env::var("SQLITE_URING_FALLBACK").ok();
    let options = Options {
        make_default,
        fallback_to_syscall: fallback.as_deref() == Some("syscall"),
        ..Options::default()
    };
    if let Some(value) = fallback
        .as_deref()
        .filter(|v| *v != "syscall" && *v != "none")
    {
        // SAFETY: forwarded caller contract.
        unsafe {
            report(
                error_message,
                api_routines,
                &format!(
                    "sqlite-uring: SQLITE_URING_FALLBACK={value} is not valid; use syscall or none"
                ),
            )
        };
        return SQLITE_ERROR;
    }
    let logging = std::panic::catch_unwind(|| {
        // SAFETY: `api_routines` is the table SQLite handed us.
        unsafe { sqlite_uring::trace::init_extension_logging(api_routines) }
    });
    if let Ok(Err(message)) = logging {
        // SAFETY: forwarded caller contract.
        unsafe {
            report(
                error_message,
                api_routines,
                &format!("sqlite-uring: {message}"),
            )
        };
        return SQLITE_ERROR;
    }
    let outcome = std::panic::catch_unwind(|| {
        // SAFETY: `api_routines` is the table SQLite handed us.
        unsafe { register_with_api_routines(api_routines, options) }
    });
    match outcome {
        Ok(Ok(_registration)) => SQLITE_OK_LOAD_PERMANENTLY,
        Ok(Err(error)) => {
            // SAFETY: forwarded caller contract.
            unsafe {
                report(
                    error_message,
                    api_routines,
                    &format!("sqlite-uring: {error}"),
                )
            };
            SQLITE_ERROR
        }
        Err(_) => {
            // SAFETY: forwarded caller contract.
            unsafe {
                report(
                    error_message,
                    api_routines,
                    "sqlite-uring: internal error during registration",
                )
            };
            SQLITE_ERROR
        }
    }
}

/// Entry point for `.load libsqlite_uring`: registers the `io_uring` VFS.
///
/// # Safety
/// Called by SQLite's extension loader.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_sqliteuring_init(
    _db: *mut c_void,
    error_message: *mut *mut c_char,
    api_routines: *const c_void,
) -> c_int {
    // SAFETY: SQLite's own arguments.
    unsafe { init(error_message, api_routines, false) }
}

/// Entry point that also makes `io_uring` the default VFS:
/// `SELECT load_extension('…/libsqlite_uring', 'sqlite3_sqliteuring_default_init')`.
///
/// # Safety
/// Called by SQLite's extension loader.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_sqliteuring_default_init(
    _db: *mut c_void,
    error_message: *mut *mut c_char,
    api_routines: *const c_void,
) -> c_int {
    // SAFETY: SQLite's own arguments.
    unsafe { init(error_message, api_routines, true) }
}
