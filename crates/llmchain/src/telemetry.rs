//! The OpenTelemetry GenAI semantic conventions' vocabulary, in one place: the names the
//! chain's `tracing` spans carry (`invoke_agent`, `chat {model}`, `execute_tool
//! {tool}`), and the conventions' well-known provider names.
//!
//! The spans are `tracing` spans that follow the conventions to the letter and carry
//! the fields `tracing-opentelemetry` reads for the OpenTelemetry span (`otel.name`,
//! `otel.kind`, `otel.status_code`), so an application that installs an OpenTelemetry
//! layer exports them as the conventions name them, and one that does not pays only
//! for `tracing`'s disabled spans.

/// The conventions' `gen_ai.provider.name` for one of llmchain's provider names (the
/// registry's, or a compatible preset's); a name the conventions do not list is kept
/// as it is.
///
/// ```
/// use llmchain::telemetry::provider_name;
/// assert_eq!(provider_name("bedrock"), "aws.bedrock");
/// assert_eq!(provider_name("vertex-anthropic"), "gcp.vertex_ai");
/// assert_eq!(provider_name("azure_responses"), "azure.ai.openai");
/// assert_eq!(provider_name("openai_responses"), "openai");
/// assert_eq!(provider_name("ollama"), "ollama");
/// ```
pub fn provider_name(ours: &str) -> &str {
    match ours {
        "openai" | "openai_responses" => "openai",
        "anthropic" => "anthropic",
        "gemini" => "gcp.gemini",
        "vertex" | "vertex-anthropic" => "gcp.vertex_ai",
        "bedrock" => "aws.bedrock",
        "azure" | "azure_responses" => "azure.ai.openai",
        "mistral" => "mistral_ai",
        "xai" | "grok" => "x_ai",
        "deepseek" => "deepseek",
        "groq" => "groq",
        "perplexity" => "perplexity",
        "cohere" => "cohere",
        other => other,
    }
}

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
