//! The built-in tools of `llmchain demo`, `llmchain run` and `llmchain conversations
//! resume`: a calculator, a clock and a file reader confined to one directory.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use llmchain::tool::{Tool, ToolOutput};
use serde_json::json;

/// `calculator {"expression": "(17 * 23) + 4"}` — arithmetic with + - * / ^ and parentheses.
/// The built-in tools, `read_file` confined to `root`.
pub(crate) fn builtins(root: PathBuf) -> Vec<Tool> {
    vec![calculator(), clock(), read_file(root)]
}

/// A calculator tool.
pub(crate) fn calculator() -> Tool {
    Tool::builder("calculator")
        .description("Evaluates an arithmetic expression with + - * / ^ and parentheses.")
        .display_text("Calculate")
        .schema(json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (17 * 23) + 4"}},
            "required": ["expression"],
            "additionalProperties": false
        }))
        .idempotent(true)
        .read_only(true)
        .open_world(false)
        .handler(|args, _| async move {
            let expr = args["expression"].as_str().unwrap_or_default().to_owned();
            match exmex::eval_str::<f64>(&expr) {
                Ok(v) if v.is_finite() => {
                    let shown = if v.fract() == 0.0 && v.abs() < 1e15 {
                        format!("{}", v as i64)
                    } else {
                        format!("{v}")
                    };
                    // Text only: structured data would make the MCP text content its
                    // JSON (`mcp serve`), where `2+2 = 4` says it better.
                    ToolOutput::text(format!("{expr} = {shown}"))
                }
                Ok(v) => ToolOutput::error(format!("{expr} is not a finite number ({v})")),
                // Nothing was changed: a malformed expression is safe to correct and resend.
                // The parser's own words describe its internals ("we have 1 ops and 3
                // node"): they follow the explanation, they do not replace it.
                Err(e) => ToolOutput::refusal(format!(
                    "cannot evaluate {expr:?}: write it with plain decimal numbers (no exponent \
                     notation such as 1e308), + - * / ^ and parentheses (parser: {e})"
                )),
            }
        })
        .build()
        .expect("the calculator definition is valid")
}

/// `clock {}` — the current UTC time (RFC 3339).
pub(crate) fn clock() -> Tool {
    Tool::builder("clock")
        .description("Returns the current UTC date and time in RFC 3339 format.")
        .display_text("Read the clock")
        .schema(json!({"type": "object", "properties": {}, "additionalProperties": false}))
        .idempotent(true)
        .read_only(true)
        .open_world(false)
        .handler(|_, _| async move {
            ToolOutput::text(humantime::format_rfc3339_seconds(SystemTime::now()).to_string())
        })
        .build()
        .expect("the clock definition is valid")
}

/// The largest file `read_file` returns.
pub(crate) const MAX_READ_BYTES: u64 = 256 * 1024;

/// `read_file {"path": "notes.txt"}` — reads a UTF-8 text file inside `root` only.
///
/// Threat model: the path comes from a model, which may be steered by anything it read.
/// It is refused when absolute, when it resolves (through `..` or symlinks) outside
/// `root`, and when the file has more than one hard link (a link inside `root` can name
/// a file outside it); what is read is the opened file, checked by its own metadata.
/// It is not a sandbox against another local process that swaps files while it reads.
pub(crate) fn read_file(root: impl Into<PathBuf>) -> Tool {
    let root: PathBuf = root.into();
    Tool::builder("read_file")
        .description(format!(
            "Reads a UTF-8 text file (at most {MAX_READ_BYTES} bytes) from the working directory. \
             Paths are relative to it; nothing outside it, and no hidden file or directory \
             (.env, .ssh, .git), can be read."
        ))
        .display_text("Read a file")
        .schema(json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "relative path, e.g. notes.txt"}},
            "required": ["path"],
            "additionalProperties": false
        }))
        .idempotent(true)
        .read_only(true)
        .open_world(false)
        .handler(move |args, _| {
            let root = root.clone();
            async move {
                let rel = args["path"].as_str().unwrap_or_default().to_owned();
                read_confined(&root, &rel).await
            }
        })
        .build()
        .expect("the read_file definition is valid")
}

async fn read_confined(root: &Path, rel: &str) -> ToolOutput {
    let root = match tokio::fs::canonicalize(root).await {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(format!("the working directory is unavailable: {e}")),
    };
    if Path::new(rel).is_absolute() {
        return ToolOutput::refusal(format!(
            "{rel} is an absolute path; give a path relative to the working directory"
        ));
    }
    let full = match tokio::fs::canonicalize(root.join(rel)).await {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    if !full.starts_with(&root) {
        return ToolOutput::refusal(format!("{rel} is outside the working directory"));
    }
    // Hidden files and directories hold secrets (.env, .ssh/id_rsa, .git/config,
    // .npmrc): never read, whatever path (or link) leads to them.
    let hidden = full.strip_prefix(&root).is_ok_and(|inside| {
        inside
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    });
    if hidden {
        return ToolOutput::refusal(format!(
            "{rel} is a hidden file or inside a hidden directory; those often hold secrets \
             (.env, .ssh) and are not read"
        ));
    }
    // What is read is what was checked: the opened file's own metadata, not the path's.
    let file = match tokio::fs::File::open(&full).await {
        Ok(f) => f,
        Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    let meta = match file.metadata().await {
        Ok(m) => m,
        Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    if !meta.is_file() {
        return ToolOutput::error(format!("{rel} is not a file"));
    }
    // A hard link inside the directory can name a file outside it, and no path check
    // sees it: a file with more than one link is refused.
    #[cfg(unix)]
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return ToolOutput::refusal(format!(
            "{rel} has more than one hard link, so it may be a file from outside the working \
             directory; it is not read"
        ));
    }
    if meta.len() > MAX_READ_BYTES {
        return ToolOutput::error(format!(
            "{rel} has {} bytes; the limit is {MAX_READ_BYTES}",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    let read = {
        use tokio::io::AsyncReadExt;
        file.take(MAX_READ_BYTES + 1).read_to_end(&mut bytes).await
    };
    match read.map(|_| bytes) {
        Ok(bytes) => match String::from_utf8(bytes) {
            // Its output is the text: no structured data (over MCP the text content
            // would then have to be that data's JSON).
            Ok(text) => ToolOutput::text(text),
            Err(_) => ToolOutput::error(format!("{rel} is not UTF-8 text")),
        },
        Err(e) => ToolOutput::error(format!("cannot read {rel}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmchain::tool::ToolContext;

    #[tokio::test]
    async fn calculator_evaluates_and_refuses_garbage() {
        let c = calculator();
        let r = c
            .execute(
                json!({"expression": "(17 * 23) + 4"}),
                ToolContext::new("c1"),
            )
            .await;
        assert_eq!(r.content_text(), "(17 * 23) + 4 = 395");
        let r = c
            .execute(json!({"expression": "2 +* 2"}), ToolContext::new("c2"))
            .await;
        assert!(r.is_refusal(), "{r:?}");
        let r = c
            .execute(json!({"expr": "1"}), ToolContext::new("c3"))
            .await;
        assert!(r.is_refusal());
        assert!(
            r.content_text().contains("did you mean \"expression\""),
            "{}",
            r.content_text()
        );
        // Exponent notation: the refusal says what to write, before the parser's words.
        let r = c
            .execute(json!({"expression": "2^1e308"}), ToolContext::new("c4"))
            .await;
        assert!(r.is_refusal());
        assert!(
            r.content_text()
                .starts_with("cannot evaluate \"2^1e308\": write it with plain decimal numbers"),
            "{}",
            r.content_text()
        );
    }

    #[tokio::test]
    async fn hidden_files_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "OPENAI_API_KEY=sk-secret").unwrap();
        std::fs::create_dir(dir.path().join(".ssh")).unwrap();
        std::fs::write(dir.path().join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join(".env"), dir.path().join("env.txt")).unwrap();
        let t = read_file(dir.path());
        for (n, path) in [".env", ".ssh/id_rsa", "./.env", "env.txt"]
            .iter()
            .enumerate()
        {
            let out = t
                .execute(json!({"path": path}), ToolContext::new(n.to_string()))
                .await;
            assert!(out.is_refusal(), "{path}: {out:?}");
            assert!(!out.content_text().contains("sk-secret"));
            assert!(
                out.content_text().contains("hidden"),
                "{}",
                out.content_text()
            );
        }
    }

    #[tokio::test]
    async fn read_file_is_confined() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        let t = read_file(dir.path());
        let ok = t
            .execute(json!({"path": "a.txt"}), ToolContext::new("1"))
            .await;
        assert_eq!(ok.content_text(), "hello");
        let out = t
            .execute(json!({"path": "../../etc/passwd"}), ToolContext::new("2"))
            .await;
        assert!(out.is_error(), "{out:?}");
        let abs = t
            .execute(json!({"path": "/etc/passwd"}), ToolContext::new("3"))
            .await;
        assert!(abs.is_refusal());
        let missing = t
            .execute(json!({"path": "nope.txt"}), ToolContext::new("4"))
            .await;
        assert!(missing.is_error() && !missing.is_refusal());
    }

    /// A hard link inside the directory to a file outside it is not read.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_hard_link_out_of_the_directory_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "TOP SECRET").unwrap();
        let dir = tempfile::tempdir().unwrap();
        if std::fs::hard_link(&secret, dir.path().join("innocent.txt")).is_err() {
            eprintln!("a_hard_link_out_of_the_directory_is_refused: skipped: no hard links here");
            return;
        }
        let out = read_file(dir.path())
            .execute(json!({"path": "innocent.txt"}), ToolContext::new("1"))
            .await;
        assert!(out.is_refusal(), "{out:?}");
        assert!(!out.content_text().contains("TOP SECRET"));
        assert!(out.content_text().contains("hard link"));
    }

    #[tokio::test]
    async fn clock_answers() {
        let r = clock().execute(json!({}), ToolContext::new("1")).await;
        assert!(r.content_text().ends_with('Z'), "{}", r.content_text());
    }
}
