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
