//! A budget that runs out in the middle of a streamed answer, on every wire, through the
//! real HTTP client against a local server that checks requests as the real API does
//! (content rules, and every call answered right after it: `http_support::pairing`).
//! The stream is cut off, every call of the cut answer gets a durable "not run"
//! answer, nothing runs, the run stops naming the budget, and the provider accepts
//! the conversation when it goes on.

mod http_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http_support::{Reply, Server, WIRES, encode};
use llmchain::chain::{Budget, LLMChain, Mode, RunOutcome};
use llmchain::http::{HttpModel, HttpModelConfig};
use llmchain::message::{Message, MessageStatus, Role};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::tool::Tool;
use serde_json::json;

fn reply(format: Format, script: &ResponseScript, seed: u64) -> Reply {
    let body = render_stream(format, script).unwrap();
    let r = if format == Format::OLLAMA {
        Reply::ndjson(body)
    } else {
        Reply::sse(body)
    };
    r.seed(seed)
}

/// A tool that counts its runs.
fn note(runs: Arc<AtomicUsize>) -> Tool {
    Tool::builder("note")
        .description("Takes a note.")
        .schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
        .handler(move |_args, _| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                "noted"
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_token_budget_cut_mid_stream_answers_every_call_and_the_api_accepts_the_rest() {
    for (round, format) in WIRES.into_iter().enumerate() {
        // One answer with two calls, the second one's arguments long: the budget runs
        // out while they stream.
        let long = "x".repeat(16_000);
        let cut = ResponseScript::tool_call("c1", "note", r#"{"text": "short"}"#)
            .with_call("c2", "note", json!({ "text": long }).to_string())
            .with_usage(40, 4_000);
        let server = Server::start_with(
            vec![
                reply(format, &cut, round as u64 + 1),
                reply(
                    format,
                    &ResponseScript::text("Going on.").with_usage(60, 3),
                    7,
                ),
            ],
            Some(http_support::api_validator(format)),
        )
        .await;
        let model = Arc::new(
            HttpModel::new(
                HttpModelConfig::new(format, "m")
                    .unwrap()
                    .api_key("test-key")
                    .base_url(&server.base),
            )
            .unwrap(),
        );
        let runs = Arc::new(AtomicUsize::new(0));
        let mut budget = Budget::default();
        budget.set("tokens=1500").unwrap();
        budget.set("reserve_output_tokens=100").unwrap();
        let mut chain = LLMChain::new(model.clone())
            .with_tool(note(runs.clone()))
            .with_budget(budget);
        chain
            .add_message(Message::user("take two notes"))
            .await
            .unwrap();
        let out = chain.run(Mode::while_needs_response()).await.unwrap();
        let RunOutcome::Stopped(stop) = out else {
            panic!("{format:?}: {out:?}")
        };
        assert_eq!(stop.limit, "tokens", "{format:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 0, "{format:?}: nothing ran");
        // The cut answer is kept as cut, and every call in it is answered.
        let messages = chain.messages();
        let answer = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .unwrap();
        assert_eq!(answer.status, MessageStatus::Cancelled, "{format:?}");
        assert!(!chain.has_unanswered_calls(), "{format:?}: {messages:#?}");
        let last = chain.last_message().unwrap();
        if !answer.tool_calls.is_empty() {
            assert_eq!(last.role, Role::Tool, "{format:?}");
            for r in &last.tool_results {
                assert!(
                    r.content_text().contains("budget"),
                    "{format:?}: {}",
                    r.content_text()
                );
            }
        }

        // The conversation goes on (a new question, a new run): the API takes it.
        chain.add_message(Message::user("go on")).await.unwrap();
        let mut next = LLMChain::from_state(model, chain.state().clone()).with_tool(note(runs));
        let out = next.run(Mode::while_needs_response()).await;
        assert!(
            out.is_ok(),
            "{format:?}: the API refused what followed the cut: {out:?}\n{:#}",
            server
                .seen()
                .last()
                .map(|s| s.body.clone())
                .unwrap_or_default()
        );
        assert_eq!(
            next.last_message().unwrap().text().as_deref(),
            Some("Going on.")
        );
        assert_eq!(server.seen().len(), 2, "{format:?}");
    }
}

/// The pairing rules are not a formality: what the APIs refuse, they refuse.
#[test]
fn the_pairing_rules_refuse_an_unanswered_call_on_every_wire() {
    use llmchain::conversation::Conversation;
    use llmchain::message::ToolResult;
    let call = http_support::call("c1", "note", json!({"text": "a"}));
    for format in WIRES {
        // A question, the call, then `next`.
        let after_call = |next: Message| {
            let mut c = Conversation::new();
            c.messages.push(Message::user("q"));
            c.messages.push(
                Message::assistant_with_calls("", vec![call.clone()])
                    .validate()
                    .unwrap(),
            );
            c.messages.push(next);
            c
        };
        let body = encode(format, &after_call(Message::user("and?")));
        if format != Format::OLLAMA {
            assert!(
                http_support::pairing::check(format, &body).is_err(),
                "{format:?} took an unanswered call: {body:#}"
            );
        }
        let answered = after_call(Message::tool(vec![
            ToolResult::text("c1", "ok").with_name("note"),
        ]));
        let body = encode(format, &answered);
        assert_eq!(
            http_support::pairing::check(format, &body),
            Ok(()),
            "{format:?}: {body:#}"
        );
    }
}

/// A cut-off answer whose calls nothing answers (a stream cancelled by the person, a
/// crash): every wire leaves those calls out, so the API takes what follows.
#[test]
fn a_cut_off_answers_unanswered_calls_are_left_out_on_every_wire() {
    use llmchain::conversation::Conversation;
    use llmchain::message::ToolCall;
    for format in WIRES {
        let mut cut = Message::assistant_with_calls(
            "Let me",
            vec![
                http_support::call("c1", "note", json!({"text": "a"})),
                ToolCall {
                    call_id: Some("c2".into()),
                    name: Some("note".into()),
                    arguments: Some(r#"{"text": "unfinis"#.into()),
                    ..Default::default()
                },
            ],
        );
        cut.status = MessageStatus::Cancelled;
        let mut conv = Conversation::new();
        conv.messages.push(Message::user("q"));
        conv.messages.push(cut);
        conv.messages.push(Message::user("never mind"));
        let body = encode(format, &conv);
        assert_eq!(
            http_support::pairing::check(format, &body),
            Ok(()),
            "{format:?}: {body:#}"
        );
        let text = body.to_string();
        assert!(!text.contains("unfinis"), "{format:?}: {text}");
        assert!(
            text.contains("Let me"),
            "{format:?}: the text is kept: {text}"
        );
    }
}
