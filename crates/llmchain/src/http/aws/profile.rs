//! AWS's shared config and credentials files (`~/.aws/config`, `~/.aws/credentials`):
//! the profiles they define, merged as every AWS SDK merges them.
//!
//! Hand-written: the faithful parsers live in `aws-config`/`aws-runtime`, which bring an
//! SDK's worth of crates for a file format of a few rules. Checked against the
//! cross-SDK conformance cases (`tests/fixtures/aws_profile/profile-parser-tests.json`).
//!
//! Rules: `[profile NAME]` in the config file (`[default]` too), `[NAME]` in the
//! credentials file; names of letters, digits and `-_/.%@:+`, trimmed; `#` and `;` start
//! a comment line (and an inline comment after a section, or after whitespace in a
//! value); a line starting with whitespace continues the previous value; a section
//! given twice merges, the last value of a key wins, keys are case-insensitive; the
//! credentials file wins over the config file; `[profile default]` wins over
//! `[default]` in the config file.

use std::collections::BTreeMap;

/// A profile's properties.
pub type Profile = BTreeMap<String, String>;

/// Which file a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// `~/.aws/config`: sections `[profile NAME]` and `[default]`.
    Config,
    /// `~/.aws/credentials`: sections `[NAME]`.
    Credentials,
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_/.%@:+".contains(c))
}

/// The profiles of one file, or an error naming the line.
pub fn parse(text: &str, kind: FileKind) -> Result<BTreeMap<String, Profile>, String> {
    // Section name -> (whether it came with the `profile` prefix, properties).
    let mut sections: BTreeMap<String, (bool, Profile)> = BTreeMap::new();
    // The open section (None: ignored or none yet) and the last key set in it.
    let mut current: Option<(String, bool)> = None;
    let mut in_section = false;
    let mut last_key: Option<String> = None;
    let mut sub_properties = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            // A continuation of the last value.
            if !in_section {
                return Err(format!(
                    "line {}: expected a profile definition, found a continuation",
                    n + 1
                ));
            }
            let Some(key) = &last_key else {
                return Err(format!(
                    "line {}: expected a property definition, found a continuation",
                    n + 1
                ));
            };
            // Under a key with no value of its own, continuations are sub-properties.
            if sub_properties {
                match trimmed.split_once('=') {
                    Some((name, _)) if !name.trim().is_empty() => {}
                    Some(_) => {
                        return Err(format!("line {}: a sub-property has no name", n + 1));
                    }
                    None => {
                        return Err(format!(
                            "line {}: expected an '=' sign defining a sub-property",
                            n + 1
                        ));
                    }
                }
            }
            if let Some((name, _)) = &current
                && let Some((_, props)) = sections.get_mut(name)
                && let Some(v) = props.get_mut(key)
            {
                v.push('\n');
                v.push_str(trimmed);
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            // A section; `#` or `;` after the `]` starts a comment.
            let end = rest
                .find(']')
                .ok_or_else(|| format!("line {}: a profile definition must end with ']'", n + 1))?;
            let after = rest[end + 1..].trim();
            if !(after.is_empty() || after.starts_with('#') || after.starts_with(';')) {
                return Err(format!(
                    "line {}: unexpected text after a profile definition",
                    n + 1
                ));
            }
            let inner = rest[..end].trim();
            in_section = true;
            last_key = None;
            current = section_name(inner, kind).filter(|(name, _)| valid_name(name));
            if let Some((name, prefixed)) = &current {
                let entry = sections
                    .entry(name.clone())
                    .or_insert_with(|| (*prefixed, Profile::new()));
                if *prefixed && !entry.0 {
                    // `[profile default]` replaces a `[default]` read before it.
                    *entry = (true, Profile::new());
                } else if !*prefixed && entry.0 {
                    // `[default]` after `[profile default]`: ignored.
                    current = None;
                }
            }
            continue;
        }
        if !in_section {
            return Err(format!(
                "line {}: expected a profile definition before a property",
                n + 1
            ));
        }
        let (key, value) = trimmed.split_once('=').ok_or_else(|| {
            format!(
                "line {}: expected a property definition (key = value)",
                n + 1
            )
        })?;
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty() {
            return Err(format!("line {}: a property key cannot be empty", n + 1));
        }
        // An inline comment needs whitespace before it.
        let mut value = value.trim();
        if let Some(i) = value
            .char_indices()
            .find(|&(i, c)| (c == '#' || c == ';') && i > 0 && value[..i].ends_with([' ', '\t']))
            .map(|(i, _)| i)
        {
            value = value[..i].trim_end();
        }
        sub_properties = value.is_empty();
        if !valid_name(&key) {
            last_key = None;
            continue;
        }
        if let Some((name, _)) = &current
            && let Some((_, props)) = sections.get_mut(name)
        {
            props.insert(key.clone(), value.to_owned());
            last_key = Some(key);
        } else {
            last_key = None;
        }
    }
    Ok(sections.into_iter().map(|(k, (_, p))| (k, p)).collect())
}

/// The profile name a section header names in a file of `kind`, and whether it had
/// the `profile` prefix; `None` for sections that are not profiles there.
fn section_name(inner: &str, kind: FileKind) -> Option<(String, bool)> {
    match kind {
        FileKind::Credentials => (!inner.starts_with("profile ")
            && !inner.starts_with("profile\t"))
        .then(|| (inner.to_owned(), false)),
        FileKind::Config => {
            if let Some(rest) = inner
                .strip_prefix("profile")
                .filter(|r| r.starts_with([' ', '\t']))
            {
                Some((rest.trim().to_owned(), true))
            } else if inner == "default" {
                Some(("default".into(), false))
            } else {
                None
            }
        }
    }
}

/// Both files merged: the credentials file's values win.
pub fn merge(
    config: BTreeMap<String, Profile>,
    credentials: BTreeMap<String, Profile>,
) -> BTreeMap<String, Profile> {
    let mut all = config;
    for (name, props) in credentials {
        all.entry(name).or_default().extend(props);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typical_pair_of_files() {
        let config = "[default]\nregion = us-east-1\n[profile work] # mine\nregion = eu-west-1\noutput=json\n";
        let creds = "[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET # comment\n[work]\naws_access_key_id=W\n";
        let all = merge(
            parse(config, FileKind::Config).unwrap(),
            parse(creds, FileKind::Credentials).unwrap(),
        );
        assert_eq!(all["default"]["region"], "us-east-1");
        assert_eq!(all["default"]["aws_secret_access_key"], "SECRET");
        assert_eq!(all["work"]["region"], "eu-west-1");
        assert_eq!(all["work"]["aws_access_key_id"], "W");
    }
}
