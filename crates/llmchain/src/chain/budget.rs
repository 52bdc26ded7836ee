//! Budgets: how much a run may spend (tokens, model calls, tool calls, wall-clock time),
//! the counters of what it spent, and what happens at the limit.
//!
//! The counters ([`Spent`]) live in the run's state, so they survive a crash: a model
//! call is charged (its reservation: the request's input estimate plus its output
//! allowance) before it is made, durably when a budget limits the run, and settled
//! with the usage the provider reports. A run killed after 2 of its 3 allowed model
//! calls gets exactly 1 more, whichever process resumes it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::message::TokenUsage;

/// What happens when a budget runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExhausted {
    /// The run ends with [`RunOutcome::Stopped`](super::RunOutcome::Stopped), naming the
    /// budget; every open call is answered "not run".
    #[default]
    Stop,
    /// The run fails with [`ChainError::BudgetExhausted`](super::ChainError::BudgetExhausted)
    /// and keeps its partial transcript.
    Error,
}

/// How much a run may spend. Every limit is optional; an empty budget limits nothing
/// (and costs nothing: no durable reservation is written).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Tokens, input and output together (cached and reasoning tokens are part of
    /// them, as providers report them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<u32>,
    /// Tool calls that run (answered without running, a call is not charged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u32>,
    /// Tool calls per tool (by its name in the chain).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_tool: BTreeMap<String, u32>,
    /// Wall-clock seconds from the run's first step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<f64>,
    /// The output allowance reserved for a call whose request sets no `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_output_tokens: Option<u64>,
    /// What happens at the limit.
    #[serde(default)]
    pub on_exhausted: OnExhausted,
}

/// The output allowance reserved for a call when neither the request nor the budget
/// says.
pub const DEFAULT_RESERVED_OUTPUT_TOKENS: u64 = 4096;

impl Budget {
    /// True when it limits something.
    pub fn limits(&self) -> bool {
        self.tokens.is_some()
            || self.model_calls.is_some()
            || self.tool_calls.is_some()
            || !self.per_tool.is_empty()
            || self.wall_seconds.is_some()
    }

    /// True when it limits tool calls (in total or per tool).
    pub fn limits_tools(&self) -> bool {
        self.tool_calls.is_some() || !self.per_tool.is_empty()
    }

    /// Sets one limit from `KEY=VALUE` (`tokens`, `model_calls`, `tool_calls`,
    /// `tool_calls.NAME`, `wall_seconds`, `on_exhausted`): the CLI's `--budget`.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (key, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("{assignment:?} is not KEY=VALUE"))?;
        let (key, value) = (key.trim(), value.trim());
        let int = |v: &str| {
            v.replace('_', "")
                .parse::<u64>()
                .map_err(|_| format!("{key} takes a whole number, not {v:?}"))
        };
        let small = |v: &str| {
            int(v).and_then(|n| u32::try_from(n).map_err(|_| format!("{key} {n} is too large")))
        };
        match key {
            "tokens" => self.tokens = Some(int(value)?),
            "model_calls" => self.model_calls = Some(small(value)?),
            "tool_calls" => self.tool_calls = Some(small(value)?),
            "reserve_output_tokens" => self.reserve_output_tokens = Some(int(value)?),
            "wall_seconds" => {
                let s: f64 = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        format!("wall_seconds takes a positive number, not {value:?}")
                    })?;
                self.wall_seconds = Some(s);
            }
            "on_exhausted" => {
                self.on_exhausted = match value {
                    "stop" => OnExhausted::Stop,
                    "error" => OnExhausted::Error,
                    other => {
                        return Err(format!("on_exhausted is stop or error, not {other:?}"));
                    }
                }
            }
            other => match other.strip_prefix("tool_calls.") {
                Some(tool) if !tool.is_empty() => {
                    self.per_tool.insert(tool.to_owned(), small(value)?);
                }
                _ => {
                    return Err(format!(
                        "no budget is called {other:?} (tokens, model_calls, tool_calls, \
                         tool_calls.TOOL, wall_seconds, reserve_output_tokens, on_exhausted)"
                    ));
                }
            },
        }
        Ok(())
    }

    /// This budget with every limit `other` sets (the stricter where both do).
    #[must_use]
    pub fn tightened_by(mut self, other: &Budget) -> Budget {
        fn min<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        self.tokens = min(self.tokens, other.tokens);
        self.model_calls = min(self.model_calls, other.model_calls);
        self.tool_calls = min(self.tool_calls, other.tool_calls);
        self.wall_seconds = min(self.wall_seconds, other.wall_seconds);
        self.reserve_output_tokens = other.reserve_output_tokens.or(self.reserve_output_tokens);
        for (tool, n) in &other.per_tool {
            let e = self.per_tool.entry(tool.clone()).or_insert(*n);
            *e = (*e).min(*n);
        }
        if other.on_exhausted != OnExhausted::default() {
            self.on_exhausted = other.on_exhausted;
        }
        self
    }
}

/// What a run has spent; part of its state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Spent {
    /// Model calls made (each charged before it is made).
    #[serde(default)]
    pub model_calls: u32,
    /// Tool calls run.
    #[serde(default)]
    pub tool_calls: u32,
    /// Tool calls run, per tool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_tool: BTreeMap<String, u32>,
    /// Input tokens the providers reported.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens the providers reported.
    #[serde(default)]
    pub output_tokens: u64,
    /// Of the input, read from the provider's cache.
    #[serde(default)]
    pub cached_tokens: u64,
    /// Of the output, spent reasoning.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Tokens reserved by a call not settled yet (a crash keeps them charged).
    #[serde(default)]
    pub reserved_tokens: u64,
    /// When the run's first step began (Unix milliseconds); 0 before.
    #[serde(default)]
    pub started_ms: u64,
}

impl Spent {
    /// Tokens charged: reported and reserved.
    pub fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.reserved_tokens)
    }

    /// Settles the open reservation with a call's reported usage (none reported: the
    /// reservation stays charged, as the provider's bill is unknown).
    pub(super) fn settle(&mut self, usage: Option<&TokenUsage>) {
        if let Some(u) = usage {
            self.reserved_tokens = 0;
            self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
            self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
            self.cached_tokens = self
                .cached_tokens
                .saturating_add(u.cache_read_tokens.unwrap_or(0));
            self.reasoning_tokens = self
                .reasoning_tokens
                .saturating_add(u.reasoning_tokens.unwrap_or(0));
        }
    }
}

/// Why a run stopped before its end (not an error: a decision).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunStop {
    /// What stopped it: `budget`.
    pub kind: String,
    /// Which limit: `tokens`, `model_calls`, `tool_calls`, `tool_calls.NAME`,
    /// `wall_seconds`.
    pub limit: String,
    /// The limit.
    pub max: f64,
    /// What was spent (and reserved).
    pub spent: f64,
}

impl RunStop {
    pub(super) fn budget(limit: impl Into<String>, max: f64, spent: f64) -> Self {
        RunStop {
            kind: "budget".into(),
            limit: limit.into(),
            max,
            spent,
        }
    }
}

impl std::fmt::Display for RunStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the run's {} budget is spent ({} of {})",
            self.limit,
            number(self.spent),
            number(self.max)
        )
    }
}

/// A count as a count (`3`, not `3.0`); seconds keep their tenths.
pub fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.1}")
    }
}

/// The budget check before a model call: `Some` when the call may not be made.
pub(super) fn before_model_call(
    budget: &Budget,
    spent: &Spent,
    input_estimate: u64,
    now_ms: u64,
) -> Option<RunStop> {
    if let Some(max) = budget.model_calls
        && spent.model_calls >= max
    {
        return Some(RunStop::budget(
            "model_calls",
            max.into(),
            spent.model_calls.into(),
        ));
    }
    if let Some(max) = budget.tokens {
        let after = spent.tokens().saturating_add(input_estimate);
        if after >= max {
            return Some(RunStop::budget("tokens", max as f64, after as f64));
        }
    }
    wall(budget, spent, now_ms)
}

/// The budget check before a call of `tool` runs: `Some` when it may not.
pub(super) fn before_tool_call(budget: &Budget, spent: &Spent, tool: &str) -> Option<RunStop> {
    if let Some(max) = budget.tool_calls
        && spent.tool_calls >= max
    {
        return Some(RunStop::budget(
            "tool_calls",
            max.into(),
            spent.tool_calls.into(),
        ));
    }
    if let Some(&max) = budget.per_tool.get(tool) {
        let used = spent.per_tool.get(tool).copied().unwrap_or(0);
        if used >= max {
            return Some(RunStop::budget(
                format!("tool_calls.{tool}"),
                max.into(),
                used.into(),
            ));
        }
    }
    None
}

/// The wall-clock check: `Some` once the run is older than its budget allows.
pub(super) fn wall(budget: &Budget, spent: &Spent, now_ms: u64) -> Option<RunStop> {
    let max = budget.wall_seconds?;
    if spent.started_ms == 0 {
        return None;
    }
    let age = Duration::from_millis(now_ms.saturating_sub(spent.started_ms)).as_secs_f64();
    (age >= max).then(|| RunStop::budget("wall_seconds", max, (age * 10.0).round() / 10.0))
}

/// The tokens of a request, estimated from its size (about four bytes a token), for
/// the reservation made before the provider says.
pub(super) fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_set_from_key_value_words() {
        let mut b = Budget::default();
        assert!(!b.limits());
        for a in [
            "tokens=200_000",
            "model_calls=40",
            "tool_calls=100",
            "tool_calls.charge=2",
            "wall_seconds=600",
            "on_exhausted=error",
        ] {
            b.set(a).unwrap();
        }
        assert_eq!(b.tokens, Some(200_000));
        assert_eq!(b.model_calls, Some(40));
        assert_eq!(b.per_tool["charge"], 2);
        assert_eq!(b.on_exhausted, OnExhausted::Error);
        assert!(b.limits());
        for bad in [
            "tokens",
            "tokens=x",
            "cost=1",
            "wall_seconds=-1",
            "on_exhausted=later",
            "tool_calls.=1",
        ] {
            assert!(b.set(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tightening_keeps_the_stricter_limit() {
        let mut a = Budget::default();
        a.set("tokens=100").unwrap();
        a.set("model_calls=5").unwrap();
        let mut b = Budget::default();
        b.set("tokens=50").unwrap();
        b.set("tool_calls=3").unwrap();
        let t = a.tightened_by(&b);
        assert_eq!(
            (t.tokens, t.model_calls, t.tool_calls),
            (Some(50), Some(5), Some(3))
        );
    }

    #[test]
    fn a_call_is_refused_at_the_limit_and_a_reservation_counts() {
        let mut b = Budget::default();
        b.set("model_calls=3").unwrap();
        b.set("tokens=1000").unwrap();
        let mut s = Spent {
            model_calls: 2,
            ..Default::default()
        };
        assert_eq!(before_model_call(&b, &s, 10, 0), None);
        s.model_calls = 3;
        assert_eq!(
            before_model_call(&b, &s, 10, 0).unwrap().limit,
            "model_calls"
        );
        s.model_calls = 0;
        s.reserved_tokens = 995;
        assert_eq!(before_model_call(&b, &s, 10, 0).unwrap().limit, "tokens");
        s.settle(Some(&TokenUsage::new(100, 20)));
        assert_eq!((s.tokens(), s.reserved_tokens), (120, 0));
        // No usage reported: the reservation stays charged.
        s.reserved_tokens = 50;
        s.settle(None);
        assert_eq!(s.tokens(), 170);
    }

    #[test]
    fn the_wall_clock_counts_from_the_first_step() {
        let mut b = Budget::default();
        b.set("wall_seconds=2").unwrap();
        let s = Spent {
            started_ms: 10_000,
            ..Default::default()
        };
        assert_eq!(wall(&b, &s, 11_000), None);
        assert_eq!(wall(&b, &s, 12_500).unwrap().limit, "wall_seconds");
        assert_eq!(wall(&b, &Spent::default(), 99_000), None);
    }
}
