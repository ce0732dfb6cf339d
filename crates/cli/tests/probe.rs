//! `sqlite-uring probe --dir DIR`: names the directory's filesystem, says where ring
//! writes and fsyncs complete there (inline or on io-wq workers), and reports the routing
//! the VFS gives a database there — which must be the routing a database opened there
//! really gets (`PRAGMA io_uring_stats`).

mod common;

use std::path::Path;
use std::process::Command;

use common::{describe, text};

/// The probe's stdout for `dir`; the command must succeed.
fn probe(dir: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .arg("probe")
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    text(&output.stdout)
}

/// The value after the label `name` on its line of the probe's output.
fn field<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find_map(|line| line.trim_start().strip_prefix(name))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{report}"))
        .trim()
}

/// `"engine":…,"sqpoll":"…"` as `PRAGMA io_uring_stats` reports it for a database opened
/// in `dir` through the io_uring VFS registered with default options.
fn routing_of_database_in(dir: &Path) -> String {
    sqlite_uring::register(sqlite_uring::Options::default()).unwrap();
    let conn = rusqlite::Connection::open_with_flags_and_vfs(
        dir.join("probe.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_CREATE,
        "io_uring",
    )
    .unwrap();
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    let stats: String = conn
        .query_row("PRAGMA io_uring_stats", [], |row| row.get(0))
        .unwrap();
    let start = stats.find("\"engine\"").expect("stats name the engine");
    let end = stats
        .find(",\"direct_align_bytes\"")
        .expect("then the routing");
    stats[start..end].to_string()
}

/// `stat -f -c %t`: the directory's statfs magic in hex, asked independently of the probe.
fn statfs_magic(dir: &Path) -> String {
    let output = Command::new("stat")
        .args(["-f", "-c", "%t"])
        .arg(dir)
        .output()
        .expect("stat(1) from coreutils");
    assert!(output.status.success(), "{}", describe(&output));
    text(&output.stdout).trim().to_string()
}

/// The project's own temporary directory is on ext4 (the machine the project is measured
/// on, and CI): ext4 cannot complete a buffered write under IOCB_NOWAIT, so buffered ring
/// writes and every ring fsync go to io-wq workers, O_DIRECT overwrites of written blocks
/// run inline, and the VFS sends nothing of a buffered database to the ring.
#[test]
fn probe_on_ext4_reports_workers_and_the_routing_a_database_gets() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    assert_eq!(
        statfs_magic(dir.path()),
        "ef53",
        "this test expects the target directory on ext4, as on the project machine"
    );
    let report = probe(dir.path());
    assert_eq!(field(&report, "filesystem"), "ext4", "{report}");
    for punted in ["buffered append", "buffered overwrite", "fsync"] {
        assert!(
            field(&report, punted).starts_with("io-wq workers ("),
            "{punted}: {report}"
        );
    }
    assert_eq!(field(&report, "O_DIRECT overwrite"), "inline", "{report}");
    assert_eq!(
        field(&report, "buffered ring writes run inline:"),
        "no",
        "{report}"
    );
    let routing = field(&report, "default routing of a database here:");
    assert_eq!(
        routing,
        format!("{{{}}}", routing_of_database_in(dir.path())),
        "{report}"
    );
    assert!(routing.contains(r#""writes":"syscall""#), "{routing}");
    // The probe's temporary files never stay behind.
    assert_eq!(
        common::entries(dir.path()).len(),
        1,
        "only probe.db remains"
    );
}

/// On tmpfs (mounted for the test; CI runs as root) every ring write and fsync goes to
/// io-wq (tmpfs does not take IOCB_NOWAIT at all), and the routing reported is the one a
/// database opened there gets.
#[test]
fn probe_on_tmpfs_reports_tmpfs_and_the_routing_a_database_gets() {
    let mount = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(mount.path())
        .status()
        .expect("mount(8) is needed for this test");
    assert!(
        status.success(),
        "mounting a tmpfs needs root (CI runs as root)"
    );
    let result = std::panic::catch_unwind(|| {
        let report = probe(mount.path());
        assert_eq!(field(&report, "filesystem"), "tmpfs", "{report}");
        for punted in [
            "buffered append",
            "buffered overwrite",
            "O_DIRECT overwrite",
            "fsync",
        ] {
            assert!(
                field(&report, punted).starts_with("io-wq workers ("),
                "{punted}: {report}"
            );
        }
        let routing = field(&report, "default routing of a database here:");
        assert_eq!(
            routing,
            format!("{{{}}}", routing_of_database_in(mount.path())),
            "{report}"
        );
    });
    let _ = Command::new("umount").arg(mount.path()).status();
    result.unwrap();
}

/// A directory that does not exist is refused, naming the flag.
#[test]
fn probe_of_a_missing_directory_names_the_flag() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let missing = dir.path().join("missing");
    let output = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .arg("probe")
        .arg("--dir")
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!output.status.success(), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--dir") && stderr.contains("not a directory"),
        "{stderr}"
    );
}
