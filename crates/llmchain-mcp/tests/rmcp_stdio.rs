//! Our rmcp server ([`serve_stdio`]) over real stdio, driven by our client: this test
//! binary starts itself with `--serve` as the server (custom harness).

use std::time::Duration;

use llmchain::tool::{Tool, ToolContext, ToolOutput};
use llmchain_mcp::{McpClient, McpOptions, ServerSpec, serve_stdio};
use serde_json::json;

fn tools() -> Vec<Tool> {
    let add = Tool::builder("add")
        .description("Adds a and b.")
        .display_text("Add numbers")
        .schema(json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}))
        .idempotent(true)
        .read_only(true)
        .handler(|args, _| async move {
            let s = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
            ToolOutput::with_data(format!("{s}"), json!({"sum": s}))
        })
        .build()
        .unwrap();
    let fail = Tool::builder("fail")
        .description("Always fails.")
        .destructive(false)
        .handler(|_, _| async move { ToolOutput::error("it broke") })
        .build()
        .unwrap();
    let sleepy = Tool::builder("sleepy")
        .description("Sleeps for a minute.")
        .handler(|_, ctx| async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(60)) => "woke".to_owned(),
                () = ctx.cancellation_token().cancelled() => "cancelled".to_owned(),
            }
        })
        .build()
        .unwrap();
    vec![add, fail, sleepy]
}

async fn client_side() {
    let me = std::env::current_exe().unwrap();
    let client = McpClient::connect(
        ServerSpec::stdio(me.to_string_lossy(), ["--serve"]),
        McpOptions {
            timeout: Duration::from_millis(500),
            ..McpOptions::default()
        },
    )
    .await
    .unwrap();
    let tools = client.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.tool.name()).collect();
    assert_eq!(names, ["add", "fail", "sleepy"]);
    let add = &tools[0];
    assert_eq!(add.tool.display_text(), "Add numbers");
    assert!(add.tool.idempotent() && add.hints.idempotent);
    // Every hint is announced: what a tool declares, and the MCP default for what it
    // does not (read-only false, destructive true, open-world true), said out loud.
    assert!(add.hints.read_only && !add.hints.destructive);
    assert_eq!(add.tool.read_only(), Some(true));
    assert!(!tools[1].hints.read_only && !tools[1].hints.destructive);
    assert_eq!(tools[1].tool.read_only(), Some(false));
    assert_eq!(tools[1].tool.destructive(), Some(false));
    assert!(tools[2].hints.destructive && !tools[2].hints.read_only);
    assert_eq!(
        (
            tools[2].tool.read_only(),
            tools[2].tool.destructive(),
            tools[2].tool.open_world()
        ),
        (Some(false), Some(true), Some(true))
    );
    assert_eq!(add.tool.parameters_schema()["required"], json!(["a", "b"]));

    let r = add
        .tool
        .execute(json!({"a": 2, "b": 40}), ToolContext::new("c1"))
        .await;
    assert!(!r.is_error(), "{r:?}");
    // A result with structured data: the text content is that data's JSON, so a client
    // reading either sees the same thing (the MCP spec's backwards-compatible form).
    assert_eq!(r.processed_content, Some(json!({"sum": 42.0})));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&r.content_text()).unwrap(),
        json!({"sum": 42.0})
    );

    let r = tools[1]
        .tool
        .execute(json!({}), ToolContext::new("c2"))
        .await;
    assert!(r.is_error() && !r.is_refusal(), "{r:?}");
    assert_eq!(r.content_text(), "it broke");

    // Server-side argument checks: the client's schema check is bypassed by calling directly.
    let r = client
        .call(
            "add",
            json!({"a": "x"}).as_object().unwrap().clone(),
            &ToolContext::new("c3"),
        )
        .await;
    let r = match r {
        ToolOutput::Result(r) => *r,
        other => panic!("{other:?}"),
    };
    assert!(r.is_error(), "{r:?}");
    assert!(r.content_text().contains("b"), "{}", r.content_text());

    let r = client
        .call("nope", Default::default(), &ToolContext::new("c4"))
        .await;
    match r {
        ToolOutput::Refusal(t) => assert!(t.contains("unknown tool"), "{t}"),
        other => panic!("{other:?}"),
    }

    let r = tools[2]
        .tool
        .execute(json!({}), ToolContext::new("c5"))
        .await;
    assert!(
        r.is_error() && r.content_text().contains("timed out"),
        "{r:?}"
    );
    // Still usable after a timed-out call.
    let r = add
        .tool
        .execute(json!({"a": 1, "b": 1}), ToolContext::new("c6"))
        .await;
    assert_eq!(r.processed_content, Some(json!({"sum": 2.0})));
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().any(|a| a == "--serve") {
        rt.block_on(serve_stdio(tools())).unwrap();
        return;
    }
    // `cargo test -- --list` and filters: behave like a one-test harness.
    if std::env::args().any(|a| a == "--list") {
        println!("rmcp_server_over_stdio: test");
        return;
    }
    rt.block_on(client_side());
    println!("test rmcp_server_over_stdio ... ok");
}
