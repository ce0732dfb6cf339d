//! System-call helpers every layer uses: descriptors opened the way os_unix.c opens
//! them, owned and closed by the types of [`fd`], `stat` wrappers, the filesystem a
//! descriptor lives on (`Filesystem`), directory names, the page-aligned buffer of
//! O_DIRECT I/O, the memory the VFS maps ([`mapping`]), and the few process-wide calls
//! (`atexit`, `uname`, `gettid`) the layers above make, and what a forked child forgets
//! ([`fork`]: the fork generation, child hooks, `ForkLocal`). Every system call on a
//! file goes through [`calls`], the table tests can replace calls in. A leaf: it names no
//! other module of the crate but `ffi`.
//!
//! Every function here is safe to call: the `unsafe` that system calls need lives in
//! `sys/`, each block with the reason it is sound.

pub mod calls;
pub(crate) mod fd;
pub(crate) mod fork;
pub(crate) mod mapping;
pub(crate) mod page_cache;
pub(crate) mod path;

use std::ffi::{c_int, CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

pub(crate) use calls::{last_errno, UNKNOWN_ERRNO};
pub(crate) use fd::{flock, unix_fcntl_gate, DbFd, Fd, FileKey, GateInstall, Reuse};
pub(crate) use mapping::{Mapping, Slot, SlotRegion};
pub(crate) use path::{with_c_prefix, FilePath};

/// os_unix.c SQLITE_MINIMUM_FILE_DESCRIPTOR: never put a database on fd 0, 1 or 2, where
/// a stray `printf` could overwrite it.
const MINIMUM_FILE_DESCRIPTOR: RawFd = 3;

/// open(2), retried on EINTR, with the descriptor moved to [`MINIMUM_FILE_DESCRIPTOR`] or
/// above, and the low slot it was handed plugged with `/dev/null`, so later opens do not
/// land there again (os_unix.c robust_open does both). Every descriptor this VFS opens on
/// a database file goes through here: the buffered one and the O_DIRECT one alike.
///
/// The descriptor left in the low slot is closed as any descriptor of a database is
/// ([`DbFd::close`]): parked while this process holds POSIX locks on the file, which a
/// plain close would drop (os_unix.c's plain close there drops a same-process `unix`
/// connection's locks). A parked descriptor keeps its slot, which is then not plugged.
pub(crate) fn open_above_stdio(
    path: &CStr,
    os_flags: c_int,
    mode: libc::mode_t,
) -> Result<Fd, i32> {
    let fd = loop {
        let fd = calls::open(path, os_flags, mode as c_int);
        if fd >= 0 {
            break fd;
        }
        let errno = last_errno();
        if errno != libc::EINTR {
            return Err(errno);
        }
    };
    // SAFETY: open just returned `fd`, and nothing else has it.
    let fd = unsafe { Fd::from_raw(fd) };
    if fd.as_raw_fd() >= MINIMUM_FILE_DESCRIPTOR {
        return Ok(fd);
    }
    let moved = calls::fcntl_dupfd_cloexec(fd.as_raw_fd(), MINIMUM_FILE_DESCRIPTOR);
    let errno = last_errno();
    // As os_unix.c robust_open: the low slot is freed, then plugged with /dev/null,
    // which is deliberately never closed (owned by no one, for the life of the process),
    // so later opens do not land there again.
    let low = fd.as_raw_fd();
    DbFd::from(fd).close(|_| {});
    if !calls::is_open(low) {
        calls::open(c"/dev/null", libc::O_RDONLY, 0);
    }
    if moved < 0 {
        return Err(errno);
    }
    // SAFETY: F_DUPFD_CLOEXEC just returned `moved`, and nothing else has it.
    Ok(unsafe { Fd::from_raw(moved) })
}

/// A descriptor of the database or `-shm` file at `path` for `os_flags`: one this VFS
/// parked for the same file, access mode and O_DIRECT flag, taken back
/// ([`fd::take_parked`], as os_unix.c's unixOpen first looks for a reusable descriptor,
/// `findReusableFd`), or else a new one ([`open_above_stdio`]). The path is looked up as
/// the open would follow it (`lstat` with `O_NOFOLLOW`), and only while a descriptor of
/// that kind is parked. Its owner must close it as a [`DbFd::reusable`] for
/// [`Reuse::Open`].
pub(crate) fn open_reusing_parked(
    path: &CStr,
    os_flags: c_int,
    mode: libc::mode_t,
) -> Result<Fd, i32> {
    let file = || {
        let mut stat = zeroed_stat();
        let looked_up = if os_flags & libc::O_NOFOLLOW != 0 {
            calls::lstat(path, &mut stat)
        } else {
            calls::stat(path, &mut stat)
        };
        (looked_up == 0).then(|| FileKey::of(&stat))
    };
    match fd::take_parked(os_flags, Reuse::Open, file) {
        Some(fd) => Ok(fd),
        None => open_above_stdio(path, os_flags, mode),
    }
}

/// os_unix.c SQLITE_DEFAULT_FILE_PERMISSIONS.
pub(crate) const DEFAULT_FILE_MODE: libc::mode_t = 0o644;

/// os_unix.c robust_open: a file opened with a nonzero `mode` (a journal, WAL or `-shm`
/// gets its database's bits, a delete-on-close file 0600) is given exactly `mode` if it is
/// still empty, whatever the umask took away when it was created. `mode` 0 (the default
/// permissions) leaves the umask's result.
pub(crate) fn give_created_mode(fd: BorrowedFd<'_>, mode: libc::mode_t) {
    if mode == 0 {
        return;
    }
    if let Ok(st) = fstat(fd) {
        if st.st_size == 0 && st.st_mode & 0o777 != mode {
            // Failure (not the owner) is ignored, as os_unix.c ignores it.
            calls::fchmod(fd.as_raw_fd(), mode);
        }
    }
}

/// open(2) of a `-shm` file, which `unix` opens through robust_open with a `mode`: a
/// parked descriptor of it taken back ([`open_reusing_parked`]), or one created with
/// `mode` (or [`DEFAULT_FILE_MODE`] when it is 0), above the stdio descriptors; then
/// given exactly `mode` ([`give_created_mode`]).
pub(crate) fn open_with_created_mode(
    path: &CStr,
    os_flags: c_int,
    mode: libc::mode_t,
) -> Result<Fd, i32> {
    let create_mode = if mode == 0 { DEFAULT_FILE_MODE } else { mode };
    let fd = open_reusing_parked(path, os_flags | libc::O_CLOEXEC, create_mode)?;
    give_created_mode(fd.as_fd(), mode);
    Ok(fd)
}

/// stat(2) of `path`, copied into a C string first; `None` if it cannot be stat()ed.
pub(crate) fn stat_path(path: &str) -> Option<libc::stat> {
    stat_c_path(&CString::new(path).ok()?)
}

/// stat(2) of a path that is a C string already (a `FilePath`'s, a prefix of one);
/// `None` if it cannot be stat()ed.
pub(crate) fn stat_c_path(path: &CStr) -> Option<libc::stat> {
    let mut stat = zeroed_stat();
    (calls::stat(path, &mut stat) == 0).then_some(stat)
}

/// fstat(2); `Err(errno)` on failure.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> Result<libc::stat, i32> {
    let mut stat = zeroed_stat();
    if calls::fstat(fd.as_raw_fd(), &mut stat) == 0 {
        Ok(stat)
    } else {
        Err(last_errno())
    }
}

fn zeroed_stat() -> libc::stat {
    // SAFETY: `stat` is plain C data, for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

/// The direct-I/O alignment `statx(STATX_DIOALIGN)` reports for `fd` (Linux 6.1+): the
/// larger of the memory and offset requirements; `None` when the kernel does not say.
pub(crate) fn direct_io_alignment(fd: BorrowedFd<'_>) -> Option<usize> {
    // SAFETY: `statx` is plain C data, for which all-zero bytes are a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // The empty path with AT_EMPTY_PATH names `fd` itself.
    let rc = calls::statx(
        fd.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH,
        libc::STATX_DIOALIGN,
        &mut stx,
    );
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some(stx.stx_dio_mem_align.max(stx.stx_dio_offset_align) as usize)
}

/// The filesystem a descriptor lives on, from its `statfs(2)` magic number: what decides
/// whether the kernel completes a buffered ring write inline (docs/FILESYSTEMS.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Filesystem {
    /// EXT4_SUPER_MAGIC, which ext2 and ext3 share (the ext4 driver mounts all three).
    Ext4,
    Xfs,
    Btrfs,
    Tmpfs,
    Ramfs,
    /// Any other magic number.
    Other(u64),
}

impl Filesystem {
    const EXT4_MAGIC: u64 = 0xef53;
    const XFS_MAGIC: u64 = 0x5846_5342;
    const BTRFS_MAGIC: u64 = 0x9123_683e;
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;

    pub(crate) fn from_magic(magic: u64) -> Filesystem {
        match magic {
            Self::EXT4_MAGIC => Filesystem::Ext4,
            Self::XFS_MAGIC => Filesystem::Xfs,
            Self::BTRFS_MAGIC => Filesystem::Btrfs,
            Self::TMPFS_MAGIC => Filesystem::Tmpfs,
            Self::RAMFS_MAGIC => Filesystem::Ramfs,
            other => Filesystem::Other(other),
        }
    }

    /// The filesystem of `fd` (one fstatfs); `Err(errno)` if it cannot be asked.
    pub(crate) fn of_fd(fd: BorrowedFd<'_>) -> Result<Filesystem, i32> {
        // SAFETY: `statfs` is plain C data, for which all-zero bytes are a valid value.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        if calls::fstatfs(fd.as_raw_fd(), &mut fs) != 0 {
            return Err(last_errno());
        }
        // f_type is a signed word whose bits are the magic (btrfs's has the top bit set).
        Ok(Filesystem::from_magic(fs.f_type as u32 as u64))
    }

    /// The kernel's name of the filesystem, or its magic number in hex.
    pub(crate) fn name(self) -> String {
        match self {
            Filesystem::Ext4 => "ext4".into(),
            Filesystem::Xfs => "xfs".into(),
            Filesystem::Btrfs => "btrfs".into(),
            Filesystem::Tmpfs => "tmpfs".into(),
            Filesystem::Ramfs => "ramfs".into(),
            Filesystem::Other(magic) => format!("unknown (statfs magic {magic:#x})"),
        }
    }

    /// tmpfs or ramfs: fsync does nothing there.
    pub(crate) fn is_memory_backed(self) -> bool {
        matches!(self, Filesystem::Tmpfs | Filesystem::Ramfs)
    }
}

/// The directory os_unix.c's openDirectory opens for `file`, for messages: everything
/// before the last `/`, `/` for a file at the root, `.` for a name without one.
pub(crate) fn directory_of(file: &str) -> String {
    match path::directory_len(file.as_bytes()) {
        Some(end) => file[..end].to_string(),
        None => path::directory_name(file.as_bytes())
            .to_string_lossy()
            .into_owned(),
    }
}

/// Opens the directory that holds `file`, for syncing it (os_unix.c openDirectory, the
/// `openDirectory` entry of the table); `Err(errno)` if it cannot be opened, which
/// os_unix.c does not treat as an error of the sync.
pub(crate) fn open_directory_of(file: &CStr) -> Result<Fd, i32> {
    let mut fd: c_int = -1;
    let rc = calls::open_directory(file, &mut fd);
    if rc != crate::ffi::SQLITE_OK || fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: openDirectory just opened `fd` for us, and nothing else has it.
    Ok(unsafe { Fd::from_raw(fd) })
}

/// Fills `buf` from the kernel's random source (getrandom(2)); false if it could not.
pub(crate) fn random_bytes(buf: &mut [u8]) -> bool {
    // SAFETY: getrandom writes at most `buf.len()` bytes into `buf`, exclusively
    // borrowed for the call.
    let got = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    got == buf.len() as isize
}

/// Runs `f` at a normal process exit (atexit(3)); false if it could not be registered.
pub(crate) fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a function of the program text, which lives until exit.
    unsafe { libc::atexit(f) == 0 }
}

/// The kernel's release (`uname -r`), or "unknown".
pub(crate) fn kernel_release() -> String {
    // SAFETY: `utsname` is plain C data, for which all-zero bytes are a valid value.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is writable for the call.
    if unsafe { libc::uname(&mut name) } != 0 {
        return "unknown".to_string();
    }
    let release: Vec<u8> = name
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&release).into_owned()
}

/// The calling thread's id (gettid(2)).
pub(crate) fn thread_id() -> libc::pid_t {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { libc::gettid() }
}

/// Alignment of every [`AlignedBuffer`]: a page, which satisfies any `stx_dio_mem_align`
/// Linux reports for block devices (their logical block size, at most a page here).
pub(crate) const BUFFER_ALIGN_BYTES: usize = 4096;
/// A fixed-capacity byte buffer aligned to [`BUFFER_ALIGN_BYTES`], for O_DIRECT reads. Its memory is anonymous `mmap` memory: it reads as zeros, so
/// every byte is initialised, and the kernel supplies each page on first touch.
pub(crate) struct AlignedBuffer {
    ptr: *mut u8,
    capacity: usize,
}

// SAFETY: the buffer exclusively owns its allocation; moving it between threads moves
// that ownership, like a Vec<u8>.
unsafe impl Send for AlignedBuffer {}

impl AlignedBuffer {
    pub(crate) const fn empty() -> AlignedBuffer {
        AlignedBuffer {
            ptr: std::ptr::null_mut(),
            capacity: 0,
        }
    }

    /// Why `mmap` and not the allocator: `alloc_zeroed` with a page alignment cannot use
    /// calloc's fresh zero pages, so it `memset` the whole buffer, of which a use
    /// typically touches a few pages (docs/DESIGN.md, "Aligned buffers are anonymous
    /// mappings"). Anonymous pages are zero and page-aligned, and untouched ones cost
    /// nothing.
    pub(crate) fn with_capacity(capacity: usize) -> AlignedBuffer {
        assert!(capacity > 0);
        // SAFETY: an anonymous private mapping of a non-zero length at an address the
        // kernel chooses; it aliases nothing, and Drop unmaps exactly this range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                capacity,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let layout = std::alloc::Layout::from_size_align(capacity, BUFFER_ALIGN_BYTES)
                .expect("buffer capacity fits a Layout");
            std::alloc::handle_alloc_error(layout);
        }
        let ptr = ptr.cast::<u8>();
        // Pages are at least 4 KiB on every Linux architecture.
        assert_eq!(
            ptr as usize % BUFFER_ALIGN_BYTES,
            0,
            "mmap returns whole pages"
        );
        AlignedBuffer { ptr, capacity }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The first `len_bytes` bytes of the capacity, however they were filled (a read into
    /// [`AlignedBuffer::full_mut`]).
    pub(crate) fn prefix(&self, len_bytes: usize) -> &[u8] {
        assert!(len_bytes <= self.capacity);
        if self.capacity == 0 {
            return &[];
        }
        // SAFETY: `ptr` owns `capacity` initialised bytes (anonymous pages read as zero).
        unsafe { std::slice::from_raw_parts(self.ptr, len_bytes) }
    }

    /// The whole capacity, to read into.
    pub(crate) fn full_mut(&mut self) -> &mut [u8] {
        if self.capacity == 0 {
            return &mut [];
        }
        // SAFETY: as in `prefix`; `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.capacity) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if self.capacity > 0 {
            // SAFETY: mapped in `with_capacity` with this same length; no slice of it
            // outlives `self`.
            unsafe { libc::munmap(self.ptr.cast(), self.capacity) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `buffer` resident in memory (mincore(2)).
    fn resident_pages(buffer: &AlignedBuffer) -> usize {
        let page_bytes = BUFFER_ALIGN_BYTES;
        let mut residency = vec![0u8; buffer.capacity().div_ceil(page_bytes)];
        // SAFETY: the range is the buffer's own mapping; the vector has a byte per page.
        let rc = unsafe {
            libc::mincore(
                buffer.prefix(0).as_ptr() as *mut libc::c_void,
                buffer.capacity(),
                residency.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        residency.iter().filter(|&&r| r & 1 == 1).count()
    }

    /// A fresh buffer costs no memory until it is written: a 2 MiB read-ahead buffer must
    /// not be zeroed page by page when it is made.
    #[test]
    fn fresh_buffers_take_memory_only_where_written() {
        let mut buffer = AlignedBuffer::with_capacity(2 << 20);
        assert_eq!(resident_pages(&buffer), 0);
        assert!(buffer.full_mut()[..3 * BUFFER_ALIGN_BYTES]
            .iter()
            .all(|&b| b == 0));
        buffer.full_mut()[..100].fill(1);
        // Reading maps the shared zero page at most; writing makes a page of its own.
        // A transparent huge page could back a whole 2 MiB at once: then this test says
        // nothing, so it only requires far less than the whole buffer.
        let resident = resident_pages(&buffer);
        assert!(resident >= 1, "the written page is resident");
        assert!(
            resident < 512
                || std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
                    .is_ok_and(|mode| mode.contains("[always]")),
            "{resident} of 512 pages resident after a 100-byte write"
        );
    }

    #[test]
    fn filesystem_magic_numbers() {
        assert_eq!(Filesystem::from_magic(0xef53), Filesystem::Ext4);
        assert_eq!(Filesystem::from_magic(0x5846_5342), Filesystem::Xfs);
        assert_eq!(Filesystem::from_magic(0x9123_683e), Filesystem::Btrfs);
        assert!(Filesystem::from_magic(0x0102_1994).is_memory_backed());
        assert!(Filesystem::from_magic(0x8584_58f6).is_memory_backed());
        assert_eq!(
            Filesystem::from_magic(0x6969).name(),
            "unknown (statfs magic 0x6969)"
        );
        // The project's own directory is on a real filesystem that fstatfs can name.
        let dir = std::fs::File::open(env!("CARGO_MANIFEST_DIR")).unwrap();
        use std::os::fd::AsFd;
        assert!(Filesystem::of_fd(dir.as_fd()).is_ok());
    }

    #[test]
    fn aligned_buffer_is_aligned_and_zeroed() {
        let mut buffer = AlignedBuffer::with_capacity(3 * BUFFER_ALIGN_BYTES);
        assert_eq!(buffer.prefix(0).as_ptr() as usize % BUFFER_ALIGN_BYTES, 0);
        assert!(buffer
            .prefix(3 * BUFFER_ALIGN_BYTES)
            .iter()
            .all(|&b| b == 0));
        buffer.full_mut()[..10].fill(7);
        assert_eq!(&buffer.prefix(11)[9..], &[7, 0]);
        assert!(AlignedBuffer::empty().prefix(0).is_empty());
    }
}
