//! A guard as data: a profile's `[[guard]]` table.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::builtin::Action;
use super::{DenyList, Guard, Pii, PiiKind, Point, SecretsGuard, SizeLimit};

/// Which built-in guard a [`GuardSpec`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardKind {
    /// [`Pii`].
    Pii,
    /// [`SecretsGuard`].
    Secrets,
    /// [`SizeLimit`] (`max_bytes`).
    Size,
    /// [`DenyList`] (`patterns`, `words`).
    Deny,
}

/// A built-in guard as a profile writes it:
///
/// ```toml
/// [[guard]]
/// id = "no-personal-data"
/// kind = "pii"                     # pii | secrets | size | deny
/// on = ["tool_arguments", "tool_result"]   # default: every point
/// action = "rewrite"               # rewrite | block | tripwire
/// pii = ["email", "card", "iban"]  # default: every kind
///
/// [[guard]]
/// id = "no-drops"
/// kind = "deny"
/// patterns = ['(?i)drop\s+table']
/// words = ["internal-only"]
/// action = "tripwire"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardSpec {
    /// Its id: journaled with each verdict.
    pub id: String,
    /// Which guard.
    pub kind: GuardKind,
    /// Where it looks (default: every point).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<Point>,
    /// What a find does (default `rewrite`; `size` and `deny` cannot rewrite: `block`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// `pii`: the kinds (default: every kind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pii: Vec<PiiKind>,
    /// `size`: the limit, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// `deny`: regular expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<String>,
    /// `deny`: keywords (whole words, any case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<String>,
    /// `deny`: what the model is told when it blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl GuardKind {
    /// Its name in a profile (`pii`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            GuardKind::Pii => "pii",
            GuardKind::Secrets => "secrets",
            GuardKind::Size => "size",
            GuardKind::Deny => "deny",
        }
    }
}

impl GuardSpec {
    /// The guard. `Err` names the guard's id and what is wrong.
    pub fn build(&self) -> Result<Arc<dyn Guard>, String> {
        let id = self.id.trim();
        if id.is_empty() {
            return Err("a guard needs an id".into());
        }
        let wrong = |what: &str| Err(format!("guard {id}: {what}"));
        let points = if self.on.is_empty() {
            Point::ALL.to_vec()
        } else {
            self.on.clone()
        };
        let action = self.action.unwrap_or(match self.kind {
            GuardKind::Pii | GuardKind::Secrets => Action::Rewrite,
            GuardKind::Size | GuardKind::Deny => Action::Block,
        });
        let unused = |field: &str, set: bool| -> Result<(), String> {
            if set {
                return Err(format!(
                    "guard {id}: `{field}` does not apply to a {} guard",
                    self.kind.as_str()
                ));
            }
            Ok(())
        };
        if self.kind != GuardKind::Pii {
            unused("pii", !self.pii.is_empty())?;
        }
        if self.kind != GuardKind::Size {
            unused("max_bytes", self.max_bytes.is_some())?;
        }
        if self.kind != GuardKind::Deny {
            unused("patterns", !self.patterns.is_empty())?;
            unused("words", !self.words.is_empty())?;
            unused("message", self.message.is_some())?;
        }
        Ok(match self.kind {
            GuardKind::Pii => {
                let mut g = Pii::default().id(id).action(action).at(&points);
                if !self.pii.is_empty() {
                    g = g.kinds(&self.pii);
                }
                Arc::new(g)
            }
            GuardKind::Secrets => {
                Arc::new(SecretsGuard::default().id(id).action(action).at(&points))
            }
            GuardKind::Size => {
                let Some(max) = self.max_bytes else {
                    return wrong("a size guard needs `max_bytes`");
                };
                let g = SizeLimit::new(id, max).at(&points);
                match action {
                    Action::Rewrite => {
                        return wrong("a size guard blocks or trips; it cannot rewrite");
                    }
                    Action::Block => Arc::new(g),
                    Action::Tripwire => Arc::new(g.tripwire()),
                }
            }
            GuardKind::Deny => {
                let g = DenyList::new(id, &self.patterns, &self.words, self.message.clone())?
                    .at(&points);
                match action {
                    Action::Rewrite => {
                        return wrong("a deny list blocks or trips; it cannot rewrite");
                    }
                    Action::Block => Arc::new(g),
                    Action::Tripwire => Arc::new(g.tripwire()),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> Result<Arc<dyn Guard>, String> {
        serde_json::from_value::<GuardSpec>(json)
            .map_err(|e| e.to_string())?
            .build()
    }

    #[test]
    fn specs_build_their_guards_and_a_bad_one_names_its_id() {
        let g = spec(
            serde_json::json!({"id": "p", "kind": "pii", "pii": ["email"], "on": ["tool_result"]}),
        )
        .unwrap();
        assert!(g.applies(Point::ToolResult) && !g.applies(Point::UserMessage));
        assert!(
            matches!(g.check(Point::ToolResult, "x@y.example 4111111111111111"),
            super::super::Verdict::Rewrite { ref text, .. } if text.contains("4111111111111111"))
        );
        for (bad, want) in [
            (
                serde_json::json!({"id": "s", "kind": "size"}),
                "guard s: a size guard needs `max_bytes`",
            ),
            (
                serde_json::json!({"id": "d", "kind": "deny", "patterns": ["("]}),
                "the deny list d",
            ),
            (
                serde_json::json!({"id": "d2", "kind": "deny", "words": ["x"], "action": "rewrite"}),
                "guard d2: a deny list",
            ),
            (
                serde_json::json!({"id": "p2", "kind": "pii", "max_bytes": 3}),
                "guard p2: `max_bytes`",
            ),
            (
                serde_json::json!({"id": "x", "kind": "pii", "colour": "red"}),
                "unknown field `colour`",
            ),
        ] {
            let Err(e) = spec(bad) else { panic!("{want}") };
            assert!(e.contains(want), "{e}");
        }
    }
}
