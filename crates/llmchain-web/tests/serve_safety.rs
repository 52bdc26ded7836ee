//! The server off the happy path, tried as an attacker and a careless user would: a page
//! of a foreign host name resolved to loopback (DNS rebinding), a page elsewhere posting
//! to it (CSRF), framing, a lowercase `bearer`, chats that are not the server's, idle and
//! silent connections, a new message instead of an approval, and regenerating an answer
//! whose calls ran.

mod common;

use std::time::Duration;

use common::*;
use llmchain::message::{ExecutionStatus, Message, Role, ToolCall};
use llmchain::provider::render::ResponseScript;
use llmchain_store::{NewConversation, NewReview, ReviewStatus, RunState, RunStatus, Store};
use llmchain_web::ServeConfig;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One raw HTTP/1.1 request (any `Host:`, any header) on a new connection; the status
/// and the whole answer.
async fn raw(base: &str, request: String) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out))
        .await
        .expect("the server answers and closes")
        .unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

fn post_raw(host: &str, extra: &str, content_type: &str, body: &str) -> String {
    format!(
        "POST /api/chat HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n{extra}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A chat whose `write` call waits for approval: its approval id.
async fn waiting_write(s: &Server, chat: &str) -> String {
    s.script(&[ResponseScript::tool_call(
        "call_1",
        "write",
        r#"{"text":"x"}"#,
    )]);
    let (_, c, _) = post(&s.base, user(chat, "u1", "write x")).await;
    c.iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap()["approvalId"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn review_status(s: &Server, id: &str) -> ReviewStatus {
    s.store.get_review(id).await.unwrap().unwrap().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_a_page_elsewhere_and_framing_are_refused() {
    let s = start(ServeConfig::default(), None).await;
    let host = s.base.trim_start_matches("http://").to_owned();
    let review = waiting_write(&s, "chat-a").await;
    let approve = approval("chat-a", "m1", &review, true).to_string();

    // DNS rebinding: a page of attacker.example, resolved to 127.0.0.1, can neither read
    // the chats nor approve the call.
    let (status, body) = raw(&s.base, get("/api/chats", "attacker.example:1")).await;
    assert_eq!(status, 421, "{body}");
    assert!(!body.contains("chat-a"), "{body}");
    let (status, _) = raw(
        &s.base,
        get(
            "/api/chats/chat-a",
            &format!("attacker.example:{}", host.split(':').nth(1).unwrap()),
        ),
    )
    .await;
    assert_eq!(status, 421);
    let (status, _) = raw(
        &s.base,
        post_raw("attacker.example", "", "application/json", &approve),
    )
    .await;
    assert_eq!(status, 421);
    assert_eq!(review_status(&s, &review).await, ReviewStatus::Pending);

    // CSRF: a simple request (no preflight) and a page elsewhere naming its origin.
    let (status, _) = raw(&s.base, post_raw(&host, "", "text/plain", &approve)).await;
    assert_eq!(status, 415);
    let new_chat = user("chat-csrf", "u1", "hi").to_string();
    let (status, _) = raw(
        &s.base,
        post_raw(&host, "", "text/plain;charset=UTF-8", &new_chat),
    )
    .await;
    assert_eq!(status, 415);
    assert!(
        s.store
            .get_conversation("chat-csrf")
            .await
            .unwrap()
            .is_none()
    );
    let (status, body) = raw(
        &s.base,
        post_raw(
            &host,
            "Origin: https://attacker.example\r\n",
            "application/json",
            &approve,
        ),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(review_status(&s, &review).await, ReviewStatus::Pending);

    // Framing is refused on the page and the API alike.
    for path in ["/", "/api/chats"] {
        let (status, text) = raw(&s.base, get(path, &host)).await;
        assert_eq!(status, 200, "{path}: {text}");
        let lower = text.to_ascii_lowercase();
        assert!(lower.contains("x-frame-options: deny"), "{path}: {text}");
        assert!(lower.contains("frame-ancestors 'none'"), "{path}: {text}");
    }
    // The favicon is no 404.
    assert_eq!(raw(&s.base, get("/favicon.ico", &host)).await.0, 204);

    // The page itself, from its own origin, approves.
    s.script(&[ResponseScript::text("Done.")]);
    let (status, body) = raw(
        &s.base,
        post_raw(
            &host,
            &format!("Origin: {}\r\n", s.base),
            "application/json",
            &approve,
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(review_status(&s, &review).await, ReviewStatus::Approved);
    assert_eq!(s.writes.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive_and_hosts_can_be_added() {
    let token = "0123456789abcdef0123";
    let s = start(
        ServeConfig {
            token: Some(token.into()),
            allowed_hosts: vec!["chat.example.com".into()],
            ..ServeConfig::default()
        },
        None,
    )
    .await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let request = format!(
            "GET /api/chats HTTP/1.1\r\nHost: chat.example.com\r\nAuthorization: {scheme} {token}\r\n\
             Connection: close\r\n\r\n"
        );
        assert_eq!(raw(&s.base, request).await.0, 200, "{scheme}");
    }
    let request = format!(
        "GET /api/chats HTTP/1.1\r\nHost: chat.example.com\r\nAuthorization: Basic {token}\r\n\
         Connection: close\r\n\r\n"
    );
    assert_eq!(raw(&s.base, request).await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_shows_and_decides_only_its_own_chats() {
    let s = start(ServeConfig::default(), None).await;
    s.script(&[ResponseScript::text("Hello.")]);
    post(&s.base, user("mine", "u1", "hi")).await;
    // A CLI conversation with a call waiting for review in the inbox (a worker's run
    // would be the same).
    let call = ToolCall::function("k1", "charge", json!({"amount": 5})).unwrap();
    let mut conversation = llmchain::conversation::Conversation::new();
    conversation.messages = vec![
        Message::user("pay"),
        Message::assistant_with_calls("", vec![call]),
    ];
    let cli = s
        .store
        .create_conversation(NewConversation::from_conversation(conversation).with_id("cli-1"))
        .await
        .unwrap();
    let run = s
        .store
        .claim_conversation(&cli, "cli-x", Duration::from_secs(30), &RunState::default())
        .await
        .unwrap();
    let paused = RunState {
        status: RunStatus::Paused,
        ..RunState::default()
    };
    s.store
        .pause_run(
            &run.lease().unwrap(),
            &paused,
            &[NewReview {
                call_id: "k1".into(),
                round: 0,
                tool: "charge".into(),
                arguments: json!({"amount": 5}),
                question: None,
                schema: None,
            }],
        )
        .await
        .unwrap();
    let review = s.store.list_reviews(&Default::default()).await.unwrap()[0]
        .id
        .clone();

    let listed: serde_json::Value = reqwest::get(format!("{}/api/chats", s.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = listed["chats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mine"]);
    let one = reqwest::get(format!("{}/api/chats/cli-1", s.base))
        .await
        .unwrap();
    assert_eq!(one.status(), 404);
    // Its review can be decided neither under its own id nor under a chat of the server.
    for chat in ["cli-1", "mine"] {
        let (status, _, _) = post(&s.base, approval(chat, "m1", &review, true)).await;
        assert_eq!(status, 404, "{chat}");
    }
    assert_eq!(review_status(&s, &review).await, ReviewStatus::Pending);
    // A message to it is refused, and changes nothing.
    let (status, c, _) = post(&s.base, user("cli-1", "u9", "hello?")).await;
    assert_eq!(status, 200);
    let error = c.iter().find(|c| c["type"] == "error").unwrap();
    assert!(
        error["errorText"].as_str().unwrap().contains("no chat"),
        "{error}"
    );
    let stored = s.store.get_conversation("cli-1").await.unwrap().unwrap();
    assert_eq!(stored.conversation.messages.len(), 2);
    let run = s.store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(run.state.status, RunStatus::Paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_silent_connections_are_closed_and_connections_are_capped() {
    let s = start(
        ServeConfig {
            header_timeout: Duration::from_millis(300),
            max_connections: 2,
            ..ServeConfig::default()
        },
        None,
    )
    .await;
    let addr = s.base.trim_start_matches("http://").to_owned();
    // Two connections that never send a byte take every slot...
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // ...and are closed, so a request gets through.
    let listed = tokio::time::timeout(
        Duration::from_secs(10),
        reqwest::get(format!("{}/api/chats", s.base)),
    )
    .await
    .expect("a request is answered once the silent connections are closed")
    .unwrap();
    assert_eq!(listed.status(), 200);
    for mut tcp in silent {
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
            .await
            .expect("the silent connection is closed")
            .unwrap_or(0);
        assert_eq!(n, 0, "closed without an answer");
    }
    // A connection kept alive after its answer is closed once idle too.
    let mut kept = tokio::net::TcpStream::connect(&addr).await.unwrap();
    kept.write_all(format!("GET /api/chats HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), kept.read_to_end(&mut all))
        .await
        .expect("the idle connection is closed after its answer")
        .unwrap();
    assert!(String::from_utf8_lossy(&all).starts_with("HTTP/1.1 200"));
}

/// Round 5: valid headers, then one body byte every few seconds, on every slot: no other
/// request was answered until the slow clients gave up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_cut_off_and_free_their_slots() {
    let s = start(
        ServeConfig {
            body_timeout: Duration::from_millis(400),
            max_connections: 2,
            ..ServeConfig::default()
        },
        None,
    )
    .await;
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(
            format!(
                "POST /api/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                 Content-Length: 100\r\n\r\n{{"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        slow.push(tcp);
    }
    // One more byte on each, now and then: never fast enough.
    let started = std::time::Instant::now();
    let listed = tokio::time::timeout(Duration::from_secs(20), async {
        let dribble = async {
            loop {
                tokio::time::sleep(Duration::from_millis(150)).await;
                for tcp in &mut slow {
                    let _ = tcp.write_all(b" ").await;
                }
            }
        };
        tokio::select! {
            r = reqwest::get(format!("{}/api/chats", s.base)) => r,
            _ = dribble => unreachable!(),
        }
    })
    .await
    .expect("a request is answered once the slow bodies are cut off")
    .unwrap();
    assert_eq!(listed.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(20));
    for mut tcp in slow {
        let mut all = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut all)).await;
        let text = String::from_utf8_lossy(&all);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("too slowly"), "{text}");
    }
    // A body at an ordinary pace is read.
    let (status, _) = raw(
        &s.base,
        post_raw(&addr, "", "application/json", "{\"id\": 1}"),
    )
    .await;
    assert_ne!(status, 408);
}

/// Round 5: with `*` allowed as a host, `Host: attacker.example` and `Origin:
/// http://attacker.example` made a page of the attacker's the server's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_host_does_not_let_a_foreign_page_in() {
    let s = start(
        ServeConfig {
            allowed_hosts: vec!["*".into()],
            cors_origins: vec!["*".into(), "https://app.example.com".into()],
            ..ServeConfig::default()
        },
        None,
    )
    .await;
    s.script(&[ResponseScript::text("Hello.")]);
    let body = serde_json::to_string(&user("w1", "u1", "hi")).unwrap();
    let (status, text) = raw(
        &s.base,
        post_raw(
            "attacker.example",
            "Origin: http://attacker.example\r\n",
            "application/json",
            &body,
        ),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    // A wildcard CORS origin is ignored (it panicked the router), a named one kept.
    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, format!("{}/api/chat", s.base))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(
        preflight
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

/// Round 5: a POST to a conversation the server does not own named a worker's run and
/// status, or a CLI holder and its lease, where GET said there is no chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_that_is_not_the_servers_is_never_confirmed() {
    let s = start(ServeConfig::default(), None).await;
    let conversation = || {
        let mut c = llmchain::conversation::Conversation::new();
        c.messages = vec![Message::user("hello")];
        c
    };
    let held = s
        .store
        .create_conversation(NewConversation::from_conversation(conversation()).with_id("cli-2"))
        .await
        .unwrap();
    let run = s
        .store
        .claim_conversation(
            &held,
            "cli@host:123:abc",
            Duration::from_secs(30),
            &RunState::default(),
        )
        .await
        .unwrap();
    let queued = s
        .store
        .create_conversation(NewConversation::from_conversation(conversation()).with_id("job-1"))
        .await
        .unwrap();
    let job = s
        .store
        .create_run(&queued, &RunState::default())
        .await
        .unwrap();
    for (chat, run_id) in [("cli-2", run.id.clone()), ("job-1", job.id.clone())] {
        let one = reqwest::get(format!("{}/api/chats/{chat}", s.base))
            .await
            .unwrap();
        assert_eq!(one.status(), 404);
        let (_, c, _) = post(&s.base, user(chat, "u1", "hi")).await;
        let raw_text = serde_json::to_string(&c).unwrap();
        let error = c.iter().find(|c| c["type"] == "error").unwrap();
        let said = error["errorText"].as_str().unwrap();
        assert_eq!(said, format!("there is no chat {chat:?}"), "{chat}");
        for leak in ["cli@", run_id.as_str(), "lease", "queued", "worker"] {
            assert!(!raw_text.contains(leak), "{chat}: {leak} in {raw_text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_message_instead_of_an_approval_rejects_the_waiting_call() {
    let s = start(ServeConfig::default(), None).await;
    let review = waiting_write(&s, "chat-n").await;
    s.script(&[ResponseScript::text("Sure: it is noon.")]);
    let (status, c, _) = post(
        &s.base,
        user("chat-n", "u2", "never mind; what time is it?"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(c.last().unwrap(), "[DONE]");
    assert!(c.iter().all(|c| c["type"] != "error"), "{c:?}");
    assert!(s.writes.lock().unwrap().is_empty(), "the call did not run");
    let decided = s.store.get_review(&review).await.unwrap().unwrap();
    assert_eq!(decided.status, ReviewStatus::Rejected);
    assert_eq!(
        decided.decided_by.as_deref(),
        Some("llmchain serve (a new message)")
    );
    let stored = s.store.get_conversation("chat-n").await.unwrap().unwrap();
    let roles: Vec<Role> = stored
        .conversation
        .messages
        .iter()
        .map(|m| m.role)
        .collect();
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
    let call = &stored.conversation.messages[1].tool_calls[0];
    assert_eq!(
        call.typed_execution_status(),
        Some(ExecutionStatus::Rejected)
    );
    assert!(stored.conversation.messages[2].tool_results[0].is_refusal());
    assert_eq!(
        stored.conversation.messages[3].text().as_deref(),
        Some("never mind; what time is it?")
    );
    // Every call has its result: a provider accepts the conversation.
    assert!(
        stored.conversation.inconsistencies().is_empty(),
        "{:?}",
        stored.conversation.inconsistencies()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regenerating_keeps_the_calls_that_ran_on_record() {
    let s = start(ServeConfig::default(), None).await;
    s.script(&[
        ResponseScript::tool_call("call_1", "clock", "{}"),
        ResponseScript::text("It is noon."),
        ResponseScript::text("Noon, I said."),
    ]);
    post(&s.base, user("chat-g", "u1", "time?")).await;
    let (status, c, _) = post(
        &s.base,
        json!({"id": "chat-g", "trigger": "regenerate-message", "messageId": "m1", "messages": [
            {"id": "m0", "role": "user", "parts": [{"type": "text", "text": "time?"}]}
        ]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(c[0]["messageId"], "m1");
    // The chat shows the new answer only...
    let stored = s.store.get_conversation("chat-g").await.unwrap().unwrap();
    let texts: Vec<String> = stored
        .conversation
        .messages
        .iter()
        .map(|m| m.text().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["time?", "Noon, I said."]);
    // ...and the call that ran stays on record, with its status and result.
    let kept = s.store.superseded_messages("chat-g").await.unwrap();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert_eq!(kept[0].position, 1);
    let call = &kept[0].message.tool_calls[0];
    assert_eq!(call.name.as_deref(), Some("clock"));
    assert_eq!(
        call.typed_execution_status(),
        Some(ExecutionStatus::Completed)
    );
    assert_eq!(kept[1].message.tool_results[0].content_text(), "12:00");
    assert_eq!(kept[2].message.text().as_deref(), Some("It is noon."));
}
