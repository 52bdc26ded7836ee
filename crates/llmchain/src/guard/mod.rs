//! Guards: checks on what goes into and comes out of the tools and the model, in the
//! decision stack's guard layer (after the policies, before review and your hooks).
//!
//! A [`Guard`] looks at text at a [`Point`] and gives a [`Verdict`]: allow, rewrite
//! (redact), block (with a message for the model), or tripwire (the run stops). Where
//! the chain asks them ([`LLMChain::with_guard`](crate::chain::LLMChain::with_guard)):
//!
//! | point | when | block | tripwire |
//! |---|---|---|---|
//! | [`Point::UserMessage`] | before each model call, on every person's message not checked yet | the model is not called; the run stops | the run stops |
//! | [`Point::ToolArguments`] | on each call's arguments as the answer is stored (its argument deltas are not streamed to callbacks, so no page or terminal sees them unguarded), and again after the policies and before review (a person's edit included), so a call a guard blocks is never offered to a person | the call is stored without arguments and answered with the message, not run | the same; the run stops after the batch |
//! | [`Point::ToolResult`] | on each result, before the model or a UI sees it | the model sees the message instead | the model sees the message; the run stops after the batch |
//! | [`Point::ModelOutput`] | on the answer's text as it streams, held back ([`HoldBack`]) until passed, so a terminal, a served page or a span never sees what a guard holds back; and on the whole answer before it is stored | the answer is withheld, its calls answered "not run"; the run stops | the same |
//!
//! A rewrite of a call's arguments stores and runs the call with the rewritten arguments
//! (the model's kept in the call's metadata, `guarded.original_arguments`); a rewrite of
//! a result
//! keeps what ran (its text and the tool's native data) in the tool message's metadata
//! (`rewritten`, by call id), out of the result every UI shows; a rewrite of an
//! answer or a person's message stores the guarded text, the text as it arrived kept in
//! the message's metadata (`guarded.original`), so nothing received is lost while the
//! model, the UIs and exports get the guarded version (`conversations export` leaves the
//! originals out unless `--raw`). Every verdict
//! but allow is journaled ([`Decision::Guard`](crate::chain::Decision::Guard)) with its
//! guard's id and the kinds of what it found, never what it held back. A guard that
//! panics blocks (the stack fails closed).
//!
//! Built-ins, configured in code or as a profile's `[[guard]]` ([`GuardSpec`]):
//! [`Pii`] (emails, phone numbers, card numbers that pass Luhn's check, IBANs that pass
//! their mod-97 check), [`SecretsGuard`] (every secret the process knows, and common key
//! shapes), [`SizeLimit`] and [`DenyList`] (regular expressions and keywords).

mod builtin;
mod hold_back;
mod pii;
mod spec;

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use builtin::{Action, DenyList, SecretsGuard, SizeLimit};
pub use hold_back::{HARD, HoldBack, Released, SOFT, TAIL};
pub use pii::{Pii, PiiKind};
pub use spec::{GuardKind, GuardSpec};

/// Where a guard looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// A person's message, before a model sees it.
    UserMessage,
    /// A tool call's arguments (as JSON text), before the call runs.
    ToolArguments,
    /// A tool's result, before the model or a UI sees it.
    ToolResult,
    /// The model's answer text, as it streams (held back until passed) and whole.
    ModelOutput,
}

impl Point {
    /// Every point.
    pub const ALL: [Point; 4] = [
        Point::UserMessage,
        Point::ToolArguments,
        Point::ToolResult,
        Point::ModelOutput,
    ];

    /// Its name in the journal and the config (`user_message`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Point::UserMessage => "user_message",
            Point::ToolArguments => "tool_arguments",
            Point::ToolResult => "tool_result",
            Point::ModelOutput => "model_output",
        }
    }
}

/// What a guard makes of a text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Let it through as it is.
    Allow,
    /// Let it through as this text (a redaction).
    Rewrite {
        /// The text that goes on.
        text: String,
        /// The kinds of what was replaced (`email`, `secret`...), never the values.
        found: Vec<String>,
    },
    /// Hold it back: the model is told `message` instead.
    Block {
        /// What the model is told. It must not quote what was held back.
        message: String,
    },
    /// Hold it back and stop the run.
    Tripwire {
        /// Why (it must not quote what was held back).
        reason: String,
    },
}

/// A check on text at the [`Point`]s it [`applies`](Guard::applies) to. Synchronous and
/// cheap: it runs on the run's path. See the module docs.
///
/// ```
/// use llmchain::guard::{Guard, Point, Verdict};
///
/// /// Blocks any result that mentions the vault.
/// struct NoVault;
///
/// impl Guard for NoVault {
///     fn id(&self) -> &str {
///         "no-vault"
///     }
///     fn check(&self, _point: Point, text: &str) -> Verdict {
///         if text.contains("vault") {
///             Verdict::Block { message: "That result is withheld.".into() }
///         } else {
///             Verdict::Allow
///         }
///     }
/// }
/// ```
pub trait Guard: Send + Sync {
    /// A stable id: journaled with every verdict.
    fn id(&self) -> &str;

    /// Whether it looks at `point` (default: every point).
    fn applies(&self, point: Point) -> bool {
        let _ = point;
        true
    }

    /// Its verdict on `text` at `point`.
    fn check(&self, point: Point, text: &str) -> Verdict;
}

/// What a set of guards made of one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked<'a> {
    /// The text that goes on (every rewrite applied, in order).
    pub text: Cow<'a, str>,
    /// Each guard that rewrote it, with what it found.
    pub rewrites: Vec<(String, Vec<String>)>,
    /// The first guard that blocked or tripped, with its verdict.
    pub stop: Option<(String, Verdict)>,
}

/// Guards in the order they were added; each sees the text as the ones before it left
/// it, and the first block or tripwire ends the check.
#[derive(Clone, Default)]
pub struct Guards(Vec<Arc<dyn Guard>>);

impl std::fmt::Debug for Guards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|g| g.id()))
            .finish()
    }
}

impl Guards {
    /// Adds a guard after the others.
    pub fn push(&mut self, guard: Arc<dyn Guard>) {
        self.0.push(guard);
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether any looks at `point`.
    pub fn any_at(&self, point: Point) -> bool {
        self.0.iter().any(|g| g.applies(point))
    }

    /// Every guard at `point` on `text`. A guard that panics blocks.
    pub fn check<'a>(&self, point: Point, text: &'a str) -> Checked<'a> {
        let mut out = Checked {
            text: Cow::Borrowed(text),
            rewrites: Vec::new(),
            stop: None,
        };
        for guard in self.0.iter().filter(|g| g.applies(point)) {
            let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                guard.check(point, &out.text)
            }))
            .unwrap_or_else(|_| Verdict::Block {
                message: format!(
                    "Withheld: the guard {} failed while checking it.",
                    guard.id()
                ),
            });
            match verdict {
                Verdict::Allow => {}
                Verdict::Rewrite { text, found } => {
                    out.text = Cow::Owned(text);
                    out.rewrites.push((guard.id().to_owned(), found));
                }
                stop => {
                    out.stop = Some((guard.id().to_owned(), stop));
                    break;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Panics;
    impl Guard for Panics {
        fn id(&self) -> &str {
            "panics"
        }
        fn check(&self, _: Point, _: &str) -> Verdict {
            panic!("boom")
        }
    }

    #[test]
    fn guards_run_in_order_on_the_rewritten_text_and_a_panic_blocks() {
        let mut guards = Guards::default();
        guards.push(Arc::new(Pii::default()));
        guards.push(Arc::new(
            DenyList::new("deny", &[], &["[redacted email]".to_owned()], None).unwrap(),
        ));
        let c = guards.check(Point::ToolResult, "write to bob@example.com");
        assert_eq!(
            c.rewrites,
            vec![("pii".to_owned(), vec!["email".to_owned()])]
        );
        // The deny list saw the redacted text.
        assert!(matches!(c.stop, Some((ref id, Verdict::Block { .. })) if id == "deny"));

        let mut guards = Guards::default();
        guards.push(Arc::new(Panics));
        let c = guards.check(Point::UserMessage, "hi");
        assert!(
            matches!(c.stop, Some((_, Verdict::Block { ref message })) if message.contains("panics"))
        );
    }
}
