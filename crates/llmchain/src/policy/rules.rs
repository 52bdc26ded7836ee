//! [`Rules`]: a set of rules, combined as deny > ask > allow, with a default for the
//! calls no rule matches and shadow mode.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use super::rule::{Condition, Match, Rule, RuleMode, RuleSpec, Unevaluable};
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
    /// The default's name and reason in its rulings (`default`, none: see
    /// [`Rules::with_default_named`]).
    default_rule: (String, Option<String>),
    shadow: bool,
    digest: String,
    /// The rules covering each tool seen (a chain has few tools; bounded anyway).
    covering: RwLock<HashMap<String, Arc<[Group]>, foldhash::fast::RandomState>>,
    /// Every distinct test of the set, once: `(rule, pointer, test)` of the first rule
    /// that has it. Rules that ask the same of the same argument (many do: `*@corp`
    /// on `/to` in ten rules) share one evaluation per call.
    conditions: Vec<(usize, usize, usize)>,
    /// What a call's ruling reads of each rule, packed apart from the rules (which
    /// are mostly text) so that the rules covering a tool stay in cache.
    hot: Vec<Hot>,
    /// Every rule's tests as indices into `conditions`, in the order they are tried;
    /// rule `i`'s are `plan[hot[i].plan.0..hot[i].plan.1]`.
    plan: Vec<u32>,
}

/// The rules covering a tool that have the same tests: one evaluation decides for all
/// of them, and which of them would win is known in advance.
#[derive(Debug, Clone, Copy)]
struct Group {
    plan: (u32, u32),
    /// When the tests hold: the group's strictest effect and its first rule of it.
    all: (Effect, u32),
    /// The same among the group's enforced rules.
    enforced: Option<(Effect, u32)>,
    /// When a test cannot be evaluated every rule denies: the first rule, and the
    /// first enforced one.
    first: u32,
    first_enforced: Option<u32>,
}

/// What ruling on a call reads of one rule.
#[derive(Debug, Clone, Copy)]
struct Hot {
    effect: Effect,
    /// Its mode is enforce (the set may still be in shadow mode).
    enforce: bool,
    plan: (u32, u32),
}

/// How many distinct tests are remembered per call on the stack (more: on the heap).
const STACK_CONDITIONS: usize = 256;

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
        let mut conditions = Vec::new();
        let mut seen: HashMap<String, u32> = HashMap::new();
        let mut plan = Vec::new();
        let mut hot = Vec::with_capacity(rules.len());
        for (r, rule) in rules.iter().enumerate() {
            let start = plan.len() as u32;
            for (pointer, test, key) in rule.conditions() {
                plan.push(*seen.entry(key).or_insert_with(|| {
                    conditions.push((r, pointer, test));
                    (conditions.len() - 1) as u32
                }));
            }
            hot.push(Hot {
                effect: rule.spec.effect,
                enforce: rule.spec.mode == RuleMode::Enforce,
                plan: (start, plan.len() as u32),
            });
        }
        let mut rules = Rules {
            rules,
            default: None,
            default_rule: ("default".to_owned(), None),
            shadow: false,
            digest: String::new(),
            covering: RwLock::new(HashMap::default()),
            conditions,
            hot,
            plan,
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

    /// The default for unmatched calls, ruling under the name `rule` (instead of
    /// `default`) with `reason`: a front end's own word for what happens otherwise
    /// (the CLI's `approve = ask` is the default `ask`, named `approve=ask`).
    #[must_use]
    pub fn with_default_named(
        mut self,
        default: Option<Effect>,
        rule: impl Into<String>,
        reason: Option<String>,
    ) -> Self {
        self.default = default;
        self.default_rule = (rule.into(), reason);
        self.digest = self.compute_digest();
        self
    }

    /// The ruling of the default `effect`.
    fn default_ruling(&self, effect: Option<Effect>) -> Option<Ruling> {
        effect.map(|effect| Ruling {
            effect,
            rule: self.default_rule.0.clone(),
            reason: self.default_rule.1.clone(),
        })
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
                "default_rule": [&self.default_rule.0, &self.default_rule.1],
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
        default: Option<Ruling>,
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
            None => default,
        }
    }

    fn rulings_of(&self, outcomes: &[(&Rule, Match)]) -> Rulings {
        let enforced_rules = |r: &Rule| !self.shadow && r.spec.mode == RuleMode::Enforce;
        let enforced = Self::combine(
            outcomes.iter().map(|(r, m)| (*r, m)),
            enforced_rules,
            self.default_ruling((!self.shadow).then_some(self.default).flatten()),
        );
        let with_shadow = Self::combine(
            outcomes.iter().map(|(r, m)| (*r, m)),
            |_| true,
            self.default_ruling(self.default),
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
        // Ruled on under the cache's read lock: no count taken on the shared list.
        if let Some(hit) = self
            .covering
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(call.tool)
        {
            return self.rule_covered(hit, call);
        }
        self.rule_covered(&self.covering(call.tool), call)
    }
}

impl Rules {
    /// The rulings on `call`, given the rules that cover its tool.
    fn rule_covered(&self, covering: &[Group], call: &CallFacts<'_>) -> Rulings {
        // What each distinct test said on this call: 0 not asked yet, else a Condition.
        let mut stack = [0u8; STACK_CONDITIONS];
        let mut heap = Vec::new();
        let memo: &mut [u8] = if self.conditions.len() <= STACK_CONDITIONS {
            &mut stack[..self.conditions.len()]
        } else {
            heap.resize(self.conditions.len(), 0);
            &mut heap
        };
        // One pass, two tallies: the rules enforced, and every rule (shadow included):
        // (effect, rule, whether it could not be evaluated). The first rule of the
        // strictest effect wins.
        let mut enforced: Option<(Effect, usize, bool)> = None;
        let mut all: Option<(Effect, usize, bool)> = None;
        let consider =
            |best: &mut Option<(Effect, usize, bool)>, effect, rule: u32, unevaluable| {
                let rule = rule as usize;
                if best.is_none_or(|(b, r, _)| effect > b || (effect == b && rule < r)) {
                    *best = Some((effect, rule, unevaluable));
                }
            };
        for g in covering {
            match self.outcome(g.plan, call.arguments, memo) {
                Condition::Yes => {
                    consider(&mut all, g.all.0, g.all.1, false);
                    if let (false, Some((effect, rule))) = (self.shadow, g.enforced) {
                        consider(&mut enforced, effect, rule, false);
                    }
                }
                // A rule that cannot be evaluated denies: a policy never fails open.
                Condition::Unevaluable => {
                    consider(&mut all, Effect::Deny, g.first, true);
                    if let (false, Some(rule)) = (self.shadow, g.first_enforced) {
                        consider(&mut enforced, Effect::Deny, rule, true);
                    }
                }
                Condition::No => {}
            }
        }
        let ruling = |best: Option<(Effect, usize, bool)>, default: Option<Effect>| match best {
            // The winner matched: its own effect and reason.
            Some((effect, i, false)) => Some(Ruling {
                effect,
                rule: self.rules[i].spec.id.clone(),
                reason: self.rules[i].spec.reason.clone(),
            }),
            // It could not be evaluated: asked again, in full, for the words why.
            Some((_, i, true)) => {
                let rule = &self.rules[i];
                Self::combine(
                    std::iter::once((rule, &rule.test_args(call.arguments))),
                    |_| true,
                    None,
                )
            }
            None => self.default_ruling(default),
        };
        if !self.shadow && all == enforced {
            // Nothing only observed decided differently: no shadow ruling to build.
            let enforced = ruling(enforced, self.default);
            return Rulings {
                enforced,
                shadowed: None,
            };
        }
        let enforced = ruling(enforced, (!self.shadow).then_some(self.default).flatten());
        let with_shadow = ruling(all, self.default);
        let shadowed = (with_shadow != enforced).then_some(with_shadow).flatten();
        Rulings { enforced, shadowed }
    }

    /// How a rule's argument tests go on `arguments`, each distinct test asked at
    /// most once per call (`memo`).
    fn outcome(
        &self,
        plan: (u32, u32),
        arguments: &Map<String, Value>,
        memo: &mut [u8],
    ) -> Condition {
        for &c in &self.plan[plan.0 as usize..plan.1 as usize] {
            let said = match memo[c as usize] {
                1 => Condition::Yes,
                2 => Condition::No,
                3 => Condition::Unevaluable,
                _ => {
                    let (r, pointer, test) = self.conditions[c as usize];
                    let said = self.rules[r].condition(pointer, test, arguments);
                    memo[c as usize] = match said {
                        Condition::Yes => 1,
                        Condition::No => 2,
                        Condition::Unevaluable => 3,
                    };
                    said
                }
            };
            if said != Condition::Yes {
                return said;
            }
        }
        Condition::Yes
    }

    /// The rules whose tool glob covers `tool`, in groups of equal tests.
    fn covering(&self, tool: &str) -> Arc<[Group]> {
        if let Some(hit) = self
            .covering
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tool)
        {
            return hit.clone();
        }
        // Each rule's own matcher, once per tool name (not a GlobSet: its literal
        // strategies answer some globs differently from the matcher `explain` uses).
        let found = (0..self.rules.len()).filter(|&i| self.rules[i].covers(tool));
        let mut groups: Vec<Group> = Vec::new();
        for i in found {
            let hot = self.hot[i];
            let rule = i as u32;
            let tests = |plan: (u32, u32)| &self.plan[plan.0 as usize..plan.1 as usize];
            let at = groups.iter().position(|g| tests(g.plan) == tests(hot.plan));
            // Rules come in order: a later rule replaces only on a stricter effect.
            match at.map(|at| &mut groups[at]) {
                None => groups.push(Group {
                    plan: hot.plan,
                    all: (hot.effect, rule),
                    enforced: hot.enforce.then_some((hot.effect, rule)),
                    first: rule,
                    first_enforced: hot.enforce.then_some(rule),
                }),
                Some(g) => {
                    if hot.effect > g.all.0 {
                        g.all = (hot.effect, rule);
                    }
                    if hot.enforce {
                        if g.enforced.is_none_or(|(e, _)| hot.effect > e) {
                            g.enforced = Some((hot.effect, rule));
                        }
                        g.first_enforced.get_or_insert(rule);
                    }
                }
            }
        }
        let groups: Arc<[Group]> = groups.into();
        let mut cache = self.covering.write().unwrap_or_else(|p| p.into_inner());
        if cache.len() < MAX_CACHED_TOOLS {
            cache.insert(tool.to_owned(), groups.clone());
        }
        groups
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

    mod fast_path {
        use super::*;
        use proptest::prelude::*;

        fn a_test() -> impl Strategy<Value = Value> {
            prop_oneof![
                (0i64..4).prop_map(|n| json!({"eq": n})),
                (0i64..4).prop_map(|n| json!({"ne": n})),
                (0i64..4).prop_map(|n| json!({"gt": n})),
                (0i64..4).prop_map(|n| json!({"lt": n, "gt": 0})),
                Just(json!({"in": [1, "a"]})),
                Just(json!({"glob": "a*"})),
                Just(json!({"regex": "^b"})),
            ]
        }

        fn a_rule() -> impl Strategy<Value = Value> {
            (
                prop::sample::select(vec!["*", "t", "t*", "u", "mcp:*", "**.", "*/*", "{t,u}*"]),
                prop::collection::btree_map(
                    prop::sample::select(vec!["/x", "/y", "/z/0"]),
                    a_test(),
                    0..3,
                ),
                prop::sample::select(vec!["allow", "ask", "deny"]),
                any::<bool>(),
            )
                .prop_map(|(tool, args, effect, shadow)| {
                    json!({"tool": tool, "args": args, "effect": effect,
                           "mode": if shadow { "shadow" } else { "enforce" }})
                })
        }

        fn a_value() -> impl Strategy<Value = Value> {
            prop_oneof![
                (0i64..5).prop_map(Value::from),
                prop::sample::select(vec!["a", "ab", "b", "c"]).prop_map(Value::from),
                Just(json!([1, "a"])),
                Just(Value::Null),
            ]
        }

        proptest! {
            /// The per-call path (shared tests asked once, one pass, no list) rules
            /// exactly as `explain`, which tries every rule in full.
            #[test]
            fn rule_agrees_with_explain(
                rules in prop::collection::vec(a_rule(), 0..12),
                default in prop::option::of(prop::sample::select(vec![Effect::Allow, Effect::Ask, Effect::Deny])),
                whole_shadow in any::<bool>(),
                tool in prop::sample::select(vec!["t", "tx", "u", "mcp:s/w", "v", "..", "a/b"]),
                x in prop::option::of(a_value()),
                y in prop::option::of(a_value()),
                z in prop::option::of(a_value()),
            ) {
                let specs = rules.into_iter().enumerate().map(|(i, mut r)| {
                    r["id"] = json!(format!("r{i}"));
                    spec(r)
                }).collect();
                let rules = Rules::compile(specs).unwrap().with_default(default).shadow(whole_shadow);
                let mut a = Map::new();
                if let Some(x) = x { a.insert("x".into(), x); }
                if let Some(y) = y { a.insert("y".into(), y); }
                if let Some(z) = z { a.insert("z".into(), json!([z])); }
                // Twice: the second call reads the tool's covering rules from the cache.
                for _ in 0..2 {
                    prop_assert_eq!(rules.rule(&CallFacts::new(tool, &a)), rules.explain(tool, &a).rulings);
                }
            }
        }
    }
}
