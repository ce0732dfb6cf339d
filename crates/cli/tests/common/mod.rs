//! Helpers shared by the `sqlite-uring` binary's integration tests.

use std::path::Path;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Status and both streams of a finished command, for assertion messages.
pub fn describe(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    )
}

/// Asserts that the JSON numbers `low`, `median` and `high` of `record` are in order: a
/// paired median inside its interval.
#[allow(dead_code)] // not every test binary that includes this module uses every helper
pub fn assert_within_interval(record: &serde_json::Value, low: &str, median: &str, high: &str) {
    let number = |key: &str| {
        record[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} is not a number: {record}"))
    };
    let (low, median, high) = (number(low), number(median), number(high));
    assert!(low <= median && median <= high, "{record}");
}

/// The names in `dir`, in no particular order.
#[allow(dead_code)] // not every test binary that includes this module uses every helper
pub fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The pids of running processes whose command line mentions `needle`.
#[allow(dead_code)]
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if text(&cmdline).contains(needle) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// The processes other than `parent` whose command line mentions `needle`: the worker
/// processes of a benchmark run, when `needle` is its `--dir`.
#[allow(dead_code)]
pub fn workers_of(parent: u32, needle: &str) -> Vec<u32> {
    processes_mentioning(needle)
        .into_iter()
        .filter(|&pid| pid != parent)
        .collect()
}

/// Whether process `pid` is still running with `needle` in its command line (a pid
/// reused by an unrelated process does not count).
#[allow(dead_code)]
pub fn still_running(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|cmdline| text(&cmdline).contains(needle))
        .unwrap_or(false)
}

/// What a benchmark run stopped by SIGTERM must leave behind: a failed exit that says
/// so, nothing in `dir`, and its worker `worker` (whose command line mentions `needle`)
/// gone (the parent waits for it before exiting).
#[allow(dead_code)]
pub fn assert_stopped_by_sigterm(output: &Output, dir: &Path, worker: u32, needle: &str) {
    assert!(!output.status.success(), "{}", describe(output));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("interrupted by SIGTERM"), "{stderr}");
    assert_eq!(entries(dir), Vec::<String>::new(), "files left");
    assert!(
        !still_running(worker, needle),
        "worker {worker} still running"
    );
}

/// Sends SIGTERM to `child` and waits for it to exit, at most `limit`; kills it and
/// panics with `why_late` if it has not exited by then.
#[allow(dead_code)]
pub fn terminate_and_wait(mut child: Child, limit: Duration, why_late: &str) -> Output {
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the run did not stop within {limit:?} of SIGTERM: {why_late}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
