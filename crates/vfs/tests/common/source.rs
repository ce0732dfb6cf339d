//! Reading a crate's sources for the tests that check them (`module_graph.rs`,
//! `unsafe_code.rs`): every `.rs` file under `src/` as a module path with its text, comments
//! and string literals blanked so that only code is searched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A module's path from the crate root: `["io", "uring"]` for `src/io/uring.rs`, `["io"]`
/// for `src/io/mod.rs`, `[]` for `lib.rs`/`main.rs`.
pub type Module = Vec<String>;

/// Module path (`["io", "uring"]`) → source text with comments and strings blanked.
pub fn read_modules(src: &Path) -> BTreeMap<Module, String> {
    let mut modules = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let mut segments: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let last = segments.pop().unwrap();
            let stem = last.trim_end_matches(".rs").to_string();
            let root = segments.is_empty() && (stem == "lib" || stem == "main");
            if stem != "mod" && !root {
                segments.push(stem);
            }
            let text = std::fs::read_to_string(&path).unwrap();
            modules.insert(segments, strip_comments_and_strings(&text));
        }
    }
    modules
}

/// Replaces comments, string and char literals with spaces (lines kept).
pub fn strip_comments_and_strings(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let blank = |b: u8| if b == b'\n' { b'\n' } else { b' ' };
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < bytes.len() {
                if bytes[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if bytes[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(bytes[i]));
                    i += 1;
                }
            }
        } else if rest.starts_with(b"r#\"") || rest.starts_with(b"r\"") {
            // Raw string: r"…" or r#"…"#.
            let hashes = rest[1..].iter().take_while(|&&b| b == b'#').count();
            let mut closing = vec![b'"'];
            closing.extend(std::iter::repeat_n(b'#', hashes));
            let start = i + 2 + hashes;
            let end = bytes[start..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(bytes.len(), |p| start + p + closing.len());
            out.extend(bytes[i..end].iter().map(|&b| blank(b)));
            i = end;
        } else if bytes[i] == b'"' {
            out.push(b' ');
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' {
                    out.push(b' ');
                    i += 1;
                }
                if i < bytes.len() {
                    out.push(blank(bytes[i]));
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if bytes[i] == b'\''
            && (rest.get(2) == Some(&b'\'') || (rest.get(1) == Some(&b'\\')))
        {
            // A char literal ('x' or '\n'), not a lifetime.
            let end = bytes[i + 2..]
                .iter()
                .position(|&b| b == b'\'')
                .map_or(bytes.len(), |p| i + 2 + p + 1);
            out.extend(bytes[i..end].iter().map(|&b| blank(b)));
            i = end;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

pub fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}
