//! `llmchain demo` runs offline and tells the story it promises.

mod common;

#[test]
fn demo_runs_offline_and_shows_every_path() {
    let dir = tempfile::tempdir().unwrap();
    for wire in [
        "anthropic",
        "openai",
        "openai_responses",
        "gemini",
        "ollama",
    ] {
        let db = format!("sqlite://{}", dir.path().join("demo.db").display());
        let out = common::bare()
            .args(["demo", "--delay-ms", "0", "--wire", wire, "--db", &db])
            .output()
            .expect("the binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{wire}: {stdout}\n{stderr}");
        // One call is refused, then corrected.
        assert!(
            stdout.contains("✗ calculator refused: Missing required parameters"),
            "{stdout}"
        );
        assert!(stdout.contains("did you mean \"expression\""), "{stdout}");
        assert!(
            stdout.contains("✓ calculator: (17 * 23) + 4 = 395"),
            "{stdout}"
        );
        // One call fails.
        assert!(
            stdout.contains("✗ read_file failed: cannot read notes.md"),
            "{stdout}"
        );
        // One goes through review.
        assert!(
            stdout.contains("? review read_file({\"path\":\"notes.txt\"}): approved"),
            "{stdout}"
        );
        assert!(
            stdout.contains("✓ read_file: Release notes 0.1"),
            "{stdout}"
        );
        assert!(stdout.contains("✓ clock: 20"), "{stdout}");
        assert!(
            stdout.contains("assistant: (17 × 23) + 4 = 395."),
            "{stdout}"
        );
        let stored = stdout
            .lines()
            .find_map(|l| l.strip_prefix("Conversation "))
            .unwrap_or_else(|| panic!("no storage line: {stdout}"));
        let id = stored.split_whitespace().next().unwrap();
        assert!(stored.contains(&format!("stored in {db}")), "{stored}");
        // The stored conversation is whole and exports in the storage format.
        let export = common::bare()
            .args(["conversations", "--db", &db, "export", id])
            .output()
            .unwrap();
        assert!(export.status.success());
        let conv: llmchain::conversation::Conversation =
            serde_json::from_slice(&export.stdout).unwrap();
        assert_eq!(conv.messages.len(), 6);
        assert_eq!(conv.messages[1].tool_calls[0].execution_status(), "failed");
        assert_eq!(
            conv.messages[3].tool_calls[0].execution_status(),
            "completed"
        );
        // Nothing is outstanding, so resume has nothing to run.
        let resume = common::bare()
            .args(["conversations", "--db", &db, "resume", id])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&resume.stdout);
        assert!(resume.status.success(), "{text}");
        assert!(text.contains("nothing outstanding"), "{text}");
    }
}

#[test]
fn demo_rejects_an_unknown_wire() {
    let out = common::bare()
        .args(["demo", "--wire", "smoke-signals"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("unknown --wire 'smoke-signals'"),
        "{stderr}"
    );
}

/// `llmchain demo | head -1`: a reader that goes away neither panics the process nor
/// stops the run; the whole conversation is still stored.
#[test]
fn a_closed_pipe_neither_panics_nor_loses_the_conversation() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("demo.db").display());
    let mut child = common::bare()
        .args(["demo", "--delay-ms", "0", "--db", &db])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the first line is written (as `head -c 0` would):
    // every write to stdout fails from the start.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let list = common::bare()
        .args(["conversations", "--db", &db, "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains("6 messages"), "{listed}");
}
