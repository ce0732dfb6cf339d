//! Every file the VFS creates gets the permission bits and the owner `unix` gives it
//! (os_unix.c findCreateFileMode, robust_open, robustFchown): a journal, WAL and `-shm`
//! get the database's bits whatever the umask (and, when running as root, its owner); a
//! super-journal and a new database the default bits less the umask; `modeof=` copies
//! another file's bits. Compared file by file against `unix` under umasks 022 and 077,
//! databases chmod 0666 and 0640 and, as root, chowned to another user and group.
//!
//! The umask is process-wide, so the comparison runs in a child process per umask (this
//! test binary re-run with `SQLITE_URING_TEST_UMASK` set).

mod common;

use std::ffi::{c_char, c_int, CStr, CString};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use rusqlite::{ffi, Connection, OpenFlags};

const UMASK_ENV: &str = "SQLITE_URING_TEST_UMASK";

/// A file's kind (from its name), permission bits, uid and gid.
type Made = (String, u32, u32, u32);

/// Files the shim VFSes were asked to delete, with their mode and owner just before.
static DELETED: Mutex<Vec<Made>> = Mutex::new(Vec::new());
/// (shim, base) VFS pointers, as addresses.
static BASES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn kind_of(path: &str) -> String {
    let name = Path::new(path).file_name().unwrap().to_string_lossy();
    for suffix in ["-journal", "-wal", "-shm"] {
        if let Some(stem) = name.strip_suffix(suffix) {
            return format!("{stem}{suffix}");
        }
    }
    if let Some(dash) = name.find("-mj") {
        // The super-journal's name ends in random characters.
        return format!("{}-mj (super-journal)", &name[..dash]);
    }
    name.into_owned()
}

fn made(path: &Path) -> Made {
    let metadata =
        std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    (
        kind_of(&path.to_string_lossy()),
        metadata.mode() & 0o777,
        metadata.uid(),
        metadata.gid(),
    )
}

/// xDelete of a shim: records the file's mode and owner, then deletes it through the
/// VFS it wraps. The super-journal lives only between its creation and this call.
unsafe extern "C" fn shim_delete(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync: c_int,
) -> c_int {
    // SAFETY: SQLite passes a NUL-terminated name.
    let path = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    if std::fs::symlink_metadata(&path).is_ok() {
        DELETED.lock().unwrap().push(made(Path::new(&path)));
    }
    let base = BASES
        .lock()
        .unwrap()
        .iter()
        .find(|(shim, _)| *shim == vfs as usize)
        .map(|(_, base)| *base as *mut ffi::sqlite3_vfs)
        .expect("shim registered");
    // SAFETY: `base` is a registered VFS, which lives for the whole process.
    unsafe { ((*base).xDelete.unwrap())(base, name, sync) }
}

/// Registers `shim-<base>`: `base` with its xDelete wrapped by [`shim_delete`]. Every
/// other method (and pAppData) is `base`'s own, so files are made exactly as by `base`.
fn install_shim(base: &str) -> String {
    let shim_name = format!("shim-{base}");
    let c_base = CString::new(base).unwrap();
    // SAFETY: sqlite3_vfs_find only reads the name.
    let base_vfs = unsafe { ffi::sqlite3_vfs_find(c_base.as_ptr()) };
    assert!(!base_vfs.is_null(), "VFS {base} is not registered");
    // SAFETY: a registered VFS is a valid, immutable struct for the life of the process.
    let mut shim = unsafe { *base_vfs };
    shim.zName = CString::new(shim_name.clone()).unwrap().into_raw();
    shim.pNext = std::ptr::null_mut();
    shim.xDelete = Some(shim_delete);
    let shim: &'static mut ffi::sqlite3_vfs = Box::leak(Box::new(shim));
    BASES
        .lock()
        .unwrap()
        .push((shim as *mut _ as usize, base_vfs as usize));
    // SAFETY: the struct is leaked, so it outlives its registration.
    let registered = unsafe { ffi::sqlite3_vfs_register(shim, 0) };
    assert_eq!(registered, ffi::SQLITE_OK);
    shim_name
}

fn open_with(path: &str, vfs: &str) -> Connection {
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)
        .unwrap_or_else(|e| panic!("open {path} with {vfs}: {e}"))
}

/// Makes every kind of file through `vfs` in `dir`; returns what each looked like.
fn make_files(dir: &Path, vfs: &str, db_mode: u32, owner: Option<(u32, u32)>) -> Vec<Made> {
    DELETED.lock().unwrap().clear();
    let db = dir.join("m.db");
    let db_name = db.to_str().unwrap();
    let mut seen = Vec::new();
    // A new database: the default bits less the umask.
    open_with(db_name, vfs)
        .execute_batch("CREATE TABLE t(x); CREATE TABLE u(x);")
        .unwrap();
    seen.push(made(&db));
    std::fs::set_permissions(&db, std::os::unix::fs::PermissionsExt::from_mode(db_mode)).unwrap();
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&db, Some(uid), Some(gid)).unwrap();
    }
    {
        let conn = open_with(db_name, vfs);
        // A rollback journal, while it exists (and again when SQLite deletes it).
        conn.execute_batch("BEGIN; INSERT INTO t VALUES(1);")
            .unwrap();
        seen.push(made(&dir.join("m.db-journal")));
        conn.execute_batch("COMMIT").unwrap();
        // A super-journal: a transaction over two databases (seen at its deletion).
        let aux = dir.join("aux.db");
        conn.execute("ATTACH ?1 AS aux", [aux.to_str().unwrap()])
            .unwrap();
        conn.execute_batch(
            "CREATE TABLE aux.a(x);
             BEGIN; INSERT INTO t VALUES(2); INSERT INTO aux.a VALUES(2); COMMIT;
             DETACH aux;",
        )
        .unwrap();
        // The WAL and its -shm, while the connection is open (the WAL again at close).
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.execute_batch("INSERT INTO u VALUES(3);").unwrap();
        seen.push(made(&dir.join("m.db-wal")));
        seen.push(made(&dir.join("m.db-shm")));
    }
    // `modeof=`: a new database with the bits of another file.
    let copy = dir.join("copy.db");
    let uri = format!("file:{}?modeof={db_name}", copy.to_str().unwrap());
    open_with(&uri, vfs)
        .execute_batch("CREATE TABLE c(x);")
        .unwrap();
    seen.push(made(&copy));
    let deleted = std::mem::take(&mut *DELETED.lock().unwrap());
    assert!(
        deleted.iter().any(|m| m.0.ends_with("(super-journal)")),
        "{vfs}: no super-journal was deleted: {deleted:?}"
    );
    seen.extend(deleted.into_iter().map(|mut m| {
        m.0 = format!("{} (at deletion)", m.0);
        m
    }));
    seen.sort();
    seen
}

/// The child: compares both VFSes under the umask the parent chose.
fn compare_under_umask(umask: u32) {
    // SAFETY: umask only sets the process's mask; this process runs nothing else.
    unsafe { libc::umask(umask) };
    common::register();
    let shim_unix = install_shim("unix");
    let shim_ours = install_shim(common::VFS);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut owners = vec![None];
    if root {
        owners.push(Some((4242, 4343)));
    }
    for db_mode in [0o666, 0o640] {
        for &owner in &owners {
            let unix_dir = tempfile::tempdir().unwrap();
            let ours_dir = tempfile::tempdir().unwrap();
            let unix = make_files(unix_dir.path(), &shim_unix, db_mode, owner);
            let ours = make_files(ours_dir.path(), &shim_ours, db_mode, owner);
            assert_eq!(
                ours, unix,
                "umask {umask:03o}, database mode {db_mode:03o}, owner {owner:?}: io_uring \
                 (left) made files unlike unix (right)"
            );
            // unix gives its -shm the database's bits, including those the umask removes
            // (with 0666 it removes some under both umasks).
            let shm = unix.iter().find(|m| m.0 == "m.db-shm").unwrap();
            assert_eq!(shm.1, db_mode, "{unix:?}");
            if let Some((uid, gid)) = owner {
                assert_eq!((shm.2, shm.3), (uid, gid), "{unix:?}");
            }
        }
    }
}

#[test]
fn created_files_get_the_modes_and_owners_unix_gives_them() {
    if let Ok(umask) = std::env::var(UMASK_ENV) {
        compare_under_umask(u32::from_str_radix(&umask, 8).unwrap());
        return;
    }
    for umask in ["022", "077"] {
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "created_files_get_the_modes_and_owners_unix_gives_them",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(UMASK_ENV, umask)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "child with umask {umask}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
