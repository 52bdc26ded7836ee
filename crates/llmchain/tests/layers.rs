//! The one-way layers of `llmchain` (ARCHITECTURE.md), checked on the parsed code.
//!
//! Every top-level module has a row in [`LAYERS`] naming the modules it may reach; a
//! module without one fails the check, so a new module must be placed in a layer. Every
//! path in every source file is resolved against the module it is written in: `use` trees
//! (grouped or not, globs), paths in types and expressions, and the tokens of macro
//! invocations and attribute arguments (`format!("{}", crate::chain::X)`). A path may start
//! with `crate::`, `$crate::`, the crate's own name (`llmchain::`, or a `NAME::` given by
//! `extern crate self as NAME`, which is itself refused), `super::` any number of times,
//! `self::`, or a name of the module: a child module, an item, an import, or a name a glob
//! brings in (`use crate::*;` then `chain::LLMChain`). A path through an import counts for
//! the module written and for the module the name comes from, so a re-export cannot launder
//! an upward import (`pub use crate::chain::LLMChain` in `conversation`, then
//! `crate::conversation::LLMChain` in a codec); a glob of the crate root reaches every
//! module. Importing the prelude inside the crate is refused (it would reach everything).
//! Every file or folder a rule names must exist, so a rule cannot go quiet when code moves.
//! What this cannot see: paths a macro assembles from fragments, `#[path]` modules, and a
//! name a function body imports when it is used elsewhere.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::Visit;

/// A module path inside the crate, e.g. `["provider", "openai_chat", "decode"]`.
type ModPath = Vec<String>;

/// How many imports and globs are followed in a row (an import cycle stops here).
const DEPTH: usize = 8;

fn child(module: &[String], name: impl ToString) -> ModPath {
    let mut path = module.to_vec();
    path.push(name.to_string());
    path
}

fn starts(path: &[String], prefix: &[&str]) -> bool {
    path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

/// What the crate declares at module level, to resolve names with.
#[derive(Default)]
struct Index {
    modules: HashSet<ModPath>,
    /// `module + name` of every item but imports.
    items: HashSet<ModPath>,
    /// `module + name` → the paths the module imports that name from, as written.
    imports: HashMap<ModPath, Vec<Vec<String>>>,
    /// module → the paths of its glob imports, as written.
    globs: HashMap<ModPath, Vec<Vec<String>>>,
    /// Names meaning `crate`: the crate's own, and those of `extern crate self as NAME`.
    aliases: HashSet<String>,
}

impl Index {
    fn new() -> Self {
        let mut index = Self::default();
        index.aliases.insert("llmchain".into());
        index
    }

    fn add_items(&mut self, module: &[String], items: &[syn::Item]) {
        self.modules.insert(module.to_vec());
        for item in items {
            let name = match item {
                syn::Item::Const(i) => Some(&i.ident),
                syn::Item::Enum(i) => Some(&i.ident),
                syn::Item::Fn(i) => Some(&i.sig.ident),
                syn::Item::Macro(i) => i.ident.as_ref(),
                syn::Item::Static(i) => Some(&i.ident),
                syn::Item::Struct(i) => Some(&i.ident),
                syn::Item::Trait(i) => Some(&i.ident),
                syn::Item::TraitAlias(i) => Some(&i.ident),
                syn::Item::Type(i) => Some(&i.ident),
                syn::Item::Union(i) => Some(&i.ident),
                syn::Item::Mod(m) => {
                    match &m.content {
                        Some((_, inner)) => self.add_items(&child(module, &m.ident), inner),
                        None => {
                            self.modules.insert(child(module, &m.ident));
                        }
                    }
                    None
                }
                syn::Item::ExternCrate(e) => {
                    if e.ident == "self"
                        && let Some((_, alias)) = &e.rename
                    {
                        self.aliases.insert(alias.to_string());
                    }
                    None
                }
                syn::Item::Use(u) => {
                    self.add_use(module, &mut Vec::new(), &u.tree);
                    None
                }
                _ => None,
            };
            if let Some(name) = name {
                self.items.insert(child(module, name));
            }
        }
    }

    fn add_use(&mut self, module: &[String], prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.add_use(module, prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                if let Some(name) = full.last() {
                    let key = child(module, name);
                    self.imports.entry(key).or_default().push(full);
                }
            }
            syn::UseTree::Rename(r) => {
                let key = child(module, &r.rename);
                self.imports
                    .entry(key)
                    .or_default()
                    .push(child(prefix, &r.ident));
            }
            syn::UseTree::Glob(_) => {
                self.globs
                    .entry(module.to_vec())
                    .or_default()
                    .push(prefix.clone());
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.add_use(module, prefix, t);
                }
            }
        }
    }

    fn known(&self, path: &[String]) -> bool {
        self.modules.contains(path) || self.items.contains(path) || self.imports.contains_key(path)
    }

    /// The crate path `segments` names when written in `module`; `None` outside the crate
    /// (another crate, a prelude name, a local variable).
    fn absolute(&self, module: &[String], segments: &[String], depth: usize) -> Option<ModPath> {
        let first = segments.first()?;
        let (mut at, rest) = if first == "crate" || self.aliases.contains(first) {
            (Vec::new(), &segments[1..])
        } else if first == "super" {
            let mut at = module.to_vec();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
            (at, rest)
        } else if first == "self" {
            (module.to_vec(), &segments[1..])
        } else if segments.len() < 2 || depth >= DEPTH {
            return None;
        } else if self.known(&child(module, first)) {
            (module.to_vec(), segments)
        } else if depth + 1 < DEPTH {
            // A name a glob of this module brings in (one level: a glob of a bare path
            // resolves through the module's own names only).
            let from = self
                .globs
                .get(module)?
                .iter()
                .filter_map(|g| self.absolute(module, g, DEPTH - 1))
                .find(|g| self.known(&child(g, first)))?;
            (from, segments)
        } else {
            return None;
        };
        at.extend_from_slice(rest);
        Some(at)
    }

    /// Where a crate path leads once imports are followed: `conversation::LLMChain` after
    /// `pub use crate::chain::LLMChain` there leads to `chain::llm_chain::LLMChain`. Empty
    /// when it leads out of the crate.
    fn canonical(&self, path: &[String], depth: usize) -> Vec<ModPath> {
        if depth >= DEPTH {
            return vec![path.to_vec()];
        }
        for i in (1..=path.len()).rev() {
            let (prefix, rest) = path.split_at(i);
            if self.modules.contains(prefix) {
                // The next name is none of the module's own: one of its globs brings it.
                let Some(next) = rest.first() else { break };
                let mut out = Vec::new();
                for g in self.globs.get(prefix).into_iter().flatten() {
                    if let Some(from) = self.absolute(prefix, g, depth + 1)
                        && self.known(&child(&from, next))
                    {
                        out.extend(self.canonical(&[from, rest.to_vec()].concat(), depth + 1));
                    }
                }
                if out.is_empty() {
                    break;
                }
                return out;
            }
            if let Some(written) = self.imports.get(prefix) {
                let module = &prefix[..i - 1];
                let mut out: Vec<ModPath> = written
                    .iter()
                    .filter_map(|w| self.absolute(module, w, depth + 1))
                    .flat_map(|t| self.canonical(&[t, rest.to_vec()].concat(), depth + 1))
                    .collect();
                if self.items.contains(prefix) {
                    out.push(path.to_vec());
                }
                return out;
            }
            if self.items.contains(prefix) {
                break;
            }
        }
        vec![path.to_vec()]
    }
}

struct Use {
    file: PathBuf,
    line: usize,
    from: ModPath,
    to: ModPath,
    /// The path as written, when `to` is where its import leads.
    via: Option<ModPath>,
}

impl Use {
    fn describe(&self) -> String {
        let via = match &self.via {
            Some(v) => format!(" (through {})", v.join("::")),
            None => String::new(),
        };
        format!(
            "{}:{}: {} reaches {}{via}",
            self.file.display(),
            self.line,
            self.from.join("::"),
            self.to.join("::")
        )
    }
}

/// Collects every crate path a file names, resolved to absolute module paths.
struct Collector<'a> {
    index: &'a Index,
    /// Relative to the source root.
    file: &'a Path,
    module: ModPath,
    found: Vec<Use>,
    refused: Vec<String>,
}

impl Collector<'_> {
    fn record(&mut self, segments: &[String], line: usize) {
        if let Some(to) = self.index.absolute(&self.module, segments, 0) {
            self.record_absolute(to, line);
        }
    }

    fn record_absolute(&mut self, to: ModPath, line: usize) {
        for target in self.index.canonical(&to, 0) {
            if target != to {
                self.push(target, Some(to.clone()), line);
            }
        }
        self.push(to, None, line);
    }

    fn push(&mut self, to: ModPath, via: Option<ModPath>, line: usize) {
        self.found.push(Use {
            file: self.file.to_owned(),
            line,
            from: self.module.clone(),
            to,
            via,
        });
    }

    fn walk_use(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.walk_use(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.record(&full, n.ident.span().start().line);
            }
            syn::UseTree::Rename(r) => {
                self.record(&child(prefix, &r.ident), r.ident.span().start().line);
            }
            syn::UseTree::Glob(g) => {
                let line = g.star_token.spans[0].start().line;
                self.record(prefix, line);
                // What the glob brings in: every module for the crate root, else
                // everything the module imports (a re-export must not hide behind `*`).
                let Some(at) = self.index.absolute(&self.module, prefix, 0) else {
                    return;
                };
                let index = self.index;
                let names = index
                    .imports
                    .keys()
                    .chain(index.modules.iter().filter(|_| at.is_empty()));
                let brought: BTreeSet<ModPath> = names
                    .filter(|p| p.len() == at.len() + 1 && p.starts_with(&at))
                    .cloned()
                    .collect();
                for name in brought {
                    self.record_absolute(name, line);
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.walk_use(prefix, t);
                }
            }
        }
    }

    /// Paths among tokens no parser read (a macro's input, an attribute's arguments):
    /// `ident (:: ident)*`, at least two segments, resolved like any other path.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(first) => {
                    let mut segments = vec![first.to_string()];
                    while let [
                        TokenTree::Punct(a),
                        TokenTree::Punct(b),
                        TokenTree::Ident(next),
                        ..,
                    ] = &tokens[i + 1..]
                        && a.as_char() == ':'
                        && a.spacing() == Spacing::Joint
                        && b.as_char() == ':'
                    {
                        segments.push(next.to_string());
                        i += 3;
                    }
                    if segments.len() > 1 {
                        self.record(&segments, first.span().start().line);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.walk_use(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = p.segments.first() {
            self.record(&segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_meta_list(&mut self, m: &'ast syn::MetaList) {
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_meta_list(self, m);
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        if e.ident == "self" {
            self.refused.push(format!(
                "`extern crate self` hides the crate behind another name (write `crate::`): {}:{}",
                self.file.display(),
                e.extern_token.span.start().line
            ));
        }
        syn::visit::visit_item_extern_crate(self, e);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // An inline module (`mod tests { … }`): paths inside resolve from it.
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.module.pop();
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module a source file is.
fn module_of(src_root: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src_root).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A top-level module and the top-level modules it may reach (space-separated), from the
/// bottom up. A module of the crate missing here fails the check: place it (and say where
/// in ARCHITECTURE.md).
struct Layer {
    module: &'static str,
    why: &'static str,
    may_use: &'static str,
}

/// `redact` and `secrets`: the dependency-free core every layer may use.
const LAYERS: &[Layer] = &[
    Layer {
        module: "redact",
        why: "redact depends on nothing of ours",
        may_use: "",
    },
    Layer {
        module: "secrets",
        why: "secrets depends only on redact",
        may_use: "redact",
    },
    Layer {
        module: "message",
        why: "message depends on nothing of ours",
        may_use: "",
    },
    Layer {
        module: "conversation",
        why: "conversation depends on message and its storage format only",
        may_use: "message storage_format redact secrets",
    },
    Layer {
        module: "storage_format",
        why: "the storage format depends on message and conversation only",
        may_use: "message conversation redact secrets",
    },
    Layer {
        module: "provider",
        why: "codecs depend on message and conversation only (not the model trait, telemetry, HTTP, tools or the chain)",
        may_use: "message conversation storage_format redact secrets",
    },
    Layer {
        module: "model",
        why: "the model trait sits below telemetry, HTTP clients, tools and the chain",
        may_use: "message conversation storage_format provider redact secrets",
    },
    Layer {
        module: "telemetry",
        why: "telemetry (the spans' conventions) sits below HTTP clients, tools and the chain",
        may_use: "message conversation storage_format provider model redact secrets",
    },
    Layer {
        module: "http",
        why: "HTTP clients sit below tools and the chain",
        may_use: "message conversation storage_format provider model telemetry redact secrets",
    },
    Layer {
        module: "tool",
        why: "tools depend on message and conversation only (not providers, the model trait, HTTP or the chain)",
        may_use: "message conversation storage_format telemetry redact secrets",
    },
    Layer {
        module: "policy",
        why: "policies rule on a call's tool name and arguments only: pure data, below tools and the chain",
        may_use: "",
    },
    Layer {
        module: "guard",
        why: "guards check text only (the process's secrets included): below tools and the chain",
        may_use: "redact secrets",
    },
    Layer {
        module: "chain",
        why: "the chain does not depend on the HTTP clients (`runtime` does not imply `http`)",
        may_use: "message conversation storage_format provider model telemetry tool policy guard redact secrets",
    },
    Layer {
        module: "prelude",
        why: "the prelude re-exports the layers",
        may_use: "message conversation storage_format provider model telemetry http tool policy guard chain redact secrets",
    },
];

/// Submodules that may reach more than their layer: (submodule, what more).
/// (None today: the test renderer, once wider, reaches only its own layer.)
const WIDER: &[(&[&str], &str)] = &[];

fn names(list: &str, name: &str) -> bool {
    list.split_whitespace().any(|n| n == name)
}

/// One rule across layers: code in `from` (a module prefix), except in `except`, must not
/// reach any of `to`.
struct Rule {
    why: &'static str,
    from: &'static [&'static str],
    except: &'static [&'static [&'static str]],
    to: &'static [&'static [&'static str]],
}

const RULES: &[Rule] = &[
    Rule {
        why: "only the OpenAI Chat, Anthropic and Bedrock decoders know the fast paths",
        from: &[],
        except: &[
            &["provider", "scan"],
            &["provider", "openai_chat"],
            &["provider", "anthropic"],
            &["provider", "bedrock"],
            &["provider", "assembly"],
        ],
        to: &[&["provider", "scan"]],
    },
    Rule {
        why: "nothing inside the crate imports the prelude (it reaches every layer)",
        from: &[],
        except: &[],
        to: &[&["prelude"]],
    },
];

/// The files and folders the rules are about: a rule over a path that moved would hold
/// for nothing.
const MUST_EXIST: &[&str] = &[
    "message",
    "conversation",
    "storage_format.rs",
    "provider",
    "provider/render.rs",
    "provider/scan",
    "provider/openai_chat",
    "provider/anthropic",
    "provider/bedrock",
    "provider/assembly.rs",
    "model.rs",
    "http",
    "tool",
    "chain",
];

/// Every broken layer rule in the crate whose sources are under `src_root`.
fn violations(src_root: &Path) -> Vec<String> {
    let mut broken = Vec::new();
    for p in MUST_EXIST {
        if !src_root.join(p).exists() {
            broken.push(format!(
                "src/{p} is named by a layer rule but does not exist: update tests/layers.rs"
            ));
        }
    }
    let mut list = Vec::new();
    files(src_root, &mut list);
    list.sort();
    let mut index = Index::new();
    let mut parsed = Vec::new();
    for file in list {
        let text = std::fs::read_to_string(&file).unwrap();
        let ast = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        let module = module_of(src_root, &file);
        index.add_items(&module, &ast.items);
        parsed.push((file, module, ast));
    }
    let tops: HashSet<&str> = index
        .modules
        .iter()
        .filter_map(|m| m.first().map(String::as_str))
        .collect();
    let mut unplaced: Vec<&str> = tops
        .iter()
        .copied()
        .filter(|t| !LAYERS.iter().any(|l| l.module == *t))
        .collect();
    unplaced.sort_unstable();
    for t in unplaced {
        broken.push(format!(
            "module `{t}` is in no layer: add it to LAYERS in tests/layers.rs (and ARCHITECTURE.md)"
        ));
    }
    for l in LAYERS {
        for n in l.may_use.split_whitespace() {
            if !LAYERS.iter().any(|k| k.module == n) {
                broken.push(format!("LAYERS: `{}` may use `{n}`, no layer", l.module));
            }
        }
        if !tops.contains(l.module) {
            broken.push(format!(
                "LAYERS names `{}`, no module of the crate: update tests/layers.rs",
                l.module
            ));
        }
    }

    let mut uses = Vec::new();
    for (file, module, ast) in &parsed {
        let mut c = Collector {
            index: &index,
            file: file.strip_prefix(src_root).unwrap(),
            module: module.clone(),
            found: Vec::new(),
            refused: Vec::new(),
        };
        c.visit_file(ast);
        uses.extend(c.found);
        broken.extend(c.refused);
    }
    if uses.len() <= 500 {
        broken.push(format!("too few paths found: {}", uses.len()));
    }

    for u in &uses {
        let (Some(from), Some(to)) = (u.from.first(), u.to.first()) else {
            continue; // the crate root reaches everything; a path to the root is a glob's
        };
        // Its own layer, a name at the root that is no module (a `#[macro_export]` macro),
        // or the prelude (a rule of its own).
        if from == to || to == "prelude" || !tops.contains(to.as_str()) {
            continue;
        }
        let Some(layer) = LAYERS.iter().find(|l| l.module == from.as_str()) else {
            continue; // reported above
        };
        let wider = WIDER
            .iter()
            .any(|(sub, more)| starts(&u.from, sub) && names(more, to));
        if !names(layer.may_use, to) && !wider {
            broken.push(format!("{}: {}", layer.why, u.describe()));
        }
    }
    for u in &uses {
        for rule in RULES {
            let applies =
                starts(&u.from, rule.from) && !rule.except.iter().any(|e| starts(&u.from, e));
            if applies && rule.to.iter().any(|t| starts(&u.to, t)) {
                broken.push(format!("{}: {}", rule.why, u.describe()));
            }
        }
        // The Assembler reads finished argument text with the JSON scan only.
        if starts(&u.from, &["provider", "assembly"])
            && starts(&u.to, &["provider", "scan"])
            && !starts(&u.to, &["provider", "scan", "json", "read_object"])
        {
            broken.push(format!(
                "the Assembler uses only the JSON scan's read_object: {}",
                u.describe()
            ));
        }
    }
    broken
}

#[test]
fn every_layer_rule_holds() {
    let broken = violations(&src());
    assert!(
        broken.is_empty(),
        "layer rules broken:\n{}",
        broken.join("\n")
    );
}

/// `from -> to` for every path in these files (module, source), in a crate of them.
fn reached(files: &[(&[&str], &str)]) -> Vec<String> {
    let mut index = Index::new();
    let parsed: Vec<(ModPath, syn::File)> = files
        .iter()
        .map(|(m, text)| {
            let module: ModPath = m.iter().map(|s| s.to_string()).collect();
            let ast = syn::parse_file(text).unwrap();
            index.add_items(&module, &ast.items);
            (module, ast)
        })
        .collect();
    let mut out = Vec::new();
    for (module, ast) in parsed {
        let mut c = Collector {
            index: &index,
            file: Path::new("test.rs"),
            module,
            found: Vec::new(),
            refused: Vec::new(),
        };
        c.visit_file(&ast);
        out.extend(c.refused);
        out.extend(
            c.found
                .iter()
                .map(|u| format!("{} -> {}", u.from.join("::"), u.to.join("::"))),
        );
    }
    out
}

fn assert_reached(reached: &[String], want: &[&str]) {
    for w in want {
        assert!(reached.iter().any(|r| r == w), "{w} not in {reached:#?}");
    }
}

/// The check itself: forms the old grep, and the first syn check, missed are caught.
#[test]
fn the_check_sees_grouped_nested_relative_macro_and_aliased_paths() {
    let text = r#"
        use crate::{chain::LLMChain, message::Message};
        use super::super::tool::Tool;
        fn f() -> crate::http::HttpModel { todo!() }
        mod inner { use super::super::super::model::ChatModel; }
        fn g() -> String { format!("{:?}", vec![crate::conversation::Conversation::default()]) }
        macro_rules! m { () => { $crate::chain::ChainError }; }
        extern crate self as me;
        fn h(_: me::chain::Mode, _: llmchain::chain::Steps) {}
    "#;
    let found = reached(&[(&["message", "tool_call"], text)]);
    assert_reached(
        &found,
        &[
            "message::tool_call -> chain::LLMChain",
            "message::tool_call -> message::Message",
            "message::tool_call -> tool::Tool",
            "message::tool_call -> http::HttpModel",
            "message::tool_call::inner -> model::ChatModel",
            "message::tool_call -> conversation::Conversation::default",
            "message::tool_call -> chain::ChainError",
            "message::tool_call -> chain::Mode",
            "message::tool_call -> chain::Steps",
        ],
    );
    assert!(found.iter().any(|f| f.contains("extern crate self")));
    assert_eq!(
        module_of(&src(), &src().join("provider/openai_chat/mod.rs")),
        ["provider", "openai_chat"]
    );
    assert_eq!(
        module_of(&src(), &src().join("lib.rs")),
        Vec::<String>::new()
    );
}

#[test]
fn the_check_follows_reexports_and_globs() {
    let found = reached(&[
        (
            &["chain"],
            "mod llm_chain { pub struct LLMChain; } pub use llm_chain::LLMChain;",
        ),
        (&["conversation"], "pub use crate::chain::LLMChain;"),
        (&["provider", "codec"], "use crate::conversation::LLMChain;"),
        (&["provider", "glob"], "use crate::conversation::*;"),
        (
            &["message"],
            "use crate::*; fn f() -> chain::LLMChain { todo!() }",
        ),
    ]);
    assert_reached(
        &found,
        &[
            "provider::codec -> conversation::LLMChain",
            "provider::codec -> chain::llm_chain::LLMChain",
            "provider::glob -> chain::llm_chain::LLMChain",
            "message -> chain",
            "message -> conversation",
            "message -> chain::llm_chain::LLMChain",
        ],
    );
}

/// Violations the check must catch, as lines appended to real files (`src/`-relative),
/// each with what a new violation must name: (file, text).
struct Mutant {
    name: &'static str,
    append: &'static [(&'static str, &'static str)],
    expect: &'static [(&'static str, &'static str)],
}

const MUTANTS: &[Mutant] = &[
    Mutant {
        name: "a re-export in conversation launders the chain into a codec",
        append: &[
            ("conversation/mod.rs", "pub use crate::chain::LLMChain;"),
            ("provider/framed.rs", "use crate::conversation::LLMChain;"),
        ],
        expect: &[("provider/framed.rs", "reaches chain::")],
    },
    Mutant {
        name: "a re-export in provider/render.rs (allowed the chain) launders it into a codec",
        append: &[
            ("provider/render.rs", "pub use crate::chain::LLMChain;"),
            ("provider/assembly.rs", "use super::render::LLMChain;"),
        ],
        expect: &[("provider/assembly.rs", "reaches chain::")],
    },
    Mutant {
        name: "conversation reaches the chain",
        append: &[("conversation/call_ids.rs", "use crate::chain::LLMChain;")],
        expect: &[("conversation/call_ids.rs", "reaches chain::")],
    },
    Mutant {
        name: "storage_format reaches HTTP",
        append: &[("storage_format.rs", "use crate::http::HttpModel;")],
        expect: &[("storage_format.rs", "reaches http::")],
    },
    Mutant {
        name: "redact reaches message",
        append: &[("redact.rs", "use crate::message::Message;")],
        expect: &[("redact.rs", "reaches message::")],
    },
    Mutant {
        name: "a glob of the crate root, then a bare path",
        append: &[(
            "message/usage.rs",
            "use crate::*;\nfn _layers_mutant() -> Option<chain::LLMChain> { None }",
        )],
        expect: &[("message/usage.rs", "reaches chain::")],
    },
    Mutant {
        name: "a path inside a macro invocation",
        append: &[(
            "tool/name.rs",
            r#"fn _layers_mutant() -> String { format!("{}", std::any::type_name::<crate::chain::LLMChain>()) }"#,
        )],
        expect: &[("tool/name.rs", "reaches chain::")],
    },
    Mutant {
        name: "extern crate self, then a path through it",
        append: &[
            ("lib.rs", "extern crate self as llmchain;"),
            ("model.rs", "use llmchain::chain::LLMChain;"),
        ],
        expect: &[
            ("model.rs", "reaches chain::"),
            ("lib.rs", "extern crate self"),
        ],
    },
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The check catches each violation of the issue tracker, applied to a copy of `src/`.
#[test]
fn each_mutant_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let base_root = dir.path().join("base");
    copy_dir(&src(), &base_root);
    let base = violations(&base_root);
    assert!(base.is_empty(), "the unmutated copy:\n{}", base.join("\n"));
    for (n, m) in MUTANTS.iter().enumerate() {
        let root = dir.path().join(format!("mutant{n}"));
        copy_dir(&src(), &root);
        for (file, line) in m.append {
            let path = root.join(file);
            let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("mutant `{}`: src/{file}: {e} (pick another file)", m.name)
            });
            text.push('\n');
            text.push_str(line);
            text.push('\n');
            std::fs::write(&path, text).unwrap();
        }
        let new: Vec<String> = violations(&root)
            .into_iter()
            .filter(|v| !base.contains(v))
            .collect();
        for (file, what) in m.expect {
            assert!(
                new.iter()
                    .any(|v| v.contains(&format!("{file}:")) && v.contains(what)),
                "mutant `{}` not caught (want `{what}` in {file}); new violations:\n{}",
                m.name,
                new.join("\n")
            );
        }
    }
}
