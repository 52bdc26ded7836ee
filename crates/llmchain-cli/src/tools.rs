//! The built-in tools of `llmchain demo`, `llmchain run` and `llmchain conversations
//! resume`: a calculator, a clock and a file reader confined to one directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use llmchain::tool::{Tool, ToolOutput};
use serde_json::json;

/// `calculator {"expression": "(17 * 23) + 4"}` — arithmetic with + - * / ^ and parentheses.
/// The built-in tools, `read_file` confined to `root`.
/// The names of the built-in tools (an MCP tool of the same name gets its server's
/// prefix).
pub(crate) const BUILTIN_NAMES: [&str; 3] = ["calculator", "clock", "read_file"];

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
        .timeout(BUILTIN_TIMEOUT)
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
        .timeout(BUILTIN_TIMEOUT)
        .handler(|_, _| async move {
            ToolOutput::text(humantime::format_rfc3339_seconds(SystemTime::now()).to_string())
        })
        .build()
        .expect("the clock definition is valid")
}

/// The largest file `read_file` returns.
pub(crate) const MAX_READ_BYTES: u64 = 256 * 1024;

/// How long a built-in tool may take: reading a file or evaluating an expression
/// that takes longer is stuck (a slow network filesystem, a device), not working.
pub(crate) const BUILTIN_TIMEOUT: Duration = Duration::from_secs(10);

/// `read_file {"path": "notes.txt"}` — reads a UTF-8 text file inside `root` only.
///
/// Threat model: the path comes from a model, which may be steered by anything it read.
/// It is refused when absolute, when a component is hidden (`.env`, `.ssh/…`), when it
/// leads outside `root` (through `..`), when any component is a symbolic link, when it
/// is not a regular file (a FIFO, a device, a directory), and when the file has more
/// than one hard link (a link inside `root` can name a file outside it). On Linux the
/// file is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` relative to the
/// root's directory, so the kernel resolves the path and no check can be raced by a
/// process swapping files between the check and the open; what is read is the opened
/// file, checked by its own metadata. Elsewhere the same checks run on the
/// canonicalised path before the open.
pub(crate) fn read_file(root: impl Into<PathBuf>) -> Tool {
    let root: PathBuf = root.into();
    Tool::builder("read_file")
        .description(format!(
            "Reads a UTF-8 text file (at most {MAX_READ_BYTES} bytes) from the working directory. \
             Paths are relative to it; nothing outside it, no hidden file or directory \
             (.env, .ssh, .git) and no symbolic link can be read."
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
        .timeout(BUILTIN_TIMEOUT)
        .handler(move |args, _| {
            let root = root.clone();
            async move {
                let rel = args["path"].as_str().unwrap_or_default().to_owned();
                // Blocking syscalls (open, read) on a thread of their own: a stuck
                // filesystem holds that thread, not the runtime, and the timeout answers.
                match tokio::task::spawn_blocking(move || read_confined(&root, &rel)).await {
                    Ok(out) => out,
                    Err(e) => ToolOutput::error(format!("read_file failed: {e}")),
                }
            }
        })
        .build()
        .expect("the read_file definition is valid")
}

fn read_confined(root: &Path, rel: &str) -> ToolOutput {
    if Path::new(rel).is_absolute() {
        return ToolOutput::refusal(format!(
            "{rel} is an absolute path; give a path relative to the working directory"
        ));
    }
    // Hidden files and directories hold secrets (.env, .ssh/id_rsa, .git/config,
    // .npmrc): never read. No link is followed below, so the path's own components are
    // the file's.
    let hidden = Path::new(rel).components().any(
        |c| matches!(c, std::path::Component::Normal(n) if n.to_string_lossy().starts_with('.')),
    );
    if hidden {
        return ToolOutput::refusal(hidden_text(rel));
    }
    let root = match std::fs::canonicalize(root) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(format!("the working directory is unavailable: {e}")),
    };
    // A friendlier word first for the common cases (a link to a hidden file, a path
    // outside); the open below is what enforces it.
    if let Ok(full) = std::fs::canonicalize(root.join(rel)) {
        if !full.starts_with(&root) {
            return ToolOutput::refusal(format!("{rel} is outside the working directory"));
        }
        let inside_hidden = full.strip_prefix(&root).is_ok_and(|inside| {
            inside
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        });
        if inside_hidden {
            return ToolOutput::refusal(hidden_text(rel));
        }
    }
    let file = match open_beneath(&root, rel) {
        Ok(f) => f,
        Err(Opened::Refused(why)) => return ToolOutput::refusal(why),
        Err(Opened::Failed(e)) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    if !meta.is_file() {
        return ToolOutput::refusal(format!(
            "{rel} is not a regular file (a directory, a FIFO or a device); only files are read"
        ));
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
        use std::io::Read;
        file.take(MAX_READ_BYTES + 1).read_to_end(&mut bytes)
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

fn hidden_text(rel: &str) -> String {
    format!(
        "{rel} is a hidden file or inside a hidden directory; those often hold secrets \
         (.env, .ssh) and are not read"
    )
}

/// Why a file could not be opened.
enum Opened {
    /// The path is not allowed (outside, through a link): a refusal.
    Refused(String),
    /// The open failed (missing, permissions).
    Failed(std::io::Error),
}

/// Opens `rel` for reading beneath `root`, never following a symbolic link and never
/// blocking on a FIFO.
#[cfg(target_os = "linux")]
fn open_beneath(root: &Path, rel: &str) -> Result<std::fs::File, Opened> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    let dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Opened::Failed(e.into()))?;
    let path = if rel.is_empty() { "." } else { rel };
    match rustix::fs::openat2(
        &dir,
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(std::fs::File::from(fd)),
        Err(Errno::XDEV) => Err(Opened::Refused(format!(
            "{rel} is outside the working directory"
        ))),
        Err(Errno::LOOP) => Err(Opened::Refused(format!(
            "{rel} is, or goes through, a symbolic link; read_file does not follow links"
        ))),
        // A kernel without openat2 (before 5.6), or a seccomp filter that refuses it
        // (some container runtimes answer EPERM): the checks above, then a plain open.
        Err(Errno::NOSYS | Errno::PERM) => open_checked(root, rel),
        Err(e) => Err(Opened::Failed(e.into())),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_beneath(root: &Path, rel: &str) -> Result<std::fs::File, Opened> {
    open_checked(root, rel)
}

/// The open where the kernel cannot resolve beneath a directory: the canonical path is
/// checked to be inside `root`, then opened without following a final link and without
/// blocking on a FIFO.
fn open_checked(root: &Path, rel: &str) -> Result<std::fs::File, Opened> {
    let full = std::fs::canonicalize(root.join(rel)).map_err(Opened::Failed)?;
    if !full.starts_with(root) {
        return Err(Opened::Refused(format!(
            "{rel} is outside the working directory"
        )));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(
            (rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW).bits() as i32,
        );
    }
    options.open(&full).map_err(Opened::Failed)
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_builtin_names_are_the_builtin_tools() {
        let names: Vec<String> = super::builtins(std::path::PathBuf::from("."))
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        assert_eq!(names, super::BUILTIN_NAMES);
    }

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

    /// A FIFO (which a plain open blocks on forever), a directory and a symbolic link
    /// inside the root are refused at once; every built-in tool has a timeout.
    #[cfg(unix)]
    #[tokio::test]
    async fn only_regular_files_are_read_and_nothing_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("real.txt"), "real").unwrap();
        std::os::unix::fs::symlink("real.txt", dir.path().join("link.txt")).unwrap();
        let t = read_file(dir.path());
        if made {
            let out = tokio::time::timeout(
                Duration::from_secs(5),
                t.execute(json!({"path": "pipe"}), ToolContext::new("1")),
            )
            .await
            .expect("a FIFO does not block the read");
            assert!(out.is_refusal(), "{out:?}");
            assert!(out.content_text().contains("not a regular file"), "{out:?}");
        } else {
            eprintln!("only_regular_files_are_read: the FIFO case is skipped: no mkfifo");
        }
        let out = t
            .execute(json!({"path": "sub"}), ToolContext::new("2"))
            .await;
        assert!(out.is_refusal(), "{out:?}");
        let out = t
            .execute(json!({"path": "link.txt"}), ToolContext::new("3"))
            .await;
        assert!(out.is_refusal(), "{out:?}");
        assert!(!out.content_text().contains("real\n") && out.content_text() != "real");
        for tool in builtins(dir.path().to_owned()) {
            assert_eq!(tool.timeout(), Some(BUILTIN_TIMEOUT), "{}", tool.name());
        }
    }

    /// A path that a process swaps for a link to a secret while `read_file` works never
    /// reads the secret: the kernel resolves beneath the root without links.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_swapped_link_is_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (root, target, stop) = (
                root.clone(),
                outside.path().join("secret.txt"),
                stop.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::write(root.join("f.txt"), "plain");
                    let _ = std::fs::remove_file(root.join("f.txt"));
                    let _ = std::os::unix::fs::symlink(&target, root.join("f.txt"));
                    let _ = std::fs::remove_file(root.join("f.txt"));
                }
            })
        };
        for _ in 0..2000 {
            let out = read_confined(&root, "f.txt");
            assert!(!format!("{out:?}").contains("TOP SECRET"), "{out:?}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
    }

    #[tokio::test]
    async fn clock_answers() {
        let r = clock().execute(json!({}), ToolContext::new("1")).await;
        assert!(r.content_text().ends_with('Z'), "{}", r.content_text());
    }
}
