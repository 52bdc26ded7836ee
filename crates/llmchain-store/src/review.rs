//! The review inbox: tool calls waiting for a person, and what was decided about them.
//!
//! A run that needs a human (a call its review policy asks about, in a process with no
//! terminal to ask at: a worker, a server) is **paused** with one [`Review`] per call
//! waiting ([`Store::pause_run`], in the same transaction that
//! pauses the run, fenced by its lease). Any process answers them
//! ([`Store::decide_review`]): each decision names one
//! review, and so one call of one conversation; a decision for a review that is not
//! pending is refused ([`StoreError::ReviewNotPending`]),
//! so two reviewers cannot both decide, and nobody can decide about a call that already
//! ran. When the last pending review of a queued run is decided, the run goes back to
//! `pending` in the same transaction, and a worker resumes it with the stored decisions
//! ([`decisions_for`]).
//!
//! The store is the one authority: a resumed run applies exactly the decisions stored
//! here, and the rows stay as the audit trail (who decided what, when, and the
//! arguments the model had sent).

use llmchain::chain::HumanDecision;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{StoreError, StoreResult};
use crate::store::Store;

/// Where a review is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReviewStatus {
    /// Waiting for a person.
    Pending,
    /// Approved: the call runs as the model sent it.
    Approved,
    /// Approved with other arguments: the call runs with those.
    Edited,
    /// Denied: the call does not run; the model is told (not as an error).
    Denied,
    /// Rejected as wrong: the call does not run; the model gets an error + refusal.
    Rejected,
    /// Its run was cancelled before anyone decided.
    Cancelled,
    /// The call it was about was removed from the conversation (a regenerated answer):
    /// kept, with any decision, for the record; it answers nothing.
    Voided,
}

impl ReviewStatus {
    /// The stored string.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStatus::Pending => "pending",
            ReviewStatus::Approved => "approved",
            ReviewStatus::Edited => "edited",
            ReviewStatus::Denied => "denied",
            ReviewStatus::Rejected => "rejected",
            ReviewStatus::Cancelled => "cancelled",
            ReviewStatus::Voided => "voided",
        }
    }

    /// Parses a stored string.
    pub fn parse(s: &str) -> Option<ReviewStatus> {
        Some(match s {
            "pending" => ReviewStatus::Pending,
            "approved" => ReviewStatus::Approved,
            "edited" => ReviewStatus::Edited,
            "denied" => ReviewStatus::Denied,
            "rejected" => ReviewStatus::Rejected,
            "cancelled" => ReviewStatus::Cancelled,
            "voided" => ReviewStatus::Voided,
            _ => return None,
        })
    }

    /// The status a decision gives.
    pub fn of(decision: &HumanDecision) -> ReviewStatus {
        match decision {
            HumanDecision::Approve => ReviewStatus::Approved,
            HumanDecision::Edit { .. } => ReviewStatus::Edited,
            HumanDecision::Deny { .. } => ReviewStatus::Denied,
            HumanDecision::Reject { .. } => ReviewStatus::Rejected,
        }
    }
}

/// A call waiting for a person, or the record of what was decided about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Review {
    /// The review's id (what `llmchain reviews approve ID` takes).
    pub id: String,
    /// The conversation holding the call.
    pub conversation_id: String,
    /// The run that paused for it (`None` once that run was pruned).
    pub run_id: Option<String>,
    /// The call's id, unique within its conversation.
    pub call_id: String,
    /// Which round of questions about this call (0, then one more each time its tool
    /// interrupts again after an approval): one review per call and round.
    pub round: u32,
    /// The tool the call names.
    pub tool: String,
    /// The arguments the model sent (a JSON object, or the raw text it sent).
    pub arguments: Value,
    /// What the tool asked, when its own interrupt opened the review.
    pub question: Option<String>,
    /// Where it is.
    pub status: ReviewStatus,
    /// What was decided, once decided.
    pub decision: Option<HumanDecision>,
    /// Who decided (as the deciding process named them).
    pub decided_by: Option<String>,
    /// When it was opened, milliseconds since the Unix epoch.
    pub created_at: i64,
    /// When it was decided, milliseconds since the Unix epoch.
    pub decided_at: Option<i64>,
    /// The tool's parameters schema when its call paused (`None` for a tool the run did
    /// not have, or a review opened before version 4): an edit is checked against it.
    pub schema: Option<Value>,
}

/// A review to open when a run pauses.
#[derive(Debug, Clone, PartialEq)]
pub struct NewReview {
    /// The call's id.
    pub call_id: String,
    /// The round of questions about the call ([`ToolCall::review_round`](llmchain::message::ToolCall::review_round)).
    pub round: u32,
    /// The tool.
    pub tool: String,
    /// The arguments the model sent.
    pub arguments: Value,
    /// What the tool asked (its interrupt's text), if a tool's interrupt opens it.
    pub question: Option<String>,
    /// The tool's parameters schema (an edit of the call is checked against it).
    pub schema: Option<Value>,
}

/// Which reviews [`Store::list_reviews`] lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewFilter {
    /// Only reviews of this status (`Some(Pending)`: the inbox).
    pub status: Option<ReviewStatus>,
    /// Only reviews of this conversation.
    pub conversation: Option<String>,
    /// Only reviews opened by this run.
    pub run: Option<String>,
    /// At most this many, oldest first.
    pub limit: i64,
}

impl Default for ReviewFilter {
    fn default() -> Self {
        ReviewFilter {
            status: None,
            conversation: None,
            run: None,
            limit: 1000,
        }
    }
}

impl ReviewFilter {
    /// The pending reviews, oldest first: the inbox.
    pub fn pending() -> Self {
        ReviewFilter {
            status: Some(ReviewStatus::Pending),
            ..Default::default()
        }
    }
}

/// What [`Store::decide_review`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The review, decided.
    pub review: Review,
    /// Reviews of the same run still pending.
    pub still_pending: i64,
    /// Whether this decision, the run's last pending one, put the run back in the
    /// queue (`pending`) for a worker to resume.
    pub requeued: bool,
}

/// The columns of a review, in [`ReviewRow`]'s order (a macro, for `concat!`).
macro_rules! review_columns {
    () => {
        "id, conversation_id, run_id, call_id, round, tool, arguments, question, status, decision, \
         decided_by, created_at, decided_at, parameters_schema"
    };
}
pub(crate) use review_columns;

/// A review row, as `review_columns!()` lists it.
pub(crate) type ReviewRow = (
    String,
    String,
    Option<String>,
    String,
    i32,
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    i64,
    Option<i64>,
    Option<String>,
);

pub(crate) fn review(row: ReviewRow) -> StoreResult<Review> {
    let (
        id,
        conversation_id,
        run_id,
        call_id,
        round,
        tool,
        arguments,
        question,
        status,
        decision,
        decided_by,
        created_at,
        decided_at,
        schema,
    ) = row;
    let corrupt = |message: String| StoreError::Corrupt {
        conversation: conversation_id.clone(),
        location: format!("review {id}"),
        message,
    };
    let arguments = serde_json::from_str(&arguments).map_err(|e| corrupt(e.to_string()))?;
    let status = ReviewStatus::parse(&status)
        .ok_or_else(|| corrupt(format!("unknown review status {status:?}")))?;
    let decision = decision
        .map(|d| serde_json::from_str(&d))
        .transpose()
        .map_err(|e| corrupt(e.to_string()))?;
    let schema = schema
        .map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| corrupt(e.to_string()))?;
    Ok(Review {
        id,
        conversation_id,
        run_id,
        call_id,
        round: u32::try_from(round).unwrap_or(0),
        tool,
        arguments,
        question,
        status,
        decision,
        decided_by,
        created_at,
        decided_at,
        schema,
    })
}

/// The reviews to open for the calls `chain` waits on
/// ([`LLMChain::waiting_calls`](llmchain::chain::LLMChain::waiting_calls)): each with its
/// round, the arguments the model sent, and for a tool's interrupt, what it asked.
pub fn new_reviews(chain: &llmchain::chain::LLMChain) -> Vec<NewReview> {
    let questions: std::collections::HashMap<&str, String> = chain
        .messages()
        .last()
        .filter(|m| m.role == llmchain::message::Role::Tool)
        .map(|m| {
            m.tool_results
                .iter()
                .filter(|r| r.is_interrupt())
                .map(|r| (r.tool_call_id.as_str(), r.content_text()))
                .collect()
        })
        .unwrap_or_default();
    chain
        .waiting_calls()
        .iter()
        .filter_map(|c| {
            let call_id = c.call_id.clone()?;
            Some(NewReview {
                question: questions.get(call_id.as_str()).cloned(),
                call_id,
                round: c.review_round(),
                schema: c
                    .name
                    .as_deref()
                    .and_then(|n| chain.tools().iter().find(|t| t.name() == n))
                    .map(|t| t.parameters_schema().clone()),
                tool: c.name.clone().unwrap_or_default(),
                arguments: match c.original_arguments() {
                    Some(original) => original.clone(),
                    None => match &c.arguments {
                        Some(llmchain::message::Arguments::Object(m)) => Value::Object(m.clone()),
                        Some(llmchain::message::Arguments::Raw(r)) => Value::String(r.clone()),
                        None => Value::Object(Default::default()),
                    },
                },
            })
        })
        .collect()
}

/// The stored decisions for the calls `waiting` (those a chain waits on), as
/// [`LLMChain::answer_waiting`](llmchain::chain::LLMChain::answer_waiting) takes them,
/// and the ids of the calls still undecided. A decision is the one of the call's review
/// for its current round, whichever run opened it (a run that died, a new one).
pub async fn decisions_for<S: Store>(
    store: &S,
    conversation_id: &str,
    waiting: &[llmchain::message::ToolCall],
) -> StoreResult<(Vec<(String, HumanDecision)>, Vec<String>)> {
    let reviews = store
        .list_reviews(&ReviewFilter {
            conversation: Some(conversation_id.to_owned()),
            ..Default::default()
        })
        .await?;
    let mut decided = Vec::new();
    let mut undecided = Vec::new();
    for call in waiting {
        let Some(id) = call.call_id.clone() else {
            continue;
        };
        match reviews
            .iter()
            .find(|r| {
                r.call_id == id
                    && r.round == call.review_round()
                    && r.status != ReviewStatus::Voided
            })
            .and_then(|r| r.decision.clone())
        {
            Some(d) => decided.push((id, d)),
            None => undecided.push(id),
        }
    }
    Ok((decided, undecided))
}

/// The pending review of each of `calls` (its current round) in `conversation_id`, for
/// a front end that decides waiting calls no one decided yet; calls without one are left
/// out.
pub async fn pending_for<'c, S: Store>(
    store: &S,
    conversation_id: &str,
    calls: &'c [llmchain::message::ToolCall],
) -> StoreResult<Vec<(&'c llmchain::message::ToolCall, Review)>> {
    let open = store
        .list_reviews(&ReviewFilter {
            conversation: Some(conversation_id.to_owned()),
            status: Some(ReviewStatus::Pending),
            ..Default::default()
        })
        .await?;
    Ok(calls
        .iter()
        .filter_map(|call| {
            let review = open.iter().find(|r| {
                Some(r.call_id.as_str()) == call.call_id.as_deref()
                    && r.round == call.review_round()
            })?;
            Some((call, review.clone()))
        })
        .collect())
}

/// How many times one run of a [`LeasedRun`](crate::LeasedRun) answers waiting calls from the inbox and
/// goes on, at most, before it returns (a tool that keeps interrupting).
pub const MAX_ANSWERED_ROUNDS: u32 = 64;

/// Decides the pending review (its latest round) of call `call_id` of conversation
/// `conversation_id`: a
/// decision addressed by the call rather than by the review's id (a front end that
/// knows the call). Refused with [`StoreError::ReviewNotFound`] when the call has no
/// review, and [`StoreError::ReviewNotPending`] when its review is not pending.
pub async fn decide_call<S: Store>(
    store: &S,
    conversation_id: &str,
    call_id: &str,
    decision: &HumanDecision,
    decided_by: &str,
) -> StoreResult<Decided> {
    let reviews = store
        .list_reviews(&ReviewFilter {
            conversation: Some(conversation_id.to_owned()),
            ..Default::default()
        })
        .await?;
    let review = reviews
        .into_iter()
        .filter(|r| r.call_id == call_id && r.status != ReviewStatus::Voided)
        .max_by_key(|r| r.round)
        .ok_or_else(|| {
            StoreError::ReviewNotFound(format!("call {call_id} of conversation {conversation_id}"))
        })?;
    store.decide_review(&review.id, decision, decided_by).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for s in [
            ReviewStatus::Pending,
            ReviewStatus::Approved,
            ReviewStatus::Edited,
            ReviewStatus::Denied,
            ReviewStatus::Rejected,
            ReviewStatus::Cancelled,
            ReviewStatus::Voided,
        ] {
            assert_eq!(ReviewStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(ReviewStatus::parse("maybe"), None);
        assert_eq!(
            ReviewStatus::of(&HumanDecision::Deny { reason: None }),
            ReviewStatus::Denied
        );
    }
}
