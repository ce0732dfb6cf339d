//! `unsafe` stays where docs/ARCHITECTURE.md's "Unsafe code" says it lives: this test reads
//! the table of that section whose header starts `| may contain \`unsafe\``, and fails on
//! the keyword `unsafe` (a block, an `unsafe fn`, an `unsafe impl`) in any file of
//! `crates/vfs/src` no entry covers, and on an entry that covers no file using it (a stale
//! entry would let `unsafe` back in unnoticed). In the table's first column every
//! `backticked` word is an entry: `dir/` covers that directory and everything below it,
//! `name.rs` (or `dir/name.rs`, `dir/mod.rs`) one file. Comments and string literals are
//! ignored: only code counts.

use std::collections::BTreeMap;

#[path = "common/source.rs"]
mod source;

use source::{is_ident_byte, read_modules, workspace_root, Module};

/// The entries of the "may contain `unsafe`" table, as written (`sys/`, `io/uring.rs`).
fn allowed_entries(architecture: &str) -> Vec<String> {
    let section = architecture
        .split("\n## ")
        .find(|section| section.starts_with("Unsafe code"))
        .expect("ARCHITECTURE.md has a \"## Unsafe code\" section");
    let mut lines = section
        .lines()
        .skip_while(|line| !line.starts_with("| may contain `unsafe`"));
    assert!(
        lines.next().is_some(),
        "the \"Unsafe code\" section has a table headed `| may contain \\`unsafe\\` |`"
    );
    let mut entries = Vec::new();
    for row in lines.skip(1).take_while(|line| line.starts_with('|')) {
        let first_column = row.split('|').nth(1).unwrap_or("");
        entries.extend(
            first_column
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string),
        );
    }
    assert!(!entries.is_empty(), "the table lists files");
    entries
}

/// Whether `entry` covers `module` (`dir/` a directory, `name.rs` one file).
fn covers(entry: &str, module: &Module) -> bool {
    if let Some(dir) = entry.strip_suffix('/') {
        let dir: Vec<&str> = dir.split('/').collect();
        return module.len() >= dir.len() && module.iter().zip(&dir).all(|(a, b)| a == b);
    }
    let Some(file) = entry.strip_suffix(".rs") else {
        panic!("entry `{entry}` is neither a directory (`dir/`) nor a file (`name.rs`)");
    };
    let mut path: Vec<&str> = file.split('/').collect();
    if matches!(path.last(), Some(&"mod") | Some(&"lib")) {
        path.pop();
    }
    module.len() == path.len() && module.iter().zip(&path).all(|(a, b)| a == b)
}

/// Whether code (comments and strings already blanked) uses the keyword `unsafe`.
fn uses_unsafe(code: &str) -> bool {
    let bytes = code.as_bytes();
    code.match_indices("unsafe").any(|(start, word)| {
        let end = start + word.len();
        (start == 0 || !is_ident_byte(bytes[start - 1]))
            && (end == bytes.len() || !is_ident_byte(bytes[end]))
    })
}

/// What breaks the rule: files using `unsafe` outside the table, and entries that cover no
/// file using it.
fn violations(modules: &BTreeMap<Module, String>, entries: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let using: Vec<&Module> = modules
        .iter()
        .filter(|(_, code)| uses_unsafe(code))
        .map(|(module, _)| module)
        .collect();
    for module in &using {
        if !entries.iter().any(|entry| covers(entry, module)) {
            problems.push(format!(
                "`{}` uses `unsafe` but docs/ARCHITECTURE.md's \"Unsafe code\" table does not \
                 list it: move the unsafe operation behind a safe wrapper in `sys/` (or the \
                 ring in `io/uring.rs`), or list the file with the reason it must",
                module.join("/")
            ));
        }
    }
    for entry in entries {
        if !using.iter().any(|module| covers(entry, module)) {
            problems.push(format!(
                "docs/ARCHITECTURE.md's \"Unsafe code\" table lists `{entry}`, which has no \
                 `unsafe` (or names no file): remove the entry"
            ));
        }
    }
    problems
}

#[test]
fn unsafe_lives_only_in_the_files_architecture_lists() {
    let root = workspace_root();
    let architecture = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let entries = allowed_entries(&architecture);
    let modules = read_modules(&root.join("crates/vfs/src"));
    assert!(modules.len() > 20, "found the sources: {}", modules.len());
    let problems = violations(&modules, &entries);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checker_refuses_unsafe_outside_the_list_and_stale_entries() {
    let module = |path: &str| -> Module { path.split('/').map(str::to_string).collect() };
    let mut modules: BTreeMap<Module, String> = [
        ("sys/mapping", "fn f() { unsafe { g() } }"),
        ("io/uring", "unsafe impl Send for Ring {}"),
        ("shm", "fn f() { g_unsafe(); let unsafe_count = 1; }"),
        ("mmap", "fn f() {}"),
    ]
    .into_iter()
    .map(|(path, code)| (module(path), code.to_string()))
    .collect();
    let entries = vec!["sys/".to_string(), "io/uring.rs".to_string()];
    assert_eq!(
        violations(&modules, &entries),
        Vec::<String>::new(),
        "identifiers that contain the word are not the keyword"
    );

    // Positive control: a storage-layer file with an unsafe block fails.
    modules.insert(module("shm"), "fn f() { unsafe { g() } }".into());
    let problems = violations(&modules, &entries);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("`shm` uses `unsafe`"),
        "{problems:?}"
    );

    // An entry whose file has no unsafe (any more) fails too.
    modules.insert(module("shm"), "fn f() {}".into());
    let entries = vec!["sys/".into(), "io/uring.rs".into(), "mmap.rs".into()];
    let problems = violations(&modules, &entries);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("lists `mmap.rs`"), "{problems:?}");

    // Comments and strings are blanked by the reader before this check.
    let blanked = source::strip_comments_and_strings("// unsafe\nlet s = \"unsafe\";");
    assert!(!uses_unsafe(&blanked));
}

#[test]
fn entries_cover_directories_and_files() {
    let module = |path: &str| -> Module { path.split('/').map(str::to_string).collect() };
    assert!(covers("sys/", &module("sys/calls")));
    assert!(covers("sys/", &module("sys")));
    assert!(!covers("sys/", &module("system")));
    assert!(covers("io/uring.rs", &module("io/uring")));
    assert!(!covers("io/uring.rs", &module("io")));
    assert!(covers("trace.rs", &module("trace")));
    assert!(!covers("trace.rs", &module("trace/logger")));
    assert!(covers("io/mod.rs", &module("io")));
    assert!(covers("lib.rs", &Vec::new()));
}
