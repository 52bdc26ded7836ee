//! `llmchain run --schema FILE`: a typed answer from a local server speaking the real
//! wire format — only the checked object on stdout, a wrong answer sent back, and the
//! last failure naming its path.

mod common;

use common::{llmchain, serve};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

const SCHEMA: &str = r#"{
  "title": "Invoice",
  "description": "An invoice read from the text",
  "type": "object",
  "properties": {
    "number": {"type": "string"},
    "total": {"type": "number", "minimum": 0},
    "lines": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["number", "total", "lines"]
}"#;

const GOOD: &str = r#"{"number": "F-17", "total": 42.5, "lines": ["tea", "cake"]}"#;

fn body(text: &str) -> Vec<u8> {
    render_stream(
        Format::OPENAI_CHAT,
        &ResponseScript::text(text).with_usage(20, 9),
    )
    .unwrap()
}

fn schema_file(dir: &std::path::Path) -> String {
    let path = dir.join("invoice.schema.json");
    std::fs::write(&path, SCHEMA).unwrap();
    path.display().to_string()
}

#[test]
fn only_the_checked_object_is_printed_and_a_wrong_answer_is_sent_back() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_file(dir.path());
    let wrong = r#"{"number": "F-17", "total": -3, "lines": []}"#;
    let (base, seen) = serve(vec![body(wrong), body(GOOD)]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--schema",
            &schema,
            "Invoice F-17: tea and cake, 42.50",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let object: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is the object");
    assert_eq!(
        object,
        serde_json::from_str::<serde_json::Value>(GOOD).unwrap()
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    // Asked natively, by the schema's title, strict.
    let format = &seen[0].1["response_format"];
    assert_eq!(format["type"], "json_schema", "{}", seen[0].1);
    assert_eq!(format["json_schema"]["name"], "Invoice");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(
        format["json_schema"]["description"],
        "An invoice read from the text"
    );
    // The wrong answer went back naming where.
    let told = seen[1].1["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(told.contains("/total"), "{told}");
}

#[test]
fn with_json_the_object_is_beside_the_usage() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_file(dir.path());
    let (base, _) = serve(vec![body(GOOD)]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--schema",
            &schema,
            "--json",
            "Invoice F-17",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["object"]["number"], "F-17");
    assert_eq!(v["usage"]["model_calls"], 1);
    assert!(v["conversation"].as_str().is_some_and(|s| !s.is_empty()));
}

#[test]
fn answers_that_stay_wrong_fail_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_file(dir.path());
    let wrong = r#"{"number": 17, "total": 1, "lines": []}"#;
    let (base, _) = serve(vec![body(wrong), body(wrong), body(wrong), body(wrong)]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--schema",
            &schema,
            "--json",
            "Invoice",
        ],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["type"], "invalid_answer", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("/number"),
        "{v}"
    );
}

#[test]
fn a_schema_providers_would_refuse_is_a_usage_error_before_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let (base, seen) = serve(vec![]);
    for (content, says) in [
        ("{not json", "not JSON"),
        (
            r#"{"type": "array", "items": {"type": "string"}}"#,
            "object",
        ),
    ] {
        let path = dir.path().join("bad.json");
        std::fs::write(&path, content).unwrap();
        let out = llmchain(
            &[
                "run",
                "--base-url",
                &base,
                "--schema",
                &path.display().to_string(),
                "hi",
            ],
            dir.path(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    let out = llmchain(&["run", "--schema", "/nonexistent.json", "hi"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(seen.lock().unwrap().is_empty());
}
