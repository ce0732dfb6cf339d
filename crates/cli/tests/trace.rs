//! The `sqlite-uring` binary: `bench … --trace FILE` writes the VFS's trace of the run,
//! and `probe` names Docker's seccomp profile when io_uring_setup is refused with EPERM.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{describe, text};

fn sqlite_uring(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("SQLITE_URING_SIMULATE_UNAVAILABLE");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("running sqlite-uring")
}

#[test]
fn probe_names_dockers_seccomp_profile_on_eperm() {
    let output = sqlite_uring(
        &["probe"],
        &[("SQLITE_URING_SIMULATE_UNAVAILABLE", "EPERM")],
    );
    assert!(!output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("io_uring: UNAVAILABLE: io_uring_setup was refused with EPERM")
            && stdout.contains("Docker's default seccomp profile blocks io_uring_setup")
            && stdout.contains("--security-opt seccomp=unconfined"),
        "{}",
        describe(&output)
    );
}

#[cfg(feature = "trace")]
#[test]
fn speed_trace_file_holds_the_calls_of_the_traced_targets() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("speed.trace");
    let output = sqlite_uring(
        &[
            "bench",
            "speed",
            "--allow-debug",
            "--tests",
            "2",
            "--targets",
            "unix,io_uring",
            "--journal",
            "delete",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--scale",
            "0.01",
            "--dir",
            &dir.path().display().to_string(),
            "--trace",
            &trace.display().to_string(),
        ],
        &[],
    );
    assert!(output.status.success(), "{}", describe(&output));
    assert!(text(&output.stdout).contains("Trace written to"));
    let lines: Vec<String> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mark = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains("sqlite_uring::bench: ") && l.contains(what))
            .unwrap_or_else(|| panic!("no mark {what:?}:\n{}", lines.join("\n")))
    };
    let unix = mark("speed test 2 (25000 INSERTs in a transaction) · run 1 · unix (delete)");
    let ours = mark("speed test 2 (25000 INSERTs in a transaction) · run 1 · io_uring (delete)");
    let (first, second) = (unix.min(ours), unix.max(ours));
    let ours_range = if ours < unix {
        first..second
    } else {
        second..lines.len()
    };
    let unix_range = if unix < ours {
        first..second
    } else {
        second..lines.len()
    };
    // SQLite's own unix VFS is not traced; ours is, down to the ring.
    assert!(
        !lines[unix_range]
            .iter()
            .any(|l| l.contains("sqlite_uring::vfs")),
        "records inside the unix run"
    );
    let ours_lines = &lines[ours_range];
    for call in ["xOpen", "xLock", "xWrite", "xSync", "xUnlock", "xClose"] {
        assert!(
            ours_lines.iter().any(
                |l| l.contains(&format!(" TRACE sqlite_uring::vfs: {call} "))
                    && l.contains("sqlite-uring-speed-")
                    && l.contains(" duration_ns=")
            ),
            "no {call} record in the io_uring run"
        );
    }
    assert!(ours_lines
        .iter()
        .any(|l| l.contains("sqlite_uring::io: batch engine=io_uring")));
    assert!(ours_lines.iter().any(|l| l.contains("body of test 2 ends")));
}

#[cfg(feature = "trace")]
#[test]
fn blobs_trace_file_marks_each_phase() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("blobs.trace");
    let output = sqlite_uring(
        &[
            "bench",
            "blobs",
            "--allow-debug",
            "--targets",
            "io_uring",
            "--sizes",
            "64B",
            "--batch",
            "10",
            "--ops",
            "20",
            "--suite",
            "storage",
            "--journal",
            "wal",
            "--compression",
            "none",
            "--dir",
            &dir.path().display().to_string(),
            "--trace",
            &trace.display().to_string(),
        ],
        &[],
    );
    assert!(output.status.success(), "{}", describe(&output));
    let text = std::fs::read_to_string(&trace).unwrap();
    for phase in ["write phase", "read-seq phase", "read-random phase"] {
        assert!(text.contains(phase), "no {phase} mark:\n{text}");
    }
    assert!(text.contains("sqlite_uring::vfs: xWrite "), "{text}");
    assert!(text.contains("-wal\" offset="), "{text}");
}

#[test]
fn an_uncreatable_trace_file_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Path::new("/nonexistent/trace.log").display().to_string();
    let output = sqlite_uring(
        &[
            "bench",
            "speed",
            "--allow-debug",
            "--targets",
            "unix",
            "--dir",
            &dir.path().display().to_string(),
            "--trace",
            &missing,
        ],
        &[],
    );
    assert!(!output.status.success(), "{}", describe(&output));
    assert!(
        text(&output.stderr).contains("--trace /nonexistent/trace.log"),
        "{}",
        describe(&output)
    );
    // A path whose directory exists but cannot hold files: refused when created.
    let output = sqlite_uring(
        &[
            "bench",
            "blobs",
            "--allow-debug",
            "--targets",
            "memory",
            "--sizes",
            "64B",
            "--ops",
            "1",
            "--suite",
            "storage",
            "--dir",
            &dir.path().display().to_string(),
            "--trace",
            "/proc/trace.log",
        ],
        &[],
    );
    assert!(!output.status.success(), "{}", describe(&output));
    assert!(
        text(&output.stderr).contains("--trace /proc/trace.log: cannot create the trace file"),
        "{}",
        describe(&output)
    );
}
