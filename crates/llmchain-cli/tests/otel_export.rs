//! `llmchain run` exports its spans over OTLP/HTTP (protobuf) when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` says where, before it exits, with the GenAI
//! conventions' names, kinds and attributes; and nothing when it is not set. The
//! receiver is a local server decoding what it gets with the OTLP protobuf messages.

mod common;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use common::{llmchain_with_env, serve, text};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;

type Received = Arc<Mutex<Vec<(Vec<(String, String)>, Span)>>>;

/// An OTLP/HTTP receiver: the spans it got, each with its resource's attributes.
fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let r = received.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().route(
                "/v1/traces",
                post(move |body: Bytes| {
                    let r = r.clone();
                    async move {
                        let request = ExportTraceServiceRequest::decode(body).unwrap();
                        for rs in request.resource_spans {
                            let resource: Vec<(String, String)> = rs
                                .resource
                                .iter()
                                .flat_map(|r| r.attributes.iter())
                                .map(|kv| {
                                    (
                                        kv.key.clone(),
                                        shown(kv.value.as_ref().and_then(|v| v.value.as_ref())),
                                    )
                                })
                                .collect();
                            for ss in rs.scope_spans {
                                for span in ss.spans {
                                    r.lock().unwrap().push((resource.clone(), span));
                                }
                            }
                        }
                        ""
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (format!("http://{}", rx.recv().unwrap()), received)
}

/// An attribute value as text (`int:7`, `str:chat`, `[str:stop]`…).
fn shown(v: Option<&Value>) -> String {
    match v {
        Some(Value::StringValue(s)) => format!("str:{s}"),
        Some(Value::IntValue(i)) => format!("int:{i}"),
        Some(Value::BoolValue(b)) => format!("bool:{b}"),
        Some(Value::DoubleValue(d)) => format!("double:{d}"),
        Some(Value::ArrayValue(a)) => format!(
            "[{}]",
            a.values
                .iter()
                .map(|v| shown(v.value.as_ref()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => format!("{other:?}"),
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| shown(kv.value.as_ref().and_then(|v| v.value.as_ref())))
}

#[test]
fn run_exports_genai_spans_over_otlp_before_it_exits() {
    let (otlp, received) = receiver();
    let (base, _) = serve(vec![
        render_stream(
            Format::OpenAiChat,
            &ResponseScript::tool_call("call_1", "clock", "{}").with_usage(11, 5),
        )
        .unwrap(),
        render_stream(
            Format::OpenAiChat,
            &ResponseScript::text("It is noon.").with_usage(20, 4),
        )
        .unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain_with_env(
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "m",
            "what time is it?",
        ],
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let spans = received.lock().unwrap().clone();
    let named = |name: &str| {
        spans
            .iter()
            .filter(|(_, s)| s.name == name)
            .map(|(_, s)| s.clone())
            .collect::<Vec<_>>()
    };
    let agent = named("invoke_agent");
    assert_eq!(
        agent.len(),
        1,
        "{:#?}",
        spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
    );
    let agent = &agent[0];
    assert_eq!(agent.kind, SpanKind::Internal as i32);
    assert_eq!(
        attribute(agent, "gen_ai.operation.name").as_deref(),
        Some("str:invoke_agent")
    );
    assert_eq!(
        attribute(agent, "gen_ai.provider.name").as_deref(),
        Some("str:openai")
    );
    assert_eq!(
        attribute(agent, "gen_ai.usage.input_tokens").as_deref(),
        Some("int:31")
    );
    assert_eq!(
        attribute(agent, "gen_ai.usage.output_tokens").as_deref(),
        Some("int:9")
    );
    assert!(attribute(agent, "gen_ai.conversation.id").is_some());
    let chats = named("chat m");
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        assert_eq!(chat.kind, SpanKind::Client as i32);
        assert_eq!(chat.trace_id, agent.trace_id);
        assert_eq!(
            chat.parent_span_id, agent.span_id,
            "a chat is a child of the turn"
        );
        assert_eq!(
            attribute(chat, "gen_ai.request.model").as_deref(),
            Some("str:m")
        );
    }
    let tools = named("execute_tool clock");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].kind, SpanKind::Internal as i32);
    assert_eq!(tools[0].trace_id, agent.trace_id);
    assert_eq!(
        attribute(&tools[0], "gen_ai.tool.call.id").as_deref(),
        Some("str:call_1")
    );
    // In time order under the turn: chat, execute_tool, chat.
    let mut children: Vec<&Span> = chats.iter().chain(tools.iter()).collect();
    children.sort_by_key(|s| s.start_time_unix_nano);
    let order: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(order, ["chat m", "execute_tool clock", "chat m"]);
    // The resource: the service is llmchain, with the standard variables' attributes.
    let resource = &spans[0].0;
    assert!(
        resource.contains(&("service.name".into(), "str:llmchain".into())),
        "{resource:?}"
    );
    assert!(
        resource.contains(&("deployment.environment".into(), "str:test".into())),
        "{resource:?}"
    );
}

#[test]
fn nothing_is_exported_without_an_endpoint() {
    let (_otlp, received) = receiver();
    let (base, _) = serve(vec![
        render_stream(Format::OpenAiChat, &ResponseScript::text("Hi.")).unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain_with_env(
        &["run", "--base-url", &base, "--model", "m", "hi"],
        dir.path(),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(received.lock().unwrap().is_empty());
}
