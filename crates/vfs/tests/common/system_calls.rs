//! Replacing a VFS's system calls by name (`xSetSystemCall`), as SQLite's own fault tests
//! do: the pieces shared by the suites that compare `unix` and `io_uring` under the same
//! stand-ins (`syscalls.rs`, `os_errors.rs`). Each suite keeps its own stand-ins, which
//! consult its own failure plan.

use std::ffi::{c_int, CStr};

use rusqlite::ffi;

/// A stand-in, as `xSetSystemCall` takes it (`sqlite3_syscall_ptr`).
pub type Stand = unsafe extern "C" fn();

/// A stand-in of any function-pointer type, as a [`Stand`].
pub fn erase<F: Copy>(function: F) -> Stand {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<Stand>());
    // SAFETY: `F` is a function-pointer type (size checked); the VFS calls it back with
    // the signature its name has, which each stand-in has.
    unsafe { std::mem::transmute_copy(&function) }
}

/// The registered VFS named `name`.
pub fn vfs(name: &str) -> *mut ffi::sqlite3_vfs {
    let name = std::ffi::CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name; the result is SQLite's registered VFS or null.
    let vfs = unsafe { ffi::sqlite3_vfs_find(name.as_ptr()) };
    assert!(!vfs.is_null());
    vfs
}

/// xSetSystemCall on `vfs_name` (no name: restore every default); the SQLite result code.
pub fn set_call(vfs_name: &str, call: Option<&CStr>, function: Option<Stand>) -> c_int {
    let vfs = vfs(vfs_name);
    // SAFETY: `vfs` is a registered VFS; its version is checked before the call.
    unsafe {
        assert!((*vfs).iVersion >= 3, "{vfs_name} has no xSetSystemCall");
        let set = (*vfs).xSetSystemCall.expect("xSetSystemCall");
        set(vfs, call.map_or(std::ptr::null(), CStr::as_ptr), function)
    }
}

/// The path a descriptor of this process names ("" when it has none).
pub fn path_of_fd(fd: c_int) -> String {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// 0 for success, else the error's extended result code.
pub fn code_of<T>(result: rusqlite::Result<T>) -> c_int {
    match result {
        Ok(_) => 0,
        Err(error) => super::extended_code(&error),
    }
}

/// 200 rows of 300-byte blobs in `t(k, v)`: the database the scenarios start from.
pub const SEED_SQL: &str = "CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);
     WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<200)
     INSERT INTO t SELECT i, CAST(printf('%0300d', i) AS BLOB) FROM n;";
