//! The Java example (`examples/java`: org.xerial:sqlite-jdbc, with its own SQLite inside
//! the jar) loading the extension with `load_extension()` and writing through `io_uring`
//! in WAL mode, while Debian's stock `sqlite3` CLI reads the same database from other
//! processes (the scenario and its checks: `common/transfers.rs`).
//!
//! Maven resolves the example's class path offline (`mvn -o`) from the local repository,
//! where `scripts/test` downloads the pinned jar; the source file runs as it is
//! (`java -cp … Example.java`). Without Java, Maven or the jar the test fails, naming the
//! install command.

mod common;
#[path = "common/transfers.rs"]
mod transfers;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const INSTALL_TOOLS: &str = "apt-get install default-jdk-headless maven (scripts/test does)";
const INSTALL_JAR: &str = "scripts/test --install-only (or: cd examples/java && mvn \
     dependency:build-classpath)";

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/java")
}

/// The example's class path (the sqlite-jdbc jar), as Maven resolves it offline.
fn classpath(dir: &Path) -> String {
    let file = dir.join("classpath");
    let output = Command::new("mvn")
        .args(["-B", "-q", "-o", "-f"])
        .arg(example_dir().join("pom.xml"))
        .arg("dependency:build-classpath")
        .arg(format!("-Dmdep.outputFile={}", file.display()))
        .output()
        .unwrap_or_else(|error| panic!("Maven (mvn) is required ({error}): {INSTALL_TOOLS}"));
    assert!(
        output.status.success(),
        "Maven could not resolve the example's pinned sqlite-jdbc offline: {INSTALL_JAR}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let classpath = fs::read_to_string(&file).unwrap();
    assert!(classpath.contains("sqlite-jdbc"), "{classpath}");
    classpath
}

#[test]
fn sqlite_jdbc_writes_through_io_uring_while_the_stock_cli_reads() {
    let dir = tempfile::tempdir().unwrap();
    let classpath = classpath(dir.path());
    let java_found = Command::new("java").arg("-version").output();
    assert!(
        java_found.is_ok_and(|output| output.status.success()),
        "Java 11+ is required (java on PATH): {INSTALL_TOOLS}"
    );
    let mut writer = Command::new("java");
    writer
        .arg("-cp")
        .arg(classpath.trim())
        .arg(example_dir().join("src/main/java/Example.java"));
    transfers::check_writer_against_stock_readers(writer, dir.path());
}
