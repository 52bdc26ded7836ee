//! The decision journal: every decision that changes a run's control flow, written into
//! the run's state before it takes effect, and read back instead of deciding again.
//!
//! The journal lives in [`ChainState`](super::ChainState), so it is saved with the step
//! it governs (a store writes the state in the same transaction as the step's message)
//! and a run resumed in another process finds every ruling, review and budget stop
//! made before it, with the counters of [`Spent`](super::Spent).

use serde::{Deserialize, Serialize};

use super::review::ReviewDecision;
use crate::policy::Effect;

/// One journaled decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// A policy ruled on a call.
    Policy {
        /// The call.
        call_id: String,
        /// The tool, as policies name it.
        tool: String,
        /// What was ruled.
        effect: Effect,
        /// The policy (`rules`, or a custom policy's id).
        policy: String,
        /// The rule that gave the ruling (`default` for a set's default).
        rule: String,
        /// Its reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Only observed (shadow mode): what would have happened; not enforced.
        #[serde(default)]
        shadow: bool,
        /// The SHA-256 of the arguments it ruled on.
        arguments_digest: String,
        /// The policy's digest when it ruled.
        policy_digest: String,
    },
    /// Whoever reviews calls decided about one (the review handler; a person's own
    /// decisions are kept by the review inbox).
    Reviewed {
        /// The call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The decision.
        decision: ReviewDecision,
        /// The SHA-256 of the arguments it was made about.
        arguments_digest: String,
    },
    /// A budget ran out and stopped the run: one of the [`Budget`](super::Budget)'s,
    /// or one of the chain's own limits.
    Budget {
        /// What ran out: `tokens`, `model_calls`, `tool_calls`, `tool_calls:NAME`,
        /// `wall_seconds`, `cost_usd`; the chain's own: `max_runs` (a mode's model calls),
        /// `failures` (consecutive failed batches, `max_retry_count`),
        /// `repeated_failures:NAME` (one failing call repeated, `max_repeated_failures`).
        limit: String,
        /// The limit.
        max: f64,
        /// What was spent (and reserved) when it ran out.
        spent: f64,
    },
    /// A per-turn cap refused an answer's calls: none of them ran (each was answered
    /// "not run"), and the run went on.
    Cap {
        /// Which: `calls_per_turn` ([`LLMChain::max_calls_per_turn`](super::LLMChain::max_calls_per_turn)),
        /// `argument_bytes_per_turn`.
        limit: String,
        /// The cap.
        max: f64,
        /// What the answer asked for.
        spent: f64,
        /// The answer's calls.
        call_ids: Vec<String>,
    },
    /// A guard held something back or rewrote it ([`crate::guard`]). Never what it held
    /// back: the kinds of what it found, and its own message.
    Guard {
        /// The guard's id.
        guard: String,
        /// Where: `user_message`, `tool_arguments`, `tool_result`.
        point: String,
        /// The call, for the tool points.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// The message's position in the conversation, for `user_message`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<usize>,
        /// `rewrite`, `block` or `tripwire`.
        verdict: String,
        /// For a rewrite: the kinds of what was replaced (`email`, `secret`...).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        found: Vec<String>,
        /// For a block, what the model was told; for a tripwire, why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Calls of finished answers found without a result before a model call (a crash
    /// between an answer and its batch): each was sent an "interrupted" answer and
    /// never run.
    Interrupted {
        /// The calls.
        call_ids: Vec<String>,
    },
    /// A request was compacted to fit the model's context window (the stored
    /// conversation is unchanged): old results cleared, then the oldest turn groups
    /// left out. Sizes are estimated (4 bytes a token).
    Compacted {
        /// The window, in tokens.
        window: u32,
        /// The request's estimated tokens before.
        estimated_before: u64,
        /// And after.
        estimated_after: u64,
        /// The calls whose results were cleared (each call kept, its result a
        /// placeholder).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cleared: Vec<String>,
        /// How many of the oldest messages were left out (whole turn groups).
        #[serde(default)]
        dropped_messages: usize,
    },
    /// A hook's verdict ([`super::Hook`]).
    Hook {
        /// The hook: `id@version`.
        hook: String,
        /// Where: `before_model`, `on_chunk`, `after_model`, `before_tool`,
        /// `after_tool`.
        point: String,
        /// The call it was about, for the tool points.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// The verdict, as its type serializes (`{"verdict": "stop", "reason": …}`).
        verdict: serde_json::Value,
    },
}

/// A journaled decision and when it was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Unix milliseconds.
    pub at_ms: u64,
    /// What was decided.
    #[serde(flatten)]
    pub decision: Decision,
}

/// The decisions of a run, oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Journal {
    entries: Vec<Entry>,
}

/// Unix milliseconds now.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Journal {
    /// Appends a decision, stamped now.
    pub fn record(&mut self, decision: Decision) {
        self.entries.push(Entry {
            at_ms: now_ms(),
            decision,
        });
    }

    /// Records `decision` unless the very same one is on record (a decision made again
    /// on resume, or at every model call, is journaled once).
    pub(super) fn record_once(&mut self, decision: Decision) {
        if !self.entries.iter().any(|e| e.decision == decision) {
            self.record(decision);
        }
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// True when nothing was journaled.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The newest enforced policy ruling on `call_id`, by any policy: what an auditor, a
    /// reviewer or the served page shows as the rule that allowed, asked about or denied
    /// the call. Shadow rulings are not it (they were never enforced).
    pub fn ruling(&self, call_id: &str) -> Option<crate::policy::Ruling> {
        self.entries.iter().rev().find_map(|e| match &e.decision {
            Decision::Policy {
                call_id: c,
                effect,
                rule,
                reason,
                shadow: false,
                ..
            } if c == call_id => Some(crate::policy::Ruling {
                effect: *effect,
                rule: rule.clone(),
                reason: reason.clone(),
            }),
            _ => None,
        })
    }

    /// The enforced policy rulings on `call_id` made by `policy`, newest last.
    pub(super) fn policy_rulings<'a>(
        &'a self,
        call_id: &'a str,
        policy: &'a str,
    ) -> impl Iterator<Item = (Effect, &'a str, Option<&'a str>, &'a str, &'a str)> + 'a {
        self.entries.iter().filter_map(move |e| match &e.decision {
            Decision::Policy {
                call_id: c,
                policy: p,
                effect,
                rule,
                reason,
                shadow: false,
                arguments_digest,
                policy_digest,
                ..
            } if c == call_id && p == policy => Some((
                *effect,
                rule.as_str(),
                reason.as_deref(),
                arguments_digest.as_str(),
                policy_digest.as_str(),
            )),
            _ => None,
        })
    }

    /// Whether a shadow ruling on `call_id` by `policy` was journaled already.
    pub(super) fn has_shadow(&self, call_id: &str, policy: &str) -> bool {
        self.entries.iter().any(|e| {
            matches!(&e.decision, Decision::Policy { call_id: c, policy: p, shadow: true, .. }
                if c == call_id && p == policy)
        })
    }

    /// A hook's journaled verdict at `point` about `call_id`.
    pub(super) fn hook_verdict(
        &self,
        hook: &str,
        point: &str,
        call_id: &str,
    ) -> Option<&serde_json::Value> {
        self.entries.iter().rev().find_map(|e| match &e.decision {
            Decision::Hook {
                hook: h,
                point: p,
                call_id: Some(c),
                verdict,
            } if h == hook && p == point && c == call_id => Some(verdict),
            _ => None,
        })
    }

    /// The review handler's journaled decision about `call_id` on these arguments.
    pub(super) fn reviewed(&self, call_id: &str, digest: &str) -> Option<&ReviewDecision> {
        self.entries.iter().rev().find_map(|e| match &e.decision {
            Decision::Reviewed {
                call_id: c,
                decision,
                arguments_digest,
                ..
            } if c == call_id && arguments_digest == digest => Some(decision),
            _ => None,
        })
    }
}
