//! Budgets: how much a run may spend (tokens, cost, model calls, tool calls, wall-clock
//! time), its timeouts (per step, first chunk, idle stream, per tool), the counters of
//! what it spent, and what happens at the limit.
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
    /// Every open call is answered "not run", then the model gives one final answer
    /// without tools, within the margin [`Budget::final_answer_tokens`] keeps for it
    /// (the token limit stops other calls that many tokens early); then the run ends
    /// with [`RunOutcome::Stopped`](super::RunOutcome::Stopped).
    FinalAnswer,
}

impl OnExhausted {
    /// The word the configuration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            OnExhausted::Stop => "stop",
            OnExhausted::Error => "error",
            OnExhausted::FinalAnswer => "final_answer",
        }
    }
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
    /// Cost in US dollars, charged from the price table ([`super::Price`]): the
    /// built-in prices, overridden by [`Budget::prices`]. A run whose model has no
    /// known price refuses to start rather than guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Prices per model name, over the built-in ones (`[budget.prices."MODEL"]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, super::price::Price>,
    /// Wall-clock seconds from the run's first step: the run's total timeout (a model
    /// call still streaming at the limit is aborted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<f64>,
    /// Seconds one model call (one step) may take, from request to its last chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_seconds: Option<f64>,
    /// Seconds a model call may take to send its first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_chunk_seconds: Option<f64>,
    /// Seconds a stream may stay silent between two chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<f64>,
    /// Seconds a tool call may run, for tools that set no timeout of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_seconds: Option<f64>,
    /// With `on_exhausted = "final_answer"`: the tokens kept for the final answer
    /// (default [`DEFAULT_FINAL_ANSWER_TOKENS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_answer_tokens: Option<u64>,
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

/// The tokens kept for a final answer when the budget does not say.
pub const DEFAULT_FINAL_ANSWER_TOKENS: u64 = 1024;

/// The keys `--budget KEY=VALUE` knows.
const KEYS: &str = "tokens, cost_usd, model_calls, tool_calls, tool_calls.TOOL, wall_seconds, \
                    step_seconds, first_chunk_seconds, idle_seconds, tool_seconds, \
                    reserve_output_tokens, final_answer_tokens, on_exhausted";

impl Budget {
    /// True when it limits something.
    pub fn limits(&self) -> bool {
        self.tokens.is_some()
            || self.cost_usd.is_some()
            || self.model_calls.is_some()
            || self.tool_calls.is_some()
            || !self.per_tool.is_empty()
            || self.wall_seconds.is_some()
    }

    /// Whether a model call's stream is timed: a step, first-chunk or idle timeout, or
    /// a wall clock for the run.
    pub(super) fn times_streams(&self) -> bool {
        self.step_seconds.is_some()
            || self.first_chunk_seconds.is_some()
            || self.idle_seconds.is_some()
            || self.wall_seconds.is_some()
    }

    /// The token limit a call other than the final answer must stay under.
    pub(super) fn tokens_before_final(&self) -> Option<u64> {
        let max = self.tokens?;
        Some(if self.on_exhausted == OnExhausted::FinalAnswer {
            max.saturating_sub(
                self.final_answer_tokens
                    .unwrap_or(DEFAULT_FINAL_ANSWER_TOKENS),
            )
        } else {
            max
        })
    }

    /// A timeout as a duration.
    pub(super) fn seconds(s: Option<f64>) -> Option<Duration> {
        s.filter(|s| s.is_finite() && *s > 0.0)
            .map(Duration::from_secs_f64)
    }

    /// The price of `model`: the budget's own, else the built-in one.
    pub fn price(&self, model: &str) -> Option<super::price::Price> {
        self.prices
            .get(model)
            .copied()
            .or_else(|| super::price::Price::builtin(model))
    }

    /// True when it limits tool calls (in total or per tool).
    pub fn limits_tools(&self) -> bool {
        self.tool_calls.is_some() || !self.per_tool.is_empty()
    }

    /// Sets one limit from `KEY=VALUE` (`tokens`, `cost_usd`, `model_calls`,
    /// `tool_calls`, `tool_calls.NAME`, `wall_seconds`, the timeouts, `on_exhausted`):
    /// the CLI's `--budget`.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (key, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("{assignment:?} is not KEY=VALUE"))?;
        self.set_key(key.trim(), value.trim())
    }

    fn set_key(&mut self, key: &str, value: &str) -> Result<(), String> {
        let int = |v: &str| {
            v.replace('_', "")
                .parse::<u64>()
                .map_err(|_| format!("{key} takes a whole number, not {v:?}"))
        };
        let small = |v: &str| {
            int(v).and_then(|n| u32::try_from(n).map_err(|_| format!("{key} {n} is too large")))
        };
        let positive = |v: &str| {
            v.parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s > 0.0)
                .ok_or_else(|| format!("{key} takes a positive number, not {v:?}"))
        };
        match key {
            "tokens" => self.tokens = Some(int(value)?),
            "model_calls" => self.model_calls = Some(small(value)?),
            "tool_calls" => self.tool_calls = Some(small(value)?),
            "reserve_output_tokens" => self.reserve_output_tokens = Some(int(value)?),
            "final_answer_tokens" => self.final_answer_tokens = Some(int(value)?),
            "cost_usd" => self.cost_usd = Some(positive(value)?),
            "wall_seconds" => self.wall_seconds = Some(positive(value)?),
            "step_seconds" => self.step_seconds = Some(positive(value)?),
            "first_chunk_seconds" => self.first_chunk_seconds = Some(positive(value)?),
            "idle_seconds" => self.idle_seconds = Some(positive(value)?),
            "tool_seconds" => self.tool_seconds = Some(positive(value)?),
            "on_exhausted" => {
                self.on_exhausted = match value {
                    "stop" => OnExhausted::Stop,
                    "error" => OnExhausted::Error,
                    "final_answer" => OnExhausted::FinalAnswer,
                    other => {
                        return Err(format!(
                            "on_exhausted is stop, final_answer or error, not {other:?}"
                        ));
                    }
                }
            }
            other => match other.strip_prefix("tool_calls.") {
                Some(tool) if !tool.is_empty() => {
                    self.per_tool.insert(tool.to_owned(), small(value)?);
                }
                _ => return Err(format!("no budget is called {other:?} ({KEYS})")),
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
        self.cost_usd = min(self.cost_usd, other.cost_usd);
        self.wall_seconds = min(self.wall_seconds, other.wall_seconds);
        self.step_seconds = min(self.step_seconds, other.step_seconds);
        self.first_chunk_seconds = min(self.first_chunk_seconds, other.first_chunk_seconds);
        self.idle_seconds = min(self.idle_seconds, other.idle_seconds);
        self.tool_seconds = min(self.tool_seconds, other.tool_seconds);
        self.reserve_output_tokens = other.reserve_output_tokens.or(self.reserve_output_tokens);
        self.final_answer_tokens = other.final_answer_tokens.or(self.final_answer_tokens);
        for (model, price) in &other.prices {
            self.prices.insert(model.clone(), *price);
        }
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
    /// Cost charged, in millionths of a US dollar: settled calls at their reported
    /// usage, plus the open call's reservation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost_micro_usd: u64,
    /// Of it, reserved by a call not settled yet.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reserved_micro_usd: u64,
    /// When the run's first step began (Unix milliseconds); 0 before.
    #[serde(default)]
    pub started_ms: u64,
    /// The final answer a `final_answer` budget allows was asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_answer: bool,
    /// How many messages the conversation held when the run began (its last one the
    /// person's message that started it): a run resumed before anything was added, a
    /// crash during its first model call, is the same run and keeps its counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub began_at_message: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Spent {
    /// Tokens charged: reported and reserved.
    pub fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.reserved_tokens)
    }

    /// Dollars charged, reservation included.
    pub fn cost_usd(&self) -> f64 {
        self.cost_micro_usd as f64 / 1e6
    }

    /// Settles the open reservation with a call's reported usage, priced at `price`
    /// (none reported: the reservation stays charged, as the provider's bill is
    /// unknown).
    pub(super) fn settle(
        &mut self,
        usage: Option<&TokenUsage>,
        price: Option<super::price::Price>,
    ) {
        if let Some(u) = usage {
            self.reserved_tokens = 0;
            if let Some(p) = price {
                self.cost_micro_usd = self
                    .cost_micro_usd
                    .saturating_sub(self.reserved_micro_usd)
                    .saturating_add(p.micro_usd(u));
                self.reserved_micro_usd = 0;
            }
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
    /// What stopped it: `budget`, `hook` or `guard`.
    pub kind: String,
    /// Which limit: `tokens`, `cost_usd`, `model_calls`, `tool_calls`,
    /// `tool_calls.NAME`, `wall_seconds`; for a hook, its `id@version`.
    pub limit: String,
    /// The limit.
    pub max: f64,
    /// What was spent (and reserved).
    pub spent: f64,
    /// For a hook's stop, its reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RunStop {
    pub(super) fn budget(limit: impl Into<String>, max: f64, spent: f64) -> Self {
        RunStop {
            kind: "budget".into(),
            limit: limit.into(),
            max,
            spent,
            reason: None,
        }
    }

    /// A guard stopped the run (a tripwire, or a block of a person's message).
    pub(super) fn guard(guard: &str, reason: &str) -> Self {
        RunStop {
            kind: "guard".into(),
            limit: guard.to_owned(),
            max: 0.0,
            spent: 0.0,
            reason: Some(reason.to_owned()),
        }
    }

    /// A hook (`id@version`) stopped the run.
    pub(super) fn hook(hook: impl Into<String>, reason: impl Into<String>) -> Self {
        RunStop {
            kind: "hook".into(),
            limit: hook.into(),
            max: 0.0,
            spent: 0.0,
            reason: Some(reason.into()),
        }
    }
}

impl std::fmt::Display for RunStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.kind == "hook" || self.kind == "guard" {
            return write!(
                f,
                "the {} {} stopped the run: {}",
                self.kind,
                self.limit,
                self.reason.as_deref().unwrap_or("no reason given")
            );
        }
        if self.limit == "cost_usd" {
            return write!(
                f,
                "the run's cost_usd budget is spent (${:.4} of ${:.4})",
                self.spent, self.max
            );
        }
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
/// `reserve_micro_usd` is what the call would reserve of a cost budget.
pub(super) fn before_model_call(
    budget: &Budget,
    spent: &Spent,
    input_estimate: u64,
    reserve_micro_usd: u64,
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
    if let Some(max) = budget.tokens_before_final() {
        let after = spent.tokens().saturating_add(input_estimate);
        if after >= max {
            return Some(RunStop::budget("tokens", max as f64, after as f64));
        }
    }
    if let Some(max) = budget.cost_usd {
        let after = spent.cost_micro_usd.saturating_add(reserve_micro_usd);
        if after as f64 / 1e6 > max {
            return Some(RunStop::budget("cost_usd", max, after as f64 / 1e6));
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
            "cost_usd=0.5",
            "step_seconds=30",
            "first_chunk_seconds=5",
            "idle_seconds=2.5",
            "tool_seconds=10",
            "final_answer_tokens=500",
            "on_exhausted=error",
        ] {
            b.set(a).unwrap();
        }
        assert_eq!(b.tokens, Some(200_000));
        assert_eq!(b.model_calls, Some(40));
        assert_eq!(b.per_tool["charge"], 2);
        assert_eq!(b.on_exhausted, OnExhausted::Error);
        assert_eq!(b.cost_usd, Some(0.5));
        assert_eq!(b.idle_seconds, Some(2.5));
        assert_eq!(b.final_answer_tokens, Some(500));
        assert!(b.limits());
        b.set("on_exhausted=final_answer").unwrap();
        assert_eq!(b.tokens_before_final(), Some(199_500));
        for bad in [
            "tokens",
            "tokens=x",
            "cost=1",
            "cost_usd=-1",
            "idle_seconds=0",
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
        assert_eq!(before_model_call(&b, &s, 10, 0, 0), None);
        s.model_calls = 3;
        assert_eq!(
            before_model_call(&b, &s, 10, 0, 0).unwrap().limit,
            "model_calls"
        );
        s.model_calls = 0;
        s.reserved_tokens = 995;
        assert_eq!(before_model_call(&b, &s, 10, 0, 0).unwrap().limit, "tokens");
        s.settle(Some(&TokenUsage::new(100, 20)), None);
        assert_eq!((s.tokens(), s.reserved_tokens), (120, 0));
        // No usage reported: the reservation stays charged.
        s.reserved_tokens = 50;
        s.settle(None, None);
        assert_eq!(s.tokens(), 170);
    }

    #[test]
    fn cost_is_reserved_then_settled_at_the_reported_usage() {
        let mut b = Budget::default();
        b.set("cost_usd=0.01").unwrap();
        let price = crate::chain::Price::per_million(2.0, 8.0);
        let mut s = Spent::default();
        // 1,000 input and 1,000 output tokens reserved: $0.002 + $0.008 = $0.01.
        let reserve = price.reserve_micro_usd(1_000, 1_000);
        assert_eq!(reserve, 10_000);
        assert_eq!(before_model_call(&b, &s, 0, reserve, 0), None);
        assert_eq!(
            before_model_call(&b, &s, 0, reserve + 1, 0).unwrap().limit,
            "cost_usd"
        );
        s.cost_micro_usd = reserve;
        s.reserved_micro_usd = reserve;
        // Settled: 500 in, 100 out = $0.001 + $0.0008.
        s.settle(Some(&TokenUsage::new(500, 100)), Some(price));
        assert_eq!((s.cost_micro_usd, s.reserved_micro_usd), (1_800, 0));
        // A crash before settling keeps the reservation charged.
        s.cost_micro_usd += 5_000;
        s.reserved_micro_usd = 5_000;
        s.settle(None, Some(price));
        assert_eq!(s.cost_micro_usd, 6_800);
        let stop = RunStop::budget("cost_usd", 0.01, 0.0123);
        assert_eq!(
            stop.to_string(),
            "the run's cost_usd budget is spent ($0.0123 of $0.0100)"
        );
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
