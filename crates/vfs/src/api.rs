//! The SQLite functions the VFS calls, as a table of function pointers.
//!
//! A loadable extension must not link a second copy of SQLite: every call goes through the
//! `sqlite3_api_routines` table SQLite hands to the entry point ([`SqliteApi::from_routines`]).
//! A program that links SQLite itself (rusqlite `bundled`) fills the same table from the
//! linked symbols ([`SqliteApi::linked`]). The rest of the crate only sees [`SqliteApi`].

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

use crate::ffi::{sqlite3_syscall_ptr, sqlite3_vfs};
use crate::open_name::{OpenName, UriParameters};
use crate::sys::{unix_fcntl_gate, FilePath, GateInstall};

type VfsFind = unsafe extern "C" fn(*const c_char) -> *mut sqlite3_vfs;
type VfsRegister = unsafe extern "C" fn(*mut sqlite3_vfs, c_int) -> c_int;
type Malloc = unsafe extern "C" fn(c_int) -> *mut c_void;
type UriParameter = unsafe extern "C" fn(*const c_char, *const c_char) -> *const c_char;
type UriKey = unsafe extern "C" fn(*const c_char, c_int) -> *const c_char;
type Log = unsafe extern "C" fn(c_int, *const c_char, ...);
type Libversion = unsafe extern "C" fn() -> *const c_char;
type LibversionNumber = unsafe extern "C" fn() -> c_int;
type Sourceid = unsafe extern "C" fn() -> *const c_char;
type TestControl = unsafe extern "C" fn(c_int, ...) -> c_int;

/// A VFS object SQLite found registered (`unix`, which the VFS delegates path
/// operations to): SQLite's own static object, which lives as long as the process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FoundVfs(std::ptr::NonNull<sqlite3_vfs>);

// SAFETY: the object is SQLite's, never freed, and SQLite calls its methods from any
// thread; holding its address on another thread changes nothing of that.
unsafe impl Send for FoundVfs {}
// SAFETY: as above; the address is only read.
unsafe impl Sync for FoundVfs {}

impl FoundVfs {
    /// The object's address, for calling its methods (`entry.rs`).
    pub(crate) fn as_ptr(self) -> *mut sqlite3_vfs {
        self.0.as_ptr()
    }

    /// What the VFS's system call `name` does now (its xGetSystemCall); `None` for an
    /// unknown name or a VFS without the method.
    #[cold]
    pub(crate) fn system_call(self, name: &CStr) -> sqlite3_syscall_ptr {
        let vfs = self.as_ptr();
        // SAFETY: `vfs` is SQLite's live, never-freed object (see the type); the method
        // only reads the NUL-terminated name. Version 3 objects have the method.
        unsafe {
            match ((*vfs).i_version >= 3, (*vfs).x_get_system_call) {
                (true, Some(get)) => get(vfs, name.as_ptr()),
                _ => None,
            }
        }
    }

    /// Puts the gate between this VFS's closes of a database's descriptors and `unix`
    /// connections' lock requests (`sys/fd.rs`) in this (`unix`) VFS's system-call
    /// table, unless it is there or the `fcntl` entry is not the C library's. Made at
    /// every open of a main database: someone may have reset the table since.
    #[cold]
    pub(crate) fn gate_lock_requests(self) {
        if let GateInstall::Replace(gate) = unix_fcntl_gate(self.system_call(c"fcntl")) {
            // SAFETY: the gate takes fcntl's C signature and forwards to the C library's
            // `fcntl`, which was the entry (`sys/fd.rs`).
            unsafe { self.set_system_call(c"fcntl", gate) };
        }
    }

    /// Replaces the VFS's system call `name` by `function` (its xSetSystemCall; an
    /// unknown name or a VFS without the method changes nothing, as the next
    /// [`FoundVfs::system_call`] shows).
    ///
    /// # Safety
    /// `function` must be callable as system call `name` is, with its contract.
    #[cold]
    unsafe fn set_system_call(self, name: &CStr, function: sqlite3_syscall_ptr) {
        let vfs = self.as_ptr();
        // SAFETY: as in `system_call`; the function's signature is the caller's contract.
        unsafe {
            if let (true, Some(set)) = ((*vfs).i_version >= 3, (*vfs).x_set_system_call) {
                set(vfs, name.as_ptr(), function);
            }
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct SqliteApi {
    vfs_find: VfsFind,
    vfs_register: VfsRegister,
    malloc: Malloc,
    uri_parameter: UriParameter,
    uri_key: UriKey,
    log: Log,
    libversion: Libversion,
    libversion_number: LibversionNumber,
    test_control: TestControl,
    sourceid: Sourceid,
}

/// Slot numbers of the functions we use in `struct sqlite3_api_routines` (`sqlite3ext.h`):
/// the position of each member, counting from zero. The struct only ever grows at the end.
mod slot {
    pub const LIBVERSION: usize = 66;
    pub const LIBVERSION_NUMBER: usize = 67;
    pub const MALLOC: usize = 68;
    pub const VFS_FIND: usize = 141;
    pub const VFS_REGISTER: usize = 142;
    pub const TEST_CONTROL: usize = 147;
    pub const LOG: usize = 167;
    pub const SOURCEID: usize = 169;
    pub const URI_PARAMETER: usize = 189;
    pub const URI_KEY: usize = 245;
}

mod linked {
    use super::*;
    extern "C" {
        pub fn sqlite3_vfs_find(name: *const c_char) -> *mut sqlite3_vfs;
        pub fn sqlite3_vfs_register(vfs: *mut sqlite3_vfs, make_default: c_int) -> c_int;
        pub fn sqlite3_malloc(size: c_int) -> *mut c_void;
        pub fn sqlite3_uri_parameter(name: *const c_char, key: *const c_char) -> *const c_char;
        pub fn sqlite3_uri_key(name: *const c_char, index: c_int) -> *const c_char;
        pub fn sqlite3_log(code: c_int, format: *const c_char, ...);
        pub fn sqlite3_libversion() -> *const c_char;
        pub fn sqlite3_libversion_number() -> c_int;
        pub fn sqlite3_test_control(op: c_int, ...) -> c_int;
        pub fn sqlite3_sourceid() -> *const c_char;
    }
}

impl SqliteApi {
    /// The SQLite linked into this program. Only [`crate::register`] calls this, so the
    /// loadable extension never references these symbols.
    pub(crate) fn linked() -> SqliteApi {
        SqliteApi {
            vfs_find: linked::sqlite3_vfs_find,
            vfs_register: linked::sqlite3_vfs_register,
            malloc: linked::sqlite3_malloc,
            uri_parameter: linked::sqlite3_uri_parameter,
            uri_key: linked::sqlite3_uri_key,
            log: linked::sqlite3_log,
            libversion: linked::sqlite3_libversion,
            libversion_number: linked::sqlite3_libversion_number,
            test_control: linked::sqlite3_test_control,
            sourceid: linked::sqlite3_sourceid,
        }
    }

    /// Reads the table an extension entry point is handed.
    ///
    /// # Safety
    /// `routines` must point to SQLite's `sqlite3_api_routines` (3.31 or later, the first
    /// release with `sqlite3_uri_key`), which lives as long as the process.
    pub(crate) unsafe fn from_routines(routines: *const c_void) -> Option<SqliteApi> {
        if routines.is_null() {
            return None;
        }
        let table = routines as *const Option<unsafe extern "C" fn()>;
        // SAFETY: `table` points to an array of function pointers at least URI_KEY + 1 long
        // (caller contract); every slot read below is a function pointer of the type stated
        // by sqlite3ext.h for that member, so the transmutes restore the real signatures.
        unsafe {
            let get = |index: usize| *table.add(index);
            Some(SqliteApi {
                vfs_find: std::mem::transmute::<unsafe extern "C" fn(), VfsFind>(get(
                    slot::VFS_FIND,
                )?),
                vfs_register: std::mem::transmute::<unsafe extern "C" fn(), VfsRegister>(get(
                    slot::VFS_REGISTER,
                )?),
                malloc: std::mem::transmute::<unsafe extern "C" fn(), Malloc>(get(slot::MALLOC)?),
                uri_parameter: std::mem::transmute::<unsafe extern "C" fn(), UriParameter>(get(
                    slot::URI_PARAMETER,
                )?),
                uri_key: std::mem::transmute::<unsafe extern "C" fn(), UriKey>(get(slot::URI_KEY)?),
                log: std::mem::transmute::<unsafe extern "C" fn(), Log>(get(slot::LOG)?),
                libversion: std::mem::transmute::<unsafe extern "C" fn(), Libversion>(get(
                    slot::LIBVERSION,
                )?),
                libversion_number: std::mem::transmute::<unsafe extern "C" fn(), LibversionNumber>(
                    get(slot::LIBVERSION_NUMBER)?,
                ),
                test_control: std::mem::transmute::<unsafe extern "C" fn(), TestControl>(get(
                    slot::TEST_CONTROL,
                )?),
                sourceid: std::mem::transmute::<unsafe extern "C" fn(), Sourceid>(get(
                    slot::SOURCEID,
                )?),
            })
        }
    }

    /// The VFS registered as `name`, if one is.
    pub(crate) fn vfs_find(&self, name: &CStr) -> Option<FoundVfs> {
        // SAFETY: `name` is NUL-terminated; sqlite3_vfs_find only reads it.
        let vfs = unsafe { (self.vfs_find)(name.as_ptr()) };
        std::ptr::NonNull::new(vfs).map(FoundVfs)
    }

    /// # Safety
    /// `vfs` must be fully initialised and live for the rest of the process.
    pub(crate) unsafe fn vfs_register(&self, vfs: *mut sqlite3_vfs, make_default: bool) -> c_int {
        // SAFETY: forwarded caller contract.
        unsafe { (self.vfs_register)(vfs, make_default as c_int) }
    }

    /// Copies `text` into memory from `sqlite3_malloc`, which SQLite will `sqlite3_free`
    /// (file-control results, extension error messages). Null when out of memory.
    pub(crate) fn alloc_cstring(&self, text: &str) -> *mut c_char {
        let bytes = text.as_bytes();
        let Ok(size) = c_int::try_from(bytes.len() + 1) else {
            return std::ptr::null_mut();
        };
        // SAFETY: sqlite3_malloc returns null or `size` writable bytes; we write exactly
        // bytes.len() + 1 of them.
        unsafe {
            let out = (self.malloc)(size) as *mut u8;
            if out.is_null() {
                return std::ptr::null_mut();
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len());
            *out.add(bytes.len()) = 0;
            out as *mut c_char
        }
    }

    /// Decodes the filename SQLite passed to xOpen into what `file/` opens: its path
    /// and every URI parameter (`sqlite3_uri_key`), each with the value
    /// `sqlite3_uri_parameter` gives it (the first given for its key). SQLite reads a
    /// journal's or WAL's parameters from its database's name, so they are the
    /// database's. A null `filename` is an anonymous file: no path, no parameters.
    /// `None` when the path is not UTF-8 (`FilePath`).
    ///
    /// # Safety
    /// `filename` must be null or the filename pointer SQLite passed to the xOpen call in
    /// progress (a name SQLite made, `sqlite3_create_filename` style), alive for this
    /// call.
    pub(crate) unsafe fn open_name(&self, filename: *const c_char) -> Option<OpenName> {
        if filename.is_null() {
            return Some(OpenName::default());
        }
        // SAFETY: a non-null `filename` is NUL-terminated (caller contract).
        let path = FilePath::from_c(unsafe { CStr::from_ptr(filename) })?;
        let text = |pointer: *const c_char| {
            // SAFETY: every pointer passed here is non-null and NUL-terminated inside
            // SQLite's filename buffer, alive for the call (caller contract).
            unsafe { CStr::from_ptr(pointer) }
                .to_string_lossy()
                .into_owned()
        };
        let mut pairs = Vec::new();
        for index in 0.. {
            // SAFETY: `filename` is xOpen's (caller contract); sqlite3_uri_key returns
            // null past the last key, else a key inside SQLite's filename buffer.
            let key = unsafe { (self.uri_key)(filename, index) };
            if key.is_null() {
                break;
            }
            // SAFETY: `filename` as above; `key` is NUL-terminated (SQLite's own key);
            // the result is null or a NUL-terminated value in SQLite's buffer.
            let value = unsafe { (self.uri_parameter)(filename, key) };
            // Never null for a key SQLite listed (its value may be empty).
            let value = if value.is_null() {
                String::new()
            } else {
                text(value)
            };
            pairs.push((text(key), value));
        }
        Some(OpenName {
            path: Some(path),
            uri: UriParameters::new(pairs),
        })
    }

    /// Writes `message` to SQLite's error log (`SQLITE_CONFIG_LOG`).
    pub(crate) fn log(&self, code: c_int, message: &str) {
        let Ok(message) = CString::new(message.replace('\0', " ")) else {
            return;
        };
        // SAFETY: "%s" consumes exactly the one NUL-terminated string argument passed.
        unsafe { (self.log)(code, c"%s".as_ptr(), message.as_ptr()) }
    }

    pub(crate) fn libversion(&self) -> String {
        // SAFETY: sqlite3_libversion returns a static NUL-terminated string.
        unsafe { CStr::from_ptr((self.libversion)()) }
            .to_string_lossy()
            .into_owned()
    }

    /// `sqlite3_libversion_number()`: 3046000 for SQLite 3.46.0.
    pub(crate) fn libversion_number(&self) -> c_int {
        // SAFETY: sqlite3_libversion_number has no preconditions.
        unsafe { (self.libversion_number)() }
    }

    /// The byte whose lock guards new readers (`PENDING_BYTE`), where this SQLite puts it:
    /// 0x40000000 unless `sqlite3_test_control(SQLITE_TESTCTRL_PENDING_BYTE, x)` moved it
    /// (SQLite's own test suite moves it to 0x10000). The test control with 0 returns the
    /// current value and changes nothing; a build without test controls
    /// (`SQLITE_UNTESTABLE`) answers 0, and its pending byte cannot have moved.
    pub(crate) fn pending_byte(&self) -> i64 {
        // SAFETY: SQLITE_TESTCTRL_PENDING_BYTE reads exactly one `unsigned int` variadic
        // argument (main.c); 0 asks for no change.
        let byte = unsafe { (self.test_control)(SQLITE_TESTCTRL_PENDING_BYTE, 0 as c_uint) };
        if byte > 0 {
            i64::from(byte)
        } else {
            DEFAULT_PENDING_BYTE
        }
    }

    /// Writes a failed system call to SQLite's log in the form os_unix.c's
    /// `unixLogErrorAtLine` uses, `os_unix.c:LINE: (ERRNO) CALL(PATH) - MESSAGE`, with the
    /// result code SQLite will see. Tools that read SQLite's log for OS errors (SQLite's
    /// `oserror.test` among them) match the `os_unix.c:` prefix, so it is kept; LINE is
    /// the line of this crate's source that logged the failure. A failure without an errno
    /// ([`crate::sys::UNKNOWN_ERRNO`]) is logged as errno 0, which is what os_unix.c reads
    /// after such a call. SQLITE_CANTOPEN is preceded, as os_unix.c's
    /// `SQLITE_CANTOPEN_BKPT` does it, by SQLite's `cannot open file at line LINE of
    /// [SOURCE-ID]` (the ten characters of `sqlite3_sourceid()` after its date).
    #[track_caller]
    pub(crate) fn log_os_error(&self, code: c_int, call: &str, path: &str, errno: i32) {
        let line = std::panic::Location::caller().line();
        if code == crate::ffi::SQLITE_CANTOPEN {
            // SAFETY: sqlite3_sourceid returns a static NUL-terminated string.
            let source = unsafe { CStr::from_ptr((self.sourceid)()) }.to_string_lossy();
            let check_in: String = source.chars().skip(20).take(10).collect();
            self.log(
                code,
                &format!("cannot open file at line {line} of [{check_in}]"),
            );
        }
        let errno = if errno == crate::sys::UNKNOWN_ERRNO {
            0
        } else {
            errno
        };
        self.log(
            code,
            &format!(
                "os_unix.c:{line}: ({errno}) {call}({path}) - {}",
                strerror(errno)
            ),
        );
    }
}

/// Where SQLite puts `PENDING_BYTE` unless a test moves it.
pub(crate) const DEFAULT_PENDING_BYTE: i64 = 0x4000_0000;

/// `sqlite3.h`: the test control that reads (argument 0) or moves the pending byte.
const SQLITE_TESTCTRL_PENDING_BYTE: c_int = 11;

/// The C library's message for `errno`, as os_unix.c takes it from `strerror_r` into an
/// 80-byte buffer.
fn strerror(errno: i32) -> String {
    let mut buf = [0 as c_char; 80];
    // SAFETY: strerror_r writes at most `len` bytes, NUL included, into `buf`; the last
    // byte stays 0 whatever it does.
    let rc = unsafe { libc::strerror_r(errno, buf.as_mut_ptr(), buf.len() - 1) };
    if rc != 0 && buf[0] == 0 {
        return String::new();
    }
    // SAFETY: `buf` is NUL-terminated (its last byte is never written).
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi;

    /// A filename as SQLite hands it to xOpen (`sqlite3_create_filename`), freed on drop.
    struct Filename(*const c_char);

    impl Filename {
        fn new(database: &CStr, parameters: &[(&CStr, &CStr)]) -> Filename {
            let mut flat: Vec<*const c_char> = parameters
                .iter()
                .flat_map(|(key, value)| [key.as_ptr(), value.as_ptr()])
                .collect();
            // SAFETY: every string is NUL-terminated and outlives the call, which copies
            // them; `flat` holds 2 × `parameters.len()` pointers.
            let name = unsafe {
                ffi::sqlite3_create_filename(
                    database.as_ptr(),
                    c"/d/main.db-journal".as_ptr(),
                    c"/d/main.db-wal".as_ptr(),
                    parameters.len() as c_int,
                    flat.as_mut_ptr(),
                )
            };
            assert!(!name.is_null());
            Filename(name)
        }
    }

    impl Drop for Filename {
        fn drop(&mut self) {
            // SAFETY: made by sqlite3_create_filename, freed once.
            unsafe { ffi::sqlite3_free_filename(self.0) }
        }
    }

    fn pairs(name: &OpenName) -> Vec<(&str, &str)> {
        let uri = &name.uri;
        uri.keys()
            .map(|key| (key, uri.get(key).expect("a listed key has a value")))
            .collect()
    }

    #[test]
    fn a_null_name_decodes_to_an_anonymous_file() {
        // SAFETY: null is allowed.
        let name = unsafe { SqliteApi::linked().open_name(std::ptr::null()) }.unwrap();
        assert_eq!(name, OpenName::default());
    }

    #[test]
    fn a_name_decodes_to_its_path_and_every_parameter_with_its_first_value() {
        let file = Filename::new(
            c"/d/main.db",
            &[
                (c"uring_sync", c"fdatasync"),
                (c"modeof", c""),
                (c"uring_sync", c"fsync"),
            ],
        );
        // SAFETY: a filename SQLite made, alive for the call.
        let name = unsafe { SqliteApi::linked().open_name(file.0) }.unwrap();
        assert_eq!(name.path.as_deref(), Some("/d/main.db"));
        assert_eq!(
            pairs(&name),
            [
                ("uring_sync", "fdatasync"),
                ("modeof", ""),
                ("uring_sync", "fdatasync")
            ]
        );
    }

    #[test]
    fn a_journal_or_wal_name_carries_its_databases_parameters() {
        let file = Filename::new(c"/d/main.db", &[(c"psow", c"0"), (c"nolock", c"1")]);
        let api = SqliteApi::linked();
        // SAFETY: SQLite's journal and WAL names of the filename it made.
        let (journal, wal) = unsafe {
            (
                api.open_name(ffi::sqlite3_filename_journal(file.0))
                    .unwrap(),
                api.open_name(ffi::sqlite3_filename_wal(file.0)).unwrap(),
            )
        };
        assert_eq!(journal.path.as_deref(), Some("/d/main.db-journal"));
        assert_eq!(wal.path.as_deref(), Some("/d/main.db-wal"));
        for name in [&journal, &wal] {
            assert_eq!(pairs(name), [("psow", "0"), ("nolock", "1")]);
        }
    }
}
