//! `llmchain run` against a local server speaking OpenAI Chat Completions.

mod common;

use common::{llmchain, serve};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

#[test]
fn run_streams_text_and_tool_activity_and_reports_usage() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "Ship on Friday.\n").unwrap();
    let first = ResponseScript::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#)
        .with_text("Reading your notes.")
        .with_usage(50, 10);
    let second = ResponseScript::text("Your notes say: ship on Friday.").with_usage(80, 9);
    let (base, seen) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &first).unwrap(),
        render_stream(Format::OPENAI_CHAT, &second).unwrap(),
    ]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "local-model",
            "--system",
            "Be brief.",
            "Summarise notes.txt",
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Your notes say: ship on Friday."),
        "{stdout}"
    );
    assert!(
        stderr.contains("→ read_file({\"path\":\"notes.txt\"})"),
        "{stderr}"
    );
    assert!(stderr.contains("✓ read_file: Ship on Friday."), "{stderr}");
    assert!(
        stderr.contains("usage: 130 input / 19 output tokens in 2 model call(s)"),
        "{stderr}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "/v1/chat/completions");
    assert_eq!(seen[0].1["model"], "local-model");
    assert_eq!(seen[0].1["messages"][0]["content"], "Be brief.");
    // The tool result went back to the model.
    let msgs = seen[1].1["messages"].as_array().unwrap();
    assert!(
        msgs.iter()
            .any(|m| m["role"] == "tool" && m["content"].to_string().contains("Ship on Friday."))
    );
}

/// A provider's `Retry-After` of 3 s or more is waited out with a line saying so, also
/// when stderr is not a terminal (a log), instead of in silence.
#[test]
fn a_rate_limited_call_says_it_waits_then_answers() {
    use common::{Reply, serve_replies};
    let dir = tempfile::tempdir().unwrap();
    let answer = ResponseScript::text("Done waiting.");
    let (base, seen) = serve_replies(vec![
        Reply::RateLimited(3),
        Reply::Body(render_stream(Format::OPENAI_CHAT, &answer).unwrap()),
    ]);
    let out = llmchain(
        &["run", "--base-url", &base, "--model", "m", "hi"],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Done waiting."), "{stdout}");
    assert!(
        stderr.contains("↻ the model call failed (")
            && stderr.contains("Rate limit reached for requests")
            && stderr.contains("attempt 2 in 3s"),
        "{stderr}"
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
}

/// `run -c` continues the latest conversation and `--conversation PREFIX` a chosen one:
/// the model sees the earlier messages, and the provider and model the conversation ran
/// with are used again without being repeated. The base URL is the user's to give (a
/// recorded one is compared, never used: `cli_queue.rs`).
#[test]
fn run_continues_a_conversation_with_its_recorded_provider_and_model() {
    let dir = tempfile::tempdir().unwrap();
    let (base, seen) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Paris.")).unwrap(),
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::text("About 2.1 million."),
        )
        .unwrap(),
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("The Seine.")).unwrap(),
    ]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "local-model",
            "Capital of France?",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = common::saved_id(&String::from_utf8_lossy(&out.stderr));
    let out = llmchain(
        &[
            "run",
            "-c",
            "--base-url",
            &base,
            "How many people live there?",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("About 2.1 million."));
    assert_eq!(common::saved_id(&stderr), id, "the same conversation");
    let out = llmchain(
        &[
            "run",
            "--conversation",
            &id[..8],
            "--base-url",
            &base,
            "And its river?",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[1].1["model"], "local-model");
    let texts: Vec<String> = seen[2].1["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        texts,
        [
            "user: Capital of France?",
            "assistant: Paris.",
            "user: How many people live there?",
            "assistant: About 2.1 million.",
            "user: And its river?",
        ]
    );
    // Nothing to continue, or an id nobody has: a usage error.
    let empty = tempfile::tempdir().unwrap();
    let out = llmchain(&["run", "-c", "hi"], empty.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("there is no conversation to continue"));
}

/// `--tools` picks tools by name, `--no-builtin-tools` leaves the built-in ones out;
/// a name no tool has is a usage error naming the tools there are.
#[test]
fn the_user_chooses_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let reply = || render_stream(Format::OPENAI_CHAT, &ResponseScript::text("ok")).unwrap();
    let (base, seen) = serve(vec![reply(), reply()]);
    let names = |n: usize, seen: &common::Seen| -> Vec<String> {
        seen.lock().unwrap()[n].1["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--tools",
            "calculator,clock",
            "--max-tokens",
            "77",
            "--temperature",
            "0.25",
            "--tool-choice",
            "clock",
            "hi",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(names(0, &seen), ["calculator", "clock"]);
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].1["max_tokens"], 77);
        assert_eq!(
            seen[0].1["tool_choice"],
            serde_json::json!({"type": "function", "function": {"name": "clock"}})
        );
        assert_eq!(seen[0].1["temperature"], 0.25);
    }
    let out = llmchain(
        &["run", "--base-url", &base, "--no-builtin-tools", "hi"],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(names(1, &seen).is_empty());
    let out = llmchain(
        &["run", "--base-url", &base, "--tools", "shell", "hi"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"--tools names "shell""#) && err.contains("calculator, clock, read_file"),
        "{err}"
    );
}

/// `run --conversation ID` without a prompt finishes a conversation that waits for
/// the model (an interrupted run); one that does not is a usage error.
#[test]
fn run_without_a_prompt_finishes_a_waiting_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let (base, seen) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Here you are.")).unwrap(),
    ]);
    // The first run cannot reach its server: the user message stays unanswered.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let out = llmchain(&["run", "--base-url", &refused, "Hello?"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let out = llmchain(&["conversations", "list"], dir.path());
    let listed = String::from_utf8_lossy(&out.stdout);
    let id = listed.split_whitespace().next().unwrap().to_owned();
    let out = llmchain(
        &["run", "--conversation", &id, "--base-url", &base],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Here you are."));
    assert_eq!(
        seen.lock().unwrap()[0].1["messages"][0]["content"],
        "Hello?"
    );
    let out = llmchain(
        &["run", "--conversation", &id, "--base-url", &base],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("is not waiting for the model; give a prompt"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--json` prints one object (the answer, the message, the usage) and no streamed text.
#[test]
fn run_json_prints_the_answer_and_usage_as_one_object() {
    let dir = tempfile::tempdir().unwrap();
    let script = ResponseScript::text("Forty-two.").with_usage(12, 3);
    let (base, _) = serve(vec![render_stream(Format::OPENAI_CHAT, &script).unwrap()]);
    let out = llmchain(
        &["run", "--base-url", &base, "--json", "The answer?"],
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
    assert_eq!(v["text"], "Forty-two.");
    assert_eq!(v["message"]["role"], "assistant");
    assert_eq!(v["usage"]["input_tokens"], 12);
    assert_eq!(v["usage"]["output_tokens"], 3);
    assert_eq!(v["usage"]["model_calls"], 1);
    assert!(v["conversation"].as_str().is_some_and(|s| !s.is_empty()));
}

/// The usage line and `--json` count this invocation's model calls, not the whole
/// conversation's: a continued conversation reports only its new call.
#[test]
fn usage_counts_this_invocation() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = serve(vec![
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::text("One.").with_usage(100, 10),
        )
        .unwrap(),
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::text("Two.").with_usage(7, 2),
        )
        .unwrap(),
    ]);
    let out = llmchain(&["run", "--base-url", &base, "first"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = llmchain(
        &["run", "--base-url", &base, "-c", "--json", "second"],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["usage"]["input_tokens"], 7);
    assert_eq!(v["usage"]["output_tokens"], 2);
    assert_eq!(v["usage"]["model_calls"], 1);
    assert!(
        stderr.contains("usage: 7 input / 2 output tokens in 1 model call(s)"),
        "{stderr}"
    );
}

/// The usage line says what came from the prompt cache and what went to reasoning, where
/// the provider reports it, and `--json` carries the same figures.
#[test]
fn run_usage_shows_cache_and_reasoning_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":90,",
        "\"prompt_tokens_details\":{\"cached_tokens\":1024},",
        "\"completion_tokens_details\":{\"reasoning_tokens\":64}}}\n\n",
        "data: [DONE]\n\n"
    );
    let (base, _) = serve(vec![body.as_bytes().to_vec(), body.as_bytes().to_vec()]);
    let out = llmchain(&["run", "--base-url", &base, "Hello"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "usage: 1200 input (1024 from cache) / 90 output (64 reasoning) tokens in 1 model call(s)"
        ),
        "{stderr}"
    );
    let out = llmchain(&["run", "--base-url", &base, "--json", "Hello"], dir.path());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["usage"]["cache_read_tokens"], 1024);
    assert_eq!(v["usage"]["reasoning_tokens"], 64);
}

/// The config file sets defaults (here the model and the base URL); `config path` says
/// where it is; a misspelt key is a usage error naming the file.
#[test]
fn the_config_file_sets_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let reply = || render_stream(Format::OPENAI_CHAT, &ResponseScript::text("ok")).unwrap();
    let (base, seen) = serve(vec![reply(), reply()]);
    let out = llmchain(&["config", "path"], dir.path());
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(
        path,
        dir.path()
            .join("llmchain/config.toml")
            .display()
            .to_string()
    );
    std::fs::create_dir_all(dir.path().join("llmchain")).unwrap();
    std::fs::write(
        &path,
        format!("model = \"from-config\"\nbase_url = \"{base}\"\napprove = \"never\"\n"),
    )
    .unwrap();
    let out = llmchain(&["run", "hi"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = llmchain(&["run", "--model", "from-flag", "hi"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].1["model"], "from-config");
        assert_eq!(seen[1].1["model"], "from-flag");
    }
    std::fs::write(&path, "modle = \"x\"\n").unwrap();
    let out = llmchain(&["run", "hi"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml") && err.contains("unknown field `modle`"),
        "{err}"
    );
}

/// The prompt from stdin: `-`, nothing, or piped context with a prompt.
#[test]
fn run_reads_the_prompt_from_stdin() {
    use common::llmchain_with_stdin;
    let dir = tempfile::tempdir().unwrap();
    let reply = || render_stream(Format::OPENAI_CHAT, &ResponseScript::text("ok")).unwrap();
    let (base, seen) = serve(vec![reply(), reply(), reply()]);
    for (args, stdin) in [
        (vec!["-"], "what is in here?\n"),
        (vec![], "no prompt at all\n"),
        (vec!["Summarise the log above."], "line 1\nline 2\n"),
    ] {
        let mut full = vec!["run", "--base-url", base.as_str()];
        full.extend(args);
        let out = llmchain_with_stdin(&full, dir.path(), stdin);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let seen = seen.lock().unwrap();
    let user = |n: usize| {
        seen[n].1["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(user(0), "what is in here?\n");
    assert_eq!(user(1), "no prompt at all\n");
    assert_eq!(user(2), "line 1\nline 2\n\nSummarise the log above.");
}

#[test]
fn a_missing_key_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(&["run", "--provider", "anthropic", "hello"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
}

#[test]
fn an_unreachable_server_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{port}/v1");
    let out = llmchain(&["run", "--base-url", &base, "hello"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("could not reach openai"), "{stderr}");
    assert!(stderr.contains("OPENAI_BASE_URL"), "{stderr}");
    // The failed run is marked in the list.
    let out = llmchain(&["conversations", "list"], dir.path());
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("1 message  [failed] hello"), "{listed}");
    let out = llmchain(&["conversations", "list", "--json"], dir.path());
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(v["last_run"], "failed");
}

#[test]
fn an_unknown_provider_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(&["run", "--provider", "nope", "hello"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown --provider 'nope'"), "{err}");
    assert!(err.contains("azure") && err.contains("mistral"), "{err}");
}

/// `--help` reads the library's provider registry: every provider, its default model
/// and the variables it reads; a provider's own errors name its variables.
#[test]
fn the_providers_come_from_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(&["run", "--help"], dir.path());
    let help = String::from_utf8_lossy(&out.stdout);
    for p in llmchain::http::providers::PROVIDERS {
        assert!(help.contains(p.name()), "{} missing from --help", p.name());
        assert!(help.contains(p.default_model()), "{}'s model", p.name());
    }
    assert!(help.contains("AZURE_OPENAI_API_KEY") && help.contains("GROQ_API_KEY"));
    let out = llmchain(&["run", "--provider", "azure", "hello"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", common::text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("AZURE_OPENAI_RESOURCE"), "{err}");
    let out = llmchain(&["run", "--provider", "groq", "hello"], dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GROQ_API_KEY"), "{err}");
}

fn texts(replies: &[ResponseScript]) -> Vec<Vec<u8>> {
    replies
        .iter()
        .map(|r| render_stream(Format::OPENAI_CHAT, r).unwrap())
        .collect()
}

/// The tool messages the model received in its `n`th request.
fn tool_messages(seen: &common::Seen, n: usize) -> Vec<serde_json::Value> {
    seen.lock().unwrap()[n].1["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

#[test]
fn run_with_the_tools_of_our_own_mcp_server_and_stores_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "Ship on Friday.\n").unwrap();
    // The server's tools collide with the built-in ones, so they get its name as prefix.
    let (base, seen) = serve(texts(&[
        ResponseScript::tool_call("call_1", "llmchain__read_file", r#"{"path":"notes.txt"}"#),
        ResponseScript::text("Friday."),
    ]));
    let db = format!("sqlite://{}", dir.path().join("run.db").display());
    let mcp = common::serve_cmd(dir.path());
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--db",
            &db,
            "--mcp",
            &mcp,
            // Its read-only annotation is believed because the user trusts it.
            "--trust",
            "llmchain",
            "When?",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Read-only (announced by `mcp serve`), so `auto` runs it without a terminal.
    assert!(
        stderr.contains("✓ llmchain__read_file: Ship on Friday."),
        "{stderr}"
    );
    let tools: Vec<String> = seen.lock().unwrap()[0].1["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    for name in [
        "calculator",
        "read_file",
        "llmchain__calculator",
        "llmchain__read_file",
    ] {
        assert!(tools.iter().any(|t| t == name), "{name} not in {tools:?}");
    }
    let conv = common::export(&db, &common::saved_id(&stderr), dir.path());
    assert_eq!(conv.messages.len(), 4);
    assert_eq!(
        conv.messages[1].tool_calls[0].execution_status(),
        "completed"
    );
}

#[test]
fn approve_auto_denies_a_destructive_tool_without_a_terminal() {
    let Some(mcp) = common::bad_server_cmd("approve_auto_denies_a_destructive_tool", "ok") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = || {
        texts(&[
            ResponseScript::tool_call("call_1", "work", "{}"),
            ResponseScript::text("ok."),
        ])
    };
    // No --approve: `work` has no annotations (destructive by default) and there is no
    // terminal to ask, so it is denied and the model is told why.
    let (base, seen) = serve(script());
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--mcp",
            &mcp,
            "--trust",
            "sdk_server",
            "go",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("✗ work not run: it is not annotated as read-only and there is no terminal"),
        "{stderr}"
    );
    assert!(!stderr.contains("✓ work"), "{stderr}");
    let told = tool_messages(&seen, 1);
    assert!(
        told[0]["content"].to_string().contains("--approve always"),
        "{told:?}"
    );

    let (base, seen) = serve(script());
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--mcp",
            &mcp,
            "--approve",
            "always",
            "go",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ work: worked"), "{stderr}");
    assert!(
        tool_messages(&seen, 1)[0]["content"]
            .to_string()
            .contains("worked")
    );

    let (base, seen) = serve(script());
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--mcp",
            &mcp,
            "--approve",
            "never",
            "go",
        ],
        dir.path(),
    );
    assert!(out.status.success());
    assert!(
        tool_messages(&seen, 1)[0]["content"]
            .to_string()
            .contains("--approve never")
    );
}

#[test]
fn no_progress_line_without_a_terminal() {
    let Some(mcp) = common::bad_server_cmd("no_progress_line_without_a_terminal", "slow") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = serve(texts(&[
        ResponseScript::tool_call("call_1", "work", "{}"),
        ResponseScript::text("ok."),
    ]));
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--mcp",
            &mcp,
            "--approve",
            "always",
            "go",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ work: worked"), "{stderr}");
    assert!(!stderr.contains("running work"), "{stderr}");
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "{stderr:?}"
    );
}

#[test]
fn run_with_the_python_sdk_server_over_stdio_and_http() {
    let Some(py) = common::sdk_python("run_with_the_python_sdk_server") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = common::sdk_server_script();
    // stdio: `echo` is read-only (annotated by a server the user trusts) and runs;
    // `weather` is not and is denied.
    let (base, seen) = serve(texts(&[
        ResponseScript::tool_call("call_1", "echo", r#"{"text":"hi"}"#).with_call(
            "call_2",
            "weather",
            r#"{"city":"Paris"}"#,
        ),
        ResponseScript::text("ok."),
    ]));
    let mcp = format!("{py} {script}");
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--mcp",
            &mcp,
            "--trust",
            "sdk_server",
            "go",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ echo: echo: hi"), "{stderr}");
    assert!(stderr.contains("✗ weather not run"), "{stderr}");
    let told = tool_messages(&seen, 1);
    assert_eq!(told.len(), 2, "{told:?}");

    // Streamable HTTP: the same server on a port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = std::process::Command::new(&py)
        .args([script.as_str(), "--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let started = std::time::Instant::now();
    // An HTTP answer, not a bare connect: a connect to a port nobody holds yet can
    // connect to itself (TCP simultaneous open) and read back its own request.
    let answers = || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
            use std::io::{Read, Write};
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let _ = write!(s, "GET /mcp HTTP/1.0\r\nHost: x\r\n\r\n");
            let mut r = [0u8; 5];
            s.read_exact(&mut r).is_ok() && &r == b"HTTP/"
        })
    };
    while !answers() {
        assert!(
            started.elapsed().as_secs() < 30,
            "the SDK server did not start"
        );
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the SDK server exited: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _guard = Kill(child);
    let (base, seen) = serve(texts(&[
        ResponseScript::tool_call("call_1", "weather", r#"{"city":"Oslo"}"#),
        ResponseScript::text("ok."),
    ]));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--mcp-http",
            &url,
            "--approve",
            "always",
            "go",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ weather:"), "{stderr}");
    assert!(
        tool_messages(&seen, 1)[0]["content"]
            .to_string()
            .contains("Oslo")
    );
}

/// Escape sequences in what a tool returned (here a file the model asked for) never
/// reach the terminal raw: the progress line and `conversations show` show them escaped.
#[test]
fn escape_sequences_from_tools_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("notes.txt"),
        "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m approved\n",
    )
    .unwrap();
    let first = ResponseScript::tool_call("call_1", "read_file", r#"{"path":"notes.txt"}"#);
    let second = ResponseScript::text("Done.");
    let (base, _seen) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &first).unwrap(),
        render_stream(Format::OPENAI_CHAT, &second).unwrap(),
    ]);
    let db = format!("sqlite://{}", dir.path().join("esc.db").display());
    let out = llmchain(
        &["run", "--base-url", &base, "--db", &db, "Read notes.txt"],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{9b}'),
        "{stderr:?}"
    );
    assert!(
        stderr.contains("✓ read_file: \\u{1b}]0;pwned\\u{7}"),
        "{stderr}"
    );
    let id = common::saved_id(&stderr);
    let show = llmchain(&["conversations", "--db", &db, "show", &id], dir.path());
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success());
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{9b}'),
        "{shown:?}"
    );
    assert!(shown.contains("\\u{1b}[2J"), "{shown}");
    // The export is data: the text exactly as stored.
    let c = common::export(&db, &id, dir.path());
    assert!(
        c.messages[2].tool_results[0]
            .content_text()
            .contains('\u{1b}')
    );
}

/// `-s` sets the system prompt, `-o KEY=VALUE` writes provider options into the body
/// (over the typed fields: `-o temperature` beats `--temperature`), `--no-stream` asks
/// for the whole answer at once; `-o` without `=` or for `model` says what to do.
#[test]
fn system_options_and_no_stream_reach_the_request() {
    use common::{Reply, serve_replies};
    let dir = tempfile::tempdir().unwrap();
    let (base, seen) = serve_replies(vec![Reply::Status(
        200,
        r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"ok\":true}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}"#,
    )]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "m",
            "-s",
            "Answer in JSON.",
            "-o",
            "top_p=0.5",
            "-o",
            r#"response_format={"type":"json_object"}"#,
            "-o",
            "temperature=0.1",
            "-o",
            "user=alice",
            "--temperature",
            "0.9",
            "--no-stream",
            "Is it ok?",
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(r#"{"ok":true}"#), "{stdout}");
    let seen = seen.lock().unwrap();
    let body = &seen[0].1;
    assert_eq!(body["messages"][0]["content"], "Answer in JSON.");
    assert_eq!(body["top_p"], 0.5);
    assert_eq!(body["response_format"]["type"], "json_object");
    assert_eq!(body["temperature"], 0.1);
    assert_eq!(body["user"], "alice");
    assert!(body.get("stream").is_none_or(|s| s == false), "{body}");

    for (bad, says) in [
        ("top_p", "KEY=VALUE"),
        ("model=gpt", "--model"),
        ("stream=true", "--no-stream"),
    ] {
        let out = llmchain(&["run", "--base-url", &base, "-o", bad, "hi"], dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains(says), "{bad}: {stderr}");
    }
}

/// With `--json`, a failure is one JSON object on stdout (and the usual line on
/// stderr): a provider that cannot be reached, and a usage error.
#[test]
fn json_failures_are_a_json_object_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(
        &["run", "--json", "--base-url", "http://127.0.0.1:9/v1", "hi"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "runtime");
    // What failed, for a script to branch on: the model could not be reached.
    assert_eq!(v["error"]["type"], "connect", "{v}");
    assert_eq!(v["error"]["exit_code"], 1);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not reach"),
        "{v}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("llmchain: "));
    let out = llmchain(&["run", "--json", "--temperature", "hot", "hi"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage");
    assert_eq!(v["error"]["type"], "usage");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("hot"),
        "{v}"
    );
    // A store's failure keeps the store's type.
    let db = format!("sqlite://{}", dir.path().join("t.db").display());
    let out = llmchain(
        &["run", "--json", "--db", &db, "--conversation", "nope", "hi"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["type"], "conversation_not_found", "{v}");
}

/// An answer cut by the token limit says so on stderr, with how to go on.
#[test]
fn an_answer_cut_by_max_tokens_says_so() {
    use llmchain::provider::render::ScriptStop;
    let dir = tempfile::tempdir().unwrap();
    let cut = ResponseScript::text("The first three colors are red, gre")
        .with_stop(ScriptStop::MaxTokens);
    let (base, _) = serve(vec![render_stream(Format::OPENAI_CHAT, &cut).unwrap()]);
    let out = llmchain(
        &["run", "--base-url", &base, "--max-tokens", "8", "Colors?"],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("red, gre"), "{stdout}");
    assert!(
        stderr.contains("note: the answer was cut short by the token limit (--max-tokens 8)")
            && stderr.contains("continue`"),
        "{stderr}"
    );
}

/// `-a` attaches images, PDFs, text files and URLs to the prompt as the wire takes them
/// (OpenAI Chat: `image_url` data URLs, a `file` for the PDF, a text file's text under
/// its name); a kind the provider does not take (a PDF on Ollama) and a missing file are
/// refused before anything is sent.
#[test]
fn attachments_go_on_the_wire_or_are_refused() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let png = base64::engine::general_purpose::STANDARD
        .decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
        .unwrap();
    std::fs::write(dir.path().join("pic.png"), &png).unwrap();
    std::fs::write(
        dir.path().join("doc.pdf"),
        b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.md"), "# Notes\nShip on Friday.\n").unwrap();
    let (base, seen) = serve(vec![
        render_stream(
            Format::OPENAI_CHAT,
            &ResponseScript::text("A dot, a PDF, notes."),
        )
        .unwrap(),
    ]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "-a",
            "pic.png",
            "-a",
            "doc.pdf",
            "-a",
            "notes.md",
            "-a",
            "https://example.com/cat.jpg",
            "Describe these",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let seen = seen.lock().unwrap();
    let content = seen[0].1["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    let text = content.to_string();
    assert!(text.contains("data:image/png;base64,iVBORw0KGgo"), "{text}");
    assert!(
        text.contains(r#""filename":"doc.pdf""#)
            && text.contains("data:application/pdf;base64,JVBERi0"),
        "{text}"
    );
    assert!(
        text.contains("notes.md:\\n# Notes\\nShip on Friday."),
        "{text}"
    );
    assert!(text.contains("https://example.com/cat.jpg"), "{text}");
    assert!(text.contains("Describe these"), "{text}");
    drop(seen);

    let (ollama, _) = serve(vec![]);
    let root = ollama.trim_end_matches("/v1");
    let out = llmchain(
        &[
            "run",
            "--provider",
            "ollama",
            "--base-url",
            root,
            "-a",
            "doc.pdf",
            "What is it?",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("-a doc.pdf: ollama does not take it")
            && stderr.contains("not sent: application/pdf"),
        "{stderr}"
    );
    let out = llmchain(
        &["run", "--base-url", &base, "-a", "missing.txt", "hi"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-a missing.txt: cannot read it"));
}

/// A provider that echoes the request line with the key the base URL carries (as
/// OpenAI answers a wrong path): the key appears nowhere, not on stderr, not in `--json`,
/// not in the run's last error that `runs list` and `runs show` print.
#[test]
fn a_secret_echoed_by_the_provider_is_masked_everywhere() {
    use common::{Reply, serve_replies, text};
    const KEY: &str = "sk-echoed-url-key-4b7d19c2";
    let dir = tempfile::tempdir().unwrap();
    let (base, _seen) = serve_replies(vec![Reply::Status(
        404,
        r#"{"error":{"message":"Invalid URL (POST /v1/chat/completions?api-key=sk-echoed-url-key-4b7d19c2)","type":"invalid_request_error"}}"#,
    )]);
    let db = format!("sqlite://{}", dir.path().join("c.db").display());
    let url = format!("{base}?api-key={KEY}");
    let out = llmchain(
        &[
            "run",
            "--db",
            &db,
            "--base-url",
            &url,
            "--model",
            "m",
            "--json",
            "hi",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("Invalid URL"), "{}", text(&out));
    assert!(!text(&out).contains(KEY), "{}", text(&out));
    for args in [
        vec!["runs", "--db", &db, "list"],
        vec!["runs", "--db", &db, "list", "--json"],
    ] {
        let shown = llmchain(&args, dir.path());
        assert!(shown.status.success(), "{}", text(&shown));
        assert!(
            text(&shown).contains("Invalid URL"),
            "{args:?}: {}",
            text(&shown)
        );
        assert!(!text(&shown).contains(KEY), "{args:?}: {}", text(&shown));
    }
}

/// An attached text file is found again: `conversations search` reads attached text,
/// `show` names the file.
#[test]
fn attached_text_is_searched_and_shown_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("a.db").display());
    std::fs::write(
        dir.path().join("notes.txt"),
        "Shopping list.\nThe secret ingredient is pumpernickel.\n",
    )
    .unwrap();
    let (base, _) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Noted.")).unwrap(),
    ]);
    let out = llmchain(
        &[
            "run",
            "--base-url",
            &base,
            "--db",
            &db,
            "-a",
            "notes.txt",
            "Keep this",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = llmchain(
        &["conversations", "--db", &db, "search", "PUMPERNICKEL"],
        dir.path(),
    );
    let found = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        found.contains("attached notes.txt") && found.contains("pumpernickel"),
        "{found}"
    );
    let id = found.split_whitespace().next().unwrap().to_owned();
    let out = llmchain(&["conversations", "--db", &db, "show", &id], dir.path());
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("[file notes.txt, text/plain, 54 bytes]"),
        "{shown}"
    );
}

/// Round 5: a key a provider echoes URL-encoded, and a key the model writes into its
/// answer (split across streamed pieces, or in base64), were shown and stored in clear.
#[test]
fn encoded_and_split_secrets_are_masked_everywhere() {
    use base64::Engine as _;
    use common::{Reply, serve_replies, text};
    const KEY: &str = "sk-SECRET/KEY+123==";
    const ENCODED: &str = "sk-SECRET%2FKEY%2B123%3D%3D";
    let b64 = base64::engine::general_purpose::STANDARD.encode(KEY);
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("c.db");
    let db = format!("sqlite://{}", db_path.display());
    let leaks = |said: &str| {
        [KEY, ENCODED, b64.as_str()]
            .into_iter()
            .find(|k| said.contains(k))
    };

    let error = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {ENCODED}","type":"invalid_request_error"}}}}"#
    );
    let error: &'static str = Box::leak(error.into_boxed_str());
    let (base, _) = serve_replies(vec![Reply::Status(401, error)]);
    let env = [("OPENAI_API_KEY", KEY)];
    let out = common::llmchain_with_env(
        &[
            "run",
            "--db",
            &db,
            "--base-url",
            &base,
            "--model",
            "m",
            "hi",
        ],
        dir.path(),
        &env,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("Incorrect API key"), "{}", text(&out));
    assert_eq!(leaks(&text(&out)), None, "{}", text(&out));
    for args in [
        vec!["runs", "--db", &db, "list"],
        vec!["runs", "--db", &db, "list", "--json"],
    ] {
        let shown = common::llmchain_with_env(&args, dir.path(), &env);
        assert_eq!(leaks(&text(&shown)), None, "{args:?}: {}", text(&shown));
    }

    let answer = format!("Your key is {KEY}, or {b64} in base64.");
    let script = ResponseScript {
        fragment_bytes: 3,
        ..ResponseScript::text(answer)
    };
    let (base, _) = serve(vec![render_stream(Format::OPENAI_CHAT, &script).unwrap()]);
    for json in [false, true] {
        let mut args = vec!["run", "--db", &db, "--base-url", &base, "--model", "m"];
        if json {
            args.push("--json");
        }
        args.push("what is my key?");
        let out = common::llmchain_with_env(&args, dir.path(), &env);
        if !out.status.success() {
            // The server answers once: the second run has nothing to ask.
            assert!(json, "{}", text(&out));
            continue;
        }
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), text(&out));
        assert!(said.contains("Your key is ***"), "{said}");
        assert_eq!(leaks(&said), None, "{said}");
    }
    let shown =
        common::llmchain_with_env(&["conversations", "--db", &db, "list"], dir.path(), &env);
    assert_eq!(leaks(&text(&shown)), None, "{}", text(&shown));
    let mut stored = std::fs::read(&db_path).unwrap();
    stored.extend(std::fs::read(dir.path().join("c.db-wal")).unwrap_or_default());
    for k in [KEY, ENCODED, b64.as_str()] {
        assert!(
            !stored.windows(k.len()).any(|w| w == k.as_bytes()),
            "{k} is stored in clear"
        );
    }
}

/// Round 5: on a loaded machine a question failed with "pool timed out" while another
/// process held the database, and was lost. Another process holding the database for
/// longer than the old 30-second wait now only delays the question, which is stored.
#[test]
fn a_question_waits_out_another_process_holding_the_database() {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};
    if !Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.db");
    let db = format!("sqlite://{}", path.display());
    let (base, _) = serve(vec![
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("First.")).unwrap(),
        render_stream(Format::OPENAI_CHAT, &ResponseScript::text("Second.")).unwrap(),
    ]);
    let run = |question: &str, conversation: Option<&str>| {
        let mut args = vec!["run", "--db", &db, "--base-url", &base, "--model", "m"];
        if let Some(c) = conversation {
            args.extend(["--conversation", c]);
        }
        args.push(question);
        llmchain(&args, dir.path())
    };
    let first = run("first question", None);
    assert!(first.status.success(), "{}", common::text(&first));
    let listed = llmchain(
        &["conversations", "--db", &db, "list", "--json"],
        dir.path(),
    );
    let conversation: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&listed.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let id = conversation["id"].as_str().unwrap().to_owned();
    // Another process takes the write lock and keeps it for 35 s.
    let mut holder = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN IMMEDIATE')\n\
             print('held', flush=True)\n\
             time.sleep(35)\n\
             c.execute('COMMIT')\n",
            &path.display().to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    let second = run("second question", Some(&id));
    let _ = holder.wait();
    assert!(second.status.success(), "{}", common::text(&second));
    assert!(String::from_utf8_lossy(&second.stdout).contains("Second."));
    let c = common::export(&db, &id, dir.path());
    let texts: Vec<String> = c.messages.iter().filter_map(|m| m.text()).collect();
    assert_eq!(
        texts,
        ["first question", "First.", "second question", "Second."],
        "the question is stored in its place"
    );
}

/// Round 5: when the store cannot take a question at all, the question is not lost: the
/// error says how to send it again.
#[test]
fn an_unsaved_question_says_how_to_send_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = llmchain(
        &[
            "run",
            "--db",
            "postgres://llmchain:pw-not-shown-123@127.0.0.1:1/nowhere",
            "--model",
            "m",
            "weather in Oslo now",
        ],
        dir.path(),
    );
    assert_ne!(out.status.code(), Some(0));
    let said = common::text(&out);
    assert!(said.contains("Your question was not saved"), "{said}");
    assert!(
        said.contains("send it again with `llmchain run --db postgres://"),
        "{said}"
    );
    assert!(said.contains("'weather in Oslo now'`"), "{said}");
    assert!(!said.contains("pw-not-shown-123"), "{said}");
}
