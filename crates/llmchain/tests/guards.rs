//! Guards on a call's arguments, a tool's result and a person's message, over the
//! scripted model (real wire bytes through the real decoders): what the tool, the
//! model and a reviewer see, what is stored, what is journaled (never what was held
//! back), and a run stopped by a tripwire.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use llmchain::chain::{Decision, LLMChain, Mode, ReviewDecision, RunOutcome, ScriptedModel};
use llmchain::guard::{Action, DenyList, Pii, Point, SecretsGuard};
use llmchain::message::{ExecutionStatus, Message};
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use llmchain::tool::Tool;
use serde_json::json;

/// A tool that records the arguments it ran with and answers `answer`.
fn recording_tool(seen: Arc<Mutex<Vec<String>>>, answer: &'static str) -> Tool {
    Tool::builder("send")
        .schema(json!({"type": "object", "properties": {"to": {"type": "string"}}}))
        .handler(move |args, _| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(args["to"].to_string());
                answer
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

fn send(to: &str) -> ResponseScript {
    ResponseScript::tool_call("c1", "send", json!({"to": to}).to_string())
}

fn journal_json(chain: &LLMChain) -> String {
    serde_json::to_string(chain.journal()).unwrap()
}

#[tokio::test]
async fn a_rewritten_call_runs_redacted_and_the_model_and_journal_never_see_the_value() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let scripted = model(vec![send("bob@example.com"), ResponseScript::text("done")]);
    let scripted = Arc::new(scripted);
    let requests = scripted.clone();
    let mut chain = LLMChain::new(scripted)
        .with_tool(recording_tool(seen.clone(), "sent"))
        .with_guard(Pii::default());
    chain.add_message(Message::user("mail bob")).await.unwrap();
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    // The tool ran with the redacted arguments.
    assert_eq!(*seen.lock().unwrap(), [r#""[redacted email]""#]);
    // The call was stored guarded (no callback, page or span saw the value); what the
    // model sent is kept aside, for --raw.
    let call = &chain.messages()[1].tool_calls[0];
    assert_eq!(call.arguments_as_map()["to"], json!("[redacted email]"));
    assert_eq!(
        call.metadata["guarded"]["original_arguments"],
        json!({"to": "bob@example.com"})
    );
    // Journaled with the guard's id and the kind found; the value is nowhere in it.
    assert!(chain.journal().entries().iter().any(|e| matches!(&e.decision,
        Decision::Guard { guard, point, verdict, found, .. }
            if guard == "pii" && point == "tool_arguments" && verdict == "rewrite" && found == &["email"])));
    assert!(!journal_json(&chain).contains("bob@example.com"));
    // The model's next request carries the call as it ran.
    let last = String::from_utf8(requests.requests().last().unwrap().clone()).unwrap();
    assert!(last.contains("[redacted email]"), "{last}");
}

#[tokio::test]
async fn a_blocked_call_is_never_offered_to_a_person_and_never_runs() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::new(AtomicUsize::new(0));
    let asked2 = asked.clone();
    let mut chain = LLMChain::new(model(vec![
        send("drop table users"),
        ResponseScript::text("ok"),
    ]))
    .with_tool(recording_tool(seen.clone(), "sent"))
    .with_guard(DenyList::new("no-sql", &[r"(?i)drop\s+table".into()], &[], None).unwrap())
    .with_review(move |_| {
        asked2.fetch_add(1, Ordering::SeqCst);
        ReviewDecision::Approve
    });
    chain.add_message(Message::user("go")).await.unwrap();
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "a blocked call went to review"
    );
    assert!(seen.lock().unwrap().is_empty());
    let tool_message = &chain.messages()[2];
    let answer = tool_message.tool_results[0].content_text();
    assert!(
        answer.contains("no-sql") && !answer.contains("drop table"),
        "{answer}"
    );
    assert_eq!(
        chain.messages()[1].tool_calls[0].execution_status(),
        ExecutionStatus::Denied.as_str()
    );
}

#[tokio::test]
async fn a_tripwire_stops_the_run_with_the_guard_named() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut chain = LLMChain::new(model(vec![
        send("x@y.example"),
        ResponseScript::text("never"),
    ]))
    .with_tool(recording_tool(seen.clone(), "sent"))
    .with_guard(Pii::default().id("pii-trip").action(Action::Tripwire));
    chain.add_message(Message::user("go")).await.unwrap();
    let RunOutcome::Stopped(stop) = chain.run(Mode::while_needs_response()).await.unwrap() else {
        panic!("not stopped")
    };
    assert_eq!(
        (stop.kind.as_str(), stop.limit.as_str()),
        ("guard", "pii-trip")
    );
    assert!(seen.lock().unwrap().is_empty());
    // Every call is answered: the conversation stays sendable.
    assert!(chain.conversation().inconsistencies().is_empty());
}

#[tokio::test]
async fn a_result_is_guarded_before_the_model_sees_it_and_kept_as_it_ran() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let scripted = model(vec![send("ops"), ResponseScript::text("done")]);
    let scripted = Arc::new(scripted);
    let requests = scripted.clone();
    let mut chain = LLMChain::new(scripted)
        .with_tool(recording_tool(
            seen,
            "the key is sk-proj-abcdefghijklmnopqrstuvwx, card 4111 1111 1111 1111",
        ))
        .with_guard(SecretsGuard::default())
        .with_guard(Pii::default().at(&[Point::ToolResult]));
    chain.add_message(Message::user("go")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let result = &chain.messages()[2].tool_results[0];
    let shown = result.content_text();
    assert_eq!(shown, "the key is ***, card [redacted card]");
    // What the tool returned is kept (for audit) in the tool message, not in the result.
    assert!(result.processed_content.is_none());
    let kept = &chain.messages()[2].metadata["rewritten"]["c1"];
    assert_eq!(kept["rewritten_by"], json!("guard:secrets,pii"));
    assert!(kept["original"].as_str().unwrap().contains("4111 1111"));
    let last = String::from_utf8(requests.requests().last().unwrap().clone()).unwrap();
    assert!(
        !last.contains("sk-proj-abc") && !last.contains("4111 1111"),
        "{last}"
    );
    assert!(!journal_json(&chain).contains("4111"));
}

#[tokio::test]
async fn a_persons_message_reaches_the_model_guarded_and_what_arrived_is_kept() {
    let scripted = model(vec![
        ResponseScript::text("noted"),
        ResponseScript::text("again"),
    ]);
    let scripted = Arc::new(scripted);
    let requests = scripted.clone();
    let mut chain = LLMChain::new(scripted).with_guard(Pii::default());
    chain
        .add_message(Message::user("my IBAN is DE89 3704 0044 0532 0130 00"))
        .await
        .unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    chain.add_message(Message::user("thanks")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    for r in requests.requests() {
        let body = String::from_utf8(r).unwrap();
        assert!(body.contains("my IBAN is [redacted iban]"), "{body}");
        assert!(!body.contains("DE89"), "{body}");
    }
    // Stored guarded; what arrived kept aside (for `--raw`), so nothing is lost.
    let stored = &chain.messages()[0];
    assert_eq!(stored.text().unwrap(), "my IBAN is [redacted iban]");
    assert_eq!(
        stored.metadata["guarded"]["original"],
        json!("my IBAN is DE89 3704 0044 0532 0130 00")
    );
    // Journaled once, though checked at both model calls.
    let n = chain
        .journal()
        .entries()
        .iter()
        .filter(|e| matches!(&e.decision, Decision::Guard { point, .. } if point == "user_message"))
        .count();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_blocked_message_never_reaches_the_model() {
    let scripted = model(vec![ResponseScript::text("never")]);
    let scripted = Arc::new(scripted);
    let requests = scripted.clone();
    let mut chain = LLMChain::new(scripted)
        .with_guard(DenyList::new("words", &[], &["codeword".into()], None).unwrap());
    chain
        .add_message(Message::user("the CODEWORD is x"))
        .await
        .unwrap();
    let outcome = chain.run(Mode::while_needs_response()).await.unwrap();
    assert!(
        matches!(outcome, RunOutcome::Stopped(ref s) if s.kind == "guard"),
        "{outcome:?}"
    );
    assert!(requests.requests().is_empty());
}

/// The text of every `TextDelta` a callback saw.
fn deltas(seen: &Arc<Mutex<String>>) -> llmchain::chain::Callbacks {
    let seen = seen.clone();
    llmchain::chain::Callbacks::new().on_llm_new_delta(move |ev| {
        if let llmchain::provider::StreamEvent::TextDelta { text, .. } = ev {
            seen.lock().unwrap().push_str(text);
        }
    })
}

#[tokio::test]
async fn a_streamed_answer_is_held_back_until_the_guards_pass_it() {
    let text =
        "Write to bob@example.com, or call +44 20 7946 0958.\nCard 4111 1111 1111 1111 is on file.";
    let scripted =
        Arc::new(model(vec![ResponseScript::text(text), ResponseScript::text("ok")]).chunk_size(3));
    let requests = scripted.clone();
    let shown = Arc::new(Mutex::new(String::new()));
    let mut chain = LLMChain::new(scripted)
        .with_guard(Pii::default().at(&[Point::ModelOutput]))
        .with_callbacks(deltas(&shown));
    chain.add_message(Message::user("contacts?")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let want =
        "Write to [redacted email], or call [redacted phone].\nCard [redacted card] is on file.";
    // What streamed to the callbacks (a terminal, a served page) never held the data.
    assert_eq!(*shown.lock().unwrap(), want);
    // Stored guarded, with the text as it arrived kept aside.
    let answer = &chain.messages()[1];
    assert_eq!(answer.text().unwrap(), want);
    assert_eq!(answer.metadata["guarded"]["original"], json!(text));
    assert!(chain.journal().entries().iter().any(|e| matches!(&e.decision,
        Decision::Guard { point, verdict, found, .. }
            if point == "model_output" && verdict == "rewrite" && found == &["card", "email", "phone"])));
    // The next request carries the guarded answer.
    chain.add_message(Message::user("thanks")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let last = String::from_utf8(requests.requests().last().unwrap().clone()).unwrap();
    assert!(
        !last.contains("bob@example.com") && last.contains("[redacted email]"),
        "{last}"
    );
}

#[tokio::test]
async fn a_tripped_answer_is_withheld_mid_stream_and_its_calls_are_not_run() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let answer = ResponseScript::tool_call("c1", "send", json!({"to": "x"}).to_string())
        .with_text("Sure. Here is the launch codeword: swordfish, and more text after it.");
    let scripted = Arc::new(model(vec![answer]).chunk_size(4));
    let shown = Arc::new(Mutex::new(String::new()));
    let mut chain = LLMChain::new(scripted)
        .with_tool(recording_tool(seen.clone(), "sent"))
        .with_guard(
            DenyList::new("codewords", &[], &["swordfish".into()], None)
                .unwrap()
                .tripwire()
                .at(&[Point::ModelOutput]),
        )
        .with_callbacks(deltas(&shown));
    chain.add_message(Message::user("go")).await.unwrap();
    let outcome = chain.run(Mode::while_needs_response()).await.unwrap();
    let RunOutcome::Stopped(stop) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        (stop.kind.as_str(), stop.limit.as_str()),
        ("guard", "codewords")
    );
    assert!(
        !shown.lock().unwrap().contains("swordfish"),
        "{}",
        shown.lock().unwrap()
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "a call of a withheld answer ran"
    );
    let answer = &chain.messages()[1];
    assert_eq!(answer.text().unwrap(), "[withheld by guard codewords]");
    assert!(chain.conversation().inconsistencies().is_empty());
    assert!(chain.journal().entries().iter().any(|e| matches!(&e.decision,
        Decision::Guard { point, verdict, .. } if point == "model_output" && verdict == "tripwire")));
}

#[tokio::test]
async fn no_callback_sees_arguments_a_guard_held_back() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let shown = Arc::new(Mutex::new(String::new()));
    let (s1, s2) = (shown.clone(), shown.clone());
    let callbacks = llmchain::chain::Callbacks::new()
        .on_llm_new_delta(move |ev| {
            if let llmchain::provider::StreamEvent::ToolCallArguments { fragment, .. } = ev {
                s1.lock().unwrap().push_str(fragment);
            }
        })
        .on_llm_new_message(move |m| {
            for c in &m.tool_calls {
                s2.lock()
                    .unwrap()
                    .push_str(&serde_json::to_string(&c.arguments).unwrap());
            }
        });
    let scripted =
        Arc::new(model(vec![send("bob@example.com"), ResponseScript::text("ok")]).chunk_size(5));
    let mut chain = LLMChain::new(scripted)
        .with_tool(recording_tool(seen.clone(), "sent"))
        .with_guard(Pii::default().at(&[Point::ToolArguments]))
        .with_callbacks(callbacks);
    chain.add_message(Message::user("mail bob")).await.unwrap();
    chain.run(Mode::while_needs_response()).await.unwrap();
    let shown = shown.lock().unwrap().clone();
    assert!(!shown.contains("bob@example.com"), "{shown}");
    assert!(shown.contains("[redacted email]"), "{shown}");
    assert_eq!(*seen.lock().unwrap(), [r#""[redacted email]""#]);
}
