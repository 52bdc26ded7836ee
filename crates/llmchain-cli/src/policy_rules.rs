//! A profile's policy rules (`[[policy]]`, `policy_mode`, and `approve` as their
//! default), compiled once: the config refuses to load with a bad rule, so `run`,
//! `worker` and `serve` never start on one.

use std::sync::Arc;

use llmchain::policy::{RuleError, Rules};

/// A profile's rules (its `[[policy]]` and `policy_mode`); `None` when it has none.
pub(crate) fn compile(
    policy: &[llmchain::policy::RuleSpec],
    policy_mode: Option<&str>,
) -> Result<Option<Arc<Rules>>, RuleError> {
    if policy.is_empty() {
        return Ok(None);
    }
    let shadow = match policy_mode {
        None | Some("enforce") => false,
        Some("shadow") => true,
        Some(other) => {
            return Err(RuleError {
                index: 0,
                id: String::new(),
                message: format!("policy_mode is \"enforce\" or \"shadow\", not {other:?}"),
            });
        }
    };
    Ok(Some(Arc::new(
        Rules::compile(policy.to_vec())?.shadow(shadow),
    )))
}

use crate::review::APPROVE;

/// A profile's rules with its approve word as their shorthand: the profile's own rules
/// (checked as [`compile`] does), then, under `auto`, an `allow` rule for each tool
/// believed read-only (`read_only`: their policy names), and the word as the default for
/// calls no rule matches, ruling under its own name: `always` allows, `never` denies,
/// `ask` and `auto` ask (a person at a terminal; without one, `ask` waits in the review
/// inbox and `auto` denies). A rule of the profile still decides the calls it matches,
/// deny > ask > allow, whatever the word.
pub(crate) fn with_approve(
    policy: &[llmchain::policy::RuleSpec],
    policy_mode: Option<&str>,
    approve: crate::review::ApprovalPolicy,
    read_only: &[String],
) -> Result<Arc<Rules>, RuleError> {
    use crate::review::ApprovalPolicy;
    use llmchain::policy::{Effect, RuleSpec};
    // Checked as the profile's own set (its mode and examples), then compiled with the
    // word's rules.
    compile(policy, policy_mode)?;
    let shadow = policy_mode == Some("shadow");
    let word = approve.name();
    let mut specs = policy.to_vec();
    if approve == ApprovalPolicy::Auto {
        // A name a glob would read as a pattern gets no rule: it is asked about.
        let literal = |n: &&String| !n.contains(['*', '?', '[', ']', '{', '}', '\\', ',']);
        specs.extend(read_only.iter().filter(literal).map(|name| RuleSpec {
            id: format!("{APPROVE}{word} (read-only {name})"),
            tool: name.clone(),
            args: Default::default(),
            effect: Effect::Allow,
            reason: Some(format!("{name} only reads (approve = auto)")),
            mode: Default::default(),
            examples: None,
        }));
    }
    let (effect, reason) = match approve {
        ApprovalPolicy::Always => (Effect::Allow, None),
        ApprovalPolicy::Never => (
            Effect::Deny,
            Some("the user does not allow tool calls in this session (--approve never)".to_owned()),
        ),
        ApprovalPolicy::Ask | ApprovalPolicy::Auto => (Effect::Ask, None),
    };
    Ok(Arc::new(
        Rules::compile(specs)?
            .with_default_named(Some(effect), format!("{APPROVE}{word}"), reason)
            .shadow(shadow),
    ))
}

/// The line (from 1) of the bad rule in the config `text`: the `id = "…"` line of that
/// rule, after its profile's table (`None`: the top-level keys' profile).
pub(crate) fn line_of(text: &str, profile: Option<&str>, e: &RuleError) -> Option<usize> {
    let start = match profile {
        None => 0,
        Some(profile) => {
            let header = format!("[profiles.{profile}");
            text.lines()
                .position(|l| l.trim_start().starts_with(&header))?
        }
    };
    let ids = text.lines().enumerate().skip(start).filter(|(_, l)| {
        let l = l.trim_start();
        l.starts_with("id") && l[2..].trim_start().starts_with('=')
    });
    let mut policies = text.lines().enumerate().skip(start).filter(|(_, l)| {
        let l = l.trim();
        l.starts_with("[[") && l.ends_with("policy]]")
    });
    // By id when it has one, else the index-th `[[…policy]]` header.
    if !e.id.is_empty() {
        let quoted = [format!("\"{}\"", e.id), format!("'{}'", e.id)];
        if let Some((n, _)) = ids
            .clone()
            .find(|(_, l)| quoted.iter().any(|q| l.contains(q.as_str())))
        {
            return Some(n + 1);
        }
    }
    policies.nth(e.index).map(|(n, _)| n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::ApprovalPolicy;
    use llmchain::policy::{CallFacts, Effect, Policy};

    /// The enforced ruling of `rules` on a call of `tool` with `args`: effect, rule id.
    fn ruling(rules: &Rules, tool: &str, args: serde_json::Value) -> (Effect, String) {
        let args = args.as_object().cloned().unwrap_or_default();
        let r = rules
            .rule(&CallFacts::new(tool, &args))
            .enforced
            .expect("the approve word always rules");
        (r.effect, r.rule)
    }

    #[test]
    fn the_approve_word_is_shorthand_for_rules() {
        let read_only = vec!["read_text_file".to_owned(), "mcp:files/list".to_owned()];
        let profile: Vec<llmchain::policy::RuleSpec> = serde_json::from_value(serde_json::json!([
            {"id": "no-etc", "tool": "*", "args": {"/path": {"glob": "/etc/**"}}, "effect": "deny"},
            {"id": "writes-ok", "tool": "write_file", "effect": "allow"},
        ]))
        .unwrap();
        let auto = with_approve(&profile, None, ApprovalPolicy::Auto, &read_only).unwrap();
        // A tool believed read-only: allowed by its own rule, on record by name.
        assert_eq!(
            ruling(&auto, "read_text_file", serde_json::json!({"path": "a"})),
            (
                Effect::Allow,
                "approve=auto (read-only read_text_file)".into()
            )
        );
        assert_eq!(
            ruling(&auto, "mcp:files/list", serde_json::json!({})),
            (
                Effect::Allow,
                "approve=auto (read-only mcp:files/list)".into()
            )
        );
        // Anything else falls to the word: asked.
        assert_eq!(
            ruling(&auto, "run_command", serde_json::json!({})),
            (Effect::Ask, "approve=auto".into())
        );
        // The profile's rules still decide what they match: a deny beats the read-only
        // allow, and an allow holds where the word would ask.
        assert_eq!(
            ruling(
                &auto,
                "read_text_file",
                serde_json::json!({"path": "/etc/passwd"})
            ),
            (Effect::Deny, "no-etc".into())
        );
        assert_eq!(
            ruling(&auto, "write_file", serde_json::json!({"path": "a"})),
            (Effect::Allow, "writes-ok".into())
        );
        // The other words.
        let always = with_approve(&[], None, ApprovalPolicy::Always, &read_only).unwrap();
        assert_eq!(
            ruling(&always, "run_command", serde_json::json!({})),
            (Effect::Allow, "approve=always".into())
        );
        let ask = with_approve(&[], None, ApprovalPolicy::Ask, &read_only).unwrap();
        assert_eq!(
            ruling(&ask, "read_text_file", serde_json::json!({})),
            (Effect::Ask, "approve=ask".into())
        );
        let never = with_approve(&profile, None, ApprovalPolicy::Never, &read_only).unwrap();
        let args = serde_json::Map::new();
        let r = never
            .rule(&CallFacts::new("read_text_file", &args))
            .enforced
            .unwrap();
        assert_eq!((r.effect, r.rule.as_str()), (Effect::Deny, "approve=never"));
        assert!(r.reason.unwrap().contains("--approve never"));
        // Another word, or another set of read-only tools, is another policy: a ruling
        // stored under one is ruled on again under the other.
        assert_ne!(
            auto.digest(),
            with_approve(&profile, None, ApprovalPolicy::Ask, &read_only)
                .unwrap()
                .digest()
        );
        assert_ne!(
            auto.digest(),
            with_approve(&profile, None, ApprovalPolicy::Auto, &[])
                .unwrap()
                .digest()
        );
        // A name a glob would read as a pattern gets no allow rule.
        let odd = with_approve(&[], None, ApprovalPolicy::Auto, &["mcp:x/l*".to_owned()]).unwrap();
        assert_eq!(
            ruling(&odd, "mcp:x/l*", serde_json::json!({})).0,
            Effect::Ask
        );
        assert_eq!(
            ruling(&odd, "mcp:x/list", serde_json::json!({})).0,
            Effect::Ask
        );
        // A whole profile in shadow mode enforces nothing, the word's default included.
        let shadow = with_approve(&profile, Some("shadow"), ApprovalPolicy::Never, &[]).unwrap();
        assert!(shadow.rule(&CallFacts::new("x", &args)).enforced.is_none());
        // A bad rule of the profile is refused as `compile` refuses it.
        let bad: Vec<llmchain::policy::RuleSpec> = serde_json::from_value(
            serde_json::json!([{"id": "b", "args": {"/x": {"regex": "("}}, "effect": "deny"}]),
        )
        .unwrap();
        assert!(with_approve(&bad, None, ApprovalPolicy::Auto, &[]).is_err());
    }

    #[test]
    fn a_bad_rule_is_found_by_its_id_in_its_profile() {
        let text = "approve = \"ask\"\n\n[[policy]]\nid = \"a\"\neffect = \"deny\"\n\n\
                    [profiles.ops]\n[[profiles.ops.policy]]\nid = \"a\"\neffect = \"deny\"\n";
        let e = RuleError {
            index: 0,
            id: "a".into(),
            message: String::new(),
        };
        assert_eq!(line_of(text, None, &e), Some(4));
        assert_eq!(line_of(text, Some("ops"), &e), Some(9));
        let e = RuleError {
            index: 0,
            id: String::new(),
            message: String::new(),
        };
        assert_eq!(line_of(text, Some("ops"), &e), Some(8));
    }
}
