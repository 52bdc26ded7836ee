//! Ids given by a unique prefix, as git takes a commit: `runs show 3f2a`,
//! `reviews approve 7c1e`.

use crate::error::CliError;

/// The one item of `items` whose id starts with `given` (`what` names the kind in the
/// errors: "run", "review"), or a usage error: none matches, or several do.
pub(crate) fn pick<T>(
    given: &str,
    items: Vec<T>,
    id: impl Fn(&T) -> &str,
    what: &str,
) -> Result<T, CliError> {
    let mut matching: Vec<T> = items
        .into_iter()
        .filter(|t| !given.is_empty() && id(t).starts_with(given))
        .collect();
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 => Err(CliError::usage(format!(
            "no {what} with id {given:?} (or starting with it); `llmchain {what}s list` shows them"
        ))
        .typed("not_found")),
        n => Err(CliError::usage(format!(
            "{given:?} starts {n} {what} ids: give more of the id"
        ))
        .typed("ambiguous_id")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_prefix_picks_one() {
        let ids = || vec!["abc1".to_owned(), "abd2".to_owned()];
        assert_eq!(pick("abc", ids(), |s| s, "run").unwrap(), "abc1");
        let e = pick("ab", ids(), |s| s, "run").unwrap_err().to_string();
        assert!(e.contains("starts 2 run ids"), "{e}");
        let e = pick("zz", ids(), |s| s, "run").unwrap_err().to_string();
        assert!(e.contains("no run with id \"zz\""), "{e}");
        assert!(pick("", ids(), |s| s, "run").is_err());
    }
}
