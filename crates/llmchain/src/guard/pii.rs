//! The personal-data redactor: emails, phone numbers, card numbers (Luhn) and IBANs
//! (mod 97).
//!
//! Written here on the `regex` crate (already in the tree for the policy rules) rather
//! than taken from a crate: the ones published (`leakguard`, `llm-pii-redact`,
//! `regex-pii-rs`, all first releases by one author in 2025–26) cover US shapes (SSNs,
//! NANP phones) but not IBANs, and none checks a number before calling it a card the
//! way a redactor on a model's path must (a false positive rewrites a tool's
//! arguments). Each candidate below is found by a pattern and then checked: a card by
//! Luhn's checksum, an IBAN by its ISO 13616 mod-97 check, a phone number by its count
//! of digits and its separators.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::{Guard, Point, Verdict};

/// A kind of personal data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiKind {
    /// An email address.
    Email,
    /// A phone number: 9 to 15 digits written with a `+` or separators (a bare run of
    /// digits is an id more often than a phone number, and is left alone).
    Phone,
    /// A payment card number: 13 to 19 digits that pass Luhn's check.
    Card,
    /// An IBAN that passes its mod-97 check.
    Iban,
}

impl PiiKind {
    /// Every kind, in the order overlapping finds are settled (the first wins).
    pub const ALL: [PiiKind; 4] = [PiiKind::Card, PiiKind::Iban, PiiKind::Email, PiiKind::Phone];

    /// Its name (`email`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            PiiKind::Email => "email",
            PiiKind::Phone => "phone",
            PiiKind::Card => "card",
            PiiKind::Iban => "iban",
        }
    }
}

// The patterns are constants: a failure to compile is a bug caught by every test.
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b")
        .expect("the email pattern compiles")
});
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:\+\(?|\(|\b)\d[\d\s().-]{6,}\d\b").expect("the phone pattern compiles")
});
static CARD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d(?:[ -]?\d){12,18}\b").expect("the card pattern compiles"));
static IBAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b").expect("the IBAN pattern compiles")
});

/// Luhn's checksum over `digits` (ASCII digits only).
fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            let d = u32::from(d - b'0');
            if i % 2 == 1 {
                let d = d * 2;
                if d > 9 { d - 9 } else { d }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// ISO 13616's check: the country and check digits moved to the end, letters as numbers
/// (A = 10), the whole mod 97 is 1.
fn iban_valid(compact: &str) -> bool {
    let b = compact.as_bytes();
    if !(15..=34).contains(&b.len()) {
        return false;
    }
    let mut rem: u32 = 0;
    for &c in b[4..].iter().chain(&b[..4]) {
        let v = match c {
            b'0'..=b'9' => u32::from(c - b'0'),
            b'A'..=b'Z' => u32::from(c - b'A') + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// Whether a pattern's find really is of `kind`.
fn confirmed(kind: PiiKind, found: &str) -> bool {
    match kind {
        PiiKind::Email => true,
        PiiKind::Card => {
            let digits: Vec<u8> = found.bytes().filter(u8::is_ascii_digit).collect();
            (13..=19).contains(&digits.len()) && luhn(&digits)
        }
        PiiKind::Iban => iban_valid(&found.replace(' ', "")),
        PiiKind::Phone => {
            let digits = found.bytes().filter(u8::is_ascii_digit).count();
            (9..=15).contains(&digits)
                && (found.starts_with('+') || found.contains([' ', '-', '.', '(']))
        }
    }
}

fn pattern(kind: PiiKind) -> &'static Regex {
    match kind {
        PiiKind::Email => &EMAIL,
        PiiKind::Phone => &PHONE,
        PiiKind::Card => &CARD,
        PiiKind::Iban => &IBAN,
    }
}

/// The personal-data redactor (see the module docs): every find replaced by
/// `[redacted KIND]`, or the text blocked or the run stopped, as [`Pii::action`] says.
#[derive(Debug, Clone)]
pub struct Pii {
    id: String,
    kinds: Vec<PiiKind>,
    action: super::builtin::Action,
    points: Vec<Point>,
}

impl Default for Pii {
    /// Every kind, rewritten, at every point, as `pii`.
    fn default() -> Self {
        Pii {
            id: "pii".into(),
            kinds: PiiKind::ALL.to_vec(),
            action: super::builtin::Action::Rewrite,
            points: Point::ALL.to_vec(),
        }
    }
}

impl Pii {
    /// With another id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Only these kinds.
    pub fn kinds(mut self, kinds: &[PiiKind]) -> Self {
        self.kinds = PiiKind::ALL
            .into_iter()
            .filter(|k| kinds.contains(k))
            .collect();
        self
    }

    /// What a find does: rewrite (the default), block or tripwire.
    pub fn action(mut self, action: super::builtin::Action) -> Self {
        self.action = action;
        self
    }

    super::builtin::at_points!();

    /// Every find in `text`: its byte range and kind, in order, none overlapping.
    pub fn find(&self, text: &str) -> Vec<(std::ops::Range<usize>, PiiKind)> {
        let mut out: Vec<(std::ops::Range<usize>, PiiKind)> = Vec::new();
        // What each kind needs at least, counted in one pass over the bytes: most text
        // (a sentence streamed by a model) has no `@` and few digits, and is passed
        // without running a pattern.
        let (mut at, mut digits) = (false, 0usize);
        for &b in text.as_bytes() {
            at |= b == b'@';
            digits += usize::from(b.is_ascii_digit());
        }
        for &kind in &self.kinds {
            let possible = match kind {
                PiiKind::Email => at,
                PiiKind::Card => digits >= 13,
                PiiKind::Phone => digits >= 9,
                // Two check digits, and more in every country's format.
                PiiKind::Iban => digits >= 2,
            };
            if !possible {
                continue;
            }
            for m in pattern(kind).find_iter(text) {
                if confirmed(kind, m.as_str())
                    && !out
                        .iter()
                        .any(|(r, _)| r.start < m.end() && m.start() < r.end)
                {
                    out.push((m.range(), kind));
                }
            }
        }
        out.sort_by_key(|(r, _)| r.start);
        out
    }
}

impl Guard for Pii {
    super::builtin::scoped!();

    fn check(&self, _point: Point, text: &str) -> Verdict {
        let finds = self.find(text);
        if finds.is_empty() {
            return Verdict::Allow;
        }
        let mut kinds: Vec<String> = finds.iter().map(|(_, k)| k.as_str().to_owned()).collect();
        kinds.sort();
        kinds.dedup();
        let mut redacted = String::with_capacity(text.len());
        let mut at = 0;
        for (range, kind) in &finds {
            redacted.push_str(&text[at..range.start]);
            redacted.push_str("[redacted ");
            redacted.push_str(kind.as_str());
            redacted.push(']');
            at = range.end;
        }
        redacted.push_str(&text[at..]);
        self.action.verdict(
            redacted,
            kinds,
            &format!("personal data ({})", kinds_list(&finds)),
        )
    }
}

fn kinds_list(finds: &[(std::ops::Range<usize>, PiiKind)]) -> String {
    let mut kinds: Vec<&str> = finds.iter().map(|(_, k)| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn redact(text: &str) -> String {
        match Pii::default().check(Point::ToolResult, text) {
            Verdict::Rewrite { text, .. } => text,
            Verdict::Allow => text.to_owned(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_kind_is_found_and_checked() {
        assert_eq!(
            redact("mail bob.smith+x@mail.example.org now"),
            "mail [redacted email] now"
        );
        // A card that passes Luhn's check, spaced or not; one digit off is left alone.
        assert_eq!(redact("card 4111 1111 1111 1111."), "card [redacted card].");
        assert_eq!(redact("card 4111111111111111"), "card [redacted card]");
        assert_eq!(redact("id 4111111111111112"), "id 4111111111111112");
        // IBANs (the examples of the ECBS), spaced or not; a wrong check digit is not one.
        assert_eq!(
            redact("pay DE89 3704 0044 0532 0130 00 today"),
            "pay [redacted iban] today"
        );
        assert_eq!(redact("GB29NWBK60161331926819"), "[redacted iban]");
        assert_eq!(redact("GB28NWBK60161331926819"), "GB28NWBK60161331926819");
        // Phones with a + or separators; a bare run of digits (an id, a timestamp) and a
        // date are left alone.
        assert_eq!(redact("call +44 20 7946 0958"), "call [redacted phone]");
        assert_eq!(
            redact("call (555) 123-4567 now"),
            "call [redacted phone] now"
        );
        assert_eq!(redact("order 1733580000123"), "order 1733580000123");
        assert_eq!(redact("on 2026-12-07"), "on 2026-12-07");
        assert_eq!(redact("nothing here"), "nothing here");
    }

    #[test]
    fn what_was_found_is_named_by_kind_never_by_value() {
        let v = Pii::default().check(Point::ToolArguments, "a@b.example and 4111111111111111");
        let Verdict::Rewrite { text, found } = v else {
            panic!()
        };
        assert_eq!(found, ["card", "email"]);
        assert!(!text.contains("a@b.example"));
        let v = Pii::default()
            .action(super::super::builtin::Action::Block)
            .check(Point::ToolResult, "a@b.example");
        let Verdict::Block { message } = v else {
            panic!()
        };
        assert!(!message.contains("a@b.example"), "{message}");
    }

    proptest! {
        /// Whatever the text, the redactor never panics, its redaction holds no card a
        /// find named, and redacting again changes nothing.
        #[test]
        fn redaction_is_total_and_idempotent(text in "[ -~]{0,80}") {
            let once = redact(&text);
            prop_assert_eq!(redact(&once), once.clone());
        }

        /// A valid card number in any text is redacted.
        #[test]
        fn a_luhn_valid_number_is_never_left(prefix in "[a-z ]{0,10}", n in 0u64..1_000_000u64) {
            // 15 digits, then the check digit that makes it pass.
            let body = format!("411111{n:09}");
            let check = (0..10u8).find(|d| {
                let mut digits = body.clone().into_bytes();
                digits.push(b'0' + d);
                luhn(&digits)
            }).unwrap();
            let card = format!("{body}{check}");
            let text = format!("{prefix} {card} end");
            let out = redact(&text);
            prop_assert!(!out.contains(&card), "{}", out);
        }
    }
}
