//! Whether a call may run: the one place that decides, in a fixed order.
//!
//! **When a batch comes in** ([`LLMChain::decide_call`], for each complete call;
//! again on resume, where journaled decisions are replayed):
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
//! **When the batch runs** ([`LLMChain::plan_batch`], every call of the batch, each
//! refusal journaled or saved before any body starts):
//!
//! 6. **The per-turn caps** ([`LLMChain::max_calls_per_turn`],
//!    [`LLMChain::max_call_argument_bytes_per_turn`]): a message over one has none of its
//!    calls run (a [`Decision::Cap`], journaled once).
//! 7. **At most once**, again, and then the decision from 1–5: run, run edited, deny,
//!    reject.
//! 8. **Your hooks' `before_tool`** ([`super::Hook`]), outermost first, on each call
//!    still allowed to run: run, rewrite, answer without running, or stop.
//! 9. **The tool-call budget** ([`Budget`](super::Budget)): a call over a limit is
//!    answered without running and the run stops after the batch; each call that runs is
//!    charged before any body starts.
//!
//! What happens after a call ran (the failure budget, the repeat guard, `after_tool`)
//! is in `execute.rs`; it decides whether the run goes on, never whether a call runs.

use std::panic::AssertUnwindSafe;

use serde_json::{Map, Value};

use super::error::ChainError;
use super::journal::Decision;
use super::llm_chain::LLMChain;
use super::review::ReviewDecision;
use super::state::PendingCall;
use crate::guard::Point;
use crate::message::{Arguments, ExecutionStatus, Message, ToolCall, ToolResult};
use crate::policy::{CallFacts, Effect, Ruling, arguments_digest};

use super::guard_points::Guarded;

/// What happens to one call of a batch. (Short-lived, one per call: boxing would only
/// add allocations.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Plan {
    /// Run it (arguments possibly edited).
    Run(ToolCall),
    /// Answered without running, with the status that says how.
    Answer(ToolResult, ExecutionStatus),
}

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
        // 1. At most once: `plan_batch` answers it "outcome unknown" without running it.
        if self.outcome_unknown(call) {
            return Ok(Decided {
                decision: Some(ReviewDecision::Approve),
                rule: None,
            });
        }
        let guarding = self.guards.any_at(Point::ToolArguments);

        if self.policies.is_empty() && self.review.is_none() && !guarding {
            return Ok(Decided {
                decision: Some(person.unwrap_or(ReviewDecision::Approve)),
                rule: None,
            });
        }
        // The arguments the call would run with.
        let mut arguments = match &person {
            Some(ReviewDecision::Edit { arguments }) => arguments.clone(),
            _ => call.arguments_as_map(),
        };
        // 2. Policies.
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
            return Ok(Decided {
                decision: Some(ReviewDecision::Deny { reason }),
                rule,
            });
        }
        // 2b. Guards on the arguments: a call a guard blocks is never offered to a
        // person; one it rewrote is reviewed, and runs, as rewritten.
        let mut rewritten = false;
        // Refused by the guards as the answer was stored (its arguments withheld).
        if guarding && let Some(reason) = self.refused_at_answer(call) {
            return Ok(Decided {
                decision: Some(ReviewDecision::Deny { reason }),
                rule,
            });
        }
        if guarding {
            match self.guard_arguments(call, &arguments) {
                Guarded::Same => {}
                Guarded::Rewritten(map) => {
                    arguments = map;
                    rewritten = true;
                }
                Guarded::Refused(reason) => {
                    return Ok(Decided {
                        decision: Some(ReviewDecision::Deny { reason }),
                        rule,
                    });
                }
            }
        }
        let mut d = self
            .decide_after_guards(call, person, ruling, rule, &arguments, rewritten)
            .await?;
        match d.decision.take() {
            // A rewrite runs as rewritten, whoever allowed it.
            Some(ReviewDecision::Approve) if rewritten => {
                d.decision = Some(ReviewDecision::Edit { arguments });
            }
            // The review handler's own edit passes the guards too (a person's was the
            // arguments guarded above: guarding it again changes nothing).
            Some(ReviewDecision::Edit { arguments: edited }) if guarding => {
                d.decision = Some(match self.guard_arguments(call, &edited) {
                    Guarded::Same => ReviewDecision::Edit { arguments: edited },
                    Guarded::Rewritten(map) => ReviewDecision::Edit { arguments: map },
                    Guarded::Refused(reason) => ReviewDecision::Deny { reason },
                });
            }
            other => d.decision = other,
        }
        Ok(d)
    }

    /// Steps 3–5 of the module docs, on the call's `arguments` (as the guards left them:
    /// `rewritten`).
    async fn decide_after_guards(
        &mut self,
        call: &ToolCall,
        person: Option<ReviewDecision>,
        ruling: Option<Ruling>,
        rule: Option<String>,
        arguments: &Map<String, Value>,
        rewritten: bool,
    ) -> Result<Decided, ChainError> {
        let decided = |decision: ReviewDecision, rule: Option<String>| Decided {
            decision: Some(decision),
            rule,
        };
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
        let digest = arguments_digest(arguments);
        let id = call.call_id.clone().unwrap_or_default();
        if let Some(d) = self.state.journal.reviewed(&id, &digest) {
            return Ok(decided(d.clone(), rule));
        }
        // 5. The review handler, shown the call as the guards left it.
        let shown;
        let call = if rewritten {
            let mut c = call.clone();
            c.arguments = Some(Arguments::Object(arguments.clone()));
            shown = c;
            &shown
        } else {
            call
        };
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

impl LLMChain {
    /// Why the calls of `message` are too many or too large to run, if they are: the
    /// answer they get, and the cap's decision for the journal.
    fn turn_over_cap(&self, message: &Message) -> Option<(String, Decision)> {
        let cap = |limit: &str, max: usize, spent: usize| Decision::Cap {
            limit: limit.to_owned(),
            max: max as f64,
            spent: spent as f64,
            call_ids: message
                .tool_calls
                .iter()
                .filter_map(|c| c.call_id.clone())
                .collect(),
        };
        let n = message.tool_calls.len();
        if n > self.max_calls_per_turn {
            return Some((
                format!(
                    "Not run: this message makes {n} tool calls, more than the {} allowed in one \
                     turn. Make fewer calls at once.",
                    self.max_calls_per_turn
                ),
                cap("calls_per_turn", self.max_calls_per_turn, n),
            ));
        }
        let bytes: usize = message
            .tool_calls
            .iter()
            .map(|c| match &c.arguments {
                Some(Arguments::Raw(r)) => r.len(),
                Some(Arguments::Object(m)) => serde_json::to_vec(m).map_or(0, |v| v.len()),
                None => 0,
            })
            .sum();
        (bytes > self.max_call_argument_bytes_per_turn).then(|| {
            (
                format!(
                    "Not run: the tool calls of this message carry {bytes} bytes of arguments, \
                     more than the {} allowed in one turn. Send less at once.",
                    self.max_call_argument_bytes_per_turn
                ),
                cap(
                    "argument_bytes_per_turn",
                    self.max_call_argument_bytes_per_turn,
                    bytes,
                ),
            )
        })
    }

    /// Whether `call` may have run already (an earlier process stored it `executing`,
    /// or finished, without its result) and its tool is not idempotent: it is answered
    /// "outcome unknown" and never run again, whoever resumes and whatever was decided.
    pub(super) fn outcome_unknown(&self, call: &ToolCall) -> bool {
        call.may_have_run()
            && !call
                .name
                .as_deref()
                .and_then(|n| self.tool(n))
                .is_some_and(|t| t.idempotent())
    }

    /// What happens to each call of the message at `targets` (steps 6–9 of the module
    /// docs), given the decisions made when the batch came in (those of the calls in
    /// `human` made by a person): each call's plan and the policy rule behind it.
    pub(super) async fn plan_batch(
        &mut self,
        message: &Message,
        targets: &[usize],
        decisions: &[PendingCall],
        human: &std::collections::HashSet<String>,
    ) -> Result<(Vec<Plan>, Vec<Option<String>>), ChainError> {
        let over_cap = self.turn_over_cap(message).map(|(why, decision)| {
            // Journaled before any call is answered (saved with the tool message), once
            // (a batch run again after a crash refuses the same calls again).
            if !self
                .state
                .journal
                .entries()
                .iter()
                .any(|e| e.decision == decision)
            {
                self.state.journal.record(decision);
            }
            why
        });
        let mut plans = Vec::with_capacity(targets.len());
        // The policy rule behind each call's decision (its `execute_tool` span's
        // `llmchain.policy.rule`).
        let mut rules: Vec<Option<String>> = Vec::with_capacity(targets.len());
        for call in targets.iter().map(|&i| &message.tool_calls[i]) {
            let id = call.call_id.clone().unwrap_or_default();
            let name = call.name.clone().unwrap_or_default();
            let decided = decisions.iter().find(|d| !id.is_empty() && d.call_id == id);
            let decision = decided
                .and_then(|d| d.decision.clone())
                .unwrap_or(ReviewDecision::Approve);
            let rule = decided.and_then(|d| d.rule.clone());
            rules.push(rule.clone());
            let plan = if let Some(why) = &over_cap {
                Plan::Answer(
                    ToolResult::refusal(&id, why.clone()).with_name(&name),
                    ExecutionStatus::Rejected,
                )
            } else if !call.is_complete() {
                // The executor answers incomplete calls with a refusal.
                Plan::Run(call.clone())
            } else if self.outcome_unknown(call) {
                Plan::Answer(
                    ToolResult::outcome_unknown(&id, &name),
                    ExecutionStatus::Failed,
                )
            } else {
                let by_person = human.contains(&id);
                match decision {
                    ReviewDecision::Approve
                    | ReviewDecision::Interrupt
                    | ReviewDecision::Edit { .. } => {
                        let mut allowed = call.clone();
                        if let ReviewDecision::Edit { arguments } = decision {
                            allowed.record_edit(arguments);
                        }
                        if by_person {
                            allowed.record_human_approval();
                        }
                        if let Some(rule) = &rule {
                            allowed
                                .metadata
                                .insert("policy_rule".into(), rule.clone().into());
                        }
                        Plan::Run(allowed)
                    }
                    ReviewDecision::Reject { reason } => Plan::Answer(
                        ToolResult::refusal(&id, reason).with_name(&name),
                        ExecutionStatus::Rejected,
                    ),
                    ReviewDecision::Deny { reason } => Plan::Answer(
                        ToolResult::text(
                            &id,
                            if reason.is_empty() {
                                format!("Tool call '{name}' was denied.")
                            } else {
                                reason
                            },
                        )
                        .with_name(&name),
                        ExecutionStatus::Denied,
                    ),
                }
            };
            plans.push(plan);
        }

        // Your hooks, on each call allowed to run (outermost first): run it, rewrite
        // its arguments, answer it without running, or stop the run after the batch.
        if !self.hooks.is_empty() {
            for plan in plans.iter_mut() {
                let Plan::Run(call) = plan else { continue };
                if !call.is_complete() {
                    continue;
                }
                let id = call.call_id.clone().unwrap_or_default();
                let name = call.name.clone().unwrap_or_default();
                let (verdict, by) = self.before_tool(call).await;
                match verdict {
                    super::hook::BeforeTool::Run | super::hook::BeforeTool::Rewrite { .. } => {}
                    super::hook::BeforeTool::Answer { result } => {
                        *plan = Plan::Answer(
                            ToolResult::text(&id, result).with_name(&name),
                            ExecutionStatus::Denied,
                        );
                    }
                    super::hook::BeforeTool::Stop { reason } => {
                        let stop = super::budget::RunStop::hook(by, reason);
                        *plan = Plan::Answer(
                            ToolResult::text(&id, format!("Not run: {stop}.")).with_name(&name),
                            ExecutionStatus::Denied,
                        );
                        self.stop_after_batch.get_or_insert(Box::new(stop));
                    }
                }
            }
        }

        // The tool-call budget: a call over it is answered without running, and the run
        // stops after the batch. Every call that runs is charged before any body starts.
        let mut charged = false;
        for (plan, &i) in plans.iter_mut().zip(targets) {
            let Plan::Run(call) = plan else { continue };
            if !call.is_complete() {
                continue;
            }
            let name = call.name.clone().unwrap_or_default();
            if let Some(stop) =
                super::budget::before_tool_call(&self.budget, &self.state.spent, &name)
            {
                let id = message.tool_calls[i].call_id.clone().unwrap_or_default();
                *plan = Plan::Answer(
                    ToolResult::text(&id, format!("Not run: {stop}.")).with_name(&name),
                    ExecutionStatus::Denied,
                );
                self.stop_after_batch.get_or_insert(Box::new(stop));
                continue;
            }
            self.state.spent.tool_calls += 1;
            *self.state.spent.per_tool.entry(name).or_insert(0) += 1;
            charged = true;
        }
        if charged && self.budget.limits_tools() {
            self.checkpoint().await?;
        }

        Ok((plans, rules))
    }
}
