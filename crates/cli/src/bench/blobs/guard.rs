//! Safety around a run: room checks before starting, and no half-written databases left
//! behind when a case fails or the run is interrupted (SIGINT/SIGTERM: the case's
//! loops poll `bench::signals` and unwind to these guards).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The fixed `M_MMAP_THRESHOLD`: the ceiling of glibc's own dynamic threshold on 64-bit
/// (malloc.c `DEFAULT_MMAP_THRESHOLD_MAX`, 4 MiB × sizeof(long)), above every default
/// blob size.
const MMAP_THRESHOLD_MAX_BYTES: i32 = 32 << 20;

/// Fixes glibc malloc's thresholds for the benchmark process, so that a blob's result
/// buffers come from the reused heap instead of a fresh `mmap` per read.
///
/// By default glibc serves allocations of 128 KiB and more with `mmap` and raises that
/// threshold each time such a chunk is freed ("dynamic mmap threshold", mallopt(3)),
/// and trims the heap when its top is free. A 2 MB blob read allocates two 2 MB buffers
/// (SQLite's value, the Rust `Vec`); whether they are mmapped and faulted in page by
/// page (≈1 ms) or reused from the heap (≈0.2 ms) then depends on the process's
/// allocation history — in session 4 on the number of files written: 200 files read at
/// ~700/s, 300 at ~2,000–2,500/s, for either VFS. Fixed thresholds take that state out
/// of the measurement: blobs up to 32 MiB are always heap-allocated, and the heap is
/// not returned to the kernel between reads. Returns whether glibc accepted both.
pub fn pin_malloc_thresholds() -> bool {
    // SAFETY: mallopt only sets allocator parameters; it is called before the
    // benchmark's threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX_BYTES) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) == 1
    }
}

/// Removes the listed files (a case's database, journal, WAL, shm) when dropped, whether
/// the case finished, failed or was interrupted.
pub struct RemoveOnDrop {
    paths: Vec<PathBuf>,
}

impl RemoveOnDrop {
    pub fn new(paths: Vec<PathBuf>) -> Self {
        // Leftovers of an earlier killed run would be mistaken for this case's data.
        for path in &paths {
            remove_path(path);
        }
        RemoveOnDrop { paths }
    }

    /// Total size of the files that exist now (the database as stored on disk).
    pub fn size_bytes(&self) -> u64 {
        self.paths
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for path in &self.paths {
            remove_path(path);
        }
    }
}

fn remove_path(path: &Path) {
    // NotFound is the normal case (no -wal in rollback mode…); anything else cannot be
    // reported from Drop, and the path is in the run's own directory anyway.
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Bytes available to an unprivileged user on the filesystem of `dir`.
pub fn free_bytes(dir: &Path) -> anyhow::Result<u64> {
    let c_path = CString::new(dir.as_os_str().as_bytes())
        .with_context(|| format!("--dir {} contains a NUL byte", dir.display()))?;
    // SAFETY: statvfs is a plain C struct of integers, for which all zeroes is valid.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs writes into the struct we own; the path is NUL-terminated.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statvfs on --dir {}", dir.display()));
    }
    Ok(stats.f_bavail as u64 * stats.f_frsize as u64)
}

/// `MemAvailable` from /proc/meminfo, for in-memory targets.
pub fn available_memory_bytes() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    parse_mem_available(&text).context("/proc/meminfo has no MemAvailable line")
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether glibc serves a `size_bytes` allocation with its own `mmap`: bit 1
    /// (IS_MMAPPED) of the chunk's size word, which glibc keeps just before the pointer
    /// it returns.
    fn malloc_mmaps(size_bytes: usize) -> bool {
        // SAFETY: the pointer comes from malloc and is hidden from the optimiser by
        // black_box, so the read of the chunk header just before it is a plain load of
        // allocator memory; the block is freed once.
        unsafe {
            let block = std::hint::black_box(libc::malloc(size_bytes)) as *const usize;
            assert!(!block.is_null());
            let size_word = std::ptr::read_volatile(block.sub(1));
            libc::free(block as *mut libc::c_void);
            size_word & 2 != 0
        }
    }

    /// With the thresholds fixed, 2 MB blob buffers come from the heap; a buffer above
    /// the fixed threshold still gets its own mapping (so the check can see one).
    #[test]
    fn pinned_thresholds_keep_blob_buffers_off_mmap() {
        assert!(pin_malloc_thresholds());
        assert!(!malloc_mmaps(2_000_000));
        assert!(malloc_mmaps(2 * MMAP_THRESHOLD_MAX_BYTES as usize));
    }

    #[test]
    fn remove_on_drop_removes_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = ["x.db", "x.db-wal", "x.db-shm"]
            .iter()
            .map(|n| dir.path().join(n))
            .collect();
        {
            let guard = RemoveOnDrop::new(paths.clone());
            for p in &paths[..2] {
                std::fs::write(p, b"12345").unwrap();
            }
            assert_eq!(guard.size_bytes(), 10);
        }
        assert!(paths.iter().all(|p| !p.exists()));
    }

    #[test]
    fn reads_free_space_and_memory() {
        assert!(free_bytes(Path::new("/")).is_ok());
        assert!(free_bytes(Path::new("/no/such/dir"))
            .unwrap_err()
            .to_string()
            .contains("--dir"));
        assert_eq!(
            parse_mem_available("MemTotal: 5 kB\nMemAvailable:  2 kB\n"),
            Some(2048)
        );
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
    }
}
