//! A wire format is one unit: nothing outside its own folder and the registry tells
//! formats apart by name. `Format` is a handle on a descriptor, so `match format { … }`
//! does not compile; this keeps the string forms of that `match` out too (`"gemini" =>`,
//! `== "ollama"`, `as_str() == …`) in every crate's library code, so a new format never
//! needs a line outside its folder and its registry line.

use std::path::{Path, PathBuf};

use llmchain::provider::Format;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of library code (before a file's `#[cfg(test)]` module) that tell formats
/// apart by a name or alias, outside the format's folder and the registry.
fn matches_over_formats(crates: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(crates).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut found = Vec::new();
    for file in files {
        let shown = file.strip_prefix(crates).unwrap().display().to_string();
        if shown.ends_with("provider/registry.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for format in Format::ALL {
            // Its own folder may name it (its descriptor does, once).
            let folder = format!("provider/{}/", folder_of(*format));
            if shown.contains(&folder) {
                continue;
            }
            let names = std::iter::once(format.as_str()).chain(format.aliases().iter().copied());
            for name in names {
                let forms = [
                    format!("\"{name}\" =>"),
                    format!("\"{name}\" | \""),
                    format!("\" | \"{name}\""),
                    format!("== \"{name}\""),
                    format!("\"{name}\" =="),
                ];
                for (n, line) in code.lines().enumerate() {
                    if forms.iter().any(|f| line.contains(f.as_str())) {
                        found.push(format!("{shown}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    found
}

/// The folder a built-in format's code lives in.
fn folder_of(format: Format) -> &'static str {
    // The descriptor's codec is named after its folder's module; the one exception
    // is Bedrock's (`bedrock_converse` in `bedrock/`).
    let name = format.as_str();
    name.strip_suffix("_converse").unwrap_or(name)
}

#[test]
fn no_code_outside_a_formats_folder_tells_formats_apart_by_name() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found = matches_over_formats(&crates);
    assert!(
        found.is_empty(),
        "formats told apart by name outside their folder and the registry (read the \
         descriptor instead: Format::title, codec, framing…):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_match_over_format_names() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("somecrate/src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "fn f(name: &str) -> u8 {\n    match name {\n        \"gemini\" => 1,\n        \
         _ => 0,\n    }\n}\nfn g(f: &str) -> bool { f == \"ollama\" }\n",
    )
    .unwrap();
    let found = matches_over_formats(dir.path());
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("\"gemini\" =>") || found[1].contains("\"gemini\" =>"));
}
