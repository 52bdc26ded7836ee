//! `llmchain run` exports its spans over OTLP/HTTP (protobuf) when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` says where, before it exits, with the GenAI
//! conventions' names, kinds and attributes; and nothing when it is not set. The
//! receiver is a local server decoding what it gets with the OTLP protobuf messages.

mod common;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use common::{
    QueuedWrite, llmchain_with_env, post_chat_with, serve, serve_hello, text, user_message,
};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;

type Received = Arc<Mutex<Vec<(Vec<(String, String)>, Span)>>>;

/// The metrics' histogram points received: (metric name, point attributes, count, sum).
type Points = Arc<Mutex<Vec<(String, Vec<(String, String)>, u64, f64)>>>;

/// An OTLP/HTTP receiver: the spans it got, each with its resource's attributes, and
/// the metrics' histogram points.
fn receiver() -> (String, Received, Points) {
    let (base, received, points, _) = receiver_with_headers();
    (base, received, points)
}

/// [`receiver`], and the `x-tenant` header of each request for spans.
fn receiver_with_headers() -> (String, Received, Points, Arc<Mutex<Vec<String>>>) {
    let tenants: Arc<Mutex<Vec<String>>> = Arc::default();
    let t = tenants.clone();
    let received: Received = Arc::default();
    let r = received.clone();
    let points: Points = Arc::default();
    let p = points.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new().route(
                "/v1/traces",
                post(move |headers: axum::http::HeaderMap, body: Bytes| {
                    let r = r.clone();
                    let t = t.clone();
                    async move {
                        t.lock().unwrap().push(
                            headers
                                .get("x-tenant")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or_default()
                                .to_owned(),
                        );
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
            let app = app.route(
                "/v1/metrics",
                post(move |body: Bytes| {
                    let p = p.clone();
                    async move {
                        use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
                        use opentelemetry_proto::tonic::metrics::v1::metric::Data;
                        let request = ExportMetricsServiceRequest::decode(body).unwrap();
                        for rm in request.resource_metrics {
                            for sm in rm.scope_metrics {
                                for m in sm.metrics {
                                    if let Some(Data::Histogram(h)) = m.data {
                                        for dp in h.data_points {
                                            let attrs = dp
                                                .attributes
                                                .iter()
                                                .map(|kv| {
                                                    (kv.key.clone(), shown(kv.value.as_ref().and_then(|v| v.value.as_ref())))
                                                })
                                                .collect();
                                            p.lock().unwrap().push((m.name.clone(), attrs, dp.count, dp.sum.unwrap_or(0.0)));
                                        }
                                    }
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
    (
        format!("http://{}", rx.recv().unwrap()),
        received,
        points,
        tenants,
    )
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
    let (otlp, received, points) = receiver();
    let (base, _) = serve(vec![
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::tool_call("call_1", "clock", "{}").with_usage(11, 5),
        )
        .unwrap(),
        render_stream(
            Format::OPENAI_CHAT,
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
            "--max-tokens",
            "256",
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
        assert_eq!(
            attribute(chat, "server.address").as_deref(),
            Some("str:127.0.0.1")
        );
        assert!(attribute(chat, "server.port").is_some_and(|p| p.starts_with("int:")));
        assert_eq!(
            attribute(chat, "gen_ai.request.max_tokens").as_deref(),
            Some("int:256")
        );
        // What the server said of itself (the scripted server names its model so).
        assert_eq!(
            attribute(chat, "gen_ai.response.id").as_deref(),
            Some("str:chatcmpl-scripted")
        );
        assert_eq!(
            attribute(chat, "gen_ai.response.model").as_deref(),
            Some("str:scripted-model")
        );
        // A string array, as the conventions type it.
        let reasons = attribute(chat, "gen_ai.response.finish_reasons").unwrap();
        assert!(reasons.starts_with("[str:"), "{reasons}");
    }
    let tools = named("execute_tool clock");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].kind, SpanKind::Internal as i32);
    assert_eq!(tools[0].trace_id, agent.trace_id);
    assert_eq!(
        tools[0].parent_span_id, agent.span_id,
        "a tool call is a child of the turn"
    );
    assert_eq!(
        attribute(&tools[0], "gen_ai.tool.call.id").as_deref(),
        Some("str:call_1")
    );
    // In time order under the turn: chat, execute_tool, chat.
    let mut children: Vec<&Span> = chats.iter().chain(tools.iter()).collect();
    children.sort_by_key(|s| s.start_time_unix_nano);
    let order: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(order, ["chat m", "execute_tool clock", "chat m"]);
    // The conventions' two client metrics, flushed at exit.
    let metrics = points.lock().unwrap().clone();
    let usage = |kind: &str| {
        metrics
            .iter()
            .filter(|(n, a, _, _)| {
                n == "gen_ai.client.token.usage"
                    && a.contains(&("gen_ai.token.type".into(), format!("str:{kind}")))
            })
            .map(|(_, _, _, sum)| *sum)
            .sum::<f64>()
    };
    assert_eq!(usage("input"), 31.0, "{metrics:?}");
    assert_eq!(usage("output"), 9.0, "{metrics:?}");
    let calls: u64 = metrics
        .iter()
        .filter(|(n, a, _, _)| {
            n == "gen_ai.client.operation.duration"
                && a.contains(&("gen_ai.provider.name".into(), "str:openai".into()))
                && a.contains(&("gen_ai.request.model".into(), "str:m".into()))
        })
        .map(|(_, _, count, _)| *count)
        .sum();
    assert_eq!(calls, 2, "{metrics:?}");
    // No content without the opt-in: no prompt, answer, argument or result anywhere.
    for (_, span) in &spans {
        for kv in &span.attributes {
            let v = shown(kv.value.as_ref().and_then(|v| v.value.as_ref()));
            assert!(
                !v.contains("what time is it") && !v.contains("It is noon"),
                "{}: {v}",
                kv.key
            );
            assert!(!kv.key.starts_with("gen_ai.input") && !kv.key.starts_with("gen_ai.output"));
        }
    }
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
    let (_otlp, received, _) = receiver();
    let (base, _) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Hi.")).unwrap(),
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

/// The standard variables: a traces-only endpoint (as Langfuse's) gets the spans, with
/// the headers and service name asked for, and no metrics go anywhere; a sampler that
/// samples nothing exports nothing.
#[test]
fn the_standard_otel_variables_are_honoured() {
    let (otlp, received, points, tenants) = receiver_with_headers();
    let (base, _) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Hi.")).unwrap(),
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Hi.")).unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let traces = format!("{otlp}/v1/traces");
    let out = llmchain_with_env(
        &["run", "--base-url", &base, "--model", "m", "hi"],
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces.as_str()),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme"),
            ("OTEL_SERVICE_NAME", "my-agent"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Flushed before exit: everything is there when the command returns.
    let spans = received.lock().unwrap().clone();
    assert!(spans.iter().any(|(_, s)| s.name == "chat m"), "{spans:?}");
    let (resource, _) = &spans[0];
    assert!(
        resource.contains(&("service.name".into(), "str:my-agent".into())),
        "{resource:?}"
    );
    assert!(tenants.lock().unwrap().iter().all(|t| t == "acme"));
    assert!(points.lock().unwrap().is_empty(), "metrics were sent");
    assert!(!text(&out).contains("not exported"), "{}", text(&out));

    received.lock().unwrap().clear();
    let out = llmchain_with_env(
        &["run", "--base-url", &base, "--model", "m", "hi"],
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
            ("OTEL_TRACES_SAMPLER", "always_off"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(received.lock().unwrap().is_empty());
}

/// An endpoint that takes no metrics (Phoenix answers 405, others 404) costs the run
/// nothing but one plain warning that says what to set.
#[test]
fn an_endpoint_without_metrics_gets_a_plain_warning() {
    let (otlp, received, _) = receiver();
    let (base, _) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Hi.")).unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let nowhere = format!("{otlp}/no/metrics/here");
    let out = llmchain_with_env(
        &["run", "--base-url", &base, "--model", "m", "hi"],
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", nowhere.as_str()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "the last metrics were not exported: HTTP export failed with status code: 404 \
             (this endpoint takes no metrics"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("spans were not"), "{stderr}");
    assert!(
        received
            .lock()
            .unwrap()
            .iter()
            .any(|(_, s)| s.name == "chat m")
    );
}

const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const PARENT_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A run queued under the caller's trace (`TRACEPARENT`) is run by a worker in that
/// trace; paused for review, decided from another process and resumed by another
/// worker, it goes on in the same trace, and the run's span says who decided what.
#[test]
fn a_queued_run_keeps_its_trace_through_a_worker_and_a_review() {
    let (otlp, received, _) = receiver();
    let dir = tempfile::tempdir().unwrap();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str())];
    let Some(queued) = QueuedWrite::enqueue("otel_export", dir.path(), "ask", &env, PARENT) else {
        return;
    };
    queued.through_a_review(dir.path(), &env);

    let spans = received.lock().unwrap().clone();
    let enqueue: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "llmchain enqueue")
        .collect();
    assert_eq!(enqueue.len(), 1);
    assert_eq!(hex(&enqueue[0].trace_id), PARENT_TRACE);
    assert_eq!(hex(&enqueue[0].parent_span_id), "b7ad6b7169203331");
    assert_eq!(enqueue[0].kind, SpanKind::Producer as i32);
    let runs: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "llmchain run")
        .collect();
    assert_eq!(runs.len(), 2, "the first attempt and the resumed one");
    for run in &runs {
        assert_eq!(
            hex(&run.trace_id),
            PARENT_TRACE,
            "an attempt left the trace"
        );
        assert_eq!(run.parent_span_id, enqueue[0].span_id);
    }
    for name in ["invoke_agent", "chat m", "execute_tool write_file"] {
        assert!(
            spans
                .iter()
                .any(|(_, s)| s.name == name && hex(&s.trace_id) == PARENT_TRACE),
            "no {name} in the trace"
        );
    }
    // The resumed attempt says who decided what.
    let decided = runs
        .iter()
        .flat_map(|r| r.events.iter())
        .find(|e| e.name == "review decided")
        .expect("the review's decision is an event of the run");
    let attr = |k: &str| {
        decided
            .attributes
            .iter()
            .find(|kv| kv.key == k)
            .map(|kv| shown(kv.value.as_ref().and_then(|v| v.value.as_ref())))
    };
    assert_eq!(
        attr("llmchain.review.decided_by").as_deref(),
        Some("str:dana")
    );
    assert_eq!(
        attr("llmchain.review.decision").as_deref(),
        Some("str:approved")
    );
}

/// `llmchain serve` takes the browser's `traceparent`: the answer's spans are in that
/// trace.
#[test]
fn serve_takes_the_browsers_traceparent() {
    let (otlp, received, _) = receiver();
    let dir = tempfile::tempdir().unwrap();
    // The server exports: its environment names the receiver.
    let served = serve_hello(
        dir.path(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str())],
    );
    let answer = post_chat_with(
        &served.base,
        &user_message("chat", "u1", "hi"),
        &format!("traceparent: {PARENT}\r\n"),
    );
    assert!(answer.contains("Hello."), "{answer}");
    // The server's batch goes out within its schedule (5 s by default).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let found = received
            .lock()
            .unwrap()
            .iter()
            .any(|(_, s)| s.name == "chat m" && hex(&s.trace_id) == PARENT_TRACE);
        if found {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no span of the answer in the browser's trace"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(served);
}

/// With `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, the content is in the
/// conventions' JSON shapes: the input and output messages, the system prompt, the tool
/// definitions, a call's arguments and result; the process's secrets masked even then.
#[test]
fn content_is_captured_only_on_opt_in_and_never_a_secret() {
    let (otlp, received, _) = receiver();
    const KEY: &str = "sk-otel-capture-secret-9a8b7c";
    let (base, _) = serve(vec![
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::tool_call("call_1", "clock", "{}"),
        )
        .unwrap(),
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::text(format!("It is noon, and your key is {KEY}.")),
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
            "-s",
            "Be brief.",
            "what time is it?",
        ],
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
            ("OPENAI_API_KEY", KEY),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let spans = received.lock().unwrap().clone();
    let chats: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "chat m")
        .collect();
    assert_eq!(chats.len(), 2);
    let input = attribute(chats[0], "gen_ai.input.messages").unwrap();
    let input: serde_json::Value =
        serde_json::from_str(input.strip_prefix("str:").unwrap()).unwrap();
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["type"], "text");
    assert_eq!(input[0]["parts"][0]["content"], "what time is it?");
    let system = attribute(chats[0], "gen_ai.system_instructions").unwrap();
    assert!(system.contains("Be brief."), "{system}");
    let tools = attribute(chats[0], "gen_ai.tool.definitions").unwrap();
    assert!(
        tools.contains("\"type\":\"function\"") && tools.contains("clock"),
        "{tools}"
    );
    let first_out = attribute(chats[0], "gen_ai.output.messages").unwrap();
    assert!(first_out.contains("\"type\":\"tool_call\""), "{first_out}");
    let last_out = attribute(chats[1], "gen_ai.output.messages").unwrap();
    assert!(last_out.contains("It is noon"), "{last_out}");
    assert!(last_out.contains("finish_reason"), "{last_out}");
    let tool = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "execute_tool clock")
        .unwrap();
    assert!(attribute(tool, "gen_ai.tool.call.arguments").is_some());
    assert!(attribute(tool, "gen_ai.tool.call.result").is_some());
    // The key the model echoed is masked in every attribute.
    for (_, span) in &spans {
        for kv in &span.attributes {
            let v = shown(kv.value.as_ref().and_then(|v| v.value.as_ref()));
            assert!(!v.contains(KEY), "{}: {v}", kv.key);
        }
    }
}

/// Round 5: a typed run whose answers stay wrong exported the model's answer in the
/// `run attempt failed` event's `error` without the content opt-in. Without it, the
/// event carries the error's type and the JSON pointer; with it, the text.
#[test]
fn a_wrong_answer_reaches_a_span_only_with_the_content_opt_in() {
    const MARK: &str = "MODEL-ANSWER-TEXT-5f3a";
    let schema =
        r#"{"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}"#;
    let wrong = format!(r#"{{"n": "{MARK}"}}"#);
    for opt_in in [false, true] {
        let (otlp, received, _) = receiver();
        let body =
            || render_stream(Format::OPENAI_CHAT, &ResponseScript::text(wrong.clone())).unwrap();
        let (base, _) = serve(vec![body(), body(), body(), body()]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.schema.json");
        std::fs::write(&path, schema).unwrap();
        let mut env = vec![("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str())];
        if opt_in {
            env.push(("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"));
        }
        let out = llmchain_with_env(
            &[
                "run",
                "--base-url",
                &base,
                "--model",
                "m",
                "--schema",
                &path.display().to_string(),
                "a number",
            ],
            dir.path(),
            &env,
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        // The last export may still be in the receiver's hands when the process is gone.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !received
            .lock()
            .unwrap()
            .iter()
            .any(|(_, s)| s.name.starts_with("llmchain run"))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let spans = received.lock().unwrap().clone();
        let failed = spans
            .iter()
            .flat_map(|(_, s)| s.events.iter())
            .find(|e| e.name == "run attempt failed")
            .unwrap_or_else(|| {
                let seen: Vec<(String, Vec<String>)> = spans
                    .iter()
                    .map(|(_, s)| {
                        (
                            s.name.clone(),
                            s.events.iter().map(|e| e.name.clone()).collect(),
                        )
                    })
                    .collect();
                panic!(
                    "opt-in {opt_in}: no failed attempt event in {seen:?}; {}",
                    text(&out)
                )
            });
        let attr = |k: &str| {
            failed
                .attributes
                .iter()
                .find(|kv| kv.key == k)
                .map(|kv| shown(kv.value.as_ref().and_then(|v| v.value.as_ref())))
                .unwrap_or_default()
        };
        assert_eq!(attr("error.type"), "str:invalid_answer");
        assert!(attr("error").contains("/n"), "{}", attr("error"));
        let everything: String = spans
            .iter()
            .flat_map(|(_, s)| {
                s.attributes
                    .iter()
                    .chain(s.events.iter().flat_map(|e| e.attributes.iter()))
                    .map(|kv| shown(kv.value.as_ref().and_then(|v| v.value.as_ref())))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(everything.contains(MARK), opt_in, "opt-in {opt_in}");
    }
}

/// Issue 49: with the content opt-in, what a guard holds back never reaches a span: the
/// `execute_tool` span records the result as the model sees it, the `chat` spans the
/// person's message and the answer as guarded.
#[test]
fn what_a_guard_holds_back_reaches_no_span() {
    let (otlp, received, _) = receiver();
    let (base, _) = serve(vec![
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::tool_call("call_1", "read_file", r#"{"path":"contacts.txt"}"#),
        )
        .unwrap(),
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::text("Ann is at ann@corp.example."),
        )
        .unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("contacts.txt"), "Ann: ann@corp.example\n").unwrap();
    common::write_config(
        dir.path(),
        "approve = \"always\"\n\n[[guard]]\nid = \"pii\"\nkind = \"pii\"\n",
    );
    let out = llmchain_with_env(
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "m",
            "mail me at me@home.example: who is in contacts.txt?",
        ],
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let spans = received.lock().unwrap().clone();
    let tool = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "execute_tool read_file")
        .expect("the tool's span");
    let result = attribute(tool, "gen_ai.tool.call.result").unwrap();
    assert!(result.contains("[redacted email]"), "{result}");
    let mut redacted = 0;
    for (_, span) in &spans {
        for kv in &span.attributes {
            let v = shown(kv.value.as_ref().and_then(|v| v.value.as_ref()));
            assert!(
                !v.contains("ann@corp.example") && !v.contains("me@home.example"),
                "{} {}: {v}",
                span.name,
                kv.key
            );
            redacted += usize::from(v.contains("[redacted email]"));
        }
    }
    assert!(redacted >= 3, "the chat spans carry the guarded texts");
}
