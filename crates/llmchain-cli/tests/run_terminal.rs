//! `llmchain run` in a real terminal (tmux): the review questions of `--approve`, the
//! progress line of a long tool call, and Ctrl-C mid-tool and mid-stream leaving a
//! stored conversation that resumes.

mod common;

use common::{BIN, Reply, Session, have_tmux, hermetic, serve, serve_replies};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

fn sse(r: &ResponseScript) -> Vec<u8> {
    render_stream(Format::OPENAI_CHAT, r).unwrap()
}

/// The shell command line running `llmchain run` in `dir` with `args` (already quoted),
/// then printing its exit code and keeping the pane open. The shell traps SIGINT so a
/// Ctrl-C reaches `llmchain` and the shell goes on to print the exit code.
fn run_line(dir: &std::path::Path, base: &str, db: &str, args: &str) -> String {
    format!(
        "trap true INT; cd {} && {} {BIN} run --base-url {base} --db {db} {args}; echo EXIT=$?; sleep 60",
        dir.display(),
        hermetic(dir)
    )
}

/// For a test of `test` with tmux: a temporary directory, its `files/` and the command
/// of the files MCP server on it; `None` (said why) without tmux or the server.
fn with_files(test: &str) -> Option<(tempfile::TempDir, std::path::PathBuf, String)> {
    if !have_tmux(test) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("files");
    std::fs::create_dir(&root).unwrap();
    let files = common::files_server_cmd(test, &root, 0)?;
    Some((dir, root, files))
}

fn db_url(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("run.db").display())
}

/// The id in "resume it with `llmchain conversations --db … resume ID`".
fn resume_id(screen: &str) -> String {
    let at = screen.rfind(" resume ").expect("a resume hint") + " resume ".len();
    screen[at..]
        .split(|c: char| c == '`' || c.is_whitespace())
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn approve_auto_asks_about_a_destructive_tool_in_a_terminal() {
    if !have_tmux("approve_auto_asks_in_a_terminal") {
        return;
    }
    let Some(mcp) = common::bad_server_cmd("approve_auto_asks_in_a_terminal", "ok") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (base, seen) = serve(vec![
        sse(&ResponseScript::tool_call(
            "call_1",
            "work",
            r#"{"job":"cleanup"}"#,
        )),
        sse(&ResponseScript::text("All done.")),
    ]);
    let cmd = run_line(
        dir.path(),
        &base,
        &db_url(dir.path()),
        &format!("--mcp '{mcp}' 'clean up'"),
    );
    let t = Session::start("llmchain-run-auto", &cmd);
    let screen = t.wait_for("[a]pprove  [e]dit  [r]eject  [d]eny >");
    assert!(
        screen
            .contains("call call_1: work — Work [server bad_server says: destructive, open-world]"),
        "{screen}"
    );
    assert!(screen.contains(r#""job": "cleanup""#), "{screen}");
    t.keys(&["a", "Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("✓ work: worked"), "{screen}");
    assert!(screen.contains("All done."), "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn approve_ask_denies_with_a_reason_in_a_terminal() {
    if !have_tmux("approve_ask_denies_with_a_reason") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (base, seen) = serve(vec![
        sse(&ResponseScript::tool_call(
            "call_1",
            "llmchain__calculator",
            r#"{"expression":"2+2"}"#,
        )),
        sse(&ResponseScript::text("Understood.")),
    ]);
    let mcp = common::serve_cmd(dir.path());
    let cmd = run_line(
        dir.path(),
        &base,
        &db_url(dir.path()),
        &format!("--approve ask --mcp '{mcp}' 'add'"),
    );
    let t = Session::start("llmchain-run-ask", &cmd);
    // `ask` asks even about a read-only tool, showing its hints.
    let screen = t.wait_for("[a]pprove  [e]dit  [r]eject  [d]eny >");
    assert!(
        screen.contains(
            "call call_1: llmchain__calculator — Calculate [server llmchain says: read-only, idempotent; not verified"
        ),
        "{screen}"
    );
    t.keys(&["d", "Enter"]);
    t.wait_for("reason for the model");
    t.type_text("not now");
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("✗ llmchain__calculator not run: not now"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=0"), "{screen}");
    let seen = seen.lock().unwrap();
    let msgs = seen[1].1["messages"].as_array().unwrap();
    assert!(
        msgs.iter()
            .any(|m| m["role"] == "tool" && m["content"].to_string().contains("not now")),
        "{msgs:?}"
    );
    // Stored as what happened: denied, never completed.
    let id = common::saved_id(&screen);
    let conv = common::export(&db_url(dir.path()), &id, dir.path());
    assert_eq!(conv.messages[1].tool_calls[0].execution_status(), "denied");
    let shown = common::llmchain(
        &["conversations", "--db", &db_url(dir.path()), "show", &id],
        dir.path(),
    );
    assert!(String::from_utf8_lossy(&shown.stdout).contains("[denied]"));
}

#[test]
fn ctrl_c_mid_tool_shows_progress_then_cancels_and_resumes() {
    if !have_tmux("ctrl_c_mid_tool") {
        return;
    }
    let Some(mcp) = common::bad_server_cmd("ctrl_c_mid_tool", "hang") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = db_url(dir.path());
    let (base, seen) = serve(vec![
        sse(&ResponseScript::tool_call("call_1", "work", "{}").with_text("Working on it.")),
        // The answer `resume` asks for once the call is settled.
        sse(&ResponseScript::text(
            "I could not tell whether the work was done.",
        )),
    ]);
    let cmd = run_line(
        dir.path(),
        &base,
        &db,
        &format!("--approve always --mcp '{mcp}' 'do the work'"),
    );
    let t = Session::start("llmchain-run-ctrlc-tool", &cmd);
    // The tool never answers: after ~500 ms a progress line names it with the time.
    let screen = t.wait_for("running work…");
    assert!(screen.contains("→ work({})"), "{screen}");
    t.wait_for("running work… 1s");
    t.keys(&["C-c"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=130"), "{screen}");
    assert!(
        screen.contains("llmchain: interrupted; conversation"),
        "{screen}"
    );
    assert!(
        !screen.contains("running work…"),
        "the line is cleared: {screen}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "no model call after Ctrl-C");

    // Stored: the user message and the assistant's call, still `executing`; no tool
    // message was half written.
    let id = resume_id(&screen);
    let conv = common::export(&db, &id, dir.path());
    assert_eq!(conv.messages.len(), 2, "{conv:?}");
    assert_eq!(
        conv.messages[1].tool_calls[0].execution_status(),
        "executing"
    );
    // Resuming answers the unfinished call "outcome unknown" (not idempotent). The
    // server is the user's to name again (a recorded address is never used alone).
    let out = common::llmchain(
        &[
            "conversations",
            "--db",
            &db,
            "resume",
            &id,
            "--base-url",
            &base,
            "--mcp",
            &mcp,
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Then it asks the model, as the run did (same server, model and tools).
    assert!(
        text.contains("asking the model, as the conversation ran"),
        "{text}"
    );
    assert!(
        text.contains("I could not tell whether the work was done."),
        "{text}"
    );
    let conv = common::export(&db, &id, dir.path());
    assert_eq!(conv.messages.len(), 4);
    let r = &conv.messages[2].tool_results[0];
    assert_eq!(r.tool_call_id, "call_1");
    assert!(r.is_error(), "{r:?}");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn ctrl_c_mid_stream_keeps_the_partial_message() {
    if !have_tmux("ctrl_c_mid_stream") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = db_url(dir.path());
    // The first half of a reply, then the stream stalls.
    let whole = String::from_utf8(sse(&ResponseScript::text("The answer is forty-two."))).unwrap();
    let mut first_event = String::new();
    for event in whole.split_inclusive("\n\n") {
        first_event.push_str(event);
        if event.contains("The answer") {
            break;
        }
    }
    assert!(!first_event.contains("forty-two"), "{first_event}");
    let (base, _) = serve_replies(vec![Reply::Stall(first_event.into_bytes())]);
    let cmd = run_line(dir.path(), &base, &db, "'question'");
    let t = Session::start("llmchain-run-ctrlc-stream", &cmd);
    t.wait_for("The answer");
    t.keys(&["C-c"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=130"), "{screen}");
    let id = resume_id(&screen);
    let conv = common::export(&db, &id, dir.path());
    assert_eq!(conv.messages.len(), 2, "{conv:?}");
    let partial = &conv.messages[1];
    assert_eq!(partial.status, llmchain::message::MessageStatus::Cancelled);
    let text =
        llmchain::message::parts_to_string(&partial.content, llmchain::message::ContentType::Text)
            .unwrap_or_default();
    assert!(text.contains("The answer"), "{partial:?}");
    let out = common::llmchain(&["conversations", "--db", &db, "show", &id], dir.path());
    assert!(out.status.success());
}

/// Reproduction 1: at the prompt, `e` then the new arguments then `a`: the tool runs
/// with them, and the conversation (`show`, `export`) and the model's next request all
/// carry the call as it ran, the model's own arguments kept with the fact of the edit.
/// The prompt names the run and the call.
#[test]
fn an_edit_at_the_prompt_is_stored_as_it_ran() {
    let test = "an_edit_at_the_prompt_is_stored_as_it_ran";
    let Some((dir, root, files)) = with_files(test) else {
        return;
    };
    let db = db_url(dir.path());
    let (base, seen) = serve(vec![
        sse(&ResponseScript::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"a.txt","content":"original"}"#,
        )),
        sse(&ResponseScript::text("Written.")),
    ]);
    let cmd = run_line(
        dir.path(),
        &base,
        &db,
        &format!("--approve ask --no-builtin-tools --mcp '{files}' 'write it'"),
    );
    let t = Session::start("llmchain-run-edit", &cmd);
    let screen = t.wait_for("[a]pprove  [e]dit  [r]eject  [d]eny >");
    assert!(screen.contains("── run "), "{screen}");
    assert!(screen.contains(", call call_1: write_file"), "{screen}");
    t.keys(&["e", "Enter"]);
    t.wait_for("new arguments as JSON on one line >");
    t.type_text(r#"{"path":"a.txt","content":"edited"}"#);
    t.keys(&["Enter"]);
    t.wait_for("new arguments:");
    t.keys(&["a", "Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "edited"
    );
    assert_eq!(common::files_calls(&root).len(), 1);
    let id = common::saved_id(&screen);
    let conv = common::export(&db, &id, dir.path());
    let call = &conv.messages[1].tool_calls[0];
    assert_eq!(call.arguments_as_map()["content"], "edited");
    assert_eq!(call.execution_status(), "completed");
    assert!(call.was_edited());
    assert_eq!(call.original_arguments().unwrap()["content"], "original");
    let shown = common::llmchain(&["conversations", "--db", &db, "show", &id], dir.path());
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(r#"write_file({"path":"a.txt","content":"edited"}) [completed] [edited at review; the model sent {"path":"a.txt","content":"original"}]"#),
        "{shown}"
    );
    let seen = seen.lock().unwrap();
    let sent = seen[1].1["messages"][1]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        sent.contains("edited") && !sent.contains("original"),
        "{sent}"
    );
}

/// Reproductions 2 and 3: a denial at the prompt is stored `denied`; and a worker
/// started in a terminal never reads it: its queued runs pause for the review inbox,
/// so a keystroke in the worker's terminal answers nothing.
#[test]
fn a_worker_in_a_terminal_never_asks() {
    let test = "a_worker_in_a_terminal_never_asks";
    let Some((dir, root, files)) = with_files(test) else {
        return;
    };
    let db = db_url(dir.path());
    let write = |id: &str, path: &str| {
        sse(&ResponseScript::tool_call(
            id,
            "write_file",
            format!(r#"{{"path":"{path}","content":"x"}}"#),
        ))
    };
    let (base, _seen) = serve(vec![
        write("c4", "q4.txt"),
        write("c5", "q5.txt"),
        write("c6", "q6.txt"),
    ]);
    common::write_config(
        dir.path(),
        &format!("base_url = \"{base}\"\nmodel = \"m\"\napprove = \"ask\"\nmcp = [\"{files}\"]\n"),
    );
    for q in ["q4", "q5", "q6"] {
        let out = common::llmchain(&["run", "--enqueue", "--db", &db, q], dir.path());
        assert!(out.status.success(), "{}", common::text(&out));
    }
    let cmd = format!(
        "cd {} && {} {BIN} worker --db {db} --drain --poll-ms 20 --concurrency 3; echo EXIT=$?; sleep 60",
        dir.path().display(),
        hermetic(dir.path())
    );
    let t = Session::start("llmchain-worker-tty", &cmd);
    // Keystrokes typed while it works answer nothing.
    t.keys(&["a", "Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!screen.contains("[a]pprove"), "{screen}");
    assert_eq!(screen.matches("wait for review").count(), 3, "{screen}");
    assert!(common::files_calls(&root).is_empty());
    assert!(!root.join("q4.txt").exists() && !root.join("q5.txt").exists());
    let list = common::llmchain(&["reviews", "--db", &db, "list"], dir.path());
    assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 3);
}

/// `llmchain chat` in a terminal: two questions in one conversation (the second request
/// carries the first exchange), Ctrl-C mid-answer cancels that answer and the session
/// goes on, Up recalls a question, Ctrl-D ends the session; `chat -c` reopens the
/// conversation and shows where it stands.
#[test]
fn chat_keeps_one_conversation_and_survives_ctrl_c() {
    if !have_tmux("chat_keeps_one_conversation") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = db_url(dir.path());
    let whole = String::from_utf8(sse(&ResponseScript::text("Well, it began as a fort."))).unwrap();
    let mut first_event = String::new();
    for event in whole.split_inclusive("\n\n") {
        first_event.push_str(event);
        if event.contains("Well") {
            break;
        }
    }
    let (base, seen) = serve_replies(vec![
        Reply::Body(sse(&ResponseScript::text("Paris."))),
        Reply::Stall(first_event.into_bytes()),
        Reply::Body(sse(&ResponseScript::text("The Seine."))),
        Reply::Body(sse(&ResponseScript::text("Yes, the Seine."))),
    ]);
    let chat_line = |extra: &str| {
        format!(
            "trap true INT; cd {} && {} {BIN} chat --base-url {base} --db {db} --model m {extra}; echo EXIT=$?; sleep 60",
            dir.path().display(),
            hermetic(dir.path())
        )
    };
    let t = Session::start("llmchain-chat", &chat_line(""));
    t.wait_for("Ctrl-D to quit");
    t.type_text("Capital of France?");
    t.keys(&["Enter"]);
    t.wait_for("Paris.");
    t.type_text("Tell me its history");
    t.keys(&["Enter"]);
    t.wait_for("Well");
    t.keys(&["C-c"]);
    t.wait_for("(answer cancelled)");
    t.type_text("Its river?");
    t.keys(&["Enter"]);
    t.wait_for("The Seine.");
    // Up twice recalls the question before last; Ctrl-U clears it again.
    t.keys(&["Up", "Up"]);
    t.wait_for("› Tell me its history");
    t.keys(&["C-u", "C-d"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    drop(t);

    let first = seen.lock().unwrap().clone();
    assert_eq!(first.len(), 3, "{first:?}");
    let last = first[2].1["messages"].as_array().unwrap();
    let text: Vec<String> = last.iter().map(|m| m["content"].to_string()).collect();
    let text = text.join(" ");
    for needle in [
        "Capital of France?",
        "Paris.",
        "Tell me its history",
        "Its river?",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let out = common::llmchain(&["conversations", "--db", &db, "list"], dir.path());
    let list = String::from_utf8_lossy(&out.stdout);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains("Capital of France?"), "{list}");

    // -c reopens it: the last exchange is shown, the next question goes on from it.
    let t = Session::start("llmchain-chat-c", &chat_line("-c"));
    let screen = t.wait_for("Ctrl-D to quit");
    assert!(
        screen.contains("› Its river?") && screen.contains("The Seine."),
        "{screen}"
    );
    // The session's commands.
    for (command, says) in [
        ("/id", "conversation "),
        ("/tools", "built-in tools: calculator, clock, read_file"),
        ("/usage", "model call(s)"),
        ("/nope", "unknown command /nope"),
        ("/model", "model: m"),
        (
            "/model other-model",
            "model: other-model for the next answers",
        ),
    ] {
        t.type_text(command);
        t.keys(&["Enter"]);
        t.wait_for(says);
    }
    t.type_text("Sure?");
    t.keys(&["Enter"]);
    t.wait_for("Yes, the Seine.");
    t.keys(&["C-d"]);
    t.wait_for("EXIT=0");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen[3].1["model"], "other-model",
        "/model chose the next answer's model"
    );
}

/// A review question inside `llmchain chat`: the call is asked about between two
/// questions, approved, run once, and the session goes on to the next question.
#[test]
fn chat_asks_its_review_questions_and_goes_on() {
    let test = "chat_asks_its_review_questions_and_goes_on";
    let Some((dir, root, files)) = with_files(test) else {
        return;
    };
    let db = db_url(dir.path());
    let (base, seen) = serve_replies(vec![
        Reply::Body(sse(&ResponseScript::tool_call(
            "call_1",
            "write_file",
            r#"{"path":"a.txt","content":"hi"}"#,
        ))),
        Reply::Body(sse(&ResponseScript::text("Written."))),
        Reply::Body(sse(&ResponseScript::text("It says hi."))),
    ]);
    let line = format!(
        "trap true INT; cd {} && {} {BIN} chat --base-url {base} --db {db} --model m --approve ask --no-builtin-tools --mcp '{files}'; echo EXIT=$?; sleep 60",
        dir.path().display(),
        hermetic(dir.path())
    );
    let t = Session::start("llmchain-chat-review", &line);
    t.wait_for("Ctrl-D to quit");
    t.type_text("Write hi to a.txt");
    t.keys(&["Enter"]);
    let screen = t.wait_for("[a]pprove  [e]dit  [r]eject  [d]eny >");
    assert!(screen.contains("call call_1: write_file"), "{screen}");
    t.keys(&["a", "Enter"]);
    t.wait_for("Written.");
    t.type_text("What does it say?");
    t.keys(&["Enter"]);
    t.wait_for("It says hi.");
    t.keys(&["C-d"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    // Where the conversation is kept is said once, at the end, not after each answer.
    assert!(
        !screen.contains("saved (llmchain conversations"),
        "{screen}"
    );
    assert_eq!(
        screen
            .matches("saved (go on with `llmchain chat --db")
            .count(),
        1,
        "{screen}"
    );
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "hi");
    assert_eq!(common::files_calls(&root).len(), 1);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    // The third request carries the whole conversation, the call's result included.
    let msgs = seen[2].1["messages"].as_array().unwrap();
    assert!(msgs.iter().any(|m| m["role"] == "tool"), "{msgs:?}");
}

/// A long call's arguments are shown on the spinner line as they stream (the library's
/// incremental reader): its keys, and the end of its long string.
#[test]
fn a_long_call_is_previewed_while_it_streams() {
    if !have_tmux("a_long_call_is_previewed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{}/deep/notes-final.txt", "dir".repeat(100));
    let mut call =
        ResponseScript::tool_call("call_1", "read_file", format!(r#"{{"path":"{long}"}}"#));
    call.fragment_bytes = 40;
    let (base, _) = serve_replies(vec![
        Reply::Trickle(sse(&call), std::time::Duration::from_millis(150)),
        Reply::Body(sse(&ResponseScript::text("No such file."))),
    ]);
    let cmd = run_line(dir.path(), &base, &db_url(dir.path()), "'read it'");
    let t = Session::start("llmchain-run-preview", &cmd);
    let screen = t.wait_for("read_file: path=\"…");
    assert!(screen.contains(" B)"), "{screen}");
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("EXIT=0") && screen.contains("No such file."),
        "{screen}"
    );
}

/// In a terminal the answer's Markdown is drawn styled as each line finishes (the
/// pane shows `Plan` without its `#`, bullets, bold without its stars); into a pipe the
/// same answer comes as it was written.
#[test]
fn markdown_is_drawn_in_a_terminal_and_kept_in_a_pipe() {
    if !have_tmux("markdown_is_drawn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let answer = "# Plan\n- buy **milk**\n- run `cargo test`\nDone.\n";
    let (base, _) = serve(vec![
        sse(&ResponseScript::text(answer)),
        sse(&ResponseScript::text(answer)),
    ]);
    let cmd = format!(
        "cd {} && {} {BIN} run --base-url {base} 'plan'; echo EXIT=$?; sleep 60",
        dir.path().display(),
        hermetic(dir.path())
    );
    let t = Session::start("llmchain-run-markdown", &cmd);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("• buy milk") && screen.contains("• run cargo test"),
        "{screen}"
    );
    assert!(
        !screen.contains("# Plan") && !screen.contains("**milk**"),
        "{screen}"
    );
    let out = common::llmchain(&["run", "--base-url", &base, "plan"], dir.path());
    assert!(String::from_utf8_lossy(&out.stdout).contains(answer));
}

/// `conversations delete` on a terminal asks first: "n" keeps the conversation, "y"
/// deletes it; `--yes` (and a pipe) do not ask.
#[test]
fn delete_asks_on_a_terminal() {
    if !have_tmux("delete_asks_on_a_terminal") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = db_url(dir.path());
    let (base, _) = serve(vec![sse(&ResponseScript::text("Hello."))]);
    let out = common::llmchain(
        &["run", "--base-url", &base, "--db", &db, "Hi there"],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = common::saved_id(&String::from_utf8_lossy(&out.stderr));
    let delete = format!(
        "cd {} && {} {BIN} conversations --db {db} delete {id}; echo EXIT=$?; sleep 60",
        dir.path().display(),
        hermetic(dir.path())
    );
    let t = Session::start("llmchain-delete-n", &delete);
    let screen = t.wait_for("[y/N]");
    assert!(
        screen.contains("Hi there") && screen.contains("2 message(s)"),
        "{screen}"
    );
    t.type_text("n");
    t.keys(&["Enter"]);
    t.wait_for("not deleted");
    t.wait_for("EXIT=0");
    drop(t);
    let t = Session::start("llmchain-delete-y", &delete);
    t.wait_for("[y/N]");
    t.type_text("y");
    t.keys(&["Enter"]);
    t.wait_for("deleted conversation");
    t.wait_for("EXIT=0");
    drop(t);
    let out = common::llmchain(&["conversations", "--db", &db, "list"], dir.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
}
