//! [`TokenUsage`]: tokens a model call consumed.

use serde::{Deserialize, Serialize};

/// Input and output tokens, as each provider reports them, with the cache and
/// reasoning figures where the provider gives them (each is part of the input or
/// output count, not added to it).
///
/// ```
/// use llmchain::message::TokenUsage;
/// let u = TokenUsage::new(2100, 90).with_cache(Some(2048), None).with_reasoning(Some(64));
/// assert_eq!(u.cache_read_tokens, Some(2048));
/// assert_eq!(u.total(), 2190);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TokenUsage {
    /// Prompt tokens (including cached ones).
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens (including reasoning).
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (OpenAI `cached_tokens`,
    /// Anthropic `cache_read_input_tokens`, Gemini `cachedContentTokenCount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache (Anthropic
    /// `cache_creation_input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Output tokens spent on reasoning (OpenAI `reasoning_tokens`, Gemini
    /// `thoughtsTokenCount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl TokenUsage {
    /// A usage record.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        TokenUsage {
            input_tokens,
            output_tokens,
            ..TokenUsage::default()
        }
    }

    /// With the prompt-cache figures.
    #[must_use]
    pub fn with_cache(mut self, read: Option<u64>, write: Option<u64>) -> Self {
        self.cache_read_tokens = read;
        self.cache_write_tokens = write;
        self
    }

    /// With the reasoning figure.
    #[must_use]
    pub fn with_reasoning(mut self, reasoning: Option<u64>) -> Self {
        self.reasoning_tokens = reasoning;
        self
    }

    /// Adds another record (saturating); a figure only one of them reports is kept.
    pub fn add(&mut self, other: TokenUsage) {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            }
        }
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = sum(self.cache_read_tokens, other.cache_read_tokens);
        self.cache_write_tokens = sum(self.cache_write_tokens, other.cache_write_tokens);
        self.reasoning_tokens = sum(self.reasoning_tokens, other.reasoning_tokens);
    }

    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}
