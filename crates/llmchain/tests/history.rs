//! The history check before every model call: a call of a finished answer left without
//! a result (a crash between the answer and its batch, a conversation taken up with a
//! new message) is sent an "interrupted" answer instead of a request every provider
//! refuses, and the record says so.

use std::sync::Arc;

use llmchain::chain::{Decision, LLMChain, Mode, RunOutcome, ScriptedModel};
use llmchain::message::{Message, ToolCall};
use llmchain::provider::Format;
use llmchain::provider::render::ResponseScript;
use serde_json::{Value, json};

#[tokio::test]
async fn a_call_left_without_a_result_is_answered_interrupted_in_every_format() {
    for format in [
        Format::OPENAI_CHAT,
        Format::ANTHROPIC,
        Format::GEMINI,
        Format::OPENAI_RESPONSES,
    ] {
        let scripted = Arc::new(
            ScriptedModel::new(format)
                .respond(ResponseScript::text("Picking up from here."))
                .unwrap(),
        );
        let mut chain = LLMChain::new(scripted.clone());
        chain
            .add_message(Message::user("send the report"))
            .await
            .unwrap();
        let mut answer = Message::assistant("Sending.");
        answer.tool_calls =
            vec![ToolCall::function("call_9", "send_report", json!({"to": "ops"})).unwrap()];
        chain.add_message(answer).await.unwrap();
        // The process died before the batch; a person comes back with a new message.
        chain
            .add_message(Message::user("did it go out?"))
            .await
            .unwrap();
        assert_eq!(
            chain.run(Mode::while_needs_response()).await.unwrap(),
            RunOutcome::Done
        );

        let body: Value = serde_json::from_slice(&scripted.requests()[0]).unwrap();
        let text = body.to_string();
        assert!(text.contains("call_9"), "{format:?}: {text}");
        assert!(
            text.contains("Interrupted: this call has no result"),
            "{format:?}: {text}"
        );
        // The request the provider gets pairs every call with its result.
        assert!(
            chain
                .journal()
                .entries()
                .iter()
                .any(|e| matches!(&e.decision,
            Decision::Interrupted { call_ids } if call_ids == &["call_9"])),
            "{format:?}"
        );
        // The stored conversation is as it was (nothing inserted).
        assert_eq!(chain.messages().len(), 4);
    }
}

#[tokio::test]
async fn a_request_over_the_window_is_compacted_and_the_store_keeps_everything() {
    let scripted = Arc::new(
        ScriptedModel::new(Format::OPENAI_CHAT)
            .respond(ResponseScript::text("Here is the summary."))
            .unwrap(),
    );
    let mut chain = LLMChain::new(scripted.clone()).with_context_window(20_000);
    for i in 0..4 {
        chain
            .add_message(Message::user(format!("read part {i}")))
            .await
            .unwrap();
        let mut answer = Message::assistant("");
        answer.tool_calls =
            vec![ToolCall::function(format!("c{i}"), "read_file", json!({"path": i})).unwrap()];
        chain.add_message(answer).await.unwrap();
        chain
            .add_message(Message::tool(vec![
                llmchain::message::ToolResult::text(
                    format!("c{i}"),
                    format!("part {i} ").repeat(4_000),
                )
                .with_name("read_file"),
            ]))
            .await
            .unwrap();
        chain
            .add_message(Message::assistant("Read."))
            .await
            .unwrap();
    }
    chain.add_message(Message::user("summarise")).await.unwrap();
    let stored = chain.conversation().clone();
    assert_eq!(
        chain.run(Mode::while_needs_response()).await.unwrap(),
        RunOutcome::Done
    );

    let body = String::from_utf8(scripted.requests()[0].clone()).unwrap();
    // The oldest results were cleared (their calls kept), the newest kept whole.
    assert!(
        body.contains("[cleared to fit the context window: the result of read_file"),
        "{}",
        &body[..400]
    );
    assert!(body.contains("part 3 part 3"));
    for i in 0..4 {
        assert!(
            body.contains(&format!("\"c{i}\"")),
            "call c{i} left the request"
        );
    }
    assert!(body.len() < 4 * 20_000 * 9 / 8, "{} bytes", body.len());
    // The store keeps every result as it was.
    assert_eq!(
        chain.conversation().messages[..stored.messages.len()],
        stored.messages[..]
    );
    let compacted = chain
        .journal()
        .entries()
        .iter()
        .find_map(|e| match &e.decision {
            Decision::Compacted {
                cleared,
                estimated_before,
                estimated_after,
                ..
            } => Some((cleared.clone(), *estimated_before, *estimated_after)),
            _ => None,
        });
    let (cleared, before, after) = compacted.expect("journaled");
    assert!(
        !cleared.is_empty() && !cleared.contains(&"c3".to_owned()),
        "{cleared:?}"
    );
    assert!(after < before && after <= 20_000, "{before} -> {after}");
}
