//! What a model's tokens cost, for a cost budget: built-in list prices for the built-in
//! providers' default models, overridable per budget (`[budget.prices."MODEL"]`).
//!
//! Prices change and differ by region and contract: the built-in table holds the
//! providers' published list prices as read on [`PRICES_READ`], and is meant to be
//! overridden. A cost budget on a model with no known price refuses to start rather
//! than guess.

use serde::{Deserialize, Serialize};

use crate::message::TokenUsage;

/// When the built-in prices were read from the providers' price pages.
pub const PRICES_READ: &str = "2025-10-01";

/// A model's price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens (reasoning included).
    pub output: f64,
    /// Per million input tokens read from the provider's cache; unset, they cost as
    /// input (the safe side of a budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
}

impl Price {
    /// A price of `input` and `output` dollars per million tokens.
    pub const fn per_million(input: f64, output: f64) -> Price {
        Price {
            input,
            output,
            cached_input: None,
        }
    }

    const fn cached(mut self, cached_input: f64) -> Price {
        self.cached_input = Some(cached_input);
        self
    }

    /// What a reported usage costs, in millionths of a dollar (rounded up).
    pub fn micro_usd(&self, usage: &TokenUsage) -> u64 {
        let cached = usage.cache_read_tokens.unwrap_or(0).min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        // Dollars per million tokens are millionths of a dollar per token.
        let per_token = |per_million: f64| per_million.max(0.0);
        let micro = fresh as f64 * per_token(self.input)
            + cached as f64 * per_token(self.cached_input.unwrap_or(self.input))
            + usage.output_tokens as f64 * per_token(self.output);
        micro.ceil() as u64
    }

    /// What a call may cost at most: `input` tokens in, `output` out, in millionths
    /// of a dollar (rounded up).
    pub fn reserve_micro_usd(&self, input: u64, output: u64) -> u64 {
        self.micro_usd(&TokenUsage::new(input, output))
    }

    /// Whether the price is usable (finite, not negative).
    pub fn is_valid(&self) -> bool {
        [self.input, self.output, self.cached_input.unwrap_or(0.0)]
            .iter()
            .all(|p| p.is_finite() && *p >= 0.0)
    }
}

/// The built-in list prices: the built-in providers' default models (as
/// [`crate::http`] names them), read on [`PRICES_READ`].
const BUILTIN: &[(&str, Price)] = &[
    // OpenAI (and Azure OpenAI deployments of the same model, and OpenRouter's).
    ("gpt-4.1", Price::per_million(2.00, 8.00).cached(0.50)),
    (
        "openai/gpt-4.1",
        Price::per_million(2.00, 8.00).cached(0.50),
    ),
    ("gpt-4.1-mini", Price::per_million(0.40, 1.60).cached(0.10)),
    ("gpt-5", Price::per_million(1.25, 10.00).cached(0.125)),
    ("gpt-5-mini", Price::per_million(0.25, 2.00).cached(0.025)),
    // Anthropic, direct and through the clouds (regional endpoints: the higher price).
    (
        "claude-sonnet-4-5",
        Price::per_million(3.00, 15.00).cached(0.30),
    ),
    (
        "claude-sonnet-4-5@20250929",
        Price::per_million(3.30, 16.50).cached(0.33),
    ),
    (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        Price::per_million(3.30, 16.50).cached(0.33),
    ),
    // Google.
    ("gemini-2.5-flash", Price::per_million(0.30, 2.50)),
    // OpenAI-compatible services.
    ("mistral-large-latest", Price::per_million(2.00, 6.00)),
    (
        "deepseek-chat",
        Price::per_million(0.28, 0.42).cached(0.028),
    ),
    ("llama-3.3-70b-versatile", Price::per_million(0.59, 0.79)),
    ("grok-4", Price::per_million(3.00, 15.00).cached(0.75)),
    (
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        Price::per_million(0.88, 0.88),
    ),
    // Ollama's default: a local model costs nothing per token.
    ("llama3.2", Price::per_million(0.0, 0.0)),
];

impl Price {
    /// The built-in price of `model`, when the table has it.
    pub fn builtin(model: &str) -> Option<Price> {
        BUILTIN.iter().find(|(m, _)| *m == model).map(|(_, p)| *p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_priced_with_cached_input_at_its_own_price() {
        let p = Price::builtin("gpt-4.1").unwrap();
        // 1M fresh input = $2, 1M output = $8.
        assert_eq!(p.micro_usd(&TokenUsage::new(1_000_000, 0)), 2_000_000);
        assert_eq!(p.micro_usd(&TokenUsage::new(0, 1_000_000)), 8_000_000);
        let mut u = TokenUsage::new(1_000_000, 0);
        u.cache_read_tokens = Some(1_000_000);
        assert_eq!(p.micro_usd(&u), 500_000);
        // Without a cached price, cached input costs as input.
        let q = Price::per_million(1.0, 1.0);
        assert_eq!(q.micro_usd(&u), 1_000_000);
        assert!(Price::builtin("no-such-model").is_none());
        assert!(BUILTIN.iter().all(|(_, p)| p.is_valid()));
        assert!(!Price::per_million(f64::NAN, 1.0).is_valid());
    }
}
