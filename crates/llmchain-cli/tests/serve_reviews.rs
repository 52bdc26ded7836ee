//! A served chat's call decided from the command line: `llmchain reviews approve` says
//! the chat's server goes on with it (it does: the page shows the answer), not to run
//! `llmchain conversations resume`, which is for the CLI's own conversations.

mod common;

use std::time::{Duration, Instant};

use common::{
    Served, files_server_cmd, llmchain, post_chat, serve, text, user_message, write_config,
};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

#[test]
fn approving_a_served_chat_from_the_cli_says_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let root = dir.join("files");
    std::fs::create_dir_all(&root).unwrap();
    let Some(files) = files_server_cmd("serve_reviews", &root, 0) else {
        return;
    };
    let call = ResponseScript::tool_call(
        "call_1",
        "write_file",
        serde_json::json!({"path": "a.txt", "content": "A"}).to_string(),
    );
    let (base, _) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &call).unwrap(),
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Written.")).unwrap(),
    ]);
    write_config(
        dir,
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\nmcp = [\"{files}\"]\nno_builtin_tools = true\n\
             approve = \"ask\"\n"
        ),
    );
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    let served = Served::start(dir, &["--db", &db]);
    let asked = post_chat(&served.base, &user_message("chat", "u1", "write a.txt"));
    let approval = asked
        .split("\"approvalId\":\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("no approval request: {asked}"))
        .to_owned();
    let approved = llmchain(&["reviews", "--db", &db, "approve", &approval], dir);
    assert!(approved.status.success(), "{}", text(&approved));
    assert!(
        text(&approved).contains("the chat's server (llmchain serve) goes on with it"),
        "{}",
        text(&approved)
    );
    assert!(!text(&approved).contains("resume"), "{}", text(&approved));
    // And it does: the server's resumer runs the call and stores the answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(root.join("a.txt")).is_err() {
        assert!(Instant::now() < deadline, "{}", served.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `serve` takes the worker's profile flags for its profile "default": with no config
/// file, `--approve ask` and an MCP server from flags make a served call wait for its
/// approval; the flags with another profile are refused.
#[test]
fn serve_takes_the_profile_flags() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let root = dir.join("files");
    std::fs::create_dir_all(&root).unwrap();
    let Some(files) = files_server_cmd("serve_takes_the_profile_flags", &root, 0) else {
        return;
    };
    let call = ResponseScript::tool_call(
        "call_1",
        "write_file",
        serde_json::json!({"path": "b.txt", "content": "B"}).to_string(),
    );
    let (base, _) = serve(vec![render_stream(Format::OPENAI_CHAT, &call).unwrap()]);
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    let served = Served::start(
        dir,
        &[
            "--db",
            &db,
            "--base-url",
            &base,
            "--model",
            "m",
            "--mcp",
            &files,
            "--no-builtin-tools",
            "--approve",
            "ask",
        ],
    );
    let asked = post_chat(&served.base, &user_message("chat", "u1", "write b.txt"));
    assert!(
        asked.contains("\"approvalId\""),
        "no approval request: {asked}"
    );
    assert!(
        std::fs::read_to_string(root.join("b.txt")).is_err(),
        "it waits"
    );
    drop(served);
    let refused = llmchain(
        &[
            "serve",
            "--db",
            &db,
            "--profile",
            "other",
            "--approve",
            "ask",
        ],
        dir,
    );
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("define the profile"),
        "{}",
        text(&refused)
    );
}

/// Round 5: `--cors '*'` panicked at start (exit 101) and `--allow-host '*'` without a
/// token let any page in. Both are usage errors that say what to use instead.
#[test]
fn serve_refuses_wildcards_it_cannot_honour() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    for (flags, says) in [
        (["--cors", "*"], "name each origin instead"),
        (
            ["--cors", "https://*.example.com"],
            "name each origin instead",
        ),
        (["--allow-host", "*"], "set a bearer token with it"),
        (["--allow-host", "*.example.com"], "partial wildcards"),
    ] {
        let mut args = vec!["serve", "--db", &db];
        args.extend(flags);
        let refused = llmchain(&args, dir);
        let said = text(&refused);
        assert_eq!(refused.status.code(), Some(2), "{flags:?}: {said}");
        assert!(said.contains(says), "{flags:?}: {said}");
        assert!(!said.contains("panicked"), "{said}");
    }
}

/// A profile that names a schema makes `serve` answer typed: the UI stream carries the
/// object as it grows (`data-object`, one id), and the last is the checked answer.
#[test]
fn a_profile_with_a_schema_streams_partial_objects() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(
        dir.join("city.json"),
        r#"{"title": "City", "type": "object",
            "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
            "required": ["name", "population"]}"#,
    )
    .unwrap();
    let name = "Paris, capital of France, on the Seine, ".repeat(6);
    let answer = format!(r#"{{"name": "{name}", "population": 2100000}}"#);
    let (base, seen) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text(&answer)).unwrap(),
    ]);
    write_config(
        dir,
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\nno_builtin_tools = true\nschema = \"{}\"\n",
            dir.join("city.json").display()
        ),
    );
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    let served = Served::start(dir, &["--db", &db]);
    let stream = post_chat(
        &served.base,
        &user_message("chat", "u1", "Largest city of France?"),
    );
    let objects: Vec<serde_json::Value> = stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter(|c| c["type"] == "data-object")
        .collect();
    // (One text event here: how partials follow a finer stream is the library's test.)
    assert!(!objects.is_empty(), "the object streams: {stream}");
    assert!(objects.iter().all(|c| c["id"] == "object"), "{stream}");
    assert_eq!(
        objects.last().unwrap()["data"],
        serde_json::json!({"name": name, "population": 2100000})
    );
    // The provider was asked for the schema natively.
    let asked = &seen.lock().unwrap()[0].1;
    assert_eq!(
        asked["response_format"]["json_schema"]["name"], "City",
        "{asked}"
    );
}
