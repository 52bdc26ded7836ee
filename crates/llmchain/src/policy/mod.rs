//! Policies: what may run. A [`Policy`] looks at one complete tool call and gives a
//! [`Ruling`] (allow, ask a person, deny with a reason) or abstains; the chain combines
//! every policy's ruling as **deny > ask > allow**, journals the result with the rule's
//! id before it takes effect ([`Journal`](crate::chain::Journal)), and replays it on
//! resume instead of deciding again.
//!
//! [`Rules`] is the policy language of a profile: rules as data, each naming the tools
//! it covers by a glob, tests on the arguments by JSON pointer, an effect and a reason
//! for the model, and examples checked when the rules load.
//!
//! ```
//! use llmchain::policy::{CallFacts, Effect, Policy, Rules, RuleSpec};
//! use serde_json::json;
//!
//! let spec: RuleSpec = serde_json::from_value(json!({
//!     "id": "no-big-charges",
//!     "tool": "mcp:billing/charge",
//!     "args": {"/amount": {"gt": 100}},
//!     "effect": "deny",
//!     "reason": "Charges over 100 go through finance.",
//!     "examples": {"match": [{"amount": 500}], "not_match": [{"amount": 5}]}
//! }))?;
//! let rules = Rules::compile(vec![spec])?;
//! let args = json!({"amount": 500});
//! let ruling = rules.rule(&CallFacts::new("mcp:billing/charge", args.as_object().unwrap()));
//! let ruling = ruling.enforced.unwrap();
//! assert_eq!(ruling.effect, Effect::Deny);
//! assert_eq!(ruling.rule, "no-big-charges");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod rule;
mod rules;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use rule::{ArgTest, Examples, RuleMode, RuleSpec};
pub use rules::{Explanation, RuleError, RuleTrace, Rules, Rulings};

/// What a rule (or a person, or a budget) says about a call. Ordered by strictness:
/// `Allow < Ask < Deny`, so the strictest of several is their `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Run it without asking.
    Allow,
    /// A person decides.
    Ask,
    /// Do not run it; the model is told why.
    Deny,
}

impl Effect {
    /// The word, as written in a rule.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One policy's verdict on a call, with the rule that gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ruling {
    /// What it says.
    pub effect: Effect,
    /// The rule's id (`policy:RULE` in the journal and on spans).
    pub rule: String,
    /// Why, for the model (a denial's answer) and the reviewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a policy sees of a call: the tool as rules name it and the arguments.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    /// The tool's policy name: a built-in tool's name, `mcp:SERVER/TOOL` for an MCP
    /// tool ([`Tool::policy_name`](crate::tool::Tool::policy_name)).
    pub tool: &'a str,
    /// The call's arguments (as they would run: after a person's edit, if any).
    pub arguments: &'a Map<String, Value>,
}

impl<'a> CallFacts<'a> {
    /// The facts of a call of `tool` with `arguments`.
    pub fn new(tool: &'a str, arguments: &'a Map<String, Value>) -> Self {
        CallFacts { tool, arguments }
    }
}

/// Decides about calls before they run. It must be pure (the same facts give the same
/// ruling: a stored ruling is replayed on resume, and compared with a fresh one when
/// the policy changed) and cheap (it runs for every call).
///
/// A policy that panics denies the call (the chain fails closed).
pub trait Policy: Send + Sync {
    /// The policy's id and version, e.g. `rules` or `my-app/v2`.
    fn id(&self) -> &str;
    /// A digest of what the policy says: when it differs from the one a stored
    /// ruling was made under, the call is ruled on again, and only a stricter new
    /// ruling replaces the stored one.
    fn digest(&self) -> String;
    /// The rulings on one call: the one enforced (`None` to abstain) and those only
    /// observed (shadow mode).
    fn rule(&self, call: &CallFacts<'_>) -> Rulings;
}

/// The SHA-256 of `bytes`, in hex: the digests of arguments and policies.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The digest of a call's arguments, as an approval is bound to it: SHA-256 over the
/// canonical JSON (object keys sorted at every level, whatever order they came in).
pub fn arguments_digest(arguments: &Map<String, Value>) -> String {
    let mut text = String::new();
    canonical_object(arguments, &mut text);
    sha256_hex(text.as_bytes())
}

/// `value` as JSON with every object's keys sorted (the crate keeps insertion order).
pub(crate) fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(m) => canonical_object(m, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn canonical_object(m: &Map<String, Value>, out: &mut String) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    out.push('{');
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        canonical(&m[k], out);
    }
    out.push('}');
}
