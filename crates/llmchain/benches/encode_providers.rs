//! Request encoding of a 2,000-message conversation (1,000 tool calls and 1,000
//! results, each result answering one call) for Anthropic, Gemini and Ollama.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use llmchain::conversation::{Conversation, ToolDefinition};
use llmchain::message::{Message, ToolCall, ToolResult};
use llmchain::provider::{AnthropicCodec, Codec, GeminiCodec, OllamaCodec, RequestOptions};
use serde_json::json;

fn conversation() -> Conversation {
    let mut conv = Conversation::new();
    conv.system = Some("You are a helpful assistant.".into());
    conv.tools.push(ToolDefinition {
        name: "get_weather".into(),
        description: "Get the weather.".into(),
        parameters_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        ..Default::default()
    });
    for i in 0..1000 {
        let id = format!("call_{i}");
        let call = ToolCall::function(
            &id,
            "get_weather",
            json!({"city": format!("City {i}"), "unit": "celsius"}),
        )
        .unwrap();
        conv.messages.push(Message::assistant_with_calls(
            "Checking the weather.",
            vec![call],
        ));
        conv.messages.push(Message::tool(vec![
            ToolResult::text(&id, format!("{{\"temp_c\": {}}}", i % 30)).with_name("get_weather"),
        ]));
    }
    conv
}

fn bench(c: &mut Criterion) {
    let conv = conversation();
    assert_eq!(conv.messages.len(), 2000);
    let opts = RequestOptions {
        model: "m".into(),
        ..Default::default()
    };
    let mut g = c.benchmark_group("encode_2000_messages");
    let codecs: [(&str, &dyn Codec); 3] = [
        ("anthropic", &AnthropicCodec),
        ("gemini", &GeminiCodec),
        ("ollama", &OllamaCodec),
    ];
    for (name, codec) in codecs {
        g.bench_with_input(BenchmarkId::from_parameter(name), &conv, |b, conv| {
            b.iter(|| black_box(codec.encode(black_box(conv), &opts).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
