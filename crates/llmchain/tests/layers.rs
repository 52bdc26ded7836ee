//! The one-way layers of `llmchain` (ARCHITECTURE.md), checked on the parsed code:
//! every path in every source file (`use` trees, grouped or not, and paths in types and
//! expressions) is resolved against the module it is written in (`crate::`, `super::`
//! any number of times, `self::`) and must not reach a layer above. Importing the
//! prelude inside the crate is refused (it would reach everything). Every file or folder
//! a rule names must exist, so a rule cannot go quiet when code moves. What this cannot
//! see: paths inside macro invocations (their tokens are not parsed).

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module path inside the crate, e.g. `["provider", "openai_chat", "decode"]`.
type ModPath = Vec<String>;

struct Use {
    file: PathBuf,
    line: usize,
    from: ModPath,
    to: ModPath,
}

/// Collects every crate-relative path a file names, resolved to absolute module paths.
struct Collector<'a> {
    file: &'a Path,
    module: ModPath,
    found: Vec<Use>,
}

impl Collector<'_> {
    fn resolve(&self, segments: &[String]) -> Option<ModPath> {
        let mut at = self.module.clone();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                at.clear();
                rest = &rest[1..];
            }
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    at.pop()?;
                    rest = &rest[1..];
                }
            }
            Some("self") => rest = &rest[1..],
            // An external crate, a prelude name, or a child module (the same layer).
            _ => return None,
        }
        at.extend(rest.iter().cloned());
        Some(at)
    }

    fn record(&mut self, segments: Vec<String>, line: usize) {
        if let Some(to) = self.resolve(&segments) {
            self.found.push(Use {
                file: self.file.to_owned(),
                line,
                from: self.module.clone(),
                to,
            });
        }
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
                self.record(full, n.ident.span().start().line);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.record(full, r.ident.span().start().line);
            }
            syn::UseTree::Glob(g) => {
                self.record(prefix.clone(), g.star_token.spans[0].start().line);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.walk_use(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        self.walk_use(&mut prefix, &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = p.segments.first() {
            self.record(segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, p);
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
fn module_of(file: &Path) -> ModPath {
    let rel = file.strip_prefix(src()).unwrap();
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

fn all_uses() -> Vec<Use> {
    let mut list = Vec::new();
    files(&src(), &mut list);
    let mut uses = Vec::new();
    for file in list {
        let text = std::fs::read_to_string(&file).unwrap();
        let ast = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        let mut c = Collector {
            file: &file,
            module: module_of(&file),
            found: Vec::new(),
        };
        c.visit_file(&ast);
        uses.extend(c.found);
    }
    uses
}

fn starts(path: &[String], prefix: &[&str]) -> bool {
    path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

/// One rule: code in `from` (a module prefix), except in `except`, must not reach any
/// of `to`.
struct Rule {
    why: &'static str,
    from: &'static [&'static str],
    except: &'static [&'static [&'static str]],
    to: &'static [&'static [&'static str]],
}

const RULES: &[Rule] = &[
    Rule {
        why: "message depends on nothing of ours",
        from: &["message"],
        except: &[],
        to: &[
            &["conversation"],
            &["storage_format"],
            &["provider"],
            &["model"],
            &["http"],
            &["tool"],
            &["chain"],
        ],
    },
    Rule {
        why: "codecs depend on message and conversation only (not the model trait, HTTP, tools or the chain)",
        from: &["provider"],
        // The test doubles render wire bytes for the chain's scripted model.
        except: &[&["provider", "render"]],
        to: &[&["model"], &["http"], &["tool"], &["chain"]],
    },
    Rule {
        why: "the model trait sits below HTTP clients, tools and the chain",
        from: &["model"],
        except: &[],
        to: &[&["http"], &["tool"], &["chain"]],
    },
    Rule {
        why: "HTTP clients sit below tools and the chain",
        from: &["http"],
        except: &[],
        to: &[&["tool"], &["chain"]],
    },
    Rule {
        why: "tools depend on message only (not providers, the model trait, HTTP or the chain)",
        from: &["tool"],
        except: &[],
        to: &[&["provider"], &["model"], &["http"], &["chain"]],
    },
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
    "provider/assembly.rs",
    "model.rs",
    "http",
    "tool",
    "chain",
];

#[test]
fn every_layer_rule_holds() {
    for p in MUST_EXIST {
        assert!(
            src().join(p).exists(),
            "src/{p} is named by a layer rule but does not exist: update tests/layers.rs"
        );
    }
    let uses = all_uses();
    assert!(uses.len() > 500, "too few paths found: {}", uses.len());
    let mut broken = Vec::new();
    for u in &uses {
        for rule in RULES {
            let applies =
                starts(&u.from, rule.from) && !rule.except.iter().any(|e| starts(&u.from, e));
            if applies && rule.to.iter().any(|t| starts(&u.to, t)) {
                broken.push(format!(
                    "{}: {}:{}: {} reaches {}",
                    rule.why,
                    u.file.strip_prefix(src()).unwrap().display(),
                    u.line,
                    u.from.join("::"),
                    u.to.join("::")
                ));
            }
        }
    }
    // The Assembler reads finished argument text with the JSON scan only.
    for u in &uses {
        if starts(&u.from, &["provider", "assembly"])
            && starts(&u.to, &["provider", "scan"])
            && !starts(&u.to, &["provider", "scan", "json", "read_object"])
        {
            broken.push(format!(
                "the Assembler uses only the JSON scan's read_object: {}:{} reaches {}",
                u.file.strip_prefix(src()).unwrap().display(),
                u.line,
                u.to.join("::")
            ));
        }
    }
    assert!(
        broken.is_empty(),
        "layer rules broken:\n{}",
        broken.join("\n")
    );
}

/// The check itself: forms the old grep missed are caught.
#[test]
fn the_check_sees_grouped_nested_and_relative_paths() {
    let text = r#"
        use crate::{chain::LLMChain, message::Message};
        use super::super::tool::Tool;
        fn f() -> crate::http::HttpModel { todo!() }
        mod inner { use super::super::super::model::ChatModel; }
    "#;
    let ast = syn::parse_file(text).unwrap();
    let file = src().join("message/tool_call.rs");
    let mut c = Collector {
        file: &file,
        module: vec!["message".into(), "tool_call".into()],
        found: Vec::new(),
    };
    c.visit_file(&ast);
    let reached: Vec<String> = c.found.iter().map(|u| u.to.join("::")).collect();
    for want in [
        "chain::LLMChain",
        "message::Message",
        "tool::Tool",
        "http::HttpModel",
        "model::ChatModel",
    ] {
        assert!(
            reached.iter().any(|r| r == want),
            "{want} not in {reached:?}"
        );
    }
    assert_eq!(
        module_of(&src().join("provider/openai_chat/mod.rs")),
        ["provider", "openai_chat"]
    );
    assert_eq!(module_of(&src().join("lib.rs")), Vec::<String>::new());
}
