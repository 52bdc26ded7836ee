//! `llmchain reviews list | show ID | approve ID | deny ID | reject ID | edit ID JSON`:
//! the review inbox.
//!
//! A run that needs a person where no one can be asked (a worker; `run` without a
//! terminal) pauses with one review per call waiting. Any process answers them here;
//! the store is the authority: a decision names one review (one call of one
//! conversation), is refused when that review is not pending, and is recorded with who
//! decided and when. When the last review of a queued run is decided, the run is queued
//! again and a worker resumes it with exactly these decisions; an interactive run goes
//! on with `llmchain conversations resume ID`.

use llmchain::chain::HumanDecision;
use llmchain_store::{AnyStore, Review, ReviewFilter, ReviewStatus, Store, StoreError};
use serde_json::{Value, json};

use crate::error::{CliError, CliResult};
use crate::stdout::out;
use crate::store_access::format_ms;
use crate::store_access::open_store;

/// Arguments of `llmchain reviews`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReviewsArgs {
    /// Database URL (default: $LLMCHAIN_DATABASE_URL, else the SQLite file in the user's
    /// data directory).
    #[arg(long, global = true, value_name = "URL")]
    pub db: Option<String>,
    /// Who decides, as recorded with the decision [default: $USER@HOST].
    #[arg(long, global = true, value_name = "NAME")]
    pub by: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub action: ReviewsAction,
}

/// The `reviews` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ReviewsAction {
    /// List the calls waiting for a decision, oldest first (--all: decided ones too).
    List {
        /// Decided and cancelled reviews too.
        #[arg(long)]
        all: bool,
        /// Only this conversation's (its id or a unique prefix).
        #[arg(long, value_name = "ID")]
        conversation: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: i64,
        /// One JSON object per line, as `show --json` prints one.
        #[arg(long)]
        json: bool,
    },
    /// Show a review: the run, the conversation, the tool, the arguments the model sent,
    /// and what was decided.
    Show {
        /// The review id (or a unique prefix).
        id: String,
        /// The review as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Approve the call: it runs as the model sent it.
    Approve {
        /// The review id (or a unique prefix).
        id: String,
    },
    /// Deny the call: it does not run, and the model is told (not as an error).
    Deny {
        /// The review id (or a unique prefix).
        id: String,
        /// What the model is told [default: that a reviewer denied it].
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reject the call as wrong: it does not run, and the model gets an error it may
    /// correct the call from.
    Reject {
        /// The review id (or a unique prefix).
        id: String,
        /// What the model is told [default: that a reviewer rejected it].
        #[arg(long)]
        reason: Option<String>,
    },
    /// Approve the call with other arguments (a JSON object): it runs with those, and
    /// is stored so, the model's own kept beside them.
    Edit {
        /// The review id (or a unique prefix).
        id: String,
        /// The arguments to run it with, a JSON object.
        arguments: String,
    },
}

/// Runs `llmchain reviews`.
pub(crate) fn run(args: ReviewsArgs) -> CliResult {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("cannot start the async runtime", e))?;
    rt.block_on(reviews(args))
}

/// Who is deciding: `$USER@HOST`; without `USER` (or `LOGNAME`, `USERNAME`), the
/// operating system's name for this process's user.
pub(crate) fn who() -> String {
    let user = ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .or_else(login_name)
        .unwrap_or_else(|| "unknown".into());
    format!("{user}@{}", host_name())
}

/// The login name of this process's user, from the password database: the owner of
/// `/proc/self` is the process's user, `/etc/passwd` names it (or `uid N` when it has no
/// entry). Ten lines here rather than a crate (or libc's `getpwuid`, unsafe) for one
/// fallback of a label.
#[cfg(unix)]
fn login_name() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let named = passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse::<u32>().ok()? == uid && !name.is_empty()).then(|| name.to_owned())
    });
    Some(named.unwrap_or_else(|| format!("uid {uid}")))
}

#[cfg(not(unix))]
fn login_name() -> Option<String> {
    None
}

/// This machine's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else
/// `localhost`).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether `run` is a chat of `llmchain serve` (its state names the server's profile).
async fn served_by(store: &AnyStore, run: Option<&str>) -> bool {
    let Some(run) = run else {
        return false;
    };
    matches!(store.get_run(run).await, Ok(Some(r)) if r.state.extra.contains_key("serve"))
}

fn not_found(e: StoreError) -> CliError {
    match e {
        StoreError::ReviewNotFound(_) | StoreError::ReviewNotPending { .. } => {
            CliError::usage(e.to_string())
        }
        other => CliError::store(other),
    }
}

/// The review `given` names: its id or a prefix of exactly one id.
async fn resolve(store: &AnyStore, given: &str) -> Result<Review, CliError> {
    if let Some(r) = store.get_review(given).await.map_err(CliError::store)? {
        return Ok(r);
    }
    let all = store
        .list_reviews(&ReviewFilter {
            limit: 100_000,
            ..Default::default()
        })
        .await
        .map_err(CliError::store)?;
    crate::cmd::id_prefix::pick(given, all, |r| r.id.as_str(), "review")
}

/// A review as JSON (the one shape `list --json` and `show --json` print).
/// The policy rule that sent a review's call to a person (its id and reason), read
/// from its run's decision journal; `None` when no rule asked (a tool's own interrupt,
/// the review handler, a pruned run).
async fn asked_by(store: &AnyStore, r: &Review) -> Option<(String, Option<String>)> {
    let run_id = r.run_id.as_deref()?;
    let run = store.get_run(run_id).await.ok()??;
    let journal = run.state.extra.get("chain")?.get("journal")?.as_array()?;
    journal.iter().rev().find_map(|d| {
        let is = |k: &str, v: &str| d.get(k).and_then(Value::as_str) == Some(v);
        (is("kind", "policy")
            && is("call_id", &r.call_id)
            && is("effect", "ask")
            && d.get("shadow") != Some(&Value::Bool(true)))
        .then(|| {
            (
                d.get("rule")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
                d.get("reason").and_then(Value::as_str).map(str::to_owned),
            )
        })
    })
}

fn to_json(r: &Review, rule: Option<&(String, Option<String>)>) -> Value {
    json!({
        "policy_rule": rule.map(|(id, _)| id),
        "policy_reason": rule.and_then(|(_, why)| why.as_deref()),
        "id": r.id,
        "status": r.status.as_str(),
        "conversation_id": r.conversation_id,
        "run_id": r.run_id,
        "call_id": r.call_id,
        "round": r.round,
        "tool": r.tool,
        "arguments": r.arguments,
        "question": r.question,
        "decision": r.decision,
        "decided_by": r.decided_by,
        "created_at": r.created_at,
        "decided_at": r.decided_at,
    })
}

fn line(r: &Review, rule: Option<&(String, Option<String>)>) -> String {
    let args = crate::shown::inline(&r.arguments.to_string(), 120);
    format!(
        "{}  {:<9}  {}  {}({args})  call {} of conversation {}{}{}\n",
        r.id,
        r.status.as_str(),
        format_ms(r.created_at),
        crate::shown::inline(&r.tool, 100),
        crate::shown::inline(&r.call_id, 100),
        r.conversation_id,
        rule.map(|(id, _)| format!("  asked by policy rule {}", crate::shown::inline(id, 100)))
            .unwrap_or_default(),
        r.decided_by
            .as_deref()
            .map(|b| format!("  decided by {}", crate::shown::inline(b, 100)))
            .unwrap_or_default()
    )
}

fn show(r: &Review, rule: Option<&(String, Option<String>)>) -> String {
    let pretty = serde_json::to_string_pretty(&r.arguments).unwrap_or_default();
    let mut s = format!(
        "review {}: {}\nconversation {}, run {}, call {}\ntool {}\narguments the model sent:\n",
        r.id,
        r.status.as_str(),
        r.conversation_id,
        r.run_id.as_deref().unwrap_or("(pruned)"),
        crate::shown::inline(&r.call_id, 200),
        crate::shown::inline(&r.tool, 200),
    );
    for l in pretty.lines() {
        s.push_str(&format!("  {}\n", crate::shown::inline(l, 2000)));
    }
    if let Some(q) = &r.question {
        s.push_str(&format!(
            "the tool asks: {}\n",
            crate::shown::inline(q, 2000)
        ));
    }
    if let Some((id, why)) = rule {
        s.push_str(&format!(
            "asked by policy rule {}{}\n",
            crate::shown::inline(id, 200),
            why.as_deref()
                .map(|w| format!(": {}", crate::shown::inline(w, 2000)))
                .unwrap_or_default()
        ));
    }
    if r.round > 0 {
        s.push_str(&format!(
            "round {} (asked again after an earlier approval)\n",
            r.round
        ));
    }
    s.push_str(&format!("opened {}\n", format_ms(r.created_at)));
    if let Some(d) = &r.decision {
        s.push_str(&format!(
            "decided {} by {}: {}\n",
            r.decided_at.map(format_ms).unwrap_or_default(),
            crate::shown::inline(r.decided_by.as_deref().unwrap_or("?"), 200),
            crate::shown::inline(&serde_json::to_string(d).unwrap_or_default(), 2000)
        ));
    }
    s
}

async fn reviews(args: ReviewsArgs) -> CliResult {
    // Reading never creates the database.
    let (store, location) = match &args.action {
        ReviewsAction::List { .. } | ReviewsAction::Show { .. } => {
            match crate::store_access::open_existing(args.db.clone()).await? {
                Some(opened) => opened,
                None => {
                    if let ReviewsAction::Show { id, .. } = &args.action {
                        return Err(CliError::usage(format!("no review with id {id:?}")));
                    }
                    eprintln!("no call waits for review");
                    return Ok(());
                }
            }
        }
        _ => open_store(args.db.clone()).await?,
    };
    let db_flag = match &args.db {
        Some(_) => format!(" --db {location}"),
        None => String::new(),
    };
    let by = args.by.clone().unwrap_or_else(who);
    let mut out = String::new();
    let decision = match args.action {
        ReviewsAction::List {
            all,
            conversation,
            limit,
            json,
        } => {
            let conversation = match conversation {
                Some(c) => Some(crate::store_access::resolve_id(&store, &c).await?),
                None => None,
            };
            let list = store
                .list_reviews(&ReviewFilter {
                    status: (!all).then_some(ReviewStatus::Pending),
                    conversation,
                    run: None,
                    limit,
                })
                .await
                .map_err(CliError::store)?;
            for r in &list {
                let rule = asked_by(&store, r).await;
                if json {
                    out.push_str(&to_json(r, rule.as_ref()).to_string());
                    out.push('\n');
                } else {
                    out.push_str(&line(r, rule.as_ref()));
                }
            }
            if list.is_empty() && !json {
                eprintln!(
                    "{}",
                    if all {
                        "no reviews"
                    } else {
                        "no call waits for review"
                    }
                );
            }
            None
        }
        ReviewsAction::Show { id, json } => {
            let r = resolve(&store, &id).await?;
            let rule = asked_by(&store, &r).await;
            if json {
                out.push_str(&to_json(&r, rule.as_ref()).to_string());
                out.push('\n');
            } else {
                out.push_str(&show(&r, rule.as_ref()));
            }
            None
        }
        ReviewsAction::Approve { id } => Some((id, HumanDecision::Approve)),
        ReviewsAction::Deny { id, reason } => Some((id, HumanDecision::Deny { reason })),
        ReviewsAction::Reject { id, reason } => Some((id, HumanDecision::Reject { reason })),
        ReviewsAction::Edit { id, arguments } => {
            let arguments = match serde_json::from_str::<Value>(&arguments) {
                Ok(Value::Object(m)) => m,
                Ok(other) => {
                    return Err(CliError::usage(format!(
                        "the arguments must be a JSON object, not {}",
                        crate::shown::inline(&other.to_string(), 100)
                    )));
                }
                Err(e) => {
                    return Err(CliError::usage(format!("the arguments are not JSON: {e}")));
                }
            };
            Some((id, HumanDecision::Edit { arguments }))
        }
    };
    if let Some((id, decision)) = decision {
        let review = resolve(&store, &id).await?;
        // An edit must fit the tool's parameters as recorded when the call paused: the
        // reviewer is told now, not the model after the call was refused.
        if let (HumanDecision::Edit { arguments }, Some(schema)) = (&decision, &review.schema)
            && let Err(why) = llmchain::tool::check_arguments(schema, arguments)
        {
            return Err(CliError::usage(format!(
                "these arguments do not fit {}'s parameters; nothing was decided:\n{}",
                crate::shown::inline(&review.tool, 100),
                crate::shown::block(&why)
            )));
        }
        let decided = store
            .decide_review(&review.id, &decision, &by)
            .await
            .map_err(not_found)?;
        let r = &decided.review;
        out.push_str(&format!(
            "{} call {} ({}) of conversation {}",
            r.status.as_str(),
            crate::shown::inline(&r.call_id, 100),
            crate::shown::inline(&r.tool, 100),
            r.conversation_id
        ));
        let run = r.run_id.as_deref().unwrap_or("?");
        if decided.still_pending > 0 {
            out.push_str(&format!(
                "; {} more call(s) of run {run} wait for review\n",
                decided.still_pending
            ));
        } else if decided.requeued {
            out.push_str(&format!(
                "; run {run} is queued again: a worker resumes it (`llmchain runs{db_flag} show {run}`)\n"
            ));
        } else if served_by(&store, r.run_id.as_deref()).await {
            // `llmchain serve` goes on with its own chats once their reviews are decided.
            out.push_str("; the chat's server (llmchain serve) goes on with it\n");
        } else {
            out.push_str(&format!(
                "; go on with `llmchain conversations{db_flag} resume {}`\n",
                r.conversation_id
            ));
        }
    }
    out!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(unix)]
    #[test]
    fn the_login_name_comes_from_the_os() {
        let name = super::login_name().expect("a name on unix");
        assert!(!name.is_empty() && !name.contains(':'), "{name}");
        // What `id -un` says, where it is installed.
        if let Ok(out) = std::process::Command::new("id").arg("-un").output()
            && out.status.success()
        {
            assert_eq!(name, String::from_utf8_lossy(&out.stdout).trim());
        }
    }
}
