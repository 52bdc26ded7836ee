//! [`Rules`]: a set of rules, combined as deny > ask > allow, with a default for the
//! calls no rule matches and shadow mode.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use super::rule::{Match, Rule, RuleMode, RuleSpec, Unevaluable, tool_glob};
use super::{CallFacts, Effect, Policy, Ruling};

/// Rules that cannot be used: which one, and why. `index` is its place in the list
/// given to [`Rules::compile`] (a profile maps it to a line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy rule {}: {message}", if id.is_empty() { format!("#{}", index + 1) } else { format!("{id:?}") })]
pub struct RuleError {
    /// The rule's place in the list, from 0.
    pub index: usize,
    /// The rule's id (empty when it has none).
    pub id: String,
    /// What is wrong.
    pub message: String,
}

/// A policy's rulings on one call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rulings {
    /// The ruling that takes effect; `None` when the policy abstains.
    pub enforced: Option<Ruling>,
    /// What shadow-mode rules would have made of the call, when that differs from
    /// `enforced`: journaled, never enforced.
    pub shadowed: Option<Ruling>,
}

/// How one rule went on a call ([`Rules::explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTrace {
    /// The rule's id.
    pub id: String,
    /// Its effect.
    pub effect: Effect,
    /// Whether it is only observed.
    pub shadow: bool,
    /// `None` when it matched; otherwise why not.
    pub unmatched: Option<String>,
    /// Set when it could not be evaluated (and so denies).
    pub unevaluable: Option<String>,
}

/// Which rule fires on a call, and why ([`Rules::explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The rulings, as the chain would take them.
    pub rulings: Rulings,
    /// Every rule, in order, and how it went.
    pub trace: Vec<RuleTrace>,
}

/// A set of rules (see the [module docs](super)).
#[derive(Debug)]
pub struct Rules {
    rules: Vec<Rule>,
    default: Option<Effect>,
    shadow: bool,
    digest: String,
    /// Every rule's tool glob in one automaton: the rules covering a tool in one pass.
    tools: globset::GlobSet,
    /// The rules covering each tool seen (a chain has few tools; bounded anyway).
    covering: RwLock<HashMap<String, Arc<[usize]>>>,
}

/// The most tool names [`Rules`] remembers the covering rules of.
const MAX_CACHED_TOOLS: usize = 4096;

impl Rules {
    /// Compiles `specs`: globs and regexes compiled, ids unique, every rule's examples
    /// checked. The first rule that fails is the error.
    pub fn compile(specs: Vec<RuleSpec>) -> Result<Rules, RuleError> {
        let mut rules: Vec<Rule> = Vec::with_capacity(specs.len());
        for (index, spec) in specs.into_iter().enumerate() {
            let id = spec.id.clone();
            let error = |message: String| RuleError {
                index,
                id: id.clone(),
                message,
            };
            if rules.iter().any(|r| r.spec.id == id) {
                return Err(error("another rule has the same id".into()));
            }
            let rule = Rule::compile(spec).map_err(error)?;
            rule.check_examples().map_err(error)?;
            rules.push(rule);
        }
        let mut set = globset::GlobSetBuilder::new();
        for (index, r) in rules.iter().enumerate() {
            set.add(tool_glob(&r.spec.tool).map_err(|message| RuleError {
                index,
                id: r.spec.id.clone(),
                message,
            })?);
        }
        let tools = set.build().map_err(|e| RuleError {
            index: 0,
            id: String::new(),
            message: format!("the tool globs cannot be combined: {e}"),
        })?;
        let mut rules = Rules {
            rules,
            default: None,
            shadow: false,
            digest: String::new(),
            tools,
            covering: RwLock::new(HashMap::new()),
        };
        rules.digest = rules.compute_digest();
        Ok(rules)
    }

    /// The effect of a call no enforced rule matches (`None`: the policy abstains, and
    /// whoever reviews calls decides).
    #[must_use]
    pub fn with_default(mut self, default: Option<Effect>) -> Self {
        self.default = default;
        self.digest = self.compute_digest();
        self
    }

    /// The whole set in shadow mode: every ruling is journaled as what would have
    /// happened, and none is enforced.
    #[must_use]
    pub fn shadow(mut self, yes: bool) -> Self {
        self.shadow = yes;
        self.digest = self.compute_digest();
        self
    }

    /// The rules' ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.spec.id.as_str())
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True with no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The default for unmatched calls.
    pub fn default_effect(&self) -> Option<Effect> {
        self.default
    }

    fn compute_digest(&self) -> String {
        let specs: Vec<Value> = self
            .rules
            .iter()
            .map(|r| serde_json::to_value(&r.spec).unwrap_or(Value::Null))
            .collect();
        let mut text = String::new();
        super::canonical(
            &serde_json::json!({
                "rules": specs,
                "default": self.default,
                "shadow": self.shadow,
            }),
            &mut text,
        );
        super::sha256_hex(text.as_bytes())
    }

    /// Every rule's outcome on the call, in order.
    fn outcomes<'a>(
        &'a self,
        tool: &'a str,
        arguments: &'a Map<String, Value>,
    ) -> impl Iterator<Item = (&'a Rule, Match)> + 'a {
        self.rules.iter().map(move |r| (r, r.test(tool, arguments)))
    }

    /// The strictest ruling among the rules `counted` keeps, or the default. (The
    /// ruling is built once, for the rule that wins.)
    fn combine<'a>(
        outcomes: impl Iterator<Item = (&'a Rule, &'a Match)>,
        counted: impl Fn(&Rule) -> bool,
        default: Option<Effect>,
    ) -> Option<Ruling> {
        let mut best: Option<(Effect, &Rule, Option<&str>)> = None;
        for (rule, m) in outcomes {
            if !counted(rule) {
                continue;
            }
            let (effect, unevaluable) = match m {
                Match::Yes => (rule.spec.effect, None),
                // A rule that cannot be evaluated denies: a policy never fails open.
                Match::Unevaluable(Unevaluable(why)) => (Effect::Deny, Some(why.as_str())),
                Match::No(_) | Match::OtherTool => continue,
            };
            // The first rule of the strictest effect wins.
            if best.as_ref().is_none_or(|(b, ..)| effect > *b) {
                best = Some((effect, rule, unevaluable));
            }
        }
        match best {
            Some((effect, rule, unevaluable)) => Some(Ruling {
                effect,
                rule: rule.spec.id.clone(),
                reason: match unevaluable {
                    Some(why) => Some(format!(
                        "Not run: policy rule {} could not be evaluated on these arguments ({why}).",
                        rule.spec.id
                    )),
                    None => rule.spec.reason.clone(),
                },
            }),
            None => default.map(|effect| Ruling {
                effect,
                rule: "default".into(),
                reason: None,
            }),
        }
    }

    fn rulings_of(&self, outcomes: &[(&Rule, Match)]) -> Rulings {
        let enforced_rules = |r: &Rule| !self.shadow && r.spec.mode == RuleMode::Enforce;
        let enforced = Self::combine(
            outcomes.iter().map(|(r, m)| (*r, m)),
            enforced_rules,
            (!self.shadow).then_some(self.default).flatten(),
        );
        let with_shadow = Self::combine(
            outcomes.iter().map(|(r, m)| (*r, m)),
            |_| true,
            self.default,
        );
        let shadowed = (with_shadow != enforced).then_some(with_shadow).flatten();
        Rulings { enforced, shadowed }
    }

    /// Which rule fires on a call of `tool` with `arguments`, and how every rule went.
    pub fn explain(&self, tool: &str, arguments: &Map<String, Value>) -> Explanation {
        let outcomes: Vec<(&Rule, Match)> = self.outcomes(tool, arguments).collect();
        let trace = outcomes
            .iter()
            .map(|(r, m)| RuleTrace {
                id: r.spec.id.clone(),
                effect: r.spec.effect,
                shadow: self.shadow || r.spec.mode == RuleMode::Shadow,
                unmatched: match m {
                    Match::Yes | Match::Unevaluable(_) => None,
                    Match::OtherTool => Some(format!(
                        "its tool glob {:?} does not cover {tool:?}",
                        r.spec.tool
                    )),
                    Match::No(why) => Some(r.why_not(why)),
                },
                unevaluable: match m {
                    Match::Unevaluable(Unevaluable(why)) => Some(why.clone()),
                    _ => None,
                },
            })
            .collect();
        Explanation {
            rulings: self.rulings_of(&outcomes),
            trace,
        }
    }
}

impl Policy for Rules {
    fn id(&self) -> &str {
        "rules"
    }

    fn digest(&self) -> String {
        self.digest.clone()
    }

    fn rule(&self, call: &CallFacts<'_>) -> Rulings {
        let covering = self.covering(call.tool);
        let outcomes: Vec<(&Rule, Match)> = covering
            .iter()
            .map(|&i| &self.rules[i])
            .map(|r| (r, r.test_args(call.arguments)))
            .collect();
        self.rulings_of(&outcomes)
    }
}

impl Rules {
    /// The rules whose tool glob covers `tool`, in order.
    fn covering(&self, tool: &str) -> Arc<[usize]> {
        if let Some(hit) = self
            .covering
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tool)
        {
            return hit.clone();
        }
        let mut found = self.tools.matches(tool);
        found.sort_unstable();
        let found: Arc<[usize]> = found.into();
        let mut cache = self.covering.write().unwrap_or_else(|p| p.into_inner());
        if cache.len() < MAX_CACHED_TOOLS {
            cache.insert(tool.to_owned(), found.clone());
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> RuleSpec {
        serde_json::from_value(v).unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn ruled(rules: &Rules, tool: &str, a: Value) -> Rulings {
        rules.rule(&CallFacts::new(tool, &args(a)))
    }

    #[test]
    fn each_matcher_tests_what_it_says() {
        let cases = [
            (json!({"eq": 5}), json!(5), true),
            (json!({"eq": 5}), json!(5.0), true),
            (json!({"eq": "a"}), json!("b"), false),
            (json!({"ne": "a"}), json!("b"), true),
            (json!({"ne": "a"}), json!("a"), false),
            (json!({"gt": 100}), json!(101), true),
            (json!({"gt": 100}), json!(100), false),
            (json!({"lt": 10}), json!(9.5), true),
            (json!({"lt": 10}), json!(10), false),
            (json!({"in": ["eur", "usd"]}), json!("usd"), true),
            (json!({"in": ["eur", "usd"]}), json!("gbp"), false),
            (json!({"glob": "/etc/*"}), json!("/etc/passwd"), true),
            (json!({"glob": "/etc/*"}), json!("/home/x"), false),
            (json!({"regex": "^rm\\b"}), json!("rm -rf /"), true),
            (json!({"regex": "^rm\\b"}), json!("ls"), false),
            (json!({"gt": 1, "lt": 3}), json!(2), true),
            (json!({"gt": 1, "lt": 3}), json!(3), false),
        ];
        for (test, value, matches) in cases {
            let rules = Rules::compile(vec![spec(json!({
                "id": "r", "tool": "t", "args": {"/x": test}, "effect": "deny"
            }))])
            .unwrap();
            let r = ruled(&rules, "t", json!({"x": value}));
            assert_eq!(r.enforced.is_some(), matches, "{test} on {value}");
        }
    }

    #[test]
    fn pointers_reach_into_nested_arguments_and_an_absent_one_does_not_match() {
        let rules = Rules::compile(vec![spec(json!({
            "id": "r", "args": {"/to/0/domain": {"ne": "example.com"}}, "effect": "ask"
        }))])
        .unwrap();
        assert!(
            ruled(&rules, "mail", json!({"to": [{"domain": "evil.test"}]}))
                .enforced
                .is_some()
        );
        assert!(
            ruled(&rules, "mail", json!({"to": [{"domain": "example.com"}]}))
                .enforced
                .is_none()
        );
        assert!(ruled(&rules, "mail", json!({})).enforced.is_none());
        // `~1` is an escaped `/` in a key.
        let rules = Rules::compile(vec![spec(json!({
            "id": "r", "args": {"/a~1b": {"eq": 1}}, "effect": "deny"
        }))])
        .unwrap();
        assert!(ruled(&rules, "t", json!({"a/b": 1})).enforced.is_some());
    }

    #[test]
    fn deny_beats_ask_beats_allow_whatever_the_order() {
        let specs = [
            spec(json!({"id": "a", "tool": "*", "effect": "allow"})),
            spec(json!({"id": "q", "tool": "pay*", "effect": "ask"})),
            spec(
                json!({"id": "d", "tool": "pay", "args": {"/n": {"gt": 10}}, "effect": "deny", "reason": "too much"}),
            ),
        ];
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let rules = Rules::compile(order.iter().map(|&i| specs[i].clone()).collect()).unwrap();
            let r = ruled(&rules, "pay", json!({"n": 11})).enforced.unwrap();
            assert_eq!((r.effect, r.rule.as_str()), (Effect::Deny, "d"));
            assert_eq!(r.reason.as_deref(), Some("too much"));
            let r = ruled(&rules, "pay", json!({"n": 1})).enforced.unwrap();
            assert_eq!((r.effect, r.rule.as_str()), (Effect::Ask, "q"));
            let r = ruled(&rules, "read", json!({})).enforced.unwrap();
            assert_eq!((r.effect, r.rule.as_str()), (Effect::Allow, "a"));
        }
    }

    #[test]
    fn an_unmatched_call_falls_to_the_default_or_the_policy_abstains() {
        let rules = Rules::compile(vec![spec(
            json!({"id": "x", "tool": "x", "effect": "deny"}),
        )])
        .unwrap();
        assert_eq!(ruled(&rules, "y", json!({})), Rulings::default());
        let rules = rules.with_default(Some(Effect::Ask));
        let r = ruled(&rules, "y", json!({})).enforced.unwrap();
        assert_eq!((r.effect, r.rule.as_str()), (Effect::Ask, "default"));
    }

    #[test]
    fn a_rule_that_cannot_be_evaluated_denies() {
        let rules = Rules::compile(vec![spec(json!({
            "id": "big", "tool": "pay", "args": {"/amount": {"gt": 100}}, "effect": "ask"
        }))])
        .unwrap();
        let r = ruled(&rules, "pay", json!({"amount": "lots"}))
            .enforced
            .unwrap();
        assert_eq!((r.effect, r.rule.as_str()), (Effect::Deny, "big"));
        assert!(r.reason.unwrap().contains("could not be evaluated"));
    }

    #[test]
    fn shadow_rules_are_observed_not_enforced() {
        let rules = Rules::compile(vec![
            spec(json!({"id": "new", "tool": "rm", "effect": "deny", "mode": "shadow"})),
            spec(json!({"id": "old", "tool": "rm", "effect": "ask"})),
        ])
        .unwrap();
        let r = ruled(&rules, "rm", json!({}));
        assert_eq!(r.enforced.as_ref().unwrap().rule, "old");
        let s = r.shadowed.unwrap();
        assert_eq!((s.effect, s.rule.as_str()), (Effect::Deny, "new"));
        // The whole set in shadow mode: nothing is enforced, everything is observed.
        let rules = rules.shadow(true);
        let r = ruled(&rules, "rm", json!({}));
        assert_eq!(r.enforced, None);
        assert_eq!(r.shadowed.unwrap().rule, "new");
        // No difference, no shadow ruling.
        let rules = Rules::compile(vec![spec(json!({"id": "a", "effect": "allow"}))]).unwrap();
        assert_eq!(ruled(&rules, "rm", json!({})).shadowed, None);
    }

    #[test]
    fn examples_are_checked_at_load_and_a_bad_rule_names_itself() {
        let ok = spec(json!({
            "id": "no-big-charges", "tool": "mcp:billing/charge",
            "args": {"/amount": {"gt": 100}}, "effect": "deny",
            "examples": {"match": [{"amount": 500}], "not_match": [{"amount": 5}]}
        }));
        Rules::compile(vec![ok.clone()]).unwrap();
        let mut wrong = ok.clone();
        wrong.id = "wrong".into();
        wrong.examples.as_mut().unwrap().not_match = vec![args(json!({"amount": 101}))];
        let e = Rules::compile(vec![ok.clone(), wrong]).unwrap_err();
        assert_eq!((e.index, e.id.as_str()), (1, "wrong"));
        assert!(e.to_string().contains("not_match[0]"), "{e}");
        let e = Rules::compile(vec![ok.clone(), ok.clone()]).unwrap_err();
        assert!(e.message.contains("same id"), "{e}");
        for (bad, says) in [
            (json!({"id": "g", "tool": "[", "effect": "deny"}), "glob"),
            (
                json!({"id": "r", "args": {"/a": {"regex": "("}}, "effect": "deny"}),
                "regex",
            ),
            (
                json!({"id": "p", "args": {"a": {"eq": 1}}, "effect": "deny"}),
                "JSON pointer",
            ),
            (
                json!({"id": "e", "args": {"/a": {}}, "effect": "deny"}),
                "no test",
            ),
            (json!({"id": " ", "effect": "deny"}), "needs an id"),
        ] {
            let e = Rules::compile(vec![spec(bad)]).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        // Unknown words are refused when read, not ignored.
        assert!(
            serde_json::from_value::<RuleSpec>(json!({"id": "x", "effect": "deny", "argz": {}}))
                .is_err()
        );
        assert!(serde_json::from_value::<RuleSpec>(json!({"id": "x", "effect": "maybe"})).is_err());
        assert!(
            serde_json::from_value::<RuleSpec>(
                json!({"id": "x", "effect": "deny", "args": {"/a": {"gte": 1}}})
            )
            .is_err()
        );
    }

    #[test]
    fn the_digest_changes_with_what_the_rules_say_and_only_then() {
        let a =
            Rules::compile(vec![spec(json!({"id": "x", "tool": "t", "effect": "ask"}))]).unwrap();
        let b =
            Rules::compile(vec![spec(json!({"effect": "ask", "tool": "t", "id": "x"}))]).unwrap();
        assert_eq!(a.digest(), b.digest());
        let c = Rules::compile(vec![spec(
            json!({"id": "x", "tool": "t", "effect": "deny"}),
        )])
        .unwrap();
        assert_ne!(a.digest(), c.digest());
        assert_ne!(a.digest(), a.digest_with_default());
    }

    impl Rules {
        fn digest_with_default(&self) -> String {
            Rules::compile(self.rules.iter().map(|r| r.spec.clone()).collect())
                .unwrap()
                .with_default(Some(Effect::Deny))
                .digest()
        }
    }

    #[test]
    fn explain_says_why_each_rule_did_not_fire() {
        let rules = Rules::compile(vec![
            spec(json!({"id": "other", "tool": "mail", "effect": "deny"})),
            spec(json!({"id": "small", "tool": "pay", "args": {"/amount": {"lt": 10}}, "effect": "allow"})),
            spec(json!({"id": "typed", "tool": "pay", "args": {"/amount": {"gt": 0}}, "effect": "ask"})),
        ])
        .unwrap();
        let e = rules.explain("pay", &args(json!({"amount": "x"})));
        assert!(
            e.trace[0]
                .unmatched
                .as_ref()
                .unwrap()
                .contains("does not cover")
        );
        assert!(e.trace[1].unevaluable.is_some());
        assert_eq!(e.rulings.enforced.unwrap().effect, Effect::Deny);
        let e = rules.explain("pay", &args(json!({"amount": 50})));
        assert!(e.trace[1].unmatched.as_ref().unwrap().contains("fails lt"));
        assert_eq!(e.rulings.enforced.unwrap().rule, "typed");
    }
}
