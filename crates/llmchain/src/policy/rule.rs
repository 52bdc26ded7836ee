//! One rule: as written ([`RuleSpec`]), and compiled ([`Rule`]) for the calls it rules on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Effect;

/// Whether a rule is enforced or only observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleMode {
    /// Its ruling takes effect.
    #[default]
    Enforce,
    /// Its ruling is journaled as what would have happened; the call is ruled on as if
    /// the rule were not there.
    Shadow,
}

/// Examples of arguments a rule must match and must not match, checked when the rules
/// load: a rule whose example fails is refused.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    /// Arguments the rule must match.
    #[serde(default, rename = "match")]
    pub matching: Vec<Map<String, Value>>,
    /// Arguments the rule must not match.
    #[serde(default)]
    pub not_match: Vec<Map<String, Value>>,
}

/// Tests on one argument (found by JSON pointer); every test given must hold.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgTest {
    /// Equal to this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eq: Option<Value>,
    /// Not equal to this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ne: Option<Value>,
    /// A number greater than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    /// A number less than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    /// Equal to one of these values.
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<Value>>,
    /// A string matching this glob (`*`, `?`, `[abc]`, `{a,b}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// A string in which this regular expression finds a match (anchor it with `^…$`
    /// to test the whole string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// A rule as written in a profile (`[[policy]]`) or built in code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// The rule's id: unique in its set; on record with every ruling it gives.
    pub id: String,
    /// A glob over tool policy names: a built-in tool's name, `mcp:SERVER/TOOL`.
    /// Default `*`: every tool.
    #[serde(default = "every_tool")]
    pub tool: String,
    /// JSON pointer (into the arguments) → tests; every pointer's tests must hold. A
    /// pointer the arguments lack does not match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, ArgTest>,
    /// What the rule says when it matches.
    pub effect: Effect,
    /// Why, for the model (a denial's answer) and the reviewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Enforced (the default) or only observed.
    #[serde(default)]
    pub mode: RuleMode,
    /// Arguments it must and must not match, checked at load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<Examples>,
}

fn every_tool() -> String {
    "*".to_owned()
}

/// Why a test could not be evaluated on a call's arguments (a rule that cannot be
/// evaluated denies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unevaluable(pub(super) String);

/// One compiled test.
#[derive(Debug)]
enum Test {
    Eq(Value),
    Ne(Value),
    Gt(f64),
    Lt(f64),
    In(Vec<Value>),
    Glob(Glob, String),
    Regex(regex::Regex),
}

impl Test {
    fn name(&self) -> &'static str {
        match self {
            Test::Eq(_) => "eq",
            Test::Ne(_) => "ne",
            Test::Gt(_) => "gt",
            Test::Lt(_) => "lt",
            Test::In(_) => "in",
            Test::Glob(..) => "glob",
            Test::Regex(_) => "regex",
        }
    }

    /// What the test says, as text: two tests with the same key give the same answer
    /// on the same value (so [`Rules`](super::Rules) evaluates them once per call).
    fn key(&self) -> String {
        let operand = match self {
            Test::Eq(v) | Test::Ne(v) => v.to_string(),
            Test::Gt(x) | Test::Lt(x) => format!("{x:?}"),
            Test::In(xs) => Value::Array(xs.clone()).to_string(),
            Test::Glob(_, g) => g.clone(),
            Test::Regex(r) => r.as_str().to_owned(),
        };
        format!("{} {operand}", self.name())
    }

    /// Whether `value` passes; `Err` when the test does not apply to its type.
    fn holds(&self, value: &Value) -> Result<bool, String> {
        let number = |v: &Value| {
            v.as_f64().ok_or_else(|| {
                format!(
                    "{} needs a number, and the argument is {}",
                    self.name(),
                    kind(v)
                )
            })
        };
        fn text<'v>(test: &Test, v: &'v Value) -> Result<&'v str, String> {
            v.as_str().ok_or_else(|| {
                format!(
                    "{} needs a string, and the argument is {}",
                    test.name(),
                    kind(v)
                )
            })
        }
        Ok(match self {
            Test::Eq(x) => same(value, x),
            Test::Ne(x) => !same(value, x),
            Test::Gt(x) => number(value)? > *x,
            Test::Lt(x) => number(value)? < *x,
            Test::In(xs) => xs.iter().any(|x| same(value, x)),
            Test::Glob(g, _) => g.is_match(text(self, value)?),
            Test::Regex(r) => r.is_match(text(self, value)?),
        })
    }
}

/// A glob on an argument. The shapes rules mostly write (`*@corp.com`, `/etc/*`,
/// `*secret*`, a plain word) are tested as the string comparisons they are; the rest by
/// globset's matcher. (`*` crosses `/` and newlines in both, so the answers are the
/// same; a property test holds them to it.) globset first builds a path candidate
/// (file name, extension) that an argument does not need, at ten times the cost. Not a
/// `GlobSet`: its literal strategies answer some patterns differently from the matcher
/// (`**.` does not match `..`), which the property test found.
#[derive(Debug)]
pub(super) enum Glob {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Other(globset::GlobMatcher),
}

impl Glob {
    pub(super) fn new(pattern: &str) -> Result<Glob, String> {
        // Validate as globset would, whatever the fast path.
        let glob = tool_glob(pattern)?;
        let plain = |s: &str| !s.contains(['*', '?', '[', ']', '{', '}', '\\']);
        let inner = pattern.strip_prefix('*').and_then(|s| s.strip_suffix('*'));
        Ok(if plain(pattern) {
            Glob::Exact(pattern.to_owned())
        } else if let Some(mid) = inner.filter(|m| plain(m)) {
            Glob::Contains(mid.to_owned())
        } else if let Some(end) = pattern.strip_prefix('*').filter(|e| plain(e)) {
            Glob::Suffix(end.to_owned())
        } else if let Some(start) = pattern.strip_suffix('*').filter(|s| plain(s)) {
            Glob::Prefix(start.to_owned())
        } else {
            Glob::Other(glob.compile_matcher())
        })
    }

    pub(super) fn is_match(&self, text: &str) -> bool {
        match self {
            Glob::Exact(s) => text == s,
            Glob::Prefix(s) => text.starts_with(s.as_str()),
            Glob::Suffix(s) => text.ends_with(s.as_str()),
            Glob::Contains(s) => text.contains(s.as_str()),
            Glob::Other(glob) => glob.is_match(text),
        }
    }
}

/// JSON equality, numbers by value (`100` equals `100.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

/// The JSON type of a value, for messages. (`tool::args::json_type` says the same; the
/// policy layer depends on nothing of ours, so it keeps its own.)
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A compiled rule.
#[derive(Debug)]
pub(super) struct Rule {
    pub(super) spec: RuleSpec,
    tool: globset::GlobMatcher,
    tests: Vec<(Pointer, Vec<Test>)>,
}

/// Why one rule does or does not match a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Match {
    /// Every test held.
    Yes,
    /// The tool glob does not cover the tool.
    OtherTool,
    /// A test did not hold, or its pointer is absent ([`Rule::why_not`] says which).
    No(NoMatch),
    /// A test does not apply to the argument's type.
    Unevaluable(Unevaluable),
}

/// How one test went on a call: what [`Rules`](super::Rules) remembers per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Condition {
    /// It held.
    Yes,
    /// It did not, or its argument is absent.
    No,
    /// It does not apply to the argument's type.
    Unevaluable,
}

/// Which test of a rule did not hold: the `pointer`-th argument test, and its
/// `test`-th matcher (`None`: the pointer is absent). Said in words only when asked
/// ([`Rule::why_not`]): deciding a call allocates nothing for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NoMatch {
    pointer: usize,
    test: Option<usize>,
}

/// Builds a glob matcher; `*` crosses `/` (so `mcp:*` covers every MCP tool).
fn glob(pattern: &str) -> Result<globset::GlobMatcher, String> {
    tool_glob(pattern).map(|g| g.compile_matcher())
}

/// A glob as rules write it: `*` crosses `/`.
fn tool_glob(pattern: &str) -> Result<globset::Glob, String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map_err(|e| format!("the glob {pattern:?} is not valid: {e}"))
}

impl Rule {
    /// Compiles a rule's globs, regexes and pointers; `Err` says what is wrong.
    pub(super) fn compile(spec: RuleSpec) -> Result<Rule, String> {
        if spec.id.trim().is_empty() {
            return Err("a rule needs an id".into());
        }
        let tool = glob(&spec.tool)?;
        let mut tests = Vec::with_capacity(spec.args.len());
        for (pointer, t) in &spec.args {
            if !(pointer.is_empty() || pointer.starts_with('/')) {
                return Err(format!(
                    "the argument key {pointer:?} is not a JSON pointer (write \"/{pointer}\")"
                ));
            }
            let mut compiled = Vec::new();
            if let Some(v) = &t.eq {
                compiled.push(Test::Eq(v.clone()));
            }
            if let Some(v) = &t.ne {
                compiled.push(Test::Ne(v.clone()));
            }
            if let Some(v) = t.gt {
                compiled.push(Test::Gt(v));
            }
            if let Some(v) = t.lt {
                compiled.push(Test::Lt(v));
            }
            if let Some(v) = &t.one_of {
                compiled.push(Test::In(v.clone()));
            }
            if let Some(g) = &t.glob {
                compiled.push(Test::Glob(Glob::new(g)?, g.clone()));
            }
            if let Some(r) = &t.regex {
                // The regex crate runs in time linear in the input: a rule cannot be
                // made to backtrack forever on a model's arguments.
                let r = regex::RegexBuilder::new(r)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| format!("the regex {r:?} is not valid: {e}"))?;
                compiled.push(Test::Regex(r));
            }
            if compiled.is_empty() {
                return Err(format!(
                    "the argument {pointer:?} has no test (eq, ne, gt, lt, in, glob, regex)"
                ));
            }
            tests.push((Pointer::new(pointer), compiled));
        }
        Ok(Rule { spec, tool, tests })
    }

    /// Whether the rule covers `tool`.
    pub(super) fn covers(&self, tool: &str) -> bool {
        self.tool.is_match(tool)
    }

    /// Why the rule did not match, in words.
    pub(super) fn why_not(&self, n: &NoMatch) -> String {
        let Some((Pointer { text: pointer, .. }, tests)) = self.tests.get(n.pointer) else {
            return "it did not match".into();
        };
        match n.test.and_then(|i| tests.get(i)) {
            None => format!("{pointer} is absent"),
            Some(t) => format!("{pointer} fails {}", t.name()),
        }
    }

    /// The rule's tests, in the order they are tried: `(pointer, test, key)`, where
    /// `key` names what the test asks of which argument (equal keys, equal answers).
    pub(super) fn conditions(&self) -> impl Iterator<Item = (usize, usize, String)> + '_ {
        self.tests
            .iter()
            .enumerate()
            .flat_map(|(p, (pointer, tests))| {
                tests
                    .iter()
                    .enumerate()
                    .map(move |(i, t)| (p, i, format!("{}\u{0} {}", pointer.text, t.key())))
            })
    }

    /// How the `test`-th test of the `pointer`-th argument goes on `arguments`.
    pub(super) fn condition(
        &self,
        pointer: usize,
        test: usize,
        arguments: &Map<String, Value>,
    ) -> Condition {
        let Some((at, tests)) = self.tests.get(pointer) else {
            return Condition::No;
        };
        let (Some(value), Some(t)) = (at.lookup(arguments), tests.get(test)) else {
            return Condition::No;
        };
        match t.holds(value) {
            Ok(true) => Condition::Yes,
            Ok(false) => Condition::No,
            Err(_) => Condition::Unevaluable,
        }
    }

    /// How the rule's argument tests go on `arguments` (the tool is not checked).
    pub(super) fn test_args(&self, arguments: &Map<String, Value>) -> Match {
        for (p, (pointer, tests)) in self.tests.iter().enumerate() {
            let Some(value) = pointer.lookup(arguments) else {
                return Match::No(NoMatch {
                    pointer: p,
                    test: None,
                });
            };
            for (i, t) in tests.iter().enumerate() {
                match t.holds(value) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Match::No(NoMatch {
                            pointer: p,
                            test: Some(i),
                        });
                    }
                    Err(why) => {
                        return Match::Unevaluable(Unevaluable(format!("{}: {why}", pointer.text)));
                    }
                }
            }
        }
        Match::Yes
    }

    /// How the rule goes on a call of `tool` with `arguments`.
    pub(super) fn test(&self, tool: &str, arguments: &Map<String, Value>) -> Match {
        if !self.covers(tool) {
            return Match::OtherTool;
        }
        self.test_args(arguments)
    }

    /// Its examples, checked; `Err` names the first that fails.
    pub(super) fn check_examples(&self) -> Result<(), String> {
        let Some(examples) = &self.spec.examples else {
            return Ok(());
        };
        for (i, e) in examples.matching.iter().enumerate() {
            match self.test_args(e) {
                Match::Yes => {}
                Match::No(why) => {
                    return Err(format!(
                        "its example match[{i}] {} does not match ({})",
                        Value::Object(e.clone()),
                        self.why_not(&why)
                    ));
                }
                Match::OtherTool => {
                    return Err(format!("its example match[{i}] does not match"));
                }
                Match::Unevaluable(Unevaluable(why)) => {
                    return Err(format!(
                        "its example match[{i}] {} cannot be evaluated ({why})",
                        Value::Object(e.clone())
                    ));
                }
            }
        }
        for (i, e) in examples.not_match.iter().enumerate() {
            match self.test_args(e) {
                Match::Yes => {
                    return Err(format!(
                        "its example not_match[{i}] {} matches",
                        Value::Object(e.clone())
                    ));
                }
                Match::Unevaluable(Unevaluable(why)) => {
                    return Err(format!(
                        "its example not_match[{i}] {} cannot be evaluated ({why})",
                        Value::Object(e.clone())
                    ));
                }
                Match::No(_) | Match::OtherTool => {}
            }
        }
        Ok(())
    }
}

/// A JSON pointer into the arguments, split once: the top-level key (unescaped) and
/// the rest (looked up by serde_json), so a lookup allocates nothing.
#[derive(Debug)]
struct Pointer {
    text: String,
    key: Option<String>,
    tail: String,
}

impl Pointer {
    fn new(pointer: &str) -> Pointer {
        let key_and_tail = pointer.strip_prefix('/').map(|rest| match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        });
        Pointer {
            text: pointer.to_owned(),
            key: key_and_tail.map(|(k, _)| k.replace("~1", "/").replace("~0", "~")),
            tail: key_and_tail.map(|(_, t)| t.to_owned()).unwrap_or_default(),
        }
    }

    /// The value it points at (`None` for the empty pointer: a rule tests arguments,
    /// not the whole object).
    fn lookup<'a>(&self, arguments: &'a Map<String, Value>) -> Option<&'a Value> {
        let key = self.key.as_deref()?;
        // A call's arguments are a handful of keys: comparing them (lengths first)
        // beats hashing ours with the map's SipHash.
        let value = if arguments.len() <= 8 {
            arguments.iter().find(|(k, _)| k.as_str() == key)?.1
        } else {
            arguments.get(key)?
        };
        if self.tail.is_empty() {
            Some(value)
        } else {
            value.pointer(&self.tail)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The string fast paths answer as globset does.
        #[test]
        fn a_glob_answers_as_globset(
            pattern in "[*]?[ab/.\n*]{0,4}[*]?",
            text in "[ab/.\n]{0,6}",
        ) {
            let Ok(g) = tool_glob(&pattern) else { return Ok(()) };
            let expected = g.compile_matcher().is_match(&text);
            prop_assert_eq!(Glob::new(&pattern).unwrap().is_match(&text), expected, "{:?} on {:?}", pattern, text);
        }
    }
}
