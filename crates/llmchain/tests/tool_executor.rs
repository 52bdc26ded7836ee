//! The executor: call order, limits, status transitions, unknown tools, incomplete
//! calls, the exception hook and batch cancellation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::message::{ToolCall, ToolCallAttrs, ToolCallStatus, ToolResult};
use llmchain::tool::{
    CancellationToken, ExecutionObserver, ObserverFuture, Tool, ToolContext, ToolError,
    ToolExecutor,
};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::function(id, name, args).unwrap()
}

/// Sleeps `ms` (from the arguments) and answers with it.
fn sleeper() -> Tool {
    Tool::builder("sleep")
        .schema(json!({"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"]}))
        .handler(|args, _| async move {
            let ms = args["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            format!("slept {ms}")
        })
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_thousand_calls_come_back_in_call_order() {
    let fail = Tool::builder("fail")
        .handler(|_, _| async { Err::<String, _>("nope") })
        .build()
        .unwrap();
    let ex = ToolExecutor::new([sleeper(), fail])
        .unwrap()
        .with_max_concurrency(1000)
        .unwrap();
    let mut calls: Vec<ToolCall> = (0..1000)
        .map(|i| match i % 4 {
            // Later calls finish first.
            0 | 1 => call(&format!("c{i}"), "sleep", json!({"ms": 1000 - i})),
            2 => call(&format!("c{i}"), "fail", json!({})),
            _ => call(&format!("c{i}"), "missing", json!({})),
        })
        .collect();
    let results = ex.execute(&mut calls).await;
    assert_eq!(results.len(), 1000);
    for (i, (r, c)) in results.iter().zip(&calls).enumerate() {
        assert_eq!(r.tool_call_id, format!("c{i}"));
        match i % 4 {
            0 | 1 => {
                assert_eq!(r.content_text(), format!("slept {}", 1000 - i));
                assert_eq!(c.execution_status(), "completed");
            }
            2 => {
                assert!(r.is_error() && !r.is_refusal());
                assert_eq!(c.execution_status(), "failed");
            }
            _ => {
                assert!(r.is_refusal());
                assert_eq!(c.execution_status(), "failed");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_calls_on_a_multi_threaded_runtime() {
    let ex = ToolExecutor::new([sleeper()])
        .unwrap()
        .with_max_concurrency(1000)
        .unwrap();
    let mut calls: Vec<ToolCall> = (0..1000)
        .map(|i| call(&format!("c{i}"), "sleep", json!({"ms": (1000 - i) % 7})))
        .collect();
    let results = ex.execute(&mut calls).await;
    let ids: Vec<String> = results.iter().map(|r| r.tool_call_id.clone()).collect();
    let expected: Vec<String> = (0..1000).map(|i| format!("c{i}")).collect();
    assert_eq!(ids, expected);
}

/// A tool that records how many of its calls run at once.
fn gauge(
    name: &str,
    max_concurrency: Option<usize>,
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
) -> Tool {
    let mut b = Tool::builder(name).handler(move |_, _| {
        let (now, peak) = (now.clone(), peak.clone());
        async move {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            "done"
        }
    });
    if let Some(n) = max_concurrency {
        b = b.max_concurrency(n);
    }
    b.build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn per_tool_and_global_limits_hold() {
    // Per tool: 3 at once, although the global limit is higher.
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let ex = ToolExecutor::new([gauge("g", Some(3), now.clone(), peak.clone())]).unwrap();
    let mut calls: Vec<ToolCall> = (0..50)
        .map(|i| call(&format!("c{i}"), "g", json!({})))
        .collect();
    let results = ex.execute(&mut calls).await;
    assert!(results.iter().all(|r| r.content_text() == "done"));
    assert_eq!(peak.load(Ordering::SeqCst), 3);

    // Global: 5 at once across two unlimited tools.
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let ex = ToolExecutor::new([
        gauge("a", None, now.clone(), peak.clone()),
        gauge("b", None, now.clone(), peak.clone()),
    ])
    .unwrap()
    .with_max_concurrency(5)
    .unwrap();
    let mut calls: Vec<ToolCall> = (0..40)
        .map(|i| {
            call(
                &format!("c{i}"),
                if i % 2 == 0 { "a" } else { "b" },
                json!({}),
            )
        })
        .collect();
    ex.execute(&mut calls).await;
    assert_eq!(peak.load(Ordering::SeqCst), 5);

    // The default global limit.
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let ex = ToolExecutor::new([gauge("a", None, now, peak.clone())]).unwrap();
    let mut calls: Vec<ToolCall> = (0..200)
        .map(|i| call(&format!("c{i}"), "a", json!({})))
        .collect();
    ex.execute(&mut calls).await;
    assert_eq!(
        peak.load(Ordering::SeqCst),
        llmchain::tool::DEFAULT_MAX_CONCURRENCY
    );
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
}

impl ExecutionObserver for Recorder {
    fn on_start<'a>(&'a self, call: &'a ToolCall) -> ObserverFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.events.lock().unwrap().push(format!(
                "{} {}",
                call.call_id.as_deref().unwrap_or("-"),
                call.execution_status()
            ));
            Ok(())
        })
    }
    fn on_finish<'a>(&'a self, call: &'a ToolCall, result: &'a ToolResult) -> ObserverFuture<'a> {
        Box::pin(async move {
            self.events.lock().unwrap().push(format!(
                "{} {} error={}",
                call.call_id.as_deref().unwrap_or("-"),
                call.execution_status(),
                result.is_error()
            ));
        })
    }
}

#[tokio::test]
async fn status_moves_identified_executing_completed_or_failed() {
    let ok = Tool::builder("ok")
        .handler(|_, _| async { "fine" })
        .build()
        .unwrap();
    let bad = Tool::builder("bad")
        .handler(|_, _| async { ToolResult::error("x", "broken") })
        .build()
        .unwrap();
    let wait = Tool::builder("ask")
        .handler(|_, _| async { llmchain::tool::ToolOutput::interrupt("Approve?", json!({})) })
        .build()
        .unwrap();
    let rec = Arc::new(Recorder::default());
    let ex = ToolExecutor::new([ok, bad, wait])
        .unwrap()
        .with_max_concurrency(1)
        .unwrap()
        .with_observer(rec.clone());
    let mut calls = vec![
        call("c1", "ok", json!({})),
        call("c2", "bad", json!({})),
        call("c3", "ask", json!({})),
        call("c4", "nope", json!({})),
    ];
    for c in &calls {
        assert_eq!(c.execution_status(), "identified");
    }
    ex.execute(&mut calls).await;
    let statuses: Vec<&str> = calls.iter().map(ToolCall::execution_status).collect();
    assert_eq!(statuses, ["completed", "failed", "completed", "failed"]);
    let mut events = rec.events.lock().unwrap().clone();
    events.sort();
    assert_eq!(
        events,
        [
            "c1 completed error=false",
            "c1 executing",
            "c2 executing",
            "c2 failed error=true",
            "c3 completed error=false",
            "c3 executing",
            "c4 failed error=true",
        ]
    );
}

#[tokio::test]
async fn unknown_tools_are_refused_with_a_suggestion() {
    let weather = Tool::builder("get_weather")
        .handler(|_, _| async { "x" })
        .build()
        .unwrap();
    let search = Tool::builder("search")
        .handler(|_, _| async { "x" })
        .build()
        .unwrap();
    let ex = ToolExecutor::new([weather, search]).unwrap();
    let mut calls = vec![
        call("c1", "get_wether", json!({})),
        call("c2", "zzz", json!({})),
    ];
    let r = ex.execute(&mut calls).await;
    assert!(r[0].is_refusal());
    assert_eq!(
        r[0].content_text(),
        "Tool call made to get_wether but tool not found. Did you mean \"get_weather\"? \
         Available tools: get_weather, search."
    );
    assert_eq!(r[0].name.as_deref(), Some("get_wether"));
    assert_eq!(r[0].display_text.as_deref(), Some("Get wether"));
    assert_eq!(
        r[1].content_text(),
        "Tool call made to zzz but tool not found. Available tools: get_weather, search."
    );

    // A name with control characters (the model's choice) is escaped wherever it is
    // echoed, never printed raw.
    let mut calls = vec![call("c3", "rm\n\u{1b}[2Jx", json!({}))];
    let r = ex.execute(&mut calls).await;
    let text = r[0].content_text();
    assert!(
        text.starts_with("Tool call made to \"rm\\n\\u{1b}[2Jx\" but tool not found."),
        "{text}"
    );
    assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
    let shown = r[0].display_text.clone().unwrap_or_default();
    assert!(
        !shown.contains('\n') && !shown.contains('\u{1b}'),
        "{shown}"
    );

    let empty = ToolExecutor::new([]).unwrap();
    let mut calls = vec![call("c1", "x", json!({}))];
    assert_eq!(
        empty.execute(&mut calls).await[0].content_text(),
        "Tool call made to x but tool not found. No tools are available."
    );
}

#[tokio::test]
async fn incomplete_calls_never_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r2 = runs.clone();
    let t = Tool::builder("t")
        .handler(move |_, _| {
            r2.fetch_add(1, Ordering::SeqCst);
            async { "ran" }
        })
        .build()
        .unwrap();
    let ex = ToolExecutor::new([t]).unwrap();
    let incomplete = |args: &str| {
        ToolCall::new(ToolCallAttrs {
            status: ToolCallStatus::Incomplete,
            call_id: Some("c1".into()),
            name: Some("t".into()),
            arguments: Some(args.into()),
            ..Default::default()
        })
        .unwrap()
    };
    // Deeper than serde_json's recursion limit.
    let deep = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let mut calls = vec![
        incomplete(r#"{"city": "Par"#),
        incomplete("null"),
        incomplete(&deep),
        incomplete("{}"),
    ];
    let r = ex.execute(&mut calls).await;
    let texts: Vec<String> = r.iter().map(ToolResult::content_text).collect();
    assert_eq!(
        texts,
        [
            "Tool call to t was not run: its arguments are invalid or incomplete (arguments: invalid json). \
             Call the tool again with its arguments as one complete JSON object.",
            "Tool call to t was not run: its arguments are invalid or incomplete \
             (arguments: a json object is expected for tool arguments). \
             Call the tool again with its arguments as one complete JSON object.",
            "Tool call to t was not run: its arguments are invalid or incomplete (arguments: invalid json). \
             Call the tool again with its arguments as one complete JSON object.",
            "Tool call to t was not run: its arguments are invalid or incomplete (the call was not finished). \
             Call the tool again with its arguments as one complete JSON object.",
        ]
    );
    assert!(r.iter().all(ToolResult::is_refusal));
    assert!(calls.iter().all(|c| c.execution_status() == "failed"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_exception_hook_receives_caught_panics() {
    let boom = Tool::builder("boom")
        .handler(|_, _| async move {
            if true {
                panic!("kaput");
            }
            "never"
        })
        .build()
        .unwrap();
    let fine = Tool::builder("fine")
        .handler(|_, _| async { Err::<String, _>("plain error") })
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let ex = ToolExecutor::new([boom, fine])
        .unwrap()
        .on_tool_execution_exception(move |call, e| {
            s.lock().unwrap().push(format!(
                "{} {} {}",
                call.call_id.as_deref().unwrap_or("-"),
                e.message,
                e.location
                    .as_deref()
                    .unwrap_or("?")
                    .contains("tool_executor.rs")
            ));
        });
    let mut calls = vec![call("c1", "boom", json!({})), call("c2", "fine", json!({}))];
    let r = ex.execute(&mut calls).await;
    assert!(r[0].is_exception() && !r[0].is_refusal());
    assert!(r[1].is_error() && !r[1].is_exception());
    assert_eq!(*seen.lock().unwrap(), ["c1 kaput true"]);
    assert_eq!(calls[0].execution_status(), "failed");
}

#[tokio::test]
async fn cancelling_a_batch_stops_running_bodies() {
    let started = Arc::new(tokio::sync::Semaphore::new(0));
    let s = started.clone();
    let hang = Tool::builder("hang")
        .handler(move |_, ctx: ToolContext| {
            let s = s.clone();
            async move {
                s.add_permits(1);
                ctx.cancelled().await;
                // Ignores the token on purpose: the executor drops it anyway.
                std::future::pending::<String>().await
            }
        })
        .build()
        .unwrap();
    let quick = Tool::builder("quick")
        .handler(|_, _| async { "quick" })
        .build()
        .unwrap();
    let ex = ToolExecutor::new([hang, quick]).unwrap();
    let token = CancellationToken::new();
    let mut calls = vec![
        call("c1", "hang", json!({})),
        call("c2", "quick", json!({})),
        call("c3", "hang", json!({})),
    ];
    let (r, ()) = tokio::join!(ex.execute_with_cancel(&mut calls, &token), async {
        let _ = started.acquire_many(2).await;
        token.cancel();
    });
    assert_eq!(r[1].content_text(), "quick");
    for i in [0, 2] {
        assert!(r[i].is_error() && !r[i].is_refusal() && !r[i].is_exception());
        assert_eq!(
            r[i].content_text(),
            "Tool hang was cancelled before it finished; it may have done part of its work."
        );
    }
    let statuses: Vec<&str> = calls.iter().map(ToolCall::execution_status).collect();
    assert_eq!(statuses, ["failed", "completed", "failed"]);
}

#[test]
fn executor_build_errors_and_definitions() {
    let t = || {
        Tool::builder("t")
            .description("T tool")
            .handler(|_, _| async { "x" })
            .build()
            .unwrap()
    };
    assert_eq!(
        ToolExecutor::new([t(), t()]).unwrap_err(),
        ToolError::DuplicateTool { name: "t".into() }
    );
    assert!(
        ToolExecutor::new([t()])
            .unwrap()
            .with_max_concurrency(0)
            .is_err()
    );
    let ex = ToolExecutor::new([t()]).unwrap();
    assert_eq!(ex.definitions()[0].description, "T tool");
    assert_eq!(ex.display_text_for("t"), "T");
    assert_eq!(ex.display_text_for("file_read"), "File read");
}

#[tokio::test]
async fn custom_context_reaches_every_body() {
    struct Tenant(&'static str);
    let t = Tool::builder("t")
        .handler(|_, ctx: ToolContext| async move {
            format!(
                "{}:{}",
                ctx.custom::<Tenant>().map_or("none", |t| t.0),
                ctx.tool_call_id()
            )
        })
        .build()
        .unwrap();
    let ex = ToolExecutor::new([t]).unwrap().with_context(Tenant("acme"));
    let mut calls = vec![call("c1", "t", json!({})), call("c2", "t", json!({}))];
    let r = ex.execute(&mut calls).await;
    assert_eq!(r[0].content_text(), "acme:c1");
    assert_eq!(r[1].content_text(), "acme:c2");
}

#[test]
fn futures_are_send_so_the_chain_can_spawn_them() {
    fn is_send<T: Send>(_: &T) {}
    let t = Tool::builder("t")
        .handler(|_, _| async { "x" })
        .build()
        .unwrap();
    is_send(&t.execute(json!({}), ToolContext::new("c")));
    let ex = ToolExecutor::new([t]).unwrap();
    let mut calls: Vec<ToolCall> = Vec::new();
    is_send(&ex.execute(&mut calls));
}
