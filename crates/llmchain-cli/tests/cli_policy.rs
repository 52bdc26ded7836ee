//! Policies and budgets from the command line (issue 48): `[[policy]]` rules in a
//! profile, `policy check | explain`, a bad rule refused with its id and line, a deny
//! rule whose reason reaches the model and whose id is on record, shadow mode, and a
//! budget kept across a killed worker.

mod common;

use common::{llmchain, serve, text, write_config};
use llmchain::provider::Format;
use llmchain::provider::render::{ResponseScript, render_stream};

fn bodies(replies: &[ResponseScript]) -> Vec<Vec<u8>> {
    replies
        .iter()
        .map(|r| render_stream(Format::OPENAI_CHAT, r).unwrap())
        .collect()
}

fn multiply(id: &str) -> ResponseScript {
    ResponseScript::tool_call(id, "calculator", r#"{"expression": "6*7"}"#)
}

const RULES: &str = r#"
[[policy]]
id = "no-multiply"
tool = "calculator"
args = { "/expression" = { regex = "\\*" } }
effect = "deny"
reason = "Multiplication goes through finance."
examples = { match = [{ expression = "2*3" }], not_match = [{ expression = "2+3" }] }

[[policy]]
id = "clock-ok"
tool = "clock"
effect = "allow"
"#;

#[test]
fn policy_check_explains_and_refuses_a_bad_rule_by_id_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &format!("approve = \"always\"\n{RULES}"));
    let out = llmchain(&["policy", "check"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("2 rule(s) (no-multiply, clock-ok)"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("2 example(s) passed"), "{}", text(&out));

    let out = llmchain(
        &[
            "policy",
            "explain",
            "calculator",
            r#"{"expression": "6*7"}"#,
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("decision: deny by rule no-multiply: Multiplication goes through finance."),
        "{said}"
    );
    assert!(
        said.contains("rule clock-ok (allow): does not match"),
        "{said}"
    );
    let out = llmchain(
        &["policy", "explain", "--json", "mcp:billing/refund", "{}"],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decision"], serde_json::Value::Null);
    assert!(
        v["otherwise"]
            .as_str()
            .unwrap()
            .contains("allow (approve = always)"),
        "{v}"
    );

    // A rule whose example fails: refused, naming the rule and its line, and `run`
    // does not start.
    let bad = RULES.replace(
        "not_match = [{ expression = \"2+3\" }]",
        "not_match = [{ expression = \"2*3*4\" }]",
    );
    write_config(dir.path(), &format!("approve = \"always\"\n{bad}"));
    let out = llmchain(&["policy", "check"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("\"no-multiply\""), "{said}");
    assert!(said.contains("line 4"), "{said}");
    assert!(said.contains("not_match[0]"), "{said}");
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
    assert!(text(&out).contains("no-multiply"), "{}", text(&out));

    // A rule that does not compile, in a named profile.
    write_config(
        dir.path(),
        "[profiles.ops]\n[[profiles.ops.policy]]\nid = \"broken\"\nargs = { \"/x\" = { regex = \"(\" } }\neffect = \"deny\"\n",
    );
    let out = llmchain(&["policy", "check"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("[profiles.ops] line 3"), "{said}");
    assert!(
        said.contains("\"broken\"") && said.contains("regex"),
        "{said}"
    );
    for worker_or_serve in [&["worker", "--drain"][..], &["serve"][..]] {
        let out = llmchain(worker_or_serve, dir.path());
        assert_eq!(
            out.status.code(),
            Some(2),
            "{worker_or_serve:?}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_deny_rule_reaches_the_model_with_its_reason_and_its_id_is_on_record() {
    common::on_both_databases("a_deny_rule_reaches_the_model", |dir, db| {
        let (base, seen) = serve(bodies(&[
            multiply("c1"),
            ResponseScript::text("I may not."),
        ]));
        write_config(
            dir,
            &format!("base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n{RULES}"),
        );
        let out = llmchain(&["run", "--db", db, "--json", "what is 6*7?"], dir);
        assert!(out.status.success(), "{}", text(&out));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        let second = seen[1].1.to_string();
        assert!(
            second.contains("Multiplication goes through finance."),
            "{second}"
        );
        assert!(second.contains("no-multiply"), "{second}");
        // On record: the run's decisions name the rule.
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let run = v["run"].as_str().unwrap_or_default().to_owned();
        let shown = llmchain(&["runs", "--db", db, "show", &run], dir);
        assert!(shown.status.success(), "{}", text(&shown));
        let said = text(&shown);
        assert!(
            said.contains("policy: rule no-multiply says deny for call c1 (calculator)"),
            "{said}"
        );
        assert!(
            said.contains("spent: 2 model call(s), 0 tool call(s)"),
            "{said}"
        );
        // And in the conversation's export, with the run it was made in.
        let conversation = v["conversation"].as_str().unwrap_or_default().to_owned();
        let export = llmchain(&["conversations", "--db", db, "export", &conversation], dir);
        assert!(export.status.success(), "{}", text(&export));
        let e: serde_json::Value = serde_json::from_slice(&export.stdout).unwrap();
        let runs = e["runs"]
            .as_array()
            .expect("the export holds the runs' decisions");
        assert_eq!(runs[0]["run"], run.as_str());
        let ruling = runs[0]["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["kind"] == "policy")
            .expect("the policy's ruling");
        assert_eq!(ruling["rule"], "no-multiply");
        assert_eq!(ruling["effect"], "deny");
        assert_eq!(ruling["call_id"], "c1");
        assert_eq!(ruling["reason"], "Multiplication goes through finance.");
    });
}

#[test]
fn shadow_mode_journals_what_would_have_happened_and_runs_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("q.db").display());
    let (base, seen) = serve(bodies(&[multiply("c1"), ResponseScript::text("42")]));
    write_config(
        dir.path(),
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\npolicy_mode = \"shadow\"\n{RULES}"
        ),
    );
    let out = llmchain(&["run", "--db", &db, "--json", "what is 6*7?"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let second = seen.lock().unwrap()[1].1.to_string();
    assert!(second.contains("42"), "the call ran: {second}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown = llmchain(
        &["runs", "--db", &db, "show", v["run"].as_str().unwrap()],
        dir.path(),
    );
    let said = text(&shown);
    assert!(
        said.contains("shadow: rule no-multiply would deny call c1"),
        "{said}"
    );
}

#[test]
fn a_budget_stops_a_model_that_keeps_calling_and_every_call_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("q.db").display());
    let calls: Vec<ResponseScript> = (0..6).map(|i| multiply(&format!("c{i}"))).collect();
    let (base, seen) = serve(bodies(&calls));
    write_config(
        dir.path(),
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n[budget]\nmodel_calls = 3\n"
        ),
    );
    let out = llmchain(
        &["run", "--db", &db, "--json", "keep multiplying"],
        dir.path(),
    );
    assert_eq!(seen.lock().unwrap().len(), 3, "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("model_calls"), "{said}");
    // A stricter flag wins over the profile.
    let (base, seen) = serve(bodies(&calls));
    write_config(
        dir.path(),
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n[budget]\nmodel_calls = 3\n"
        ),
    );
    let out = llmchain(
        &[
            "run",
            "--db",
            &db,
            "--budget",
            "tool_calls=1",
            "keep multiplying",
        ],
        dir.path(),
    );
    assert_eq!(seen.lock().unwrap().len(), 2, "{}", text(&out));
    assert!(text(&out).contains("tool_calls"), "{}", text(&out));
    let out = llmchain(
        &["run", "--db", &db, "--budget", "tokenz=1", "x"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// A queued run with `model_calls = 3`: its worker is killed (SIGKILL) while the run's
/// second model call streams. The worker that takes the run over after the lease runs
/// out makes exactly one more model call (the killed call stays charged: its
/// reservation was written before it was made), and the run stops naming the budget.
#[test]
fn a_model_call_budget_holds_across_a_killed_worker() {
    common::on_both_databases(
        "a_model_call_budget_holds_across_a_killed_worker",
        |dir, db| {
            let (first, first_seen) = common::serve_replies(vec![
                common::Reply::Body(render_stream(Format::OPENAI_CHAT, &multiply("c0")).unwrap()),
                common::Reply::Stall(b": the model is thinking\n\n".to_vec()),
            ]);
            let config = |base: &str| {
                format!(
                    "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n[budget]\nmodel_calls = 3\n"
                )
            };
            write_config(dir, &config(&first));
            let out = llmchain(&["run", "--enqueue", "--db", db, "keep multiplying"], dir);
            assert!(out.status.success(), "{}", text(&out));
            let run = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            let mut worker = common::llmchain_command(
                &["worker", "--db", db, "--lease-secs", "2", "--poll-ms", "20"],
                dir,
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
            let started = std::time::Instant::now();
            while first_seen.lock().unwrap().len() < 2 {
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(60),
                    "the worker never made its second call"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            worker.kill().unwrap(); // SIGKILL, mid-stream.
            worker.wait().unwrap();

            let (second, second_seen) = serve(bodies(&[
                multiply("c1"),
                multiply("c2"),
                ResponseScript::text("done"),
            ]));
            write_config(dir, &config(&second));
            // The lease (2 s) runs out; another worker takes the run over.
            std::thread::sleep(std::time::Duration::from_millis(2500));
            let out = llmchain(
                &[
                    "worker",
                    "--db",
                    db,
                    "--drain",
                    "--lease-secs",
                    "2",
                    "--poll-ms",
                    "20",
                ],
                dir,
            );
            assert!(out.status.success(), "{}", text(&out));
            assert_eq!(
                second_seen.lock().unwrap().len(),
                1,
                "exactly one model call was left"
            );
            let shown = llmchain(&["runs", "--db", db, "show", &run], dir);
            let said = text(&shown);
            assert!(said.contains("status: done"), "{said}");
            assert!(said.contains("spent: 3 model call(s)"), "{said}");
            assert!(
                said.contains("budget: model_calls ran out (3 of 3)"),
                "{said}"
            );
        },
    );
}

#[test]
fn an_ask_rule_names_itself_in_the_review_inbox() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("q.db").display());
    let (base, _seen) = serve(bodies(&[multiply("c1"), ResponseScript::text("42")]));
    write_config(
        dir.path(),
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n\n[[policy]]\nid = \"ask-multiply\"\ntool = \"calculator\"\neffect = \"ask\"\nreason = \"A person checks products.\"\n"
        ),
    );
    // No terminal: the call waits in the review inbox.
    let out = llmchain(&["run", "--db", &db, "what is 6*7?"], dir.path());
    let said = text(&out);
    assert!(said.contains("review"), "{said}");
    let list = llmchain(&["reviews", "--db", &db, "list"], dir.path());
    assert!(list.status.success(), "{}", text(&list));
    let listed = text(&list);
    assert!(
        listed.contains("asked by policy rule ask-multiply"),
        "{listed}"
    );
    let json = llmchain(&["reviews", "--db", &db, "list", "--json"], dir.path());
    let v: serde_json::Value =
        serde_json::from_slice(json.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(v["policy_rule"], "ask-multiply");
    assert_eq!(v["policy_reason"], "A person checks products.");
    let id = v["id"].as_str().unwrap();
    let show = text(&llmchain(&["reviews", "--db", &db, "show", id], dir.path()));
    assert!(
        show.contains("asked by policy rule ask-multiply: A person checks products."),
        "{show}"
    );
}

/// A policy made stricter between a pause and a resume applies: a call a rule sent to
/// review waits in the inbox, a person approves it, then the operator adds a deny rule
/// for it; the process that resumes the run (another one) does not run the approved
/// call: the new rule's reason reaches the model and its id is on record. On both
/// databases, resumed by `conversations resume` and by `run --conversation`, with and
/// without a new question.
#[test]
fn a_policy_made_stricter_after_an_approval_applies_on_resume() {
    common::on_both_databases("a_policy_made_stricter_on_resume", |dir, db| {
        for resume_with in ["resume", "run", "run with a prompt"] {
            let (base, seen) = serve(bodies(&[
                multiply("c1"),
                ResponseScript::text("I may not."),
            ]));
            let ask =
                "[[policy]]\nid = \"ask-multiply\"\ntool = \"calculator\"\neffect = \"ask\"\n";
            let head = format!("base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n");
            write_config(dir, &format!("{head}\n{ask}"));
            // No terminal: the call waits in the review inbox.
            let out = llmchain(&["run", "--db", db, "--json", "what is 6*7?"], dir);
            assert!(text(&out).contains("review"), "{}", text(&out));
            let list = llmchain(&["reviews", "--db", db, "list", "--json"], dir);
            let pending: Vec<serde_json::Value> = String::from_utf8_lossy(&list.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .filter(|r: &serde_json::Value| r["status"] == "pending")
                .collect();
            assert_eq!(pending.len(), 1, "{}", text(&list));
            let conversation = pending[0]["conversation_id"].as_str().unwrap().to_owned();
            let review = pending[0]["id"].as_str().unwrap().to_owned();
            let approved = llmchain(&["reviews", "--db", db, "approve", &review], dir);
            assert!(approved.status.success(), "{}", text(&approved));
            // The operator tightens the profile before anyone resumes the run.
            write_config(dir, &format!("{head}\n{ask}\n{RULES}"));
            let out = match resume_with {
                "resume" => llmchain(&["conversations", "--db", db, "resume", &conversation], dir),
                "run" => llmchain(&["run", "--db", db, "--conversation", &conversation], dir),
                // The call is settled before the new question starts a new run of the
                // chain: its ruling stays on record all the same.
                _ => llmchain(
                    &[
                        "run",
                        "--db",
                        db,
                        "--conversation",
                        &conversation,
                        "and 2+2?",
                    ],
                    dir,
                ),
            };
            assert!(out.status.success(), "{resume_with}: {}", text(&out));
            let said = text(&out);
            if resume_with == "resume" {
                assert!(said.contains("denied c1"), "{said}");
            }
            // The model (asked by `run`; by `resume`, which asks it next with the
            // recorded job) hears the new rule's reason; the tool never ran.
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 2, "{resume_with}: {said}");
            let second = seen[1].1.to_string();
            assert!(
                second.contains("Multiplication goes through finance."),
                "{second}"
            );
            assert!(!second.contains("\"42\""), "the calculator ran: {second}");
            // On record, in a run of the conversation: the rule that denied the
            // approved call.
            let export = llmchain(&["conversations", "--db", db, "export", &conversation], dir);
            let e: serde_json::Value = serde_json::from_slice(&export.stdout).unwrap();
            let decisions: Vec<&serde_json::Value> = e["runs"]
                .as_array()
                .unwrap_or_else(|| panic!("{resume_with}: no runs in {e}"))
                .iter()
                .flat_map(|r| r["decisions"].as_array().into_iter().flatten())
                .collect();
            assert!(
                decisions.iter().any(|d| d["kind"] == "policy"
                    && d["rule"] == "no-multiply"
                    && d["effect"] == "deny"
                    && d["call_id"] == "c1"),
                "{resume_with}: {}",
                e["runs"]
            );
        }
    });
}

#[test]
fn a_cost_budget_needs_a_price_and_takes_one_from_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let (base, seen) = serve(bodies(&[ResponseScript::text("hi").with_usage(100, 10)]));
    write_config(
        dir.path(),
        &format!("base_url = \"{base}\"\nmodel = \"m\"\n"),
    );
    let out = llmchain(&["run", "--budget", "cost_usd=0.01", "hello"], dir.path());
    assert!(!out.status.success());
    let said = text(&out);
    assert!(said.contains("price of model \"m\""), "{said}");
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent");
    write_config(
        dir.path(),
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\n\n[budget]\ncost_usd = 0.01\n\n[budget.prices.m]\ninput = 1.0\noutput = 1.0\n"
        ),
    );
    let out = llmchain(&["run", "hello"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// The served page shows the rule that asked about a call: a `data-policy` chunk in the
/// turn's stream, and the same part in the chat's messages after a reload.
#[test]
fn a_served_chat_names_the_rule_that_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _seen) = serve(bodies(&[multiply("c1"), ResponseScript::text("42")]));
    write_config(
        dir.path(),
        &format!(
            "base_url = \"{base}\"\nmodel = \"m\"\napprove = \"always\"\n\n[[policy]]\nid = \"ask-multiply\"\ntool = \"calculator\"\neffect = \"ask\"\nreason = \"A person checks products.\"\n"
        ),
    );
    let db = format!("sqlite://{}", dir.path().join("chats.db").display());
    let served = common::Served::start(dir.path(), &["--db", &db]);
    let asked = common::post_chat(&served.base, &common::user_message("chat", "u1", "6*7?"));
    let policy = asked
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .find(|c| c["type"] == "data-policy")
        .unwrap_or_else(|| panic!("no data-policy chunk: {asked}\n{}", served.log()));
    assert_eq!(policy["id"], "policy-c1");
    assert_eq!(
        policy["data"],
        serde_json::json!({"toolCallId": "c1", "rule": "ask-multiply", "effect": "ask",
            "reason": "A person checks products."})
    );
    assert!(asked.contains("tool-approval-request"), "{asked}");
    // After a reload: the chat's messages hold the same part beside the call.
    let page = common::get_path(&served.base, "/api/chats/chat");
    let (_, body) = page.split_once("\r\n\r\n").unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {page}"));
    let parts = v["messages"][1]["parts"].as_array().unwrap();
    let at = parts
        .iter()
        .position(|p| p["type"] == "tool-calculator")
        .unwrap();
    assert_eq!(parts[at + 1]["type"], "data-policy", "{parts:?}");
    assert_eq!(parts[at + 1]["data"]["rule"], "ask-multiply");
}
