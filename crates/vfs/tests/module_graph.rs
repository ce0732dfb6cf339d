//! Every crate of the workspace imports downward only, in the layers docs/ARCHITECTURE.md
//! declares: this test reads each crate's sources and the layer tables of ARCHITECTURE.md's
//! "Module map", and fails on any import cycle, on any import that runs against the
//! declared order, on a module the table does not place, and on a table entry that names
//! no module.
//!
//! A node is one source file (`io/mod.rs` is the module `io`). An edge `a → b` is a path
//! in `a` that names module `b`: `crate::b::…`, `super::b::…` (`super::super::…` climbs
//! further), `self::b::…`, or a child module used by its bare name (`uring::…` inside
//! `io/mod.rs`). A path resolves to the deepest module it names
//! (`crate::io::uring::probe_report` → `io/uring`), so a facade `mod.rs` that re-exports
//! its children sits above them; children must then name their siblings
//! (`super::op::Op`), never the facade (`super::Op`). Paths through the crate root
//! (`crate::Options`) are refused outright: the root re-exports everything, so such a
//! path hides the real dependency. Test code counts like any other code.
//!
//! Declaring a child (`mod uring;`) is not an edge. Comments and string literals are
//! ignored. Inside an inline module (`mod tests { … }`), `super` is the file's own
//! module.
//!
//! The layer tables: in the "Module map" section, each table whose header starts
//! `| layer | modules |` belongs to the crate whose `crates/NAME/src` the text last named
//! before it. Its rows are the layers, first to last; a module may import from its own
//! layer and from the layers listed before it, never from a later one. In the modules
//! column, every `backticked` word places modules: `name` (or `dir/name`) one module,
//! `dir/` that directory's module and everything below it (also in the layer column),
//! `mod.rs` the directory named last in the row, and `lib.rs`/`main.rs` the crate root; a
//! name not found from the root is looked up in that directory. A module is in the layer of the
//! longest entry that covers it. In a layer whose name says "independent", no entry
//! imports another entry of that layer (each benchmark of the CLI is a leaf).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "common/source.rs"]
mod source;

use source::{is_ident_byte, read_modules, strip_comments_and_strings, workspace_root, Module};

/// How many inline modules (`mod name { … }`) enclose each byte of `text`.
fn inline_module_depths(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut depths = Vec::with_capacity(bytes.len());
    // One entry per open brace: whether it opened an inline module.
    let mut open: Vec<bool> = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'{' => {
                // `mod name {`: an identifier before the brace, the keyword before it.
                let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
                let before = text[..i].trim_end();
                let rest = before.trim_end_matches(ident);
                let keyword = rest.trim_end();
                let is_module = rest.len() < before.len()
                    && keyword
                        .strip_suffix("mod")
                        .is_some_and(|front| !front.ends_with(ident));
                open.push(is_module);
            }
            b'}' => {
                open.pop();
            }
            _ => {}
        }
        depths.push(open.iter().filter(|&&m| m).count());
    }
    depths
}

/// The path trees starting at every occurrence of `prefix::` that begins a path (not
/// preceded by an identifier character or `::`): each with its position and as a list of
/// full segment paths, brace groups expanded (`a::{b, c::d}` → `a::b`, `a::c::d`).
fn paths_after(text: &str, prefix: &str) -> Vec<(usize, Vec<String>)> {
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
            found.push((start, tail));
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
            // `*`, or the end of the path.
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
fn resolve(modules: &BTreeMap<Module, String>, path: &[String]) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|candidate| modules.contains_key(candidate))
}

struct Graph {
    edges: BTreeMap<Module, BTreeSet<Module>>,
    through_root: Vec<String>,
}

fn build_graph(modules: &BTreeMap<Module, String>) -> Graph {
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut through_root = Vec::new();
    for (module, text) in modules {
        let targets = edges.entry(module.clone()).or_default();
        let mut absolute: Vec<Module> = Vec::new();
        for (_, path) in paths_after(text, "crate") {
            absolute.push(path);
        }
        for (_, path) in paths_after(text, "self") {
            absolute.push(module.iter().cloned().chain(path).collect());
        }
        // `super` climbs one module per `super`, but the first climbs out of the inline
        // modules around it (which are part of this file's module) first.
        let depths = inline_module_depths(text);
        for (at, path) in paths_after(text, "super") {
            let supers = 1 + path.iter().take_while(|s| *s == "super").count();
            let rest = &path[supers - 1..];
            let climbs = supers.saturating_sub(depths[at]);
            let base = &module[..module.len().saturating_sub(climbs)];
            absolute.push(base.iter().cloned().chain(rest.iter().cloned()).collect());
        }
        // Children used by their bare name from their parent.
        for child in modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m[..module.len()] == module[..])
        {
            let name = child.last().unwrap();
            for (_, path) in paths_after(text, name) {
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
                    through_root.push(format!("{}: crate::{}", display(module), path.join("::")));
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
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm; recursion is fine for a few hundred nodes.
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        next: usize,
        components: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a Module) {
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
        "(crate root)".to_string()
    } else {
        module.join("/")
    }
}

/// The cycles of `graph`, each with the edges that close it, in words.
fn describe_cycles(graph: &Graph) -> Vec<String> {
    cycles(&graph.edges)
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
        .collect()
}

/// One row of a layer table: its name and its `backticked` entries.
#[derive(Clone, Debug)]
struct Layer {
    name: String,
    entries: Vec<String>,
}

/// The layer tables of ARCHITECTURE.md's "Module map", by crate directory (`crates/vfs`).
fn layer_tables(architecture: &str) -> BTreeMap<String, Vec<Layer>> {
    let section = architecture
        .split("\n## ")
        .find(|s| s.starts_with("Module map"))
        .expect("ARCHITECTURE.md has a \"## Module map\" section");
    let mut tables: BTreeMap<String, Vec<Layer>> = BTreeMap::new();
    let mut crate_dir: Option<String> = None;
    let mut current: Option<Vec<Layer>> = None;
    for line in section.lines() {
        if !line.starts_with('|') {
            if let Some(layers) = current.take() {
                let name = crate_dir
                    .clone()
                    .expect("a table after a `crates/NAME/src`");
                assert!(
                    tables.insert(name.clone(), layers).is_none(),
                    "two layer tables for {name}"
                );
            }
            let mut rest = line;
            while let Some(at) = rest.find("`crates/") {
                let named = &rest[at + 1..];
                let end = named.find('`').unwrap_or(named.len());
                let path = &named[..end];
                if let Some(dir) = path.strip_suffix("/src") {
                    crate_dir = Some(dir.to_string());
                }
                rest = &named[end..];
            }
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.get(1) == Some(&"layer") && cells.get(2) == Some(&"modules") {
            current = Some(Vec::new());
            continue;
        }
        let Some(layers) = current.as_mut() else {
            continue;
        };
        if cells.get(1).is_some_and(|c| c.starts_with("---")) {
            continue;
        }
        // A directory named in the layer column (`io/`) is the row's first entry.
        let directory = cells[1]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|word| word.ends_with('/'));
        let entries = directory
            .chain(cells[2].split('`').skip(1).step_by(2))
            .map(str::to_string)
            .collect();
        layers.push(Layer {
            name: cells[1].to_string(),
            entries,
        });
    }
    if let Some(layers) = current.take() {
        tables.insert(
            crate_dir.expect("a table after a `crates/NAME/src`"),
            layers,
        );
    }
    tables
}

/// What placed a module: the layer's index and the entry within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    layer: usize,
    entry: usize,
}

/// Where each module of `modules` sits in `layers`, or what is wrong with the table.
fn place_modules(
    modules: &BTreeMap<Module, String>,
    layers: &[Layer],
) -> Result<BTreeMap<Module, Place>, Vec<String>> {
    let mut problems = Vec::new();
    // Entry → (module, covers what lies below it).
    let mut claims: Vec<(Module, bool, Place)> = Vec::new();
    for (layer_index, layer) in layers.iter().enumerate() {
        let mut directory: Option<Module> = None;
        for (entry_index, entry) in layer.entries.iter().enumerate() {
            let place = Place {
                layer: layer_index,
                entry: entry_index,
            };
            let (module, below) = if entry == "lib.rs" || entry == "main.rs" {
                (Vec::new(), false)
            } else if entry == "mod.rs" {
                match &directory {
                    Some(dir) => (dir.clone(), false),
                    None => {
                        problems.push(format!(
                            "layer {:?}: `mod.rs` before any `dir/` entry",
                            layer.name
                        ));
                        continue;
                    }
                }
            } else {
                let below = entry.ends_with('/');
                let path: Module = entry
                    .trim_end_matches('/')
                    .split('/')
                    .map(str::to_string)
                    .collect();
                let in_directory = || {
                    directory
                        .iter()
                        .map(|dir| dir.iter().cloned().chain(path.iter().cloned()).collect())
                        .find(|m: &Module| modules.contains_key(m))
                };
                let module = if modules.contains_key(&path) {
                    path.clone()
                } else if let Some(module) = in_directory() {
                    module
                } else {
                    problems.push(format!(
                        "layer {:?} names `{entry}`, which is no module of this crate",
                        layer.name
                    ));
                    continue;
                };
                if below {
                    directory = Some(module.clone());
                }
                (module, below)
            };
            if let Some((_, _, other)) = claims.iter().find(|(m, b, _)| *m == module && *b == below)
            {
                problems.push(format!(
                    "`{entry}` is placed twice: in layer {:?} and in layer {:?}",
                    layers[other.layer].name, layer.name
                ));
            }
            claims.push((module, below, place));
        }
    }
    let mut placed = BTreeMap::new();
    for module in modules.keys() {
        let best = claims
            .iter()
            .filter(|(m, below, _)| {
                m == module || (*below && module.len() > m.len() && module[..m.len()] == m[..])
            })
            .max_by_key(|(m, below, _)| (m.len(), !below));
        match best {
            Some((_, _, place)) => {
                placed.insert(module.clone(), *place);
            }
            None => problems.push(format!(
                "module {} is in no layer; add it to the table",
                display(module)
            )),
        }
    }
    if problems.is_empty() {
        Ok(placed)
    } else {
        Err(problems)
    }
}

/// The imports of `graph` that break `layers`: into a later layer, or between two
/// entries of an independent layer.
fn layer_violations(
    graph: &Graph,
    placed: &BTreeMap<Module, Place>,
    layers: &[Layer],
) -> Vec<String> {
    let mut found = Vec::new();
    for (from, targets) in &graph.edges {
        let here = placed[from];
        for target in targets {
            let there = placed[target];
            let layer = &layers[here.layer];
            if there.layer > here.layer {
                found.push(format!(
                    "{} (layer {:?}) imports {} of the later layer {:?}",
                    display(from),
                    layer.name,
                    display(target),
                    layers[there.layer].name
                ));
            } else if there.layer == here.layer
                && there.entry != here.entry
                && layer.name.contains("independent")
            {
                found.push(format!(
                    "{} imports {}: `{}` and `{}` are independent entries of layer {:?}",
                    display(from),
                    display(target),
                    layer.entries[here.entry],
                    layer.entries[there.entry],
                    layer.name
                ));
            }
        }
    }
    found
}

/// Everything wrong with one crate's sources against its layer table.
fn check_crate(modules: &BTreeMap<Module, String>, layers: &[Layer]) -> Vec<String> {
    let graph = build_graph(modules);
    let mut problems: Vec<String> = graph
        .through_root
        .iter()
        .map(|path| {
            format!(
                "{path}: a path through the crate root hides which module is used; name the module"
            )
        })
        .collect();
    problems.extend(describe_cycles(&graph));
    match place_modules(modules, layers) {
        Ok(placed) => problems.extend(layer_violations(&graph, &placed, layers)),
        Err(table_problems) => problems.extend(table_problems),
    }
    problems
}

/// The workspace's member directories (`crates/vfs`, …), from its Cargo.toml.
fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let list = manifest
        .split("members")
        .nth(1)
        .and_then(|rest| rest.split('[').nth(1))
        .and_then(|rest| rest.split(']').next())
        .expect("the workspace's Cargo.toml lists its members");
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_crate_imports_downward_in_its_declared_layers() {
    let root = workspace_root();
    let architecture = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let tables = layer_tables(&architecture);
    let members = members(&root);
    assert!(members.len() >= 4, "found the workspace: {members:?}");
    let mut report = Vec::new();
    for member in &members {
        let modules = read_modules(&root.join(member).join("src"));
        assert!(!modules.is_empty(), "{member}/src has sources");
        let Some(layers) = tables.get(member) else {
            report.push(format!(
                "{member}: docs/ARCHITECTURE.md's \"Module map\" has no layer table for \
                 `{member}/src`"
            ));
            continue;
        };
        for problem in check_crate(&modules, layers) {
            report.push(format!("{member}: {problem}"));
        }
    }
    for table in tables.keys() {
        if !members.contains(table) {
            report.push(format!(
                "docs/ARCHITECTURE.md has a layer table for {table}, which is no workspace member"
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

fn modules_of(files: &[(&str, &str)]) -> BTreeMap<Module, String> {
    files
        .iter()
        .map(|(path, text)| {
            let segments: Module = if path.is_empty() {
                Vec::new()
            } else {
                path.split('/').map(str::to_string).collect()
            };
            (segments, strip_comments_and_strings(text))
        })
        .collect()
}

/// The checker itself: a cycle through a sibling, one through a facade, a child used by
/// its bare name, brace groups, `super::super`, `super` inside an inline module, and a
/// path through the crate root are each seen.
#[test]
fn the_checker_sees_each_kind_of_edge() {
    let graph_of = |files: &[(&str, &str)]| build_graph(&modules_of(files));
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
    // `super::super` climbs two modules; inside `mod tests { … }` the first `super` is
    // the file's own module.
    let graph = graph_of(&[
        ("", "mod bench;"),
        ("bench", "mod speed; mod common;"),
        ("bench/common", "pub fn parse() {}"),
        ("bench/speed", "mod isolate;"),
        (
            "bench/speed/isolate",
            "use super::super::common::parse;\nmod tests { use super::*; use super::super::Args; }",
        ),
    ]);
    let isolate: Module = vec!["bench".into(), "speed".into(), "isolate".into()];
    let expected: BTreeSet<Module> = [
        vec!["bench".to_string(), "common".to_string()],
        vec!["bench".to_string(), "speed".to_string()],
    ]
    .into();
    assert_eq!(graph.edges[&isolate], expected);
    // A path through the crate root.
    let graph = graph_of(&[("", "pub use a::Options;"), ("a", "use crate::Options;")]);
    assert_eq!(graph.through_root, vec!["a: crate::Options".to_string()]);
}

/// The layer check itself (its positive controls): a synthetic crate with an import into a
/// later layer, one between two independent entries, one with a cycle, and one with a
/// module the table leaves out are each rejected, and a well-layered one passes.
#[test]
fn the_checker_rejects_cycles_upward_imports_and_unplaced_modules() {
    let architecture = "\
# Architecture

## Module map

`crates/demo/src` is layered:

| layer | modules | what they hold |
|---|---|---|
| leaves | `report/`, `rng` | shared code |
| benchmarks, each independent of the others | `bench/speed/`, `bench/cold/` | one each |
| commands | `bench` (dispatch), `main.rs` | the command line |

## Next section

`crates/other/src` is not in the map.
";
    let tables = layer_tables(architecture);
    assert_eq!(tables.keys().collect::<Vec<_>>(), ["crates/demo"]);
    let layers = &tables["crates/demo"];
    assert_eq!(layers.len(), 3);
    assert_eq!(layers[2].entries, ["bench", "main.rs"]);
    let good: Vec<(&str, &str)> = vec![
        (
            "",
            "mod bench; mod report; mod rng; fn main() { bench::run() }",
        ),
        (
            "bench",
            "mod speed; mod cold; fn run() { speed::run(); cold::run() }",
        ),
        (
            "bench/speed",
            "use crate::report::table::Table; use crate::rng::next;",
        ),
        (
            "bench/speed/output",
            "use super::super::super::report::chart;",
        ),
        (
            "bench/cold",
            "use crate::report::table; mod tests { use super::*; }",
        ),
        ("report", "pub mod table; pub mod chart;"),
        ("report/table", "use super::chart::Chart;"),
        ("report/chart", "pub struct Chart;"),
        ("rng", "pub fn next() {}"),
    ];
    assert_eq!(
        check_crate(&modules_of(&good), layers),
        Vec::<String>::new()
    );
    let with = |path: &str, text: &str| {
        let mut files = good.clone();
        match files.iter_mut().find(|(p, _)| *p == path) {
            Some(file) => file.1 = text,
            None => files.push((path, text)),
        }
        check_crate(&modules_of(&files), layers)
    };
    for (path, text, wanted) in [
        // Upward: a leaf imports a benchmark.
        (
            "rng",
            "use crate::bench::cold::Case;",
            "rng (layer \"leaves\") imports bench/cold of the later layer",
        ),
        // Sideways between benchmarks.
        (
            "bench/cold",
            "use crate::bench::speed::output::Table;",
            "`bench/cold/` and `bench/speed/` are independent entries",
        ),
        // A cycle inside one layer.
        (
            "report/chart",
            "use super::table::Table;",
            "cycle among report/chart, report/table",
        ),
    ] {
        let problems = with(path, text);
        assert_eq!(problems.len(), 1, "{path}: {problems:#?}");
        assert!(problems[0].contains(wanted), "{path}: {problems:#?}");
    }
    // A module the table does not place, and an entry that names no module.
    let problems = with("trace", "pub fn mark() {}");
    assert_eq!(
        problems,
        ["module trace is in no layer; add it to the table"]
    );
    let mut renamed = good.clone();
    renamed.retain(|(p, _)| *p != "rng");
    renamed[0].1 = "mod bench; mod report; fn main() { bench::run() }";
    renamed[2].1 = "use crate::report::table::Table;";
    let problems = check_crate(&modules_of(&renamed), layers);
    assert_eq!(
        problems,
        ["layer \"leaves\" names `rng`, which is no module of this crate"]
    );
}
