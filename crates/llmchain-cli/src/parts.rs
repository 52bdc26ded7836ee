//! The parts of a tool result as `mcp call` shows them: text as it is, images and files
//! as a line with their type and size (and, with `--out DIR`, written to a file).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use llmchain::message::{ContentPart, ContentType};
use serde_json::{Value, json};

use crate::error::CliError;

/// Every part of `parts` as JSON for stdout, and a line for stderr for each one that is
/// not text. With `out`, images and files are decoded and written there.
pub(crate) fn describe(
    parts: &[ContentPart],
    out: Option<&Path>,
) -> Result<(Vec<Value>, Vec<String>), CliError> {
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::usage(format!(
                "cannot create --out directory {}: {e}",
                dir.display()
            ))
        })?;
    }
    let mut json_parts = Vec::with_capacity(parts.len());
    let mut lines = Vec::new();
    for (n, p) in parts.iter().enumerate() {
        let kind = type_name(p.r#type);
        let mut v = json!({"type": kind});
        match p.r#type {
            ContentType::Text | ContentType::Thinking => {
                v["text"] = Value::String(p.content.clone());
            }
            ContentType::ImageUrl | ContentType::FileUrl => {
                v["url"] = Value::String(p.content.clone());
                lines.push(format!(
                    "part {n}: {kind} {}",
                    crate::shown::inline(&p.content, 200)
                ));
            }
            ContentType::Image | ContentType::File => {
                let media = p.media().unwrap_or("application/octet-stream");
                v["media"] = Value::String(media.to_owned());
                let data = p
                    .content
                    .split_once(";base64,")
                    .map_or(p.content.as_str(), |(_, d)| d);
                let mut line = format!("part {n}: {kind}, {}", crate::shown::inline(media, 80));
                match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
                    Ok(bytes) => {
                        v["bytes"] = bytes.len().into();
                        line.push_str(&format!(", {} bytes", bytes.len()));
                        if let Some(dir) = out {
                            let path = free_path(dir, &file_name(p, n, media));
                            std::fs::write(&path, &bytes).map_err(|e| {
                                CliError::io(format!("cannot write {}", path.display()), e)
                            })?;
                            line.push_str(&format!(", written to {}", path.display()));
                            v["written"] = Value::String(path.display().to_string());
                        }
                    }
                    Err(_) => {
                        v["bytes"] = Value::Null;
                        line.push_str(", not valid base64 (nothing written)");
                    }
                }
                lines.push(line);
            }
            _ => {
                lines.push(format!(
                    "part {n}: content of a kind llmchain does not read"
                ));
            }
        }
        for key in ["uri", "filename"] {
            if let Some(s) = p.options.get(key).and_then(Value::as_str) {
                v[key] = Value::String(s.to_owned());
            }
        }
        json_parts.push(v);
    }
    Ok((json_parts, lines))
}

fn type_name(t: ContentType) -> &'static str {
    match t {
        ContentType::Text => "text",
        ContentType::Image => "image",
        ContentType::ImageUrl => "image_url",
        ContentType::File => "file",
        ContentType::FileUrl => "file_url",
        ContentType::Thinking => "thinking",
        _ => "unsupported",
    }
}

/// A file name for part `n`: the last segment of its `filename` or `uri` when that is a
/// plain name, else `part-<n>.<extension of its media type>`.
fn file_name(p: &ContentPart, n: usize, media: &str) -> String {
    let given = ["filename", "uri"]
        .iter()
        .filter_map(|k| p.options.get(*k).and_then(Value::as_str))
        .filter_map(|s| s.rsplit(['/', '\\']).next())
        .find(|s| {
            !s.is_empty()
                && !s.starts_with('.')
                && s.len() <= 100
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        });
    match given {
        Some(name) => name.to_owned(),
        None => {
            let ext = match media {
                "image/png" => "png",
                "image/jpeg" => "jpg",
                "image/gif" => "gif",
                "image/webp" => "webp",
                "application/pdf" => "pdf",
                "application/gzip" => "gz",
                "application/json" => "json",
                m if m.starts_with("text/") => "txt",
                _ => "bin",
            };
            format!("part-{n}.{ext}")
        }
    }
}

/// `dir/name`, or `dir/<k>-name` for the first `k` that names no file yet.
fn free_path(dir: &Path, name: &str) -> PathBuf {
    let first = dir.join(name);
    if !first.exists() {
        return first;
    }
    (1..)
        .map(|k| dir.join(format!("{k}-{name}")))
        .find(|p| !p.exists())
        .unwrap_or(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_is_described_and_files_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let parts = [
            ContentPart::text("a pixel"),
            ContentPart::image("aGVsbG8=", "image/png"),
            ContentPart::file("H4sI", "application/gzip")
                .with_option("uri", "file:///x/archive.gz"),
            ContentPart::file("%%%", "application/pdf").with_option("uri", "../../etc/passwd"),
            ContentPart::image_url("https://example.com/a.png"),
        ];
        let (json, lines) = describe(&parts, Some(dir.path())).unwrap();
        assert_eq!(json[0], json!({"type": "text", "text": "a pixel"}));
        assert_eq!(json[1]["bytes"], 5);
        assert_eq!(
            std::fs::read(dir.path().join("part-1.png")).unwrap(),
            b"hello"
        );
        assert_eq!(json[2]["uri"], "file:///x/archive.gz");
        assert!(dir.path().join("archive.gz").exists());
        assert!(json[3]["bytes"].is_null(), "invalid base64 writes nothing");
        assert!(!dir.path().join("passwd").exists());
        assert_eq!(json[4]["url"], "https://example.com/a.png");
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0].starts_with("part 1: image, image/png, 5 bytes, written to "),
            "{}",
            lines[0]
        );
        // The same name again does not overwrite.
        describe(&parts[..2], Some(dir.path())).unwrap();
        assert!(dir.path().join("1-part-1.png").exists());
    }
}
