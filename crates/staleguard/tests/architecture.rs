//! The core's architecture (ARCHITECTURE.md, "The core, floor by floor" and "Invariants"),
//! checked as tests in the manner of rust-analyzer's tidy tests: the import graph between the
//! files of `src/` has no cycle, every import keeps to its floor, and no host crate reaches
//! past the facade into `staleguard::internal`.
//!
//! Each file is lexed by a real Rust lexer (`proc_macro2`), so comments are gone and strings
//! of every kind are single literals: nothing in them is read as code. From the tokens the
//! analysis reads `mod` declarations, `use` trees and the paths written in code, resolves
//! each path to the file that defines it (through `pub use` re-exports), and reports the
//! edges between files, the cycles among them and the imports that break a floor.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// A module path from the crate root: `src/a/b.rs` and `src/a/b/mod.rs` are `["a", "b"]`,
/// `lib.rs` is `[]`.
type ModPath = Vec<String>;

/// Files as `(path relative to src/, text)`.
type Sources = Vec<(PathBuf, String)>;

// ARCHITECTURE.md's invariants that an import shows. A file of the lowest floor imports
// nothing of the crate; the reading imports only its grammar; only the pipeline (and the
// facade and `internal` above it) names the wire adapter.
const LEAVES: &[&str] = &[
    "call_args",
    "description",
    "memo",
    "json",
    "texts",
    "transcript",
    "error",
    "body",
    "tools",
    "urlnorm",
];
const READING_MAY: &[&str] = &[
    "observation",
    "observation/model",
    "failure",
    "fingerprint",
    "memo",
    "result_lines",
    "refs",
    "texts",
];
const ABOVE_WIRE: &[&str] = &["pipeline", "internal", "lib"];

/// What the analysis found.
#[derive(Debug)]
struct Report {
    /// Every file counted (`lib` and each file a non-test `mod x;` declares), by name.
    files: Vec<String>,
    /// `(from, to)` between distinct files, each with the first path that made it, as
    /// `"file: path"`.
    edges: BTreeMap<(String, String), String>,
    /// Each strongly connected component of more than one file, its names sorted.
    cycles: Vec<Vec<String>>,
    /// Every import that breaks a floor, in words.
    broken: Vec<String>,
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn the_core_has_no_import_cycle_and_keeps_its_floors() {
    let report = analyse(&real_sources()).unwrap_or_else(|e| panic!("{e}"));
    println!("files {}, edges {}", report.files.len(), report.edges.len());
    // What the old script's `--edges` printed (seen with `-- --nocapture`).
    if std::env::var_os("STALEGUARD_PRINT_EDGES").is_some() {
        for ((from, to), path) in &report.edges {
            println!("{from} -> {to}  ({path})");
        }
    }
    // A reader that lost its way would find no cycle in an empty graph: the graph must
    // look like the crate's (69 files and 301 edges when this was written).
    assert!(
        report.files.len() > 60 && report.edges.len() > 250,
        "the import graph is implausibly small ({} files, {} edges): the reader is broken",
        report.files.len(),
        report.edges.len()
    );
    assert!(
        report.cycles.is_empty() && report.broken.is_empty(),
        "{}",
        describe(&report)
    );
}

#[test]
fn a_planted_cycle_is_found() {
    let files = sources(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n#[cfg(test)]\nmod d;\n"),
        // The string's closing `r"` once read as a raw string that swallowed the `use`.
        (
            "a.rs",
            r####"pub fn f() -> &'static str { "other" }
use crate::b::Thing;
pub const RAW: &str = r#"use crate::c::Gone;"#;
// use crate::c::Gone;
/* crate::c::Gone */
#[cfg(test)]
mod tests {
    use crate::c::Gone;
}
"####,
        ),
        (
            "b.rs",
            "pub struct Thing;\npub fn g() {\n    crate::a::f();\n}\n",
        ),
        ("c.rs", "pub struct Gone;\n"),
        // Declared only under #[cfg(test)]: not a file of the crate.
        ("d.rs", "use crate::a::f;\n"),
    ]);
    let report = analyse(&files).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.cycles, vec![vec!["a".to_string(), "b".to_string()]]);
    assert_eq!(report.files, ["a", "b", "c", "lib"]);
    assert_eq!(edge_names(&report), [("a", "b"), ("b", "a")]);
    assert_eq!(
        report.edges[&("a".into(), "b".into())],
        "a.rs: crate::b::Thing"
    );

    // The way back only in a test module: no cycle.
    let files = sources(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::Thing;\npub fn f() {}\n"),
        (
            "b.rs",
            "pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a::f;\n}\n",
        ),
    ]);
    let report = analyse(&files).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.cycles.is_empty(), "{}", describe(&report));
    assert_eq!(edge_names(&report), [("a", "b")]);
}

#[test]
fn a_file_that_does_not_lex_is_named() {
    let files = sources(&[("lib.rs", "mod a;\n"), ("a.rs", "fn f() { \"open\n")]);
    let error = analyse(&files).expect_err("an unclosed string does not lex");
    assert!(error.contains("a.rs"), "{error}");
}

#[test]
fn the_projection_lean_cycle_would_be_seen() {
    // `Lean` is lean's own (lean/render.rs, named through lean's root), and stays there
    // whatever else moves.
    let planted = "\npub(crate) type PlantedLean = crate::lean::Lean;\n";
    let files = with_appended(real_sources(), "projection.rs", planted);
    let report = analyse(&files).unwrap_or_else(|e| panic!("{e}"));
    let seen = report
        .cycles
        .iter()
        .any(|c| c.iter().any(|f| f == "projection") && c.iter().any(|f| f.starts_with("lean")));
    assert!(
        seen,
        "no cycle through projection and lean:\n{}",
        describe(&report)
    );
}

#[test]
fn a_broken_floor_is_reported() {
    let plants = [
        (
            "memo.rs",
            "\nuse crate::projection::Plan;\n",
            "memo is on the lowest floor",
        ),
        (
            "reading.rs",
            "\nuse crate::session::Step;\n",
            "the reading knows only",
        ),
        (
            "waiting.rs",
            "\nuse crate::adapter::Breakpoint;\n",
            "names the wire adapter",
        ),
    ];
    for (file, planted, says) in plants {
        let files = with_appended(real_sources(), file, planted);
        let report = analyse(&files).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            report.broken.iter().any(|b| b.contains(says)),
            "{planted:?} in {file} broke no floor:\n{}",
            describe(&report)
        );
    }
}

/// The hosts (the CLI, the proxy, the MCP guard, the bindings) call the facade only:
/// `internal` is for the tests and the fuzz targets. Test modules inside a host's `src/`
/// count too.
#[test]
fn no_host_names_the_internal_module() {
    let hosts = host_sources();
    for host in [
        "staleguard-cli",
        "staleguard-mcp",
        "staleguard-proxy",
        "python",
        "node",
    ] {
        assert!(
            hosts.iter().any(|(path, _)| path.iter().any(|p| p == host)),
            "no source of the host {host} was read: {:?}",
            hosts.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
    }
    let doors = back_doors(&hosts).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        doors.is_empty(),
        "hosts that name staleguard::internal (use the facade, or give it what they need):\n{}",
        doors.join("\n")
    );
}

#[test]
fn a_planted_back_door_is_found() {
    let named = [
        "use staleguard::internal::refs::targets;\n",
        "fn f() { let _ = staleguard::internal::refs::targets(\"{}\"); }\n",
        "fn f() { let _ = ::staleguard::internal::refs::targets(\"\"); }\n",
        "use staleguard::{Config, internal::refs};\n",
        "use ::staleguard::{internal};\n",
        "pub use staleguard::internal as inner;\n",
        "use staleguard as core;\nfn f() { core::internal::refs::targets(\"\"); }\n",
        "extern crate staleguard as sg;\nuse sg::internal::refs;\n",
        "use staleguard::*;\nfn f() { internal::refs::targets(\"\"); }\n",
        "use staleguard as sg;\nuse sg::*;\nfn f() { internal::refs::targets(\"\"); }\n",
        "#[cfg(test)]\nmod tests {\n    use staleguard::internal::refs::has_ref_token;\n}\n",
    ];
    let doors_in = |text: &str| {
        let files = [(PathBuf::from("host/src/lib.rs"), text.to_string())];
        back_doors(&files).unwrap_or_else(|e| panic!("{e}"))
    };
    for planted in named {
        let doors = doors_in(planted);
        assert_eq!(doors.len(), 1, "{planted:?}: {doors:?}");
        assert!(doors[0].starts_with("host/src/lib.rs: "), "{doors:?}");
    }
    let innocent = [
        "// use staleguard::internal::refs;\n",
        "/* staleguard::internal */\n",
        "const S: &str = \"staleguard::internal::refs\";\n",
        "mod internal;\nuse crate::internal::x;\nfn f() { self::internal::y(); }\n",
        "use staleguard::{Config, Tracker};\nfn internal() {}\n",
        "fn f() { texts::INTERNAL_ERROR; relay.internal_error(line); }\n",
    ];
    for text in innocent {
        let doors = doors_in(text);
        assert!(doors.is_empty(), "{text:?}: {doors:?}");
    }
    // In a real host: the MCP guard, as it was before it had a public tracker.
    let planted = "\nuse staleguard::internal::progress::Tracker;\n";
    let mut hosts = host_sources();
    let (_, lib) = hosts
        .iter_mut()
        .find(|(path, _)| path.ends_with("crates/staleguard-mcp/src/lib.rs"))
        .expect("the MCP guard's lib.rs");
    lib.push_str(planted);
    let doors = back_doors(&hosts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        doors,
        ["crates/staleguard-mcp/src/lib.rs: staleguard::internal::progress::Tracker"]
    );
}

// ---------------------------------------------------------------------------------------
// Test helpers.

/// Every `.rs` file under the core's `src/`, by path relative to it, sorted.
fn real_sources() -> Sources {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    collect_rs(&src, &src, &mut out);
    out.sort();
    assert!(!out.is_empty(), "no .rs file under {}", src.display());
    out
}

fn collect_rs(dir: &Path, src: &Path, out: &mut Sources) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect_rs(&path, src, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let relative = path.strip_prefix(src).expect("under src/").to_path_buf();
            out.push((relative, text));
        }
    }
}

fn sources(files: &[(&str, &str)]) -> Sources {
    files
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.to_string()))
        .collect()
}

fn with_appended(mut files: Sources, file: &str, text: &str) -> Sources {
    let (_, found) = files
        .iter_mut()
        .find(|(path, _)| path == Path::new(file))
        .unwrap_or_else(|| panic!("no {file} in the crate"));
    found.push_str(text);
    files
}

fn edge_names(report: &Report) -> Vec<(&str, &str)> {
    report
        .edges
        .keys()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect()
}

/// The report in words: counts, each cycle with the edges inside it, each broken floor.
fn describe(report: &Report) -> String {
    let mut out = format!(
        "files {}, edges {}, cycles {}\n",
        report.files.len(),
        report.edges.len(),
        report.cycles.len()
    );
    for cycle in &report.cycles {
        out += &format!("import cycle between files: {}\n", cycle.join(", "));
        out += &format!(
            "  shortest loop: {}\n",
            shortest_loop(cycle, &report.edges).join(" -> ")
        );
        for ((from, to), path) in &report.edges {
            if cycle.contains(from) && cycle.contains(to) {
                out += &format!("    {from} -> {to}  ({path})\n");
            }
        }
    }
    for broken in &report.broken {
        out += &format!("floor broken: {broken}\n");
    }
    out
}

/// The shortest loop of imports among a cycle's files, as `a -> b -> a`.
fn shortest_loop(cycle: &[String], edges: &BTreeMap<(String, String), String>) -> Vec<String> {
    let mut best: Vec<String> = Vec::new();
    for start in cycle {
        // Breadth first from `start`: the first path back to it is the shortest through it.
        let mut seen = BTreeSet::from([start]);
        let mut queue = VecDeque::from([vec![start]]);
        'search: while let Some(path) = queue.pop_front() {
            let last = path[path.len() - 1];
            let next = edges.keys().filter(|(a, b)| a == last && cycle.contains(b));
            for (_, to) in next {
                let longer = [path.as_slice(), &[to]].concat();
                if to == start {
                    if best.is_empty() || longer.len() < best.len() {
                        best = longer.into_iter().cloned().collect();
                    }
                    break 'search;
                }
                if seen.insert(to) {
                    queue.push_back(longer);
                }
            }
        }
    }
    best
}

// ---------------------------------------------------------------------------------------
// The analysis.

/// The import graph of the files, its cycles and its broken floors; an error names a file
/// that does not lex.
fn analyse(sources: &[(PathBuf, String)]) -> Result<Report, String> {
    let mut read = BTreeMap::new();
    for (path, text) in sources {
        let module = module_of(path)?;
        let tokens = TokenStream::from_str(text)
            .map_err(|e| format!("{} does not lex: {e}", path.display()))?;
        let mut facts = Facts {
            file: path.display().to_string(),
            ..Facts::default()
        };
        walk(&trees(tokens), &module, &mut facts);
        read.insert(module, facts);
    }
    // Modules declared only under #[cfg(test)] are tests: leave their files out.
    let declared: BTreeSet<ModPath> = read.values().flat_map(|f| f.declared.clone()).collect();
    read.retain(|module, _| module.is_empty() || declared.contains(module));

    let graph = Graph::new(&read);
    let edges = graph.edges(&read);
    let cycles = components(&read, &edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    let broken = check_floors(&edges);
    let mut files: Vec<String> = read.keys().map(|m| name(m)).collect();
    files.sort();
    Ok(Report {
        files,
        edges,
        cycles,
        broken,
    })
}

/// `a/b.rs` and `a/b/mod.rs` are `["a", "b"]`; `lib.rs` is the root.
fn module_of(path: &Path) -> Result<ModPath, String> {
    let mut parts = Vec::new();
    for part in path.with_extension("").components() {
        let part = part.as_os_str().to_str();
        parts.push(
            part.ok_or(format!("{} is no UTF-8 path", path.display()))?
                .to_string(),
        );
    }
    if parts.len() == 1 && parts[0] == "lib" || parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Ok(parts)
}

/// A module's name in the report: `a/b`, or `lib` for the root.
fn name(module: &[String]) -> String {
    if module.is_empty() {
        "lib".to_string()
    } else {
        module.join("/")
    }
}

/// Every `.rs` file under the `src/` of each host crate (every crate of `crates/` but the
/// core, and every binding), by path relative to the repository, sorted.
fn host_sources() -> Sources {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for parent in ["crates", "bindings"] {
        let dirs = std::fs::read_dir(repo.join(parent)).expect("the repository's crates");
        for dir in dirs {
            let dir = dir.expect("a directory entry").path();
            let src = dir.join("src");
            if dir.ends_with("crates/staleguard") || !src.is_dir() {
                continue;
            }
            let mut files = Vec::new();
            collect_rs(&src, &repo, &mut files);
            out.extend(files);
        }
    }
    out.sort();
    out
}

/// Every place in `files` that names the core's `internal` module, as `"file: path"`: a path
/// through it in code or in a `use` tree, under the crate's own name or a name a file gives
/// it (`use staleguard as core;`, `extern crate staleguard as sg;`), or `internal` itself
/// after a glob import of the crate. Comments and strings are no code: the files are lexed.
fn back_doors(files: &[(PathBuf, String)]) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for (path, text) in files {
        let tokens = TokenStream::from_str(text)
            .map_err(|e| format!("{} does not lex: {e}", path.display()))?;
        let mut paths = Vec::new();
        every_path(&trees(tokens), &mut paths);
        // The names the file gives the crate, and whether it imports all of its root.
        let mut crate_names = BTreeSet::from(["staleguard".to_string()]);
        for (segs, alias) in &paths {
            if segs.len() == 1 && segs[0] == "staleguard" {
                crate_names.extend(alias.clone());
            }
        }
        let glob = paths
            .iter()
            .any(|(segs, _)| segs.len() == 2 && crate_names.contains(&segs[0]) && segs[1] == "*");
        for (segs, _) in &paths {
            let through_crate =
                segs.len() >= 2 && crate_names.contains(&segs[0]) && segs[1] == "internal";
            let through_glob = glob && segs.len() >= 2 && segs[0] == "internal";
            if through_crate || through_glob {
                found.push(format!("{}: {}", path.display(), segs.join("::")));
            }
        }
    }
    Ok(found)
}

/// Every path of `tokens`, test code included: each path of a `use` tree or an
/// `extern crate` with the name it brings in, and each path written in code (`a::b`, two
/// segments or more) with none.
fn every_path(tokens: &[TokenTree], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut i = 0;
    while i < tokens.len() {
        if is_ident(tokens.get(i), "extern") && is_ident(tokens.get(i + 1), "crate") {
            if let Some(TokenTree::Ident(name)) = tokens.get(i + 2) {
                let alias = match tokens.get(i + 4) {
                    Some(TokenTree::Ident(alias)) if is_ident(tokens.get(i + 3), "as") => alias,
                    _ => name,
                };
                out.push((vec![name.to_string()], Some(alias.to_string())));
                i += 3;
                continue;
            }
        }
        let mut facts = Facts::default();
        if let Some(next) = use_item(tokens, i, &Vec::new(), &mut facts) {
            out.extend(facts.uses.into_iter().map(|u| (u.segs, u.name)));
            i = next;
            continue;
        }
        if let Some(next) = path_in_code(tokens, i, &Vec::new(), &mut facts) {
            out.extend(facts.inline.into_iter().map(|(_, segs)| (segs, None)));
            i = next;
            continue;
        }
        if let TokenTree::Group(group) = &tokens[i] {
            every_path(&trees(group.stream()), out);
        }
        i += 1;
    }
}

// ---------------------------------------------------------------------------------------
// Reading one file's tokens.

/// What one file says, before anything in it is resolved.
#[derive(Default)]
struct Facts {
    /// The file's path under `src/`, for messages.
    file: String,
    /// Modules declared by `mod x;` outside test code.
    declared: Vec<ModPath>,
    /// Every path of every `use` tree.
    uses: Vec<Use>,
    /// Paths written in code (`a::b`, two segments or more), with the module around them.
    inline: Vec<(ModPath, Vec<String>)>,
}

/// One path of a `use` tree, in the module (file or inline) where it is written.
struct Use {
    here: ModPath,
    segs: Vec<String>,
    /// The name it brings in (`as` renames it); none for a glob or `as _`.
    name: Option<String>,
    /// `pub use` (any visibility): a path through `here::name` reaches `segs`.
    public: bool,
}

fn trees(stream: TokenStream) -> Vec<TokenTree> {
    stream.into_iter().collect()
}

/// Reads one level of tokens (a file, or a group's inside) in module `here`.
fn walk(tokens: &[TokenTree], here: &ModPath, facts: &mut Facts) {
    let mut i = 0;
    while i < tokens.len() {
        i = if let Some(after) = cfg_test(tokens, i) {
            skip_item(tokens, after)
        } else if let Some(next) = mod_item(tokens, i, here, facts) {
            next
        } else if let Some(next) = use_item(tokens, i, here, facts) {
            next
        } else if let Some(next) = path_in_code(tokens, i, here, facts) {
            next
        } else {
            if let TokenTree::Group(group) = &tokens[i] {
                walk(&trees(group.stream()), here, facts);
            }
            i + 1
        };
    }
}

fn is_ident(token: Option<&TokenTree>, word: &str) -> bool {
    matches!(token, Some(TokenTree::Ident(id)) if id == word)
}

fn is_punct(token: Option<&TokenTree>, ch: char) -> bool {
    matches!(token, Some(TokenTree::Punct(p)) if p.as_char() == ch)
}

/// Whether a `::` starts at `i` (the lexer gives it as a joint `:` and a `:`).
fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    let joint = matches!(tokens.get(i), Some(TokenTree::Punct(p))
        if p.as_char() == ':' && p.spacing() == Spacing::Joint);
    joint && is_punct(tokens.get(i + 1), ':')
}

/// After a `#[cfg(test)]` at `i`, the index past it.
fn cfg_test(tokens: &[TokenTree], i: usize) -> Option<usize> {
    if !is_punct(tokens.get(i), '#') {
        return None;
    }
    let TokenTree::Group(attr) = tokens.get(i + 1)? else {
        return None;
    };
    let inside = trees(attr.stream());
    let is_test = match inside.as_slice() {
        [TokenTree::Ident(cfg), TokenTree::Group(args)] => {
            cfg == "cfg"
                && args.delimiter() == Delimiter::Parenthesis
                && matches!(trees(args.stream()).as_slice(), [TokenTree::Ident(t)] if t == "test")
        }
        _ => false,
    };
    (attr.delimiter() == Delimiter::Bracket && is_test).then_some(i + 2)
}

/// The index past the item that starts at `i`: past its `;` or its body in braces,
/// whichever comes first (as the script did; other attributes on it are bracket groups).
fn skip_item(tokens: &[TokenTree], i: usize) -> usize {
    let end = tokens[i..].iter().position(|t| match t {
        TokenTree::Punct(p) => p.as_char() == ';',
        TokenTree::Group(g) => g.delimiter() == Delimiter::Brace,
        _ => false,
    });
    end.map_or(tokens.len(), |at| i + at + 1)
}

/// `mod x;` declares a file; `mod x { ... }` is read as module `here::x`.
fn mod_item(tokens: &[TokenTree], i: usize, here: &ModPath, facts: &mut Facts) -> Option<usize> {
    if !is_ident(tokens.get(i), "mod") {
        return None;
    }
    let TokenTree::Ident(child) = tokens.get(i + 1)? else {
        return None;
    };
    let child = [here.clone(), vec![child.to_string()]].concat();
    match tokens.get(i + 2)? {
        TokenTree::Punct(p) if p.as_char() == ';' => facts.declared.push(child),
        TokenTree::Group(body) if body.delimiter() == Delimiter::Brace => {
            walk(&trees(body.stream()), &child, facts)
        }
        _ => return None,
    }
    Some(i + 3)
}

/// A `use` item at `i`: its paths, and the index past its `;`. Not a `use` tree (say the
/// `use<'a>` of a return type's bounds): `None`.
fn use_item(tokens: &[TokenTree], i: usize, here: &ModPath, facts: &mut Facts) -> Option<usize> {
    if !is_ident(tokens.get(i), "use") {
        return None;
    }
    let end = i + tokens[i..].iter().position(|t| is_punct(Some(t), ';'))?;
    let tree = &tokens[i + 1..end];
    if tree.is_empty() || !tree.iter().all(in_use_tree) {
        return None;
    }
    // `pub use` and `pub(crate) use` re-export.
    let before = |back: usize| i.checked_sub(back).and_then(|at| tokens.get(at));
    let restricted =
        matches!(before(1), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis);
    let public = is_ident(before(1), "pub") || restricted && is_ident(before(2), "pub");
    for (segs, name) in expand(tree) {
        facts.uses.push(Use {
            here: here.clone(),
            segs,
            name,
            public,
        });
    }
    Some(end + 1)
}

/// Whether a token can be part of a `use` tree (its commas are all inside braces).
fn in_use_tree(token: &TokenTree) -> bool {
    match token {
        TokenTree::Ident(_) => true,
        TokenTree::Punct(p) => matches!(p.as_char(), ':' | '*'),
        TokenTree::Group(g) => g.delimiter() == Delimiter::Brace,
        TokenTree::Literal(_) => false,
    }
}

/// `a::{b, c::{d, self as e}, f::*}` as the paths `a::b`, `a::c::d`, `a::c` and `a::f::*`,
/// each with the name it brings in.
fn expand(tree: &[TokenTree]) -> Vec<(Vec<String>, Option<String>)> {
    let mut prefix: Vec<String> = Vec::new();
    for (i, token) in tree.iter().enumerate() {
        match token {
            TokenTree::Ident(id) if id == "as" => {
                let alias = match tree.get(i + 1) {
                    Some(TokenTree::Ident(alias)) if alias != "_" => Some(alias.to_string()),
                    _ => None,
                };
                return vec![(prefix, alias)];
            }
            TokenTree::Ident(id) => prefix.push(id.to_string()),
            TokenTree::Punct(p) if p.as_char() == '*' => {
                prefix.push("*".to_string());
                return vec![(prefix, None)];
            }
            TokenTree::Group(group) => return expand_group(&prefix, &trees(group.stream())),
            TokenTree::Punct(_) | TokenTree::Literal(_) => {}
        }
    }
    let name = prefix.last().cloned();
    vec![(prefix, name)]
}

/// The paths of `prefix::{...}`: each item of the braces after the prefix, `self` the prefix.
fn expand_group(prefix: &[String], inside: &[TokenTree]) -> Vec<(Vec<String>, Option<String>)> {
    let mut out = Vec::new();
    // A trailing comma leaves an empty item, which names nothing.
    let items = inside
        .split(|t| is_punct(Some(t), ','))
        .filter(|item| !item.is_empty());
    for item in items {
        for (segs, name) in expand(item) {
            let mut full = prefix.to_vec();
            if segs.first().is_some_and(|s| s == "self") {
                // `a::{self}` names `a` itself, under its own name unless renamed.
                let name = if segs.len() == 1 && name.as_deref() == Some("self") {
                    prefix.last().cloned()
                } else {
                    name
                };
                full.extend(segs.into_iter().skip(1));
                out.push((full, name));
            } else {
                full.extend(segs);
                out.push((full, name));
            }
        }
    }
    out
}

/// A path in code at `i` (`x::y`, or `::x::y` from the root; not the tail of a longer path
/// such as `a::x::y` or `<T>::x::y`): recorded with the index past it. Which paths name the
/// crate is decided once every file is known.
fn path_in_code(
    tokens: &[TokenTree],
    i: usize,
    here: &ModPath,
    facts: &mut Facts,
) -> Option<usize> {
    let TokenTree::Ident(first) = &tokens[i] else {
        return None;
    };
    let tail = i >= 3
        && is_path_sep(tokens, i - 2)
        && (matches!(tokens[i - 3], TokenTree::Ident(_)) || is_punct(tokens.get(i - 3), '>'));
    if tail {
        return None;
    }
    let mut segs = vec![first.to_string()];
    let mut j = i + 1;
    while is_path_sep(tokens, j) {
        let Some(TokenTree::Ident(next)) = tokens.get(j + 2) else {
            break;
        };
        segs.push(next.to_string());
        j += 3;
    }
    if segs.len() < 2 {
        return None;
    }
    facts.inline.push((here.clone(), segs));
    Some(j)
}

// ---------------------------------------------------------------------------------------
// Resolving paths to files.

/// The files, and the names they re-export.
struct Graph<'a> {
    files: BTreeSet<&'a ModPath>,
    /// `module::name` made by a `pub use`, and the path it stands for.
    reexports: BTreeMap<ModPath, ModPath>,
}

impl<'a> Graph<'a> {
    fn new(read: &'a BTreeMap<ModPath, Facts>) -> Self {
        let files = read.keys().collect();
        let mut graph = Graph {
            files,
            reexports: BTreeMap::new(),
        };
        for facts in read.values() {
            for u in facts.uses.iter().filter(|u| u.public) {
                let (Some(full), Some(name)) = (graph.absolute(&u.segs, &u.here), &u.name) else {
                    continue;
                };
                let key = [u.here.clone(), vec![name.clone()]].concat();
                graph.reexports.insert(key, full);
            }
        }
        graph
    }

    /// Every edge between two distinct files other than the root, with the first path that
    /// made it.
    fn edges(&self, read: &BTreeMap<ModPath, Facts>) -> BTreeMap<(String, String), String> {
        let mut edges = BTreeMap::new();
        for (module, facts) in read.iter().filter(|(m, _)| !m.is_empty()) {
            for (full, written) in self.paths_of(module, facts) {
                let to = self.resolve(&full, &mut Vec::new());
                if !to.is_empty() && &to != module {
                    let said = format!("{}: {}", facts.file, written);
                    edges.entry((name(module), name(&to))).or_insert(said);
                }
            }
        }
        edges
    }

    /// A file's paths into the crate, from the root, each with its words as written.
    fn paths_of(&self, module: &ModPath, facts: &Facts) -> Vec<(ModPath, String)> {
        let children: BTreeSet<&str> = self
            .files
            .iter()
            .filter(|f| f.len() == module.len() + 1 && f.starts_with(module))
            .filter_map(|f| f.last().map(String::as_str))
            .collect();
        let in_code = facts.inline.iter().filter(|(_, segs)| {
            let first = segs[0].as_str();
            matches!(first, "crate" | "super" | "self") || children.contains(first)
        });
        let used = facts.uses.iter().map(|u| (&u.here, &u.segs));
        let mut out = Vec::new();
        for (here, segs) in used.chain(in_code.map(|(h, s)| (h, s))) {
            if let Some(full) = self.absolute(segs, here) {
                out.push((full, segs.join("::")));
            }
        }
        out
    }

    /// A path written in module `here`, from the crate root; `None` when it leaves the crate.
    fn absolute(&self, segs: &[String], here: &ModPath) -> Option<ModPath> {
        let first = segs.first()?;
        let under_here = [here.clone(), vec![first.clone()]].concat();
        if self.files.contains(&under_here) {
            return Some([here.as_slice(), segs].concat());
        }
        let mut base = here.clone();
        let mut rest = segs;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &segs[1..];
            }
            "self" | "super" => {
                while let Some(step @ ("self" | "super")) = rest.first().map(String::as_str) {
                    if step == "super" {
                        base.pop();
                    }
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        Some([base.as_slice(), rest].concat())
    }

    /// The file that defines `full`: the longest prefix that is a file, unless the path goes
    /// through a re-export, which is followed (`seen` keeps a loop of them finite).
    fn resolve(&self, full: &[String], seen: &mut Vec<ModPath>) -> ModPath {
        if let Some(target) = self.follow(full.to_vec(), seen) {
            return self.resolve(&target, seen);
        }
        for n in (0..=full.len()).rev() {
            let prefix = full[..n].to_vec();
            if !self.files.contains(&prefix) {
                continue;
            }
            // `file::name` may itself be a re-export of the file's.
            let through = full.get(..=n).map(<[String]>::to_vec);
            return match through.and_then(|key| self.follow(key, seen)) {
                Some(target) => self.resolve(&target, seen),
                None => prefix,
            };
        }
        Vec::new()
    }

    /// Where a re-export `key` leads, once.
    fn follow(&self, key: ModPath, seen: &mut Vec<ModPath>) -> Option<ModPath> {
        let target = self.reexports.get(&key)?;
        if seen.contains(&key) {
            return None;
        }
        seen.push(key);
        Some(target.clone())
    }
}

// ---------------------------------------------------------------------------------------
// Cycles and floors.

/// The strongly connected components of the files (the root aside), by Kosaraju: order the
/// files by when a depth-first search finishes with them, then search the reversed graph
/// from the last finished; each search there reaches exactly one component.
fn components(
    read: &BTreeMap<ModPath, Facts>,
    edges: &BTreeMap<(String, String), String>,
) -> Vec<Vec<String>> {
    let mut forward: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut backward: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let names: Vec<String> = read
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| name(m))
        .collect();
    for (from, to) in edges.keys() {
        forward.entry(from).or_default().push(to);
        backward.entry(to).or_default().push(from);
    }
    let (mut seen, mut order) = (BTreeSet::new(), Vec::new());
    for file in &names {
        finish(&forward, file, &mut seen, &mut order);
    }
    let (mut seen, mut out) = (BTreeSet::new(), Vec::new());
    for file in order.iter().rev() {
        let mut component = Vec::new();
        reach(&backward, file, &mut seen, &mut component);
        if !component.is_empty() {
            component.sort();
            out.push(component.into_iter().map(str::to_string).collect());
        }
    }
    out
}

/// Depth first from `file`: each file is pushed on `order` once all it reaches is.
fn finish<'g>(
    graph: &BTreeMap<&'g str, Vec<&'g str>>,
    file: &'g str,
    seen: &mut BTreeSet<&'g str>,
    order: &mut Vec<&'g str>,
) {
    if !seen.insert(file) {
        return;
    }
    for &next in graph.get(file).into_iter().flatten() {
        finish(graph, next, seen, order);
    }
    order.push(file);
}

/// Every file `file` reaches that no earlier search took.
fn reach<'g>(
    graph: &BTreeMap<&'g str, Vec<&'g str>>,
    file: &'g str,
    seen: &mut BTreeSet<&'g str>,
    out: &mut Vec<&'g str>,
) {
    if !seen.insert(file) {
        return;
    }
    out.push(file);
    for &next in graph.get(file).into_iter().flatten() {
        reach(graph, next, seen, out);
    }
}

/// Every edge that breaks a floor (LEAVES, READING_MAY, ABOVE_WIRE), in words.
fn check_floors(edges: &BTreeMap<(String, String), String>) -> Vec<String> {
    let mut broken = Vec::new();
    for ((src, dst), path) in edges {
        if LEAVES.contains(&src.as_str()) {
            broken.push(format!(
                "{src} is on the lowest floor and imports {dst} ({path})"
            ));
        }
        if src == "reading" && !READING_MAY.contains(&dst.as_str()) {
            broken.push(format!(
                "the reading knows only its grammar, and imports {dst} ({path})"
            ));
        }
        let wire = dst == "adapter" || dst.starts_with("adapter/");
        let above = src.starts_with("adapter") || ABOVE_WIRE.iter().any(|a| src.starts_with(a));
        if wire && !above {
            broken.push(format!(
                "{src} is below the pipeline and names the wire adapter ({dst}, {path})"
            ));
        }
    }
    broken
}
