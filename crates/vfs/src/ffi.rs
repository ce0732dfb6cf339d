//! Hand-written declarations of the SQLite C structures and constants the VFS uses.
//!
//! Layouts follow `sqlite3.h` (struct `sqlite3_vfs` version 3, `sqlite3_io_methods`
//! version 3, `sqlite3_file`). They are stable ABI: SQLite only ever appends fields.

#![allow(non_camel_case_types, dead_code)]

use std::ffi::{c_char, c_int, c_void};

pub type sqlite3_int64 = i64;
pub type sqlite3_syscall_ptr = Option<unsafe extern "C" fn()>;

#[repr(C)]
pub struct sqlite3_file {
    pub methods: *const sqlite3_io_methods,
}

#[repr(C)]
pub struct sqlite3_io_methods {
    pub i_version: c_int,
    pub x_close: Option<unsafe extern "C" fn(*mut sqlite3_file) -> c_int>,
    pub x_read: Option<unsafe extern "C" fn(*mut sqlite3_file, *mut c_void, c_int, i64) -> c_int>,
    pub x_write:
        Option<unsafe extern "C" fn(*mut sqlite3_file, *const c_void, c_int, i64) -> c_int>,
    pub x_truncate: Option<unsafe extern "C" fn(*mut sqlite3_file, i64) -> c_int>,
    pub x_sync: Option<unsafe extern "C" fn(*mut sqlite3_file, c_int) -> c_int>,
    pub x_file_size: Option<unsafe extern "C" fn(*mut sqlite3_file, *mut i64) -> c_int>,
    pub x_lock: Option<unsafe extern "C" fn(*mut sqlite3_file, c_int) -> c_int>,
    pub x_unlock: Option<unsafe extern "C" fn(*mut sqlite3_file, c_int) -> c_int>,
    pub x_check_reserved_lock: Option<unsafe extern "C" fn(*mut sqlite3_file, *mut c_int) -> c_int>,
    pub x_file_control:
        Option<unsafe extern "C" fn(*mut sqlite3_file, c_int, *mut c_void) -> c_int>,
    pub x_sector_size: Option<unsafe extern "C" fn(*mut sqlite3_file) -> c_int>,
    pub x_device_characteristics: Option<unsafe extern "C" fn(*mut sqlite3_file) -> c_int>,
    pub x_shm_map: Option<
        unsafe extern "C" fn(*mut sqlite3_file, c_int, c_int, c_int, *mut *mut c_void) -> c_int,
    >,
    pub x_shm_lock: Option<unsafe extern "C" fn(*mut sqlite3_file, c_int, c_int, c_int) -> c_int>,
    pub x_shm_barrier: Option<unsafe extern "C" fn(*mut sqlite3_file)>,
    pub x_shm_unmap: Option<unsafe extern "C" fn(*mut sqlite3_file, c_int) -> c_int>,
    pub x_fetch:
        Option<unsafe extern "C" fn(*mut sqlite3_file, i64, c_int, *mut *mut c_void) -> c_int>,
    pub x_unfetch: Option<unsafe extern "C" fn(*mut sqlite3_file, i64, *mut c_void) -> c_int>,
}

#[repr(C)]
pub struct sqlite3_vfs {
    pub i_version: c_int,
    pub sz_os_file: c_int,
    pub mx_pathname: c_int,
    pub p_next: *mut sqlite3_vfs,
    pub z_name: *const c_char,
    pub p_app_data: *mut c_void,
    pub x_open: Option<
        unsafe extern "C" fn(
            *mut sqlite3_vfs,
            *const c_char,
            *mut sqlite3_file,
            c_int,
            *mut c_int,
        ) -> c_int,
    >,
    pub x_delete: Option<unsafe extern "C" fn(*mut sqlite3_vfs, *const c_char, c_int) -> c_int>,
    pub x_access:
        Option<unsafe extern "C" fn(*mut sqlite3_vfs, *const c_char, c_int, *mut c_int) -> c_int>,
    pub x_full_pathname:
        Option<unsafe extern "C" fn(*mut sqlite3_vfs, *const c_char, c_int, *mut c_char) -> c_int>,
    pub x_dl_open: Option<unsafe extern "C" fn(*mut sqlite3_vfs, *const c_char) -> *mut c_void>,
    pub x_dl_error: Option<unsafe extern "C" fn(*mut sqlite3_vfs, c_int, *mut c_char)>,
    pub x_dl_sym: Option<
        unsafe extern "C" fn(
            *mut sqlite3_vfs,
            *mut c_void,
            *const c_char,
        ) -> Option<unsafe extern "C" fn()>,
    >,
    pub x_dl_close: Option<unsafe extern "C" fn(*mut sqlite3_vfs, *mut c_void)>,
    pub x_randomness: Option<unsafe extern "C" fn(*mut sqlite3_vfs, c_int, *mut c_char) -> c_int>,
    pub x_sleep: Option<unsafe extern "C" fn(*mut sqlite3_vfs, c_int) -> c_int>,
    pub x_current_time: Option<unsafe extern "C" fn(*mut sqlite3_vfs, *mut f64) -> c_int>,
    pub x_get_last_error:
        Option<unsafe extern "C" fn(*mut sqlite3_vfs, c_int, *mut c_char) -> c_int>,
    pub x_current_time_int64: Option<unsafe extern "C" fn(*mut sqlite3_vfs, *mut i64) -> c_int>,
    pub x_set_system_call:
        Option<unsafe extern "C" fn(*mut sqlite3_vfs, *const c_char, sqlite3_syscall_ptr) -> c_int>,
    pub x_get_system_call:
        Option<unsafe extern "C" fn(*mut sqlite3_vfs, *const c_char) -> sqlite3_syscall_ptr>,
    pub x_next_system_call:
        Option<unsafe extern "C" fn(*mut sqlite3_vfs, *const c_char) -> *const c_char>,
}

// Primary result codes.
pub const SQLITE_OK: c_int = 0;
pub const SQLITE_ERROR: c_int = 1;
pub const SQLITE_PERM: c_int = 3;
pub const SQLITE_BUSY: c_int = 5;
pub const SQLITE_NOMEM: c_int = 7;
pub const SQLITE_READONLY: c_int = 8;
pub const SQLITE_IOERR: c_int = 10;
pub const SQLITE_NOTFOUND: c_int = 12;
pub const SQLITE_FULL: c_int = 13;
pub const SQLITE_CANTOPEN: c_int = 14;
pub const SQLITE_MISUSE: c_int = 21;
pub const SQLITE_NOTICE: c_int = 27;
pub const SQLITE_WARNING: c_int = 28;
pub const SQLITE_OK_LOAD_PERMANENTLY: c_int = SQLITE_OK | (1 << 8);

// Extended I/O result codes.
pub const SQLITE_IOERR_READ: c_int = SQLITE_IOERR | (1 << 8);
pub const SQLITE_IOERR_SHORT_READ: c_int = SQLITE_IOERR | (2 << 8);
pub const SQLITE_IOERR_WRITE: c_int = SQLITE_IOERR | (3 << 8);
pub const SQLITE_IOERR_FSYNC: c_int = SQLITE_IOERR | (4 << 8);
pub const SQLITE_IOERR_DIR_FSYNC: c_int = SQLITE_IOERR | (5 << 8);
pub const SQLITE_IOERR_TRUNCATE: c_int = SQLITE_IOERR | (6 << 8);
pub const SQLITE_IOERR_FSTAT: c_int = SQLITE_IOERR | (7 << 8);
pub const SQLITE_IOERR_UNLOCK: c_int = SQLITE_IOERR | (8 << 8);
pub const SQLITE_IOERR_RDLOCK: c_int = SQLITE_IOERR | (9 << 8);
pub const SQLITE_IOERR_DELETE: c_int = SQLITE_IOERR | (10 << 8);
pub const SQLITE_IOERR_NOMEM: c_int = SQLITE_IOERR | (12 << 8);
pub const SQLITE_IOERR_CHECKRESERVEDLOCK: c_int = SQLITE_IOERR | (14 << 8);
pub const SQLITE_IOERR_LOCK: c_int = SQLITE_IOERR | (15 << 8);
pub const SQLITE_IOERR_CLOSE: c_int = SQLITE_IOERR | (16 << 8);
pub const SQLITE_IOERR_SHMOPEN: c_int = SQLITE_IOERR | (18 << 8);
pub const SQLITE_IOERR_SHMSIZE: c_int = SQLITE_IOERR | (19 << 8);
pub const SQLITE_IOERR_SHMLOCK: c_int = SQLITE_IOERR | (20 << 8);
pub const SQLITE_IOERR_SHMMAP: c_int = SQLITE_IOERR | (21 << 8);
pub const SQLITE_IOERR_DELETE_NOENT: c_int = SQLITE_IOERR | (23 << 8);
pub const SQLITE_IOERR_MMAP: c_int = SQLITE_IOERR | (24 << 8);
pub const SQLITE_IOERR_CORRUPTFS: c_int = SQLITE_IOERR | (33 << 8);
pub const SQLITE_READONLY_CANTINIT: c_int = SQLITE_READONLY | (5 << 8);
pub const SQLITE_READONLY_DIRECTORY: c_int = SQLITE_READONLY | (6 << 8);

// xOpen flags.
pub const SQLITE_OPEN_READONLY: c_int = 0x0000_0001;
pub const SQLITE_OPEN_READWRITE: c_int = 0x0000_0002;
pub const SQLITE_OPEN_CREATE: c_int = 0x0000_0004;
pub const SQLITE_OPEN_DELETEONCLOSE: c_int = 0x0000_0008;
pub const SQLITE_OPEN_EXCLUSIVE: c_int = 0x0000_0010;
pub const SQLITE_OPEN_MAIN_DB: c_int = 0x0000_0100;
pub const SQLITE_OPEN_TEMP_DB: c_int = 0x0000_0200;
pub const SQLITE_OPEN_TRANSIENT_DB: c_int = 0x0000_0400;
pub const SQLITE_OPEN_MAIN_JOURNAL: c_int = 0x0000_0800;
pub const SQLITE_OPEN_TEMP_JOURNAL: c_int = 0x0000_1000;
pub const SQLITE_OPEN_SUBJOURNAL: c_int = 0x0000_2000;
pub const SQLITE_OPEN_SUPER_JOURNAL: c_int = 0x0000_4000;
pub const SQLITE_OPEN_WAL: c_int = 0x0008_0000;
pub const SQLITE_OPEN_NOFOLLOW: c_int = 0x0100_0000;

// Lock levels (xLock/xUnlock).
pub const SQLITE_LOCK_NONE: c_int = 0;
pub const SQLITE_LOCK_SHARED: c_int = 1;
pub const SQLITE_LOCK_RESERVED: c_int = 2;
pub const SQLITE_LOCK_PENDING: c_int = 3;
pub const SQLITE_LOCK_EXCLUSIVE: c_int = 4;

// xSync flags.
pub const SQLITE_SYNC_NORMAL: c_int = 0x02;
pub const SQLITE_SYNC_FULL: c_int = 0x03;
pub const SQLITE_SYNC_DATAONLY: c_int = 0x10;

// xAccess flags.
pub const SQLITE_ACCESS_EXISTS: c_int = 0;

// xShmLock flags and lock count.
pub const SQLITE_SHM_UNLOCK: c_int = 1;
pub const SQLITE_SHM_LOCK: c_int = 2;
pub const SQLITE_SHM_SHARED: c_int = 4;
pub const SQLITE_SHM_EXCLUSIVE: c_int = 8;
pub const SQLITE_SHM_NLOCK: c_int = 8;

// Device characteristics.
pub const SQLITE_IOCAP_POWERSAFE_OVERWRITE: c_int = 0x0000_1000;
pub const SQLITE_IOCAP_SUBPAGE_READ: c_int = 0x0000_8000;

// File-control opcodes this VFS answers; every other one gets SQLITE_NOTFOUND.
pub const SQLITE_FCNTL_LOCKSTATE: c_int = 1;
pub const SQLITE_FCNTL_LAST_ERRNO: c_int = 4;
pub const SQLITE_FCNTL_SIZE_HINT: c_int = 5;
pub const SQLITE_FCNTL_CHUNK_SIZE: c_int = 6;
pub const SQLITE_FCNTL_PERSIST_WAL: c_int = 10;
pub const SQLITE_FCNTL_VFSNAME: c_int = 12;
pub const SQLITE_FCNTL_POWERSAFE_OVERWRITE: c_int = 13;
pub const SQLITE_FCNTL_PRAGMA: c_int = 14;
pub const SQLITE_FCNTL_TEMPFILENAME: c_int = 16;
pub const SQLITE_FCNTL_MMAP_SIZE: c_int = 18;
pub const SQLITE_FCNTL_HAS_MOVED: c_int = 20;
pub const SQLITE_FCNTL_SYNC: c_int = 21;
pub const SQLITE_FCNTL_COMMIT_PHASETWO: c_int = 22;
pub const SQLITE_FCNTL_CKPT_DONE: c_int = 37;
pub const SQLITE_FCNTL_CKPT_START: c_int = 39;
pub const SQLITE_FCNTL_EXTERNAL_READER: c_int = 40;
pub const SQLITE_FCNTL_NULL_IO: c_int = 43;
