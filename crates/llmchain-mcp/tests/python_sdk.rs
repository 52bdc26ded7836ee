//! The client against a server written with the official Python SDK
//! (tests/servers/sdk_server.py). Needs `LLMCHAIN_TEST_MCP_PYTHON`, a python with `mcp`
//! installed (tests/setup-python.sh; `.ci/run` sets it). Without it these tests print a
//! SKIPPED line and pass.

use std::time::Duration;

use llmchain::tool::{CancellationToken, ToolContext};
use llmchain_mcp::{McpClient, McpOptions, McpTool, Prefix, ServerSpec, connect_all};
use serde_json::json;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/sdk_server.py");

fn python(test: &str) -> Option<String> {
    match std::env::var("LLMCHAIN_TEST_MCP_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            eprintln!(
                "SKIPPED {test}: LLMCHAIN_TEST_MCP_PYTHON is not set (run crates/llmchain-mcp/tests/setup-python.sh)"
            );
            None
        }
    }
}

fn opts() -> McpOptions {
    McpOptions {
        timeout: Duration::from_secs(20),
        handshake_timeout: Duration::from_secs(30),
        ..McpOptions::default()
    }
}

async fn tools(py: &str, opts: McpOptions) -> Vec<McpTool> {
    let client = McpClient::connect(ServerSpec::stdio(py, [SCRIPT]), opts)
        .await
        .unwrap();
    client.tools().await.unwrap()
}

fn find<'a>(tools: &'a [McpTool], name: &str) -> &'a McpTool {
    tools
        .iter()
        .find(|t| t.tool.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_tools_with_schemas_and_hints() {
    let Some(py) = python("lists_tools_with_schemas_and_hints") else {
        return;
    };
    let tools = tools(&py, opts()).await;
    let names: Vec<&str> = tools.iter().map(|t| t.tool.name()).collect();
    for n in [
        "echo",
        "image",
        "weather",
        "delete_thing",
        "strict_params",
        "slow",
        "huge",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    let echo = find(&tools, "echo");
    assert_eq!(echo.tool.description(), "Echoes the text back.");
    assert_eq!(echo.tool.display_text(), "Echo text");
    assert_eq!(echo.tool.parameters_schema()["required"], json!(["text"]));
    assert!(echo.hints.read_only && !echo.hints.destructive && echo.hints.idempotent);
    assert!(echo.tool.idempotent());
    let del = find(&tools, "delete_thing");
    assert!(!del.hints.read_only && del.hints.destructive && !del.tool.idempotent());
    assert_eq!(del.server, "sdk_server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maps_text_image_structured_error_and_refusal() {
    let Some(py) = python("maps_text_image_structured_error_and_refusal") else {
        return;
    };
    let tools = tools(&py, opts()).await;
    let run = |name: &str, args: serde_json::Value| {
        let t = find(&tools, name).tool.clone();
        async move { t.execute(args, ToolContext::new("c1")).await }
    };

    let r = run("echo", json!({"text": "hi"})).await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(r.content_text(), "echo: hi");
    assert_eq!(r.name.as_deref(), Some("echo"));

    let r = run("image", json!({})).await;
    assert_eq!(r.content.len(), 2, "{r:?}");
    assert_eq!(r.content[0].as_text(), Some("a pixel"));
    assert!(r.content[1].is_image());
    assert_eq!(r.content[1].media(), Some("image/png"));

    let r = run("weather", json!({"city": "Paris"})).await;
    assert!(!r.is_error());
    assert_eq!(
        r.processed_content,
        Some(json!({"city": "Paris", "temp_c": 18.5}))
    );

    let r = run("delete_thing", json!({"name": "x"})).await;
    assert!(r.is_error() && !r.is_refusal(), "{r:?}");
    assert_eq!(r.content_text(), "cannot delete x: locked");

    let r = run("strict_params", json!({"count": -1})).await;
    assert!(r.is_refusal(), "{r:?}");
    assert!(
        r.content_text().contains("count must be >= 0"),
        "{}",
        r.content_text()
    );

    // Our own schema check refuses before the server sees it.
    let r = run("strict_params", json!({"count": "many"})).await;
    assert!(r.is_refusal(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_calls_time_out_and_cancel_and_the_server_stays_usable() {
    let Some(py) = python("slow_calls_time_out_and_cancel_and_the_server_stays_usable") else {
        return;
    };
    let tools = tools(
        &py,
        McpOptions {
            timeout: Duration::from_millis(500),
            ..opts()
        },
    )
    .await;
    let slow = find(&tools, "slow");
    let r = slow
        .tool
        .execute(json!({"seconds": 30}), ToolContext::new("c1"))
        .await;
    assert!(
        r.is_error() && r.content_text().contains("timed out"),
        "{r:?}"
    );

    let token = CancellationToken::new();
    token.cancel();
    let r = slow
        .tool
        .execute(
            json!({"seconds": 30}),
            ToolContext::new("c2").with_cancellation(token),
        )
        .await;
    assert!(r.is_error(), "{r:?}");

    let r = find(&tools, "echo")
        .tool
        .execute(json!({"text": "still here"}), ToolContext::new("c3"))
        .await;
    assert_eq!(r.content_text(), "echo: still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_results_are_capped() {
    let Some(py) = python("huge_results_are_capped") else {
        return;
    };
    let tools = tools(
        &py,
        McpOptions {
            max_result_bytes: 100_000,
            ..opts()
        },
    )
    .await;
    let r = find(&tools, "huge")
        .tool
        .execute(json!({"megabytes": 2}), ToolContext::new("c1"))
        .await;
    assert!(r.is_error(), "{r:?}");
    assert!(
        r.content_text()
            .contains("more than the 100000 bytes allowed"),
        "{}",
        r.content_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_collisions_get_the_server_prefix() {
    let Some(py) = python("name_collisions_get_the_server_prefix") else {
        return;
    };
    let spec = ServerSpec::stdio(&py, [SCRIPT]);
    let tools = connect_all([spec.clone()], &opts(), &["echo"])
        .await
        .unwrap();
    assert!(tools.iter().any(|t| t.tool.name() == "sdk_server__echo"));
    assert!(tools.iter().any(|t| t.tool.name() == "image"));
    let r = find(&tools, "sdk_server__echo")
        .tool
        .execute(json!({"text": "x"}), ToolContext::new("c"))
        .await;
    assert_eq!(r.content_text(), "echo: x");

    let e = connect_all(
        [spec.clone()],
        &McpOptions {
            prefix: Prefix::Never,
            ..opts()
        },
        &["echo"],
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("already taken"), "{e}");

    let tools = connect_all(
        [spec],
        &McpOptions {
            prefix: Prefix::Custom("py".into()),
            ..opts()
        },
        &[],
    )
    .await
    .unwrap();
    assert!(tools.iter().all(|t| t.tool.name().starts_with("py__")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http() {
    let Some(py) = python("streamable_http") else {
        return;
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new(&py)
        .args([SCRIPT, "--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    // Wait for the server to listen (bounded; not a timing assertion).
    let mut client = None;
    for _ in 0..100 {
        if let Ok(c) = McpClient::connect(ServerSpec::http(&url), opts()).await {
            client = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let client = client.expect("the HTTP server came up");
    let tools = client.tools().await.unwrap();
    let r = find(&tools, "weather")
        .tool
        .execute(json!({"city": "Oslo"}), ToolContext::new("c1"))
        .await;
    assert_eq!(
        r.processed_content,
        Some(json!({"city": "Oslo", "temp_c": 18.5}))
    );
    assert_eq!(client.name(), "127_0_0_1");
    // A reply over 16 MiB (the message cap, applied to one SSE event or JSON body)
    // fails the call at once, naming the cap, instead of waiting for the call's timeout.
    let started = std::time::Instant::now();
    let r = find(&tools, "huge")
        .tool
        .execute(json!({"megabytes": 17}), ToolContext::new("c2"))
        .await;
    let took = started.elapsed();
    assert!(r.is_error(), "{r:?}");
    assert!(
        r.content_text().contains("failed during the call to huge"),
        "{r:?}"
    );
    assert!(
        r.content_text()
            .contains("it sent a message of more than 16777216 bytes"),
        "{}",
        r.content_text()
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
    child.kill().await.unwrap();
}

/// Every kind of MCP content survives into the result, in order, and reaches every
/// wire where its API takes it (or as text naming it): text blocks apart, the blob as
/// a file part, the image, the link; `structuredContent` in `processed_content`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_content_kind_survives_and_reaches_every_wire() {
    use llmchain::conversation::Conversation;
    use llmchain::message::{ContentType, Message, ToolCall};
    use llmchain::provider::{Format, RequestOptions};

    let Some(py) = python("every_content_kind_survives_and_reaches_every_wire") else {
        return;
    };
    let tools = tools(&py, opts()).await;
    let r = find(&tools, "resources")
        .tool
        .execute(json!({}), ToolContext::new("call_1"))
        .await;
    assert!(!r.is_error(), "{r:?}");
    let types: Vec<ContentType> = r.content.iter().map(|p| p.r#type).collect();
    assert_eq!(
        types,
        [
            ContentType::Text,
            ContentType::Text,
            ContentType::Text,
            ContentType::File,
            ContentType::Image,
            ContentType::Text
        ]
    );
    assert_eq!(r.content[2].as_text(), Some("plain body"));
    assert_eq!(r.content[3].media(), Some("application/gzip"));
    assert_eq!(r.content[3].options["uri"], "file:///data/archive.gz");
    assert_eq!(r.processed_content, Some(json!({"count": 6})));

    let mut conv = Conversation::new();
    conv.messages.push(Message::user("read"));
    conv.messages.push(Message::assistant_with_calls(
        "",
        vec![ToolCall::function("call_1", "resources", "{}").unwrap()],
    ));
    conv.messages.push(Message::tool(vec![r.clone()]));
    for format in [
        Format::OPENAI_CHAT,
        Format::OPENAI_RESPONSES,
        Format::ANTHROPIC,
        Format::GEMINI,
        Format::OLLAMA,
    ] {
        let body = format
            .codec()
            .encode(&conv, &RequestOptions::default())
            .unwrap();
        let text = String::from_utf8(body).unwrap();
        assert!(
            !text.contains("Resource 3:Resource 3"),
            "{format:?}: {text}"
        );
        // The blob: as data where taken, else named by a placeholder; never an
        // Anthropic document of another type than PDF.
        assert!(
            text.contains("[file not sent: application/gzip"),
            "{format:?}: {text}"
        );
        assert!(
            !text.contains("\"media_type\":\"application/gzip\""),
            "{text}"
        );
        assert!(text.contains("[resource people: file:///data/people.csv]"));
        assert!(
            !text.contains("\"count\""),
            "structured content stays local"
        );
    }
}
