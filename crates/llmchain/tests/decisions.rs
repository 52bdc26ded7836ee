//! The decision layer: policies, budgets and the journal, over the scripted model (real
//! wire bytes through the real decoders), including a run killed and resumed from what
//! its sink last held.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use llmchain::chain::{
    Budget, Callbacks, ChainError, ChainState, ConversationSink, Decision, Extract, LLMChain, Mode,
    OnExhausted, ReviewDecision, RunOutcome, ScriptedModel, SinkFuture,
};
use llmchain::conversation::ResponseFormat;
use llmchain::message::{ExecutionStatus, Message, MessageStatus, Role};
use llmchain::policy::{CallFacts, Effect, Policy, RuleSpec, Rules, Rulings};
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::Tool;
use serde_json::json;

/// A non-idempotent tool that counts its runs.
fn charge(runs: Arc<AtomicUsize>) -> Tool {
    Tool::builder("charge")
        .policy_name("mcp:billing/charge")
        .schema(json!({"type": "object", "properties": {"amount": {"type": "number"}}}))
        .handler(move |args, _| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                format!("charged {}", args["amount"])
            }
        })
        .build()
        .unwrap()
}

fn calls(n: usize, amount: u32) -> Vec<ResponseScript> {
    (0..n)
        .map(|i| {
            ResponseScript::tool_call(
                format!("c{i}"),
                "charge",
                format!(r#"{{"amount": {amount}}}"#),
            )
        })
        .collect()
}

fn model(turns: Vec<ResponseScript>) -> ScriptedModel {
    let mut m = ScriptedModel::new(Format::OPENAI_CHAT);
    for t in turns {
        m = m.respond(t).unwrap();
    }
    m
}

fn rules(v: serde_json::Value) -> Rules {
    let specs: Vec<RuleSpec> = serde_json::from_value(v).unwrap();
    Rules::compile(specs).unwrap()
}

async fn asked(chain: &mut LLMChain, question: &str) {
    chain.add_message(Message::user(question)).await.unwrap();
}

#[tokio::test]
async fn a_deny_rule_answers_the_model_with_its_reason_and_id_and_journals_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut turns = calls(1, 500);
    turns.push(ResponseScript::text("I could not charge it."));
    let mut chain = LLMChain::new(model(turns))
        .with_tool(charge(runs.clone()))
        .with_policy(rules(json!([{
            "id": "no-big-charges", "tool": "mcp:billing/*",
            "args": {"/amount": {"gt": 100}}, "effect": "deny",
            "reason": "Charges over 100 go through finance."
        }])));
    asked(&mut chain, "charge 500").await;
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(out, RunOutcome::Done);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "a denied call never runs");
    let tool = &chain.messages()[2];
    assert_eq!(tool.role, Role::Tool);
    let text = tool.tool_results[0].content_text();
    assert!(
        text.contains("Charges over 100 go through finance."),
        "{text}"
    );
    assert!(text.contains("no-big-charges"), "{text}");
    assert_eq!(
        chain.messages()[1].tool_calls[0].typed_execution_status(),
        Some(ExecutionStatus::Denied)
    );
    let entries = chain.journal().entries();
    assert!(
        entries.iter().any(|e| matches!(&e.decision, Decision::Policy { rule, effect: Effect::Deny, shadow: false, call_id, .. } if rule == "no-big-charges" && call_id == "c0")),
        "{entries:?}"
    );
}

#[tokio::test]
async fn an_ask_rule_pauses_for_a_person_even_when_the_handler_would_approve() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut turns = calls(1, 50);
    turns.push(ResponseScript::text("charged"));
    let mut chain = LLMChain::new(model(turns))
        .with_tool(charge(runs.clone()))
        .with_review(|_call: &llmchain::message::ToolCall| ReviewDecision::Approve)
        .with_policy(rules(
            json!([{"id": "charges-ask", "tool": "mcp:billing/charge", "effect": "ask"}]),
        ));
    asked(&mut chain, "charge 50").await;
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::ReviewRequired(p) = out else {
        panic!("{out:?}")
    };
    assert_eq!(p.calls[0].rule.as_deref(), Some("charges-ask"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // A person approves: it runs once.
    let out = chain
        .resume(
            vec![("c0".into(), llmchain::chain::HumanDecision::Approve)],
            Mode::Single,
        )
        .await
        .unwrap();
    assert_eq!(out, RunOutcome::Done);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_person_cannot_approve_what_a_deny_rule_forbids_nor_edit_around_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let policy = Arc::new(Switch::new());
    let mut chain = LLMChain::new(model(vec![ResponseScript::text("ok")]))
        .with_tool(charge(runs.clone()))
        .with_policy_arc(policy.clone())
        .with_policy(rules(json!([
            {"id": "ask-all", "effect": "ask"},
            {"id": "big", "args": {"/amount": {"gt": 100}}, "effect": "deny", "reason": "too big"}
        ])));
    asked(&mut chain, "charge").await;
    chain
        .add_message(Message::assistant_with_calls(
            "",
            vec![
                llmchain::message::ToolCall::function("c0", "charge", json!({"amount": 5}))
                    .unwrap(),
            ],
        ))
        .await
        .unwrap();
    let out = chain.execute_tool_calls().await.unwrap();
    assert!(
        matches!(
            out,
            std::ops::ControlFlow::Break(RunOutcome::ReviewRequired(_))
        ),
        "{out:?}"
    );
    // An edit that raises the amount passes the deny rules again.
    let mut args = serde_json::Map::new();
    args.insert("amount".into(), json!(500));
    chain
        .resume(
            vec![(
                "c0".into(),
                llmchain::chain::HumanDecision::Edit { arguments: args },
            )],
            Mode::Single,
        )
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the edited call was denied");
    let text = chain.messages()[2].tool_results[0].content_text();
    assert!(text.contains("too big"), "{text}");

    // A policy made stricter while the call waited applies to the person's approval.
    let mut chain = LLMChain::new(model(vec![ResponseScript::text("ok")]))
        .with_tool(charge(runs.clone()))
        .with_policy_arc(policy.clone());
    asked(&mut chain, "charge").await;
    chain
        .add_message(Message::assistant_with_calls(
            "",
            vec![
                llmchain::message::ToolCall::function("c1", "charge", json!({"amount": 5}))
                    .unwrap(),
            ],
        ))
        .await
        .unwrap();
    let out = chain.execute_tool_calls().await.unwrap();
    assert!(
        matches!(
            out,
            std::ops::ControlFlow::Break(RunOutcome::ReviewRequired(_))
        ),
        "{out:?}"
    );
    let saved = chain.state().clone();
    policy.set(Effect::Deny);
    let mut resumed = LLMChain::from_state(model(vec![ResponseScript::text("ok")]), saved)
        .with_tool(charge(runs.clone()))
        .with_policy_arc(policy.clone());
    resumed
        .resume(
            vec![("c1".into(), llmchain::chain::HumanDecision::Approve)],
            Mode::Single,
        )
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the stricter policy won");
}

/// A policy whose one rule an operator changes between a pause and a resume.
struct Switch(Mutex<Effect>);

impl Switch {
    fn new() -> Self {
        Switch(Mutex::new(Effect::Ask))
    }
    fn set(&self, e: Effect) {
        *self.0.lock().unwrap() = e;
    }
}

impl Policy for Switch {
    fn id(&self) -> &str {
        "switch"
    }
    fn digest(&self) -> String {
        self.0.lock().unwrap().to_string()
    }
    fn rule(&self, _call: &CallFacts<'_>) -> Rulings {
        Rulings {
            enforced: Some(llmchain::policy::Ruling {
                effect: *self.0.lock().unwrap(),
                rule: "switch".into(),
                reason: Some("the operator said so".into()),
            }),
            shadowed: None,
        }
    }
}

struct Panicking;

impl Policy for Panicking {
    fn id(&self) -> &str {
        "panicking"
    }
    fn digest(&self) -> String {
        "1".into()
    }
    fn rule(&self, _call: &CallFacts<'_>) -> Rulings {
        panic!("a bug in a policy")
    }
}

#[tokio::test]
async fn a_policy_that_panics_denies() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut turns = calls(1, 1);
    turns.push(ResponseScript::text("done"));
    let mut chain = LLMChain::new(model(turns))
        .with_tool(charge(runs.clone()))
        .with_policy(Panicking);
    asked(&mut chain, "charge 1").await;
    chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        chain.messages()[2].tool_results[0]
            .content_text()
            .contains("failed")
    );
}

#[tokio::test]
async fn a_shadow_rule_is_journaled_and_not_enforced() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut turns = calls(1, 500);
    turns.push(ResponseScript::text("charged"));
    let mut chain = LLMChain::new(model(turns))
        .with_tool(charge(runs.clone()))
        .with_policy(rules(json!([{
            "id": "would-deny", "tool": "mcp:billing/charge", "effect": "deny", "mode": "shadow"
        }])));
    asked(&mut chain, "charge 500").await;
    chain.run(Mode::while_needs_response()).await.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "shadow mode enforces the old behaviour"
    );
    let shadow: Vec<_> = chain
        .journal()
        .entries()
        .iter()
        .filter(|e| matches!(&e.decision, Decision::Policy { shadow: true, rule, effect: Effect::Deny, .. } if rule == "would-deny"))
        .collect();
    assert_eq!(shadow.len(), 1, "{:?}", chain.journal());
}

/// Keeps every state the chain saved, as a store would have held it at each point a
/// process could die.
#[derive(Default)]
struct Holding {
    states: Mutex<Vec<ChainState>>,
    checkpoints: AtomicUsize,
}

impl ConversationSink for Holding {
    fn append_message<'a>(&'a self, _p: usize, _m: &'a Message) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
    fn replace_message<'a>(&'a self, _p: usize, _m: &'a Message) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
    fn set_tool_status<'a>(&'a self, _id: &'a str, _s: ExecutionStatus) -> SinkFuture<'a> {
        Box::pin(async { Ok(()) })
    }
    fn save_state<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        self.states.lock().unwrap().push(state.clone());
        Box::pin(async { Ok(()) })
    }
    fn checkpoint<'a>(&'a self, state: &'a ChainState) -> SinkFuture<'a> {
        self.checkpoints.fetch_add(1, Ordering::SeqCst);
        self.save_state(state)
    }
}

fn budget(words: &[&str]) -> Budget {
    let mut b = Budget::default();
    for w in words {
        b.set(w).unwrap();
    }
    b
}

#[tokio::test]
async fn a_model_call_budget_survives_a_kill_and_gives_exactly_what_is_left() {
    let runs = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(Holding::default());
    let first = Arc::new(model(calls(10, 1)));
    let seen = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(first.clone())
        .with_tool(charge(runs.clone()))
        .with_budget(budget(&["model_calls=3"]))
        .with_sink(sink.clone());
    let cancel = chain.cancellation_token();
    let s = seen.clone();
    chain = chain.with_callbacks(
        Callbacks::default().on_llm_new_message(move |_m: &Message| {
            // Killed after its second model call.
            if s.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
                cancel.cancel();
            }
        }),
    );
    asked(&mut chain, "keep charging").await;
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert_eq!(e, ChainError::Cancelled);
    assert_eq!(first.requests().len(), 2);
    let held = sink.states.lock().unwrap().last().cloned().unwrap();
    assert_eq!(held.spent.model_calls, 2);

    // Another process resumes from what was held: exactly one more model call.
    let second = Arc::new(model(calls(10, 1)));
    let mut resumed = LLMChain::from_state(second.clone(), held)
        .with_tool(charge(runs.clone()))
        .with_budget(budget(&["model_calls=3"]))
        .with_sink(sink.clone());
    let out = resumed.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "model_calls");
    assert_eq!(second.requests().len(), 1, "one model call was left");
    assert_eq!(resumed.spent().model_calls, 3);
    // Every call is answered; the conversation ends with a tool message.
    assert!(!resumed.has_unanswered_calls());
    assert_eq!(resumed.last_message().unwrap().role, Role::Tool);
    assert!(
        sink.checkpoints.load(Ordering::SeqCst) >= 3,
        "each call was charged durably"
    );
    assert!(
        resumed.journal().entries().iter().any(
            |e| matches!(&e.decision, Decision::Budget { limit, .. } if limit == "model_calls")
        )
    );
}

#[tokio::test]
async fn a_per_tool_budget_refuses_the_call_over_it_and_stops_the_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(model(calls(5, 1)))
        .with_tool(charge(runs.clone()))
        .with_budget(budget(&["tool_calls.charge=2"]));
    asked(&mut chain, "charge").await;
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "tool_calls.charge");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let last = chain.last_message().unwrap();
    assert!(
        last.tool_results[0]
            .content_text()
            .contains("budget is spent")
    );
    // With `on_exhausted = "error"` the run fails, the transcript kept.
    let mut chain = LLMChain::new(model(calls(5, 1)))
        .with_tool(charge(runs.clone()))
        .with_budget(budget(&["tool_calls=1", "on_exhausted=error"]));
    asked(&mut chain, "charge").await;
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(matches!(e, ChainError::BudgetExhausted(_)), "{e:?}");
    assert!(e.to_string().contains("tool_calls"), "{e}");
    assert_eq!(chain.budget().on_exhausted, OnExhausted::Error);
}

/// An OpenAI Chat stream of `n` text chunks of `each` bytes, then a stop.
fn long_text(n: usize, each: usize) -> Vec<u8> {
    let mut out = String::new();
    let piece = "x".repeat(each);
    for _ in 0..n {
        out.push_str(&format!(
            "data: {}\n\n",
            json!({"id": "r", "object": "chat.completion.chunk", "model": "m",
                   "choices": [{"index": 0, "delta": {"content": piece}}]})
        ));
    }
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "r", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    out.into_bytes()
}

#[tokio::test]
async fn a_token_budget_stops_the_stream_mid_way_and_keeps_what_arrived() {
    let m = ScriptedModel::new(Format::OPENAI_CHAT).respond_bytes(long_text(200, 40));
    let mut chain = LLMChain::new(m).with_budget(budget(&["tokens=300"]));
    asked(&mut chain, "write a lot").await;
    let out = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "tokens");
    let last = chain.last_message().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.status, MessageStatus::Cancelled);
    let kept = last.text().unwrap_or_default().len();
    assert!(kept > 0 && kept < 200 * 40, "kept {kept} bytes");
}

#[tokio::test]
async fn a_resumed_run_keeps_its_max_runs_count() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut chain = LLMChain::new(model(calls(2, 1))).with_tool(charge(runs.clone()));
    asked(&mut chain, "go").await;
    // `Single` makes one model call and stops with its calls unanswered.
    chain.run(Mode::Single).await.unwrap();
    assert_eq!(chain.state().run_count, 1);
    // Going on from there is the same run: its count is kept, and the guard holds.
    let e = chain
        .run(Mode::WhileNeedsResponse { max_runs: 1 })
        .await
        .unwrap_err();
    assert!(matches!(e, ChainError::ExceededMaxRuns { .. }), "{e:?}");
}

/// The chain's own limits are journaled and saved when they end a run or refuse a
/// batch, as a budget's stop is: `max_runs`, the repeat guard, the failure budget, and
/// a per-turn cap (which refuses the answer's calls, once, and lets the run go on).
#[tokio::test]
async fn the_chains_own_limits_are_on_record() {
    let last_saved = |sink: &Holding| sink.states.lock().unwrap().last().cloned().unwrap();
    let budgets = |state: &ChainState| -> Vec<(String, f64, f64)> {
        state
            .journal
            .entries()
            .iter()
            .filter_map(|e| match &e.decision {
                Decision::Budget { limit, max, spent } => Some((limit.clone(), *max, *spent)),
                _ => None,
            })
            .collect()
    };
    // max_runs.
    let runs = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(Holding::default());
    let mut chain = LLMChain::new(model(calls(3, 1)))
        .with_tool(charge(runs.clone()))
        .with_sink(sink.clone());
    asked(&mut chain, "go").await;
    let e = chain
        .run(Mode::WhileNeedsResponse { max_runs: 2 })
        .await
        .unwrap_err();
    assert!(
        matches!(e, ChainError::ExceededMaxRuns { count: 2, max: 2 }),
        "{e:?}"
    );
    assert_eq!(budgets(&last_saved(&sink)), [("max_runs".into(), 2.0, 2.0)]);

    // The repeat guard: the same failing call, over and over.
    let failing = Tool::builder("fail")
        .handler(|_, _| async { Err::<String, _>("no") })
        .build()
        .unwrap();
    let same = (0..5)
        .map(|i| ResponseScript::tool_call(format!("f{i}"), "fail", "{}"))
        .collect();
    let sink = Arc::new(Holding::default());
    let mut chain = LLMChain::new(model(same))
        .with_tool(failing)
        .with_sink(sink.clone());
    chain.max_repeated_failures = 1;
    asked(&mut chain, "go").await;
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(
        matches!(e, ChainError::RepeatedFailingCall { count: 2, .. }),
        "{e:?}"
    );
    assert_eq!(
        budgets(&last_saved(&sink)),
        [("repeated_failures:fail".into(), 1.0, 2.0)]
    );

    // The failure budget: failing batches, each a different call.
    let failing = Tool::builder("fail")
        .handler(|_, _| async { Err::<String, _>("no") })
        .build()
        .unwrap();
    let different = (0..5)
        .map(|i| ResponseScript::tool_call(format!("g{i}"), "fail", format!(r#"{{"n": {i}}}"#)))
        .collect();
    let sink = Arc::new(Holding::default());
    let mut chain = LLMChain::new(model(different))
        .with_tool(failing)
        .with_sink(sink.clone())
        .with_max_retry_count(2);
    asked(&mut chain, "go").await;
    let e = chain.run(Mode::while_needs_response()).await.unwrap_err();
    assert!(
        matches!(e, ChainError::ExceededFailureCount { count: 2, max: 2 }),
        "{e:?}"
    );
    assert_eq!(budgets(&last_saved(&sink)), [("failures".into(), 2.0, 2.0)]);

    // A per-turn cap: an answer with two calls over a cap of one; neither runs, the
    // refusal is on record with both calls, and the run goes on to its answer.
    let runs = Arc::new(AtomicUsize::new(0));
    let two = ResponseScript::tool_call("a", "charge", r#"{"amount": 1}"#).with_call(
        "b",
        "charge",
        r#"{"amount": 2}"#,
    );
    let mut chain =
        LLMChain::new(model(vec![two, ResponseScript::text("ok")])).with_tool(charge(runs.clone()));
    chain.max_calls_per_turn = 1;
    asked(&mut chain, "go").await;
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let caps: Vec<_> = chain
        .journal()
        .entries()
        .iter()
        .filter_map(|e| match &e.decision {
            Decision::Cap {
                limit,
                max,
                spent,
                call_ids,
            } => Some((limit.clone(), *max, *spent, call_ids.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        caps,
        [(
            "calls_per_turn".into(),
            1.0,
            2.0,
            vec!["a".to_owned(), "b".to_owned()]
        )]
    );
}

fn wrong_answers(n: usize) -> ScriptedModel {
    model((0..n).map(|_| ResponseScript::text("not json")).collect())
}

fn extract() -> Extract {
    Extract::new(ResponseFormat::new(
        "answer",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    ))
    .unwrap()
}

/// The state saved with the run's `nth` feedback to the model (its last message).
fn at_feedback(sink: &Holding, nth: usize) -> ChainState {
    let states = sink.states.lock().unwrap();
    let mut feedback = states.iter().filter(|s| {
        s.conversation
            .messages
            .last()
            .is_some_and(Message::is_from_run)
    });
    feedback
        .nth(nth - 1)
        .cloned()
        .expect("a state saved at the feedback")
}

#[tokio::test]
async fn a_run_killed_after_its_own_feedback_keeps_its_budget() {
    let sink = Arc::new(Holding::default());
    let mut chain = LLMChain::new(wrong_answers(10))
        .with_max_retry_count(10)
        .with_budget(budget(&["model_calls=3"]))
        .with_sink(sink.clone());
    asked(&mut chain, "a number").await;
    let out = chain.run(Mode::custom(extract())).await.unwrap();
    assert!(matches!(out, RunOutcome::Stopped(_)), "{out:?}");
    // Killed just after the first wrong answer's feedback was saved: one model call
    // spent, the run's last message is the run's own (a user-role message).
    let held = at_feedback(&sink, 1);
    assert_eq!(held.spent.model_calls, 1);
    let last = held.conversation.messages.last().unwrap();
    assert_eq!(last.role, Role::User);

    let second = Arc::new(wrong_answers(10));
    let mut resumed = LLMChain::from_state(second.clone(), held.clone())
        .with_max_retry_count(10)
        .with_budget(budget(&["model_calls=3"]));
    let mode = Mode::recorded(&held)
        .expect("the run recorded its mode")
        .unwrap();
    assert_eq!(mode.name(), "extract");
    let out = resumed.run(mode).await.unwrap();
    let RunOutcome::Stopped(stop) = out else {
        panic!("{out:?}")
    };
    assert_eq!(stop.limit, "model_calls");
    assert_eq!(
        second.requests().len(),
        2,
        "the feedback does not start a new run with a fresh budget"
    );
}

#[tokio::test]
async fn an_extract_run_resumed_goes_on_counting_wrong_answers() {
    let sink = Arc::new(Holding::default());
    let mut chain = LLMChain::new(wrong_answers(10))
        .with_max_retry_count(3)
        .with_sink(sink.clone());
    asked(&mut chain, "a number").await;
    let e = chain.run(Mode::custom(extract())).await.unwrap_err();
    assert!(matches!(e, ChainError::InvalidAnswer { .. }), "{e:?}");
    // Killed after the second wrong answer's feedback: one more is allowed.
    let held = at_feedback(&sink, 2);
    assert_eq!(held.hooks["extract@1"]["invalid"], 2);
    let second = Arc::new(wrong_answers(10));
    let mut resumed = LLMChain::from_state(second.clone(), held.clone()).with_max_retry_count(3);
    let mode = Mode::recorded(&held).unwrap().unwrap();
    let e = resumed.run(mode).await.unwrap_err();
    assert!(matches!(e, ChainError::InvalidAnswer { .. }), "{e:?}");
    assert_eq!(second.requests().len(), 1, "two of three were spent before");
    // A new question starts a new run: its count starts afresh.
    let third = Arc::new(wrong_answers(10));
    let mut again =
        LLMChain::from_state(third.clone(), resumed.state().clone()).with_max_retry_count(3);
    asked(&mut again, "another number").await;
    again.run(Mode::custom(extract())).await.unwrap_err();
    assert_eq!(third.requests().len(), 3);
}

#[test]
fn a_run_without_a_typed_mode_records_none() {
    assert!(Mode::recorded(&ChainState::default()).is_none());
    assert_eq!(Mode::custom(extract()).name(), "extract");
}

#[tokio::test]
async fn a_run_killed_during_its_first_model_call_keeps_its_count() {
    let runs = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(Holding::default());
    let mut chain = LLMChain::new(model(calls(5, 1)))
        .with_tool(charge(runs.clone()))
        .with_budget(budget(&["model_calls=2"]))
        .with_sink(sink.clone());
    asked(&mut chain, "keep charging").await;
    chain.run(Mode::while_needs_response()).await.unwrap();
    // Killed once the first call was charged, before its answer was stored: the store
    // holds the person's question and a count of one.
    let held = sink
        .states
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.spent.model_calls == 1)
        .cloned()
        .unwrap();
    assert_eq!(held.conversation.messages.len(), 1);
    let second = Arc::new(model(calls(5, 1)));
    let mut resumed = LLMChain::from_state(second.clone(), held)
        .with_tool(charge(runs))
        .with_budget(budget(&["model_calls=2"]));
    let out = resumed.run(Mode::while_needs_response()).await.unwrap();
    assert!(matches!(out, RunOutcome::Stopped(_)), "{out:?}");
    assert_eq!(
        second.requests().len(),
        1,
        "the same run, resumed: one model call was left, not a fresh budget"
    );
}
