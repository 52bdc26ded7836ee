//! The OpenTelemetry GenAI semantic conventions' vocabulary, in one place: the names the
//! chain's `tracing` spans carry (`invoke_agent`, `chat {model}`, `execute_tool
//! {tool}`), and the conventions' well-known provider names.
//!
//! The spans are `tracing` spans that follow the conventions to the letter and carry
//! the fields `tracing-opentelemetry` reads for the OpenTelemetry span (`otel.name`,
//! `otel.kind`, `otel.status_code`), so an application that installs an OpenTelemetry
//! layer exports them as the conventions name them, and one that does not pays only
//! for `tracing`'s disabled spans.

/// `chat {model}`: the name of a model call's span.
pub fn chat_span_name(model: &str) -> String {
    format!("chat {model}")
}

/// `execute_tool {tool}`: the name of a tool call's span.
pub fn tool_span_name(tool: &str) -> String {
    // A model's tool name may hold anything: control characters are escaped.
    if tool.chars().any(char::is_control) {
        format!("execute_tool {}", tool.escape_debug())
    } else {
        format!("execute_tool {tool}")
    }
}

/// `invoke_agent {agent}`, or `invoke_agent` for an agent without a name.
pub fn agent_span_name(agent: Option<&str>) -> String {
    match agent {
        Some(a) => format!("invoke_agent {a}"),
        None => "invoke_agent".to_owned(),
    }
}

/// A count as the conventions type it (an int): an OpenTelemetry layer exports a `u64`
/// field as a string, an `i64` as an int.
pub fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Whether message content goes into the spans: only when
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the conventions' opt-in).
/// Without it no prompt, answer, argument or result text is in any attribute; with it,
/// every secret of the process is masked all the same ([`crate::secrets`]).
pub fn capture_content() -> bool {
    std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The conventions' JSON of messages (`gen_ai.input.messages`, `gen_ai.output.messages`):
/// `[{"role", "parts": [{"type": "text" | "reasoning" | "tool_call" |
/// "tool_call_response" | "uri" | "blob", …}], "finish_reason"?}]`, secrets masked.
/// Binary content is named by its type, never inlined.
pub fn messages_json<'a>(
    messages: impl IntoIterator<Item = &'a crate::message::Message>,
    finish_reason: Option<&str>,
) -> String {
    use crate::message::{ContentType, Role};
    use serde_json::{Value, json};
    let mut out = Vec::new();
    for m in messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let mut parts: Vec<Value> = m
            .content
            .iter()
            .map(|p| match p.r#type {
                ContentType::Text => json!({"type": "text", "content": p.content}),
                ContentType::Thinking => json!({"type": "reasoning", "content": p.content}),
                ContentType::ImageUrl | ContentType::FileUrl => {
                    json!({"type": "uri", "uri": crate::redact::url(&p.content)})
                }
                ContentType::Image | ContentType::File => {
                    json!({"type": "blob", "mime_type": p.options.get("media"), "content": "(not captured)"})
                }
                ContentType::Unsupported => json!({"type": "unsupported"}),
            })
            .collect();
        parts.extend(m.tool_calls.iter().map(|c| {
            json!({
                "type": "tool_call",
                "id": c.call_id,
                "name": c.name,
                "arguments": Value::Object(c.arguments_as_map()),
            })
        }));
        parts.extend(m.tool_results.iter().map(|r| {
            json!({"type": "tool_call_response", "id": r.tool_call_id, "response": r.content_text()})
        }));
        let mut message = json!({"role": role, "parts": parts});
        if let (Some(f), Some(o)) = (finish_reason, message.as_object_mut()) {
            o.insert("finish_reason".into(), Value::String(f.to_owned()));
        }
        out.push(message);
    }
    crate::secrets::masked(Value::Array(out).to_string())
}

/// The conventions' JSON of a system prompt (`gen_ai.system_instructions`).
pub fn system_json(system: &str) -> String {
    crate::secrets::masked(serde_json::json!([{"type": "text", "content": system}]).to_string())
}

/// The conventions' JSON of tool definitions (`gen_ai.tool.definitions`).
pub fn tools_json(tools: &[crate::conversation::ToolDefinition]) -> String {
    let defs: Vec<serde_json::Value> = tools
        .iter()
        .map(|t| {
            serde_json::json!({
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters_schema,
            })
        })
        .collect();
    serde_json::Value::Array(defs).to_string()
}

/// The conventions' two client metrics for one model call, as `tracing` events that an
/// OpenTelemetry metrics layer (`tracing_opentelemetry::MetricsLayer`) turns into
/// histograms: `gen_ai.client.operation.duration` (seconds; with `error.type` on a
/// failure) and `gen_ai.client.token.usage` (tokens, one point per `gen_ai.token.type`),
/// each with the operation, provider and model. Target `llmchain::metrics`, at INFO.
#[cfg(feature = "runtime")]
pub fn record_call(
    model: &dyn crate::model::ChatModel,
    took: std::time::Duration,
    outcome: Result<Option<crate::message::TokenUsage>, &'static str>,
) {
    let provider = model.genai_provider_name();
    let request_model = model.model_name();
    match outcome {
        Ok(usage) => {
            tracing::event!(
                target: "llmchain::metrics",
                tracing::Level::INFO,
                histogram.gen_ai.client.operation.duration = took.as_secs_f64(),
                "gen_ai.operation.name" = "chat",
                "gen_ai.provider.name" = provider,
                "gen_ai.request.model" = request_model,
            );
            if let Some(u) = usage {
                for (kind, n) in [("input", u.input_tokens), ("output", u.output_tokens)] {
                    tracing::event!(
                        target: "llmchain::metrics",
                        tracing::Level::INFO,
                        histogram.gen_ai.client.token.usage = n,
                        "gen_ai.operation.name" = "chat",
                        "gen_ai.provider.name" = provider,
                        "gen_ai.request.model" = request_model,
                        "gen_ai.token.type" = kind,
                    );
                }
            }
        }
        Err(error) => tracing::event!(
            target: "llmchain::metrics",
            tracing::Level::INFO,
            histogram.gen_ai.client.operation.duration = took.as_secs_f64(),
            "gen_ai.operation.name" = "chat",
            "gen_ai.provider.name" = provider,
            "gen_ai.request.model" = request_model,
            "error.type" = error,
        ),
    }
}

/// Records `gen_ai.response.finish_reasons` on a `chat` span: a string array, as the
/// conventions type it, for an OpenTelemetry layer (feature `otel`); the reason as a
/// string field otherwise.
#[cfg(feature = "runtime")]
pub fn finish_reasons(span: &tracing::Span, reason: &str) {
    #[cfg(feature = "otel")]
    {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(opentelemetry::Array::String(vec![
                reason.to_owned().into(),
            ])),
        );
    }
    #[cfg(not(feature = "otel"))]
    span.record("gen_ai.response.finish_reasons", reason);
}

/// Records what a model says of its requests on its `chat` span: the server's address
/// and port, the most tokens and the temperature asked for.
#[cfg(feature = "runtime")]
pub fn request_fields(span: &tracing::Span, info: &crate::model::RequestInfo) {
    if let Some(a) = &info.server_address {
        span.record("server.address", a.as_str());
    }
    if let Some(p) = info.server_port {
        span.record("server.port", i64::from(p));
    }
    if let Some(n) = info.max_tokens {
        span.record("gen_ai.request.max_tokens", i64::from(n));
    }
    if let Some(t) = info.temperature {
        span.record("gen_ai.request.temperature", t);
    }
}
