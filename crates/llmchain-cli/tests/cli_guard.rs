//! Guards from the command line (issue 49): a profile's `[[guard]]` redacts a person's
//! message and a tool's result before the model or the terminal sees them, the verdicts
//! are on record in `runs show` (kinds, never values), and a bad guard is refused with
//! its id and line before anything starts.

mod common;

use common::{llmchain, serve, text, write_config};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

const GUARDS: &str = r#"
[[guard]]
id = "no-personal-data"
kind = "pii"
on = ["user_message", "tool_result"]

[[guard]]
id = "no-drops"
kind = "deny"
patterns = ['(?i)drop\s+table']
on = ["tool_arguments"]
"#;

#[test]
fn a_profiles_guards_redact_what_the_model_and_terminal_see_and_are_on_record() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("contacts.txt"),
        "Ann: ann@corp.example, card 4111 1111 1111 1111\n",
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("q.db").display());
    let (base, seen) = serve(vec![
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::tool_call("c1", "read_file", r#"{"path":"contacts.txt"}"#),
        )
        .unwrap(),
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Ann is listed.")).unwrap(),
    ]);
    write_config(
        dir.path(),
        &format!("base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n{GUARDS}"),
    );
    let out = llmchain(
        &[
            "run",
            "--db",
            &db,
            "--json",
            "I am bob@home.example; who is in contacts.txt?",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for (_, body) in seen.iter() {
        let body = body.to_string();
        assert!(!body.contains("bob@home.example"), "{body}");
        assert!(body.contains("I am [redacted email]"), "{body}");
    }
    let second = seen[1].1.to_string();
    assert!(
        second.contains("Ann: [redacted email], card [redacted card]"),
        "{second}"
    );
    assert!(!second.contains("4111"), "{second}");
    // The terminal showed the guarded result too.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ann@corp.example"), "{stderr}");

    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = v["run"].as_str().unwrap_or_default().to_owned();
    let shown = llmchain(&["runs", "--db", &db, "show", &run], dir.path());
    assert!(shown.status.success(), "{}", text(&shown));
    let said = text(&shown);
    assert!(
        said.contains("guard: no-personal-data at user_message on message 0: rewrite (email)"),
        "{said}"
    );
    assert!(
        said.contains("guard: no-personal-data at tool_result for call c1: rewrite (card, email)"),
        "{said}"
    );
    assert!(
        !said.contains("ann@corp.example") && !said.contains("4111"),
        "{said}"
    );

    // The export carries the guarded versions; what arrived only with --raw.
    let conversation = v["conversation"].as_str().unwrap_or_default().to_owned();
    let export = llmchain(
        &["conversations", "--db", &db, "export", &conversation],
        dir.path(),
    );
    assert!(export.status.success(), "{}", text(&export));
    let exported = String::from_utf8_lossy(&export.stdout);
    assert!(exported.contains("[redacted card]"), "{exported}");
    assert!(!exported.contains("ann@corp.example"), "{exported}");
    assert!(!exported.contains("bob@home.example"), "{exported}");
    let raw = llmchain(
        &[
            "conversations",
            "--db",
            &db,
            "export",
            "--raw",
            &conversation,
        ],
        dir.path(),
    );
    let raw = String::from_utf8_lossy(&raw.stdout);
    assert!(
        raw.contains("ann@corp.example") && raw.contains("bob@home.example"),
        "{raw}"
    );
}

#[test]
fn a_bad_guard_is_refused_with_its_id_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "approve = \"always\"\n\n[[guard]]\nkind = \"size\"\nid = \"too-big\"\n",
    );
    let out = llmchain(
        &[
            "run",
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "hi",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("line 5: guard too-big: a size guard needs `max_bytes`"),
        "{said}"
    );
    write_config(
        dir.path(),
        "[profiles.ops]\n[[profiles.ops.guard]]\nid = \"sql\"\nkind = \"deny\"\npatterns = [\"(\"]\n",
    );
    for args in [&["worker", "--drain"][..], &["serve"][..]] {
        let out = llmchain(args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("[profiles.ops] line 3") && said.contains("the deny list sql"),
            "{args:?}: {said}"
        );
    }
}

#[test]
fn a_served_chat_streams_only_what_the_guards_passed() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("contacts.txt"), "Ann: ann@corp.example\n").unwrap();
    let (base, seen) = serve(vec![
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::tool_call("c1", "read_file", r#"{"path":"contacts.txt"}"#),
        )
        .unwrap(),
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::text("Ann is at ann@corp.example.\nAnything else?"),
        )
        .unwrap(),
    ]);
    write_config(
        dir,
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\nroot = \"{}\"\n\n\
             [[guard]]\nid = \"pii\"\nkind = \"pii\"\n",
            dir.display()
        ),
    );
    let db = format!("sqlite://{}", dir.join("chats.db").display());
    let served = common::Served::start(dir, &["--db", &db]);
    let page = common::post_chat(
        &served.base,
        &common::user_message("chat", "u1", "Who is in contacts.txt?"),
    );
    assert!(
        page.contains("[redacted email]"),
        "{page}\n{}",
        served.log()
    );
    assert!(!page.contains("ann@corp.example"), "{page}");
    // Nor did the model get the result unguarded.
    let seen = seen.lock().unwrap();
    assert!(!seen[1].1.to_string().contains("ann@corp.example"));
}
