//! The chain over the scripted model (real wire bytes through the real decoders).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::chain::{
    Callbacks, ChainCallbacks, ChainError, ChainState, ConversationSink, CustomMode, HttpErrorKind,
    HumanDecision, LLMChain, Mode, ModeFuture, ModelError, ReviewDecision, RunOutcome,
    ScriptedModel, SinkError, SinkErrorKind, SinkFuture, Steps, step,
};
use llmchain::message::{
    ContentPart, ContentType, ExecutionStatus, Message, MessageExpansion, MessageStatus, Role,
    ToolCall, ToolResult,
};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, ScriptStop};
use llmchain::tool::{Tool, ToolOutput};
use serde_json::json;

fn calc_tool() -> Tool {
    Tool::builder("calculator")
        .description("Evaluates a + b")
        .schema(json!({"type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"]}))
        .handler(|args, _| async move {
            let a = args["a"].as_f64().unwrap_or(0.0);
            let b = args["b"].as_f64().unwrap_or(0.0);
            ToolOutput::with_data(format!("{}", a + b), json!({"sum": a + b}))
        })
        .build()
        .unwrap()
}

fn failing_tool(counter: Arc<AtomicUsize>) -> Tool {
    Tool::builder("flaky")
        .schema(json!({"type": "object", "properties": {"x": {"type": "integer"}}}))
        .handler(move |_, _| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                ToolOutput::error("disk full")
            }
        })
        .build()
        .unwrap()
}

fn model(format: Format, turns: Vec<ResponseScript>) -> ScriptedModel {
    let mut m = ScriptedModel::new(format);
    for t in turns {
        m = m.respond(t).unwrap();
    }
    m
}

async fn chain_with(format: Format, turns: Vec<ResponseScript>) -> LLMChain {
    let mut chain = LLMChain::new(Arc::new(model(format, turns))).with_tool(calc_tool());
    chain
        .add_message(Message::user("What is 2 + 3?"))
        .await
        .unwrap();
    chain
}

#[tokio::test]
async fn while_needs_response_runs_tools_and_answers_in_every_wire_format() {
    for &format in Format::ALL {
        let mut chain = chain_with(
            format,
            vec![
                ResponseScript::tool_call("call_1", "calculator", r#"{"a": 2, "b": 3}"#)
                    .with_text("Let me add."),
                ResponseScript::text("2 + 3 = 5"),
            ],
        )
        .await;
        let out = chain.run(Mode::while_needs_response()).await.unwrap();
        assert_eq!(out, RunOutcome::Done, "{format}");
        let msgs = chain.messages();
        assert_eq!(msgs.len(), 4);
        let call = &msgs[1].tool_calls[0];
        assert_eq!(call.execution_status(), "completed");
        assert_eq!(call.display_text.as_deref(), Some("Calculator"));
        let r = &msgs[2].tool_results[0];
        assert_eq!(r.content_text(), "5");
        assert_eq!(r.processed_content, Some(json!({"sum": 5.0})));
        assert_eq!(msgs[3].text().as_deref(), Some("2 + 3 = 5"));
        assert!(!chain.needs_response());
    }
}

#[tokio::test]
async fn single_mode_never_runs_tools() {
    let mut chain = chain_with(
        Format::OPENAI_CHAT,
        vec![ResponseScript::tool_call(
            "call_1",
            "calculator",
            r#"{"a": 1, "b": 1}"#,
        )],
    )
    .await;
    assert_eq!(chain.run(Mode::Single).await.unwrap(), RunOutcome::Done);
    assert_eq!(chain.messages().len(), 2);
    assert!(chain.needs_response());
    assert_eq!(
        chain.messages()[1].tool_calls[0].execution_status(),
        "identified"
    );
}

#[tokio::test]
async fn run_without_messages_is_an_error() {
    let mut chain = LLMChain::new(Arc::new(ScriptedModel::new(Format::OPENAI_CHAT)));
    assert_eq!(
        chain.run(Mode::Single).await.unwrap_err(),
        ChainError::NoMessages
    );
}

#[tokio::test]
async fn results_keep_call_order_and_invalid_json_is_refused_then_corrected() {
    let mut chain = chain_with(
        Format::ANTHROPIC,
        vec![
            ResponseScript::tool_call("c1", "calculator", r#"{"a": 1, "b": 2}"#)
                .with_call("c2", "calculator", r#"{"a": 1, "b": "#)
                .with_call("c3", "nope", "{}"),
            ResponseScript::tool_call("c4", "calculator", r#"{"a": 5, "b": 5}"#),
            ResponseScript::text("done"),
        ],
    )
    .await;
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    let results = &chain.messages()[2].tool_results;
    let ids: Vec<_> = results.iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
    assert!(!results[0].is_error());
    assert!(results[1].is_refusal(), "{:?}", results[1]);
    assert!(results[1].content_text().contains("invalid json"));
    assert!(results[2].is_refusal());
    assert!(
        results[2]
            .content_text()
            .contains("Available tools: calculator")
    );
    // The model corrected itself within the budget, which reset on success.
    assert_eq!(chain.messages()[4].tool_results[0].content_text(), "10");
    assert_eq!(chain.current_failure_count(), 0);
}

#[tokio::test]
async fn cut_off_calls_never_run() {
    let ran = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(Arc::new(model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "flaky", r#"{"x": 12345678}"#)
                .with_stop(ScriptStop::MaxTokens),
        ],
    )))
    .with_tool(failing_tool(ran.clone()));
    chain.add_message(Message::user("go")).await.unwrap();
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    let m = chain.last_message().unwrap();
    assert_eq!(m.status, MessageStatus::Length);
    assert!(!m.tool_calls[0].is_complete());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn until_success_retries_after_a_failed_batch() {
    let mut chain = chain_with(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "calculator", r#"{"a": 1}"#),
            ResponseScript::tool_call("c2", "calculator", r#"{"a": 1, "b": 2}"#),
        ],
    )
    .await;
    assert_eq!(
        chain.run(Mode::until_success()).await.unwrap(),
        RunOutcome::Done
    );
    let last = chain.last_message().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(last.tool_results[0].content_text(), "3");
    let first = &chain.messages()[2].tool_results[0];
    assert!(first.is_refusal());
    assert!(
        first
            .content_text()
            .starts_with("Missing required parameters for this tool."),
        "{}",
        first.content_text()
    );
}

#[tokio::test]
async fn step_mode_runs_one_step_at_a_time() {
    let mut chain = chain_with(
        Format::ANTHROPIC,
        vec![
            ResponseScript::tool_call("c1", "calculator", r#"{"a": 1, "b": 2}"#),
            ResponseScript::text("3"),
        ],
    )
    .await;
    let steps = Arc::new(AtomicUsize::new(0));
    let s = steps.clone();
    let once = Mode::step(move |_| s.fetch_add(1, Ordering::SeqCst) < 1);
    assert_eq!(chain.run(once.clone()).await.unwrap(), RunOutcome::Done);
    // Step 1: model call; step 2: tools. Then should_continue said stop.
    assert_eq!(chain.messages().len(), 3);
    assert_eq!(chain.last_message().unwrap().role, Role::Tool);
    assert_eq!(
        chain.run(Mode::step(|_| true)).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(chain.last_message().unwrap().text().as_deref(), Some("3"));
}

#[tokio::test]
async fn until_tool_used_returns_the_result() {
    let mut chain = chain_with(
        Format::OPENAI_CHAT,
        vec![ResponseScript::tool_call(
            "c1",
            "calculator",
            r#"{"a": 2, "b": 2}"#,
        )],
    )
    .await;
    match chain
        .run(Mode::until_tool_used(["calculator"], 5))
        .await
        .unwrap()
    {
        RunOutcome::ToolUsed(r) => assert_eq!(r.content_text(), "4"),
        other => panic!("{other:?}"),
    }
    let err = chain
        .run(Mode::until_tool_used(["x"], 5))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Tool name 'x' not found in available tools"
    );
    let err = chain
        .run(Mode::until_tool_used(["x", "y"], 5))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Tool names 'x, y' not found in available tools"
    );
}

#[tokio::test]
async fn max_runs_guard_stops_a_looping_model() {
    let turns = (0..10)
        .map(|i| {
            ResponseScript::tool_call(
                format!("c{i}"),
                "calculator",
                format!(r#"{{"a": {i}, "b": 1}}"#),
            )
        })
        .collect();
    let mut chain = chain_with(Format::OPENAI_CHAT, turns).await;
    let err = chain
        .run(Mode::WhileNeedsResponse { max_runs: 3 })
        .await
        .unwrap_err();
    assert_eq!(err, ChainError::ExceededMaxRuns { count: 3, max: 3 });
    assert_eq!(err.to_string(), "Exceeded maximum number of runs (3/3)");
    // Every message is whole: the last one is the tool answer to the third call.
    assert_eq!(chain.last_message().unwrap().role, Role::Tool);
}

#[tokio::test]
async fn failure_budget_runs_out() {
    let ran = Arc::new(AtomicUsize::new(0));
    let exceeded = Arc::new(AtomicUsize::new(0));
    let turns = (0..5)
        .map(|i| ResponseScript::tool_call(format!("c{i}"), "flaky", format!(r#"{{"x": {i}}}"#)))
        .collect();
    let e2 = exceeded.clone();
    let mut chain = LLMChain::new(Arc::new(model(Format::OPENAI_CHAT, turns)))
        .with_tool(failing_tool(ran.clone()))
        .with_callbacks(Callbacks::new().on_retries_exceeded(move || {
            e2.fetch_add(1, Ordering::SeqCst);
        }));
    chain.add_message(Message::user("go")).await.unwrap();
    let err = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert_eq!(err, ChainError::ExceededFailureCount { count: 3, max: 3 });
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    assert_eq!(exceeded.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn repetition_guard_stops_the_same_failing_call() {
    let ran = Arc::new(AtomicUsize::new(0));
    let turns = (0..6)
        .map(|i| ResponseScript::tool_call(format!("c{i}"), "flaky", r#"{"x": 1}"#))
        .collect();
    let mut chain = LLMChain::new(Arc::new(model(Format::ANTHROPIC, turns)))
        .with_tool(failing_tool(ran.clone()))
        .with_max_retry_count(100);
    chain.max_repeated_failures = 2;
    chain.add_message(Message::user("go")).await.unwrap();
    let err = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert_eq!(
        err,
        ChainError::RepeatedFailingCall {
            tool: "flaky".into(),
            count: 3
        }
    );
    assert_eq!(ran.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn fallback_model_answers_after_an_overloaded_primary() {
    let primary = ScriptedModel::new(Format::ANTHROPIC).fail(ModelError::Http {
        provider: "anthropic".into(),
        status: 529,
        kind: HttpErrorKind::Overloaded,
        message: "Overloaded".into(),
        retry_after: None,
    });
    let fallback = model(
        Format::OPENAI_CHAT,
        vec![ResponseScript::text("from fallback")],
    );
    let errors = Arc::new(AtomicUsize::new(0));
    let e2 = errors.clone();
    let mut chain = LLMChain::new(Arc::new(primary))
        .with_fallbacks(vec![Arc::new(fallback)])
        .with_callbacks(Callbacks::new().on_llm_error(move |_| {
            e2.fetch_add(1, Ordering::SeqCst);
        }));
    chain.add_message(Message::user("hi")).await.unwrap();
    chain.run(Mode::Single).await.unwrap();
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("from fallback")
    );
    assert_eq!(errors.load(Ordering::SeqCst), 1);

    // Every model failing: all_fallbacks_failed, and no partial message is added.
    let mut chain = LLMChain::new(Arc::new(ScriptedModel::new(Format::ANTHROPIC)))
        .with_fallbacks(vec![Arc::new(ScriptedModel::new(Format::OPENAI_CHAT))]);
    chain.add_message(Message::user("hi")).await.unwrap();
    let err = chain.run(Mode::Single).await.unwrap_err();
    assert!(matches!(err, ChainError::AllFallbacksFailed(_)), "{err:?}");
    assert_eq!(chain.messages().len(), 1);
}

#[tokio::test]
async fn stream_error_mid_response_gives_a_cancelled_message_whose_calls_never_run() {
    let ran = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(Arc::new(model(
        Format::ANTHROPIC,
        vec![
            ResponseScript::tool_call("c1", "flaky", r#"{"x": 1}"#).with_stop(ScriptStop::Error {
                kind: "overloaded_error".into(),
                message: "Overloaded".into(),
            }),
        ],
    )))
    .with_tool(failing_tool(ran.clone()));
    chain.add_message(Message::user("go")).await.unwrap();
    let err = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(err.to_string().contains("overloaded_error"), "{err}");
    let last = chain.last_message().unwrap();
    assert_eq!(last.status, MessageStatus::Cancelled);
    assert!(!last.is_tool_call());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

fn review_chain(turns: Vec<ResponseScript>) -> ScriptedModel {
    model(Format::OPENAI_CHAT, turns)
}

#[tokio::test]
async fn review_decisions_approve_edit_deny() {
    let turns = vec![
        ResponseScript::tool_call("c1", "calculator", r#"{"a": 1, "b": 1}"#)
            .with_call("c2", "calculator", r#"{"a": 2, "b": 2}"#)
            .with_call("c3", "calculator", r#"{"a": 3, "b": 3}"#),
        ResponseScript::text("ok"),
    ];
    let reviewed = Arc::new(Mutex::new(Vec::new()));
    let r2 = reviewed.clone();
    let model = Arc::new(review_chain(turns));
    let mut chain = LLMChain::new(model.clone())
        .with_tool(calc_tool())
        .with_review(|call: &ToolCall| match call.call_id.as_deref() {
            Some("c1") => ReviewDecision::Approve,
            Some("c2") => ReviewDecision::Edit {
                arguments: json!({"a": 20, "b": 20}).as_object().unwrap().clone(),
            },
            _ => ReviewDecision::Deny {
                reason: "Not allowed to add threes.".into(),
            },
        })
        .with_callbacks(Callbacks::new().on_tool_call_review(move |c, d| {
            r2.lock()
                .unwrap()
                .push((c.call_id.clone().unwrap(), d.clone()));
        }));
    chain.add_message(Message::user("go")).await.unwrap();
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    let results = &chain.messages()[2].tool_results;
    assert_eq!(results[0].content_text(), "2");
    assert_eq!(results[1].content_text(), "40");
    assert_eq!(results[2].content_text(), "Not allowed to add threes.");
    assert!(!results[2].is_error());
    assert_eq!(chain.current_failure_count(), 0);
    assert_eq!(reviewed.lock().unwrap().len(), 3);
    // What is stored is what ran: the edited call carries the arguments that ran (the
    // model's kept in its metadata), and the denied one is not `completed`.
    let calls = &chain.messages()[1].tool_calls;
    assert_eq!(calls[0].execution_status(), "completed");
    assert_eq!(calls[1].arguments_as_map()["a"], 20);
    assert!(calls[1].was_edited());
    assert_eq!(calls[1].original_arguments().unwrap()["a"], 2);
    assert_eq!(calls[1].execution_status(), "completed");
    assert_eq!(calls[2].execution_status(), "denied");
    assert!(!calls[0].was_edited());
    // The model's next request carries the edited call, not the one it sent.
    let requests = model.requests();
    let body: serde_json::Value = serde_json::from_slice(requests.last().unwrap()).unwrap();
    let sent = &body["messages"][1]["tool_calls"][1]["function"]["arguments"];
    let sent: serde_json::Value = serde_json::from_str(sent.as_str().unwrap()).unwrap();
    assert_eq!(sent, json!({"a": 20, "b": 20}));
}

#[tokio::test]
async fn review_interrupt_pauses_serialises_and_resumes_in_another_chain() {
    let turns = vec![
        ResponseScript::tool_call("c1", "calculator", r#"{"a": 1, "b": 1}"#)
            .with_call("c2", "calculator", r#"{"a": 2, "b": 2}"#)
            .with_call("c3", "calculator", r#"{"a": 3, "b": 3}"#)
            .with_call("c4", "calculator", r#"{"a": 4, "b": 4}"#),
    ];
    let mut chain = LLMChain::new(Arc::new(review_chain(turns)))
        .with_tool(calc_tool())
        .with_review(|call: &ToolCall| {
            if call.call_id.as_deref() == Some("c1") {
                ReviewDecision::Approve
            } else {
                ReviewDecision::Interrupt
            }
        });
    chain.add_message(Message::user("go")).await.unwrap();
    let pending = match chain.run(Mode::while_needs_response()).await.unwrap() {
        RunOutcome::ReviewRequired(p) => p,
        other => panic!("{other:?}"),
    };
    let awaiting: Vec<_> = pending.awaiting().map(|c| c.call_id.clone()).collect();
    assert_eq!(awaiting, ["c2", "c3", "c4"]);
    // Nothing ran yet.
    assert_eq!(chain.messages().len(), 2);

    // Another process: the state is JSON.
    let saved = serde_json::to_string(chain.state()).unwrap();
    let state: ChainState = serde_json::from_str(&saved).unwrap();
    let next = review_chain(vec![ResponseScript::text("all done")]);
    let mut resumed = LLMChain::from_state(Arc::new(next), state).with_tool(calc_tool());
    assert!(resumed.pending_review().is_some());
    // A run before deciding just reports the pending review again.
    assert!(matches!(
        resumed.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::ReviewRequired(_)
    ));
    // Missing decisions are an error.
    let err = resumed
        .resume(
            vec![("c2".into(), HumanDecision::Approve)],
            Mode::while_needs_response(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("missing: c3, c4"), "{err}");
    let out = resumed
        .resume(
            vec![
                (
                    "c2".into(),
                    HumanDecision::Edit {
                        arguments: json!({"a": 10, "b": 10}).as_object().unwrap().clone(),
                    },
                ),
                ("c3".into(), HumanDecision::Reject { reason: None }),
                (
                    "c4".into(),
                    HumanDecision::Deny {
                        reason: Some("No.".into()),
                    },
                ),
            ],
            Mode::while_needs_response(),
        )
        .await
        .unwrap();
    assert_eq!(out, RunOutcome::Done);
    let results = &resumed.messages()[2].tool_results;
    assert_eq!(results[0].content_text(), "2");
    assert_eq!(results[1].content_text(), "20");
    assert!(results[2].is_error() && results[2].is_refusal());
    assert_eq!(
        results[2].content_text(),
        "Tool call 'calculator' was rejected by a human reviewer."
    );
    let statuses: Vec<&str> = resumed.messages()[1]
        .tool_calls
        .iter()
        .map(|c| c.execution_status())
        .collect();
    assert_eq!(statuses, ["completed", "completed", "rejected", "denied"]);
    assert!(resumed.messages()[1].tool_calls[1].was_edited());
    assert!(!results[3].is_error());
    assert_eq!(results[3].content_text(), "No.");
    assert_eq!(
        resumed.last_message().unwrap().text().as_deref(),
        Some("all done")
    );
}

#[tokio::test]
async fn tool_interrupt_stops_and_resumes_with_the_real_result() {
    let approval = Tool::builder("ask_human")
        .schema(json!({"type": "object", "properties": {"question": {"type": "string"}}}))
        .handler(|args, _| async move {
            ToolOutput::interrupt(
                "Waiting for a human.",
                json!({"question": args["question"]}),
            )
        })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(Arc::new(model(
        Format::ANTHROPIC,
        vec![
            ResponseScript::tool_call("c1", "ask_human", r#"{"question": "Deploy?"}"#),
            ResponseScript::text("Deploying."),
        ],
    )))
    .with_tool(approval);
    chain.add_message(Message::user("deploy")).await.unwrap();
    let interrupts = match chain.run(Mode::while_needs_response()).await.unwrap() {
        RunOutcome::Interrupted(i) => i,
        other => panic!("{other:?}"),
    };
    assert_eq!(interrupts[0].tool_call_id, "c1");
    assert_eq!(interrupts[0].data, Some(json!({"question": "Deploy?"})));
    assert!(
        chain
            .replace_tool_result(ToolResult::text("c1", "Yes, deploy.").with_name("ask_human"))
            .await
            .unwrap()
    );
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(
        chain.messages()[2].tool_results[0].content_text(),
        "Yes, deploy."
    );
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("Deploying.")
    );
}

/// A tool that interrupts to ask for approval, answered by a person's decisions:
/// approve runs it again (it sees the approval and goes on, once), edit runs it with the
/// new arguments, deny answers it without running; the stored calls say so.
#[tokio::test]
async fn tool_interrupts_are_answered_by_decisions() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let r2 = ran.clone();
    let deploy = Tool::builder("deploy")
        .schema(json!({"type": "object", "properties": {"env": {"type": "string"}}}))
        .handler(move |args, ctx| {
            let ran = r2.clone();
            async move {
                if !ctx.human_approved() {
                    return ToolOutput::interrupt("Needs approval.", json!({"env": args["env"]}));
                }
                ran.lock()
                    .unwrap()
                    .push(args["env"].as_str().unwrap_or("").to_owned());
                ToolOutput::text(format!("deployed to {}", args["env"]))
            }
        })
        .build()
        .unwrap();
    let turns = vec![
        ResponseScript::tool_call("c1", "deploy", r#"{"env": "staging"}"#)
            .with_call("c2", "deploy", r#"{"env": "prod"}"#)
            .with_call("c3", "deploy", r#"{"env": "dev"}"#),
        ResponseScript::text("Done."),
    ];
    let mut chain = LLMChain::new(Arc::new(review_chain(turns))).with_tool(deploy);
    chain.add_message(Message::user("deploy")).await.unwrap();
    assert!(matches!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Interrupted(_)
    ));
    let waiting: Vec<_> = chain
        .interrupted_calls()
        .iter()
        .map(|c| c.call_id.clone().unwrap())
        .collect();
    assert_eq!(waiting, ["c1", "c2", "c3"]);
    let e = chain
        .answer_interrupts(vec![("c1".into(), HumanDecision::Approve)])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("missing: c2, c3"), "{e}");
    let step = chain
        .answer_interrupts(vec![
            ("c1".into(), HumanDecision::Approve),
            (
                "c2".into(),
                HumanDecision::Edit {
                    arguments: json!({"env": "canary"}).as_object().unwrap().clone(),
                },
            ),
            (
                "c3".into(),
                HumanDecision::Deny {
                    reason: Some("not dev".into()),
                },
            ),
        ])
        .await
        .unwrap();
    assert!(step.is_continue());
    assert_eq!(*ran.lock().unwrap(), ["staging", "canary"]);
    let results = &chain.messages()[2].tool_results;
    assert_eq!(results[0].content_text(), "deployed to \"staging\"");
    assert_eq!(results[1].content_text(), "deployed to \"canary\"");
    assert_eq!(results[2].content_text(), "not dev");
    let calls = &chain.messages()[1].tool_calls;
    assert!(calls[0].human_approved() && !calls[0].was_edited());
    assert!(calls[1].was_edited() && calls[1].arguments_as_map()["env"] == "canary");
    // The body of c3 ran once (it interrupted): its status says so; its result is
    // the denial.
    assert_eq!(calls[2].execution_status(), "completed");
    assert_eq!((calls[0].review_round(), calls[2].review_round()), (1, 0));
    assert!(chain.interrupted_calls().is_empty());
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(
        chain.last_message().unwrap().text().as_deref(),
        Some("Done.")
    );
}

fn screenshot_tool() -> Tool {
    Tool::builder("screenshot")
        .handler(|_, ctx| async move {
            let image = ContentPart::image("iVBORw0KGgo=", "image/png");
            ToolOutput::Result(Box::new(
                ToolResult::success(
                    ctx.tool_call_id(),
                    vec![ContentPart::text("Screenshot taken."), image.clone()],
                )
                .with_expansion(
                    MessageExpansion::insert(vec![Message::user(vec![
                        ContentPart::text("The screenshot:"),
                        image,
                    ])])
                    .keep_text_only(),
                ),
            ))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn expansion_is_applied_once_and_survives_no_restore() {
    let mut chain = LLMChain::new(Arc::new(model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "screenshot", "{}"),
            ResponseScript::text("I see a login page."),
        ],
    )))
    .with_tool(screenshot_tool());
    chain.add_message(Message::user("look")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let roles: Vec<Role> = chain.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::User,
            Role::Assistant
        ]
    );
    let kept = &chain.messages()[2].tool_results[0].content;
    assert_eq!(kept, &vec![ContentPart::text("Screenshot taken.")]);
    assert!(
        chain.messages()[3]
            .content
            .iter()
            .any(|p| p.r#type == ContentType::Image)
    );

    // A restored chain has no expansion left to apply.
    let state: ChainState =
        serde_json::from_str(&serde_json::to_string(chain.state()).unwrap()).unwrap();
    let mut restored =
        LLMChain::from_state(Arc::new(ScriptedModel::new(Format::OPENAI_CHAT)), state);
    let before = restored.messages().len();
    assert!(
        Steps::expand_tool_results(&mut restored)
            .await
            .unwrap()
            .is_continue()
    );
    assert_eq!(restored.messages().len(), before);
}

/// A mode without `expand_tool_results`.
struct NoExpand;
impl CustomMode for NoExpand {
    fn run<'a>(&'a self, chain: &'a mut LLMChain) -> ModeFuture<'a> {
        Box::pin(async move {
            loop {
                step!(Steps::execute_tools(chain).await);
                step!(Ok(Steps::check_tool_interrupts(chain)));
                step!(Steps::check_max_runs(chain, 5));
                step!(Steps::call_llm(chain).await);
                step!(Ok(Steps::continue_or_done(chain)));
            }
        })
    }
}

#[tokio::test]
async fn a_mode_without_the_step_ignores_expansions() {
    let mut chain = LLMChain::new(Arc::new(model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "screenshot", "{}"),
            ResponseScript::text("ok"),
        ],
    )))
    .with_tool(screenshot_tool());
    chain.add_message(Message::user("look")).await.unwrap();
    assert_eq!(
        chain.run(Mode::custom(NoExpand)).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(chain.messages().len(), 4);
    assert_eq!(chain.messages()[2].tool_results[0].content.len(), 2);
}

#[tokio::test]
async fn cancellation_mid_stream_leaves_a_cancelled_message() {
    let slow = model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "calculator", r#"{"a": 1, "b": 1}"#)
                .with_text("Some long text before the call."),
        ],
    )
    .chunk_size(4)
    .chunk_delay(Duration::from_millis(5));
    let mut chain = LLMChain::new(Arc::new(slow)).with_tool(calc_tool());
    chain.add_message(Message::user("go")).await.unwrap();
    // Cancelled as the first text arrives, mid-stream.
    let token = chain.cancellation_token();
    chain = chain.with_callbacks(Callbacks::new().on_llm_new_delta(move |ev| {
        if matches!(ev, llmchain::provider::StreamEvent::TextDelta { .. }) {
            token.cancel();
        }
    }));
    let err = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert_eq!(err, ChainError::Cancelled);
    let last = chain.last_message().unwrap();
    assert_eq!(last.status, MessageStatus::Cancelled);
    assert!(!last.is_tool_call());
    assert_eq!(chain.messages().len(), 2);
    // What arrived before the cancel is kept (the decoder's assembly, not a re-merge).
    let text = last.text().unwrap_or_default();
    assert!(
        !text.is_empty() && "Some long text before the call.".starts_with(&text),
        "{text:?}"
    );
    assert_eq!(last.metadata["streaming_error"], "cancelled");
}

#[tokio::test]
async fn cancellation_mid_tool_writes_no_half_tool_message() {
    let started = Arc::new(tokio::sync::Notify::new());
    let s2 = started.clone();
    let slow = Tool::builder("slow")
        .handler(move |_, ctx| {
            let s2 = s2.clone();
            async move {
                s2.notify_one();
                ctx.cancelled().await;
                ToolOutput::text("never")
            }
        })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(Arc::new(model(
        Format::ANTHROPIC,
        vec![ResponseScript::tool_call("c1", "slow", "{}")],
    )))
    .with_tool(slow);
    chain.add_message(Message::user("go")).await.unwrap();
    let token = chain.cancellation_token();
    tokio::spawn(async move {
        started.notified().await;
        token.cancel();
    });
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap_err(),
        ChainError::Cancelled
    );
    assert_eq!(chain.messages().len(), 2);
    assert_eq!(chain.last_message().unwrap().role, Role::Assistant);
}

/// Records every sink operation.
#[derive(Default)]
struct RecordingSink {
    log: Mutex<Vec<String>>,
}

impl ConversationSink for RecordingSink {
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        self.log
            .lock()
            .unwrap()
            .push(format!("append {position} {}", message.role.as_str()));
        Box::pin(async { Ok(()) })
    }
    fn replace_message<'a>(&'a self, position: usize, _m: &'a Message) -> SinkFuture<'a> {
        self.log.lock().unwrap().push(format!("replace {position}"));
        Box::pin(async { Ok(()) })
    }
    fn set_tool_status<'a>(&'a self, call_id: &'a str, s: ExecutionStatus) -> SinkFuture<'a> {
        self.log
            .lock()
            .unwrap()
            .push(format!("status {call_id} {s}"));
        Box::pin(async { Ok(()) })
    }
    fn save_state<'a>(&'a self, _state: &'a ChainState) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn statuses_are_persisted_before_and_after_the_body() {
    let sink = Arc::new(RecordingSink::default());
    let s2 = sink.clone();
    let probe = Tool::builder("probe")
        .handler(move |_, _| {
            let s2 = s2.clone();
            async move {
                let seen = s2.log.lock().unwrap().last().cloned().unwrap_or_default();
                ToolOutput::text(seen)
            }
        })
        .build()
        .unwrap();
    let mut chain = LLMChain::new(Arc::new(model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "probe", "{}"),
            ResponseScript::text("ok"),
        ],
    )))
    .with_tool(probe)
    .with_sink(sink.clone());
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    // The body saw `executing` already persisted.
    assert_eq!(
        chain.messages()[2].tool_results[0].content_text(),
        "status c1 executing"
    );
    let log = sink.log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "append 0 user",
            "append 1 assistant",
            "status c1 executing",
            "status c1 completed",
            "append 2 tool",
            "append 3 assistant"
        ]
    );
}

#[tokio::test]
async fn reused_call_ids_are_made_unique_so_statuses_never_mix() {
    // Gemini sends no ids (the decoder synthesises the same ones for two responses with
    // the same responseId), and some compatible servers number calls call_0, call_1...
    // on every turn. Each turn's calls must keep their own status.
    for format in [Format::GEMINI, Format::OPENAI_CHAT] {
        let counter = Arc::new(AtomicUsize::new(0));
        let sink = Arc::new(RecordingSink::default());
        let mut chain =
            LLMChain::new(Arc::new(model(
                format,
                vec![
                    ResponseScript::tool_call("call_0", "flaky", r#"{"x": 1}"#),
                    ResponseScript::tool_call("call_0", "calculator", r#"{"a": 1, "b": 2}"#)
                        .with_call("call_0", "calculator", r#"{"a": 3, "b": 4}"#),
                    ResponseScript::text("done"),
                ],
            )))
            .with_tool(calc_tool())
            .with_tool(failing_tool(counter.clone()))
            .with_sink(sink.clone());
        chain.add_message(Message::user("go")).await.unwrap();
        chain.run(Mode::while_needs_response()).await.unwrap();
        let msgs = chain.messages();
        assert_eq!(msgs.len(), 6, "{format}");
        let first = &msgs[1].tool_calls[0];
        let second: Vec<&ToolCall> = msgs[3].tool_calls.iter().collect();
        assert_eq!(first.execution_status(), "failed", "{format}");
        assert!(
            second.iter().all(|c| c.execution_status() == "completed"),
            "{format}"
        );
        let mut ids: Vec<&str> = std::iter::once(first)
            .chain(second.iter().copied())
            .map(|c| c.call_id.as_deref().unwrap())
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "{format}: ids repeat: {ids:?}");
        // The renamed calls remember the wire's id, and their results name the new id.
        assert!(
            second
                .iter()
                .any(|c| c.metadata.contains_key("wire_call_id"))
        );
        for (call, result) in second.iter().zip(&msgs[4].tool_results) {
            assert_eq!(Some(result.tool_call_id.as_str()), call.call_id.as_deref());
        }
        // The sink saw one `completed` per distinct id, never the first call's id again.
        let log = sink.log.lock().unwrap().clone();
        let first_id = first.call_id.as_deref().unwrap();
        let first_statuses: Vec<_> = log
            .iter()
            .filter(|l| l.starts_with(&format!("status {first_id} ")))
            .collect();
        assert_eq!(
            first_statuses,
            [
                &format!("status {first_id} executing"),
                &format!("status {first_id} failed")
            ],
            "{format}"
        );
    }
}

#[tokio::test]
async fn a_restored_executing_call_is_rerun_only_when_idempotent() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counting = |name: &str, idempotent: bool, ran: Arc<AtomicUsize>| {
        Tool::builder(name)
            .idempotent(idempotent)
            .handler(move |_, _| {
                let ran = ran.clone();
                async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    "ran"
                }
            })
            .build()
            .unwrap()
    };
    let mut state = ChainState::default();
    state.conversation.messages.push(Message::user("go"));
    let mut assistant = Message::assistant_with_calls(
        "",
        vec![
            ToolCall::function("c1", "send_email", json!({}))
                .unwrap()
                .with_execution_status(ExecutionStatus::Executing),
            ToolCall::function("c2", "read_file", json!({}))
                .unwrap()
                .with_execution_status(ExecutionStatus::Executing),
        ],
    );
    assistant.status = MessageStatus::Complete;
    state.conversation.messages.push(assistant);
    let mut chain = LLMChain::from_state(
        Arc::new(model(Format::OPENAI_CHAT, vec![ResponseScript::text("ok")])),
        state,
    )
    .with_tool(counting("send_email", false, ran.clone()))
    .with_tool(counting("read_file", true, ran.clone()));
    chain.run(Mode::while_needs_response()).await.unwrap();
    let results = &chain.messages()[2].tool_results;
    assert!(results[0].is_error());
    assert!(results[0].content_text().contains("unknown"));
    assert_eq!(results[1].content_text(), "ran");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

/// Records callback names in order.
#[derive(Default)]
struct Order(Mutex<Vec<&'static str>>);
impl ChainCallbacks for Order {
    fn on_llm_new_message(&self, _: &Message) {
        self.0.lock().unwrap().push("llm_new_message");
    }
    fn on_llm_token_usage(&self, _: &llmchain::message::TokenUsage) {
        self.0.lock().unwrap().push("llm_token_usage");
    }
    fn on_tool_call_identified(&self, _: &ToolCall) {
        self.0.lock().unwrap().push("tool_call_identified");
    }
    fn on_message_processed(&self, _: &Message) {
        self.0.lock().unwrap().push("message_processed");
    }
    fn on_tool_call_review(&self, _: &ToolCall, _: &ReviewDecision) {
        self.0.lock().unwrap().push("tool_call_review");
    }
    fn on_tool_execution_started(&self, _: &ToolCall) {
        self.0.lock().unwrap().push("tool_execution_started");
    }
    fn on_tool_pre_execution(&self, _: &ToolCall) {
        self.0.lock().unwrap().push("tool_pre_execution");
    }
    fn on_tool_execution_completed(&self, _: &ToolCall, _: &ToolResult) {
        self.0.lock().unwrap().push("tool_execution_completed");
    }
    fn on_tool_execution_failed(&self, _: &ToolCall, _: &ToolResult) {
        self.0.lock().unwrap().push("tool_execution_failed");
    }
    fn on_tool_execution_exception(&self, _: &ToolCall, _: &llmchain::message::ToolException) {
        self.0.lock().unwrap().push("tool_execution_exception");
    }
    fn on_tool_response_created(&self, _: &Message) {
        self.0.lock().unwrap().push("tool_response_created");
    }
}

/// Forwards to a shared [`Order`].
struct Shared(Arc<Order>);
impl ChainCallbacks for Shared {
    fn on_llm_new_message(&self, m: &Message) {
        self.0.on_llm_new_message(m)
    }
    fn on_llm_token_usage(&self, u: &llmchain::message::TokenUsage) {
        self.0.on_llm_token_usage(u)
    }
    fn on_tool_call_identified(&self, c: &ToolCall) {
        self.0.on_tool_call_identified(c)
    }
    fn on_message_processed(&self, m: &Message) {
        self.0.on_message_processed(m)
    }
    fn on_tool_call_review(&self, c: &ToolCall, d: &ReviewDecision) {
        self.0.on_tool_call_review(c, d)
    }
    fn on_tool_execution_started(&self, c: &ToolCall) {
        self.0.on_tool_execution_started(c)
    }
    fn on_tool_pre_execution(&self, c: &ToolCall) {
        self.0.on_tool_pre_execution(c)
    }
    fn on_tool_execution_completed(&self, c: &ToolCall, r: &ToolResult) {
        self.0.on_tool_execution_completed(c, r)
    }
    fn on_tool_execution_failed(&self, c: &ToolCall, r: &ToolResult) {
        self.0.on_tool_execution_failed(c, r)
    }
    fn on_tool_execution_exception(&self, c: &ToolCall, x: &llmchain::message::ToolException) {
        self.0.on_tool_execution_exception(c, x)
    }
    fn on_tool_response_created(&self, m: &Message) {
        self.0.on_tool_response_created(m)
    }
}

#[tokio::test]
async fn callbacks_fire_in_the_documented_order() {
    let boom = Tool::builder("boom")
        .handler(|_, _| async move {
            if true {
                panic!("kaboom");
            }
            "unreachable"
        })
        .build()
        .unwrap();
    let order = Arc::new(Order::default());
    let mut chain = LLMChain::new(Arc::new(model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "calculator", r#"{"a": 1, "b": 1}"#)
                .with_call("c2", "boom", "{}")
                .with_usage(10, 5),
            ResponseScript::text("ok").with_usage(20, 2),
        ],
    )))
    .with_tool(calc_tool())
    .with_tool(boom)
    .with_review(|_: &ToolCall| ReviewDecision::Approve)
    .with_callbacks(Shared(order.clone()));
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let got = order.0.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            "llm_new_message",
            "llm_token_usage",
            "tool_call_identified",
            "tool_call_identified",
            "message_processed",
            "tool_call_review",
            "tool_call_review",
            "tool_execution_started",
            "tool_execution_started",
            "tool_pre_execution",
            "tool_pre_execution",
            "tool_execution_completed",
            "tool_execution_exception",
            "tool_execution_failed",
            "message_processed",
            "tool_response_created",
            "llm_new_message",
            "llm_token_usage",
            "message_processed",
        ]
    );
    let r = &chain.messages()[2].tool_results[1];
    assert!(r.is_exception() && !r.is_refusal());
}

/// A turn with more calls than the cap, or more argument bytes, runs none of them: each
/// is refused saying why, and the loop goes on (the model asks again with fewer).
#[tokio::test]
async fn a_turn_over_the_call_caps_runs_nothing_and_says_why() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counting = {
        let ran = ran.clone();
        Tool::builder("note")
            .handler(move |_, _| {
                ran.fetch_add(1, Ordering::SeqCst);
                async { "noted" }
            })
            .build()
            .unwrap()
    };
    let mut many = ResponseScript::default();
    for i in 0..5 {
        many = many.with_call(format!("c{i}"), "note", json!({ "i": i }).to_string());
    }
    let big = ResponseScript::tool_call("b1", "note", json!({"t": "x".repeat(2000)}).to_string());
    let m = model(
        Format::OPENAI_CHAT,
        vec![
            many,
            big,
            ResponseScript::tool_call("ok", "note", "{}"),
            ResponseScript::text("done"),
        ],
    );
    let mut chain = LLMChain::new(Arc::new(m)).with_tool(counting);
    chain.max_calls_per_turn = 4;
    chain.max_call_argument_bytes_per_turn = 1000;
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "only the call within the caps ran"
    );
    let tool_messages: Vec<_> = chain
        .messages()
        .iter()
        .filter(|m| !m.tool_results.is_empty())
        .collect();
    assert_eq!(tool_messages[0].tool_results.len(), 5);
    assert!(tool_messages[0].tool_results.iter().all(|r| r.is_refusal()));
    assert!(
        tool_messages[0].tool_results[0]
            .content_text()
            .contains("makes 5 tool calls, more than the 4 allowed")
    );
    assert!(
        tool_messages[1].tool_results[0]
            .content_text()
            .contains("more than the 1000 allowed")
    );
    assert!(!tool_messages[2].tool_results[0].is_error());
}

/// Refuses every assistant message with an error of `kind`.
struct RefusingSink(SinkErrorKind);

impl ConversationSink for RefusingSink {
    fn append_message<'a>(&'a self, _position: usize, message: &'a Message) -> SinkFuture<'a> {
        let refuse = message.role == Role::Assistant;
        let kind = self.0;
        Box::pin(async move {
            if refuse {
                Err(SinkError::new(kind, "the message is too large to store"))
            } else {
                Ok(())
            }
        })
    }
    fn replace_message<'a>(&'a self, _position: usize, _m: &'a Message) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
    fn set_tool_status<'a>(&'a self, _id: &'a str, _s: ExecutionStatus) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
    fn save_state<'a>(&'a self, _state: &'a ChainState) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
}

/// A model call that fails mid-stream keeps its own error when the store refuses the
/// partial message (it used to be replaced by the store's); the refusal goes to
/// `on_error`. A lost lease still wins: a worker must stop.
#[tokio::test]
async fn a_refused_partial_message_does_not_hide_the_model_error() {
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/openai_chat/openrouter_comments_midstream_error.sse"
    ))
    .unwrap();
    let run = |kind| {
        let body = body.clone();
        async move {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let s = seen.clone();
            let model = ScriptedModel::new(Format::OPENAI_CHAT).respond_bytes(body);
            let mut chain = LLMChain::new(Arc::new(model))
                .with_sink(Arc::new(RefusingSink(kind)))
                .with_callbacks(
                    Callbacks::new()
                        .on_error(move |e: &ChainError| s.lock().unwrap().push(e.to_string())),
                );
            chain
                .add_message(Message::user("write notes"))
                .await
                .unwrap();
            let e = chain.run(Mode::Single).await.unwrap_err();
            let seen = seen.lock().unwrap().clone();
            (e, seen)
        }
    };
    let (e, seen) = run(SinkErrorKind::Other).await;
    assert!(
        matches!(&e, ChainError::Model(ModelError::Provider { message, .. }) if message.contains("Upstream provider disconnected")),
        "{e:?}"
    );
    assert!(
        seen.iter().any(|s| s.contains("too large to store")),
        "{seen:?}"
    );
    let (e, _) = run(SinkErrorKind::LeaseLost).await;
    assert!(
        matches!(&e, ChainError::Persist(p) if p.must_stop()),
        "{e:?}"
    );
}

/// A whole message the store refuses (too large to keep) ends the run with the store's
/// error before anything announces it: no `on_llm_new_message`, no identified call,
/// no processed message, and its calls never run. The spent tokens are still reported.
#[tokio::test]
async fn a_message_the_store_refuses_is_never_announced_as_done() {
    let order = Arc::new(Order::default());
    let mut chain = LLMChain::new(Arc::new(model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "calculator", r#"{"a": 1, "b": 1}"#).with_usage(10, 5),
        ],
    )))
    .with_tool(calc_tool())
    .with_sink(Arc::new(RefusingSink(SinkErrorKind::Other)))
    .with_callbacks(Shared(order.clone()));
    chain.add_message(Message::user("go")).await.unwrap();
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(
        matches!(&e, ChainError::Persist(p) if p.to_string().contains("too large to store")),
        "{e:?}"
    );
    assert_eq!(*order.0.lock().unwrap(), ["llm_token_usage"]);
    assert_eq!(chain.messages().len(), 1, "only the user message is kept");
}

/// The chain fires `on_tool_execution_exception` only for a panic it rescued, never for
/// a tool that returned an exception-shaped result.
#[tokio::test]
async fn a_tool_made_exception_fires_no_exception_callback() {
    let liar = Tool::builder("liar")
        .handler(|_, _| async {
            ToolOutput::Result(Box::new(ToolResult::exception(
                "x",
                "pretend panic",
                llmchain::message::ToolException {
                    message: "pretend".into(),
                    location: None,
                    backtrace: None,
                },
            )))
        })
        .build()
        .unwrap();
    let order = Arc::new(Order::default());
    let mut chain = LLMChain::new(Arc::new(model(
        Format::OPENAI_CHAT,
        vec![
            ResponseScript::tool_call("c1", "liar", "{}"),
            ResponseScript::text("ok"),
        ],
    )))
    .with_tool(liar)
    .with_review(|_: &ToolCall| ReviewDecision::Approve)
    .with_callbacks(Shared(order.clone()));
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let got = order.0.lock().unwrap().clone();
    assert!(!got.contains(&"tool_execution_exception"), "{got:?}");
    assert!(got.contains(&"tool_execution_failed"), "{got:?}");
    let tool_message = &chain.messages()[2];
    let r = &tool_message.tool_results[0];
    assert!(r.is_error() && !r.is_exception(), "{r:?}");
}

/// A conversation built by hand: `assistant_with_calls` + `add_message` gives calls the
/// chain runs (completed on the way in), without `validate`.
#[tokio::test]
async fn calls_added_by_hand_are_completed_and_run() {
    let mut chain = LLMChain::new(model(Format::OPENAI_CHAT, vec![ResponseScript::text("2")]))
        .with_tool(calc_tool());
    chain.add_message(Message::user("1 + 1?")).await.unwrap();
    let call = ToolCall {
        call_id: Some("c1".into()),
        name: Some("calculator".into()),
        arguments: Some(llmchain::message::Arguments::Raw(
            r#"{"a": 1, "b": 1}"#.into(),
        )),
        ..Default::default()
    };
    chain
        .add_message(Message::assistant_with_calls("Adding.", vec![call]))
        .await
        .unwrap();
    assert!(chain.messages()[1].tool_calls[0].is_complete());
    chain.run(Mode::while_needs_response()).await.unwrap();
    let r = &chain.messages()[2].tool_results[0];
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(r.content_text(), "2");
}

/// The pending calls of the last message run on request, with or without human
/// decisions, and the model is not called.
#[tokio::test]
async fn pending_calls_execute_on_request_without_a_model_call() {
    let scripted = Arc::new(ScriptedModel::new(Format::OPENAI_CHAT));
    let mut chain = LLMChain::new(scripted.clone())
        .with_tool(calc_tool())
        .with_review(|call| match call.call_id.as_deref() {
            Some("c2") => ReviewDecision::Interrupt,
            _ => ReviewDecision::Approve,
        });
    chain.add_message(Message::user("sums")).await.unwrap();
    let call = |id: &str| ToolCall {
        call_id: Some(id.into()),
        name: Some("calculator".into()),
        arguments: Some(llmchain::message::Arguments::Raw(
            r#"{"a": 2, "b": 2}"#.into(),
        )),
        ..Default::default()
    };
    chain
        .add_message(Message::assistant_with_calls(
            "",
            vec![call("c1"), call("c2")],
        ))
        .await
        .unwrap();
    let step = chain.execute_tool_calls().await.unwrap();
    assert!(
        matches!(
            step,
            std::ops::ControlFlow::Break(RunOutcome::ReviewRequired(_))
        ),
        "{step:?}"
    );
    let step = chain
        .execute_tool_calls_with(vec![("c2".into(), HumanDecision::Approve)])
        .await
        .unwrap();
    assert_eq!(step, std::ops::ControlFlow::Continue(()));
    let results = &chain.last_message().unwrap().tool_results;
    assert_eq!(results.len(), 2);
    assert!(
        results.iter().all(|r| r.content_text() == "4"),
        "{results:?}"
    );
    assert!(scripted.requests().is_empty(), "the model was not called");
    assert!(chain.needs_response());
}

/// A run as a `Stream` of events: the same things the callbacks see, in order, ending
/// with `Finished`; the callbacks still fire.
#[tokio::test]
async fn a_run_streams_its_events_and_ends_with_finished() {
    use futures_util::StreamExt;
    use llmchain::chain::ChainEvent;
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let mut chain = chain_with(
        Format::ANTHROPIC,
        vec![
            ResponseScript::tool_call("c1", "calculator", r#"{"a": 2, "b": 3}"#),
            ResponseScript::text("5"),
        ],
    )
    .await
    .with_callbacks(Callbacks::new().on_tool_execution_started(move |_| {
        s.fetch_add(1, Ordering::SeqCst);
    }));
    let events: Vec<ChainEvent> = chain.stream(Mode::while_needs_response()).collect().await;
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ChainEvent::ModelMessage(_) => Some("model_message"),
            ChainEvent::ToolStarted(_) => Some("tool_started"),
            ChainEvent::ToolCompleted { .. } => Some("tool_completed"),
            ChainEvent::ToolMessage(_) => Some("tool_message"),
            ChainEvent::Finished(_) => Some("finished"),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "model_message",
            "tool_started",
            "tool_completed",
            "tool_message",
            "model_message",
            "finished"
        ]
    );
    assert!(matches!(
        events.last(),
        Some(ChainEvent::Finished(Ok(RunOutcome::Done)))
    ));
    assert!(events.iter().any(|e| matches!(e, ChainEvent::Delta(_))));
    assert_eq!(seen.load(Ordering::SeqCst), 1, "callbacks fire too");
    assert_eq!(chain.last_message().unwrap().text().as_deref(), Some("5"));
    // The chain is usable again, and a plain run streams nothing anywhere.
    chain.add_message(Message::user("again?")).await.unwrap();
}

/// Two responses spliced into one Anthropic stream (a second `message_start` with
/// another id inside the first): the turn fails, and no call from either message runs.
#[tokio::test]
async fn a_spliced_anthropic_stream_runs_no_call() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = {
        let ran = ran.clone();
        Tool::builder("delete_file")
            .schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
            .handler(move |_, _| {
                let ran = ran.clone();
                async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    ToolOutput::text("deleted")
                }
            })
            .build()
            .unwrap()
    };
    let start = |id: &str| {
        format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"{id}\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{{\"input_tokens\":5,\"output_tokens\":1}}}}}}\n\n"
        )
    };
    let call = |i: u32, id: &str| {
        format!(
            "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"delete_file\",\"input\":{{\"path\":\"a\"}}}}}}\n\n\
             event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{i}}}\n\n"
        )
    };
    let end = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
               event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let spliced = format!(
        "{}{}{}{}{end}",
        start("msg_A"),
        call(0, "toolu_A"),
        start("msg_B"),
        call(1, "toolu_B")
    );
    let model = ScriptedModel::new(Format::ANTHROPIC).respond_bytes(spliced.into_bytes());
    let mut chain = LLMChain::new(model).with_tool(counted);
    chain.add_message(Message::user("clean up")).await.unwrap();
    let err = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(err.to_string().contains("spliced"), "{err}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no call ran");
    assert!(
        chain.messages().iter().all(|m| m.role != Role::Tool),
        "no result was recorded: {:?}",
        chain.messages()
    );
}

/// Keeps the conversation as a store would, and refuses (as a lost lease) every
/// `replace_message` after the first `allowed`.
#[derive(Default)]
struct StoringSink {
    messages: Mutex<Vec<Message>>,
    replaces: AtomicUsize,
    allowed: AtomicUsize,
}

impl ConversationSink for StoringSink {
    fn append_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        let mut m = self.messages.lock().unwrap();
        assert_eq!(m.len(), position);
        m.push(message.clone());
        Box::pin(async { Ok(()) })
    }
    fn replace_message<'a>(&'a self, position: usize, message: &'a Message) -> SinkFuture<'a> {
        let n = self.replaces.fetch_add(1, Ordering::SeqCst);
        if n >= self.allowed.load(Ordering::SeqCst) {
            return Box::pin(async {
                Err(SinkError::new(
                    SinkErrorKind::LeaseLost,
                    "the lease was lost",
                ))
            });
        }
        self.messages.lock().unwrap()[position] = message.clone();
        Box::pin(async { Ok(()) })
    }
    fn set_tool_status<'a>(&'a self, _: &'a str, _: ExecutionStatus) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
    fn save_state<'a>(&'a self, _state: &'a ChainState) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
}

/// At most once across a tool's interrupt: the process running an approved call again
/// stops (its lease is lost) after the body ran and before the result is stored. What
/// is stored says the outcome is unknown, with the approval and the new round on the
/// call; a chain loaded from it has nothing interrupted left, and never runs the body a
/// third time.
#[tokio::test]
async fn an_approved_rerun_cut_off_is_never_run_again() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let deploy = move || {
        let r2 = r2.clone();
        Tool::builder("deploy")
            .handler(move |_, ctx| {
                let ran = r2.clone();
                async move {
                    if !ctx.human_approved() {
                        return ToolOutput::interrupt("Needs approval.", json!({}));
                    }
                    ran.fetch_add(1, Ordering::SeqCst);
                    ToolOutput::text("deployed")
                }
            })
            .build()
            .unwrap()
    };
    let sink = Arc::new(StoringSink::default());
    sink.allowed.store(usize::MAX, Ordering::SeqCst);
    let mut chain = LLMChain::new(Arc::new(review_chain(vec![ResponseScript::tool_call(
        "c1", "deploy", "{}",
    )])))
    .with_tool(deploy())
    .with_sink(sink.clone());
    chain.add_message(Message::user("deploy")).await.unwrap();
    assert!(matches!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Interrupted(_)
    ));
    // The approval and the tool message without its interrupt may be stored; the
    // final result may not.
    sink.replaces.store(0, Ordering::SeqCst);
    sink.allowed.store(2, Ordering::SeqCst);
    let e = chain
        .answer_interrupts(vec![("c1".into(), HumanDecision::Approve)])
        .await
        .unwrap_err();
    assert!(
        matches!(e, ChainError::Persist(ref p) if p.must_stop()),
        "{e:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the body ran once");
    let stored = sink.messages.lock().unwrap().clone();
    let call = &stored[1].tool_calls[0];
    assert!(call.human_approved());
    assert_eq!(call.review_round(), 1);
    let result = &stored[2].tool_results[0];
    assert!(!result.is_interrupt() && result.is_error(), "{result:?}");
    assert!(result.content_text().contains("is unknown"), "{result:?}");
    // Another process goes on from what is stored: nothing is interrupted, the model is
    // asked next, the body does not run again.
    let mut state = ChainState::default();
    state.conversation.messages = stored;
    let mut next = LLMChain::from_state(
        Arc::new(review_chain(vec![ResponseScript::text(
            "It may have deployed.",
        )])),
        state,
    )
    .with_tool(deploy());
    assert!(next.interrupted_calls().is_empty());
    assert_eq!(
        next.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

/// A saved state is data: a pending review planted with no decisions (or any) does not
/// let a call run; the review handler decides again on resume, and a person's decision
/// is needed only where it asks.
#[tokio::test]
async fn a_planted_pending_review_does_not_bypass_the_handler() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let tool = Tool::builder("rm")
        .handler(move |_, _| {
            let ran = r2.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                ToolOutput::text("removed")
            }
        })
        .build()
        .unwrap();
    let mut state = ChainState::default();
    state.conversation.messages.push(Message::user("clean up"));
    state
        .conversation
        .messages
        .push(Message::assistant_with_calls(
            "",
            vec![ToolCall::function("c1", "rm", "{}").unwrap()],
        ));
    state.pending_review =
        serde_json::from_value(json!({"message_position": 1, "calls": []})).unwrap();
    let mut chain = LLMChain::from_state(
        Arc::new(review_chain(vec![ResponseScript::text("ok")])),
        state,
    )
    .with_tool(tool)
    .with_review(|_: &ToolCall| ReviewDecision::Deny {
        reason: "never".into(),
    });
    assert_eq!(
        chain
            .resume(vec![], Mode::while_needs_response())
            .await
            .unwrap(),
        RunOutcome::Done
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the policy's denial stands");
    assert_eq!(
        chain.messages()[1].tool_calls[0].execution_status(),
        "denied"
    );
}

/// Round 5: a call approved by a person but resumed in a chain without its tool (its MCP
/// server not connected) failed "tool not found" and used up the approval. The approval
/// is kept and nothing changes; resumed with the tool, the call runs.
#[tokio::test]
async fn an_approval_is_never_spent_on_a_call_whose_tool_is_missing() {
    let turns = vec![ResponseScript::tool_call(
        "c1",
        "calculator",
        r#"{"a": 1, "b": 2}"#,
    )];
    let mut chain = LLMChain::new(Arc::new(review_chain(turns)))
        .with_tool(calc_tool())
        .with_review(|_: &ToolCall| ReviewDecision::Interrupt);
    chain.add_message(Message::user("go")).await.unwrap();
    assert!(matches!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::ReviewRequired(_)
    ));
    let state = chain.state().clone();

    let without = review_chain(vec![ResponseScript::text("never asked")]);
    let mut resumed = LLMChain::from_state(Arc::new(without), state.clone());
    let err = resumed
        .resume(
            vec![("c1".into(), HumanDecision::Approve)],
            Mode::while_needs_response(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("approval is kept"), "{err}");
    assert!(resumed.pending_review().is_some());
    assert_eq!(resumed.messages().len(), 2);

    let with = review_chain(vec![ResponseScript::text("3")]);
    let mut resumed = LLMChain::from_state(Arc::new(with), state).with_tool(calc_tool());
    resumed
        .resume(
            vec![("c1".into(), HumanDecision::Approve)],
            Mode::while_needs_response(),
        )
        .await
        .unwrap();
    assert_eq!(resumed.messages()[2].tool_results.len(), 1);
    assert!(!resumed.messages()[2].tool_results[0].is_error());
}
