//! `llmchain conversations list | show ID | resume ID | export ID`: stored conversations.
//!
//! The database is `--db URL`, else `LLMCHAIN_DATABASE_URL`, else the default SQLite
//! file (`$XDG_DATA_HOME/llmchain/llmchain.db` or `~/.local/share/llmchain/llmchain.db`).
//! URLs: `sqlite://PATH`, `sqlite::memory:`, `postgres://USER:PASS@HOST/DB`.

use std::path::PathBuf;
use std::sync::Arc;

use llmchain::message::{ContentType, Message};
use llmchain_store::{AnyStore, ConversationSummary, Store, StoredConversation};

use crate::cmd::mcp::ServerArgs;
use crate::error::{CliError, CliResult};
use crate::review::ApprovalPolicy;
use crate::store_access::{format_ms, open_existing, open_store, resolve_id};

/// Arguments of `llmchain conversations`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConversationsArgs {
    /// Database URL: sqlite://PATH or postgres://… (default: $LLMCHAIN_DATABASE_URL, else
    /// the SQLite file in the user's data directory).
    #[arg(long, global = true, value_name = "URL")]
    pub db: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `conversations` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Action {
    /// List conversations, most recently updated first.
    List {
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Conversations whose title or messages (text, tool calls, tool results) contain
    /// TEXT, ignoring case, most recently updated first, each with the line it is in.
    Search {
        /// What to look for.
        text: String,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete a conversation with its messages, tool statuses, runs and reviews (refused
    /// while a run of it is open: cancel it first with `llmchain runs cancel`).
    Delete {
        /// The conversation id (or a unique prefix of it).
        id: String,
        /// Do not ask first (asked only on a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Show a conversation's messages, tool calls (with their execution status) and runs.
    Show {
        /// The conversation id.
        id: String,
    },
    /// Resume a conversation: run its outstanding tool calls with the tools its run's
    /// profile has (the built-in tools and the profile's MCP servers, as `run
    /// --conversation` would), store the results and say what it needs next.
    Resume {
        /// The conversation id.
        id: String,
        /// The profile to run under instead of the run's own.
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// MCP servers whose tools the outstanding calls may use instead of the
        /// profile's (named as in `run`: a tool whose name collides with a built-in one
        /// gets the server's name as prefix).
        #[command(flatten)]
        servers: ServerArgs,
        /// Review of the outstanding calls, as for `run` (the profile's unless given):
        /// auto (read-only tools run, others are asked about on a terminal and denied
        /// otherwise), ask, always, never.
        #[arg(long, value_enum)]
        approve: Option<ApprovalPolicy>,
        /// The server to ask the model at afterwards, when the conversation waits for
        /// it (as `run --base-url`; a recorded address is never used without it).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
    },
    /// Write a conversation as a storage-format conversation file (JSON). Answers that
    /// were regenerated are kept beside it, under `superseded` (with every call that
    /// ran), and the runs' decisions (policy rulings with their rule ids, budget stops,
    /// hooks' verdicts) under `runs`; readers of the format ignore both keys.
    Export {
        /// The conversation id.
        id: String,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Keep what a guard held back as it arrived (an answer's `guarded.original`, a
        /// result's `processed_content.original`); without it the export carries only
        /// the guarded versions.
        #[arg(long)]
        raw: bool,
    },
}

/// Runs the command on a current-thread tokio runtime.
pub(crate) fn run(args: ConversationsArgs) -> CliResult {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?;
    let db = args.db.clone();
    let next = runtime.block_on(run_async(args))?;
    drop(runtime);
    // A resumed conversation that now waits for the model gets its answer, as it ran.
    match next {
        Some(mut args) => {
            args.db = db;
            crate::cmd::run::run(args)
        }
        None => Ok(()),
    }
}

/// What `resume` leaves to do: ask the model about this conversation, as `run` with
/// these arguments.
type AskTheModel = Option<crate::cmd::run::RunArgs>;

/// How `list` marks a conversation whose last run did not finish.
fn run_mark(status: llmchain_store::RunStatus) -> Option<&'static str> {
    use llmchain_store::RunStatus::*;
    match status {
        Failed | Discarded => Some("failed"),
        Cancelled => Some("interrupted"),
        Paused => Some("paused"),
        Running => Some("running"),
        Pending => Some("queued"),
        _ => None,
    }
}

/// "message" or "messages".
fn messages_word(n: i64) -> &'static str {
    if n == 1 { "message" } else { "messages" }
}

async fn run_async(args: ConversationsArgs) -> Result<AskTheModel, CliError> {
    // Reading never creates the database.
    let store = match &args.action {
        Action::Resume { .. } => open_store(args.db).await?.0,
        Action::List { .. } | Action::Search { .. } => match open_existing(args.db).await? {
            Some((store, _)) => store,
            None => {
                eprintln!("no conversations");
                return Ok(None);
            }
        },
        Action::Show { id } | Action::Export { id, .. } | Action::Delete { id, .. } => {
            match open_existing(args.db.clone()).await? {
                Some((store, _)) => store,
                None => {
                    return Err(CliError::usage(format!(
                        "no conversation with id {id:?} (nothing is stored yet)"
                    )));
                }
            }
        }
    };
    let mut out = String::new();
    // Everything but an export (data, written as it is stored) shows stored text from
    // models and tools: their control characters are shown escaped.
    let data = matches!(args.action, Action::Export { .. });
    let mut ask: AskTheModel = None;
    match args.action {
        Action::Search { text, limit, json } => {
            if text.trim().is_empty() {
                return Err(CliError::usage("give something to search for"));
            }
            // The store matches stored JSON (its keys too): each candidate is read and
            // kept only when its title or a message's text holds the words.
            let candidates = store
                .search_conversations(&text, (limit.max(1) * 4).min(400))
                .await
                .map_err(CliError::store)?;
            // Attached text files are stored encoded, where the store's match cannot
            // see them: the latest conversations are read for them too.
            let mut seen = std::collections::HashSet::new();
            let recent = store
                .list_conversations(ATTACHMENT_SCAN)
                .await
                .map_err(CliError::store)?;
            let mut found = 0;
            for s in candidates.into_iter().chain(recent) {
                if found >= limit {
                    break;
                }
                if !seen.insert(s.id.clone()) {
                    continue;
                }
                let Some(hit) = search_hit(&store, &s, &text).await? else {
                    continue;
                };
                found += 1;
                summary_line(&store, &mut out, &s, json, Some(&hit)).await?;
            }
            if found == 0 && !json {
                eprintln!("no conversation holds {}", crate::shown::inline(&text, 80));
            }
        }
        Action::Delete { id, yes } => {
            let id = resolve_id(&store, &id).await?;
            let runs = store.list_runs(&id).await.map_err(CliError::store)?;
            if let Some(open) = runs.iter().find(|r| r.state.status.is_open()) {
                return Err(CliError::usage(format!(
                    "conversation {id} has an open run ({}, {}): cancel it first with \
                     `llmchain runs cancel {}`",
                    open.id,
                    open.state.status.as_str(),
                    open.id
                )));
            }
            let stored = store.get_conversation(&id).await.map_err(CliError::store)?;
            let count = stored.as_ref().map_or(0, |c| c.conversation.messages.len());
            let title = stored.and_then(|c| c.summary.title);
            let shown_title = title
                .as_deref()
                .map(|t| format!(" ({})", crate::shown::inline(t, 80)))
                .unwrap_or_default();
            // On a terminal, a deletion is confirmed first: it cannot be undone.
            let asking = !yes
                && std::io::IsTerminal::is_terminal(&std::io::stdin())
                && std::io::IsTerminal::is_terminal(&std::io::stderr());
            if asking
                && !confirm(&format!(
                    "delete conversation {id}{shown_title}, {count} message(s)?"
                ))?
            {
                eprintln!("not deleted");
                return Ok(None);
            }
            if !store
                .delete_conversation(&id)
                .await
                .map_err(CliError::store)?
            {
                return Err(CliError::usage(format!("no conversation with id {id:?}")));
            }
            out.push_str(&format!(
                "deleted conversation {id}{}\n",
                title
                    .map(|t| format!(" ({})", crate::shown::inline(&t, 80)))
                    .unwrap_or_default()
            ));
        }
        Action::List { limit, json } => {
            let list = store
                .list_conversations(limit)
                .await
                .map_err(CliError::store)?;
            for s in &list {
                summary_line(&store, &mut out, s, json, None).await?;
            }
            if list.is_empty() && !json {
                eprintln!("no conversations");
            }
        }
        Action::Show { id } => {
            let id = resolve_id(&store, &id).await?;
            let stored = load(&store, &id).await?;
            show(&mut out, &stored);
            let runs = store.list_runs(&id).await.map_err(CliError::store)?;
            for run in runs {
                out.push_str(&format!(
                    "run {}: {} (mode {:?}, failures {}, pending interrupts {})\n",
                    run.id,
                    run.state.status.as_str(),
                    run.state.mode,
                    run.state.failure_count,
                    run.state.pending_interrupts.len()
                ));
            }
        }
        Action::Resume {
            id,
            profile,
            servers,
            approve,
            base_url,
        } => {
            let id = resolve_id(&store, &id).await?;
            let run_args = crate::cmd::run::RunArgs {
                conversation: Some(id.clone()),
                profile,
                servers,
                approve,
                base_url,
                ..Default::default()
            };
            if resume(store, &id, &run_args, &mut out).await? {
                ask = Some(run_args);
            }
        }
        Action::Export { id, output, raw } => {
            let id = resolve_id(&store, &id).await?;
            let stored = load(&store, &id).await?;
            let mut value = serde_json::to_value(&stored.conversation).map_err(runtime)?;
            if !raw {
                without_guarded_originals(&mut value);
            }
            // What ran stays on record: the answers a regeneration replaced.
            let superseded = store
                .superseded_messages(&id)
                .await
                .map_err(CliError::store)?;
            if let (false, Some(object)) = (superseded.is_empty(), value.as_object_mut()) {
                let kept: Vec<serde_json::Value> = superseded
                    .iter()
                    .map(|s| {
                        serde_json::json!({
                            "position": s.position,
                            "superseded_at": s.superseded_at,
                            "message": s.message,
                        })
                    })
                    .collect();
                object.insert("superseded".into(), serde_json::Value::Array(kept));
            }
            // And the decisions that changed its course, run by run (the journal: policy
            // rulings with their rule ids, budget stops, hooks' verdicts, reviews).
            let runs = store.list_runs(&id).await.map_err(CliError::store)?;
            let decided: Vec<serde_json::Value> = runs
                .iter()
                .filter_map(|run| {
                    let journal = run.state.extra.get("chain")?.get("journal")?;
                    let entries = journal.as_array().filter(|j| !j.is_empty())?;
                    Some(serde_json::json!({
                        "run": run.id,
                        "status": run.state.status.as_str(),
                        "mode": run.state.mode,
                        "decisions": entries,
                    }))
                })
                .collect();
            if let (false, Some(object)) = (decided.is_empty(), value.as_object_mut()) {
                object.insert("runs".into(), serde_json::Value::Array(decided));
            }
            let mut json = serde_json::to_string_pretty(&value).map_err(runtime)?;
            json.push('\n');
            match output {
                Some(path) => std::fs::write(&path, json)
                    .map_err(|e| CliError::io(format!("cannot write {}", path.display()), e))?,
                None => out = json,
            }
        }
    }
    if data {
        print(&out)?;
    } else {
        print(&crate::shown::block(&out))?;
    }
    Ok(ask)
}

/// A conversation's JSON without what guards held back: a message's
/// `metadata.guarded.original`, a call's `metadata.guarded.original_arguments`, and what
/// ran of a result a guard rewrote (the tool message's `metadata.rewritten`).
fn without_guarded_originals(conversation: &mut serde_json::Value) {
    let Some(messages) = conversation
        .get_mut("messages")
        .and_then(serde_json::Value::as_array_mut)
    else {
        return;
    };
    for m in messages {
        if let Some(g) = m
            .pointer_mut("/metadata/guarded")
            .and_then(serde_json::Value::as_object_mut)
        {
            g.remove("original");
        }
        if let Some(calls) = m
            .get_mut("tool_calls")
            .and_then(serde_json::Value::as_array_mut)
        {
            for c in calls {
                if let Some(g) = c
                    .pointer_mut("/metadata/guarded")
                    .and_then(serde_json::Value::as_object_mut)
                {
                    g.remove("original_arguments");
                }
            }
        }
        // What ran, for a result a guard rewrote (kept in the tool message's metadata).
        if let Some(rewritten) = m
            .pointer_mut("/metadata/rewritten")
            .and_then(serde_json::Value::as_object_mut)
        {
            for record in rewritten.values_mut() {
                let by_guard = record
                    .get("rewritten_by")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|b| b.contains("guard:"));
                if let (true, Some(r)) = (by_guard, record.as_object_mut()) {
                    r.remove("original");
                    r.remove("processed_content");
                }
            }
        }
    }
}

/// Resumes a stored conversation: outstanding tool calls run with the built-in tools and
/// the MCP servers' tools, after review (calls found `executing` get an "outcome unknown"
/// result unless their tool is idempotent), the tool message is stored, and what the
/// conversation needs next is printed. Model calls need a provider: continue with
/// `llmchain run`.
async fn resume(
    store: AnyStore,
    id: &str,
    args: &crate::cmd::run::RunArgs,
    out: &mut String,
) -> Result<bool, CliError> {
    use llmchain::chain::Mode;
    use llmchain_store::{Drive, RunEnd};

    let store = Arc::new(store);
    if store
        .get_conversation(id)
        .await
        .map_err(CliError::store)?
        .is_none()
    {
        return Err(CliError::usage(format!("no conversation with id {id:?}")));
    }
    // The chain is built as the run's profile builds it (the one builder a run, the
    // worker and serve use): its MCP servers, tools filter, trust and approval policy,
    // unless flags say otherwise. Before the run is held: a server that cannot start
    // takes nothing.
    let job = crate::cmd::run::job_for(args, &store, id).await?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::io("cannot read the current directory", e))?;
    let parts = job.connect_tools_only(cwd).await?;
    // Hold the conversation's run before reading it: a second `resume` (or `run`, or a
    // worker) is refused rather than running the same calls.
    let mode = Mode::Custom(Arc::new(ToolsOnly));
    let held =
        crate::interactive_run::claim(store.clone(), id, "resume", Default::default()).await?;
    let run_id = held.run().id.clone();
    // Only tools run here; the model is never called (this mode makes no model call).
    let crate::interactive_run::Started {
        held,
        built: crate::job::Built {
            chain,
            mcp_tools: _connected,
        },
        before,
        asking,
    } = crate::interactive_run::start(held, parts, id).await?;
    // Calls paused for review: the decisions stored in the review inbox answer them
    // (asked here, one at a time, for those still undecided when there is a terminal).
    let drive = Drive::new().undecided(crate::interactive_run::AskAtTerminal {
        review: asking,
        store: store.clone(),
    });
    let ended = held.drive(chain, mode, drive).await;
    if let Some(e) = crate::interactive_run::ended_error(&ended, id, Some("resume failed")) {
        return Err(e);
    }
    let chain = match (ended.end, ended.chain) {
        (RunEnd::Done, Some(chain)) => chain,
        (RunEnd::Paused { reviews, .. }, _) => {
            let ids: Vec<&str> = reviews.iter().map(|r| r.id.as_str()).collect();
            out.push_str(&format!(
                "run {run_id} paused: {} call(s) wait for review ({}); decide with `llmchain reviews approve|deny|edit ID`, then resume again\n",
                ids.len(),
                ids.join(", ")
            ));
            return Ok(false);
        }
        (other, _) => return Err(CliError::runtime(format!("resume ended as {other:?}"))),
    };
    for m in &chain.messages()[before..] {
        for r in &m.tool_results {
            let status = chain
                .messages()
                .iter()
                .flat_map(|m| m.tool_calls.iter())
                .find(|c| c.call_id.as_deref() == Some(r.tool_call_id.as_str()))
                .and_then(|c| c.typed_execution_status());
            out.push_str(&format!(
                "{} {}: {}\n",
                match status {
                    Some(s) if s.never_ran() => s.as_str(),
                    _ if r.is_error() => "failed",
                    _ => "ran",
                },
                crate::shown::inline(&r.tool_call_id, 200),
                r.content_text().lines().next().unwrap_or("")
            ));
        }
    }
    // The model is asked next when the conversation ran with a recorded job (provider,
    // model, servers); one made otherwise (the demo's scripted model) is left waiting.
    let ask = chain.needs_response()
        && crate::cmd::run::recorded_job(store.as_ref(), id)
            .await
            .ok()
            .flatten()
            .is_some();
    out.push_str(&format!(
        "conversation {id}: {} {}; {}\n",
        chain.messages().len(),
        messages_word(chain.messages().len() as i64),
        if ask {
            "asking the model, as the conversation ran".to_owned()
        } else if chain.needs_response() {
            format!(
                "waiting for the model (get its answer with `llmchain run --conversation {id}`)"
            )
        } else {
            "nothing outstanding".to_owned()
        }
    ));
    Ok(ask)
}

/// `resume`'s mode: the pending calls run (after review) and the run stops there; the
/// model is not asked.
struct ToolsOnly;

impl llmchain::chain::CustomMode for ToolsOnly {
    fn run<'a>(
        &'a self,
        chain: &'a mut llmchain::chain::LLMChain,
    ) -> llmchain::chain::ModeFuture<'a> {
        use llmchain::chain::{RunOutcome, Steps};
        Box::pin(async move {
            llmchain::chain::step!(Steps::execute_tools(chain).await);
            llmchain::chain::step!(Ok(Steps::check_tool_interrupts(chain)));
            Ok(RunOutcome::Done)
        })
    }
}

fn runtime(e: impl std::fmt::Display) -> CliError {
    CliError::runtime(e.to_string())
}

fn print(out: &str) -> CliResult {
    crate::stdout::write_bytes(out.as_bytes())
        .map_err(|e| CliError::io("cannot write to stdout", e))
}

/// The conversation `given` names: its id, or a prefix of exactly one id (as git takes
/// a commit); the most recently updated one when `given` is empty.
/// One line of `list` or `search` about `s` (with the line a search found, under it),
/// or its JSON object.
async fn summary_line(
    store: &AnyStore,
    out: &mut String,
    s: &ConversationSummary,
    json: bool,
    hit: Option<&str>,
) -> Result<(), CliError> {
    let runtime = |e: serde_json::Error| CliError::runtime(e.to_string());
    // How its last run ended, when that was not done: failed, interrupted.
    let last = store
        .list_runs(&s.id)
        .await
        .map_err(CliError::store)?
        .pop()
        .map(|r| r.state.status);
    let mark = last.and_then(run_mark);
    if json {
        let mut v = serde_json::to_value(s).map_err(runtime)?;
        v["last_run"] = last.map(|st| st.as_str()).into();
        if let Some(hit) = hit {
            v["match"] = hit.into();
        }
        out.push_str(&serde_json::to_string(&v).map_err(runtime)?);
        out.push('\n');
    } else {
        out.push_str(&format!(
            "{}  {}  {:>5} {}  {}{}\n",
            s.id,
            format_ms(s.updated_at),
            s.message_count,
            messages_word(s.message_count),
            mark.map(|m| format!("[{m}] ")).unwrap_or_default(),
            crate::shown::inline(s.title.as_deref().unwrap_or(""), 200)
        ));
        if let Some(hit) = hit {
            out.push_str(&format!("    {}\n", crate::shown::inline(hit, 200)));
        }
    }
    Ok(())
}

/// Where `text` is in `s` (ignoring case): its title, else the first message whose
/// text, tool call arguments or tool result holds it, as a short excerpt; `None` when
/// only the stored form matched (a JSON key).
async fn search_hit(
    store: &AnyStore,
    s: &ConversationSummary,
    text: &str,
) -> Result<Option<String>, CliError> {
    let needle = text.to_lowercase();
    if let Some(t) = &s.title
        && t.to_lowercase().contains(&needle)
    {
        return Ok(Some(format!("title: {t}")));
    }
    let Some(stored) = store
        .get_conversation(&s.id)
        .await
        .map_err(CliError::store)?
    else {
        return Ok(None);
    };
    for m in &stored.conversation.messages {
        let mut texts: Vec<String> = m.text().into_iter().collect();
        texts.extend(
            m.tool_calls
                .iter()
                .map(|c| serde_json::Value::Object(c.arguments_as_map()).to_string()),
        );
        texts.extend(
            m.tool_results
                .iter()
                .flat_map(|r| r.content.iter().map(|p| p.content.clone())),
        );
        for t in texts {
            if let Some(excerpt) = excerpt(&t, &needle) {
                return Ok(Some(format!("{}: {excerpt}", m.role.as_str())));
            }
        }
        for (name, t) in attached_texts(&m.content) {
            if let Some(excerpt) = excerpt(&t, &needle) {
                return Ok(Some(format!(
                    "{} attached {name}: {excerpt}",
                    m.role.as_str()
                )));
            }
        }
    }
    Ok(None)
}

/// How many of the latest conversations `search` reads for attached text.
const ATTACHMENT_SCAN: i64 = 400;

/// The text files among `parts` (a text media type, or JSON, XML, YAML…), decoded:
/// their names and texts.
fn attached_texts(parts: &[llmchain::message::ContentPart]) -> Vec<(String, String)> {
    use base64::Engine;
    parts
        .iter()
        .filter(|p| p.r#type == ContentType::File)
        .filter(|p| {
            p.media().is_some_and(|m| {
                m.starts_with("text/")
                    || ["json", "xml", "yaml", "toml", "csv", "javascript"]
                        .iter()
                        .any(|t| m.contains(t))
            })
        })
        .filter_map(|p| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p.content.trim())
                .ok()?;
            let text = String::from_utf8(bytes).ok()?;
            Some((attachment_name(p).unwrap_or("a file").to_owned(), text))
        })
        .collect()
}

/// An attached file's name as `-a` recorded it.
fn attachment_name(p: &llmchain::message::ContentPart) -> Option<&str> {
    p.options
        .get("filename")
        .and_then(|v| v.as_str())
        .filter(|n| !n.is_empty())
}

/// About 40 characters either side of the first place `needle` (lowercase) is in
/// `text`, ignoring case.
fn excerpt(text: &str, needle: &str) -> Option<String> {
    let lower = text.to_lowercase();
    // Lowercasing may change lengths: find the match by characters.
    let at = lower.find(needle)?;
    let chars_before = lower[..at].chars().count();
    let len = needle.chars().count();
    let start = chars_before.saturating_sub(40);
    let mut out: String = text.chars().skip(start).take(len + 80).collect();
    if start > 0 {
        out.insert(0, '…');
    }
    if text.chars().count() > start + len + 80 {
        out.push('…');
    }
    // One line: the excerpt's own line breaks shown as spaces.
    Some(out.replace(['\r', '\n'], " "))
}

async fn load(store: &AnyStore, id: &str) -> Result<StoredConversation, CliError> {
    store
        .get_conversation(id)
        .await
        .map_err(CliError::store)?
        .ok_or_else(|| CliError::usage(format!("no conversation with id {id:?}")))
}

fn show(out: &mut String, stored: &StoredConversation) {
    let s = &stored.summary;
    let c = &stored.conversation;
    out.push_str(&format!(
        "conversation {}{}\ncreated {}, updated {}, {} {}\n",
        s.id,
        s.title
            .as_deref()
            .map(|t| format!(" — {}", crate::shown::inline(t, 200)))
            .unwrap_or_default(),
        format_ms(s.created_at),
        format_ms(s.updated_at),
        s.message_count,
        messages_word(s.message_count)
    ));
    if let Some(system) = &c.system {
        out.push_str(&format!("system: {system}\n"));
    }
    if !c.tools.is_empty() {
        let names: Vec<String> = c
            .tools
            .iter()
            .map(|t| crate::shown::inline(&t.name, 200))
            .collect();
        out.push_str(&format!("tools: {}\n", names.join(", ")));
    }
    for (seq, m) in c.messages.iter().enumerate() {
        show_message(out, seq, m);
    }
}

fn show_message(out: &mut String, seq: usize, m: &Message) {
    let status = match m.status {
        llmchain::message::MessageStatus::Complete => "",
        llmchain::message::MessageStatus::Cancelled => " (cut off)",
        llmchain::message::MessageStatus::Length => " (hit the token limit)",
        _ => " (ended in a way this version does not know)",
    };
    out.push_str(&format!(
        "[{seq}] {}{status}: {}\n",
        m.role.as_str(),
        parts_shown(&m.content)
    ));
    for call in &m.tool_calls {
        // Names and ids come from the model: one line each, whatever they hold.
        out.push_str(&format!(
            "    -> {} {}({}) [{}]{}\n",
            crate::shown::inline(call.call_id.as_deref().unwrap_or("?"), 200),
            crate::shown::inline(call.name.as_deref().unwrap_or("?"), 200),
            serde_json::Value::Object(call.arguments_as_map()),
            call.execution_status(),
            match call.original_arguments() {
                Some(original) => format!(" [edited at review; the model sent {original}]"),
                None => String::new(),
            }
        ));
    }
    for r in &m.tool_results {
        out.push_str(&format!(
            "    <- {}{}: {}\n",
            crate::shown::inline(&r.tool_call_id, 200),
            if r.is_error() { " (error)" } else { "" },
            parts_shown(&r.content)
        ));
    }
}

/// Content parts as one text: text as it is, thinking marked, and every part that is
/// not text as a placeholder with its kind and size, so nothing is silently left out.
fn parts_shown(parts: &[llmchain::message::ContentPart]) -> String {
    let mut shown = Vec::with_capacity(parts.len());
    for p in parts {
        shown.push(match p.r#type {
            ContentType::Text => p.content.clone(),
            ContentType::Thinking => format!("(thinking: {})", p.content.trim()),
            ContentType::Image | ContentType::File => {
                let kind = if p.r#type == ContentType::Image {
                    "image"
                } else {
                    "file"
                };
                // Base64 holds 3 bytes in every 4 characters, less its `=` padding.
                let data = p.content.trim_end();
                let padding = data.len() - data.trim_end_matches('=').len();
                let bytes = (data.len() / 4 * 3).saturating_sub(padding);
                let name = attachment_name(p)
                    .map(|n| format!("{n}, "))
                    .unwrap_or_default();
                format!(
                    "[{kind} {name}{}, {bytes} bytes]",
                    p.media().unwrap_or("of unknown type")
                )
            }
            ContentType::ImageUrl => format!("[image at {}]", p.content),
            ContentType::FileUrl => format!("[file at {}]", p.content),
            _ => "[a part of a kind llmchain does not know]".to_owned(),
        });
    }
    shown.join("\n")
}

/// Asks `question` on stderr, `[y/N]`; true for `y` or `yes` (any case).
fn confirm(question: &str) -> Result<bool, CliError> {
    use std::io::Write;
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| CliError::io("cannot read the answer", e))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
