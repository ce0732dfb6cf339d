//! The environment header printed above every benchmark and stored with its results.
//!
//! A storage benchmark means little without the kernel, the filesystem and device the
//! database lived on, the memory available for the page cache and whether the binary was
//! optimised; so every bench collects an [`EnvInfo`] for its `--dir` and prints it.

use std::ffi::CStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// What a reader needs to interpret (and reproduce) a measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnvInfo {
    /// `uname -srm`, e.g. `Linux 6.8.0-45-generic x86_64`.
    pub kernel: String,
    /// Directory the databases were placed in (canonical).
    pub dir: PathBuf,
    /// Filesystem type of `dir` from statfs, e.g. `ext4`, `tmpfs`.
    pub filesystem: String,
    /// Mount source of `dir` from /proc/self/mountinfo, e.g. `/dev/nvme0n1p2`.
    pub device: String,
    /// Mount point of `dir`.
    pub mount_point: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    pub cpu_model: String,
    /// `MemAvailable` from /proc/meminfo.
    pub available_memory_bytes: u64,
    /// `release` or `debug`.
    pub build_profile: String,
    pub sqlite_version: String,
    /// `PRAGMA compile_options` of the linked SQLite.
    pub sqlite_compile_options: Vec<String>,
}

impl EnvInfo {
    /// Collects the header for databases placed in `dir`. Parts that cannot be read are
    /// reported as `unknown (…why…)` instead of failing the benchmark.
    pub fn collect(dir: &Path) -> EnvInfo {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let mount = mount_of(&dir);
        EnvInfo {
            kernel: kernel(),
            filesystem: filesystem_type(&dir),
            device: mount
                .as_ref()
                .map_or_else(|| "unknown".into(), |m| m.source.clone()),
            mount_point: mount.map_or_else(|| "unknown".into(), |m| m.mount_point),
            dir,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: cpu_model(),
            available_memory_bytes: available_memory_bytes().unwrap_or(0),
            build_profile: build_profile().to_string(),
            sqlite_version: rusqlite::version().to_string(),
            sqlite_compile_options: sqlite_compile_options(),
        }
    }

    /// Header lines for the terminal and the Markdown export.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![
            format!("kernel:      {}", self.kernel),
            format!(
                "directory:   {} ({} on {}, mounted at {})",
                self.dir.display(),
                self.filesystem,
                self.device,
                self.mount_point
            ),
            format!("cpu:         {} × {}", self.cpus, self.cpu_model),
            format!(
                "memory:      {:.1} GiB available",
                self.available_memory_bytes as f64 / (1u64 << 30) as f64
            ),
            format!("build:       {}", self.build_profile),
            format!("sqlite:      {}", self.sqlite_version),
        ];
        if !self.sqlite_compile_options.is_empty() {
            lines.push(format!(
                "sqlite opts: {}",
                self.sqlite_compile_options.join(" ")
            ));
        }
        lines
    }

    /// The header as a Markdown bullet list.
    pub fn markdown(&self) -> String {
        self.lines()
            .iter()
            .map(|line| format!("- {line}\n"))
            .collect()
    }
}

/// `release` when optimised (no debug assertions), else `debug`.
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Refuses to measure with a debug build unless the user insists (`allow_debug`, e.g. a
/// `--allow-debug` flag or the test suite); then a loud warning is returned to print.
pub fn check_release_build(allow_debug: bool) -> Result<Option<String>> {
    if !cfg!(debug_assertions) {
        return Ok(None);
    }
    let warning = "this is a DEBUG build: timings are meaningless (SQLite and the VFS are \
                   unoptimised); build with `cargo build --release -p sqlite-uring-cli`";
    if allow_debug {
        Ok(Some(format!("WARNING: {warning}")))
    } else {
        bail!("{warning}, or pass --allow-debug to run anyway (e.g. to test the tool)")
    }
}

fn kernel() -> String {
    // SAFETY: utsname is plain old data, so all-zeroes is a valid value; uname fills it
    // with NUL-terminated strings and we only read it after a successful return.
    unsafe {
        let mut name: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut name) != 0 {
            return format!("unknown ({})", std::io::Error::last_os_error());
        }
        let field = |f: &[libc::c_char]| CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned();
        format!(
            "{} {} {}",
            field(&name.sysname),
            field(&name.release),
            field(&name.machine)
        )
    }
}

/// Name of a statfs `f_type` magic (linux/magic.h); hex for the ones not listed.
pub fn filesystem_name(magic: i64) -> String {
    let name = match magic {
        0xEF53 => "ext2/3/4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0x794c_7630 => "overlayfs",
        0x2FC1_2FC1 => "zfs",
        0xF2F5_2010 => "f2fs",
        0xCA45_1A4E => "bcachefs",
        0x6969 => "nfs",
        0xFF53_4D42 => "cifs",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        0x7371_7368 => "squashfs",
        0x4d44 => "vfat",
        0x5346_544e => "ntfs",
        _ => return format!("unknown (f_type {magic:#x})"),
    };
    name.to_string()
}

fn filesystem_type(dir: &Path) -> String {
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return "unknown (path contains NUL)".into();
    };
    // SAFETY: statfs is plain old data (zeroes are valid); `path` is a valid NUL-terminated
    // string that outlives the call; the result is only read after success.
    unsafe {
        let mut stat: libc::statfs = std::mem::zeroed();
        if libc::statfs(path.as_ptr(), &mut stat) != 0 {
            return format!("unknown ({})", std::io::Error::last_os_error());
        }
        // f_type's integer type differs between architectures.
        #[allow(clippy::unnecessary_cast)]
        filesystem_name(stat.f_type as i64)
    }
}

#[derive(Debug, PartialEq)]
struct Mount {
    mount_point: String,
    source: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let code =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount holding `dir`: among mountinfo lines whose device number matches `dir`'s
/// `st_dev`, the one with the longest mount point that is a prefix of `dir` (bind mounts
/// share a device); failing a device match, the longest prefix alone.
fn parse_mount(mountinfo: &str, dir: &Path, dev: Option<(u32, u32)>) -> Option<Mount> {
    let mut best: Option<(bool, usize, Mount)> = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if fields.len() < 5 || right.len() < 2 {
            continue;
        }
        let mount_point = unescape_mountinfo(fields[4]);
        if !dir.starts_with(&mount_point) {
            continue;
        }
        let device_matches =
            dev.is_some_and(|(major, minor)| fields[2] == format!("{major}:{minor}"));
        let rank = (device_matches, mount_point.len());
        let better = match &best {
            None => true,
            Some((matches, len, _)) => rank >= (*matches, *len),
        };
        if better {
            let source = unescape_mountinfo(right[1]);
            best = Some((
                rank.0,
                rank.1,
                Mount {
                    mount_point,
                    source,
                },
            ));
        }
    }
    best.map(|(_, _, mount)| mount)
}

fn mount_of(dir: &Path) -> Option<Mount> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let dev = std::fs::metadata(dir).ok().map(|m| {
        let dev = m.dev();
        (libc::major(dev), libc::minor(dev))
    });
    parse_mount(&mountinfo, dir, dev)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn sqlite_compile_options() -> Vec<String> {
    let query = || -> rusqlite::Result<Vec<String>> {
        let connection = rusqlite::Connection::open_in_memory()?;
        let mut statement = connection.prepare("PRAGMA compile_options")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect()
    };
    query().unwrap_or_else(|e| vec![format!("unknown ({e})")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_prefers_device_and_longest_prefix() {
        let mountinfo = "\
22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
30 22 0:25 / /tmp rw shared:2 - tmpfs tmpfs rw
31 22 259:3 / /data\\040disk rw shared:3 - xfs /dev/sdb1 rw
";
        let found = parse_mount(mountinfo, Path::new("/tmp/x"), Some((0, 25))).unwrap();
        assert_eq!(
            found,
            Mount {
                mount_point: "/tmp".into(),
                source: "tmpfs".into()
            }
        );
        let found = parse_mount(mountinfo, Path::new("/data disk/db"), None).unwrap();
        assert_eq!(found.source, "/dev/sdb1");
        let found = parse_mount(mountinfo, Path::new("/home/u"), Some((259, 2))).unwrap();
        assert_eq!(found.source, "/dev/nvme0n1p2");
    }

    #[test]
    fn filesystem_magic_names() {
        assert_eq!(filesystem_name(0x0102_1994), "tmpfs");
        assert_eq!(filesystem_name(0xEF53), "ext2/3/4");
        assert!(filesystem_name(0x1234).starts_with("unknown"));
    }

    #[test]
    fn collects_something_for_the_temp_dir() {
        let info = EnvInfo::collect(&std::env::temp_dir());
        assert!(info.kernel.starts_with("Linux"), "{}", info.kernel);
        assert!(info.sqlite_version.starts_with('3'));
        assert!(!info.sqlite_compile_options.is_empty());
        assert!(info.lines().len() >= 6);
    }
}
