//! The Dockerfile cannot be built here (no Docker engine), so this keeps it honest the
//! cheap way: its command is the README's main command, verbatim, and it installs the
//! packages `scripts/test` installs for the tests.

use std::path::PathBuf;

fn repository_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[test]
fn dockerfile_runs_the_readme_main_command() {
    let dockerfile = repository_file("Dockerfile");
    let readme = repository_file("README.md");
    let cmd = dockerfile
        .lines()
        .find_map(|line| line.strip_prefix("CMD "))
        .expect("the Dockerfile has a CMD");
    let words: Vec<String> = cmd
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|word| word.trim().trim_matches('"').to_string())
        .collect();
    let command = words.join(" ");
    assert!(
        readme.lines().any(|line| line.trim() == command.as_str()),
        "the Dockerfile's CMD `{command}` is not a command line of README.md: keep them the same"
    );
    // The build step compiles the package that command runs, in the same profile.
    assert!(
        dockerfile
            .lines()
            .any(|line| line.trim() == "RUN cargo build --release -p sqlite-uring-cli"),
        "{dockerfile}"
    );
}

#[test]
fn dockerfile_installs_what_ci_installs() {
    let dockerfile = repository_file("Dockerfile");
    let ci = repository_file("scripts/test");
    // Packages scripts/test installs when missing, plus those it names on an apt-get line
    // (pytest for Debian's python3, which the image's `python3` is).
    let mut from_ci: Vec<String> = ci
        .lines()
        .filter_map(|line| line.split("missing+=(").nth(1))
        .map(|rest| rest.trim_end_matches(')').to_string())
        .chain(
            ci.lines()
                .filter_map(|line| line.split("apt-get install").nth(1))
                .flat_map(|rest| {
                    rest.split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .filter(|word| !word.starts_with('-') && !word.starts_with('"')),
        )
        .collect();
    let start = dockerfile
        .find("apt-get install")
        .expect("the Dockerfile installs packages with apt-get");
    let block = &dockerfile[start..];
    let block = &block[..block.find("&&").unwrap_or(block.len())];
    let mut from_dockerfile: Vec<String> = block
        .split_whitespace()
        .skip(2)
        .filter(|word| !word.starts_with('-') && *word != "\\")
        .map(str::to_string)
        .collect();
    from_ci.sort();
    from_ci.dedup();
    from_dockerfile.sort();
    assert!(
        !from_ci.is_empty(),
        "no `missing+=(…)` package in scripts/test"
    );
    assert_eq!(
        from_dockerfile, from_ci,
        "the Dockerfile's apt-get install list must be scripts/test's package list"
    );
}
