//! [`TokenUsage`]: tokens a model call consumed.

use serde::{Deserialize, Serialize};

/// Input and output tokens, as each provider reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens (including cached ones).
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens (including reasoning).
    #[serde(default)]
    pub output_tokens: u64,
}

impl TokenUsage {
    /// A usage record.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        TokenUsage {
            input_tokens,
            output_tokens,
        }
    }

    /// Adds another record (saturating).
    pub fn add(&mut self, other: TokenUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }

    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}
