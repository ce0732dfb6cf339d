//! A differential fuzzer at the VFS-method level: seeded random sequences of
//! `sqlite3_io_methods` calls with hostile arguments (xOpen, xRead, xWrite, xTruncate,
//! xSync, xFileSize, xLock, xUnlock, xCheckReservedLock, xFileControl, xShmMap,
//! xShmLock, xShmBarrier, xShmUnmap, xFetch, xUnfetch, xClose), run against `unix` and
//! against `io_uring` on separate files, compared call by call — result codes and what
//! each call hands back (bytes read, sizes, lock levels, file-control replies, whether a
//! region or page came back and a page's first bytes) — and, whenever every handle on a
//! file is closed and at the end, the files' bytes on disk.
//!
//! Five handles per sequence: two connections to one database, its journal, its WAL, and
//! an anonymous temporary file.
//!
//! Calls whose `unix` answer is a crash, a pointer outside its mapping, or lock state that
//! no longer matches its locks (the classes `tests/hostile_args.rs` compares one by one)
//! go to `io_uring` only, which must refuse them with the code [`Expect::Refused`] names;
//! a refusal leaves its files as they were, so the two worlds stay comparable. Values
//! whose answers differ by design are never drawn, and calls SQLite's locks never allow
//! (one connection reading what the other may still have queued, or shrinking a file the
//! other has mapped) are not made: [`draw`], [`generate`] and [`run`] say which and why.
//!
//! * `cargo test --release -p sqlite-uring --test vfs_methods`: the saved sequences of
//!   `tests/corpus/vfs_methods/` (a test of their own), and [`SEQUENCES`] seeded ones.
//! * A longer run: `VFS_METHODS_SEQUENCES=20000 VFS_METHODS_SEED=1000000 cargo test
//!   --release -p sqlite-uring --test vfs_methods -- --nocapture` (the seed of the first
//!   sequence; each next one adds 1). `VFS_METHODS_TRACE=1` prints each call and both
//!   answers to stderr.
//!
//! A difference fails the test with the sequence as text, up to the call where the two
//! differ; saved as a `.txt` file in `tests/corpus/vfs_methods/` it is replayed by every
//! run from then on (a line per call, as [`Op`] prints and parses them; `#` starts a comment).

mod common;

use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use common::Rng;
use rusqlite::ffi;

/// Seeded sequences per suite run (each of [`OPS_PER_SEQUENCE`] calls, each made under
/// both VFSes, plus the comparisons' own calls).
const SEQUENCES: u64 = 600;
const OPS_PER_SEQUENCE: usize = 150;
/// The first seed of a suite run.
const FIRST_SEED: u64 = 0x5eed_0000;

const SLOTS: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Main,
    Journal,
    Wal,
    Temp,
}

/// What each handle slot opens.
const KINDS: [Kind; SLOTS] = [Kind::Main, Kind::Main, Kind::Journal, Kind::Wal, Kind::Temp];

// ─── The calls ────────────────────────────────────────────────────────────────────────

/// A file control's argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arg {
    Null,
    Int(i32),
    I64(i64),
}

/// Which page xUnfetch returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Page {
    /// The `n`th page still fetched on the handle (modulo their number).
    Fetched(usize),
    /// Null: the whole mapping.
    All,
    /// A pointer xFetch never returned.
    Bogus,
}

/// One call of a sequence, on handle `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Open(usize),
    Close(usize),
    Read {
        slot: usize,
        offset: i64,
        amount: i32,
        null: bool,
    },
    Write {
        slot: usize,
        offset: i64,
        amount: i32,
        byte: u8,
        null: bool,
    },
    Truncate(usize, i64),
    Sync(usize, i32),
    FileSize {
        slot: usize,
        null: bool,
    },
    Lock(usize, i32),
    Unlock(usize, i32),
    CheckReserved {
        slot: usize,
        null: bool,
    },
    FileControl {
        slot: usize,
        op: i32,
        arg: Arg,
    },
    ShmMap {
        slot: usize,
        region: i32,
        size: i32,
        extend: i32,
        null: bool,
    },
    ShmLock {
        slot: usize,
        offset: i32,
        count: i32,
        flags: i32,
    },
    ShmBarrier(usize),
    ShmUnmap(usize, i32),
    Fetch {
        slot: usize,
        offset: i64,
        amount: i32,
        null: bool,
    },
    Unfetch(usize, Page),
    DeviceCharacteristics(usize),
}

impl Op {
    fn slot(self) -> usize {
        match self {
            Op::Open(slot)
            | Op::Close(slot)
            | Op::Truncate(slot, _)
            | Op::Sync(slot, _)
            | Op::Lock(slot, _)
            | Op::Unlock(slot, _)
            | Op::ShmBarrier(slot)
            | Op::ShmUnmap(slot, _)
            | Op::Unfetch(slot, _)
            | Op::DeviceCharacteristics(slot)
            | Op::Read { slot, .. }
            | Op::Write { slot, .. }
            | Op::FileSize { slot, .. }
            | Op::CheckReserved { slot, .. }
            | Op::FileControl { slot, .. }
            | Op::ShmMap { slot, .. }
            | Op::ShmLock { slot, .. }
            | Op::Fetch { slot, .. } => slot,
        }
    }
}

fn null_word(null: bool) -> &'static str {
    if null {
        "null"
    } else {
        "ptr"
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Open(slot) => write!(f, "open {slot}"),
            Op::Close(slot) => write!(f, "close {slot}"),
            Op::Read {
                slot,
                offset,
                amount,
                null,
            } => {
                write!(f, "read {slot} {offset} {amount} {}", null_word(null))
            }
            Op::Write {
                slot,
                offset,
                amount,
                byte,
                null,
            } => {
                write!(
                    f,
                    "write {slot} {offset} {amount} {byte} {}",
                    null_word(null)
                )
            }
            Op::Truncate(slot, size) => write!(f, "truncate {slot} {size}"),
            Op::Sync(slot, flags) => write!(f, "sync {slot} {flags}"),
            Op::FileSize { slot, null } => write!(f, "size {slot} {}", null_word(null)),
            Op::Lock(slot, level) => write!(f, "lock {slot} {level}"),
            Op::Unlock(slot, level) => write!(f, "unlock {slot} {level}"),
            Op::CheckReserved { slot, null } => write!(f, "reserved {slot} {}", null_word(null)),
            Op::FileControl { slot, op, arg } => match arg {
                Arg::Null => write!(f, "fcntl {slot} {op} null"),
                Arg::Int(value) => write!(f, "fcntl {slot} {op} int {value}"),
                Arg::I64(value) => write!(f, "fcntl {slot} {op} i64 {value}"),
            },
            Op::ShmMap {
                slot,
                region,
                size,
                extend,
                null,
            } => write!(
                f,
                "shm_map {slot} {region} {size} {extend} {}",
                null_word(null)
            ),
            Op::ShmLock {
                slot,
                offset,
                count,
                flags,
            } => {
                write!(f, "shm_lock {slot} {offset} {count} {flags}")
            }
            Op::ShmBarrier(slot) => write!(f, "shm_barrier {slot}"),
            Op::ShmUnmap(slot, delete) => write!(f, "shm_unmap {slot} {delete}"),
            Op::Fetch {
                slot,
                offset,
                amount,
                null,
            } => {
                write!(f, "fetch {slot} {offset} {amount} {}", null_word(null))
            }
            Op::Unfetch(slot, page) => match page {
                Page::Fetched(n) => write!(f, "unfetch {slot} page {n}"),
                Page::All => write!(f, "unfetch {slot} all"),
                Page::Bogus => write!(f, "unfetch {slot} bogus"),
            },
            Op::DeviceCharacteristics(slot) => write!(f, "device {slot}"),
        }
    }
}

impl FromStr for Op {
    type Err = String;

    fn from_str(line: &str) -> Result<Op, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("cannot read the call {line:?}");
        let int = |i: usize| -> Result<i64, String> {
            words.get(i).and_then(|w| w.parse().ok()).ok_or_else(bad)
        };
        let slot = || -> Result<usize, String> {
            let slot = int(1)? as usize;
            (slot < SLOTS).then_some(slot).ok_or_else(bad)
        };
        let null = |i: usize| -> Result<bool, String> {
            match words.get(i) {
                Some(&"null") => Ok(true),
                Some(&"ptr") => Ok(false),
                _ => Err(bad()),
            }
        };
        Ok(match *words.first().ok_or_else(bad)? {
            "open" => Op::Open(slot()?),
            "close" => Op::Close(slot()?),
            "read" => Op::Read {
                slot: slot()?,
                offset: int(2)?,
                amount: int(3)? as i32,
                null: null(4)?,
            },
            "write" => Op::Write {
                slot: slot()?,
                offset: int(2)?,
                amount: int(3)? as i32,
                byte: int(4)? as u8,
                null: null(5)?,
            },
            "truncate" => Op::Truncate(slot()?, int(2)?),
            "sync" => Op::Sync(slot()?, int(2)? as i32),
            "size" => Op::FileSize {
                slot: slot()?,
                null: null(2)?,
            },
            "lock" => Op::Lock(slot()?, int(2)? as i32),
            "unlock" => Op::Unlock(slot()?, int(2)? as i32),
            "reserved" => Op::CheckReserved {
                slot: slot()?,
                null: null(2)?,
            },
            "fcntl" => Op::FileControl {
                slot: slot()?,
                op: int(2)? as i32,
                arg: match words.get(3) {
                    Some(&"null") => Arg::Null,
                    Some(&"int") => Arg::Int(int(4)? as i32),
                    Some(&"i64") => Arg::I64(int(4)?),
                    _ => return Err(bad()),
                },
            },
            "shm_map" => Op::ShmMap {
                slot: slot()?,
                region: int(2)? as i32,
                size: int(3)? as i32,
                extend: int(4)? as i32,
                null: null(5)?,
            },
            "shm_lock" => Op::ShmLock {
                slot: slot()?,
                offset: int(2)? as i32,
                count: int(3)? as i32,
                flags: int(4)? as i32,
            },
            "shm_barrier" => Op::ShmBarrier(slot()?),
            "shm_unmap" => Op::ShmUnmap(slot()?, int(2)? as i32),
            "fetch" => Op::Fetch {
                slot: slot()?,
                offset: int(2)?,
                amount: int(3)? as i32,
                null: null(4)?,
            },
            "unfetch" => Op::Unfetch(
                slot()?,
                match words.get(2) {
                    Some(&"page") => Page::Fetched(int(3)? as usize),
                    Some(&"all") => Page::All,
                    Some(&"bogus") => Page::Bogus,
                    _ => return Err(bad()),
                },
            ),
            "device" => Op::DeviceCharacteristics(slot()?),
            _ => return Err(bad()),
        })
    }
}

// ─── Drawing a sequence ───────────────────────────────────────────────────────────────

/// The file-control opcodes drawn. Not drawn: SQLITE_FCNTL_VFSNAME (each VFS answers its
/// own name), SQLITE_FCNTL_TEMPFILENAME (a random name), SQLITE_FCNTL_PRAGMA (only this
/// VFS answers `io_uring_stats`), SQLITE_FCNTL_NULL_IO (a file without a descriptor: see
/// the note in [`generate`]).
const FILE_CONTROLS: [c_int; 16] = [
    ffi::SQLITE_FCNTL_LOCKSTATE,
    ffi::SQLITE_FCNTL_LAST_ERRNO,
    ffi::SQLITE_FCNTL_CHUNK_SIZE,
    ffi::SQLITE_FCNTL_SIZE_HINT,
    ffi::SQLITE_FCNTL_PERSIST_WAL,
    ffi::SQLITE_FCNTL_POWERSAFE_OVERWRITE,
    ffi::SQLITE_FCNTL_HAS_MOVED,
    ffi::SQLITE_FCNTL_MMAP_SIZE,
    ffi::SQLITE_FCNTL_EXTERNAL_READER,
    ffi::SQLITE_FCNTL_SYNC,
    ffi::SQLITE_FCNTL_CKPT_START,
    ffi::SQLITE_FCNTL_CKPT_DONE,
    ffi::SQLITE_FCNTL_BUSYHANDLER,
    ffi::SQLITE_FCNTL_COMMIT_PHASETWO,
    9999,
    -1,
];

/// The argument type SQLite documents for a file control (i64 or int).
fn takes_i64(op: c_int) -> bool {
    op == ffi::SQLITE_FCNTL_SIZE_HINT || op == ffi::SQLITE_FCNTL_MMAP_SIZE
}

/// An offset: mostly inside the first few hundred KiB, sometimes hostile.
fn offset(rng: &mut Rng) -> i64 {
    match rng.below(24) {
        0 => -1,
        1 => -(rng.range(2, 1 << 40) as i64),
        2 => i64::MAX - rng.below(4096) as i64,
        3 => i64::MIN,
        4 => 1 << 50,
        5..=12 => rng.below(64) as i64 * 4096,
        _ => rng.below(300_000) as i64,
    }
}

/// An amount: mostly what SQLite moves, sometimes hostile. Never 128 KiB or more: os_unix.c
/// masks a write's length to 17 bits (tests/hostile_args.rs,
/// `writes_of_128_kib_or_more_are_written_whole`).
fn amount(rng: &mut Rng) -> i32 {
    match rng.below(16) {
        0 => 0,
        1 => -1,
        2 => -(rng.range(2, 1 << 30) as i32),
        3 => 4096,
        4 => 65536,
        5 => 0x1ffff,
        6 => i32::MIN,
        _ => rng.range(1, 70_000) as i32,
    }
}

fn level(rng: &mut Rng) -> i32 {
    match rng.below(12) {
        0 => -1,
        1 => 5,
        2 => i32::MAX,
        3 => i32::MIN,
        _ => rng.below(5) as i32,
    }
}

/// The calls [`generate`] draws for handle `slot`.
fn draw(rng: &mut Rng, slot: usize) -> Op {
    let main = KINDS[slot] == Kind::Main;
    loop {
        return match rng.below(100) {
            0..=3 => Op::Open(slot),
            4..=5 => Op::Close(slot),
            6..=19 => Op::Read {
                slot,
                offset: offset(rng),
                amount: amount(rng),
                null: rng.below(30) == 0,
            },
            20..=34 => {
                let (offset, amount) = (offset(rng), amount(rng));
                // Not past the filesystem's largest file (EFBIG from pwrite(2) under
                // `unix`): write-behind queues such a write and reports its failure at
                // the file's next flush point, not from the xWrite. Where the end passes
                // `i64::MAX` both refuse it at once (EINVAL).
                let offset = if offset >= 1 << 44 && offset.checked_add(i64::from(amount)).is_some()
                {
                    i64::MAX
                } else {
                    offset
                };
                Op::Write {
                    slot,
                    offset,
                    amount,
                    byte: rng.below(256) as u8,
                    null: rng.below(30) == 0,
                }
            }
            35..=38 => Op::Truncate(
                slot,
                match rng.below(10) {
                    0 => -1,
                    1 => -(rng.range(2, 1 << 20) as i64),
                    2 => 1 << 50,
                    3 => i64::MAX,
                    _ => rng.below(300_000) as i64,
                },
            ),
            // fsync is slow: rare.
            39 => Op::Sync(slot, [2, 3, 0x12, 0][rng.below(4) as usize]),
            40..=44 => Op::FileSize {
                slot,
                null: rng.below(30) == 0,
            },
            45..=52 => {
                // Mostly the next level SQLite would ask for, to reach every lock state.
                let level = if rng.below(3) == 0 {
                    level(rng)
                } else {
                    [1, 2, 4][rng.below(3) as usize]
                };
                Op::Lock(slot, level)
            }
            53..=57 => {
                let level = if rng.below(3) == 0 {
                    level(rng)
                } else {
                    rng.below(2) as i32
                };
                Op::Unlock(slot, level)
            }
            58..=59 => Op::CheckReserved {
                slot,
                null: rng.below(30) == 0,
            },
            60..=69 => {
                let op = FILE_CONTROLS[rng.below(FILE_CONTROLS.len() as u64) as usize];
                let arg = if rng.below(12) == 0 {
                    Arg::Null
                } else if op == ffi::SQLITE_FCNTL_POWERSAFE_OVERWRITE {
                    // Asked, never changed: `unix` keeps the device characteristics of its
                    // first xDeviceCharacteristics or xSectorSize call (os_unix.c
                    // setDeviceCharacteristics), so a change after it shows only in this
                    // file control's answer, where this VFS's characteristics follow it.
                    Arg::Int(-1)
                } else if takes_i64(op) {
                    Arg::I64(match rng.below(8) {
                        0 => -1,
                        1 => i64::MIN,
                        2 => 0,
                        3 => 1 << 20,
                        4 => 65536,
                        _ => rng.below(400_000) as i64,
                    })
                } else {
                    // Chunk sizes stay small: os_unix.c writes a byte per block of a size
                    // hint's growth.
                    Arg::Int(match rng.below(8) {
                        0 => -1,
                        1 => i32::MIN,
                        2 => 0,
                        3 => 1,
                        _ => rng.below(70_000) as i32,
                    })
                };
                Op::FileControl { slot, op, arg }
            }
            // Shared memory only on the database handles: `unix` gives its journal, WAL
            // and temporary files no xShm methods (os_unix.c nolockIoMethods).
            70..=76 if main => Op::ShmMap {
                slot,
                // Large regions are asked without extending only: extending writes a byte
                // per 4 KiB page up to them.
                region: match rng.below(10) {
                    0 => -1,
                    1 => i32::MIN,
                    2 => 1 << 20,
                    _ => rng.below(4) as i32,
                },
                // Only 32 KiB among valid sizes: `unix` maps regions of a second size at
                // offsets counted in it (tests/hostile_args.rs).
                size: match rng.below(10) {
                    0 => 0,
                    1 => -1,
                    2 => 1000,
                    _ => 32768,
                },
                extend: match rng.below(3) {
                    0 => 0,
                    1 => 1,
                    _ => 7,
                },
                null: rng.below(40) == 0,
            }
            .with_small_extension(),
            77..=86 if main => {
                let (offset, count) = match rng.below(10) {
                    0 => (-1, 1),
                    1 => (rng.below(8) as i32, rng.range(2, 9) as i32),
                    2 => (8, 1),
                    3 => (0, 0),
                    _ => {
                        let offset = rng.below(8) as i32;
                        (offset, rng.range(1, 8 - offset as u64) as i32)
                    }
                };
                let flags = match rng.below(10) {
                    0 => rng.below(16) as i32,
                    1 => -1,
                    _ => [
                        ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_SHARED,
                        ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_EXCLUSIVE,
                        ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_SHARED,
                        ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_EXCLUSIVE,
                    ][rng.below(4) as usize],
                };
                // Shared requests are for one slot; keep most of them valid.
                let count = if flags & ffi::SQLITE_SHM_SHARED != 0 && rng.below(4) != 0 {
                    1
                } else {
                    count
                };
                Op::ShmLock {
                    slot,
                    offset,
                    count,
                    flags,
                }
            }
            87 if main => Op::ShmBarrier(slot),
            88 if main => Op::ShmUnmap(slot, rng.below(2) as i32),
            89..=94 => Op::Fetch {
                slot,
                offset: if rng.below(4) == 0 {
                    offset(rng)
                } else {
                    rng.below(16) as i64 * 4096
                },
                amount: if rng.below(4) == 0 { amount(rng) } else { 4096 },
                null: rng.below(40) == 0,
            },
            95..=97 => Op::Unfetch(
                slot,
                match rng.below(6) {
                    0 => Page::All,
                    1 => Page::Bogus,
                    n => Page::Fetched(n as usize),
                },
            ),
            98..=99 => Op::DeviceCharacteristics(slot),
            _ => continue,
        };
    }
}

impl Op {
    /// A region beyond the first few is asked without extending the file.
    fn with_small_extension(self) -> Op {
        match self {
            Op::ShmMap {
                slot,
                region,
                size,
                extend,
                null,
            } if region > 8 => Op::ShmMap {
                slot,
                region,
                size,
                extend: extend.min(0),
                null,
            },
            other => other,
        }
    }
}

/// The calls of sequence `seed`. Not drawn, besides what [`draw`] leaves out:
/// SQLITE_FCNTL_NULL_IO (after it `unix` reports its closed descriptor's EBADF from the
/// calls that use it, while this VFS's lock calls go through the process's shared lock
/// descriptor) and a null xRead buffer on a file whose mmap limit is set (`unix` copies
/// the mapped part into it: a crash).
fn generate(seed: u64, len: usize) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut mmap_on = [false; SLOTS];
    // The database first (a journal or WAL opened before it exists is SQLITE_IOERR_FSTAT,
    // as under `unix`: its mode is copied from the database), then about half the others.
    let opened: Vec<Op> = std::iter::once(Op::Open(0))
        .chain((1..SLOTS).filter(|_| rng.below(2) == 0).map(Op::Open))
        .collect();
    opened
        .into_iter()
        .chain((0..len).map(|_| {
            let slot = rng.below(SLOTS as u64) as usize;
            let mut op = draw(&mut rng, slot);
            match &mut op {
                Op::Read { null, .. } if mmap_on[slot] => *null = false,
                Op::FileControl {
                    op: ffi::SQLITE_FCNTL_MMAP_SIZE,
                    arg: Arg::I64(limit),
                    ..
                } if *limit > 0 => mmap_on[slot] = true,
                Op::Close(slot) => mmap_on[*slot] = false,
                _ => {}
            }
            op
        }))
        .take(len)
        .collect()
}

// ─── Two worlds ───────────────────────────────────────────────────────────────────────

static PANICS: AtomicU64 = AtomicU64::new(0);

/// An open handle.
struct Handle {
    file: *mut ffi::sqlite3_file,
    _storage: Vec<u64>,
    /// Pages fetched and not yet returned: offset and pointer.
    fetched: Vec<(i64, *mut c_void)>,
}

/// One VFS's files: a directory, the database's filename block (SQLite's form, from which
/// the journal's and WAL's names are taken) and the handles.
struct World {
    vfs: *mut ffi::sqlite3_vfs,
    dir: tempfile::TempDir,
    name: *const c_char,
    handles: [Option<Handle>; SLOTS],
    /// VFS method calls made.
    calls: u64,
}

impl World {
    fn new(vfs_name: &str) -> World {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let database = CString::new(dir.path().join("test.db").to_str().unwrap()).unwrap();
        // SAFETY: NUL-terminated strings; the block is freed in Drop.
        let name = unsafe {
            ffi::sqlite3_create_filename(
                database.as_ptr(),
                CString::new(format!("{}-journal", database.to_str().unwrap()))
                    .unwrap()
                    .as_ptr(),
                CString::new(format!("{}-wal", database.to_str().unwrap()))
                    .unwrap()
                    .as_ptr(),
                0,
                std::ptr::null_mut(),
            )
        };
        World {
            vfs: common::system_calls::vfs(vfs_name),
            dir,
            name,
            handles: Default::default(),
            calls: 0,
        }
    }

    fn path(&self, kind: Kind) -> Option<PathBuf> {
        let base = self.dir.path().join("test.db");
        match kind {
            Kind::Main => Some(base),
            Kind::Journal => Some(PathBuf::from(format!("{}-journal", base.display()))),
            Kind::Wal => Some(PathBuf::from(format!("{}-wal", base.display()))),
            Kind::Temp => None,
        }
    }

    fn methods(&self, slot: usize) -> &'static ffi::sqlite3_io_methods {
        let handle = self.handles[slot].as_ref().expect("an open handle");
        // SAFETY: xOpen succeeded, so pMethods is set; both VFSes point it at a static
        // table.
        unsafe { &*(*handle.file).pMethods }
    }

    fn file(&self, slot: usize) -> *mut ffi::sqlite3_file {
        self.handles[slot].as_ref().expect("an open handle").file
    }

    /// SQLITE_FCNTL_LOCKSTATE of an open handle.
    fn lock_state(&mut self, slot: usize) -> c_int {
        let mut level: c_int = -100;
        let file = self.file(slot);
        let control = self.methods(slot).xFileControl.unwrap();
        self.calls += 1;
        // SAFETY: a live file and an int.
        let rc = unsafe {
            control(
                file,
                ffi::SQLITE_FCNTL_LOCKSTATE,
                (&mut level as *mut c_int).cast(),
            )
        };
        assert_eq!(rc, ffi::SQLITE_OK);
        level
    }

    /// Makes the call; what it answered (its result code first).
    fn call(&mut self, op: Op) -> Answer {
        let slot = op.slot();
        if let Op::Open(_) = op {
            return self.open(slot);
        }
        let Some(handle) = self.handles[slot].as_ref() else {
            return Answer::none();
        };
        if matches!(op, Op::Unfetch(_, Page::Fetched(_))) && handle.fetched.is_empty() {
            return Answer::none();
        }
        self.calls += 1;
        let file = handle.file;
        let methods = self.methods(slot);
        // SAFETY: (whole block) a live file; buffers and out-pointers are this
        // function's own, of the sizes the call claims, or null on purpose (the hostile
        // value, made only where `classify` says it is safe for the VFS it goes to).
        unsafe {
            match op {
                Op::Open(_) => unreachable!(),
                Op::Close(_) => {
                    // As SQLite closes a database: its WAL index first. (`unix` closing a
                    // file with a WAL index still attached keeps the index, its mappings
                    // and its locks, for the next connection to find; this VFS detaches
                    // it. SQLite never does that.)
                    if KINDS[slot] == Kind::Main {
                        (methods.xShmUnmap.unwrap())(file, 0);
                    }
                    let rc = (methods.xClose.unwrap())(file);
                    self.handles[slot] = None;
                    Answer::code(rc)
                }
                Op::Read {
                    offset,
                    amount,
                    null,
                    ..
                } => {
                    let mut buf = vec![0xA5u8; amount.max(0) as usize];
                    let pointer = if null {
                        std::ptr::null_mut()
                    } else {
                        buf.as_mut_ptr().cast()
                    };
                    let rc = (methods.xRead.unwrap())(file, pointer, amount, offset);
                    Answer::with(rc, format!("{:x}", common::fnv(&buf)))
                }
                Op::Write {
                    offset,
                    amount,
                    byte,
                    null,
                    ..
                } => {
                    let buf: Vec<u8> = (0..amount.max(0) as usize)
                        .map(|i| byte.wrapping_add(i as u8))
                        .collect();
                    let pointer = if null {
                        std::ptr::null()
                    } else {
                        buf.as_ptr().cast()
                    };
                    Answer::code((methods.xWrite.unwrap())(file, pointer, amount, offset))
                }
                Op::Truncate(_, size) => Answer::code((methods.xTruncate.unwrap())(file, size)),
                Op::Sync(_, flags) => Answer::code((methods.xSync.unwrap())(file, flags)),
                Op::FileSize { null, .. } => {
                    let mut size: i64 = -7;
                    let out = if null {
                        std::ptr::null_mut()
                    } else {
                        &mut size as *mut i64
                    };
                    let rc = (methods.xFileSize.unwrap())(file, out);
                    Answer::with(
                        rc,
                        if rc == 0 {
                            size.to_string()
                        } else {
                            String::new()
                        },
                    )
                }
                Op::Lock(_, level) => Answer::code((methods.xLock.unwrap())(file, level)),
                Op::Unlock(_, level) => Answer::code((methods.xUnlock.unwrap())(file, level)),
                Op::CheckReserved { null, .. } => {
                    let mut reserved: c_int = -7;
                    let out = if null {
                        std::ptr::null_mut()
                    } else {
                        &mut reserved as *mut c_int
                    };
                    let rc = (methods.xCheckReservedLock.unwrap())(file, out);
                    Answer::with(rc, reserved.to_string())
                }
                Op::FileControl { op, arg, .. } => {
                    let mut int: c_int = 0;
                    let mut wide: i64 = 0;
                    let pointer: *mut c_void = match arg {
                        Arg::Null => std::ptr::null_mut(),
                        Arg::Int(value) => {
                            int = value;
                            (&mut int as *mut c_int).cast()
                        }
                        Arg::I64(value) => {
                            wide = value;
                            (&mut wide as *mut i64).cast()
                        }
                    };
                    let rc = (methods.xFileControl.unwrap())(file, op, pointer);
                    Answer::with(rc, format!("{int} {wide}"))
                }
                Op::ShmMap {
                    region,
                    size,
                    extend,
                    null,
                    ..
                } => {
                    let mut region_pointer: *mut c_void = std::ptr::null_mut();
                    let out = if null {
                        std::ptr::null_mut()
                    } else {
                        (&mut region_pointer as *mut *mut c_void).cast()
                    };
                    let rc = (methods.xShmMap.unwrap())(file, region, size, extend, out);
                    Answer::with(rc, (!region_pointer.is_null()).to_string())
                }
                Op::ShmLock {
                    offset,
                    count,
                    flags,
                    ..
                } => Answer::code((methods.xShmLock.unwrap())(file, offset, count, flags)),
                Op::ShmBarrier(_) => {
                    (methods.xShmBarrier.unwrap())(file);
                    Answer::code(0)
                }
                Op::ShmUnmap(_, delete) => Answer::code((methods.xShmUnmap.unwrap())(file, delete)),
                Op::Fetch {
                    offset,
                    amount,
                    null,
                    ..
                } => {
                    let mut page: *mut c_void = std::ptr::null_mut();
                    let out = if null {
                        std::ptr::null_mut()
                    } else {
                        &mut page as *mut *mut c_void
                    };
                    let rc = (methods.xFetch.unwrap())(file, offset, amount, out);
                    let detail = if page.is_null() {
                        "none".to_string()
                    } else {
                        let bytes = std::slice::from_raw_parts(
                            page as *const u8,
                            amount.clamp(0, 64) as usize,
                        );
                        self.handles[slot]
                            .as_mut()
                            .unwrap()
                            .fetched
                            .push((offset, page));
                        format!("page {:x}", common::fnv(bytes))
                    };
                    Answer::with(rc, detail)
                }
                Op::Unfetch(_, which) => {
                    let handle = self.handles[slot].as_mut().unwrap();
                    let (offset, page) = match which {
                        Page::Fetched(n) if !handle.fetched.is_empty() => {
                            let index = n % handle.fetched.len();
                            handle.fetched.remove(index)
                        }
                        Page::Fetched(_) => unreachable!("checked above"),
                        Page::All => (0, std::ptr::null_mut()),
                        Page::Bogus => (0, 0x1000 as *mut c_void),
                    };
                    Answer::code((methods.xUnfetch.unwrap())(file, offset, page))
                }
                Op::DeviceCharacteristics(_) => Answer::with(
                    0,
                    format!(
                        "{} {}",
                        (methods.xDeviceCharacteristics.unwrap())(file),
                        (methods.xSectorSize.unwrap())(file)
                    ),
                ),
            }
        }
    }

    fn open(&mut self, slot: usize) -> Answer {
        if self.handles[slot].is_some() {
            return Answer::none();
        }
        self.calls += 1;
        let kind = KINDS[slot];
        let common_flags = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE;
        // SAFETY: the names are pointers into SQLite's filename block, as SQLite passes
        // them; `storage` has szOsFile bytes.
        unsafe {
            let (name, flags) = match kind {
                Kind::Main => (self.name, common_flags | ffi::SQLITE_OPEN_MAIN_DB),
                Kind::Journal => (
                    ffi::sqlite3_filename_journal(self.name),
                    common_flags | ffi::SQLITE_OPEN_MAIN_JOURNAL,
                ),
                Kind::Wal => (
                    ffi::sqlite3_filename_wal(self.name),
                    common_flags | ffi::SQLITE_OPEN_WAL,
                ),
                Kind::Temp => (
                    std::ptr::null(),
                    common_flags
                        | ffi::SQLITE_OPEN_EXCLUSIVE
                        | ffi::SQLITE_OPEN_DELETEONCLOSE
                        | ffi::SQLITE_OPEN_TEMP_JOURNAL,
                ),
            };
            let mut storage = vec![0u64; ((*self.vfs).szOsFile as usize).div_ceil(8)];
            let file = storage.as_mut_ptr() as *mut ffi::sqlite3_file;
            let rc =
                ((*self.vfs).xOpen.unwrap())(self.vfs, name, file, flags, std::ptr::null_mut());
            if rc == ffi::SQLITE_OK {
                self.handles[slot] = Some(Handle {
                    file,
                    _storage: storage,
                    fetched: Vec::new(),
                });
            } else {
                assert!((*file).pMethods.is_null(), "a failed xOpen set methods");
            }
            Answer::code(rc)
        }
    }

    /// Whether no handle of `kind` is open.
    fn closed(&self, kind: Kind) -> bool {
        (0..SLOTS).all(|slot| KINDS[slot] != kind || self.handles[slot].is_none())
    }

    /// The bytes of the file of `kind` on disk (None: no such file).
    fn bytes(&self, kind: Kind) -> Option<Vec<u8>> {
        std::fs::read(self.path(kind)?).ok()
    }

    fn close_all(&mut self) {
        for slot in 0..SLOTS {
            if self.handles[slot].is_some() {
                self.call(Op::Close(slot));
            }
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.close_all();
        // SAFETY: the block from sqlite3_create_filename, freed once, after every handle
        // using its names is closed.
        unsafe { ffi::sqlite3_free_filename(self.name) };
    }
}

/// What a call answered: its result code and what else it handed back.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Answer {
    code: c_int,
    detail: String,
}

impl Answer {
    fn code(code: c_int) -> Answer {
        Answer {
            code,
            detail: String::new(),
        }
    }

    fn with(code: c_int, detail: String) -> Answer {
        Answer { code, detail }
    }

    /// The call was not made (no such handle, or nothing to return).
    fn none() -> Answer {
        Answer::with(-1, "not made".to_string())
    }
}

// ─── What each call may be compared on ────────────────────────────────────────────────

/// How a call is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Made under both VFSes; the answers must be equal.
    Same,
    /// `unix` would crash, hand out a pointer outside its mapping, or keep lock state that
    /// no longer matches its locks: made under `io_uring` only, which must answer this code
    /// and change nothing. The reason is the class's in tests/hostile_args.rs.
    Refused(c_int, &'static str),
}

/// The chunk size, mmap limit and shm mapping a handle has, as the calls so far set them.
#[derive(Clone, Copy, Default)]
struct HandleModel {
    chunk: i64,
    mmap_limit: i64,
    /// A call was made under `io_uring` only: its SQLITE_FCNTL_LAST_ERRNO may hold that
    /// call's errno, `unix`'s an older one. Compared on the code only until closed.
    errno_stale: bool,
    /// The WAL-index slots the handle holds shared and exclusively.
    shm_shared: u16,
    shm_exclusive: u16,
    /// The handle wrote to its file and has made no call since that flushes what this
    /// VFS queued (ARCHITECTURE.md, "Flush points"): its writes may not have reached the
    /// kernel yet.
    queued: bool,
}

fn classify(op: Op, world: &mut World, model: &[HandleModel; SLOTS]) -> Expect {
    let slot = op.slot();
    if world.handles[slot].is_none() {
        return Expect::Same;
    }
    let main = KINDS[slot] == Kind::Main;
    match op {
        Op::Read { offset, amount, .. } if amount < 0 || (amount > 0 && offset < 0) => {
            Expect::Refused(ffi::SQLITE_IOERR_READ, "negative xRead amount or offset")
        }
        // `unix` zero-fills the null buffer when the read ends past the end of the file.
        Op::Read {
            amount, null: true, ..
        } if amount > 0 => Expect::Refused(ffi::SQLITE_IOERR_READ, "null xRead buffer"),
        // At a negative offset too: `unix`'s pwrite(2) fails there, and the -1 it returns
        // is not less than a negative amount, so `unix` answers SQLITE_OK.
        Op::Write { amount, .. } if amount < 0 => {
            Expect::Refused(ffi::SQLITE_IOERR_WRITE, "negative xWrite amount")
        }
        // Both answer EFAULT, but where the write starts past the end of an ext4 file the
        // faulting pwrite(2) leaves the file extended to its offset under `unix`; this
        // VFS refuses the call before any system call.
        Op::Write {
            offset,
            amount,
            null: true,
            ..
        } if offset >= 0 && amount > 0 => {
            Expect::Refused(ffi::SQLITE_IOERR_WRITE, "null xWrite buffer")
        }
        Op::Truncate(_, size) if size < 0 && model[slot].chunk > 0 => Expect::Refused(
            ffi::SQLITE_IOERR_TRUNCATE,
            "negative xTruncate size with a chunk size set",
        ),
        Op::FileSize { null: true, .. }
        | Op::CheckReserved { null: true, .. }
        | Op::ShmMap { null: true, .. }
        | Op::Fetch { null: true, .. } => Expect::Refused(ffi::SQLITE_MISUSE, "null out-pointer"),
        Op::FileControl {
            op, arg: Arg::Null, ..
        } if FILE_CONTROLS[..9].contains(&op) => {
            Expect::Refused(ffi::SQLITE_MISUSE, "null file-control argument")
        }
        Op::Lock(_, level) if main => {
            let held = world.lock_state(slot);
            let defined = level <= held || matches!((held, level), (0, 1) | (1, 2) | (1..=3, 4));
            if defined {
                Expect::Same
            } else {
                Expect::Refused(ffi::SQLITE_IOERR_LOCK, "undefined lock transition")
            }
        }
        Op::Unlock(_, level) if main => {
            let held = world.lock_state(slot);
            if level >= held || level == 0 || level == 1 {
                Expect::Same
            } else {
                Expect::Refused(ffi::SQLITE_IOERR_UNLOCK, "undefined unlock transition")
            }
        }
        Op::ShmMap { region, size, .. } if region < 0 || size <= 0 || size % 4096 != 0 => {
            Expect::Refused(ffi::SQLITE_IOERR_SHMMAP, "xShmMap region or size")
        }
        Op::ShmLock {
            offset,
            count,
            flags,
            ..
        } => {
            let shared = flags & ffi::SQLITE_SHM_SHARED != 0
                && (flags & ffi::SQLITE_SHM_UNLOCK != 0
                    || flags == ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_SHARED);
            if offset < 0 || count < 1 || offset + count > 8 || (shared && count != 1) {
                Expect::Refused(ffi::SQLITE_IOERR_SHMLOCK, "xShmLock slots")
            } else {
                Expect::Same
            }
        }
        Op::Fetch { offset, amount, .. }
            if offset < 0
                || amount < 0
                || offset.checked_add(i64::from(amount) + 256).is_none() =>
        {
            Expect::Refused(ffi::SQLITE_OK, "xFetch outside the file")
        }
        Op::Unfetch(_, page) => {
            let out = world.handles[slot].as_ref().unwrap().fetched.len();
            match page {
                Page::Bogus if out == 0 => {
                    Expect::Refused(ffi::SQLITE_OK, "xUnfetch of a page never fetched")
                }
                Page::All if out > 0 => {
                    Expect::Refused(ffi::SQLITE_OK, "xUnfetch(NULL) with pages out")
                }
                _ => Expect::Same,
            }
        }
        _ => Expect::Same,
    }
}

/// What a successful call changes in the model.
fn note(op: Op, answer: &Answer, model: &mut [HandleModel; SLOTS], world: &World) {
    let slot = op.slot();
    let made = !(answer.code == -1 && answer.detail == "not made");
    match op {
        Op::Write { amount, .. } if amount > 0 && answer.code == 0 => model[slot].queued = true,
        // Calls that flush the handle's queue whatever came before (a refused call flushes
        // nothing; these are never refused with the arguments matched here).
        Op::Sync(..) | Op::Truncate(..) | Op::FileSize { null: false, .. }
            if made && !matches!(op, Op::Truncate(_, size) if size < 0) =>
        {
            model[slot].queued = false
        }
        Op::Read {
            offset,
            amount,
            null: false,
            ..
        } if made
            && offset >= 0
            && amount > 0
            && offset.checked_add(i64::from(amount)).is_some() =>
        {
            model[slot].queued = false
        }
        _ => {}
    }
    match op {
        Op::Close(_) => model[slot] = HandleModel::default(),
        Op::Open(_) if answer.code == 0 && answer.detail.is_empty() => {
            model[slot] = HandleModel::default()
        }
        Op::FileControl {
            op: ffi::SQLITE_FCNTL_CHUNK_SIZE,
            arg: Arg::Int(chunk),
            ..
        } if answer.code == 0 => model[slot].chunk = i64::from(chunk),
        Op::FileControl {
            op: ffi::SQLITE_FCNTL_MMAP_SIZE,
            arg: Arg::I64(limit),
            ..
        } if answer.code == 0
            && limit >= 0
            && world.handles[slot]
                .as_ref()
                .is_some_and(|h| h.fetched.is_empty()) =>
        {
            model[slot].mmap_limit = limit
        }
        Op::ShmLock {
            offset,
            count,
            flags,
            ..
        } if answer.code == 0 && (0..8).contains(&offset) && count >= 1 && offset + count <= 8 => {
            let mask = (((1u32 << count) - 1) << offset) as u16;
            let held = &mut model[slot];
            if flags & ffi::SQLITE_SHM_UNLOCK != 0 {
                held.shm_shared &= !mask;
                held.shm_exclusive &= !mask;
            } else if flags == ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_SHARED {
                held.shm_shared |= mask;
            } else if flags == ffi::SQLITE_SHM_LOCK | ffi::SQLITE_SHM_EXCLUSIVE {
                held.shm_exclusive |= mask;
            }
        }
        Op::ShmUnmap(..) => {
            model[slot].shm_shared = 0;
            model[slot].shm_exclusive = 0;
        }
        _ => {}
    }
}

/// The xShmLock calls that release every WAL-index slot the handle holds, one by one, as
/// SQLite releases them before it unmaps the index. (`unix`'s xShmUnmap leaves the slots
/// of a connection that still holds them locked for the index's other connections; this
/// VFS gives them back. SQLite never unmaps while holding one.)
fn releases(slot: usize, held: &HandleModel) -> Vec<Op> {
    (0..8)
        .filter_map(|bit| {
            let flags = if held.shm_shared & (1 << bit) != 0 {
                ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_SHARED
            } else if held.shm_exclusive & (1 << bit) != 0 {
                ffi::SQLITE_SHM_UNLOCK | ffi::SQLITE_SHM_EXCLUSIVE
            } else {
                return None;
            };
            Some(Op::ShmLock {
                slot,
                offset: bit,
                count: 1,
                flags,
            })
        })
        .collect()
}

// ─── Running sequences ────────────────────────────────────────────────────────────────

/// Where two worlds first differed.
struct Difference {
    /// The calls up to and including the one that differed.
    calls: Vec<Op>,
    what: String,
}

/// Runs `ops` under both VFSes. Counts the calls made (both VFSes) into `calls`.
fn run(ops: &[Op], calls: &mut u64) -> Result<(), Difference> {
    let mut unix = World::new("unix");
    let mut ours = World::new("io_uring");
    let mut model = [HandleModel::default(); SLOTS];
    let differ = |index: usize, what: String| Difference {
        calls: ops[..=index].to_vec(),
        what,
    };
    let mut result = Ok(());
    let trace = std::env::var_os("VFS_METHODS_TRACE").is_some();
    for (index, &op) in ops.iter().enumerate() {
        if trace {
            eprintln!("{index}: {op}");
        }
        // A read with a null buffer where `unix` has mapped memory to copy into it.
        let op = match op {
            Op::Read {
                slot, null: true, ..
            } if model[slot].mmap_limit > 0 => continue,
            op => op,
        };
        // Not made: a read of the database through one connection while the other's
        // writes may still be queued. Write-behind hands a connection's writes to the
        // kernel at the flush points SQLite's locks order; SQLite never reads a page
        // another connection is writing (its EXCLUSIVE lock keeps readers out).
        if let Op::Read { slot, .. } | Op::FileSize { slot, .. } | Op::Fetch { slot, .. } = op {
            if KINDS[slot] == Kind::Main && model[1 - slot.min(1)].queued {
                continue;
            }
        }
        // Not made, as SQLite's locks never let it happen:
        // * a database changed through one connection while the other holds EXCLUSIVE
        //   (this VFS caches the size of a database its connection holds EXCLUSIVE;
        //   `unix` fstats for every xFileSize);
        // * a database shrunk (xTruncate, or a size hint, which ftruncates with mmap on)
        //   while the other connection may have it mapped: that connection's next read of
        //   its mapping past the new end is SIGBUS under both VFSes. (SQLite truncates
        //   under EXCLUSIVE, and the other connections map anew when they see the change.)
        if let Op::Write { slot, .. }
        | Op::Truncate(slot, _)
        | Op::FileControl {
            slot,
            op: ffi::SQLITE_FCNTL_SIZE_HINT,
            ..
        } = op
        {
            let other = 1 - slot.min(1);
            if KINDS[slot] == Kind::Main
                && ours.handles[slot].is_some()
                && ours.handles[other].is_some()
                && (ours.lock_state(other) == ffi::SQLITE_LOCK_EXCLUSIVE
                    || (!matches!(op, Op::Write { .. }) && model[other].mmap_limit > 0))
            {
                continue;
            }
        }
        if let Op::ShmUnmap(slot, _) | Op::Close(slot) = op {
            if KINDS[slot] == Kind::Main && ours.handles[slot].is_some() {
                for release in releases(slot, &model[slot]) {
                    let (u, o) = (unix.call(release), ours.call(release));
                    if u != o {
                        result = Err(differ(
                            index,
                            format!("`{release}` before `{op}`: unix {u:?}, io_uring {o:?}"),
                        ));
                        break;
                    }
                    note(release, &o, &mut model, &ours);
                }
                if result.is_err() {
                    break;
                }
            }
        }
        let panics = PANICS.load(Ordering::SeqCst);
        let expect = classify(op, &mut ours, &model);
        if expect == Expect::Same && ours.handles[op.slot()].is_some() {
            // The same classification from `unix`'s state, and the lock level compared.
            if let Op::Lock(..) | Op::Unlock(..) = op {
                if KINDS[op.slot()] == Kind::Main {
                    let (u, o) = (unix.lock_state(op.slot()), ours.lock_state(op.slot()));
                    if u != o {
                        result = Err(differ(
                            index,
                            format!("lock level before: unix {u}, io_uring {o}"),
                        ));
                        break;
                    }
                }
            }
        }
        let answer =
            match expect {
                Expect::Same => {
                    let from_unix = unix.call(op);
                    let from_ours = ours.call(op);
                    let errno_only = model[op.slot()].errno_stale
                        && matches!(
                            op,
                            Op::FileControl {
                                op: ffi::SQLITE_FCNTL_LAST_ERRNO,
                                ..
                            }
                        );
                    if trace {
                        eprintln!("    unix {from_unix:?} io_uring {from_ours:?}");
                    }
                    let differs = if errno_only {
                        from_unix.code != from_ours.code
                    } else {
                        from_unix != from_ours
                    };
                    if differs {
                        result = Err(differ(
                            index,
                            format!("`{op}`: unix {from_unix:?}, io_uring {from_ours:?}"),
                        ));
                        break;
                    }
                    from_ours
                }
                Expect::Refused(code, why) => {
                    model[op.slot()].errno_stale = true;
                    let before: Vec<_> = [Kind::Main, Kind::Journal, Kind::Wal]
                        .iter()
                        .map(|kind| ours.bytes(*kind))
                        .collect();
                    let from_ours = ours.call(op);
                    let after: Vec<_> = [Kind::Main, Kind::Journal, Kind::Wal]
                        .iter()
                        .map(|kind| ours.bytes(*kind))
                        .collect();
                    if from_ours.code != code || before != after {
                        result =
                            Err(differ(
                                index,
                                format!(
                            "`{op}` ({why}): io_uring {from_ours:?}, expected code {code}{}",
                            if before != after { " and no change to the files" } else { "" }
                        ),
                            ));
                        break;
                    }
                    from_ours
                }
            };
        if PANICS.load(Ordering::SeqCst) != panics {
            result = Err(differ(index, format!("`{op}`: io_uring panicked")));
            break;
        }
        note(op, &answer, &mut model, &ours);
        if let Op::Close(slot) = op {
            if let Err(what) = compare_files(&unix, &ours, KINDS[slot]) {
                result = Err(differ(index, what));
                break;
            }
        }
    }
    unix.close_all();
    ours.close_all();
    if result.is_ok() {
        for kind in [Kind::Main, Kind::Journal, Kind::Wal] {
            if let Err(what) = compare_files(&unix, &ours, kind) {
                result = Err(Difference {
                    calls: ops.to_vec(),
                    what: format!("after closing every handle: {what}"),
                });
                break;
            }
        }
    }
    *calls += unix.calls + ours.calls;
    result
}

/// The bytes of the file of `kind` under both VFSes, when no handle has it open.
fn compare_files(unix: &World, ours: &World, kind: Kind) -> Result<(), String> {
    if kind == Kind::Temp || !unix.closed(kind) || !ours.closed(kind) {
        return Ok(());
    }
    let (u, o) = (unix.bytes(kind), ours.bytes(kind));
    if u == o {
        return Ok(());
    }
    let describe = |bytes: &Option<Vec<u8>>| match bytes {
        None => "no file".to_string(),
        Some(bytes) => format!("{} bytes, fnv {:x}", bytes.len(), common::fnv(bytes)),
    };
    Err(format!(
        "{kind:?} file on disk: unix {}, io_uring {}",
        describe(&u),
        describe(&o)
    ))
}

fn setup() -> std::sync::MutexGuard<'static, ()> {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
        // Refusals and os_unix.c's messages go to SQLite's log; keep them off stderr.
        type Callback = unsafe extern "C" fn(*mut c_void, c_int, *const c_char);
        unsafe extern "C" fn quiet(_: *mut c_void, _: c_int, _: *const c_char) {}
        // SAFETY: SQLITE_CONFIG_LOG takes a callback of this type and its argument;
        // SQLite is shut down first, as sqlite3_config requires.
        unsafe {
            ffi::sqlite3_shutdown();
            ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_LOG,
                quiet as Callback,
                std::ptr::null_mut::<c_void>(),
            );
            assert_eq!(ffi::sqlite3_initialize(), ffi::SQLITE_OK);
        }
    });
    let guard = common::process_state_lock();
    common::register();
    guard
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/vfs_methods")
}

fn report(difference: Difference, origin: &str) -> ! {
    let text: Vec<String> = difference.calls.iter().map(Op::to_string).collect();
    panic!(
        "{origin}: unix and io_uring differ: {}\n\
         Save these calls as tests/corpus/vfs_methods/<what-it-found>.txt to replay them first:\n\
         # {}\n{}\n",
        difference.what,
        difference.what,
        text.join("\n")
    );
}

/// The saved sequences, each replayed as written.
#[test]
fn saved_sequences_answer_like_unix() {
    let _serial = setup();
    let mut calls = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .map(|dir| dir.filter_map(|entry| Some(entry.ok()?.path())).collect())
        .unwrap_or_default();
    entries.retain(|path| path.extension().is_some_and(|ext| ext == "txt"));
    entries.sort();
    assert!(
        !entries.is_empty(),
        "no saved sequences in {}",
        corpus_dir().display()
    );
    for path in entries {
        let text = std::fs::read_to_string(&path).unwrap();
        let ops: Vec<Op> = text
            .lines()
            .map(|line| line.split('#').next().unwrap().trim())
            .filter(|line| !line.is_empty())
            .map(|line| {
                line.parse()
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            })
            .collect();
        if let Err(difference) = run(&ops, &mut calls) {
            report(difference, &path.display().to_string());
        }
    }
}

/// Seeded sequences: [`SEQUENCES`] of them, or `VFS_METHODS_SEQUENCES` from
/// `VFS_METHODS_SEED` (see the file's header).
#[test]
fn random_call_sequences_answer_like_unix() {
    let _serial = setup();
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let sequences = env("VFS_METHODS_SEQUENCES").unwrap_or(SEQUENCES);
    let first = env("VFS_METHODS_SEED").unwrap_or(FIRST_SEED);
    let started = std::time::Instant::now();
    let mut calls = 0;
    for seed in first..first + sequences {
        let ops = generate(seed, OPS_PER_SEQUENCE);
        if std::env::var_os("VFS_METHODS_TRACE").is_some() {
            eprintln!("seed {seed:#x}");
        }
        if let Err(difference) = run(&ops, &mut calls) {
            report(difference, &format!("seed {seed:#x}"));
        }
    }
    println!(
        "{sequences} sequences from seed {first:#x}: {calls} VFS calls in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        sequences < SEQUENCES || calls >= 100_000,
        "a suite run makes at least 100,000 calls ({calls})"
    );
}

/// Every call prints as a line that parses back to it.
#[test]
fn calls_print_and_parse_back() {
    for seed in 0..50 {
        for op in generate(seed, 200) {
            let line = op.to_string();
            assert_eq!(line.parse::<Op>(), Ok(op), "{line}");
        }
    }
}
