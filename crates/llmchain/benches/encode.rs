//! Encoding cost: a 2,000-message conversation with 1,000 tool calls and their results,
//! for OpenAI Chat and OpenAI Responses. Target: under 1 ms.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use llmchain::conversation::{Conversation, ToolDefinition};
use llmchain::message::{Message, ToolCall, ToolResult};
use llmchain::provider::{Format, RequestOptions};
use serde_json::json;

fn conversation() -> Conversation {
    let mut conv = Conversation::new();
    conv.system = Some("You are a helpful assistant with tools.".into());
    conv.tools.push(ToolDefinition {
        name: "get_weather".into(),
        description: "Get the current weather for a city.".into(),
        parameters_schema: json!({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}),
        strict: true,
        ..Default::default()
    });
    for i in 0..1000 {
        let args = json!({"city": format!("City number {i}"), "unit": "c"});
        let call = ToolCall::function(
            format!("call_{i:024}"),
            "get_weather",
            args.as_object().unwrap().clone(),
        );
        let call = match call {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        conv.messages.push(Message::assistant_with_calls(
            format!("Checking the weather in city {i}."),
            vec![call],
        ));
        conv.messages.push(Message::tool(vec![ToolResult::text(
            format!("call_{i:024}"),
            format!(
                "{{\"temp_c\": {}, \"conditions\": \"partly cloudy with a light breeze\"}}",
                i % 40
            ),
        )]));
    }
    conv
}

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::cpu_ms_per_iter;

fn bench(c: &mut Criterion) {
    let conv = conversation();
    assert_eq!(conv.messages.len(), 2000);
    let opts = RequestOptions {
        model: "gpt-4o".into(),
        stream: true,
        ..Default::default()
    };
    let mut g = c.benchmark_group("encode_2000_messages_1000_calls");
    for f in [Format::OPENAI_CHAT, Format::OPENAI_RESPONSES] {
        let codec = f.codec();
        let body = codec.encode(&conv, &opts).unwrap();
        eprintln!("{f}: {} bytes", body.len());
        if let Some(ms) = cpu_ms_per_iter(50, || {
            black_box(codec.encode(&conv, &opts).unwrap());
        }) {
            eprintln!("{f}: {ms:.3} ms CPU time per encode");
        }
        g.bench_function(f.as_str(), |b| {
            b.iter(|| codec.encode(black_box(&conv), &opts).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
