//! The modules of `crates/vfs/src` import downward only: this test reads the sources,
//! builds the graph of which file names which module, and fails on any cycle.
//!
//! A node is one source file (`io/mod.rs` is the module `io`). An edge `a → b` is a path
//! in `a` that names module `b`: `crate::b::…`, `super::b::…`, `self::b::…`, or a child
//! module used by its bare name (`uring::…` inside `io/mod.rs`). A path resolves to the
//! deepest module it names (`crate::io::uring::probe_report` → `io/uring`), so a facade
//! `mod.rs` that re-exports its children sits above them; children must then name their
//! siblings (`super::op::Op`), never the facade (`super::Op`). Paths through the crate
//! root (`crate::Options`) are refused outright: the root re-exports everything, so such
//! a path hides the real dependency.
//!
//! Declaring a child (`mod uring;`) is not an edge. Comments and string literals are
//! ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`["io", "uring"]`) → source text with comments and strings blanked.
fn read_modules(src: &Path) -> BTreeMap<Vec<String>, String> {
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
            let mut segments: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let last = segments.pop().unwrap();
            let stem = last.trim_end_matches(".rs").to_string();
            if stem != "mod" && !(segments.is_empty() && stem == "lib") {
                segments.push(stem);
            }
            let text = std::fs::read_to_string(&path).unwrap();
            modules.insert(segments, strip_comments_and_strings(&text));
        }
    }
    modules
}

/// Replaces comments, string and char literals with spaces (lines kept).
fn strip_comments_and_strings(text: &str) -> String {
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

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The path trees starting at every occurrence of `prefix::` that begins a path (not
/// preceded by an identifier character or `::`): each as a list of full segment paths,
/// brace groups expanded (`a::{b, c::d}` → `a::b`, `a::c::d`).
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let needle = format!("{prefix}::");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(&needle) {
        let start = from + at;
        from = start + needle.len();
        let preceded = start > 0 && (is_ident_byte(bytes[start - 1]) || bytes[start - 1] == b':');
        if preceded {
            continue;
        }
        let mut cursor = from;
        for tail in parse_tree(bytes, &mut cursor) {
            found.push(tail);
        }
    }
    found
}

/// Parses `seg::seg::{tree, tree}` at `cursor` into the list of expanded paths.
fn parse_tree(bytes: &[u8], cursor: &mut usize) -> Vec<Vec<String>> {
    let skip_space = |cursor: &mut usize| {
        while *cursor < bytes.len() && bytes[*cursor].is_ascii_whitespace() {
            *cursor += 1;
        }
    };
    let mut prefix = Vec::new();
    loop {
        skip_space(cursor);
        if *cursor < bytes.len() && bytes[*cursor] == b'{' {
            *cursor += 1;
            let mut paths = Vec::new();
            loop {
                skip_space(cursor);
                if *cursor >= bytes.len() || bytes[*cursor] == b'}' {
                    *cursor += 1;
                    break;
                }
                for tail in parse_tree(bytes, cursor) {
                    let mut path = prefix.clone();
                    path.extend(tail);
                    paths.push(path);
                }
                skip_space(cursor);
                if *cursor < bytes.len() && bytes[*cursor] == b',' {
                    *cursor += 1;
                }
            }
            return paths;
        }
        let start = *cursor;
        while *cursor < bytes.len() && is_ident_byte(bytes[*cursor]) {
            *cursor += 1;
        }
        if *cursor == start {
            // `*`, `self` handled as a segment below, or the end of the path.
            if *cursor < bytes.len() && bytes[*cursor] == b'*' {
                *cursor += 1;
            }
            return vec![prefix];
        }
        prefix.push(String::from_utf8_lossy(&bytes[start..*cursor]).into_owned());
        if bytes[*cursor..].starts_with(b"::") {
            *cursor += 2;
        } else {
            return vec![prefix];
        }
    }
}

/// The deepest module named by `path` (absolute segments), if any beyond the root.
fn resolve(modules: &BTreeMap<Vec<String>, String>, path: &[String]) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|candidate| modules.contains_key(candidate))
}

struct Graph {
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    through_root: Vec<String>,
}

fn build_graph(modules: &BTreeMap<Vec<String>, String>) -> Graph {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut through_root = Vec::new();
    for (module, text) in modules {
        let targets = edges.entry(module.clone()).or_default();
        let mut absolute: Vec<Vec<String>> = Vec::new();
        for path in paths_after(text, "crate") {
            absolute.push(path);
        }
        for path in paths_after(text, "self") {
            absolute.push(module.iter().cloned().chain(path).collect());
        }
        // Inside a file's inline `mod tests { … }`, `super` is the file's own module.
        let (body, tests) = match text.find("mod tests {") {
            Some(at) => text.split_at(at),
            None => (text.as_str(), ""),
        };
        let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
        for path in paths_after(body, "super") {
            absolute.push(parent.iter().cloned().chain(path).collect());
        }
        for path in paths_after(tests, "super") {
            absolute.push(module.iter().cloned().chain(path).collect());
        }
        // Children used by their bare name from their parent.
        for child in modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m[..module.len()] == module[..])
        {
            let name = child.last().unwrap();
            for path in paths_after(text, name) {
                absolute.push(child.iter().cloned().chain(path).collect());
            }
        }
        for path in absolute {
            match resolve(modules, &path) {
                Some(target) if target != *module => {
                    targets.insert(target);
                }
                Some(_) => {}
                None if !module.is_empty() && !path.is_empty() => {
                    through_root.push(format!("{}: crate::{}", module.join("/"), path.join("::")));
                }
                None => {}
            }
        }
    }
    Graph {
        edges,
        through_root,
    }
}

/// Every cycle's nodes, one list per strongly connected component of more than one node.
fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative enough for a few dozen nodes.
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        next: usize,
        components: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a Vec<String>) {
        state.index.insert(node, state.next);
        state.low.insert(node, state.next);
        state.next += 1;
        state.stack.push(node);
        state.on_stack.insert(node);
        for target in state.edges.get(node).into_iter().flatten() {
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[target].min(state.low[node]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.index[target].min(state.low[node]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            loop {
                let member = state.stack.pop().unwrap();
                state.on_stack.remove(member);
                component.push(display(member));
                if member == node {
                    break;
                }
            }
            if component.len() > 1 || state.edges[node].contains(node) {
                component.sort();
                state.components.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.components
}

fn display(module: &[String]) -> String {
    if module.is_empty() {
        "lib".to_string()
    } else {
        module.join("/")
    }
}

fn source_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn vfs_modules_import_downward_only() {
    let modules = read_modules(&source_dir());
    assert!(
        modules.len() > 10,
        "found the sources: {:?}",
        modules.keys()
    );
    let graph = build_graph(&modules);
    assert!(
        graph.through_root.is_empty(),
        "paths through the crate root hide which module is used; name the module:\n{}",
        graph.through_root.join("\n")
    );
    let found = cycles(&graph.edges);
    let described: Vec<String> = found
        .iter()
        .map(|component| {
            let members: BTreeSet<&String> = component.iter().collect();
            let inner: Vec<String> = graph
                .edges
                .iter()
                .filter(|(from, _)| members.contains(&display(from)))
                .flat_map(|(from, targets)| {
                    targets
                        .iter()
                        .filter(|t| members.contains(&display(t)))
                        .map(move |t| format!("  {} → {}", display(from), display(t)))
                })
                .collect();
            format!(
                "cycle among {}:\n{}",
                component.join(", "),
                inner.join("\n")
            )
        })
        .collect();
    assert!(found.is_empty(), "{}", described.join("\n"));
}

/// The checker itself: a cycle through a sibling, one through a facade, a child used by
/// its bare name, brace groups, and a path through the crate root are each seen.
#[test]
fn the_checker_sees_each_kind_of_edge() {
    let module = |path: &str, text: &str| {
        let segments: Vec<String> = if path.is_empty() {
            Vec::new()
        } else {
            path.split('/').map(str::to_string).collect()
        };
        (segments, strip_comments_and_strings(text))
    };
    let graph_of = |files: &[(&str, &str)]| {
        let modules: BTreeMap<Vec<String>, String> = files
            .iter()
            .map(|(path, text)| module(path, text))
            .collect();
        build_graph(&modules)
    };
    // a → b → a through a brace group.
    let graph = graph_of(&[
        ("", "mod a; mod b;"),
        ("a", "use crate::b::{x, y::z};"),
        ("b", "fn f() { crate::a::g() }"),
    ]);
    assert_eq!(
        cycles(&graph.edges),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
    // A child naming its facade parent, which uses the child by its bare name.
    let graph = graph_of(&[
        ("", "mod io;"),
        ("io", "mod uring; pub use uring::Ring;"),
        ("io/uring", "use super::Op;"),
    ]);
    assert_eq!(cycles(&graph.edges).len(), 1);
    // The same child naming its sibling instead: no cycle.
    let graph = graph_of(&[
        ("", "mod io;"),
        (
            "io",
            "mod op; mod uring; pub use uring::Ring; pub use op::Op;",
        ),
        ("io/op", "pub struct Op;"),
        (
            "io/uring",
            "use super::op::Op; // crate::io::Op in a comment\nconst S: &str = \"crate::io::X\";",
        ),
    ]);
    assert!(cycles(&graph.edges).is_empty(), "{:?}", graph.edges);
    assert!(graph.through_root.is_empty());
    // A path through the crate root.
    let graph = graph_of(&[("", "pub use a::Options;"), ("a", "use crate::Options;")]);
    assert_eq!(graph.through_root, vec!["a: crate::Options".to_string()]);
}
