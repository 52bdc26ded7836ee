//! What the real APIs accept as content, checked on a request body: the media types of
//! images and documents, the shapes of documents, which blocks a tool result may hold,
//! and that text is never empty where an API refuses empty text. The local servers
//! reject with these (`http_support::content_validator`) and the placement tests run
//! every body they build through them. Self-contained (llmchain, serde_json, base64), so
//! other crates' tests include it by path.

use base64::Engine as _;
use llmchain::provider::Format;
use serde_json::{Value, json};

type Check = Result<(), String>;

fn fail<T>(path: &str, why: impl std::fmt::Display) -> Result<T, String> {
    Err(format!("{path}: {why}"))
}

fn base64_ok(path: &str, data: &Value) -> Check {
    let Some(d) = data.as_str() else {
        return fail(path, "data must be a string");
    };
    if d.starts_with("data:") {
        return fail(path, "base64 data must not carry a data: URL prefix");
    }
    if base64::engine::general_purpose::STANDARD.decode(d).is_err() {
        return fail(path, "data is not valid base64");
    }
    Ok(())
}

/// A data URL `data:<media>;base64,<data>` whose media type `ok` accepts.
fn data_url_ok(path: &str, url: &str, ok: impl Fn(&str) -> bool, what: &str) -> Check {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(());
    };
    let Some((media, data)) = rest.split_once(";base64,") else {
        return fail(path, "a data URL must be base64");
    };
    if !ok(media) {
        return fail(path, format!("{what} does not accept media type {media}"));
    }
    base64_ok(path, &json!(data))
}

const OPENAI_IMAGES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const ANTHROPIC_IMAGES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];
const GEMINI_IMAGES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/heic",
    "image/heif",
];

fn anthropic_cache(path: &str, b: &Value) -> Check {
    match b.get("cache_control") {
        None => Ok(()),
        Some(c) if c["type"] == "ephemeral" => Ok(()),
        Some(c) => fail(
            path,
            format!(
                "cache_control: Input tag '{c}' found using 'type' does not match any of the expected tags: 'ephemeral'"
            ),
        ),
    }
}

fn anthropic_block(path: &str, b: &Value, in_result: bool) -> Check {
    anthropic_cache(path, b)?;
    let ty = b["type"].as_str().unwrap_or("");
    if in_result && !matches!(ty, "text" | "image" | "document" | "search_result") {
        return fail(path, format!("a tool_result cannot hold a {ty} block"));
    }
    match ty {
        "text" => match b["text"].as_str() {
            Some("") => fail(path, "text content blocks must be non-empty"),
            Some(_) => Ok(()),
            None => fail(path, "text must be a string"),
        },
        "image" => {
            let s = &b["source"];
            match s["type"].as_str() {
                Some("base64") => {
                    let m = s["media_type"].as_str().unwrap_or("");
                    if !ANTHROPIC_IMAGES.contains(&m) {
                        return fail(
                            path,
                            format!(
                                "source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp' (got {m})"
                            ),
                        );
                    }
                    base64_ok(path, &s["data"])
                }
                Some("url") if s["url"].is_string() => Ok(()),
                _ => fail(path, "image source must be base64 or url"),
            }
        }
        "document" => {
            let s = &b["source"];
            match s["type"].as_str() {
                Some("base64") => {
                    if s["media_type"] != "application/pdf" {
                        return fail(
                            path,
                            format!(
                                "source.media_type: Input should be 'application/pdf' (got {})",
                                s["media_type"]
                            ),
                        );
                    }
                    base64_ok(path, &s["data"])
                }
                Some("text") => {
                    if s["media_type"] != "text/plain" || !s["data"].is_string() {
                        return fail(
                            path,
                            "a text document has media_type text/plain and data as a string",
                        );
                    }
                    Ok(())
                }
                Some("url") if s["url"].is_string() => Ok(()),
                Some("content") if s["content"].is_array() => Ok(()),
                _ => fail(
                    path,
                    "document source must be base64 (PDF), text, url or content",
                ),
            }
        }
        "tool_result" => match &b["content"] {
            Value::Null | Value::String(_) => Ok(()),
            Value::Array(blocks) => {
                for (k, c) in blocks.iter().enumerate() {
                    anthropic_block(&format!("{path}.content.{k}"), c, true)?;
                }
                Ok(())
            }
            _ => fail(path, "tool_result content must be a string or blocks"),
        },
        _ => Ok(()),
    }
}

/// Anthropic Messages.
pub(crate) fn anthropic(body: &Value) -> Check {
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        match &m["content"] {
            Value::String(s) if s.is_empty() => {
                return fail(&format!("messages.{i}"), "content must be non-empty");
            }
            Value::Array(a) if a.is_empty() => {
                return fail(&format!("messages.{i}"), "content must be non-empty");
            }
            Value::Array(blocks) => {
                for (j, b) in blocks.iter().enumerate() {
                    anthropic_block(&format!("messages.{i}.content.{j}"), b, false)?;
                }
            }
            _ => {}
        }
    }
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        anthropic_cache(&format!("tools.{i}"), t)?;
    }
    Ok(())
}

fn openai_chat_part(path: &str, p: &Value) -> Check {
    match p["type"].as_str() {
        Some("text") if p["text"].is_string() => Ok(()),
        Some("image_url") => {
            let Some(url) = p["image_url"]["url"].as_str() else {
                return fail(path, "image_url.url must be a string");
            };
            data_url_ok(path, url, |m| OPENAI_IMAGES.contains(&m), "image_url")
        }
        Some("file") => {
            let f = &p["file"];
            if f["file_id"].is_string() {
                return Ok(());
            }
            let Some(data) = f["file_data"].as_str() else {
                return fail(path, "file needs file_data or file_id");
            };
            if !data.starts_with("data:") {
                return fail(path, "file_data must be a base64 data URL");
            }
            if !f["filename"].is_string() {
                return fail(path, "file_data needs a filename");
            }
            data_url_ok(
                path,
                data,
                |m| m == "application/pdf",
                "file (only PDF files are supported)",
            )
        }
        Some("input_audio") => Ok(()),
        other => fail(path, format!("unknown content part type {other:?}")),
    }
}

/// OpenAI Chat Completions.
pub(crate) fn openai_chat(body: &Value) -> Check {
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("messages[{i}]");
        match (m["role"].as_str(), &m["content"]) {
            (Some("tool"), Value::String(_)) => {}
            (Some("tool"), Value::Array(parts)) if parts.iter().any(|p| p["type"] != "text") => {
                return fail(&path, "a tool message's content parts must be text");
            }
            (Some("tool"), Value::Array(_)) => {}
            (Some("tool"), _) => return fail(&path, "a tool message needs content"),
            (_, Value::Array(parts)) => {
                for (j, p) in parts.iter().enumerate() {
                    openai_chat_part(&format!("{path}.content[{j}]"), p)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn responses_part(path: &str, p: &Value) -> Check {
    match p["type"].as_str() {
        Some("input_text" | "output_text") if p["text"].is_string() => Ok(()),
        Some("input_image") => match p["image_url"].as_str() {
            Some(url) => data_url_ok(path, url, |m| OPENAI_IMAGES.contains(&m), "input_image"),
            None if p["file_id"].is_string() => Ok(()),
            None => fail(path, "input_image needs image_url or file_id"),
        },
        Some("input_file") => {
            if p["file_id"].is_string() || p["file_url"].is_string() {
                return Ok(());
            }
            let Some(data) = p["file_data"].as_str() else {
                return fail(path, "input_file needs file_data, file_url or file_id");
            };
            if !p["filename"].is_string() {
                return fail(path, "file_data needs a filename");
            }
            data_url_ok(path, data, |m| m == "application/pdf", "input_file")
        }
        other => fail(path, format!("unknown input part type {other:?}")),
    }
}

/// OpenAI Responses.
pub(crate) fn openai_responses(body: &Value) -> Check {
    for (i, item) in body["input"].as_array().into_iter().flatten().enumerate() {
        let path = format!("input[{i}]");
        let parts = match item["type"].as_str() {
            Some("message") => &item["content"],
            Some("function_call_output") => &item["output"],
            _ => continue,
        };
        if let Value::Array(parts) = parts {
            for (j, p) in parts.iter().enumerate() {
                responses_part(&format!("{path}[{j}]"), p)?;
            }
        }
    }
    Ok(())
}

fn gemini_blob(path: &str, b: &Value) -> Check {
    let m = b["mimeType"].as_str().unwrap_or("");
    let ok = GEMINI_IMAGES.contains(&m)
        || m == "application/pdf"
        || m == "text/plain"
        || m.starts_with("audio/")
        || m.starts_with("video/");
    if !ok {
        return fail(path, format!("Unsupported MIME type: {m}"));
    }
    base64_ok(path, &b["data"])
}

/// Gemini generateContent.
pub(crate) fn gemini(body: &Value) -> Check {
    for (i, c) in body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, p) in c["parts"].as_array().into_iter().flatten().enumerate() {
            let path = format!("contents[{i}].parts[{j}]");
            let data = [
                "text",
                "inlineData",
                "fileData",
                "functionCall",
                "functionResponse",
            ];
            if data.iter().filter(|k| p.get(**k).is_some()).count() != 1 {
                return fail(&path, "a part holds exactly one kind of data");
            }
            if let Some(b) = p.get("inlineData") {
                gemini_blob(&path, b)?;
            }
            if let Some(r) = p.get("functionResponse") {
                if !r["response"].is_object() {
                    return fail(&path, "functionResponse.response must be an object");
                }
                for (k, rp) in r["parts"].as_array().into_iter().flatten().enumerate() {
                    gemini_blob(
                        &format!("{path}.functionResponse.parts[{k}]"),
                        &rp["inlineData"],
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Ollama /api/chat.
pub(crate) fn ollama(body: &Value) -> Check {
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if !m["content"].is_string() {
            return fail(&format!("messages[{i}]"), "content must be a string");
        }
        for (k, img) in m["images"].as_array().into_iter().flatten().enumerate() {
            base64_ok(&format!("messages[{i}].images[{k}]"), img)?;
        }
    }
    Ok(())
}

/// The check of `format`.
pub(crate) fn check(format: Format, body: &Value) -> Check {
    match format.as_str() {
        "openai_chat" => openai_chat(body),
        "openai_responses" => openai_responses(body),
        "anthropic" => anthropic(body),
        "gemini" => gemini(body),
        "ollama" => ollama(body),
        _ => Ok(()),
    }
}
