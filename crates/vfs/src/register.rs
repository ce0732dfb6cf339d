//! Registration: builds the `sqlite3_vfs` object over a [`VfsState`] and hands it to
//! SQLite; the registry of what was registered, and the public functions that read it.

use std::ffi::{c_int, CString};
use std::sync::Mutex;

use crate::api::SqliteApi;
use crate::config::{Backend, Options};
use crate::entry;
use crate::error::Error;
use crate::ffi::*;
#[cfg(feature = "test-support")]
use crate::io::fault::FaultPlan;
use crate::io::{EngineKind, Routing};
use crate::stats::{IoStats, VfsStats};
use crate::vfs::VfsState;

/// os_unix.c MAX_PATHNAME.
const MAX_PATHNAME_BYTES: c_int = 512;

/// What [`register`] did.
#[derive(Clone, Debug)]
pub struct Registration {
    pub vfs_name: String,
    /// The engine the VFS uses.
    pub backend: Backend,
    /// Set when io_uring was unavailable and the caller allowed the syscall fallback.
    pub fallback_reason: Option<String>,
}

struct Registered {
    state: &'static VfsState,
    vfs: *mut sqlite3_vfs,
}

// SAFETY: the registry only stores leaked, immutable registration objects.
unsafe impl Send for Registered {}

static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Vec<Registered>> {
    REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers the VFS with the SQLite linked into this program (rusqlite `bundled`).
///
/// Registering the same name again with the same options is a no-op (apart from
/// `make_default`); with different options it is an error.
pub fn register(options: Options) -> Result<Registration, Error> {
    register_impl(SqliteApi::linked(), options, None)
}

/// Registers the VFS through the `sqlite3_api_routines` handed to a loadable extension.
///
/// # Safety
/// `api_routines` must be the pointer SQLite passed to the extension entry point.
pub unsafe fn register_with_api_routines(
    api_routines: *const std::ffi::c_void,
    options: Options,
) -> Result<Registration, Error> {
    // SAFETY: forwarded caller contract.
    let api = unsafe { SqliteApi::from_routines(api_routines) }.ok_or_else(|| {
        Error::InvalidOption("the extension was handed no sqlite3_api_routines".into())
    })?;
    register_impl(api, options, None)
}

/// Registers a VFS whose I/O passes through `plan` (tests drive error paths with it).
/// The plan's engine decides how ops are issued ([`FaultPlan::with_submissions`]); the
/// `*_submission` fields of `options` are not used. Test machinery (feature
/// `test-support`).
#[cfg(feature = "test-support")]
pub fn register_with_faults(
    options: Options,
    plan: std::sync::Arc<FaultPlan>,
) -> Result<Registration, Error> {
    register_impl(SqliteApi::linked(), options, Some(EngineKind::Fault(plan)))
}

/// Registers a VFS; `test_engine`: the engine a test imposes on every file instead of
/// the one `options` choose.
fn register_impl(
    api: SqliteApi,
    options: Options,
    test_engine: Option<EngineKind>,
) -> Result<Registration, Error> {
    if options.vfs_name.is_empty() || options.vfs_name.contains('\0') {
        return Err(Error::InvalidOption(format!(
            "vfs_name {:?} must be non-empty and contain no NUL byte",
            options.vfs_name
        )));
    }
    let mut registry = registry();
    if let Some(existing) = registry.iter().find(|r| r.state.name == options.vfs_name) {
        let same = existing.state.backend == options.backend
            && existing.state.sync_mode == options.sync_mode
            && existing.state.read_submission == options.read_submission
            && existing.state.write_submission == options.write_submission
            && existing.state.sync_submission == options.sync_submission
            && existing.state.direct_io == options.direct_io
            && existing.state.sqpoll == options.sqpoll
            && test_engine.is_none()
            && !existing.state.engine.injects_faults();
        if !same {
            return Err(Error::InvalidOption(format!(
                "a VFS named {:?} is already registered with different options",
                options.vfs_name
            )));
        }
        // SAFETY: the registered object is leaked and fully initialised.
        let code = unsafe {
            existing
                .state
                .api
                .vfs_register(existing.vfs, options.make_default)
        };
        if code != SQLITE_OK {
            return Err(Error::RegistrationFailed {
                vfs_name: options.vfs_name,
                sqlite_code: code,
            });
        }
        return Ok(Registration {
            vfs_name: existing.state.name.clone(),
            backend: existing.state.backend,
            fallback_reason: existing.state.fallback_reason.clone(),
        });
    }

    let Some(parent) = api.vfs_find(c"unix") else {
        return Err(Error::NoParentVfs);
    };
    let mut backend = options.backend;
    let mut fallback_reason = None;
    if backend == Backend::IoUring {
        let routing = Routing::ALL_RING.with_sqpoll(options.sqpoll);
        if let Err(reason) = EngineKind::IoUring(routing).ensure_available() {
            if !options.fallback_to_syscall {
                return Err(Error::IoUringUnavailable(reason));
            }
            api.log(
                SQLITE_WARNING,
                &format!("sqlite-uring: using plain syscalls: {reason}"),
            );
            backend = Backend::Syscall;
            fallback_reason = Some(reason);
        }
    }
    let routing = Routing::from_options(&options);
    let engine = match (test_engine, backend) {
        (Some(engine), _) => engine,
        (None, Backend::IoUring) => EngineKind::IoUring(routing),
        (None, Backend::Syscall) => EngineKind::Syscall,
    };
    let c_name = CString::new(options.vfs_name.clone()).expect("checked for NUL above");
    let state: &'static VfsState = Box::leak(Box::new(VfsState {
        name: options.vfs_name.clone(),
        api,
        parent,
        engine,
        fallback_to_syscall: options.fallback_to_syscall,
        sync_mode: options.sync_mode,
        direct_io: options.direct_io,
        stats: VfsStats::default(),
        routing,
        backend,
        read_submission: options.read_submission,
        write_submission: options.write_submission,
        sync_submission: options.sync_submission,
        sqpoll: options.sqpoll,
        readahead: options.readahead,
        fallback_reason: fallback_reason.clone(),
        mmap_eof_buffer_bytes: crate::mmap::eof_buffer_bytes(api.libversion_number()),
        c_name,
    }));
    let vfs: *mut sqlite3_vfs = Box::leak(Box::new(sqlite3_vfs {
        i_version: 3,
        sz_os_file: std::mem::size_of::<entry::RawFile>() as c_int,
        mx_pathname: MAX_PATHNAME_BYTES,
        p_next: std::ptr::null_mut(),
        z_name: state.c_name.as_ptr(),
        p_app_data: state as *const VfsState as *mut std::ffi::c_void,
        x_open: Some(entry::x_open),
        x_delete: Some(entry::x_delete),
        x_access: Some(entry::x_access),
        x_full_pathname: Some(entry::x_full_pathname),
        x_dl_open: Some(entry::x_dl_open),
        x_dl_error: Some(entry::x_dl_error),
        x_dl_sym: Some(entry::x_dl_sym),
        x_dl_close: Some(entry::x_dl_close),
        x_randomness: Some(entry::x_randomness),
        x_sleep: Some(entry::x_sleep),
        x_current_time: Some(entry::x_current_time),
        x_get_last_error: Some(entry::x_get_last_error),
        x_current_time_int64: Some(entry::x_current_time_int64),
        x_set_system_call: Some(entry::x_set_system_call),
        x_get_system_call: Some(entry::x_get_system_call),
        x_next_system_call: Some(entry::x_next_system_call),
    }));
    // SAFETY: `vfs` is fully initialised and leaked, so it outlives the registration.
    let code = unsafe { api.vfs_register(vfs, options.make_default) };
    if code != SQLITE_OK {
        return Err(Error::RegistrationFailed {
            vfs_name: options.vfs_name,
            sqlite_code: code,
        });
    }
    registry.push(Registered { state, vfs });
    Ok(Registration {
        vfs_name: options.vfs_name,
        backend,
        fallback_reason,
    })
}

/// Totals of every file opened through the VFS registered as `vfs_name`, open files
/// included: every call that has returned is counted.
pub fn vfs_stats(vfs_name: &str) -> Option<IoStats> {
    registry()
        .iter()
        .find(|r| r.state.name == vfs_name)
        .map(|r| r.state.stats.snapshot())
}

/// Sets the totals of `vfs_name` back to zero: what open files did before is not
/// counted later either.
pub fn reset_vfs_stats(vfs_name: &str) {
    if let Some(r) = registry().iter().find(|r| r.state.name == vfs_name) {
        r.state.stats.reset();
    }
}

/// The SQLite library version the VFS was registered with (for the first registration).
pub fn sqlite_version() -> Option<String> {
    registry().first().map(|r| r.state.api.libversion())
}

/// Copies `message` into memory from the `sqlite3_malloc` of the SQLite that handed the
/// extension `api_routines`, for an entry point's `pzErrMsg` (SQLite frees it).
///
/// # Safety
/// `api_routines` must be the pointer SQLite passed to the extension entry point.
#[doc(hidden)]
pub unsafe fn alloc_error_message(
    api_routines: *const std::ffi::c_void,
    message: &str,
) -> *mut std::ffi::c_char {
    // SAFETY: forwarded caller contract.
    match unsafe { SqliteApi::from_routines(api_routines) } {
        Some(api) => api.alloc_cstring(message),
        None => std::ptr::null_mut(),
    }
}
