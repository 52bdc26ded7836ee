//! The built-in guards besides [`Pii`](super::Pii): secrets, a size limit and a deny
//! list; and the [`Action`] a find leads to.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde::{Deserialize, Serialize};

use super::{Guard, Point, Verdict};

/// A built-in guard's `id` and `applies` (its `id` and `points` fields).
macro_rules! scoped {
    () => {
        fn id(&self) -> &str {
            &self.id
        }
        fn applies(&self, point: Point) -> bool {
            self.points.contains(&point)
        }
    };
}
pub(super) use scoped;

/// A built-in guard's `at` builder.
macro_rules! at_points {
    () => {
        /// Only at these points.
        pub fn at(mut self, points: &[Point]) -> Self {
            self.points = points.to_vec();
            self
        }
    };
}
pub(super) use at_points;

/// What a guard does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Replace what was found and let the rest through (the default where a guard can).
    #[default]
    Rewrite,
    /// Hold the whole text back; the model is told why.
    Block,
    /// Hold it back and stop the run.
    Tripwire,
}

impl Action {
    /// The verdict for a find: `rewritten` for a rewrite, else a block or tripwire that
    /// names `what` (which must not quote the find).
    pub(super) fn verdict(self, rewritten: String, found: Vec<String>, what: &str) -> Verdict {
        match self {
            Action::Rewrite => Verdict::Rewrite {
                text: rewritten,
                found,
            },
            Action::Block => Verdict::Block {
                message: format!("Withheld: it held {what}."),
            },
            Action::Tripwire => Verdict::Tripwire {
                reason: format!("it held {what}"),
            },
        }
    }
}

/// Common shapes of credentials: the providers' and clouds' key prefixes, tokens and
/// private keys. (A shape is a guess; the secrets the process holds are known exactly.)
static KEY_SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
        r"|\bAKIA[0-9A-Z]{16}\b",
        r"|\bAIza[0-9A-Za-z_-]{35}",
        r"|\bgh[pousr]_[A-Za-z0-9]{36,}",
        r"|\bgithub_pat_[A-Za-z0-9_]{22,}",
        r"|\bxox[abposr]-[A-Za-z0-9-]{10,}",
        r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        r"|-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----[\s\S]*?(?:-----END (?:[A-Z]+ )?PRIVATE KEY-----|$)",
    ))
    .expect("the key shapes compile")
});

/// Secrets: every secret the process holds ([`crate::secrets`]: API keys, tokens, the
/// secret parts of URLs, in the forms they are echoed in) and common key shapes (`sk-…`,
/// `AKIA…`, `ghp_…`, JWTs, PEM private keys), replaced by `***` (or blocked, or the run
/// stopped).
#[derive(Debug, Clone)]
pub struct SecretsGuard {
    id: String,
    action: Action,
    points: Vec<Point>,
}

impl Default for SecretsGuard {
    fn default() -> Self {
        SecretsGuard {
            id: "secrets".into(),
            action: Action::Rewrite,
            points: Point::ALL.to_vec(),
        }
    }
}

impl SecretsGuard {
    /// With another id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }
    /// What a find does.
    pub fn action(mut self, action: Action) -> Self {
        self.action = action;
        self
    }
    at_points!();
}

impl Guard for SecretsGuard {
    scoped!();
    fn check(&self, _point: Point, text: &str) -> Verdict {
        let known = crate::secrets::mask(text);
        let shaped = KEY_SHAPES.replace_all(&known, crate::secrets::MASK);
        if matches!(known, std::borrow::Cow::Borrowed(_))
            && matches!(shaped, std::borrow::Cow::Borrowed(_))
        {
            return Verdict::Allow;
        }
        self.action
            .verdict(shaped.into_owned(), vec!["secret".into()], "a secret")
    }
}

/// A size limit, in bytes of UTF-8: a longer text is blocked (or the run stopped).
#[derive(Debug, Clone)]
pub struct SizeLimit {
    id: String,
    max_bytes: usize,
    tripwire: bool,
    points: Vec<Point>,
}

impl SizeLimit {
    /// At most `max_bytes`, as `id`, at every point; a longer text is blocked.
    pub fn new(id: impl Into<String>, max_bytes: usize) -> Self {
        SizeLimit {
            id: id.into(),
            max_bytes,
            tripwire: false,
            points: Point::ALL.to_vec(),
        }
    }
    /// A longer text stops the run (instead of blocking it).
    pub fn tripwire(mut self) -> Self {
        self.tripwire = true;
        self
    }
    at_points!();
}

impl Guard for SizeLimit {
    scoped!();
    fn check(&self, _point: Point, text: &str) -> Verdict {
        if text.len() <= self.max_bytes {
            return Verdict::Allow;
        }
        let what = format!(
            "{} bytes, more than the {} allowed",
            text.len(),
            self.max_bytes
        );
        if self.tripwire {
            Verdict::Tripwire { reason: what }
        } else {
            Verdict::Block {
                message: format!("Withheld: it is {what}."),
            }
        }
    }
}

/// A deny list: regular expressions (the `regex` crate's syntax: linear time) and
/// keywords (matched case-insensitively as whole words). A match blocks the text, or
/// stops the run; the message names the list, never the match.
#[derive(Debug, Clone)]
pub struct DenyList {
    id: String,
    set: RegexSet,
    message: Option<String>,
    tripwire: bool,
    points: Vec<Point>,
}

impl DenyList {
    /// `patterns` and `words` as one list; `message` is what the model is told (default:
    /// "Withheld: it matched the deny list ID."). `Err` names a pattern that does not
    /// compile.
    pub fn new(
        id: impl Into<String>,
        patterns: &[String],
        words: &[String],
        message: Option<String>,
    ) -> Result<Self, String> {
        let id = id.into();
        let mut all: Vec<String> = patterns.to_vec();
        // A word is matched whole: bounded where it starts or ends with a word character.
        let edge = |c: Option<char>| {
            if c.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                r"\b"
            } else {
                ""
            }
        };
        all.extend(words.iter().map(|w| {
            format!(
                "(?i){}{}{}",
                edge(w.chars().next()),
                regex::escape(w),
                edge(w.chars().last())
            )
        }));
        if all.is_empty() {
            return Err(format!("the deny list {id} has no patterns and no words"));
        }
        let set = regex::RegexSetBuilder::new(&all)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("the deny list {id}: {e}"))?;
        Ok(DenyList {
            id,
            set,
            message,
            tripwire: false,
            points: Point::ALL.to_vec(),
        })
    }
    /// A match stops the run.
    pub fn tripwire(mut self) -> Self {
        self.tripwire = true;
        self
    }
    at_points!();
}

impl Guard for DenyList {
    scoped!();
    fn check(&self, _point: Point, text: &str) -> Verdict {
        if !self.set.is_match(text) {
            return Verdict::Allow;
        }
        if self.tripwire {
            return Verdict::Tripwire {
                reason: format!("it matched the deny list {}", self.id),
            };
        }
        Verdict::Block {
            message: self
                .message
                .clone()
                .unwrap_or_else(|| format!("Withheld: it matched the deny list {}.", self.id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_known_and_shaped_are_masked() {
        crate::secrets::register("guard-test-secret-0123456789");
        let g = SecretsGuard::default();
        let Verdict::Rewrite { text, found } = g.check(
            Point::ToolResult,
            "k=guard-test-secret-0123456789 and sk-proj-abcdefghijklmnopqrstuv",
        ) else {
            panic!()
        };
        assert_eq!(found, ["secret"]);
        assert!(
            !text.contains("guard-test-secret") && !text.contains("sk-proj-abc"),
            "{text}"
        );
        assert_eq!(
            g.check(Point::ToolResult, "a plain sentence"),
            Verdict::Allow
        );
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----";
        assert!(
            matches!(g.check(Point::ToolResult, pem), Verdict::Rewrite { ref text, .. } if !text.contains("MIIB"))
        );
    }

    #[test]
    fn size_and_deny_list() {
        let s = SizeLimit::new("size", 4);
        assert_eq!(s.check(Point::ToolResult, "1234"), Verdict::Allow);
        assert!(matches!(
            s.check(Point::ToolResult, "12345"),
            Verdict::Block { .. }
        ));
        assert!(matches!(
            s.tripwire().check(Point::ToolResult, "12345"),
            Verdict::Tripwire { .. }
        ));

        let d = DenyList::new(
            "sql",
            &["(?i)drop\\s+table".into()],
            &["rm -rf".into()],
            None,
        )
        .unwrap();
        assert!(
            matches!(d.check(Point::ToolArguments, "please DROP  TABLE x"), Verdict::Block { ref message } if !message.contains("DROP"))
        );
        assert!(matches!(
            d.check(Point::ToolArguments, "RM -RF /"),
            Verdict::Block { .. }
        ));
        assert_eq!(
            d.check(Point::ToolArguments, "dropped tables"),
            Verdict::Allow
        );
        let e = DenyList::new("bad", &["(".into()], &[], None).unwrap_err();
        assert!(e.contains("bad"), "{e}");
    }
}
