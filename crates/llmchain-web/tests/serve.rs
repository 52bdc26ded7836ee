//! The router over real HTTP (reqwest against a bound server), with a scripted model
//! speaking a real wire format and a SQLite store: a text chat, an approval and a
//! denial through the review inbox, a refused approval, regenerate, resume, a client
//! that leaves, the bounds and the token.

mod common;

use std::time::Duration;

use common::*;
use llmchain::chain::ScriptedTurn;
use llmchain::provider::render::ResponseScript;
use llmchain_store::Store;
use llmchain_web::ServeConfig;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_chat_streams_and_is_stored() {
    let s = start(ServeConfig::default(), None).await;
    s.script(&[ResponseScript::text("Hello there.").with_usage(5, 3)]);
    let (status, c, _) = post(&s.base, user("chat-1", "u1", "hi")).await;
    assert_eq!(status, 200);
    assert_eq!(
        types(&c),
        [
            "start",
            "data-run",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "data-usage",
            "finish",
            "[DONE]"
        ]
    );
    assert_eq!(c[0]["messageId"], "m1");
    assert_eq!(c[4]["delta"], "Hello there.");
    assert_eq!(c[8]["finishReason"], "stop");
    assert_eq!(c[7]["data"], json!({"inputTokens": 5, "outputTokens": 3}));
    let chat = ui(&s.base, "chat-1").await;
    let ids: Vec<&str> = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m0", "m1"]);
    assert_eq!(chat["messages"][1]["parts"][1]["text"], "Hello there.");
    let list: Value = reqwest::get(format!("{}/api/chats", s.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["chats"][0]["id"], "chat-1");
    assert_eq!(list["chats"][0]["title"], "hi");
    // The page is served, with no build step.
    let page = reqwest::get(&s.base).await.unwrap().text().await.unwrap();
    assert!(page.contains("<title>llmchain</title>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waits_for_approval_in_the_store_and_runs_once_approved() {
    let s = start(ServeConfig::default(), None).await;
    s.script(&[
        ResponseScript::tool_call("call_1", "write", r#"{"text":"hello"}"#).with_text("Writing."),
        ResponseScript::text("Done."),
    ]);
    let (_, c, _) = post(&s.base, user("chat-a", "u1", "write hello")).await;
    let t = types(&c);
    for want in [
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-approval-request",
    ] {
        assert!(t.contains(&want.to_owned()), "{t:?}");
    }
    let request = c
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap();
    assert_eq!(request["toolCallId"], "call_1");
    let approval_id = request["approvalId"].as_str().unwrap().to_owned();
    assert_eq!(c.iter().rev().nth(1).unwrap()["finishReason"], "tool-calls");
    assert!(
        s.writes.lock().unwrap().is_empty(),
        "nothing ran unapproved"
    );
    // The store holds the pending review; a reload shows the approval request.
    let chat = ui(&s.base, "chat-a").await;
    let part = tool_part(&chat, 1, "tool-write");
    assert_eq!(part["state"], "approval-requested");
    assert_eq!(part["approval"]["id"], approval_id.as_str());

    let (status, c, _) = post(&s.base, approval("chat-a", "m1", &approval_id, true)).await;
    assert_eq!(status, 200);
    let t = types(&c);
    assert_eq!(
        c[0]["messageId"], "m1",
        "the same assistant message goes on"
    );
    assert!(t.contains(&"tool-output-available".to_owned()), "{t:?}");
    assert_eq!(c.iter().rev().nth(1).unwrap()["finishReason"], "stop");
    assert_eq!(
        *s.writes.lock().unwrap(),
        ["hello"],
        "once, with the stored arguments"
    );
    // Answering again is refused: it is not pending any more (the same answer is
    // taken as a client sending twice; another one is a conflict).
    let (status, _, body) = post(&s.base, approval("chat-a", "m1", &approval_id, false)).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("not waiting for approval"), "{body}");
    let chat = ui(&s.base, "chat-a").await;
    let part = tool_part(&chat, 1, "tool-write");
    assert_eq!(part["state"], "output-available");
    assert_eq!(part["approval"]["approved"], true);
    assert_eq!(s.writes.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_stored_denied_and_an_unknown_approval_is_refused() {
    let s = start(ServeConfig::default(), None).await;
    s.script(&[
        ResponseScript::tool_call("call_1", "write", r#"{"text":"x"}"#),
        ResponseScript::text("Understood."),
    ]);
    let (_, c, _) = post(&s.base, user("chat-d", "u1", "write x")).await;
    let id = c
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap()["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _, _) = post(&s.base, approval("chat-d", "m1", "no-such-review", true)).await;
    assert_eq!(status, 404);
    let (status, c, _) = post(&s.base, approval("chat-d", "m1", &id, false)).await;
    assert_eq!(status, 200);
    assert!(
        types(&c).contains(&"tool-output-denied".to_owned()),
        "{:?}",
        types(&c)
    );
    assert!(s.writes.lock().unwrap().is_empty());
    let stored = s.store.get_conversation("chat-d").await.unwrap().unwrap();
    let call = &stored.conversation.messages[1].tool_calls[0];
    assert_eq!(call.execution_status(), "denied");
    let chat = ui(&s.base, "chat-d").await;
    let part = tool_part(&chat, 1, "tool-write");
    assert_eq!(part["state"], "output-denied");
    assert_eq!(part["approval"]["reason"], "not now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regenerate_drops_the_last_answer_and_answers_again() {
    let s = start(ServeConfig::default(), None).await;
    s.script(&[
        ResponseScript::text("First."),
        ResponseScript::text("Second."),
    ]);
    post(&s.base, user("chat-r", "u1", "hi")).await;
    let (status, c, _) = post(
        &s.base,
        json!({"id": "chat-r", "trigger": "regenerate-message", "messageId": "m1", "messages": [
            {"id": "m0", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
        ]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(c[0]["messageId"], "m1");
    let chat = ui(&s.base, "chat-r").await;
    let messages = chat["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1]["parts"][1]["text"], "Second.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_can_be_resumed_and_goes_on_without_its_client() {
    let s = start(ServeConfig::default(), Some(Duration::from_millis(30))).await;
    s.script(&[ResponseScript::text(
        "A slow answer, streamed a few bytes at a time.",
    )]);
    // The client leaves as soon as the answer starts.
    let res = reqwest::Client::new()
        .post(format!("{}/api/chat", s.base))
        .json(&user("chat-s", "u1", "go"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    drop(res);
    // Another reader resumes it from the first chunk and follows it to the end.
    let resumed = reqwest::get(format!("{}/api/chat/chat-s/stream", s.base))
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let c = chunks(&resumed.text().await.unwrap());
    assert_eq!(c[0]["type"], "start");
    let text: String = c
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "A slow answer, streamed a few bytes at a time.");
    assert_eq!(c.last().unwrap(), "[DONE]");
    // Over: nothing to resume; the answer is stored.
    let after = reqwest::get(format!("{}/api/chat/chat-s/stream", s.base))
        .await
        .unwrap();
    assert_eq!(after.status(), 204);
    let chat = ui(&s.base, "chat-s").await;
    assert_eq!(
        chat["messages"][1]["parts"][1]["text"],
        "A slow answer, streamed a few bytes at a time."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_and_the_token() {
    let token = "0123456789abcdef0123";
    let s = start(
        ServeConfig {
            token: Some(token.into()),
            max_body_bytes: 64 << 10,
            max_text_bytes: 1000,
            ..ServeConfig::default()
        },
        Some(Duration::from_millis(20)),
    )
    .await;
    let client = reqwest::Client::new();
    let send = |body: Value, auth: Option<&str>| {
        let mut r = client.post(format!("{}/api/chat", s.base)).json(&body);
        if let Some(a) = auth {
            r = r.bearer_auth(a);
        }
        r.send()
    };
    assert_eq!(
        send(user("c", "u", "hi"), None).await.unwrap().status(),
        401
    );
    assert_eq!(
        send(user("c", "u", "hi"), Some("wrong-token-wrong-token"))
            .await
            .unwrap()
            .status(),
        401
    );
    let r = client
        .get(format!("{}/api/chats", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        send(user("c", "u", &"x".repeat(2000)), Some(token))
            .await
            .unwrap()
            .status(),
        413
    );
    assert_eq!(
        send(user("c", "u", &"x".repeat(100 << 10)), Some(token))
            .await
            .unwrap()
            .status(),
        413
    );
    assert_eq!(
        send(user("../etc", "u", "hi"), Some(token))
            .await
            .unwrap()
            .status(),
        400
    );
    // One answer per chat at a time.
    s.script(&[ResponseScript::text(
        "a slower answer than the next request",
    )]);
    let first = send(user("busy", "u1", "one"), Some(token)).await.unwrap();
    assert_eq!(first.status(), 200);
    let second = send(user("busy", "u2", "two"), Some(token)).await.unwrap();
    assert_eq!(second.status(), 409);
    first.text().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_error_is_an_error_chunk() {
    let s = start(ServeConfig::default(), None).await;
    s.model
        .push(ScriptedTurn::Fail(llmchain::chain::ModelError::Http {
            provider: "test".into(),
            status: 400,
            kind: llmchain::chain::HttpErrorKind::InvalidRequest,
            message: "bad request".into(),
            retry_after: None,
        }));
    let (status, c, _) = post(&s.base, user("chat-e", "u1", "hi")).await;
    assert_eq!(status, 200);
    let err = c.iter().find(|c| c["type"] == "error").unwrap();
    assert!(
        err["errorText"].as_str().unwrap().contains("bad request"),
        "{err}"
    );
    assert_eq!(c.last().unwrap(), "[DONE]");
}
