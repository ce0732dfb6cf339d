//! Hostile arguments at the C boundary: the `sqlite3_io_methods` of `unix` and
//! `io_uring` called directly, one file each, with values no call SQLite makes has — the
//! values a buggy shim stacked above the VFS could pass. Each class compares the two:
//!
//! * where `unix` answers, `io_uring` answers the same (result code, and the file's bytes
//!   and size after), unless the difference is one this file names with its reason;
//! * where `unix` crashes (each `unix` case runs in a forked child, so a crash is a
//!   result) or leaves a state that no longer matches what it holds, `io_uring` returns an
//!   error code, logs a line (`sqlite3_log`), and leaves the file's bytes unchanged;
//! * `io_uring` never panics: a panic would be caught by the FFI guard and turned into
//!   SQLITE_IOERR, so a hook counts panics and every case asserts there were none.
//!
//! The log collector, the panic hook and `fork` are per process, so the tests of this
//! binary run one at a time.

mod common;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use common::system_calls::vfs;
use rusqlite::ffi;

const UNIX: &str = "unix";
const OURS: &str = "io_uring";

/// The main-database open every case makes.
const MAIN_DB: c_int =
    ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE | ffi::SQLITE_OPEN_MAIN_DB;

/// The bytes every case's file starts with: two 4 KiB pages of a pattern.
fn original_bytes() -> Vec<u8> {
    (0..8192).map(|i| (i % 251) as u8).collect()
}

// ─── Panics and the log ───────────────────────────────────────────────────────────────

static PANICS: AtomicU64 = AtomicU64::new(0);
static LOG: Mutex<Vec<(c_int, String)>> = Mutex::new(Vec::new());

unsafe extern "C" fn collect(_: *mut c_void, code: c_int, message: *const c_char) {
    // SAFETY: SQLite passes a NUL-terminated message.
    let message = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    LOG.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push((code, message));
}

/// Installs the panic counter and the log collector (before SQLite is first
/// initialised), registers the VFS, and serialises the tests.
fn setup() -> std::sync::MutexGuard<'static, ()> {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
        type Callback = unsafe extern "C" fn(*mut c_void, c_int, *const c_char);
        // SAFETY: SQLITE_CONFIG_LOG takes a callback of this type and its first argument;
        // SQLite is shut down first, as sqlite3_config requires.
        unsafe {
            ffi::sqlite3_shutdown();
            let rc = ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_LOG,
                collect as Callback,
                std::ptr::null_mut::<c_void>(),
            );
            assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_config(SQLITE_CONFIG_LOG)");
            assert_eq!(ffi::sqlite3_initialize(), ffi::SQLITE_OK);
        }
    });
    let guard = common::process_state_lock();
    common::register();
    take_log();
    guard
}

fn take_log() -> Vec<(c_int, String)> {
    std::mem::take(&mut *LOG.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

// ─── One file, method by method ───────────────────────────────────────────────────────

/// Which file of a database [`Handle::open_as`] opens.
#[derive(Clone, Copy, Debug)]
enum Name {
    Database,
    Journal,
    Wal,
}

/// A file opened through a VFS's xOpen; closed (if open) and its name freed on drop.
struct Handle {
    file: *mut ffi::sqlite3_file,
    _storage: Vec<u64>,
    name: *const c_char,
    path: PathBuf,
}

impl Handle {
    /// xOpen of `path` (a main database) with `flags`; the code when it fails.
    fn open(vfs_name: &str, path: &Path, flags: c_int) -> Result<Handle, c_int> {
        Handle::open_as(vfs_name, path, flags, Name::Database, &[])
    }

    /// xOpen of the database `database`'s file `which`, named as SQLite names it (from
    /// one `sqlite3_create_filename` block, with the URI parameters `params`).
    fn open_as(
        vfs_name: &str,
        database: &Path,
        flags: c_int,
        which: Name,
        params: &[(&CStr, &CStr)],
    ) -> Result<Handle, c_int> {
        let vfs = vfs(vfs_name);
        let text = database.to_str().unwrap();
        let c_database = CString::new(text).unwrap();
        let journal = CString::new(format!("{text}-journal")).unwrap();
        let wal = CString::new(format!("{text}-wal")).unwrap();
        let mut pairs: Vec<*const c_char> = params
            .iter()
            .flat_map(|(key, value)| [key.as_ptr(), value.as_ptr()])
            .collect();
        // SAFETY: NUL-terminated strings; the filename block is freed in Drop (or below);
        // `storage` has szOsFile bytes, 8-aligned, for xOpen to fill.
        unsafe {
            let name = ffi::sqlite3_create_filename(
                c_database.as_ptr(),
                journal.as_ptr(),
                wal.as_ptr(),
                params.len() as c_int,
                pairs.as_mut_ptr(),
            );
            let (file_name, path) = match which {
                Name::Database => (name, database.to_path_buf()),
                Name::Journal => (
                    ffi::sqlite3_filename_journal(name),
                    PathBuf::from(journal.to_str().unwrap()),
                ),
                Name::Wal => (
                    ffi::sqlite3_filename_wal(name),
                    PathBuf::from(wal.to_str().unwrap()),
                ),
            };
            let size_bytes = (*vfs).szOsFile as usize;
            let mut storage = vec![0u64; size_bytes.div_ceil(8)];
            let file = storage.as_mut_ptr() as *mut ffi::sqlite3_file;
            let mut out_flags = 0;
            let rc = ((*vfs).xOpen.unwrap())(vfs, file_name, file, flags, &mut out_flags);
            if rc != ffi::SQLITE_OK {
                assert!(
                    (*file).pMethods.is_null(),
                    "{vfs_name}: a failed xOpen set methods"
                );
                ffi::sqlite3_free_filename(name);
                return Err(rc);
            }
            Ok(Handle {
                file,
                _storage: storage,
                name,
                path,
            })
        }
    }

    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: xOpen succeeded, so pMethods is set and static.
        unsafe { &*(*self.file).pMethods }
    }

    /// xRead into `buf` (which may be null), claiming `amount` bytes.
    fn read_raw(&self, buf: *mut c_void, amount: c_int, offset: i64) -> c_int {
        // SAFETY: the case owns `buf` (or passes null on purpose): the hostile value.
        unsafe { (self.methods().xRead.unwrap())(self.file, buf, amount, offset) }
    }

    fn read(&self, buf: &mut [u8], amount: c_int, offset: i64) -> c_int {
        self.read_raw(buf.as_mut_ptr().cast(), amount, offset)
    }

    fn write_raw(&self, buf: *const c_void, amount: c_int, offset: i64) -> c_int {
        // SAFETY: as `read_raw`.
        unsafe { (self.methods().xWrite.unwrap())(self.file, buf, amount, offset) }
    }

    fn write(&self, buf: &[u8], amount: c_int, offset: i64) -> c_int {
        self.write_raw(buf.as_ptr().cast(), amount, offset)
    }

    fn truncate(&self, size: i64) -> c_int {
        // SAFETY: a live file.
        unsafe { (self.methods().xTruncate.unwrap())(self.file, size) }
    }

    fn sync(&self) -> c_int {
        // SAFETY: a live file.
        unsafe { (self.methods().xSync.unwrap())(self.file, ffi::SQLITE_SYNC_NORMAL) }
    }

    /// xFileSize: (code, size).
    fn size(&self) -> (c_int, i64) {
        let mut size = -1;
        // SAFETY: a live file and a writable i64.
        let rc = unsafe { (self.methods().xFileSize.unwrap())(self.file, &mut size) };
        (rc, size)
    }

    fn lock(&self, level: c_int) -> c_int {
        // SAFETY: a live file.
        unsafe { (self.methods().xLock.unwrap())(self.file, level) }
    }

    fn unlock(&self, level: c_int) -> c_int {
        // SAFETY: a live file.
        unsafe { (self.methods().xUnlock.unwrap())(self.file, level) }
    }

    fn file_control(&self, op: c_int, arg: *mut c_void) -> c_int {
        // SAFETY: a live file; `arg` is the case's (hostile) argument.
        unsafe { (self.methods().xFileControl.unwrap())(self.file, op, arg) }
    }

    fn lock_state(&self) -> c_int {
        let mut level: c_int = -100;
        let rc = self.file_control(
            ffi::SQLITE_FCNTL_LOCKSTATE,
            (&mut level as *mut c_int).cast(),
        );
        assert_eq!(rc, ffi::SQLITE_OK);
        level
    }

    fn last_errno(&self) -> c_int {
        let mut errno: c_int = -100;
        let rc = self.file_control(
            ffi::SQLITE_FCNTL_LAST_ERRNO,
            (&mut errno as *mut c_int).cast(),
        );
        assert_eq!(rc, ffi::SQLITE_OK);
        errno
    }

    fn chunk_size(&self, bytes: c_int) -> c_int {
        let mut bytes = bytes;
        self.file_control(
            ffi::SQLITE_FCNTL_CHUNK_SIZE,
            (&mut bytes as *mut c_int).cast(),
        )
    }

    /// SQLITE_FCNTL_MMAP_SIZE: (code, the previous limit).
    fn mmap_size(&self, bytes: i64) -> (c_int, i64) {
        let mut bytes = bytes;
        let rc = self.file_control(ffi::SQLITE_FCNTL_MMAP_SIZE, (&mut bytes as *mut i64).cast());
        (rc, bytes)
    }

    /// xShmMap: (code, whether a region came back).
    fn shm_map(&self, region: c_int, size: c_int, extend: c_int) -> (c_int, bool) {
        let mut pointer: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live file and a writable pointer slot.
        let rc = unsafe {
            (self.methods().xShmMap.unwrap())(
                self.file,
                region,
                size,
                extend,
                (&mut pointer as *mut *mut c_void).cast(),
            )
        };
        (rc, !pointer.is_null())
    }

    fn shm_lock(&self, offset: c_int, count: c_int, flags: c_int) -> c_int {
        // SAFETY: a live file.
        unsafe { (self.methods().xShmLock.unwrap())(self.file, offset, count, flags) }
    }

    /// xFetch: (code, the page pointer).
    fn fetch(&self, offset: i64, amount: c_int) -> (c_int, *mut c_void) {
        let mut page: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live file and a writable pointer slot.
        let rc = unsafe { (self.methods().xFetch.unwrap())(self.file, offset, amount, &mut page) };
        (rc, page)
    }

    fn unfetch(&self, offset: i64, page: *mut c_void) -> c_int {
        // SAFETY: a live file; `page` is the case's (hostile) pointer.
        unsafe { (self.methods().xUnfetch.unwrap())(self.file, offset, page) }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the file is open (xOpen succeeded) and closed once; the filename
        // outlives the close.
        unsafe {
            (self.methods().xClose.unwrap())(self.file);
            ffi::sqlite3_free_filename(self.name);
        }
    }
}

// ─── Running a case under each VFS ────────────────────────────────────────────────────

/// What a case reports: its result codes, and anything else it reads back.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Answer(String);

/// What `unix` did with a case, in a forked child.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Unix {
    Answered(Answer),
    /// Killed by this signal.
    Crashed(c_int),
}

/// Runs `body` in a forked child; what it returned, or the signal that killed it.
fn in_child(body: impl FnOnce() -> String) -> Unix {
    let mut fds = [0; 2];
    // SAFETY: a pipe into a two-int array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the tests are serial (`setup`), so no other thread holds a lock the child
    // needs; the child only calls the VFS, writes to the pipe and _exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: the child's copies of the pipe's ends.
        unsafe { libc::close(fds[0]) };
        let out = body();
        // SAFETY: writes the answer to the pipe and leaves without running destructors
        // (the parent's files are not the child's to close).
        unsafe {
            libc::write(fds[1], out.as_ptr().cast(), out.len());
            libc::_exit(0);
        }
    }
    // SAFETY: the parent's end of the pipe.
    unsafe { libc::close(fds[1]) };
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // SAFETY: `chunk` is writable for its length.
        let n = unsafe { libc::read(fds[0], chunk.as_mut_ptr().cast(), chunk.len()) };
        if n <= 0 {
            break;
        }
        got.extend_from_slice(&chunk[..n as usize]);
    }
    let mut status = 0;
    // SAFETY: our child and our pipe end.
    unsafe {
        libc::close(fds[0]);
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
    }
    if libc::WIFSIGNALED(status) {
        return Unix::Crashed(libc::WTERMSIG(status));
    }
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    Unix::Answered(Answer(String::from_utf8_lossy(&got).into_owned()))
}

/// What `io_uring` did with a case: its answer, whether the file still holds its original
/// bytes, and the log lines it produced.
#[derive(Debug)]
struct Ours {
    answer: Answer,
    unchanged: bool,
    log: Vec<(c_int, String)>,
}

/// A fresh file holding [`original_bytes`] in a new directory (kept alive by the guard).
fn fresh_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, original_bytes()).unwrap();
    (dir, path)
}

/// The case under `unix`, on its own fresh file, in a forked child.
fn under_unix(case: impl FnOnce(&Handle) -> String) -> Unix {
    let (_dir, path) = fresh_file("unix.db");
    in_child(|| {
        let handle = Handle::open(UNIX, &path, MAIN_DB).expect("unix xOpen");
        case(&handle)
    })
}

/// The case under `io_uring`, on its own fresh file, in this process: no panic allowed.
fn under_ours(case: impl FnOnce(&Handle) -> String) -> Ours {
    let (_dir, path) = fresh_file("ours.db");
    take_log();
    let panics = PANICS.load(Ordering::SeqCst);
    let answer = {
        let handle = Handle::open(OURS, &path, MAIN_DB).expect("io_uring xOpen");
        case(&handle)
    };
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        panics,
        "io_uring panicked (caught at the FFI boundary) in this case: {answer}"
    );
    Ours {
        answer: Answer(answer),
        unchanged: std::fs::read(&path).unwrap() == original_bytes(),
        log: take_log(),
    }
}

/// Both; `unix` first.
fn both(case: impl Fn(&Handle) -> String) -> (Unix, Ours) {
    (under_unix(&case), under_ours(&case))
}

/// The case answers the same under both VFSes; what `io_uring` answered.
fn same(case: impl Fn(&Handle) -> String) -> Ours {
    let (unix, ours) = both(case);
    assert_eq!(
        Unix::Answered(ours.answer.clone()),
        unix,
        "io_uring answers differently from unix"
    );
    ours
}

/// The case crashes `unix` (SIGSEGV or SIGBUS) and `io_uring` refuses it: `code`, the
/// file untouched, and a refusal in the log.
fn unix_crashes_ours_refuses(case: impl Fn(&Handle) -> String, code: c_int) -> Ours {
    let (unix, ours) = both(case);
    assert!(
        matches!(unix, Unix::Crashed(libc::SIGSEGV | libc::SIGBUS)),
        "expected unix to crash, it gave {unix:?}"
    );
    assert_eq!(ours.answer, Answer(code.to_string()), "io_uring's answer");
    assert!(ours.unchanged, "a refused call changed the file");
    assert_refusal_logged(&ours, code);
    ours
}

fn assert_refusal_logged(ours: &Ours, code: c_int) {
    assert!(
        ours.log
            .iter()
            .any(|(logged, message)| *logged == code && message.contains("refused")),
        "no refusal with code {code} in the log: {:?}",
        ours.log
    );
}

/// A buffer of `len` bytes for a case to read into or write from.
fn buffer(len: usize) -> Vec<u8> {
    vec![0xA5; len]
}

fn code(rc: c_int) -> String {
    rc.to_string()
}

// ─── xRead and xWrite ─────────────────────────────────────────────────────────────────

#[test]
fn negative_read_offset_is_an_error_not_a_panic() {
    let _serial = setup();
    for offset in [-1, -100, -8192, i64::MIN] {
        // `unix` copies from before its (absent) mapping: a crash.
        let ours = unix_crashes_ours_refuses(
            |file| code(file.read(&mut buffer(16), 10, offset)),
            ffi::SQLITE_IOERR_READ,
        );
        assert!(ours.unchanged);
    }
    // With the file memory-mapped, `unix` copies from the byte before its mapping: a
    // crash, or (when other memory happens to lie there) that memory's bytes.
    let (unix, ours) = both(|file| {
        assert_eq!(file.mmap_size(1 << 20).0, ffi::SQLITE_OK);
        let (rc, page) = file.fetch(0, 4096);
        assert_eq!(rc, ffi::SQLITE_OK);
        assert_eq!(file.unfetch(0, page), ffi::SQLITE_OK);
        code(file.read(&mut buffer(16), 10, -1))
    });
    assert!(
        matches!(unix, Unix::Crashed(_)) || unix == Unix::Answered(Answer(code(ffi::SQLITE_OK))),
        "{unix:?}"
    );
    assert_eq!(ours.answer, Answer(code(ffi::SQLITE_IOERR_READ)));
    assert!(ours.unchanged);
    assert_refusal_logged(&ours, ffi::SQLITE_IOERR_READ);
}

#[test]
fn reads_and_writes_of_zero_bytes_succeed_at_any_offset_like_unix() {
    let _serial = setup();
    for offset in [0, -1, 1 << 40, i64::MAX] {
        same(|file| code(file.read(&mut buffer(16), 0, offset)));
        same(|file| code(file.read_raw(std::ptr::null_mut(), 0, offset)));
    }
    for offset in [0, 1 << 40, i64::MAX] {
        let ours = same(|file| code(file.write(&buffer(16), 0, offset)));
        assert!(ours.unchanged);
    }
    // Holding EXCLUSIVE (where this VFS caches the size), a zero-byte write far past the
    // end leaves the size as it is.
    same(|file| {
        let locks = [file.lock(1), file.lock(4)];
        let rc = file.write(&buffer(16), 0, 1 << 40);
        format!("{locks:?} {rc} {:?}", file.size())
    });
    // A negative offset is pwrite(2)'s EINVAL whatever the amount.
    same(|file| {
        let rc = file.write(&buffer(16), 0, -1);
        format!("{rc} errno {}", file.last_errno())
    });
}

#[test]
fn negative_write_offset_is_an_io_error_like_unix() {
    let _serial = setup();
    for offset in [-1, -4096, i64::MIN] {
        let ours = same(|file| {
            let rc = file.write(&buffer(16), 10, offset);
            format!("{rc} errno {}", file.last_errno())
        });
        assert_eq!(
            ours.answer,
            Answer(format!(
                "{} errno {}",
                ffi::SQLITE_IOERR_WRITE,
                libc::EINVAL
            ))
        );
        assert!(ours.unchanged);
    }
}

#[test]
fn negative_amounts_are_refused() {
    let _serial = setup();
    // `unix` preads with the amount as a size_t; past the end of the file the kernel
    // refuses the length (EFAULT), and the -1 it returns equals the amount: SQLITE_OK
    // with nothing read. Inside the file it would read past the buffer.
    let (unix, ours) = both(|file| code(file.read(&mut buffer(16), -1, 1 << 20)));
    assert_eq!(unix, Unix::Answered(Answer(code(ffi::SQLITE_OK))));
    assert_eq!(ours.answer, Answer(code(ffi::SQLITE_IOERR_READ)));
    assert_refusal_logged(&ours, ffi::SQLITE_IOERR_READ);
    // `unix` writes the amount's low 17 bits' worth (128 KiB - 1 bytes for -1) from the
    // buffer, here one that really has them, and answers SQLITE_OK.
    let case = |file: &Handle| {
        let rc = file.write(&buffer(131071), -1, 0);
        format!("{rc} {:?}", file.size())
    };
    let (unix, ours) = both(case);
    assert_eq!(
        unix,
        Unix::Answered(Answer(format!("{} {:?}", ffi::SQLITE_OK, (0, 131071))))
    );
    assert_eq!(
        ours.answer,
        Answer(format!("{} {:?}", ffi::SQLITE_IOERR_WRITE, (0, 8192)))
    );
    assert!(ours.unchanged);
    assert_refusal_logged(&ours, ffi::SQLITE_IOERR_WRITE);
}

#[test]
fn offsets_near_the_largest_file_offset_are_io_errors_like_unix() {
    let _serial = setup();
    for offset in [i64::MAX - 5, i64::MAX, (1 << 62) + 1] {
        let ours = same(|file| {
            let mut buf = buffer(16);
            let rc = file.read(&mut buf, 10, offset);
            format!("{rc} errno {} {:?}", file.last_errno(), &buf[..10])
        });
        assert!(ours.unchanged);
    }
    // Past the end of a file that cannot be that large (EINVAL: offset + amount overflows;
    // EFBIG: beyond the filesystem's largest file); a later sync still succeeds.
    for offset in [i64::MAX - 5, 1 << 50] {
        let ours = same(|file| {
            let rc = file.write(&buffer(16), 10, offset);
            format!("{rc} errno {} sync {}", file.last_errno(), file.sync())
        });
        assert!(ours.unchanged);
    }
    for size in [i64::MAX, 1 << 50] {
        let ours = same(|file| {
            let rc = file.truncate(size);
            format!("{rc} errno {} {:?}", file.last_errno(), file.size())
        });
        assert!(ours.unchanged);
    }
    // With a chunk size, the size is rounded up first: near the largest offset the sum
    // wraps (os_unix.c's arithmetic), and truncate and the size hint answer as `unix`'s.
    for size in [i64::MAX, i64::MAX - 1000] {
        let ours = same(|file| {
            let chunk = file.chunk_size(65_536);
            let rc = file.truncate(size);
            let mut hint = size;
            let hinted =
                file.file_control(ffi::SQLITE_FCNTL_SIZE_HINT, (&mut hint as *mut i64).cast());
            format!(
                "{chunk} {rc} errno {} hint {hinted} {:?}",
                file.last_errno(),
                file.size()
            )
        });
        assert!(ours.unchanged);
    }
}

#[test]
fn null_buffers_are_io_errors_not_a_crash() {
    let _serial = setup();
    let ours = same(|file| {
        let rc = file.read_raw(std::ptr::null_mut(), 10, 0);
        format!("{rc} errno {}", file.last_errno())
    });
    assert_eq!(
        ours.answer,
        Answer(format!("{} errno {}", ffi::SQLITE_IOERR_READ, libc::EFAULT))
    );
    // Past the end of the file pread(2) has nothing to copy, returns 0, and `unix`
    // zero-fills the rest of the (null) buffer.
    for offset in [8192, 1 << 30] {
        unix_crashes_ours_refuses(
            |file| code(file.read_raw(std::ptr::null_mut(), 10, offset)),
            ffi::SQLITE_IOERR_READ,
        );
    }
    let ours = same(|file| {
        let rc = file.write_raw(std::ptr::null(), 10, 0);
        format!("{rc} errno {}", file.last_errno())
    });
    assert_eq!(
        ours.answer,
        Answer(format!(
            "{} errno {}",
            ffi::SQLITE_IOERR_WRITE,
            libc::EFAULT
        ))
    );
    assert!(ours.unchanged);
    // A documented difference: past the end of the file, ext4's pwrite(2) faults on the
    // buffer after extending the file to the write's offset, so under `unix` the file
    // grows; this VFS refuses the null buffer before any system call.
    let (unix, ours) = both(|file| {
        let rc = file.write_raw(std::ptr::null(), 10, 20000);
        format!("{rc} {:?}", file.size())
    });
    if let Unix::Answered(Answer(unix)) = &unix {
        assert!(
            unix.starts_with(&format!("{} (0, ", ffi::SQLITE_IOERR_WRITE)),
            "{unix}"
        );
    } else {
        panic!("unix crashed on a null write buffer: {unix:?}");
    }
    assert_eq!(
        ours.answer,
        Answer(format!("{} {:?}", ffi::SQLITE_IOERR_WRITE, (0, 8192)))
    );
    assert!(ours.unchanged);
}

/// A documented difference: os_unix.c's seekAndWriteFd masks a write's length to 17 bits
/// (an assert-only bound: SQLite never writes more than a 64 KiB page at once), so a write
/// of 128 KiB writes nothing and one of 200,000 bytes writes 68,928, both SQLITE_FULL.
/// This VFS writes every byte it is given.
#[test]
fn writes_of_128_kib_or_more_are_written_whole() {
    let _serial = setup();
    for len in [131072usize, 200000] {
        let case = |file: &Handle| {
            let rc = file.write(&vec![7u8; len], len as c_int, 0);
            format!("{rc} {:?}", file.size())
        };
        let (unix, ours) = both(case);
        let unix_size = (len & 0x1ffff).max(8192) as i64;
        assert_eq!(
            unix,
            Unix::Answered(Answer(format!("{} {:?}", ffi::SQLITE_FULL, (0, unix_size))))
        );
        assert_eq!(
            ours.answer,
            Answer(format!("{} {:?}", ffi::SQLITE_OK, (0, len as i64)))
        );
    }
}

// ─── xTruncate and the chunk size ─────────────────────────────────────────────────────

/// A log's os_unix.c lines with the line number written `N` and `dir` written `DIR`.
fn os_lines(log: &[(c_int, String)], dir: &Path) -> Vec<(c_int, String)> {
    let dir = dir.to_string_lossy();
    log.iter()
        .filter_map(|(code, message)| {
            let rest = message.strip_prefix("os_unix.c:")?;
            let (_, rest) = rest.split_once(':')?;
            Some((*code, format!("os_unix.c:N:{}", rest.replace(&*dir, "DIR"))))
        })
        .collect()
}

#[test]
fn negative_truncate_size_is_an_io_error_like_unix() {
    let _serial = setup();
    let ours = same(|file| {
        let rc = file.truncate(-1);
        format!("{rc} errno {} {:?}", file.last_errno(), file.size())
    });
    assert_eq!(
        ours.answer,
        Answer(format!(
            "{} errno {} {:?}",
            ffi::SQLITE_IOERR_TRUNCATE,
            libc::EINVAL,
            (0, 8192)
        ))
    );
    assert!(ours.unchanged);
    // Logged as os_unix.c logs the failed ftruncate (compared line for line, in this
    // process, where the log is collected).
    let logs: Vec<_> = [UNIX, OURS]
        .iter()
        .map(|vfs_name| {
            let (dir, path) = fresh_file("test.db");
            take_log();
            let file = Handle::open(vfs_name, &path, MAIN_DB).unwrap();
            assert_eq!(file.truncate(-1), ffi::SQLITE_IOERR_TRUNCATE);
            drop(file);
            os_lines(&take_log(), dir.path())
        })
        .collect();
    assert_eq!(
        logs[1].len(),
        1,
        "io_uring logs one ftruncate line: {:?}",
        logs[1]
    );
    assert!(
        logs[1][0].1.starts_with(logs[0][0].1.as_str()) && logs[1][0].0 == logs[0][0].0,
        "io_uring {:?} unix {:?}",
        logs[1],
        logs[0]
    );
    // A negative size well below the chunk size rounds to a negative size under `unix`
    // too: both refuse it.
    same(|file| {
        let chunk = file.chunk_size(4096);
        let rc = file.truncate(-8192);
        format!("{chunk} {rc} {:?}", file.size())
    });
}

/// A documented difference: with a chunk size set, os_unix.c rounds the size up to a
/// chunk before ftruncate, so a size just below zero becomes 0 and empties the file. This
/// VFS refuses every negative size.
#[test]
fn negative_truncate_size_is_refused_whatever_the_chunk_size() {
    let _serial = setup();
    let (unix, ours) = both(|file| {
        let chunk = file.chunk_size(4096);
        let rc = file.truncate(-1);
        format!("{chunk} {rc} {:?}", file.size())
    });
    assert_eq!(unix, Unix::Answered(Answer(format!("0 0 {:?}", (0, 0)))));
    assert_eq!(
        ours.answer,
        Answer(format!("0 {} {:?}", ffi::SQLITE_IOERR_TRUNCATE, (0, 8192)))
    );
    assert!(ours.unchanged);
}

#[test]
fn negative_chunk_size_turns_chunking_off_like_unix() {
    let _serial = setup();
    for chunk in [-1, -4096, i32::MIN, 0] {
        same(|file| {
            let rc = file.chunk_size(chunk);
            let mut hint: i64 = 20000;
            let hinted =
                file.file_control(ffi::SQLITE_FCNTL_SIZE_HINT, (&mut hint as *mut i64).cast());
            let truncated = file.truncate(5);
            format!("{rc} {hinted} {truncated} {:?}", file.size())
        });
    }
    // A negative size hint asks for nothing.
    same(|file| {
        let chunk = file.chunk_size(4096);
        let mut hint: i64 = -1;
        let rc = file.file_control(ffi::SQLITE_FCNTL_SIZE_HINT, (&mut hint as *mut i64).cast());
        format!("{chunk} {rc} {:?}", file.size())
    });
}

// ─── xLock and xUnlock ────────────────────────────────────────────────────────────────

/// Whether another process can take a write lock on `[start, start + len)` of `path`
/// right now (F_GETLK from a forked child, which sees this process's POSIX and OFD locks).
fn free_for_others(path: &Path, start: i64, len: i64) -> bool {
    let path = CString::new(path.to_str().unwrap()).unwrap();
    let probe = in_child(|| {
        // SAFETY: plain open/fcntl on a NUL-terminated path; `lock` is plain data.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDWR);
            let mut lock: libc::flock = std::mem::zeroed();
            lock.l_type = libc::F_WRLCK as i16;
            lock.l_whence = libc::SEEK_SET as i16;
            lock.l_start = start;
            lock.l_len = len;
            let rc = libc::fcntl(fd, libc::F_GETLK, &mut lock);
            format!("{}", rc == 0 && lock.l_type == libc::F_UNLCK as i16)
        }
    });
    probe == Unix::Answered(Answer("true".to_string()))
}

/// SQLite's lock bytes: PENDING, RESERVED and the 510-byte SHARED range, 0x40000000 on.
const LOCK_BYTES: (i64, i64) = (0x4000_0000, 512);

/// Takes the file from NONE to `held` the way SQLite does, then makes `call`; reports the
/// codes, the level after, and, after unlocking to NONE, the level and whether another
/// process could lock the lock bytes.
fn lock_case(file: &Handle, held: c_int, call: impl Fn(&Handle) -> c_int) -> String {
    let mut path = Vec::new();
    for level in [1, 2, 4] {
        if level <= held {
            path.push(file.lock(level));
        }
    }
    let rc = call(file);
    let level = file.lock_state();
    let unlocked = file.unlock(0);
    let free = free_for_others(&file.path, LOCK_BYTES.0, LOCK_BYTES.1);
    format!(
        "{path:?} {rc} level {level} unlock {unlocked} level {} free {free}",
        file.lock_state()
    )
}

#[test]
fn lock_levels_a_lock_already_satisfies_succeed_like_unix() {
    let _serial = setup();
    for (held, level) in [
        (0, -1),
        (0, i32::MIN),
        (1, 0),
        (1, 1),
        (2, 1),
        (4, 2),
        (4, 4),
    ] {
        same(|file| lock_case(file, held, |file| file.lock(level)));
    }
    // The transitions sqlite3.h defines.
    for (held, level) in [(0, 1), (1, 2), (1, 4), (2, 4)] {
        same(|file| lock_case(file, held, |file| file.lock(level)));
    }
}

#[test]
fn lock_levels_outside_the_protocol_are_refused() {
    let _serial = setup();
    for (held, level) in [
        (0, 2),
        (0, 3),
        (0, 4),
        (0, 5),
        (1, 3),
        (1, 5),
        (1, i32::MAX),
        (2, 3),
    ] {
        let (unix, ours) = both(|file| lock_case(file, held, |file| file.lock(level)));
        // `unix` grants it and records the level (as a byte: i32::MAX reads 255).
        let Unix::Answered(Answer(unix)) = unix else {
            panic!("unix crashed on xLock({level}) from {held}: {unix:?}");
        };
        let recorded = (level as u8) as c_int;
        assert!(
            unix.contains(&format!(" 0 level {recorded} unlock 0 level 0")),
            "xLock({level}) from {held} under unix: {unix}"
        );
        // From NONE, `unix`'s unlock then leaves the SHARED range write-locked (its count
        // of SHARED holders goes negative): no other process can lock the file.
        if held == 0 && level >= 2 && level != 2 {
            assert!(unix.ends_with("free false"), "unix: {unix}");
        }
        let expected_path: Vec<c_int> = [1, 2, 4]
            .iter()
            .filter(|l| **l <= held)
            .map(|_| 0)
            .collect();
        assert_eq!(
            ours.answer,
            Answer(format!(
                "{expected_path:?} {} level {held} unlock 0 level 0 free true",
                ffi::SQLITE_IOERR_LOCK
            )),
            "xLock({level}) from {held}"
        );
        assert_refusal_logged(&ours, ffi::SQLITE_IOERR_LOCK);
    }
}

#[test]
fn unlock_levels_outside_the_protocol_are_refused() {
    let _serial = setup();
    // Nothing to release: SQLITE_OK under both, whatever the level.
    for (held, level) in [
        (0, 0),
        (0, 1),
        (0, 5),
        (1, 5),
        (1, 1),
        (4, 4),
        (4, 5),
        (2, 2),
    ] {
        same(|file| lock_case(file, held, |file| file.unlock(level)));
    }
    // Defined: to SHARED or NONE.
    for (held, level) in [(1, 0), (2, 1), (2, 0), (4, 1), (4, 0)] {
        same(|file| lock_case(file, held, |file| file.unlock(level)));
    }
    for (held, level) in [(1, -1), (0, -1), (4, -1), (4, 2), (4, 3), (2, i32::MIN)] {
        let (unix, ours) = both(|file| lock_case(file, held, |file| file.unlock(level)));
        // `unix` records the level (a negative one as 255) over locks that do not match.
        let Unix::Answered(Answer(unix)) = unix else {
            panic!("unix crashed on xUnlock({level}) from {held}: {unix:?}");
        };
        let recorded = (level as u8) as c_int;
        assert!(
            unix.contains(&format!(" 0 level {recorded} unlock")),
            "xUnlock({level}) from {held} under unix: {unix}"
        );
        let expected_path: Vec<c_int> = [1, 2, 4]
            .iter()
            .filter(|l| **l <= held)
            .map(|_| 0)
            .collect();
        assert_eq!(
            ours.answer,
            Answer(format!(
                "{expected_path:?} {} level {held} unlock 0 level 0 free true",
                ffi::SQLITE_IOERR_UNLOCK
            )),
            "xUnlock({level}) from {held}"
        );
        assert_refusal_logged(&ours, ffi::SQLITE_IOERR_UNLOCK);
    }
}

// ─── xFileControl ─────────────────────────────────────────────────────────────────────

#[test]
fn unknown_file_control_opcodes_are_not_found_like_unix() {
    let _serial = setup();
    let unknown = [
        9999,
        -1,
        i32::MIN,
        i32::MAX,
        ffi::SQLITE_FCNTL_BUSYHANDLER,
        ffi::SQLITE_FCNTL_COMMIT_PHASETWO,
        ffi::SQLITE_FCNTL_OVERWRITE,
        ffi::SQLITE_FCNTL_LOCK_TIMEOUT,
        ffi::SQLITE_FCNTL_BEGIN_ATOMIC_WRITE,
        ffi::SQLITE_FCNTL_SIZE_LIMIT,
        ffi::SQLITE_FCNTL_FILESTAT,
        ffi::SQLITE_FCNTL_RESET_CACHE,
        ffi::SQLITE_FCNTL_WIN32_AV_RETRY,
    ];
    for op in unknown {
        // Null, and a pointer to nothing: neither is looked at.
        for arg in [std::ptr::null_mut(), 8 as *mut c_void] {
            let ours = same(|file| code(file.file_control(op, arg)));
            assert_eq!(ours.answer, Answer(code(ffi::SQLITE_NOTFOUND)), "op {op}");
        }
    }
}

#[test]
fn file_controls_that_ignore_their_argument_accept_null_like_unix() {
    let _serial = setup();
    for op in [
        ffi::SQLITE_FCNTL_SYNC,
        ffi::SQLITE_FCNTL_CKPT_START,
        ffi::SQLITE_FCNTL_CKPT_DONE,
        ffi::SQLITE_FCNTL_PRAGMA,
        ffi::SQLITE_FCNTL_NULL_IO,
    ] {
        same(|file| code(file.file_control(op, std::ptr::null_mut())));
    }
}

/// After SQLITE_FCNTL_NULL_IO the file has no descriptor: its writes, syncs and reads fail
/// at once with the closed descriptor's EBADF, as under `unix` (a write is not queued for
/// a later call to report).
#[test]
fn io_after_null_io_fails_at_once_like_unix() {
    let _serial = setup();
    same(|file| {
        let page = buffer(4096);
        let mut back = buffer(4096);
        let null_io = file.file_control(ffi::SQLITE_FCNTL_NULL_IO, std::ptr::null_mut());
        let write = file.write(&page, 4096, 0);
        let write_errno = file.last_errno();
        let sync = file.sync();
        let read = file.read(&mut back, 4096, 0);
        format!("{null_io} {write} {write_errno} {sync} {read}")
    });
}

#[test]
fn file_controls_given_a_null_argument_are_misuse_not_a_crash() {
    let _serial = setup();
    for op in [
        ffi::SQLITE_FCNTL_LOCKSTATE,
        ffi::SQLITE_FCNTL_LAST_ERRNO,
        ffi::SQLITE_FCNTL_CHUNK_SIZE,
        ffi::SQLITE_FCNTL_SIZE_HINT,
        ffi::SQLITE_FCNTL_PERSIST_WAL,
        ffi::SQLITE_FCNTL_POWERSAFE_OVERWRITE,
        ffi::SQLITE_FCNTL_VFSNAME,
        ffi::SQLITE_FCNTL_TEMPFILENAME,
        ffi::SQLITE_FCNTL_HAS_MOVED,
        ffi::SQLITE_FCNTL_MMAP_SIZE,
        ffi::SQLITE_FCNTL_EXTERNAL_READER,
    ] {
        unix_crashes_ours_refuses(
            |file| code(file.file_control(op, std::ptr::null_mut())),
            ffi::SQLITE_MISUSE,
        );
    }
}

#[test]
fn negative_mmap_size_only_asks_like_unix() {
    let _serial = setup();
    same(|file| format!("{:?}", file.mmap_size(-1)));
    same(|file| {
        format!(
            "{:?} {:?} {:?}",
            file.mmap_size(1 << 20),
            file.mmap_size(-5),
            file.mmap_size(i64::MIN)
        )
    });
}

/// SQLITE_FCNTL_PRAGMA's `char*[3]`: (code, the result string or None).
fn pragma(file: &Handle, name: Option<&CStr>, value: Option<&[u8]>) -> (c_int, Option<String>) {
    let value = value.map(|v| CString::new(v).unwrap());
    let mut args: [*mut c_char; 3] = [
        std::ptr::null_mut(),
        name.map_or(std::ptr::null_mut(), |n| n.as_ptr() as *mut c_char),
        value
            .as_ref()
            .map_or(std::ptr::null_mut(), |v| v.as_ptr() as *mut c_char),
    ];
    let rc = file.file_control(ffi::SQLITE_FCNTL_PRAGMA, args.as_mut_ptr().cast());
    let text = (!args[0].is_null()).then(|| {
        // SAFETY: the VFS wrote a NUL-terminated string from sqlite3_malloc.
        let text = unsafe { CStr::from_ptr(args[0]) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: freed once, with SQLite's allocator.
        unsafe { ffi::sqlite3_free(args[0].cast()) };
        text
    });
    (rc, text)
}

#[test]
fn malformed_io_uring_stats_pragma_is_an_error_with_a_message() {
    let _serial = setup();
    // Pragmas this VFS does not answer, and a null name: SQLITE_NOTFOUND as from `unix`.
    for name in [
        None,
        Some(c"page_size"),
        Some(c"io_uring_statsx"),
        Some(c""),
    ] {
        same(|file| format!("{:?}", pragma(file, name, None)));
    }
    // `unix` does not know the pragma: SQLITE_NOTFOUND. This VFS answers it; a value it
    // does not know is SQLITE_ERROR with the message in the result slot.
    for value in [&b"bogus"[..], b"", b"RESET ", b"\xff\xfe", b"reset; DROP"] {
        let (unix, ours) =
            both(|file| format!("{:?}", pragma(file, Some(c"io_uring_stats"), Some(value))));
        assert_eq!(
            unix,
            Unix::Answered(Answer(format!(
                "{:?}",
                (ffi::SQLITE_NOTFOUND, None::<String>)
            )))
        );
        let Answer(answer) = &ours.answer;
        assert!(
            answer.starts_with(&format!("({}, Some(\"unknown argument", ffi::SQLITE_ERROR)),
            "{value:?}: {answer}"
        );
    }
    let ours = under_ours(|file| {
        format!(
            "{:?}",
            pragma(file, Some(c"IO_URING_STATS"), Some(b"reset"))
        )
    });
    assert_eq!(
        ours.answer,
        Answer(format!("{:?}", (ffi::SQLITE_OK, Some("reset"))))
    );
}

// ─── Shared memory ────────────────────────────────────────────────────────────────────

#[test]
fn shm_map_of_a_negative_region_is_refused() {
    let _serial = setup();
    for extend in [0, 1] {
        for region in [-1, i32::MIN] {
            let ours = unix_crashes_ours_refuses(
                |file| code(file.shm_map(region, 32768, extend).0),
                ffi::SQLITE_IOERR_SHMMAP,
            );
            assert!(ours.unchanged);
        }
    }
}

#[test]
fn shm_map_with_a_size_that_is_not_whole_pages_is_refused() {
    let _serial = setup();
    // A size ≤ 0: `unix`'s mmap(2) fails, SQLITE_IOERR_SHMMAP, as here.
    for size in [0, -1, i32::MIN] {
        for extend in [0, 1] {
            let ours = same(|file| format!("{:?}", file.shm_map(0, size, extend)));
            assert_eq!(
                ours.answer,
                Answer(format!("{:?}", (ffi::SQLITE_IOERR_SHMMAP, false)))
            );
        }
    }
    // A documented difference: `unix` maps 1000 bytes past the end of its 3-byte -shm
    // file (touching them is SIGBUS); this VFS refuses a size that is not whole 4 KiB
    // pages, the unit a -shm file grows by.
    let (unix, ours) = both(|file| format!("{:?}", file.shm_map(0, 1000, 1)));
    assert_eq!(
        unix,
        Unix::Answered(Answer(format!("{:?}", (ffi::SQLITE_OK, true))))
    );
    assert_eq!(
        ours.answer,
        Answer(format!("{:?}", (ffi::SQLITE_IOERR_SHMMAP, false)))
    );
    assert_refusal_logged(&ours, ffi::SQLITE_IOERR_SHMMAP);
    // A documented difference: regions of another size than the index's first. `unix`
    // maps the new size at offsets counted in it; this VFS refuses.
    let (unix, ours) = both(|file| {
        format!(
            "{:?} {:?}",
            file.shm_map(0, 32768, 1),
            file.shm_map(1, 65536, 1)
        )
    });
    assert_eq!(
        unix,
        Unix::Answered(Answer(format!("{:?} {:?}", (0, true), (0, true))))
    );
    assert_eq!(
        ours.answer,
        Answer(format!(
            "{:?} {:?}",
            (0, true),
            (ffi::SQLITE_IOERR_SHMMAP, false)
        ))
    );
}

#[test]
fn shm_map_without_extend_answers_no_region_like_unix() {
    let _serial = setup();
    for region in [0, 7, 1 << 20, i32::MAX] {
        let ours = same(|file| format!("{:?}", file.shm_map(region, 32768, 0)));
        assert_eq!(
            ours.answer,
            Answer(format!("{:?}", (ffi::SQLITE_OK, false)))
        );
    }
    same(|file| {
        format!(
            "{:?} {:?}",
            file.shm_map(0, 32768, 1),
            file.shm_map(5, 32768, 0)
        )
    });
}

const SHARED: c_int = ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_SHARED;
const EXCLUSIVE: c_int = ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_EXCLUSIVE;

/// Maps the WAL index, makes the request, then asks for all eight slots exclusively
/// (which only a connection holding nothing gets).
fn shm_lock_case(file: &Handle, offset: c_int, count: c_int, flags: c_int) -> String {
    let mapped = file.shm_map(0, 32768, 1);
    let rc = file.shm_lock(offset, count, flags);
    let all = file.shm_lock(0, 8, EXCLUSIVE);
    format!("{mapped:?} {rc} then all {all}")
}

#[test]
fn shm_lock_outside_the_eight_slots_is_refused() {
    let _serial = setup();
    for (offset, count, flags) in [
        (-1, 1, SHARED),
        (8, 1, SHARED),
        (100, 1, SHARED),
        (0, 9, EXCLUSIVE),
        (0, 0, EXCLUSIVE),
        (3, -1, EXCLUSIVE),
        (i32::MAX, 1, EXCLUSIVE),
        (4, i32::MAX, EXCLUSIVE),
        (-1, 1, ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_EXCLUSIVE),
    ] {
        // `unix` indexes its lock array with the slot: memory beside it, or a crash.
        let (unix, ours) = both(|file| shm_lock_case(file, offset, count, flags));
        assert_eq!(
            ours.answer,
            Answer(format!(
                "{:?} {} then all {}",
                (0, true),
                ffi::SQLITE_IOERR_SHMLOCK,
                ffi::SQLITE_OK
            )),
            "({offset}, {count}, {flags:#x}); unix: {unix:?}"
        );
        assert_refusal_logged(&ours, ffi::SQLITE_IOERR_SHMLOCK);
    }
    // A shared lock is one slot: `unix` locks both slots of this one but counts only the
    // first, so even its own connection then cannot lock them exclusively.
    let (unix, ours) = both(|file| shm_lock_case(file, 0, 2, SHARED));
    assert_eq!(
        unix,
        Unix::Answered(Answer(format!(
            "{:?} 0 then all {}",
            (0, true),
            ffi::SQLITE_BUSY
        )))
    );
    assert_eq!(
        ours.answer,
        Answer(format!(
            "{:?} {} then all 0",
            (0, true),
            ffi::SQLITE_IOERR_SHMLOCK
        ))
    );
}

#[test]
fn shm_lock_flags_are_read_as_unix_reads_them() {
    let _serial = setup();
    // Neither an unlock nor exactly a lock: nothing happens. An unlock with extra bits is
    // an unlock.
    for flags in [
        0,
        ffi::SQLITE_SHM_LOCK,
        ffi::SQLITE_SHM_SHARED,
        ffi::SQLITE_SHM_EXCLUSIVE,
        SHARED | ffi::SQLITE_SHM_EXCLUSIVE,
        ffi::SQLITE_SHM_UNLOCK,
        ffi::SQLITE_SHM_UNLOCK | SHARED,
        -1,
        0x100 | SHARED,
    ] {
        let ours = same(|file| shm_lock_case(file, 3, 1, flags));
        assert_eq!(
            ours.answer,
            Answer(format!("{:?} 0 then all 0", (0, true))),
            "flags {flags:#x}"
        );
    }
    // An unlock with extra bits releases what is held.
    for flags in [ffi::SQLITE_SHM_UNLOCK | SHARED, -1, ffi::SQLITE_SHM_UNLOCK] {
        same(|file| {
            let mapped = file.shm_map(0, 32768, 1);
            let held = file.shm_lock(3, 1, SHARED);
            let rc = file.shm_lock(3, 1, flags);
            let all = file.shm_lock(0, 8, EXCLUSIVE);
            format!("{mapped:?} {held} {rc} then all {all}")
        });
    }
}

#[test]
fn shm_lock_requests_on_slots_this_connection_holds_are_busy_like_unix() {
    let _serial = setup();
    for (first, second) in [
        (EXCLUSIVE, SHARED),
        (EXCLUSIVE, EXCLUSIVE),
        (SHARED, EXCLUSIVE),
        (SHARED, SHARED),
    ] {
        same(|file| {
            let mapped = file.shm_map(0, 32768, 1);
            let rcs = [file.shm_lock(3, 1, first), file.shm_lock(3, 1, second)];
            format!("{mapped:?} {rcs:?}")
        });
    }
}

#[test]
fn shm_lock_without_a_wal_index_is_an_shm_lock_error_like_unix() {
    let _serial = setup();
    for (offset, count, flags) in [
        (0, 1, SHARED),
        (0, 8, EXCLUSIVE),
        (0, 1, 0),
        (-1, 1, SHARED),
    ] {
        let ours = same(|file| code(file.shm_lock(offset, count, flags)));
        assert_eq!(ours.answer, Answer(code(ffi::SQLITE_IOERR_SHMLOCK)));
    }
}

// ─── xFetch and xUnfetch ──────────────────────────────────────────────────────────────

/// With mmap on, fetches `amount` bytes at `offset`: the code and whether a page came.
fn fetch_case(file: &Handle, offset: i64, amount: c_int) -> String {
    assert_eq!(file.mmap_size(1 << 20).0, ffi::SQLITE_OK);
    let (rc, page) = file.fetch(offset, amount);
    if !page.is_null() {
        assert_eq!(file.unfetch(offset, page), ffi::SQLITE_OK);
    }
    format!("{rc} page {}", !page.is_null())
}

#[test]
fn fetch_outside_the_file_gives_no_page() {
    let _serial = setup();
    // A documented difference: `unix` hands out a pointer outside its mapping (before it,
    // or where offset + amount overflows); this VFS answers "no page", after which SQLite
    // reads.
    for (offset, amount) in [
        (-1, 4096),
        (-8192, 4096),
        (0, -1),
        (8192 + 40, -300),
        (i64::MAX - 10, 100),
    ] {
        let (unix, ours) = both(|file| fetch_case(file, offset, amount));
        assert_eq!(
            unix,
            Unix::Answered(Answer("0 page true".to_string())),
            "({offset}, {amount})"
        );
        assert_eq!(
            ours.answer,
            Answer("0 page false".to_string()),
            "({offset}, {amount})"
        );
        assert!(
            ours.log
                .iter()
                .any(|(_, message)| message.contains("xFetch")),
            "{:?}",
            ours.log
        );
    }
    // Past the mapped size, both answer no page; inside it, a page.
    for (offset, amount) in [
        (0, i32::MAX),
        (8192, 4096),
        (1 << 40, 4096),
        (0, 4096),
        (4096, 0),
    ] {
        same(|file| fetch_case(file, offset, amount));
    }
    // With mmap off there is never a page.
    same(|file| format!("{:?}", file.fetch(-1, 4096).0));
}

#[test]
fn unfetch_of_pages_never_fetched_is_ignored() {
    let _serial = setup();
    // `unix` counts its fetched pages below zero (SQLITE_OK); this VFS ignores the call
    // (SQLITE_OK) and logs it. Fetching works afterwards under both.
    let case = |file: &Handle| {
        assert_eq!(file.mmap_size(1 << 20).0, ffi::SQLITE_OK);
        let rc = file.unfetch(0, 0x1000 as *mut c_void);
        format!("{rc} then {}", fetch_case(file, 0, 4096))
    };
    let ours = same(case);
    assert!(
        ours.log.iter().any(|(_, m)| m.contains("xUnfetch")),
        "{:?}",
        ours.log
    );
    // Dropping the whole mapping while a page is out: `unix` unmaps under the page;
    // this VFS keeps the mapping (the page stays readable) and logs it.
    let case = |file: &Handle| {
        assert_eq!(file.mmap_size(1 << 20).0, ffi::SQLITE_OK);
        let (rc, page) = file.fetch(0, 4096);
        let dropped = file.unfetch(0, std::ptr::null_mut());
        format!("{rc} {} {dropped}", !page.is_null())
    };
    let ours = same(case);
    assert!(
        ours.log.iter().any(|(_, m)| m.contains("xUnfetch")),
        "{:?}",
        ours.log
    );
    let ours = under_ours(|file| {
        assert_eq!(file.mmap_size(1 << 20).0, ffi::SQLITE_OK);
        let (_, page) = file.fetch(0, 4096);
        file.unfetch(0, std::ptr::null_mut());
        // SAFETY: the page this VFS kept mapped.
        let first = unsafe { *(page as *const u8).add(300) };
        let returned = file.unfetch(0, page);
        format!("{first} {returned}")
    });
    assert_eq!(ours.answer, Answer(format!("{} 0", original_bytes()[300])));
}

// ─── Null out-pointers ────────────────────────────────────────────────────────────────

#[test]
fn null_out_pointers_are_misuse_not_a_crash() {
    let _serial = setup();
    unix_crashes_ours_refuses(
        |file| {
            // SAFETY: a live file; the null out-pointer is the hostile value.
            code(unsafe { (file.methods().xFileSize.unwrap())(file.file, std::ptr::null_mut()) })
        },
        ffi::SQLITE_MISUSE,
    );
    unix_crashes_ours_refuses(
        |file| {
            // SAFETY: a live file; the null out-pointer is the hostile value.
            code(unsafe {
                (file.methods().xCheckReservedLock.unwrap())(file.file, std::ptr::null_mut())
            })
        },
        ffi::SQLITE_MISUSE,
    );
    unix_crashes_ours_refuses(
        |file| {
            // SAFETY: a live file; the null out-pointer is the hostile value.
            code(unsafe {
                (file.methods().xShmMap.unwrap())(file.file, 0, 32768, 1, std::ptr::null_mut())
            })
        },
        ffi::SQLITE_MISUSE,
    );
    unix_crashes_ours_refuses(
        |file| {
            // SAFETY: a live file; the null out-pointer is the hostile value.
            code(unsafe {
                (file.methods().xFetch.unwrap())(file.file, 0, 4096, std::ptr::null_mut())
            })
        },
        ffi::SQLITE_MISUSE,
    );
}

// ─── xOpen and xDelete ────────────────────────────────────────────────────────────────

#[test]
fn a_failed_open_leaves_no_methods_like_unix() {
    let _serial = setup();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::create_dir(dir.path().join("a_directory")).unwrap();
    for (name, flags) in [
        ("missing/x.db", MAIN_DB),
        (
            "absent.db",
            ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_MAIN_DB,
        ),
        ("a_directory", MAIN_DB),
    ] {
        let path = dir.path().join(name);
        // `Handle::open` asserts pMethods stays null when xOpen fails: SQLite then never
        // calls xClose on it.
        let codes: Vec<_> = [UNIX, OURS]
            .iter()
            .map(|vfs_name| Handle::open(vfs_name, &path, flags).err())
            .collect();
        assert_eq!(codes[1], codes[0], "{name}");
        assert!(codes[0].is_some(), "{name}");
    }
}

/// xOpen with a null name, as os_unix.c reads it: an anonymous temporary file, whether or
/// not SQLITE_OPEN_DELETEONCLOSE is set.
#[test]
fn an_unnamed_file_is_a_temporary_file_whatever_the_flags() {
    let _serial = setup();
    for flags in [
        ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE | ffi::SQLITE_OPEN_TEMP_DB,
        ffi::SQLITE_OPEN_READWRITE
            | ffi::SQLITE_OPEN_CREATE
            | ffi::SQLITE_OPEN_DELETEONCLOSE
            | ffi::SQLITE_OPEN_TEMP_JOURNAL,
    ] {
        let mut answers = Vec::new();
        for vfs_name in [UNIX, OURS] {
            let vfs = vfs(vfs_name);
            let panics = PANICS.load(Ordering::SeqCst);
            // SAFETY: szOsFile bytes for xOpen; the file is used and closed here.
            let answer = unsafe {
                let mut storage = vec![0u64; ((*vfs).szOsFile as usize).div_ceil(8)];
                let file = storage.as_mut_ptr() as *mut ffi::sqlite3_file;
                let rc = ((*vfs).xOpen.unwrap())(
                    vfs,
                    std::ptr::null(),
                    file,
                    flags,
                    std::ptr::null_mut(),
                );
                assert_eq!(rc, ffi::SQLITE_OK, "{vfs_name}");
                let methods = &*(*file).pMethods;
                let wrote = (methods.xWrite.unwrap())(file, b"hello".as_ptr().cast(), 5, 4096);
                let mut back = [0u8; 5];
                let read = (methods.xRead.unwrap())(file, back.as_mut_ptr().cast(), 5, 4096);
                let closed = (methods.xClose.unwrap())(file);
                format!("{wrote} {read} {back:?} {closed}")
            };
            assert_eq!(PANICS.load(Ordering::SeqCst), panics, "{vfs_name} panicked");
            answers.push(answer);
        }
        assert_eq!(answers[1], answers[0], "flags {flags:#x}");
    }
}

/// This VFS keeps paths as text. A path that is not UTF-8 (Linux allows any bytes) is
/// refused with a logged reason rather than opened under a lossy copy of its name, which
/// would be another file than the one `unix` opens; deleting one is refused too, and the
/// file `unix` made stays.
#[test]
fn a_path_that_is_not_utf8_is_refused_not_renamed() {
    use std::os::unix::ffi::OsStrExt;
    let _serial = setup();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9.db"));
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_CREATE;
    let opened = rusqlite::Connection::open_with_flags_and_vfs(&path, flags, OURS)
        .and_then(|db| db.execute_batch("CREATE TABLE t(x)"));
    match opened {
        Err(rusqlite::Error::SqliteFailure(error, _)) => {
            assert_eq!(error.code, rusqlite::ErrorCode::CannotOpen, "{error:?}")
        }
        other => panic!("opened a path that is not UTF-8: {other:?}"),
    }
    let log = take_log();
    assert!(
        log.iter()
            .any(|(code, line)| *code == ffi::SQLITE_CANTOPEN && line.contains("not UTF-8")),
        "{log:?}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a file was made"
    );

    let db = rusqlite::Connection::open_with_flags_and_vfs(&path, flags, UNIX).unwrap();
    db.execute_batch("CREATE TABLE t(x)").unwrap();
    drop(db);
    assert!(path.exists());
    let name = CString::new(path.as_os_str().as_bytes()).unwrap();
    let vfs = vfs(OURS);
    // SAFETY: the VFS's own xDelete with a NUL-terminated path.
    let rc = unsafe { ((*vfs).xDelete.unwrap())(vfs, name.as_ptr(), 0) };
    assert_eq!(rc, ffi::SQLITE_IOERR_DELETE);
    assert!(take_log()
        .iter()
        .any(|(code, line)| *code == ffi::SQLITE_IOERR_DELETE && line.contains("not UTF-8")));
    assert!(
        path.exists(),
        "the file unix made was deleted under another name"
    );
}

#[test]
fn deleting_a_null_name_is_an_io_error_like_unix() {
    let _serial = setup();
    let mut seen = Vec::new();
    for vfs_name in [UNIX, OURS] {
        let vfs = vfs(vfs_name);
        take_log();
        // SAFETY: the VFS's own xDelete; the null name is the hostile value.
        let rc = unsafe { ((*vfs).xDelete.unwrap())(vfs, std::ptr::null(), 0) };
        let log = os_lines(&take_log(), Path::new("/nonexistent"));
        seen.push((rc, log));
    }
    assert_eq!(seen[0].0, ffi::SQLITE_IOERR_DELETE);
    assert_eq!(seen[1].0, seen[0].0);
    // The same line, but for strerror's text, which rusqlite's bundled SQLite leaves out.
    assert_eq!(seen[1].1.len(), 1, "{:?}", seen[1].1);
    assert!(
        seen[1].1[0].0 == seen[0].1[0].0 && seen[1].1[0].1.starts_with(&seen[0].1[0].1),
        "io_uring {:?} unix {:?}",
        seen[1].1,
        seen[0].1
    );
}

/// os_unix.c gives a new journal or WAL its database's mode (findCreateFileMode): when the
/// database cannot be stat()ed, the open fails with SQLITE_IOERR_FSTAT, as here; so does
/// a database's whose `modeof=` file cannot be.
#[test]
fn a_journal_without_its_database_fails_to_open_like_unix() {
    let _serial = setup();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let absent = dir.path().join("absent.db");
    let common = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE;
    type Case<'a> = (c_int, Name, &'a [(&'a CStr, &'a CStr)]);
    let cases: [Case; 3] = [
        (common | ffi::SQLITE_OPEN_MAIN_JOURNAL, Name::Journal, &[]),
        (common | ffi::SQLITE_OPEN_WAL, Name::Wal, &[]),
        (
            MAIN_DB | ffi::SQLITE_OPEN_URI,
            Name::Database,
            &[(c"modeof", c"/nonexistent/model.db")],
        ),
    ];
    for (flags, which, params) in cases {
        let codes: Vec<_> = [UNIX, OURS]
            .iter()
            .map(|vfs_name| {
                Handle::open_as(vfs_name, &absent, flags, which, params)
                    .err()
                    .unwrap_or(ffi::SQLITE_OK)
            })
            .collect();
        assert_eq!(codes, [ffi::SQLITE_IOERR_FSTAT; 2], "{which:?}");
        assert!(!absent.exists() && !dir.path().join("absent.db-journal").exists());
    }
}

/// `unix` gives journals, WAL files and temporary files os_unix.c's nolockIoMethods:
/// xLock and xUnlock answer SQLITE_OK whatever the level and record none, and
/// xCheckReservedLock finds nothing. So does this VFS.
#[test]
fn locks_on_journals_wal_files_and_temporary_files_do_nothing_like_unix() {
    let _serial = setup();
    let case = |file: &Handle| {
        let codes = [
            file.lock(1),
            file.lock(4),
            file.lock(2),
            file.lock(5),
            file.lock(-1),
            file.unlock(3),
            file.unlock(-1),
        ];
        let mut reserved: c_int = -1;
        // SAFETY: a live file and a writable int.
        let rc = unsafe { (file.methods().xCheckReservedLock.unwrap())(file.file, &mut reserved) };
        format!(
            "{codes:?} level {} reserved {rc} {reserved}",
            file.lock_state()
        )
    };
    let common = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE;
    for (flags, which) in [
        (common | ffi::SQLITE_OPEN_MAIN_JOURNAL, Name::Journal),
        (common | ffi::SQLITE_OPEN_WAL, Name::Wal),
    ] {
        let answers: Vec<_> = [UNIX, OURS]
            .iter()
            .map(|vfs_name| {
                let (_dir, database) = fresh_file("test.db");
                let panics = PANICS.load(Ordering::SeqCst);
                let file = Handle::open_as(vfs_name, &database, flags, which, &[]).unwrap();
                let answer = case(&file);
                assert_eq!(PANICS.load(Ordering::SeqCst), panics, "{vfs_name} panicked");
                answer
            })
            .collect();
        assert_eq!(answers[1], answers[0], "{which:?}");
        assert_eq!(answers[0], "[0, 0, 0, 0, 0, 0, 0] level 0 reserved 0 0");
    }
    let answers: Vec<_> = [UNIX, OURS]
        .iter()
        .map(|vfs_name| {
            let vfs = vfs(vfs_name);
            // SAFETY: szOsFile bytes for xOpen; the file is used and closed here.
            unsafe {
                let mut storage = vec![0u64; ((*vfs).szOsFile as usize).div_ceil(8)];
                let file = storage.as_mut_ptr() as *mut ffi::sqlite3_file;
                let flags = common
                    | ffi::SQLITE_OPEN_DELETEONCLOSE
                    | ffi::SQLITE_OPEN_EXCLUSIVE
                    | ffi::SQLITE_OPEN_TEMP_JOURNAL;
                let rc = ((*vfs).xOpen.unwrap())(
                    vfs,
                    std::ptr::null(),
                    file,
                    flags,
                    std::ptr::null_mut(),
                );
                assert_eq!(rc, ffi::SQLITE_OK);
                let handle = Handle {
                    file,
                    _storage: storage,
                    // No name: sqlite3_free_filename(NULL) does nothing.
                    name: std::ptr::null(),
                    path: PathBuf::new(),
                };
                case(&handle)
            }
        })
        .collect();
    assert_eq!(answers[1], answers[0], "temporary file");
}

/// os_unix.c stores errno 0, "not a system error", for a short read: SQLITE_FCNTL_LAST_ERRNO
/// then reads 0, after an earlier failure's errno.
#[test]
fn a_short_read_clears_the_last_errno_like_unix() {
    let _serial = setup();
    let ours = same(|file| {
        let failed = file.write(&buffer(16), 10, -1);
        let errno = file.last_errno();
        let short = file.read(&mut buffer(16), 10, 1 << 20);
        format!("{failed} {errno} {short} {}", file.last_errno())
    });
    assert_eq!(
        ours.answer,
        Answer(format!(
            "{} {} {} 0",
            ffi::SQLITE_IOERR_WRITE,
            libc::EINVAL,
            ffi::SQLITE_IOERR_SHORT_READ
        ))
    );
}
