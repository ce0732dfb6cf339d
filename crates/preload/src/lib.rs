//! `libsqlite_uring_preload.so`: makes `io_uring` the default VFS of an unmodified
//! program's own SQLite.
//!
//! ```text
//! LD_PRELOAD=target/release/libsqlite_uring_preload.so sqlite3 app.db
//! ```
//!
//! The library exports `sqlite3_initialize`, `sqlite3_shutdown`, `sqlite3_open`,
//! `sqlite3_open_v2` and `sqlite3_open16`. Preloaded, it comes first in the process's global symbol scope, so a
//! program or module that links SQLite dynamically (Debian's `sqlite3` CLI, CPython's
//! `_sqlite3`, loaded later with `dlopen`) calls these. The first call finds the real
//! SQLite (`dlsym(RTLD_NEXT)`, or, for a library `dlopen`ed with `RTLD_LOCAL` that
//! `RTLD_NEXT` cannot see, the loaded object that defines `sqlite3_open_v2`), initializes
//! it, registers the VFS through the same path as the loadable extension (an
//! `sqlite3_api_routines` table filled from that SQLite's symbols) with `make_default`,
//! then calls the real function. Registering at the program's first initialize or open,
//! not at load, leaves its `sqlite3_config` calls (which must precede initialization)
//! working. `sqlite3_shutdown` keeps the VFS registered, but SQLite's next initialization
//! makes `unix` the default again (`sqlite3_os_init`), so after a shutdown the next
//! initialize or open makes `io_uring` the default once more.
//!
//! Environment: the extension's (`SQLITE_URING_FALLBACK`, `RUST_LOG`, `SQLITE_URING_LOG`).
//! A failure to register (io_uring unavailable without `SQLITE_URING_FALLBACK=syscall`, an
//! invalid variable) is one line on stderr; the program goes on with its default VFS.
//!
//! A program whose SQLite is linked statically calls it directly and never reaches these
//! functions. At exit, if no interposed function was ever called, the library looks for
//! SQLite's code in the process (a string only SQLite's core carries) and prints one line
//! on stderr when it finds it in the executable, or in a shared object that does not export
//! `sqlite3_open_v2`. A program without SQLite, or one whose shared `libsqlite3` was loaded
//! but never initialized, prints nothing.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Once, OnceLock};

use sqlite_uring::{register_with_api_routines, Options};

const SQLITE_OK: c_int = 0;
const SQLITE_ERROR: c_int = 1;

type Initialize = unsafe extern "C" fn() -> c_int;
type Shutdown = unsafe extern "C" fn() -> c_int;
type Open = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int;
type OpenV2 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, *const c_char) -> c_int;
type Open16 = unsafe extern "C" fn(*const c_void, *mut *mut c_void) -> c_int;

/// Where the real SQLite's symbols are looked up.
#[derive(Clone, Copy)]
enum Scope {
    /// The global scope after this library (`RTLD_NEXT`).
    Next,
    /// A handle of the object defining `sqlite3_open_v2` (kept open for the process).
    Handle(usize),
}

impl Scope {
    fn lookup(self, name: &CStr) -> *mut c_void {
        let handle = match self {
            Scope::Next => libc::RTLD_NEXT,
            Scope::Handle(handle) => handle as *mut c_void,
        };
        // SAFETY: `handle` is RTLD_NEXT or a live handle from dlopen; `name` is
        // NUL-terminated.
        unsafe { libc::dlsym(handle, name.as_ptr()) }
    }
}

/// The real SQLite's functions this library stands in for.
struct Real {
    scope: Scope,
    initialize: Initialize,
    shutdown: Option<Shutdown>,
    open: Option<Open>,
    open_v2: OpenV2,
    open16: Option<Open16>,
}

/// Some interposed function was called (so SQLite is dynamically linked and was reached).
static CALLED: AtomicBool = AtomicBool::new(false);
/// 0 not tried, 1 registered, 2 failed (reported).
static OUTCOME: AtomicU8 = AtomicU8::new(0);
static REGISTER: Once = Once::new();
/// A successful `sqlite3_shutdown` since the VFS was last made the default.
static SHUT_DOWN: AtomicBool = AtomicBool::new(false);
/// The `sqlite3_api_routines` table, built once (it lives for the process).
static ROUTINES: OnceLock<usize> = OnceLock::new();
static REAL: OnceLock<Option<Real>> = OnceLock::new();

thread_local! {
    /// This thread is inside the registration: SQLite's own nested calls to
    /// `sqlite3_initialize` go straight to the real one.
    static REGISTERING: Cell<bool> = const { Cell::new(false) };
}

/// This library's name as the dynamic linker records it, to skip ourselves.
fn own_name() -> CString {
    object_of(own_name as *const c_void)
        .map(|(_, name)| name)
        .unwrap_or_default()
}

/// Name of the object containing `address`, as the dynamic linker records it.
fn object_of(address: *const c_void) -> Option<(usize, CString)> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the address and fills `info`.
    if unsafe { libc::dladdr(address, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded.
    let info = unsafe { info.assume_init() };
    let name = if info.dli_fname.is_null() {
        CString::default()
    } else {
        // SAFETY: dli_fname is the NUL-terminated name of a loaded object.
        unsafe { CStr::from_ptr(info.dli_fname) }.to_owned()
    };
    Some((info.dli_fbase as usize, name))
}

/// A loaded object, as `dl_iterate_phdr` reports it.
struct Object {
    name: CString,
    /// Readable, non-writable `PT_LOAD` segments (address, length).
    segments: Vec<(usize, usize)>,
    main: bool,
}

fn loaded_objects() -> Vec<Object> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info for the duration of the call and
        // `data` is the Vec passed below.
        let (info, objects) = unsafe { (&*info, &mut *(data as *mut Vec<Object>)) };
        let name = if info.dlpi_name.is_null() {
            CString::default()
        } else {
            // SAFETY: dlpi_name is a NUL-terminated string owned by the dynamic linker.
            unsafe { CStr::from_ptr(info.dlpi_name) }.to_owned()
        };
        let mut segments = Vec::new();
        for i in 0..usize::from(info.dlpi_phnum) {
            // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
            let header = unsafe { &*info.dlpi_phdr.add(i) };
            if header.p_type == libc::PT_LOAD
                && header.p_flags & libc::PF_R != 0
                && header.p_flags & libc::PF_W == 0
            {
                segments.push((
                    info.dlpi_addr as usize + header.p_vaddr as usize,
                    header.p_filesz as usize,
                ));
            }
        }
        let main = objects.is_empty();
        objects.push(Object {
            name,
            segments,
            main,
        });
        0
    }
    let mut objects: Vec<Object> = Vec::new();
    // SAFETY: the callback matches dl_iterate_phdr's signature and only uses `data` as
    // the Vec it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut objects as *mut Vec<Object> as *mut c_void) };
    objects
}

/// The object `name` itself defines `sqlite3_open_v2` (not one of its dependencies):
/// a handle to it, kept open.
fn defining_handle(name: &CStr) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    // SAFETY: RTLD_NOLOAD only returns a handle of an already loaded object.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: `handle` is live; the name is NUL-terminated.
    let symbol = unsafe { libc::dlsym(handle, c"sqlite3_open_v2".as_ptr()) };
    match object_of(symbol) {
        Some((_, object))
            if !symbol.is_null() && object.as_c_str() == name && name != own_name().as_c_str() =>
        {
            Some(handle as usize)
        }
        _ => {
            // SAFETY: balances the dlopen above.
            unsafe { libc::dlclose(handle) };
            None
        }
    }
}

fn locate() -> Option<Real> {
    let scope = if Scope::Next.lookup(c"sqlite3_open_v2").is_null() {
        // Not in the global scope: a library dlopen'ed with RTLD_LOCAL (CPython's
        // `_sqlite3` brings libsqlite3 that way).
        loaded_objects()
            .iter()
            .filter(|object| !object.main)
            .find_map(|object| defining_handle(&object.name))
            .map(Scope::Handle)?
    } else {
        Scope::Next
    };
    let find = |name: &CStr| {
        let symbol = scope.lookup(name);
        (!symbol.is_null()).then_some(symbol)
    };
    // SAFETY: each symbol is SQLite's function of that name, whose C signature the
    // type states (sqlite3.h).
    unsafe {
        Some(Real {
            scope,
            initialize: std::mem::transmute::<*mut c_void, Initialize>(find(
                c"sqlite3_initialize",
            )?),
            shutdown: find(c"sqlite3_shutdown")
                .map(|p| std::mem::transmute::<*mut c_void, Shutdown>(p)),
            open: find(c"sqlite3_open").map(|p| std::mem::transmute::<*mut c_void, Open>(p)),
            open_v2: std::mem::transmute::<*mut c_void, OpenV2>(find(c"sqlite3_open_v2")?),
            open16: find(c"sqlite3_open16").map(|p| std::mem::transmute::<*mut c_void, Open16>(p)),
        })
    }
}

/// Slots of `struct sqlite3_api_routines` (`sqlite3ext.h`, counting members from zero)
/// that the VFS reads (`crates/vfs/src/api.rs`), with the function each one holds. The
/// struct only grows at its end, so the positions are fixed.
const SLOTS: &[(usize, &CStr)] = &[
    (66, c"sqlite3_libversion"),
    (67, c"sqlite3_libversion_number"),
    (68, c"sqlite3_malloc"),
    (141, c"sqlite3_vfs_find"),
    (142, c"sqlite3_vfs_register"),
    (147, c"sqlite3_test_control"),
    (167, c"sqlite3_log"),
    (169, c"sqlite3_sourceid"),
    (189, c"sqlite3_uri_parameter"),
    (245, c"sqlite3_uri_key"),
];

/// An `sqlite3_api_routines` table with the slots the VFS reads filled from the real
/// SQLite, the others null; it lives for the process, as SQLite's own does.
fn api_routines(scope: Scope) -> Result<*const c_void, String> {
    let mut table: Vec<*mut c_void> = vec![std::ptr::null_mut(); 256];
    for (slot, name) in SLOTS {
        let symbol = scope.lookup(name);
        if symbol.is_null() {
            return Err(format!(
                "this SQLite has no {} (3.31 or later is needed)",
                name.to_string_lossy()
            ));
        }
        table[*slot] = symbol;
    }
    Ok(Box::leak(table.into_boxed_slice()).as_ptr() as *const c_void)
}

fn register(real: &Real) -> Result<(), String> {
    // SAFETY: the real sqlite3_initialize has no preconditions.
    let rc = unsafe { (real.initialize)() };
    if rc != SQLITE_OK {
        return Err(format!("sqlite3_initialize failed ({rc})"));
    }
    let fallback = std::env::var("SQLITE_URING_FALLBACK").ok();
    if let Some(value) = fallback
        .as_deref()
        .filter(|v| *v != "syscall" && *v != "none")
    {
        return Err(format!(
            "SQLITE_URING_FALLBACK={value} is not valid; use syscall or none"
        ));
    }
    let routines = match ROUTINES.get() {
        Some(&routines) => routines as *const c_void,
        None => {
            let routines = api_routines(real.scope)?;
            let _ = ROUTINES.set(routines as usize);
            routines
        }
    };
    // SAFETY: `routines` holds the real SQLite's functions in their slots and lives for
    // the process.
    unsafe { sqlite_uring::trace::init_extension_logging(routines) }?;
    let options = Options {
        make_default: true,
        fallback_to_syscall: fallback.as_deref() == Some("syscall"),
        ..Options::default()
    };
    // SAFETY: as above.
    unsafe { register_with_api_routines(routines, options) }
        .map(|_| ())
        .map_err(|error| error.to_string())
}

/// [`register`], with SQLite's own nested calls (its `sqlite3_initialize`) sent straight to
/// the real functions, and a panic turned into an error.
fn register_guarded(real: &Real) -> Result<(), String> {
    let _ = REGISTERING.try_with(|r| r.set(true));
    let outcome = catch_unwind(|| register(real))
        .unwrap_or_else(|_| Err("internal error during registration".into()));
    let _ = REGISTERING.try_with(|r| r.set(false));
    outcome
}

/// Registers the VFS once, before the program's first initialize or open goes through.
fn ensure_registered(real: &Real) {
    REGISTER.call_once(|| match register_guarded(real) {
        Ok(()) => OUTCOME.store(1, Ordering::Release),
        Err(message) => {
            OUTCOME.store(2, Ordering::Release);
            eprintln!(
                "sqlite-uring preload: the io_uring VFS was not installed, SQLite keeps \
                 its default VFS: {message}"
            );
        }
    });
}

/// The real SQLite's functions, found at the first call; None if no loaded library has
/// them.
fn real() -> Option<&'static Real> {
    catch_unwind(|| REAL.get_or_init(locate).as_ref())
        .ok()
        .flatten()
}

/// The real functions, with the VFS registered unless this call is SQLite's own, nested
/// in the registration. None (reported once) if no SQLite can be found.
fn prepare() -> Option<&'static Real> {
    CALLED.store(true, Ordering::Relaxed);
    let Some(real) = real() else {
        static REPORTED: Once = Once::new();
        REPORTED.call_once(|| {
            eprintln!(
                "sqlite-uring preload: a SQLite function was called but no loaded library \
                 defines sqlite3_open_v2; the call fails"
            )
        });
        return None;
    };
    if !REGISTERING.try_with(Cell::get).unwrap_or(true) {
        ensure_registered(real);
        if SHUT_DOWN.swap(false, Ordering::AcqRel) {
            register_again(real);
        }
    }
    Some(real)
}

/// After `sqlite3_shutdown`: initializes SQLite again and makes the VFS, still registered,
/// the default again (registering it once more with the same options does that).
fn register_again(real: &Real) {
    if let Err(message) = register_guarded(real) {
        eprintln!(
            "sqlite-uring preload: after sqlite3_shutdown, the io_uring VFS was not made the \
             default again, SQLite keeps its default VFS: {message}"
        );
    }
}

/// Stands in for SQLite's `sqlite3_initialize`.
///
/// # Safety
/// As SQLite's.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_initialize() -> c_int {
    match prepare() {
        // SAFETY: the real function, called as the program called this one.
        Some(real) => unsafe { (real.initialize)() },
        None => SQLITE_ERROR,
    }
}

/// Stands in for SQLite's `sqlite3_shutdown`: the real one, and, if the VFS was
/// registered, a note to make it the default again at the next initialize or open.
///
/// # Safety
/// As SQLite's.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_shutdown() -> c_int {
    let Some(shutdown) = real().and_then(|real| real.shutdown) else {
        // No SQLite reached through this library: nothing was initialized by it.
        return SQLITE_OK;
    };
    // SAFETY: the real function, called as the program called this one.
    let rc = unsafe { shutdown() };
    if rc == SQLITE_OK && OUTCOME.load(Ordering::Acquire) == 1 {
        SHUT_DOWN.store(true, Ordering::Release);
    }
    rc
}

/// Stands in for SQLite's `sqlite3_open_v2`.
///
/// # Safety
/// As SQLite's.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_open_v2(
    filename: *const c_char,
    db: *mut *mut c_void,
    flags: c_int,
    vfs: *const c_char,
) -> c_int {
    match prepare() {
        // SAFETY: the real function with the caller's arguments.
        Some(real) => unsafe { (real.open_v2)(filename, db, flags, vfs) },
        // SAFETY: SQLite's contract: `db` receives the handle (null on failure).
        None => unsafe { fail_open(db) },
    }
}

/// Stands in for SQLite's `sqlite3_open`.
///
/// # Safety
/// As SQLite's.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_open(filename: *const c_char, db: *mut *mut c_void) -> c_int {
    match prepare().and_then(|real| real.open) {
        // SAFETY: the real function with the caller's arguments.
        Some(open) => unsafe { open(filename, db) },
        // SAFETY: SQLite's contract: `db` receives the handle (null on failure).
        None => unsafe { fail_open(db) },
    }
}

/// Stands in for SQLite's `sqlite3_open16`.
///
/// # Safety
/// As SQLite's.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_open16(filename: *const c_void, db: *mut *mut c_void) -> c_int {
    match prepare().and_then(|real| real.open16) {
        // SAFETY: the real function with the caller's arguments.
        Some(open) => unsafe { open(filename, db) },
        // SAFETY: SQLite's contract: `db` receives the handle (null on failure).
        None => unsafe { fail_open(db) },
    }
}

/// # Safety
/// `db` is null or writable, as an open function's out-parameter.
unsafe fn fail_open(db: *mut *mut c_void) -> c_int {
    if !db.is_null() {
        // SAFETY: caller contract.
        unsafe { *db = std::ptr::null_mut() };
    }
    SQLITE_ERROR
}

/// A string only SQLite's core carries (`sqlite3SafetyCheck`'s log message): not the
/// shell's, not a binding's.
const SQLITE_MARKER: &[u8] = b"API call with %s database connection pointer";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The objects holding a SQLite this library cannot reach: the executable's own, or a
/// shared object's that does not export `sqlite3_open_v2`.
fn unreachable_sqlite() -> Vec<String> {
    let own = own_name();
    let mut found = Vec::new();
    for object in loaded_objects() {
        let has_sqlite = object.segments.iter().any(|&(start, len)| {
            // SAFETY: a readable PT_LOAD segment of a loaded object is mapped for its
            // file size at this address for as long as the object stays loaded.
            let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, len) };
            start != 0 && contains(bytes, SQLITE_MARKER)
        });
        if !has_sqlite || (!object.main && object.name == own) {
            continue;
        }
        if object.main {
            let exe = std::fs::read_link("/proc/self/exe")
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "the executable".into());
            found.push(exe);
        } else if let Some(handle) = defining_handle(&object.name) {
            // SAFETY: balances defining_handle's dlopen.
            unsafe { libc::dlclose(handle as *mut c_void) };
        } else {
            found.push(object.name.to_string_lossy().into_owned());
        }
    }
    found
}

extern "C" fn at_exit() {
    if CALLED.load(Ordering::Relaxed) || OUTCOME.load(Ordering::Acquire) != 0 {
        return;
    }
    let _ = catch_unwind(|| {
        let objects = unreachable_sqlite();
        if !objects.is_empty() {
            eprintln!(
                "sqlite-uring preload: the io_uring VFS could not be installed: SQLite is \
                 linked statically into {} without exported symbols, so a preloaded library \
                 cannot reach it (use the loadable extension or sqlite_uring::register)",
                objects.join(", ")
            );
        }
    });
}

extern "C" fn on_load() {
    // SAFETY: `at_exit` is a plain extern "C" fn that lives as long as this library (which
    // is never unloaded from a preload).
    unsafe { libc::atexit(at_exit) };
}

/// Runs `on_load` when the dynamic linker loads this library.
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
