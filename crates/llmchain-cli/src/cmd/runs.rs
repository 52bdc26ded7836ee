//! `llmchain runs list | show ID | cancel ID | retry ID`: runs, queued and interactive.

use std::collections::HashMap;

use llmchain_store::{AnyStore, Run, RunFilter, RunKind, RunStatus, Store};
use serde_json::{Value, json};

use crate::error::{CliError, CliResult};
use crate::job::{JOB_KEY, OPTIONS_KEY};
use crate::stdout::out;
use crate::store_access::{format_ms, open_store};

/// Arguments of `llmchain runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    /// Database URL (default: $LLMCHAIN_DATABASE_URL, else the SQLite file in the user's
    /// data directory).
    #[arg(long, global = true, value_name = "URL")]
    pub db: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub action: RunsAction,
}

/// The `runs` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum RunsAction {
    /// List runs, newest first, with a count per status: queued ones (`run --enqueue`,
    /// run by workers) and interactive ones (`run`, `resume`), each with its prompt.
    List {
        /// Only runs of this status: pending, running, paused, done, failed, discarded
        /// or cancelled.
        #[arg(long)]
        status: Option<String>,
        /// Only queued runs (those workers run).
        #[arg(long, conflicts_with = "interactive")]
        queued: bool,
        /// Only interactive runs (those `run` and `resume` ran here).
        #[arg(long)]
        interactive: bool,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// One JSON object per line, as `show --json` prints one.
        #[arg(long)]
        json: bool,
    },
    /// Show a run: kind, profile, status, attempts, lease, schedule, last error.
    Show {
        /// The run id (or a unique prefix).
        id: String,
        /// The run as one JSON object (the shape `list --json` prints).
        #[arg(long)]
        json: bool,
    },
    /// Cancel an open run (a running one stops at its worker's next heartbeat; its
    /// pending reviews are cancelled).
    Cancel {
        /// The run id (or a unique prefix).
        id: String,
    },
    /// Queue a failed, discarded or cancelled run again, with fresh attempts.
    Retry {
        /// The run id (or a unique prefix).
        id: String,
    },
}

/// Runs `llmchain runs`.
pub(crate) fn run(args: RunsArgs) -> CliResult {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?;
    rt.block_on(runs(args))
}

fn parse_status(s: &str) -> Result<RunStatus, CliError> {
    RunStatus::parse(s).ok_or_else(|| {
        CliError::usage(format!(
            "unknown --status {s:?}: expected pending, running, paused, done, failed, discarded or cancelled"
        ))
    })
}

fn run_not_found(e: llmchain_store::StoreError) -> CliError {
    match e {
        llmchain_store::StoreError::RunNotFound(_)
        | llmchain_store::StoreError::RunState { .. }
        | llmchain_store::StoreError::RunAlreadyOpen { .. } => CliError::usage(e.to_string()),
        other => CliError::store(other),
    }
}

/// The run `given` names: its id, or a prefix of exactly one id (as git takes a commit).
async fn resolve(store: &AnyStore, given: &str) -> Result<Run, CliError> {
    if let Some(run) = store.get_run(given).await.map_err(CliError::store)? {
        return Ok(run);
    }
    let all = store
        .list_all_runs(&RunFilter {
            limit: 100_000,
            ..Default::default()
        })
        .await
        .map_err(CliError::store)?;
    crate::cmd::id_prefix::pick(given, all, |r| r.id.as_str(), "run")
}

/// The prompts of conversations (their titles: a prompt's first line), by id.
async fn prompts(store: &AnyStore) -> Result<HashMap<String, String>, CliError> {
    Ok(store
        .list_conversations(100_000)
        .await
        .map_err(CliError::store)?
        .into_iter()
        .filter_map(|s| Some((s.id, s.title?)))
        .collect())
}

async fn runs(args: RunsArgs) -> CliResult {
    // Reading never creates the database.
    let store = match &args.action {
        RunsAction::List { .. } | RunsAction::Show { .. } => {
            match crate::store_access::open_existing(args.db).await? {
                Some((store, _)) => store,
                None => {
                    if let RunsAction::Show { id, .. } = &args.action {
                        return Err(CliError::usage(format!("no run with id {id:?}")));
                    }
                    eprintln!("no runs");
                    return Ok(());
                }
            }
        }
        _ => open_store(args.db).await?.0,
    };
    let mut out = String::new();
    match args.action {
        RunsAction::List {
            status,
            queued,
            interactive,
            limit,
            json,
        } => {
            let status = status.as_deref().map(parse_status).transpose()?;
            let kind = match (queued, interactive) {
                (true, _) => Some(RunKind::Queued),
                (_, true) => Some(RunKind::Interactive),
                _ => None,
            };
            let list = store
                .list_all_runs(&RunFilter {
                    status,
                    kind,
                    limit,
                })
                .await
                .map_err(CliError::store)?;
            let prompts = prompts(&store).await?;
            for run in &list {
                let prompt = prompts.get(&run.conversation_id).map(String::as_str);
                if json {
                    out.push_str(&to_json(run, prompt).to_string());
                    out.push('\n');
                } else {
                    out.push_str(&line(run, prompt));
                }
            }
            if !json {
                let mut counts: HashMap<RunStatus, i64> = HashMap::new();
                for r in &list {
                    *counts.entry(r.state.status).or_default() += 1;
                }
                let mut counts: Vec<(RunStatus, i64)> = counts.into_iter().collect();
                counts.sort_by_key(|(s, _)| s.as_str());
                let summary: Vec<String> = counts
                    .iter()
                    .map(|(s, n)| format!("{n} {}", s.as_str()))
                    .collect();
                if summary.is_empty() {
                    eprintln!("no runs");
                } else {
                    eprintln!("{}", summary.join(", "));
                }
            }
        }
        RunsAction::Show { id, json } => {
            let run = resolve(&store, &id).await?;
            let prompts = prompts(&store).await?;
            let v = to_json(&run, prompts.get(&run.conversation_id).map(String::as_str));
            if json {
                out.push_str(&v.to_string());
                out.push('\n');
            } else {
                out.push_str(&show(&v));
            }
        }
        RunsAction::Cancel { id } => {
            let run = resolve(&store, &id).await?;
            let run = store.cancel_run(&run.id).await.map_err(run_not_found)?;
            out.push_str(&format!(
                "cancelled run {}{}\n",
                run.id,
                match &run.lease_owner {
                    Some(w) => format!(
                        " ({} stops at its next heartbeat)",
                        crate::shown::inline(w, 100)
                    ),
                    None => String::new(),
                }
            ));
        }
        RunsAction::Retry { id } => {
            let run = resolve(&store, &id).await?;
            let run = store.retry_run(&run.id).await.map_err(run_not_found)?;
            out.push_str(&format!("queued run {} again\n", run.id));
        }
    }
    out!("{out}");
    Ok(())
}

/// A run as JSON: the one shape `list --json` and `show --json` print. Times are
/// milliseconds since the Unix epoch; URLs in a recorded job carry no credentials.
fn to_json(run: &Run, prompt: Option<&str>) -> Value {
    let mut v = json!({
        "id": run.id,
        "kind": run.kind.as_str(),
        "profile": run.profile,
        "conversation_id": run.conversation_id,
        "prompt": prompt,
        "status": run.state.status.as_str(),
        "attempt": run.attempt,
        "max_attempts": run.max_attempts,
        "priority": run.priority,
        "run_at": run.run_at,
        "lease_owner": run.lease_owner,
        "lease_expires_at": run.lease_expires_at,
        "epoch": run.epoch,
        "last_error": run.last_error.as_deref().map(llmchain::redact::urls_in),
        "mode": run.state.mode,
        "failure_count": run.state.failure_count,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    });
    if let Some(job) = run.state.extra.get(JOB_KEY) {
        v["job"] = redact_job(job.clone());
    }
    if let Some(options) = run.state.extra.get(OPTIONS_KEY) {
        v["options"] = options.clone();
    }
    // What the run spent and the decisions that changed its course (the journal).
    if let Some(chain) = run.state.extra.get("chain") {
        if let Some(spent) = chain.get("spent").filter(|x| !x.is_null()) {
            v["spent"] = spent.clone();
        }
        if let Some(j) = chain.get("journal").filter(|x| !x.is_null()) {
            v["decisions"] = j.clone();
        }
    }
    v
}

/// A decision's `call_ids`, as `runs show` prints them.
fn call_ids(d: &Value) -> String {
    d.get("call_ids")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(|id| crate::shown::inline(id, 100))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// One journaled decision, as `runs show` prints it.
fn decision_line(d: &Value) -> String {
    let f = |k: &str| {
        d.get(k)
            .map(|x| match x {
                Value::String(s) => crate::shown::inline(s, 300),
                other => crate::shown::inline(&other.to_string(), 300),
            })
            .unwrap_or_else(|| "-".into())
    };
    let when = d
        .get("at_ms")
        .and_then(Value::as_i64)
        .map(format_ms)
        .unwrap_or_default();
    match d.get("kind").and_then(Value::as_str) {
        Some("policy") => {
            let (label, verb) = if d.get("shadow") == Some(&Value::Bool(true)) {
                ("shadow", "would")
            } else {
                ("policy", "says")
            };
            let reason = d
                .get("reason")
                .map(|_| format!(": {}", f("reason")))
                .unwrap_or_default();
            let target = if verb == "would" { "call" } else { "for call" };
            format!(
                "{when}  {label}: rule {} {verb} {} {target} {} ({}){reason}",
                f("rule"),
                f("effect"),
                f("call_id"),
                f("tool"),
            )
        }
        Some("reviewed") => format!(
            "{when}  reviewed: call {} ({}): {}",
            f("call_id"),
            f("tool"),
            d.get("decision")
                .and_then(|x| x.get("decision"))
                .and_then(Value::as_str)
                .unwrap_or("?")
        ),
        Some("budget") => {
            let n = |k: &str| {
                d.get(k)
                    .and_then(Value::as_f64)
                    .map_or_else(|| "-".into(), llmchain::chain::number)
            };
            format!(
                "{when}  budget: {} ran out ({} of {}); the run stopped",
                f("limit"),
                n("spent"),
                n("max")
            )
        }
        Some("cap") => {
            let n = |k: &str| {
                d.get(k)
                    .and_then(Value::as_f64)
                    .map_or_else(|| "-".into(), llmchain::chain::number)
            };
            let calls = call_ids(d);
            format!(
                "{when}  cap: {} over ({} of {}); calls {calls} not run",
                f("limit"),
                n("spent"),
                n("max")
            )
        }
        Some("compacted") => {
            let n = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(0);
            let cleared = call_ids(&serde_json::json!({"call_ids": d.get("cleared")}));
            format!(
                "{when}  compacted: a request of ~{} tokens (estimated) sent as ~{} for a window of {}; results cleared: {}; oldest messages left out: {}",
                n("estimated_before"),
                n("estimated_after"),
                n("window"),
                if cleared.is_empty() {
                    "none".into()
                } else {
                    cleared
                },
                n("dropped_messages")
            )
        }
        Some("interrupted") => {
            let calls = call_ids(d);
            format!(
                "{when}  interrupted: calls {calls} had no result; each was answered \"interrupted\", not run"
            )
        }
        Some("guard") => {
            let at = match (d.get("call_id"), d.get("message")) {
                (Some(_), _) => format!(" for call {}", f("call_id")),
                (None, Some(_)) => format!(" on message {}", f("message")),
                _ => String::new(),
            };
            let found = d
                .get("found")
                .and_then(Value::as_array)
                .map(|k| {
                    let k: Vec<&str> = k.iter().filter_map(Value::as_str).collect();
                    format!(" ({})", crate::shown::inline(&k.join(", "), 100))
                })
                .unwrap_or_default();
            let why = d
                .get("reason")
                .map(|_| format!(": {}", f("reason")))
                .unwrap_or_default();
            format!(
                "{when}  guard: {} at {}{at}: {}{found}{why}",
                f("guard"),
                f("point"),
                f("verdict")
            )
        }
        Some("hook") => {
            let verdict = d.get("verdict");
            let word = verdict
                .and_then(|v| v.get("verdict"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            let why = verdict
                .and_then(|v| v.get("reason").or_else(|| v.get("feedback")))
                .and_then(Value::as_str)
                .map(|r| format!(": {}", crate::shown::inline(r, 300)))
                .unwrap_or_default();
            let call = d
                .get("call_id")
                .map(|_| format!(" for call {}", f("call_id")))
                .unwrap_or_default();
            format!(
                "{when}  hook: {} at {}{call}: {word}{why}",
                f("hook"),
                f("point")
            )
        }
        _ => format!("{when}  {}", crate::shown::inline(&d.to_string(), 300)),
    }
}

/// A recorded job with every URL in it redacted (records written before URLs were
/// stored redacted, too).
fn redact_job(mut job: Value) -> Value {
    if let Some(u) = job.get("base_url").and_then(Value::as_str) {
        job["base_url"] = llmchain::redact::url(u).into();
    }
    if let Some(list) = job.get_mut("mcp_http").and_then(Value::as_array_mut) {
        for u in list {
            if let Some(s) = u.as_str() {
                *u = llmchain::redact::url(s).into();
            }
        }
    }
    job
}

fn line(run: &Run, prompt: Option<&str>) -> String {
    format!(
        "{}  {:<9}  {:<11}  {}  attempts used {}/{}  {}{}{}\n",
        run.id,
        run.state.status.as_str(),
        run.kind.as_str(),
        format_ms(run.created_at),
        run.attempt,
        run.max_attempts,
        run.profile
            .as_deref()
            .map(|p| format!("profile {}  ", crate::shown::inline(p, 40)))
            .unwrap_or_default(),
        crate::shown::inline(prompt.unwrap_or(&run.conversation_id), 60),
        run.last_error
            .as_deref()
            .map(|e| format!(
                "  last error: {}",
                crate::shown::inline(&llmchain::redact::urls_in(e), 200)
            ))
            .unwrap_or_default()
    )
}

fn show(v: &Value) -> String {
    let mut s = String::new();
    let field = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let text = |x: Value| match x {
        Value::String(s) => crate::shown::inline(&s, 2000),
        Value::Null => "-".into(),
        other => crate::shown::inline(&other.to_string(), 2000),
    };
    for (label, key) in [
        ("run", "id"),
        ("kind", "kind"),
        ("profile", "profile"),
        ("status", "status"),
        ("conversation", "conversation_id"),
        ("prompt", "prompt"),
        ("mode", "mode"),
        ("priority", "priority"),
        ("lease owner", "lease_owner"),
        ("epoch", "epoch"),
        ("failures", "failure_count"),
        ("last error", "last_error"),
    ] {
        s.push_str(&format!("{label}: {}\n", text(field(key))));
    }
    // A pause for review gives its attempt back (it is not a failure): a run a worker
    // just paused says 0 used, whatever attempt the worker's log named.
    let paused = field("status") == Value::String("paused".into());
    s.push_str(&format!(
        "attempts used: {} of {}{}\n",
        text(field("attempt")),
        text(field("max_attempts")),
        if paused {
            " (a pause for review does not use one)"
        } else {
            ""
        }
    ));
    for (label, key) in [
        ("created", "created_at"),
        ("updated", "updated_at"),
        ("runs at", "run_at"),
        ("lease until", "lease_expires_at"),
    ] {
        if let Some(ms) = field(key).as_i64() {
            s.push_str(&format!("{label}: {}\n", format_ms(ms)));
        }
    }
    for key in ["options", "job"] {
        if let Some(x) = v.get(key) {
            s.push_str(&format!("{key}: {}\n", text(x.clone())));
        }
    }
    if let Some(spent) = v.get("spent") {
        let n = |k: &str| spent.get(k).and_then(Value::as_u64).unwrap_or(0);
        s.push_str(&format!(
            "spent: {} model call(s), {} tool call(s), {} input + {} output tokens{}\n",
            n("model_calls"),
            n("tool_calls"),
            n("input_tokens"),
            n("output_tokens"),
            match n("reserved_tokens") {
                0 => String::new(),
                r => format!(", {r} reserved"),
            }
        ));
        if let Some(micro) = spent.get("cost_micro_usd").and_then(Value::as_u64) {
            s.push_str(&format!(
                "cost: ${:.6}{}\n",
                micro as f64 / 1e6,
                match n("reserved_micro_usd") {
                    0 => String::new(),
                    r => format!(
                        " (${:.6} of it reserved by an unsettled call)",
                        r as f64 / 1e6
                    ),
                }
            ));
        }
    }
    if let Some(Value::Array(entries)) = v.get("decisions") {
        s.push_str("decisions:\n");
        for d in entries {
            s.push_str(&format!("  {}\n", decision_line(d)));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmchain::chain::Decision;

    /// Each decision the chain journals reads as one line (a limit of the chain's own
    /// among them), whatever its strings hold.
    #[test]
    fn every_decision_reads_as_one_line() {
        let line = |d: Decision| {
            let v = serde_json::to_value(llmchain::chain::Entry {
                at_ms: 0,
                decision: d,
            })
            .unwrap();
            decision_line(&v)
        };
        let cap = line(Decision::Cap {
            limit: "calls_per_turn".into(),
            max: 32.0,
            spent: 40.0,
            call_ids: vec!["a".into(), "b\u{1b}[2J".into()],
        });
        assert!(
            cap.ends_with("cap: calls_per_turn over (40 of 32); calls a, b\\u{1b}[2J not run"),
            "{cap}"
        );
        let stop = line(Decision::Budget {
            limit: "max_runs".into(),
            max: 25.0,
            spent: 25.0,
        });
        assert!(
            stop.ends_with("budget: max_runs ran out (25 of 25); the run stopped"),
            "{stop}"
        );
    }
}
