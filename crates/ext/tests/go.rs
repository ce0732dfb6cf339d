//! The Go example (`examples/go`: github.com/mattn/go-sqlite3, with its own SQLite built by
//! cgo) loading the extension through the driver's extension list and writing through
//! `io_uring` in WAL mode, while Debian's stock `sqlite3` CLI reads the same database from
//! other processes (the scenario and its checks: `common/transfers.rs`).
//!
//! The example is built offline (`GOPROXY=off`) from the module cache, where `scripts/test`
//! downloads the pinned module; without Go or the module the test fails, naming the
//! install command.

mod common;
#[path = "common/transfers.rs"]
mod transfers;

use std::path::{Path, PathBuf};
use std::process::Command;

const INSTALL_GO: &str = "install Go 1.21+ (https://go.dev/doc/install) into /usr/local/go";
const INSTALL_MODULE: &str = "scripts/test --install-only (or: cd examples/go && go mod download)";

/// `go` from PATH, or where the official archive installs it.
fn go() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("go"))
        .chain([PathBuf::from("/usr/local/go/bin/go")])
        .find(|go| go.is_file())
        .unwrap_or_else(|| {
            panic!("Go is required and is not on PATH nor in /usr/local/go/bin: {INSTALL_GO}")
        })
}

/// Builds the example into `dir`, offline.
fn build_example(dir: &Path) -> PathBuf {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/go");
    let binary = dir.join("go-writer");
    let output = Command::new(go())
        .args(["build", "-mod=readonly", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&source)
        .env("GOPROXY", "off")
        .env("CGO_ENABLED", "1")
        .output()
        .expect("running go build");
    assert!(
        output.status.success(),
        "building {} failed (go-sqlite3 needs cgo, so gcc; the pinned module must be in the \
         module cache: {INSTALL_MODULE}):\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

#[test]
fn go_sqlite3_writes_through_io_uring_while_the_stock_cli_reads() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Command::new(build_example(dir.path()));
    transfers::check_writer_against_stock_readers(writer, dir.path());
}
