//! Node.js's better-sqlite3 (its own SQLite, built from source by npm) loading the
//! extension and writing through `io_uring` in WAL mode, while Debian's stock `sqlite3`
//! CLI (the `unix` VFS, classic POSIX locks) reads the same database from other processes
//! (the scenario and its checks: `common/transfers.rs`).
//!
//! better-sqlite3 is found through `npm root -g` (`scripts/test` installs it globally at a
//! pinned version); without it the test fails, naming the install command.

mod common;
#[path = "common/transfers.rs"]
mod transfers;

use std::path::PathBuf;
use std::process::Command;

const INSTALL: &str =
    "npm_config_build_from_source=true npm_config_nodedir=/usr npm install -g better-sqlite3@12.11.1";

/// The directory holding better-sqlite3, for NODE_PATH.
fn global_node_modules() -> PathBuf {
    let output = Command::new("npm")
        .args(["root", "-g"])
        .output()
        .unwrap_or_else(|error| panic!("node and npm are required ({error}); then: {INSTALL}"));
    assert!(output.status.success(), "npm root -g failed");
    let root = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    assert!(
        root.join("better-sqlite3/package.json").is_file(),
        "better-sqlite3 is not installed in {}. Install it with:\n    {INSTALL}\n(scripts/test does)",
        root.display()
    );
    root
}

#[test]
fn better_sqlite3_writes_through_io_uring_while_the_stock_cli_reads() {
    let node_modules = global_node_modules();
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/node_writer.js");
    let mut writer = Command::new("node");
    writer.arg(&script).env("NODE_PATH", &node_modules);
    transfers::check_writer_against_stock_readers(writer, dir.path());
}
