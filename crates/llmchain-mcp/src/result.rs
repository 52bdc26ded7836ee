//! Mapping an MCP `CallToolResult` to a [`ToolOutput`].

use llmchain::message::{ContentPart, ToolResult};
use llmchain::tool::ToolOutput;
use serde_json::Value;

/// Maps an MCP `tools/call` result, as JSON (`{"content": [...], "structuredContent":
/// ..., "isError": ...}`), to a [`ToolOutput`]; see the crate docs for the table.
///
/// Content blocks of unknown types are kept as their JSON text, so nothing the server
/// said is silently lost. An empty result becomes the text `(no content)` (a result's
/// content may not be empty).
///
/// ```
/// use llmchain_mcp::map_call_result;
/// use llmchain::tool::ToolOutput;
/// use serde_json::json;
/// let out = map_call_result(&json!({"content": [{"type": "text", "text": "18C"}], "structuredContent": {"c": 18}}));
/// let ToolOutput::Result(r) = out else { panic!() };
/// assert_eq!(r.content_text(), "18C");
/// assert_eq!(r.processed_content, Some(json!({"c": 18})));
/// ```
pub fn map_call_result(result: &Value) -> ToolOutput {
    let mut parts = Vec::new();
    if let Some(blocks) = result.get("content").and_then(Value::as_array) {
        for b in blocks {
            parts.push(map_block(b));
        }
    }
    let structured = result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .cloned();
    if parts.is_empty() {
        // Servers may return only structuredContent; the model still needs to see it.
        parts.push(ContentPart::text(match &structured {
            Some(v) => v.to_string(),
            None => "(no content)".to_owned(),
        }));
    }
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut r = if is_error {
        ToolResult::error("", parts)
    } else {
        ToolResult::success("", parts)
    };
    r.processed_content = structured;
    ToolOutput::Result(Box::new(r))
}

fn str_field<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn map_block(b: &Value) -> ContentPart {
    match str_field(b, "type") {
        "text" => ContentPart::text(str_field(b, "text")),
        "image" => ContentPart::image(str_field(b, "data"), str_field(b, "mimeType")),
        "audio" => ContentPart::file(str_field(b, "data"), str_field(b, "mimeType")),
        "resource" => {
            let r = b.get("resource").unwrap_or(&Value::Null);
            let uri = str_field(r, "uri");
            if let Some(text) = r.get("text").and_then(Value::as_str) {
                ContentPart::text(text).with_option("uri", uri)
            } else {
                let media = match str_field(r, "mimeType") {
                    "" => "application/octet-stream",
                    m => m,
                };
                ContentPart::file(str_field(r, "blob"), media).with_option("uri", uri)
            }
        }
        "resource_link" => {
            let uri = str_field(b, "uri");
            let name = str_field(b, "name");
            ContentPart::text(format!("[resource {name}: {uri}]")).with_option("uri", uri)
        }
        _ => ContentPart::text(b.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(out: ToolOutput) -> ToolResult {
        match out {
            ToolOutput::Result(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn maps_every_block_type() {
        let r = result(map_call_result(&json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "BBBB", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "body"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "CCCC"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
            {"type": "weird", "x": 1}
        ]})));
        assert!(!r.is_error());
        assert_eq!(r.content.len(), 7);
        assert_eq!(r.content[0].as_text(), Some("hi"));
        assert!(r.content[1].is_image());
        assert_eq!(r.content[1].media(), Some("image/png"));
        assert_eq!(r.content[3].as_text(), Some("body"));
        assert_eq!(r.content[4].media(), Some("application/octet-stream"));
        assert_eq!(r.content[5].as_text(), Some("[resource c: file:///c]"));
        assert_eq!(r.content[6].as_text(), Some(r#"{"type":"weird","x":1}"#));
    }

    #[test]
    fn error_and_structured_only() {
        let r = result(map_call_result(
            &json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
        ));
        assert!(r.is_error() && !r.is_refusal());
        let r = result(map_call_result(&json!({"structuredContent": {"a": 1}})));
        assert_eq!(r.content_text(), r#"{"a":1}"#);
        assert_eq!(r.processed_content, Some(json!({"a": 1})));
        let r = result(map_call_result(&json!({})));
        assert_eq!(r.content_text(), "(no content)");
    }
}
