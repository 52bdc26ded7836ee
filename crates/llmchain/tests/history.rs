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
