//! The CLI's modules import one way: no two of them reach each other, directly or
//! around a circle (shared helpers live in modules of their own, such as
//! `store_access` and `shown`, not in a command that others import). The graph is read
//! from the source: every `crate::m`, `crate::cmd::m` and (inside `cmd/`) `super::m`
//! path, at the granularity of files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// File module → the file modules it names. Top-level modules are `m`, commands `cmd::m`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    for dir in [src.to_path_buf(), src.join("cmd")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let name_of = |p: &Path| {
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.parent().unwrap().ends_with("cmd") {
            format!("cmd::{stem}")
        } else {
            stem
        }
    };
    let known: BTreeSet<String> = files.iter().map(|p| name_of(p)).collect();
    let mut g = BTreeMap::new();
    for file in &files {
        let me = name_of(file);
        let text = std::fs::read_to_string(file).unwrap();
        let mut edges = BTreeSet::new();
        let in_cmd = me.starts_with("cmd::");
        for (prefix, within) in [
            ("crate::cmd::", "cmd::"),
            ("crate::", ""),
            ("super::", "cmd::"),
        ] {
            if prefix == "super::" && !in_cmd {
                continue;
            }
            for (at, _) in text.match_indices(prefix) {
                // `crate::cmd::x` is also found as `crate::` + `cmd`: skipped below.
                let rest = &text[at + prefix.len()..];
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let target = format!("{within}{word}");
                if target != me && known.contains(&target) {
                    edges.insert(target);
                }
            }
        }
        g.insert(me, edges);
    }
    // The root and the `cmd` module list name every module: not imports.
    g.remove("main");
    g.remove("cmd::mod");
    for edges in g.values_mut() {
        edges.remove("main");
        edges.remove("cmd::mod");
    }
    g
}

/// A circle in the graph, if there is one.
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_owned());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_owned());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut Vec::new(), &mut done))
}

#[test]
fn the_cli_modules_import_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(g.contains_key("cmd::run") && g.contains_key("store_access"));
    if let Some(c) = circle(&g) {
        panic!(
            "an import circle among the CLI's modules: {}",
            c.join(" → ")
        );
    }
}

#[test]
fn a_circle_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("cmd")).unwrap();
    std::fs::write(src.join("main.rs"), "mod a; mod cmd;").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::cmd::b::f;").unwrap();
    std::fs::write(src.join("cmd/mod.rs"), "pub mod b;").unwrap();
    std::fs::write(src.join("cmd/b.rs"), "use super::c::g;").unwrap();
    std::fs::write(src.join("cmd/c.rs"), "fn g() { crate::a::h() }").unwrap();
    let c = circle(&graph(src)).expect("a → cmd::b → cmd::c → a");
    assert_eq!(c.len(), 4, "{c:?}");
}
