//! How each format asks its provider for a typed answer: the request bodies, as
//! snapshots, for an answer alone and for an answer beside another tool (the chain's
//! `Extract` lists its answer tool beside the user's; a format with a native mechanism
//! leaves it out, Bedrock — and Gemini beside other tools — answer through it).

use llmchain::conversation::{Conversation, ResponseFormat, ToolDefinition};
use llmchain::message::Message;
use llmchain::provider::{Format, RequestOptions};
use serde_json::{Value, json};

fn answer() -> ResponseFormat {
    ResponseFormat::new(
        "City",
        json!({"type": "object",
            "properties": {"name": {"type": "string"}, "population": {"type": "integer"},
                           "nickname": {"type": "string"}},
            "required": ["name", "population"]}),
    )
    .with_description("The city asked about")
}

fn tool(name: &str, description: &str, schema: Value) -> ToolDefinition {
    serde_json::from_value(
        json!({"name": name, "description": description, "parameters_schema": schema}),
    )
    .unwrap()
}

/// The conversation as the chain sends it during an `Extract` run.
fn conversation(with_other_tool: bool) -> Conversation {
    let f = answer();
    let mut conv = Conversation::new();
    conv.messages.push(Message::user("Largest city of France?"));
    if with_other_tool {
        conv.tools.push(tool(
            "lookup",
            "Looks a city up",
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        ));
    }
    conv.tools.push(tool(
        &f.name,
        "Give your final answer by calling this tool, with the answer as its arguments.",
        f.schema.clone(),
    ));
    conv.response_format = Some(f);
    conv
}

fn body(format: Format, conv: &Conversation) -> Value {
    let opts = RequestOptions {
        model: "m".into(),
        stream: true,
        ..Default::default()
    };
    serde_json::from_slice(&format.codec().encode(conv, &opts).unwrap()).unwrap()
}

#[test]
fn each_format_asks_for_the_answer_its_own_way() {
    for format in [
        Format::OPENAI_CHAT,
        Format::OPENAI_RESPONSES,
        Format::ANTHROPIC,
        Format::GEMINI,
        Format::OLLAMA,
        Format::BEDROCK_CONVERSE,
    ] {
        for (with_tool, case) in [(false, "alone"), (true, "beside_a_tool")] {
            let b = body(format, &conversation(with_tool));
            insta::assert_json_snapshot!(format!("typed_{}_{case}", format.as_str()), b);
        }
    }
}

#[test]
fn a_conversation_without_a_typed_answer_is_sent_as_before() {
    let mut conv = conversation(true);
    conv.response_format = None;
    conv.tools.pop();
    for format in [
        Format::OPENAI_CHAT,
        Format::ANTHROPIC,
        Format::GEMINI,
        Format::OLLAMA,
    ] {
        let text = body(format, &conv).to_string();
        for key in [
            "response_format",
            "output_config",
            "responseSchema",
            "\"format\"",
        ] {
            assert!(!text.contains(key), "{format}: {key} in {text}");
        }
    }
}
