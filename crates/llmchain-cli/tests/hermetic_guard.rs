//! Every test that starts `llmchain` starts it through `common::bare_in` (or what is
//! built on it): a new `Command::new` of the binary anywhere else in the tests would
//! inherit the user's config, keys, database and collector.

use std::path::Path;

#[test]
fn the_binary_is_started_only_through_the_hermetic_helper() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut offenders = Vec::new();
    let mut stack = vec![tests.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("hermetic_guard.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let helper = path.ends_with("common/mod.rs");
            for (n, line) in text.lines().enumerate() {
                let starts_binary = line.contains("Command::new(BIN)")
                    || line.contains("Command::new(common::BIN)")
                    || line.contains("Command::new(env!(\"CARGO_BIN_EXE_llmchain\"))");
                if starts_binary && !(helper && text[..].contains("fn bare_in")) {
                    offenders.push(format!("{}:{}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "start llmchain with common::bare_in/bare/llmchain_command: {offenders:?}"
    );
}
