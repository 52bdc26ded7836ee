//! Whether a call may run: the one place that decides, in a fixed order.
//!
//! For each complete call of a batch, outermost first:
//!
//! 1. **At most once.** A non-idempotent call an earlier process may have started is
//!    answered "outcome unknown" and never run again, whatever else says.
//! 2. **Policies** ([`crate::policy`]), every one ruling, combined as deny > ask > allow.
//!    A policy that panics denies. Each ruling is journaled with its rule's id before it
//!    takes effect; a journaled ruling is replayed, not made again, unless the policy
//!    changed since, and then the new ruling applies only if it is stricter. A call a
//!    person approved or edited passes the deny rules again, on its final arguments.
//! 3. **A person's decision** (from the review inbox, on resume), when one is given.
//! 4. **A journaled review**: what the review handler decided before a crash stands.
//! 5. **The review handler**: asked about calls no policy allowed; a call a policy
//!    sends to review goes to [`ReviewHandler::review_asked`](super::ReviewHandler::review_asked)
//!    (by default: a person decides).
//!
//! The budget ([`Budget`](super::Budget)) then refuses, when the batch runs, every
//! call over its tool-call limits; the run stops after the batch.

use std::panic::AssertUnwindSafe;

use serde_json::{Map, Value};

use super::error::ChainError;
use super::journal::Decision;
use super::llm_chain::LLMChain;
use super::review::ReviewDecision;
use crate::message::ToolCall;
use crate::policy::{CallFacts, Effect, Ruling, arguments_digest};

/// What the decision stack made of one call.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Decided {
    /// `None` while a person must decide.
    pub(super) decision: Option<ReviewDecision>,
    /// The policy rule behind the decision, if one ruled.
    pub(super) rule: Option<String>,
}

impl LLMChain {
    /// The tool's name as policies match it.
    fn policy_name<'a>(&'a self, call: &'a ToolCall) -> &'a str {
        let name = call.name.as_deref().unwrap_or("");
        self.tool(name).map_or(name, |t| t.policy_name())
    }

    /// Every policy's ruling on a call with `arguments`, journaled; the strictest
    /// enforced one.
    pub(super) fn rule_call(
        &mut self,
        call: &ToolCall,
        arguments: &Map<String, Value>,
    ) -> Option<Ruling> {
        if self.policies.is_empty() {
            return None;
        }
        let call_id = call.call_id.clone().unwrap_or_default();
        let tool = self.policy_name(call).to_owned();
        let digest = arguments_digest(arguments);
        let mut strictest: Option<Ruling> = None;
        let policies = self.policies.clone();
        for policy in &policies {
            let policy_id = policy.id().to_owned();
            let policy_digest = policy.digest();
            // A ruling on these very arguments, journaled before: replayed.
            let stored = self
                .state
                .journal
                .policy_rulings(&call_id, &policy_id)
                .filter(|(.., a, _)| *a == digest)
                .last()
                .map(|(effect, rule, reason, _, d)| {
                    (
                        Ruling {
                            effect,
                            rule: rule.to_owned(),
                            reason: reason.map(str::to_owned),
                        },
                        d == policy_digest,
                    )
                });
            let ruling = match stored {
                Some((ruling, true)) => Some(ruling),
                stored => {
                    let facts = CallFacts::new(&tool, arguments);
                    let rulings = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        policy.rule(&facts)
                    }))
                    .unwrap_or_else(|_| crate::policy::Rulings {
                        enforced: Some(Ruling {
                            effect: Effect::Deny,
                            rule: format!("{policy_id}:failed"),
                            reason: Some(format!(
                                "Not run: the policy {policy_id} failed while ruling on this call."
                            )),
                        }),
                        shadowed: None,
                    });
                    let fresh = rulings.enforced;
                    // The policy changed since its stored ruling: the new one applies
                    // only if it is stricter.
                    let ruling = match (stored.map(|(r, _)| r), fresh) {
                        (Some(old), Some(new)) if new.effect > old.effect => Some(new),
                        (Some(old), _) => Some(old),
                        (None, fresh) => fresh,
                    };
                    if let Some(r) = &ruling {
                        self.state.journal.record(Decision::Policy {
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            effect: r.effect,
                            policy: policy_id.clone(),
                            rule: r.rule.clone(),
                            reason: r.reason.clone(),
                            shadow: false,
                            arguments_digest: digest.clone(),
                            policy_digest: policy_digest.clone(),
                        });
                    }
                    if let Some(s) = rulings.shadowed
                        && !self.state.journal.has_shadow(&call_id, &policy_id)
                    {
                        self.state.journal.record(Decision::Policy {
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            effect: s.effect,
                            policy: policy_id.clone(),
                            rule: s.rule,
                            reason: s.reason,
                            shadow: true,
                            arguments_digest: digest.clone(),
                            policy_digest: policy_digest.clone(),
                        });
                    }
                    ruling
                }
            };
            if let Some(r) = ruling
                && strictest.as_ref().is_none_or(|s| r.effect > s.effect)
            {
                strictest = Some(r);
            }
        }
        strictest
    }

    /// Decides about one complete call (see the module docs). `person` is a person's
    /// decision, when one was given for it.
    pub(super) async fn decide_call(
        &mut self,
        call: &ToolCall,
        person: Option<ReviewDecision>,
    ) -> Result<Decided, ChainError> {
        let decided = |decision: ReviewDecision, rule: Option<String>| Decided {
            decision: Some(decision),
            rule,
        };
        // 1. At most once: `run_batch` answers it "outcome unknown" without running it.
        if self.outcome_unknown(call) {
            return Ok(decided(ReviewDecision::Approve, None));
        }
        if self.policies.is_empty() && self.review.is_none() {
            return Ok(decided(person.unwrap_or(ReviewDecision::Approve), None));
        }
        // 2. Policies, on the arguments the call would run with.
        let arguments = match &person {
            Some(ReviewDecision::Edit { arguments }) => arguments.clone(),
            _ => call.arguments_as_map(),
        };
        let ruling = self.rule_call(call, &arguments);
        let rule = ruling.as_ref().map(|r| r.rule.clone());
        if let Some(r) = &ruling
            && r.effect == Effect::Deny
        {
            let name = call.name.as_deref().unwrap_or("");
            let reason = match &r.reason {
                Some(why) => format!("Not run: {why} (policy rule {}).", r.rule),
                None => format!("Not run: policy rule {} denies {name}.", r.rule),
            };
            return Ok(decided(ReviewDecision::Deny { reason }, rule));
        }
        // 3. A person's decision.
        if let Some(d) = person {
            return Ok(decided(d, rule));
        }
        let ask = match &ruling {
            Some(r) if r.effect == Effect::Allow => {
                return Ok(decided(ReviewDecision::Approve, rule));
            }
            Some(r) => Some(r.clone()),
            None => None,
        };
        let Some(handler) = self.review.clone() else {
            // No one reviews here: a call sent to review waits for a person.
            return Ok(Decided {
                decision: if ask.is_some() {
                    None
                } else {
                    Some(ReviewDecision::Approve)
                },
                rule,
            });
        };
        // 4. What the review handler decided before (a crash does not ask again).
        let digest = arguments_digest(&arguments);
        let id = call.call_id.clone().unwrap_or_default();
        if let Some(d) = self.state.journal.reviewed(&id, &digest) {
            return Ok(decided(d.clone(), rule));
        }
        // 5. The review handler.
        let d = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(ChainError::Cancelled),
            d = async {
                match &ask {
                    Some(r) => handler.review_asked(call, r).await,
                    None => handler.review(call).await,
                }
            } => d,
        };
        self.fire(|cb| cb.on_tool_call_review(call, &d));
        if d == ReviewDecision::Interrupt {
            return Ok(Decided {
                decision: None,
                rule,
            });
        }
        self.state.journal.record(Decision::Reviewed {
            call_id: id,
            tool: call.name.clone().unwrap_or_default(),
            decision: d.clone(),
            arguments_digest: digest,
        });
        Ok(decided(d, rule))
    }
}
