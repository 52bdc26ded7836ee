//! What an interactive command (`run`, `chat`, `conversations resume`) gives the one
//! owner of a run ([`llmchain_store::LeasedRun`]): its claim, and what it does about
//! calls that wait in the review inbox undecided (asks at the terminal).
//!
//! The command claims the conversation's run before it reads the conversation
//! ([`Claim::Conversation`]): a second process gets "is being run by …" and stops before
//! doing anything. The `LeasedRun` fences every write by the lease, renews it, answers
//! what the inbox decided, recovers calls left `executing` and records how the run
//! ended; the command shows it.

use std::sync::Arc;
use std::time::Duration;

use llmchain::chain::{HumanDecision, ReviewDecision};
use llmchain::message::ToolCall;
use llmchain_store::leased_run::DecideFuture;
use llmchain_store::review::pending_for;
use llmchain_store::{
    AnyStore, Claim, Ended, LeasedRun, Run, RunEnd, RunState, Store, StoreError, Undecided,
};

use crate::error::CliError;
use crate::review::TerminalReview;

/// How long an interactive lease lasts between heartbeats (renewed every third).
const LEASE: Duration = Duration::from_secs(30);

/// A held run's chain, built by [`start`].
pub(crate) struct Started {
    /// The run, to drive.
    pub held: LeasedRun<AnyStore>,
    /// The chain over the stored conversation, and its MCP tools.
    pub built: crate::job::Built,
    /// How many messages the conversation held when the run started.
    pub before: usize,
    /// Asks at the terminal about calls left undecided in the review inbox.
    pub asking: TerminalReview,
}

/// Builds `parts`' chain for `held` (reviewed at the terminal, its questions naming the
/// run) over the run's stored conversation ([`LeasedRun::start`]), or the error of a run
/// that could not start (ended: failed, or lost).
pub(crate) async fn start(
    held: LeasedRun<AnyStore>,
    parts: crate::job::Parts,
    conversation: &str,
) -> Result<Started, CliError> {
    let reviewer = crate::job::Reviewer::Terminal {
        run: held.run().id.clone(),
    };
    let asking = parts.reviewer(&reviewer).asking();
    let started = held
        .start(|_, state| {
            let before = state.conversation.messages.len();
            std::future::ready(Ok((before, parts.chain(Some(state), reviewer))))
        })
        .await;
    match started {
        Ok((held, (before, built))) => Ok(Started {
            held,
            built,
            before,
            asking,
        }),
        Err(ended) => Err(ended_error(&ended, conversation, None).unwrap_or_else(|| {
            CliError::runtime(format!(
                "run {} could not start: {:?}",
                ended.run.id, ended.end
            ))
        })),
    }
}

/// The error of a run of `conversation` that ended without its work done, as every
/// interactive command words it: the lease lost (`lease_lost`), a failure (typed by the
/// chain's error, `run_failed` without one, `what` before its text when given), its end
/// not recorded (`not_recorded`). `None` for the ends a command shows itself (done,
/// paused, cancelled, yielded).
pub(crate) fn ended_error(
    ended: &Ended,
    conversation: &str,
    what: Option<&str>,
) -> Option<CliError> {
    let run = &ended.run.id;
    Some(match &ended.end {
        RunEnd::Lost { reason } => CliError::runtime(format!(
            "this process lost the run of conversation {conversation} ({reason}): another \
             process took it over, or it was cancelled; nothing more was written"
        ))
        .typed("lease_lost"),
        RunEnd::Failed { error, .. } => {
            let failed = ended
                .error
                .as_ref()
                .map_or("run_failed", llmchain::chain::ChainError::error_type);
            let text = match what {
                Some(what) => format!("{what}: {error}"),
                None => error.clone(),
            };
            CliError::runtime(text).typed(failed)
        }
        RunEnd::NotRecorded { error } => CliError::runtime(format!(
            "the end of run {run} could not be recorded: {error}"
        ))
        .typed("not_recorded"),
        _ => return None,
    })
}

/// Claims `conversation`'s run for this process (creating one with `mode` and `extra`,
/// the job, if it has none), or says who holds it. A holder that was a process of this
/// machine that no longer exists (killed) holds nothing: its lease is ended and the run
/// claimed at once, instead of after the lease ran out.
pub(crate) async fn claim(
    store: Arc<AnyStore>,
    conversation: &str,
    mode: &str,
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<LeasedRun<AnyStore>, CliError> {
    let holder = format!(
        "cli@{}:{}:{}",
        crate::cmd::reviews::host_name(),
        std::process::id(),
        instance_suffix()
    );
    let state = RunState {
        mode: mode.to_owned(),
        extra,
        ..Default::default()
    };
    let claim = |state: RunState| Claim::Conversation {
        id: conversation.to_owned(),
        state,
    };
    let first = LeasedRun::claim(store.clone(), claim(state.clone()), &holder, LEASE).await;
    let claimed = match first {
        Err(StoreError::RunBusy { owner, .. }) if is_dead_holder(&owner) => {
            store
                .release_leases(&owner)
                .await
                .map_err(CliError::store)?;
            LeasedRun::claim(store, claim(state), &holder, LEASE).await
        }
        other => other,
    };
    claimed.map_err(|e| match e {
        StoreError::RunBusy { .. } | StoreError::QueuedRunOpen { .. } => {
            CliError::runtime(e.to_string()).typed(e.error_type())
        }
        other => CliError::store(other),
    })
}

/// Whether `owner` names an interactive holder of this machine whose process is gone.
fn is_dead_holder(owner: &str) -> bool {
    let Some(rest) = owner.strip_prefix("cli@") else {
        return false;
    };
    let mut parts = rest.rsplitn(3, ':');
    let (_suffix, pid, host) = (parts.next(), parts.next(), parts.next());
    let Some(pid) = pid.and_then(|p| p.parse::<i32>().ok()) else {
        return false;
    };
    if host != Some(crate::cmd::reviews::host_name().as_str()) || pid == std::process::id() as i32 {
        return false;
    }
    process_gone(pid)
}

/// Whether no process has `pid` (one that exists but is another user's is not gone).
fn process_gone(pid: i32) -> bool {
    #[cfg(unix)]
    {
        match rustix::process::Pid::from_raw(pid) {
            Some(p) => matches!(
                rustix::process::test_kill_process(p),
                Err(rustix::io::Errno::SRCH)
            ),
            None => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        false
    }
}

/// A few random hex digits, so two processes with one pid (containers) differ.
fn instance_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{nanos:08x}")
}

/// Calls that wait in the review inbox undecided are asked about here, one at a time,
/// when there is a terminal; each answer is recorded in the inbox (the store stays the
/// authority) and the run goes on with it. Without a terminal nothing is decided: the
/// run pauses with them, and the command says how to decide them.
pub(crate) struct AskAtTerminal {
    pub(crate) review: TerminalReview,
    pub(crate) store: Arc<AnyStore>,
}

impl Undecided for AskAtTerminal {
    fn decide<'a>(&'a self, run: &'a Run, calls: &'a [ToolCall]) -> DecideFuture<'a> {
        Box::pin(async move {
            let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin())
                && std::io::IsTerminal::is_terminal(&std::io::stderr());
            if !interactive {
                return Ok(());
            }
            let pending = pending_for(self.store.as_ref(), &run.conversation_id, calls).await?;
            let review = self.review.clone().for_run(&run.id);
            for (call, r) in pending {
                let answer = llmchain::chain::ReviewHandler::review(&review, call).await;
                let decision = match answer {
                    ReviewDecision::Approve | ReviewDecision::Interrupt => HumanDecision::Approve,
                    ReviewDecision::Edit { arguments } => HumanDecision::Edit { arguments },
                    ReviewDecision::Deny { reason } => HumanDecision::Deny {
                        reason: Some(reason),
                    },
                    ReviewDecision::Reject { reason } => HumanDecision::Reject {
                        reason: Some(reason),
                    },
                    // A decision this version cannot read never runs the call.
                    _ => HumanDecision::Deny {
                        reason: Some(
                            "the review gave a decision this version of llmchain does not know"
                                .into(),
                        ),
                    },
                };
                self.store
                    .decide_review(&r.id, &decision, &crate::cmd::reviews::who())
                    .await?;
            }
            Ok(())
        })
    }
}
