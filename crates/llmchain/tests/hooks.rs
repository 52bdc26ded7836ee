//! The hook stack, timeouts, the cost budget and `final_answer`, over the scripted model
//! (real wire bytes through the real decoders), including a run resumed from what its
//! sink last held.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::chain::{
    AfterModel, AfterTool, BeforeTool, Budget, ChainError, ChatModel, ChunkCheck, Decision, Hook,
    HookCx, HookFuture, LLMChain, Layer, Mode, ModelError, ModelGate, ModelStream, RunOutcome,
    ScriptedModel,
};
use llmchain::conversation::Conversation;
use llmchain::message::{ExecutionStatus, Message, MessageStatus, Role, ToolCall, ToolResult};
use llmchain::provider::render::ResponseScript;
use llmchain::provider::{Format, StreamEvent};
use llmchain::tool::{Tool, ToolRun};
use serde_json::json;

fn counting_tool(name: &str, runs: Arc<AtomicUsize>) -> Tool {
    Tool::builder(name)
        .schema(json!({"type": "object", "properties": {"n": {"type": "number"}}}))
        .handler(move |args, _| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                format!("ran with {}", args["n"])
            }
        })
        .build()
        .unwrap()
}

fn model(turns: Vec<ResponseScript>) -> ScriptedModel {
    let mut m = ScriptedModel::new(Format::OPENAI_CHAT);
    for t in turns {
        m = m.respond(t).unwrap();
    }
    m
}

fn call(id: &str, n: u32) -> ResponseScript {
    ResponseScript::tool_call(id, "act", format!(r#"{{"n": {n}}}"#))
}

fn budget(words: &[&str]) -> Budget {
    let mut b = Budget::default();
    for w in words {
        b.set(w).unwrap();
    }
    b
}

/// Records the order hooks run in, and answers as told.
struct Probe {
    id: &'static str,
    layer: Layer,
    log: Arc<Mutex<Vec<String>>>,
    before_tool: BeforeTool,
    after_model: AfterModel,
}

impl Probe {
    fn new(id: &'static str, layer: Layer, log: &Arc<Mutex<Vec<String>>>) -> Probe {
        Probe {
            id,
            layer,
            log: log.clone(),
            before_tool: BeforeTool::Run,
            after_model: AfterModel::Accept,
        }
    }
    fn note(&self, point: &str) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{point}:{}", self.id));
    }
}

impl Hook for Probe {
    fn id(&self) -> &str {
        self.id
    }
    fn layer(&self) -> Layer {
        self.layer
    }
    fn before_model<'a>(
        &'a self,
        _request: &'a mut Conversation,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, ModelGate> {
        self.note("before_model");
        Box::pin(async { Ok(ModelGate::Continue) })
    }
    fn after_model<'a>(
        &'a self,
        _answer: &'a Message,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, AfterModel> {
        self.note("after_model");
        let v = self.after_model.clone();
        Box::pin(async move { Ok(v) })
    }
    fn before_tool<'a>(
        &'a self,
        _call: &'a ToolCall,
        cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, BeforeTool> {
        self.note("before_tool");
        let v = self.before_tool.clone();
        Box::pin(async move {
            // Each hook counts the calls it saw, in the run's state.
            *cx.state = (cx.state.as_u64().unwrap_or(0) + 1).into();
            Ok(v)
        })
    }
    fn after_tool<'a>(
        &'a self,
        _call: &'a ToolCall,
        _result: &'a ToolResult,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, AfterTool> {
        self.note("after_tool");
        Box::pin(async { Ok(AfterTool::Keep) })
    }
}

#[tokio::test]
async fn hooks_run_in_the_documented_order_whatever_order_they_are_added_in() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("done")]))
        .with_tool(counting_tool("act", runs.clone()))
        .with_hook(Probe::new("retry", Layer::Retry, &log))
        .with_hook(Probe::new("user-a", Layer::User, &log))
        .with_hook(Probe::new("guard", Layer::Guard, &log))
        .with_hook(Probe::new("user-b", Layer::User, &log));
    chain.add_message(Message::user("go")).await.unwrap();
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let log = log.lock().unwrap().clone();
    let at = |point: &str| -> Vec<String> {
        log.iter()
            .filter_map(|l| l.strip_prefix(&format!("{point}:")).map(str::to_owned))
            .take(4)
            .collect()
    };
    // Outermost first on the way in, innermost first on the way out.
    assert_eq!(at("before_model"), ["guard", "user-a", "user-b", "retry"]);
    assert_eq!(at("before_tool"), ["guard", "user-a", "user-b", "retry"]);
    assert_eq!(at("after_model"), ["retry", "user-b", "user-a", "guard"]);
    assert_eq!(at("after_tool"), ["retry", "user-b", "user-a", "guard"]);
    // Each hook's state is in the run's state, by id and version.
    assert_eq!(chain.state().hooks["user-a@1"], json!(1));
}

#[tokio::test]
async fn a_retry_hook_never_swallows_a_stop() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut stopper = Probe::new("stopper", Layer::Guard, &log);
    stopper.after_model = AfterModel::Stop {
        reason: "off topic".into(),
    };
    let mut retrier = Probe::new("retrier", Layer::Retry, &log);
    retrier.after_model = AfterModel::Retry {
        feedback: "try again".into(),
    };
    let m = Arc::new(model(vec![
        ResponseScript::text("first"),
        ResponseScript::text("second"),
    ]));
    let mut chain = LLMChain::new(m.clone())
        .with_hook(retrier)
        .with_hook(stopper);
    chain.add_message(Message::user("go")).await.unwrap();
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.kind, "hook");
    assert_eq!(stop.limit, "stopper@1");
    assert_eq!(m.requests().len(), 1, "no retry after a stop");
    let kinds: Vec<_> = chain
        .journal()
        .entries()
        .iter()
        .filter_map(|e| match &e.decision {
            Decision::Hook { hook, point, .. } => Some(format!("{hook} {point}")),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["retrier@1 after_model", "stopper@1 after_model"]);
}

#[tokio::test]
async fn a_retry_asks_again_with_feedback_and_counts_against_the_failure_budget() {
    struct Picky;
    impl Hook for Picky {
        fn id(&self) -> &str {
            "picky"
        }
        fn after_model<'a>(
            &'a self,
            answer: &'a Message,
            _cx: &'a mut HookCx<'_>,
        ) -> HookFuture<'a, AfterModel> {
            let ok = answer.text().is_some_and(|t| t.contains("please"));
            Box::pin(async move {
                Ok(if ok {
                    AfterModel::Accept
                } else {
                    AfterModel::Retry {
                        feedback: "Say please.".into(),
                    }
                })
            })
        }
    }
    let mut chain = LLMChain::new(model(vec![
        ResponseScript::text("no"),
        ResponseScript::text("yes, please"),
    ]))
    .with_hook(Picky);
    chain.add_message(Message::user("go")).await.unwrap();
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    let texts: Vec<_> = chain
        .messages()
        .iter()
        .map(|m| (m.role, m.text().unwrap_or_default()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::User, "go".to_owned()),
            (Role::Assistant, "no".to_owned()),
            (Role::User, "Say please.".to_owned()),
            (Role::Assistant, "yes, please".to_owned()),
        ]
    );
    // A model that never complies runs out of the failure budget.
    let mut chain = LLMChain::new(model(vec![ResponseScript::text("no"); 10]))
        .with_hook(Picky)
        .with_max_retry_count(2);
    chain.add_message(Message::user("go")).await.unwrap();
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(
        matches!(e, ChainError::ExceededFailureCount { .. }),
        "{e:?}"
    );
}

struct Failing(u8);

impl Hook for Failing {
    fn id(&self) -> &str {
        "failing"
    }
    fn before_tool<'a>(
        &'a self,
        _call: &'a ToolCall,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, BeforeTool> {
        let how = self.0;
        Box::pin(async move {
            match how {
                0 => panic!("boom"),
                1 => Err("its database is down".into()),
                _ => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(BeforeTool::Run)
                }
            }
        })
    }
}

#[tokio::test]
async fn a_hook_that_panics_errs_or_hangs_denies_the_call() {
    for (how, why) in [
        (0, "panicked"),
        (1, "its database is down"),
        (2, "did not decide"),
    ] {
        let runs = Arc::new(AtomicUsize::new(0));
        let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("ok")]))
            .with_tool(counting_tool("act", runs.clone()))
            .with_hook(Failing(how))
            .with_hook_timeout(Duration::from_millis(50));
        chain.add_message(Message::user("go")).await.unwrap();
        chain.run(Mode::while_needs_response()).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 0, "fails closed ({why})");
        let result = &chain.messages()[2].tool_results[0];
        assert!(
            result.content_text().contains(why),
            "{}",
            result.content_text()
        );
        assert_eq!(
            chain.messages()[1].tool_calls[0].typed_execution_status(),
            Some(ExecutionStatus::Denied)
        );
    }
}

/// A hook that rewrites arguments, answers some calls itself and stops on another.
struct Gate;

impl Hook for Gate {
    fn id(&self) -> &str {
        "gate"
    }
    fn before_tool<'a>(
        &'a self,
        call: &'a ToolCall,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, BeforeTool> {
        let n = call.arguments_as_map()["n"].as_u64().unwrap_or(0);
        Box::pin(async move {
            Ok(match n {
                1 => BeforeTool::Rewrite {
                    arguments: json!({"n": 10}).as_object().unwrap().clone(),
                },
                2 => BeforeTool::Answer {
                    result: "cached: 2".into(),
                },
                3 => BeforeTool::Stop {
                    reason: "three is out of bounds".into(),
                },
                _ => BeforeTool::Run,
            })
        })
    }
    fn after_tool<'a>(
        &'a self,
        _call: &'a ToolCall,
        result: &'a ToolResult,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, AfterTool> {
        let secret = result.content_text().contains("10");
        Box::pin(async move {
            Ok(if secret {
                AfterTool::Rewrite {
                    content: "[redacted]".into(),
                }
            } else {
                AfterTool::Keep
            })
        })
    }
}

#[tokio::test]
async fn before_tool_rewrites_answers_or_stops_and_after_tool_rewrites() {
    let runs = Arc::new(AtomicUsize::new(0));
    let m = ScriptedModel::new(Format::OPENAI_CHAT)
        .respond(
            call("c1", 1)
                .with_call("c2", "act", r#"{"n": 2}"#)
                .with_call("c3", "act", r#"{"n": 3}"#),
        )
        .unwrap();
    let mut chain = LLMChain::new(m)
        .with_tool(counting_tool("act", runs.clone()))
        .with_hook(Gate);
    chain.add_message(Message::user("go")).await.unwrap();
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "gate@1");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "only the rewritten call ran"
    );
    let calls = &chain.messages()[1].tool_calls;
    assert_eq!(
        calls[0].arguments_as_map()["n"],
        json!(10),
        "stored as it ran"
    );
    let results = &chain.messages()[2].tool_results;
    assert_eq!(results[0].content_text(), "[redacted]");
    // What ran is kept in the tool message, not in the result a UI shows.
    assert!(results[0].processed_content.is_none());
    let call_id = results[0].tool_call_id.clone();
    assert_eq!(
        chain.messages()[2].metadata["rewritten"][&call_id]["original"],
        json!("ran with 10")
    );
    assert_eq!(results[1].content_text(), "cached: 2");
    assert!(results[2].content_text().contains("three is out of bounds"));
}

/// Asks a (counted) oracle, as a slow or costly check would.
struct Oracle(Arc<AtomicUsize>);

impl Hook for Oracle {
    fn id(&self) -> &str {
        "oracle"
    }
    fn before_tool<'a>(
        &'a self,
        _call: &'a ToolCall,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, BeforeTool> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Ok(BeforeTool::Answer {
                result: "the oracle says no".into(),
            })
        })
    }
}

#[tokio::test]
async fn a_journaled_before_tool_verdict_is_replayed_on_resume_not_asked_again() {
    let asked = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("ok")]))
        .with_tool(counting_tool("act", Arc::new(AtomicUsize::new(0))))
        .with_hook(Oracle(asked.clone()));
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    // The state as a process killed after the verdict's write would have left it:
    // the journal holds it; the call is unanswered.
    let mut held = chain.state().clone();
    held.conversation.messages.truncate(2);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let mut resumed = LLMChain::from_state(model(vec![ResponseScript::text("ok")]), held)
        .with_tool(counting_tool("act", Arc::new(AtomicUsize::new(0))))
        .with_hook(Oracle(asked.clone()));
    resumed.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 1, "replayed, not asked again");
    assert_eq!(
        resumed.messages()[2].tool_results[0].content_text(),
        "the oracle says no"
    );
}

/// Aborts a stream that says a forbidden word.
struct NoSecrets;

impl Hook for NoSecrets {
    fn id(&self) -> &str {
        "no-secrets"
    }
    fn layer(&self) -> Layer {
        Layer::Guard
    }
    fn on_chunk(&self, event: &StreamEvent) -> ChunkCheck {
        match event {
            StreamEvent::TextDelta { text, .. } if text.contains("hunter2") => ChunkCheck::Abort {
                reason: "a password".into(),
            },
            _ => ChunkCheck::Pass,
        }
    }
    fn before_model<'a>(
        &'a self,
        request: &'a mut Conversation,
        _cx: &'a mut HookCx<'_>,
    ) -> HookFuture<'a, ModelGate> {
        // This call's request only: the stored conversation is not changed.
        request.system = Some("Never say passwords.".into());
        Box::pin(async { Ok(ModelGate::Continue) })
    }
}

#[tokio::test]
async fn a_chunk_check_aborts_the_stream_and_before_model_changes_only_the_request() {
    let m = Arc::new(
        ScriptedModel::new(Format::OPENAI_CHAT)
            .respond(ResponseScript::text("the password is hunter2, keep it"))
            .unwrap()
            .chunk_size(8),
    );
    let mut chain = LLMChain::new(m.clone()).with_hook(NoSecrets);
    chain.add_message(Message::user("tell me")).await.unwrap();
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.reason.as_deref(), Some("a password"));
    let last = chain.last_message().unwrap();
    assert_eq!(last.status, MessageStatus::Cancelled);
    assert!(chain.state().conversation.system.is_none());
    let sent = String::from_utf8(m.requests()[0].clone()).unwrap();
    assert!(sent.contains("Never say passwords."), "{sent}");
    assert!(chain.journal().entries().iter().any(|e| matches!(
        &e.decision,
        Decision::Hook { point, .. } if point == "on_chunk"
    )));
}

#[tokio::test(start_paused = true)]
async fn first_chunk_idle_and_step_timeouts_fail_the_call_and_a_fallback_takes_it() {
    for (words, what) in [
        (&["first_chunk_seconds=1"][..], "first_chunk_seconds"),
        (&["idle_seconds=1"][..], "idle_seconds"),
        (&["step_seconds=3"][..], "step_seconds"),
    ] {
        let slow = ScriptedModel::new(Format::OPENAI_CHAT)
            .respond(ResponseScript::text("a slow answer in many chunks"))
            .unwrap()
            .chunk_size(4)
            .chunk_delay(Duration::from_secs(2));
        let mut chain = LLMChain::new(slow).with_budget(budget(words));
        chain.add_message(Message::user("go")).await.unwrap();
        let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
        assert!(
            matches!(&e, ChainError::Model(ModelError::Timeout { .. })),
            "{what}: {e:?}"
        );
        if let Some(m) = chain.last_message().filter(|m| m.role == Role::Assistant) {
            assert_eq!(m.status, MessageStatus::Cancelled, "{what}");
        }
        // With a fallback, the fallback answers.
        let slow = ScriptedModel::new(Format::OPENAI_CHAT)
            .respond(ResponseScript::text("a slow answer in many chunks"))
            .unwrap()
            .chunk_size(4)
            .chunk_delay(Duration::from_secs(2));
        let mut chain = LLMChain::new(slow)
            .with_fallback(model(vec![ResponseScript::text("quick")]))
            .with_budget(budget(words));
        chain.add_message(Message::user("go")).await.unwrap();
        chain.run(Mode::while_needs_response()).await.unwrap();
        assert_eq!(
            chain.last_message().unwrap().text().as_deref(),
            Some("quick")
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_wall_clock_stops_a_stream_in_progress_and_tool_seconds_bounds_a_tool() {
    let slow = ScriptedModel::new(Format::OPENAI_CHAT)
        .respond(ResponseScript::text("a slow answer in many chunks"))
        .unwrap()
        .chunk_size(4)
        .chunk_delay(Duration::from_secs(2));
    let mut chain = LLMChain::new(slow).with_budget(budget(&["wall_seconds=5"]));
    chain.add_message(Message::user("go")).await.unwrap();
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "wall_seconds");

    let hang = Tool::builder("act")
        .handler(|_args, _| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            "never"
        })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("ok")]))
        .with_tool(hang)
        .with_budget(budget(&["tool_seconds=2"]));
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let r = &chain.messages()[2].tool_results[0];
    assert!(r.is_error(), "{r:?}");
}

#[tokio::test]
async fn a_cost_budget_refuses_an_unpriced_model_and_stops_at_its_limit() {
    let mut chain =
        LLMChain::new(model(vec![ResponseScript::text("hi")])).with_budget(budget(&["cost_usd=1"]));
    chain.add_message(Message::user("go")).await.unwrap();
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(
        matches!(&e, ChainError::UnknownPrice(m) if m == "scripted-model"),
        "{e:?}"
    );
    assert!(e.to_string().contains("[budget.prices"), "{e}");

    // Priced: $1 per million tokens each way, $0.01 allowed. Each call reserves its
    // input estimate plus 4,096 output tokens (~$0.0041) and settles at its usage
    // (5,000 tokens: $0.005): the second call is refused at $0.0141 > $0.01.
    let runs = Arc::new(AtomicUsize::new(0));
    let mut b = budget(&["cost_usd=0.01"]);
    b.prices.insert(
        "scripted-model".into(),
        llmchain::chain::Price::per_million(1.0, 1.0),
    );
    let turns = (0..5)
        .map(|i| call(&format!("c{i}"), 1).with_usage(2_500, 2_500))
        .collect();
    let mut chain = LLMChain::new(model(turns))
        .with_tool(counting_tool("act", runs.clone()))
        .with_budget(b);
    chain.add_message(Message::user("go")).await.unwrap();
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "cost_usd");
    assert_eq!(chain.spent().model_calls, 2);
    assert_eq!(
        chain.spent().cost_micro_usd,
        10_000,
        "two calls settled at $0.005"
    );
    assert!(!chain.has_unanswered_calls());
}

#[tokio::test]
async fn final_answer_gives_one_last_answer_without_tools_then_stops() {
    let runs = Arc::new(AtomicUsize::new(0));
    let m = Arc::new(model(vec![
        call("c1", 1),
        call("c2", 1),
        ResponseScript::text("Here is what I have so far."),
    ]));
    let mut chain = LLMChain::new(m.clone())
        .with_tool(counting_tool("act", runs.clone()))
        .with_budget(budget(&["model_calls=2", "on_exhausted=final_answer"]));
    chain.add_message(Message::user("go")).await.unwrap();
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "model_calls");
    assert_eq!(m.requests().len(), 3, "two calls and the final answer");
    let last_request = String::from_utf8(m.requests()[2].clone()).unwrap();
    assert!(
        last_request.contains(r#""tool_choice":"none""#),
        "{last_request}"
    );
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("Here is what I have so far.")
    );
    assert!(chain.spent().final_answer);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A `wrap_model` wrapper: logs each call it passes on; with a `spare`, a call whose
/// model fails before anything arrives is made again on the spare (a fallback written
/// as a hook).
struct Wrapped {
    tag: &'static str,
    inner: Arc<dyn ChatModel>,
    spare: Option<Arc<dyn ChatModel>>,
    log: Arc<Mutex<Vec<String>>>,
    panics: bool,
}

impl ChatModel for Wrapped {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }
    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }
    fn stream<'a>(&'a self, c: &'a Conversation) -> ModelStream<'a> {
        use futures_util::StreamExt;
        self.log.lock().unwrap().push(format!("{} calls", self.tag));
        if self.panics {
            return Box::pin(futures_util::stream::once(async {
                panic!("a wrapper's bug")
            }));
        }
        let Some(spare) = &self.spare else {
            return self.inner.stream(c);
        };
        let mut first = self.inner.stream(c);
        let log = self.log.clone();
        let tag = self.tag;
        Box::pin(
            futures_util::stream::once(async move {
                match first.next().await {
                    Some(Err(e)) => {
                        log.lock()
                            .unwrap()
                            .push(format!("{tag} falls back after {e}"));
                        spare.stream(c)
                    }
                    Some(Ok(ev)) => {
                        Box::pin(futures_util::stream::once(async { Ok(ev) }).chain(first))
                            as ModelStream<'a>
                    }
                    None => first,
                }
            })
            .flatten(),
        )
    }
}

struct Wrap {
    id: &'static str,
    layer: Layer,
    spare: Option<Arc<dyn ChatModel>>,
    log: Arc<Mutex<Vec<String>>>,
    panics: bool,
}

impl Hook for Wrap {
    fn id(&self) -> &str {
        self.id
    }
    fn layer(&self) -> Layer {
        self.layer
    }
    fn wrap_model(&self, model: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        if self.id == "panics-wrapping" {
            panic!("a hook's bug");
        }
        Arc::new(Wrapped {
            tag: self.id,
            inner: model,
            spare: self.spare.clone(),
            log: self.log.clone(),
            panics: self.panics,
        })
    }
}

fn wrap(id: &'static str, layer: Layer, log: &Arc<Mutex<Vec<String>>>) -> Wrap {
    Wrap {
        id,
        layer,
        spare: None,
        log: log.clone(),
        panics: false,
    }
}

#[tokio::test]
async fn wrap_model_is_an_onion_in_the_stacks_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let down = ScriptedModel::new(Format::OPENAI_CHAT).fail(ModelError::Config("down".into()));
    let spare: Arc<dyn ChatModel> = Arc::new(model(vec![ResponseScript::text("from the spare")]));
    // Added innermost first: the stack puts them in its order whatever the order added.
    let mut chain = LLMChain::new(down)
        .with_hook(Wrap {
            spare: Some(spare.clone()),
            ..wrap("fallback", Layer::Retry, &log)
        })
        .with_hook(wrap("user", Layer::User, &log))
        .with_hook(wrap("telemetry", Layer::Telemetry, &log));
    chain.add_message(Message::user("hi")).await.unwrap();
    chain.run(Mode::Single).await.unwrap();
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("from the spare")
    );
    assert_eq!(
        *log.lock().unwrap(),
        [
            "telemetry calls",
            "user calls",
            "fallback calls",
            "fallback falls back after down"
        ]
    );
}

#[tokio::test]
async fn a_wrap_model_that_panics_fails_the_call_closed() {
    for (id, panics) in [("panics-wrapping", false), ("panics-streaming", true)] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let fallback = Arc::new(model(vec![ResponseScript::text("never")]));
        let mut chain = LLMChain::new(model(vec![ResponseScript::text("never")]))
            .with_fallbacks(vec![fallback.clone()])
            .with_hook(Wrap {
                panics,
                ..wrap(id, Layer::User, &log)
            });
        chain.add_message(Message::user("hi")).await.unwrap();
        let e = chain.run(Mode::Single).await.unwrap_err();
        assert!(e.to_string().contains("panicked"), "{id}: {e}");
        assert!(
            fallback.requests().is_empty(),
            "{id}: the fallback is wrapped the same way; it is not asked"
        );
        assert_eq!(chain.last_message().unwrap().role, Role::User, "{id}");
    }
}

/// A `wrap_tool` layer: logs around the run; with `retries`, runs it again after an
/// error result.
struct Around {
    id: &'static str,
    layer: Layer,
    log: Arc<Mutex<Vec<String>>>,
    retries: u32,
    panics: bool,
}

impl Hook for Around {
    fn id(&self) -> &str {
        self.id
    }
    fn layer(&self) -> Layer {
        self.layer
    }
    fn wrap_tool(&self, _call: &ToolCall, _tool: &Tool, run: ToolRun) -> ToolRun {
        assert!(!self.panics, "a hook's bug");
        let (id, log, retries) = (self.id, self.log.clone(), self.retries);
        ToolRun::new(move |args, ctx| {
            let (run, log) = (run.clone(), log.clone());
            Box::pin(async move {
                log.lock().unwrap().push(format!("{id} before"));
                let mut r = run.run(args.clone(), ctx.clone()).await;
                for _ in 0..retries {
                    if !r.is_error() {
                        break;
                    }
                    log.lock().unwrap().push(format!("{id} retries"));
                    r = run.run(args.clone(), ctx.clone()).await;
                }
                log.lock().unwrap().push(format!("{id} after"));
                r
            })
        })
    }
}

fn around(id: &'static str, layer: Layer, log: &Arc<Mutex<Vec<String>>>) -> Around {
    Around {
        id,
        layer,
        log: log.clone(),
        retries: 0,
        panics: false,
    }
}

/// A tool that fails its first run and succeeds after.
fn flaky(idempotent: bool, runs: Arc<AtomicUsize>) -> Tool {
    Tool::builder("act")
        .idempotent(idempotent)
        .handler(move |_args, _| {
            let runs = runs.clone();
            async move {
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                if n == 1 {
                    Err(format!("failed on run {n}"))
                } else {
                    Ok(format!("ok on run {n}"))
                }
            }
        })
        .build()
        .unwrap()
}

/// The result the model was given for `c1`.
fn result_of(chain: &LLMChain) -> String {
    chain
        .messages()
        .iter()
        .flat_map(|m| m.tool_results.iter())
        .find(|r| r.tool_call_id == "c1")
        .map(|r| r.content_text())
        .unwrap_or_default()
}

#[tokio::test]
async fn wrap_tool_retries_an_idempotent_tool_and_never_a_started_one() {
    for idempotent in [true, false] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let runs = Arc::new(AtomicUsize::new(0));
        let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("done")]))
            .with_tool(flaky(idempotent, runs.clone()))
            .with_hook(Around {
                retries: 1,
                ..around("retry", Layer::Retry, &log)
            });
        chain.add_message(Message::user("go")).await.unwrap();
        chain.run(Mode::while_needs_response()).await.unwrap();
        if idempotent {
            assert_eq!(runs.load(Ordering::SeqCst), 2);
            assert_eq!(result_of(&chain), "ok on run 2");
        } else {
            assert_eq!(
                runs.load(Ordering::SeqCst),
                1,
                "a started call never runs twice"
            );
            assert!(
                result_of(&chain).contains("was not run again: it is not idempotent"),
                "{}",
                result_of(&chain)
            );
        }
        assert_eq!(
            *log.lock().unwrap(),
            ["retry before", "retry retries", "retry after"]
        );
    }
}

#[tokio::test]
async fn wrap_tool_layers_nest_in_the_stacks_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("done")]))
        .with_tool(counting_tool("act", runs.clone()))
        .with_hook(around("inner", Layer::User, &log))
        .with_hook(around("outer", Layer::Telemetry, &log));
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        *log.lock().unwrap(),
        ["outer before", "inner before", "inner after", "outer after"]
    );
}

#[tokio::test]
async fn a_wrap_tool_that_panics_fails_the_call_without_running_it() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("done")]))
        .with_tool(counting_tool("act", runs.clone()))
        .with_hook(Around {
            panics: true,
            ..around("buggy", Layer::User, &log)
        });
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        result_of(&chain).contains("a hook's wrap_tool panicked"),
        "{}",
        result_of(&chain)
    );
}

#[tokio::test(start_paused = true)]
async fn the_tools_timeout_is_inside_a_retry() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let slow_once = Tool::builder("act")
        .idempotent(true)
        .timeout(Duration::from_secs(1))
        .handler(move |_args, _| {
            let runs = r.clone();
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                "done in time"
            }
        })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(model(vec![call("c1", 1), ResponseScript::text("done")]))
        .with_tool(slow_once)
        .with_hook(Around {
            retries: 1,
            ..around("retry", Layer::Retry, &log)
        });
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    // The first run timed out inside the wrapper, which saw an error and ran it again.
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(result_of(&chain), "done in time");
}
