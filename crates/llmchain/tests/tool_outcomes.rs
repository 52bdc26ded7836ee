//! Every body outcome, every rejection path and every failure around the body of a
//! single tool, with the exact texts the model sees.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use llmchain::message::{ContentPart, ContentType, ResultKind, ToolResult};
use llmchain::tool::{Tool, ToolContext, ToolHandler, ToolOutput};
use serde_json::{Map, Value, json};

const EXPLODE_LINE: u32 = line!() + 2;
fn explode() -> String {
    panic!("boom")
}

fn explode_at() -> String {
    format!("{}:{EXPLODE_LINE}:5", file!())
}

fn weather_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 100},
            "days": {"type": "integer", "minimum": 1}
        },
        "required": ["city"],
        "additionalProperties": false
    })
}

/// A tool whose body returns `out` and counts its runs.
fn returning(out: ToolOutput, runs: Arc<AtomicUsize>) -> Tool {
    Tool::builder("get_weather")
        .description("Weather.")
        .schema(weather_schema())
        .handler(move |_, _| {
            let out = out.clone();
            runs.fetch_add(1, Ordering::SeqCst);
            async move { out }
        })
        .build()
        .unwrap()
}

async fn run(tool: &Tool, args: Value) -> ToolResult {
    tool.execute(args, ToolContext::new("call_1")).await
}

fn flags(r: &ToolResult) -> (bool, bool, bool, bool) {
    (
        r.is_error(),
        r.is_refusal(),
        r.is_exception(),
        r.is_interrupt(),
    )
}

const OK: (bool, bool, bool, bool) = (false, false, false, false);
const ERROR: (bool, bool, bool, bool) = (true, false, false, false);
const REFUSAL: (bool, bool, bool, bool) = (true, true, false, false);
const EXCEPTION: (bool, bool, bool, bool) = (true, false, true, false);
const INTERRUPT: (bool, bool, bool, bool) = (false, false, false, true);

#[tokio::test]
async fn body_outcomes_map_as_the_seeds_say() {
    let runs = Arc::new(AtomicUsize::new(0));
    let args = json!({"city": "Paris"});

    // Text.
    let r = run(&returning("18C".into(), runs.clone()), args.clone()).await;
    assert_eq!(flags(&r), OK);
    assert_eq!(r.tool_call_id, "call_1");
    assert_eq!(r.name.as_deref(), Some("get_weather"));
    assert_eq!(r.display_text.as_deref(), Some("Get weather"));
    assert_eq!(r.content, vec![ContentPart::text("18C")]);
    assert_eq!(r.processed_content, None);

    // Text + processed data: kept, never sent.
    let r = run(
        &returning(
            ("String response for LLM", json!({"temp_c": 18})).into(),
            runs.clone(),
        ),
        args.clone(),
    )
    .await;
    assert_eq!(flags(&r), OK);
    assert_eq!(r.content_text(), "String response for LLM");
    assert_eq!(r.processed_content, Some(json!({"temp_c": 18})));
    let wire = serde_json::to_value(&r).unwrap();
    assert_eq!(wire["processed_content"], json!({"temp_c": 18}));

    // Content parts: text, image, file.
    let parts = vec![
        ContentPart::text("a chart"),
        ContentPart::image("iVBOR", "image/png"),
        ContentPart::file("JVBER", "application/pdf"),
    ];
    let r = run(&returning(parts.clone().into(), runs.clone()), args.clone()).await;
    assert_eq!(flags(&r), OK);
    assert_eq!(r.content, parts);
    assert_eq!(r.content[1].r#type, ContentType::Image);

    // A full ToolResult: id overwritten, name and display text filled in when unset,
    // its own flags and options kept.
    let full = ToolResult::error("wrong_id", "quota exceeded")
        .with_option("cache_control", json!({"type": "ephemeral"}));
    let r = run(&returning(full.into(), runs.clone()), args.clone()).await;
    assert_eq!(flags(&r), ERROR);
    assert_eq!(r.tool_call_id, "call_1");
    assert_eq!(r.name.as_deref(), Some("get_weather"));
    assert_eq!(r.display_text.as_deref(), Some("Get weather"));
    assert_eq!(r.content_text(), "quota exceeded");
    assert_eq!(r.options["cache_control"], json!({"type": "ephemeral"}));
    let own = ToolResult::text("x", "fine")
        .with_name("alias")
        .with_display_text("Mine");
    let r = run(&returning(own.into(), runs.clone()), args.clone()).await;
    assert_eq!(r.name.as_deref(), Some("alias"));
    assert_eq!(r.display_text.as_deref(), Some("Mine"));

    // Error.
    let r = run(
        &returning(Err::<String, _>("no such city").into(), runs.clone()),
        args.clone(),
    )
    .await;
    assert_eq!(flags(&r), ERROR);
    assert_eq!(r.kind(), ResultKind::Error);
    assert_eq!(r.content_text(), "no such city");

    // Explicit refusal.
    let r = run(
        &returning(
            ToolOutput::refusal("city is not served; nothing was written"),
            runs.clone(),
        ),
        args.clone(),
    )
    .await;
    assert_eq!(flags(&r), REFUSAL);
    assert_eq!(r.content_text(), "city is not served; nothing was written");

    // Interrupt: message + data.
    let r = run(
        &returning(
            ToolOutput::interrupt("Waiting for approval", json!({"ask": "approve?"})),
            runs.clone(),
        ),
        args.clone(),
    )
    .await;
    assert_eq!(flags(&r), INTERRUPT);
    assert_eq!(r.content_text(), "Waiting for approval");
    assert_eq!(r.interrupt_data(), Some(&json!({"ask": "approve?"})));

    assert_eq!(runs.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn required_key_check_refuses_with_suggestions() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = returning("x".into(), runs.clone());
    let r = run(&tool, json!({"town": "Paris", "day": 2})).await;
    assert_eq!(flags(&r), REFUSAL);
    assert_eq!(
        r.content_text(),
        "Missing required parameters for this tool.\n\n\
         Required parameters: city\n\
         Missing parameters: city\n\
         Unrecognized parameters: day (did you mean \"days\"?), town\n\
         Accepted parameters: city, days\n\n\
         Ensure you're passing the correct parameter names as defined in the tool schema."
    );
    assert_eq!(r.name.as_deref(), Some("get_weather"));
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the body never ran");
}

#[tokio::test]
async fn schema_validation_lists_every_violation() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = returning("x".into(), runs.clone());
    let r = run(&tool, json!({"city": 7, "days": 0, "hourly": true})).await;
    assert_eq!(flags(&r), REFUSAL);
    assert_eq!(
        r.content_text(),
        "The arguments do not match the tool's parameters schema.\n\n\
         - /city: 7 is not of type \"string\"\n\
         - /days: 0 is less than the minimum of 1\n\
         - (root): Additional properties are not allowed ('hourly' was unexpected)\n\n\
         Fix these and call the tool again."
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn parse_args_replaces_the_checks_and_may_rewrite() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    type Parse = fn(Map<String, Value>) -> Result<Map<String, Value>, String>;
    let tool = |parse: Parse| {
        let seen = seen.clone();
        Tool::builder("get_weather")
            .schema(weather_schema())
            .parse_args(parse)
            .handler(move |args, _| {
                seen.lock().unwrap().push(Value::Object(args));
                async { "ran" }
            })
            .build()
            .unwrap()
    };

    // Passing the map on unchanged: the missing required key no longer matters.
    let r = run(&tool(Ok), json!({"town": "Paris"})).await;
    assert_eq!(flags(&r), OK);
    // Rewriting.
    let r = run(
        &tool(|mut m| {
            let town = m.remove("town").unwrap_or(Value::Null);
            m.insert("city".into(), town);
            Ok(m)
        }),
        json!({"town": "Paris"}),
    )
    .await;
    assert_eq!(r.content_text(), "ran");
    // Rejecting: a refusal with the parser's text; the body does not run.
    let r = run(
        &tool(|_| Err("city must be a known city".into())),
        json!({"city": "Atlantis"}),
    )
    .await;
    assert_eq!(flags(&r), REFUSAL);
    assert_eq!(r.content_text(), "city must be a known city");

    assert_eq!(
        *seen.lock().unwrap(),
        vec![json!({"town": "Paris"}), json!({"city": "Paris"})]
    );
}

#[tokio::test]
async fn typed_handler_refuses_arguments_that_do_not_deserialize() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        city: String,
    }
    // A loose hand-written schema lets {"city": 5} through to deserialization.
    let tool = Tool::builder("t")
        .schema(json!({"type": "object"}))
        .typed_handler(|a: Args, _| async move { a.city })
        .build()
        .unwrap();
    let r = run(&tool, json!({"city": 5})).await;
    assert_eq!(flags(&r), REFUSAL);
    assert_eq!(
        r.content_text(),
        "The arguments could not be read: invalid type: integer `5`, expected a string (at city). \
         Call the tool again with arguments that match its schema."
    );
    assert_eq!(
        run(&tool, json!({"city": "Oslo"})).await.content_text(),
        "Oslo"
    );
}

#[tokio::test]
async fn trait_impl_tool() {
    struct Greeter {
        greeting: &'static str,
    }
    impl ToolHandler for Greeter {
        async fn call(&self, args: Map<String, Value>, ctx: ToolContext) -> ToolOutput {
            let name = args.get("name").and_then(Value::as_str).unwrap_or("you");
            format!("{} {name} ({})", self.greeting, ctx.tool_call_id()).into()
        }
    }
    let tool = Tool::builder("greet")
        .schema(
            json!({"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}),
        )
        .handler_impl(Greeter { greeting: "Hello" })
        .build()
        .unwrap();
    let r = run(&tool, json!({"name": "Ada"})).await;
    assert_eq!(r.content_text(), "Hello Ada (call_1)");
}

#[tokio::test]
async fn context_carries_id_custom_context_and_token() {
    struct App {
        user: &'static str,
    }
    let tool = Tool::builder("whoami")
        .handler(|_, ctx: ToolContext| async move {
            let user = ctx.custom::<App>().map_or("?", |a| a.user);
            format!(
                "{user} via {} (cancelled: {})",
                ctx.tool_call_id(),
                ctx.is_cancelled()
            )
        })
        .build()
        .unwrap();
    let r = tool
        .execute(
            json!({}),
            ToolContext::new("call_9").with_custom(App { user: "ada" }),
        )
        .await;
    assert_eq!(r.content_text(), "ada via call_9 (cancelled: false)");
}

fn panicking(kind: &str) -> Tool {
    let b = Tool::builder("t");
    match kind {
        "sync" => b.handler(|_, _| {
            let s = explode();
            async move { s }
        }),
        "async" => b.handler(|_, _| async move {
            tokio::task::yield_now().await;
            explode()
        }),
        "parse_args" => b
            .parse_args(|m| {
                let _ = explode();
                Ok::<_, String>(m)
            })
            .handler(|_, _| async { "never" }),
        "payload" => b.handler(|_, _| async move {
            if true {
                std::panic::panic_any(42_u8);
            }
            "never"
        }),
        _ => unreachable!(),
    }
    .build()
    .unwrap()
}

#[tokio::test]
async fn panics_are_caught_with_their_location() {
    for kind in ["sync", "async"] {
        let r = run(&panicking(kind), json!({})).await;
        assert_eq!(flags(&r), EXCEPTION, "{kind}");
        assert_eq!(
            r.content_text(),
            format!("ERROR: tool t panicked: boom at {}", explode_at()),
            "{kind}"
        );
        let e = r.exception_info().unwrap();
        assert_eq!(e.message, "boom");
        assert_eq!(e.location.as_deref(), Some(explode_at().as_str()));
        assert_eq!(r.name.as_deref(), Some("t"));
        // The exception is virtual: never on the wire.
        let back: ToolResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert!(back.is_exception() && back.exception_info().is_none());
    }

    let r = run(&panicking("parse_args"), json!({})).await;
    assert_eq!(flags(&r), EXCEPTION);
    assert_eq!(
        r.content_text(),
        format!(
            "ERROR: tool t panicked while parsing its arguments: boom at {}",
            explode_at()
        )
    );

    let r = run(&panicking("payload"), json!({})).await;
    assert_eq!(flags(&r), EXCEPTION);
    assert!(
        r.content_text()
            .starts_with("ERROR: tool t panicked: a panic whose payload is not a string at "),
        "{}",
        r.content_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_are_caught_on_a_multi_threaded_runtime() {
    let tool = Tool::builder("t")
        .handler(|_, _| async move {
            // Hop threads before panicking.
            tokio::task::spawn(async {}).await.ok();
            tokio::time::sleep(Duration::from_millis(1)).await;
            explode()
        })
        .build()
        .unwrap();
    let r = run(&tool, json!({})).await;
    assert_eq!(
        r.content_text(),
        format!("ERROR: tool t panicked: boom at {}", explode_at())
    );
}

#[tokio::test(start_paused = true)]
async fn a_hanging_tool_times_out() {
    let dropped = Arc::new(AtomicUsize::new(0));
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = dropped.clone();
    let tool = Tool::builder("slow")
        .timeout(Duration::from_millis(1500))
        .handler(move |_, _| {
            let guard = OnDrop(d.clone());
            async move {
                let _guard = guard;
                std::future::pending::<String>().await
            }
        })
        .build()
        .unwrap();
    let r = run(&tool, json!({})).await;
    assert_eq!(flags(&r), ERROR);
    assert_eq!(
        r.content_text(),
        "Tool slow timed out after 1500 ms and was stopped; it may have done part of its work."
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the body was dropped");
}

#[tokio::test]
async fn a_tool_cancelled_mid_way() {
    let started = Arc::new(tokio::sync::Notify::new());
    let s = started.clone();
    let tool = Tool::builder("long_job")
        .handler(move |_, _| {
            let s = s.clone();
            async move {
                s.notify_one();
                std::future::pending::<String>().await
            }
        })
        .build()
        .unwrap();
    let token = llmchain::tool::CancellationToken::new();
    let ctx = ToolContext::new("call_1").with_cancellation(token.clone());
    let (r, ()) = tokio::join!(tool.execute(json!({}), ctx), async {
        started.notified().await;
        token.cancel();
    });
    assert_eq!(flags(&r), ERROR);
    assert_eq!(
        r.content_text(),
        "Tool long_job was cancelled before it finished; it may have done part of its work."
    );

    // Already cancelled: the body never starts.
    let r = tool
        .execute(json!({}), ToolContext::new("c").with_cancellation(token))
        .await;
    assert_eq!(flags(&r), ERROR);
    assert_eq!(
        r.content_text(),
        "Tool long_job was cancelled before it started."
    );
}

#[tokio::test]
async fn bad_arguments_of_every_json_type() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = returning("ran".into(), runs.clone());
    for (args, kind) in [
        (json!([1, 2]), "an array"),
        (json!("Paris"), "a string"),
        (json!(42), "a number"),
        (json!(true), "a boolean"),
    ] {
        let r = run(&tool, args).await;
        assert_eq!(flags(&r), REFUSAL);
        assert_eq!(
            r.content_text(),
            format!(
                "The arguments of tool get_weather must be a JSON object, but they are {kind}. \
                 Call the tool again with an object of named parameters."
            )
        );
    }
    // null counts as {} (as in the reference), so the required-key check speaks.
    let r = run(&tool, Value::Null).await;
    assert_eq!(flags(&r), REFUSAL);
    assert!(r.content_text().starts_with("Missing required parameters for this tool.\n\nRequired parameters: city\nMissing parameters: city\n"));

    // Deeply nested (as deep as serde_json parses: 127 levels).
    let mut text = String::from("{\"city\": ");
    text.push_str(&"{\"a\": ".repeat(126));
    text.push('1');
    text.push_str(&"}".repeat(127));
    let deep: Value = serde_json::from_str(&text).unwrap();
    let r = run(&tool, deep).await;
    assert_eq!(flags(&r), REFUSAL);
    let t = r.content_text();
    assert!(
        t.starts_with(
            "The arguments do not match the tool's parameters schema.\n\n- /city: {\"a\":{\"a\":"
        ),
        "{t}"
    );
    assert!(t.contains("… (truncated)"), "{t}");

    // 10 MB: refused quickly with a short message, not a 10 MB one.
    let big = "x".repeat(10 * 1024 * 1024);
    let r = run(&tool, json!({"city": big})).await;
    assert_eq!(flags(&r), REFUSAL);
    assert!(r.content_text().len() < 1000, "{}", r.content_text().len());
    assert!(r.content_text().contains("- /city: \"xxxx"));
    // 10 MB of many violations: listed up to the cap.
    let many: Vec<Value> = (0..200_000).map(|i| json!(i)).collect();
    let r = run(
        &Tool::builder("t")
            .schema(json!({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}))
            .handler(|_, _| async { "ran" })
            .build()
            .unwrap(),
        json!({"tags": many}),
    )
    .await;
    let t = r.content_text();
    assert!(
        t.contains("- /tags/0: 0 is not of type \"string\"\n"),
        "{t}"
    );
    assert!(
        t.contains("- /tags/49: 49 is not of type \"string\"\n- and 199950 more\n"),
        "{t}"
    );

    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "no bad argument reached the body"
    );
}

/// The executor's result-size cap: content is counted in bytes over every part (text,
/// and base64 data for images and files); a result at the cap is kept, one byte over
/// becomes an error result with the exact text below, whatever kind the body returned.
#[tokio::test]
async fn results_over_the_size_cap_become_errors_naming_tool_size_and_limit() {
    use llmchain::message::ToolCall;
    use llmchain::tool::{DEFAULT_MAX_RESULT_BYTES, ToolExecutor};

    assert_eq!(DEFAULT_MAX_RESULT_BYTES, 1 << 20);
    let tool = |name: &str, out: ToolOutput| {
        Tool::builder(name)
            .handler(move |_, _| {
                let out = out.clone();
                async move { out }
            })
            .build()
            .unwrap()
    };
    let parts = vec![
        ContentPart::text("é".repeat(30)),               // 60 bytes
        ContentPart::image("A".repeat(40), "image/png"), // 40 bytes of base64
    ];
    let executor = ToolExecutor::new([
        tool("at_cap", ToolOutput::text("x".repeat(100))),
        tool("parts", ToolOutput::Parts(parts.clone())),
        tool("over", ToolOutput::text("x".repeat(101))),
        tool("big_error", ToolOutput::error("e".repeat(500))),
        tool("big_refusal", ToolOutput::refusal("r".repeat(500))),
        tool(
            "big_data",
            ToolOutput::with_data("small", json!({"blob": "d".repeat(5000)})),
        ),
    ])
    .unwrap()
    .with_max_result_bytes(100);
    let mut calls: Vec<ToolCall> = [
        "at_cap",
        "parts",
        "over",
        "big_error",
        "big_refusal",
        "big_data",
    ]
    .iter()
    .enumerate()
    .map(|(i, n)| ToolCall::function(format!("c{i}"), *n, json!({})).unwrap())
    .collect();
    let results = executor.execute(&mut calls).await;

    assert_eq!(flags(&results[0]), OK);
    assert_eq!(results[0].content_text().len(), 100);
    assert_eq!(flags(&results[1]), OK, "100 bytes of parts are at the cap");
    assert_eq!(results[1].content, parts);
    // Native data is not content: it never goes to the model.
    assert_eq!(flags(&results[5]), OK);

    let over = |name: &str, size: usize| {
        format!(
            "Tool {name} returned {size} bytes of content, more than the limit of 100 bytes; \
             the output was discarded. Call the tool again in a way that returns less \
             (a narrower query, fewer fields or a page of results)."
        )
    };
    for (i, name, size) in [
        (2, "over", 101),
        (3, "big_error", 500),
        (4, "big_refusal", 500),
    ] {
        let r = &results[i];
        assert_eq!(flags(r), (true, false, false, false), "{name}: {r:?}");
        assert_eq!(r.content_text(), over(name, size));
        assert_eq!(r.tool_call_id, format!("c{i}"));
        assert_eq!(r.name.as_deref(), Some(name));
        assert!(r.processed_content.is_none());
        assert_eq!(calls[i].execution_status(), "failed");
    }
    assert_eq!(calls[0].execution_status(), "completed");
}

/// `is_exception` marks results where the runtime rescued a panic. A tool that builds
/// an exception result itself claims a panic that never happened: it is recorded as a
/// plain error with the same content, and no exception is attached.
#[tokio::test]
async fn a_tool_made_exception_result_is_a_plain_error() {
    let made = ToolResult::exception(
        "ignored",
        "it went wrong",
        llmchain::message::ToolException {
            message: "not a panic".into(),
            location: None,
            backtrace: None,
        },
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = returning(ToolOutput::Result(Box::new(made)), runs);
    let r = run(&tool, json!({"city": "Oslo"})).await;
    assert_eq!(flags(&r), ERROR, "{r:?}");
    assert_eq!(r.kind(), ResultKind::Error);
    assert!(r.exception_info().is_none());
    assert_eq!(r.content_text(), "it went wrong");
    assert_eq!(r.tool_call_id, "call_1");
}
