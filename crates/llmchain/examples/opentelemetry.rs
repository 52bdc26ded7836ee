//! OpenTelemetry in your own application: the chain's spans (`invoke_agent`, `chat`,
//! `execute_tool`, the GenAI conventions) and its two client metrics, exported over
//! OTLP/HTTP by the subscriber and exporter *you* install. The library only emits
//! `tracing` spans and events; it installs nothing.
//!
//! ```text
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OPENAI_API_KEY=sk-... \
//!   cargo run -p llmchain --features otel --example opentelemetry
//! ```
//! The exporter reads the standard variables itself (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `…_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`).
//! `.ci/examples` runs it against `scripts/mock_openai.py` and `scripts/otlp_sink.py`.
//! The feature `otel` types `gen_ai.response.finish_reasons` as a string array, as the
//! conventions ask; without it the same spans export with that attribute as a string.

use std::sync::Arc;

use llmchain::chain::{LLMChain, Mode};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::Message;
use llmchain::provider::Format;
use llmchain::tool::Tool;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::json;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The exporters and providers (the endpoint, headers and resource come from the
    //    standard OTEL_* variables).
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let tracer_provider = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .build();
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .build()?;
    let meter_provider = SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .build();

    // 2. The `tracing` layers: spans to the tracer, the chain's `llmchain::metrics`
    //    events to the two histograms. Only llmchain's own spans, at INFO.
    let spans_of_llmchain = Targets::new()
        .with_target("llmchain::metrics", LevelFilter::OFF)
        .with_target("llmchain", LevelFilter::INFO);
    tracing_subscriber::registry()
        .with(
            tracing_opentelemetry::layer()
                .with_tracer(tracer_provider.tracer("my-agent"))
                .with_filter(spans_of_llmchain),
        )
        .with(
            tracing_opentelemetry::MetricsLayer::new(meter_provider.clone())
                .with_filter(Targets::new().with_target("llmchain::metrics", LevelFilter::INFO)),
        )
        .init();

    // 3. Run a chain as usual: a tool call and an answer, one `invoke_agent` span with
    //    `chat` → `execute_tool` → `chat` under it.
    let weather = Tool::builder("get_weather")
        .description("Current weather in a city.")
        .schema(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"]
        }))
        .handler(|args, _ctx| async move {
            let city = args["city"].as_str().unwrap_or_default().to_owned();
            Ok::<_, String>(format!("18C and sunny in {city}"))
        })
        .build()?;
    let model = HttpModel::new(HttpModelConfig::from_env(
        Format::OPENAI_CHAT,
        "gpt-4.1-mini",
    )?)?;
    let mut chain = LLMChain::new(Arc::new(model))
        .with_tool(weather)
        .with_agent_name("weather-agent")
        .with_conversation_id("conversation-1");
    chain
        .add_message(Message::user("What's the weather in Paris?"))
        .await?;
    chain.run(Mode::while_needs_response()).await?;
    println!(
        "answer: {}",
        chain
            .last_message()
            .and_then(|m| m.text())
            .unwrap_or_default()
    );

    // 4. Flush before exit: the batch would otherwise be lost with the process.
    tracer_provider.shutdown()?;
    meter_provider.shutdown()?;
    println!("spans and metrics flushed");
    Ok(())
}
