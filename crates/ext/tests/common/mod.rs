//! Helpers shared by the tests that load the built extension into other programs.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The extension, built for this test run (path without the `.so`, as `.load` takes it).
///
/// `cargo test` does not build the cdylib of a cdylib-only crate, so the tests build it
/// with the cargo that runs them, in the same profile, into a target directory of their
/// own (the extension has no heavy dependency; the shared one is locked by this run).
pub fn extension() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("extension-build");
            let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
            let mut command = Command::new(env!("CARGO"));
            command
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "sqlite-uring-ext",
                    "--manifest-path",
                ])
                .arg(&manifest)
                .env("CARGO_TARGET_DIR", &target_dir);
            let profile = if cfg!(debug_assertions) {
                "debug"
            } else {
                command.arg("--release");
                "release"
            };
            let output = command
                .output()
                .expect("running cargo to build the extension");
            assert!(
                output.status.success(),
                "building the extension failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let so = target_dir.join(profile).join("libsqlite_uring.so");
            assert!(so.exists(), "{} was not built", so.display());
            so.with_extension("")
        })
        .clone()
}
