//! The token usage of a run, summed over its model calls and said in one line.

use llmchain::message::{Message, TokenUsage};

/// The usage of every message that reports one, added up.
pub(crate) fn total(messages: &[Message]) -> TokenUsage {
    messages
        .iter()
        .filter_map(Message::usage)
        .fold(TokenUsage::default(), |mut sum, u| {
            sum.add(u);
            sum
        })
}

/// `1200 input (1024 from cache, 20 written to it) / 90 output (64 reasoning) tokens`:
/// the cache and reasoning figures only where a provider reported them.
pub(crate) fn summary(u: &TokenUsage) -> String {
    let mut input = Vec::new();
    if let Some(n) = u.cache_read_tokens {
        input.push(format!("{n} from cache"));
    }
    if let Some(n) = u.cache_write_tokens {
        input.push(format!("{n} written to it"));
    }
    let aside = |notes: Vec<String>| {
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join(", "))
        }
    };
    let output = u
        .reasoning_tokens
        .map(|n| vec![format!("{n} reasoning")])
        .unwrap_or_default();
    format!(
        "{} input{} / {} output{} tokens",
        u.input_tokens,
        aside(input),
        u.output_tokens,
        aside(output)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_the_cache_and_reasoning_only_when_reported() {
        assert_eq!(
            summary(&TokenUsage::new(10, 5)),
            "10 input / 5 output tokens"
        );
        let u = TokenUsage::new(1200, 90)
            .with_cache(Some(1024), Some(20))
            .with_reasoning(Some(64));
        assert_eq!(
            summary(&u),
            "1200 input (1024 from cache, 20 written to it) / 90 output (64 reasoning) tokens"
        );
        let mut a = Message::assistant("a");
        a.set_usage(TokenUsage::new(1, 2).with_cache(Some(1), None));
        let mut b = Message::assistant("b");
        b.set_usage(TokenUsage::new(3, 4).with_reasoning(Some(2)));
        let t = total(&[a, b, Message::user("u")]);
        assert_eq!(
            t,
            TokenUsage::new(4, 6)
                .with_cache(Some(1), None)
                .with_reasoning(Some(2))
        );
    }
}
