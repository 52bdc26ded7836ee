//! The checks that run before a tool body: the required-key check with "did you mean"
//! suggestions (reference §3.2), and full JSON Schema validation.

use serde_json::{Map, Value};

/// How many schema violations a refusal lists before summarising the rest, so a huge
/// bad argument cannot produce a huge message for the model.
pub const MAX_LISTED_VIOLATIONS: usize = 50;
/// How many characters of one violation message are kept (jsonschema quotes the
/// offending value, which may be megabytes).
pub const MAX_VIOLATION_CHARS: usize = 300;

/// How alike two names are, from 0.0 to 1.0 (reference §3.2):
/// 1.0 for names equal ignoring case; `0.7 + 0.3 * shorter/longer` when one contains
/// the other and the shorter has at least 3 characters; otherwise the Jaro similarity
/// when it is above 0.7; else 0.
pub(crate) fn name_similarity(a: &str, b: &str) -> f64 {
    let (la, lb) = (a.to_lowercase(), b.to_lowercase());
    if la == lb {
        return 1.0;
    }
    let (na, nb) = (la.chars().count(), lb.chars().count());
    let (short, long, ns, nl) = if na <= nb {
        (&la, &lb, na, nb)
    } else {
        (&lb, &la, nb, na)
    };
    if ns >= 3 && long.contains(short.as_str()) {
        #[allow(clippy::cast_precision_loss)] // names are short
        return 0.7 + 0.3 * ns as f64 / nl as f64;
    }
    let j = strsim::jaro(&la, &lb);
    if j > 0.7 { j } else { 0.0 }
}

/// The candidate most similar to `name` (highest non-zero [`name_similarity`]; the
/// first one wins a tie).
pub(crate) fn suggest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        let s = name_similarity(name, c);
        if s > 0.0 && best.is_none_or(|(_, b)| s > b) {
            best = Some((c, s));
        }
    }
    best.map(|(c, _)| c)
}

/// The `required` names of a schema (strings only, in order).
pub(crate) fn required_names(schema: &Value) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The keys of a schema's `properties` (in order); empty means "unknown".
pub(crate) fn accepted_names(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The required-key check (reference §3.2). `Ok` when every required key is present;
/// extra keys are never rejected here.
///
/// The message is the reference's, paragraph for paragraph:
///
/// ```text
/// Missing required parameters for this tool.
///
/// Required parameters: a, b
/// Missing parameters: b
/// Unrecognized parameters: file_path (did you mean "path"?)
/// Accepted parameters: path, offset
///
/// Ensure you're passing the correct parameter names as defined in the tool schema.
/// ```
///
/// Lines with nothing to list are left out; "Unrecognized" lists the received keys
/// that are not accepted, sorted, and is empty when the accepted names are unknown.
/// A suggestion only names an accepted parameter that was not supplied.
pub(crate) fn check_required(
    args: &Map<String, Value>,
    required: &[String],
    accepted: &[String],
) -> Result<(), String> {
    if required.iter().all(|r| args.contains_key(r)) {
        return Ok(());
    }
    let missing: Vec<&str> = required
        .iter()
        .filter(|r| !args.contains_key(*r))
        .map(String::as_str)
        .collect();
    let mut unrecognized: Vec<&str> = if accepted.is_empty() {
        Vec::new()
    } else {
        args.keys()
            .map(String::as_str)
            .filter(|k| !accepted.iter().any(|a| a == k))
            .collect()
    };
    unrecognized.sort_unstable();
    let unsupplied = || {
        accepted
            .iter()
            .map(String::as_str)
            .filter(|a| !args.contains_key(*a))
    };
    let unrecognized: Vec<String> = unrecognized
        .into_iter()
        .map(|k| match suggest(k, unsupplied()) {
            Some(s) => format!("{k} (did you mean \"{s}\"?)"),
            None => k.to_owned(),
        })
        .collect();

    let mut lines = Vec::new();
    if !required.is_empty() {
        lines.push(format!("Required parameters: {}", required.join(", ")));
    }
    if !missing.is_empty() {
        lines.push(format!("Missing parameters: {}", missing.join(", ")));
    }
    if !unrecognized.is_empty() {
        lines.push(format!(
            "Unrecognized parameters: {}",
            unrecognized.join(", ")
        ));
    }
    if !accepted.is_empty() {
        lines.push(format!("Accepted parameters: {}", accepted.join(", ")));
    }
    Err(format!(
        "Missing required parameters for this tool.\n\n{}\n\n\
         Ensure you're passing the correct parameter names as defined in the tool schema.",
        lines.join("\n")
    ))
}

/// The checks a tool makes of its arguments before its body runs (the required keys,
/// with a "did you mean"; then the JSON Schema), for a schema alone: what a person
/// editing a call's arguments is told before the call runs with them. A schema that
/// does not compile is an error too.
///
/// ```
/// use serde_json::json;
/// let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
/// assert!(llmchain::tool::check_arguments(&schema, json!({"n": 3}).as_object().unwrap()).is_ok());
/// let e = llmchain::tool::check_arguments(&schema, json!({"m": 3}).as_object().unwrap()).unwrap_err();
/// assert!(e.contains("Missing required parameters"), "{e}");
/// let e = llmchain::tool::check_arguments(&schema, json!({"n": "x"}).as_object().unwrap()).unwrap_err();
/// assert!(e.contains("/n"), "{e}");
/// ```
pub fn check_arguments(schema: &Value, args: &Map<String, Value>) -> Result<(), String> {
    check_required(args, &required_names(schema), &accepted_names(schema))?;
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("The tool's parameters schema is not valid: {e}"))?;
    check_schema(&validator, &Value::Object(args.clone()))
}

/// Validates `args` against a compiled schema, listing every violation by JSON
/// pointer (`(root)` for the arguments object itself).
pub(crate) fn check_schema(validator: &jsonschema::Validator, args: &Value) -> Result<(), String> {
    if validator.is_valid(args) {
        return Ok(());
    }
    let mut listed = Vec::new();
    let mut more = 0usize;
    for err in validator.iter_errors(args) {
        if listed.len() >= MAX_LISTED_VIOLATIONS {
            more += 1;
            continue;
        }
        let ptr = err.instance_path().as_str();
        let ptr = if ptr.is_empty() { "(root)" } else { ptr };
        listed.push(format!("- {ptr}: {}", truncate(&err.to_string())));
    }
    if more > 0 {
        listed.push(format!("- and {more} more"));
    }
    Err(format!(
        "The arguments do not match the tool's parameters schema.\n\n{}\n\n\
         Fix these and call the tool again.",
        listed.join("\n")
    ))
}

fn truncate(s: &str) -> String {
    if s.chars().count() <= MAX_VIOLATION_CHARS {
        return s.to_owned();
    }
    let cut: String = s.chars().take(MAX_VIOLATION_CHARS).collect();
    format!("{cut}… (truncated)")
}

/// The JSON type of a value, for messages.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_similarity_follows_the_reference() {
        assert_eq!(name_similarity("Path", "path"), 1.0);
        assert!(name_similarity("file_path", "path") > 0.7);
        assert_eq!(name_similarity("query", "path"), 0.0);
    }
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }
    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn reference_example() {
        let err = check_required(
            &map(json!({"file_path": "x", "a": 1})),
            &s(&["a", "b"]),
            &s(&["a", "b", "path", "offset"]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "Missing required parameters for this tool.\n\n\
             Required parameters: a, b\n\
             Missing parameters: b\n\
             Unrecognized parameters: file_path (did you mean \"path\"?)\n\
             Accepted parameters: a, b, path, offset\n\n\
             Ensure you're passing the correct parameter names as defined in the tool schema."
        );
    }

    #[test]
    fn reference_cases() {
        // No properties: no Accepted/Unrecognized lines.
        let err = check_required(&map(json!({"x": 1})), &s(&["field"]), &[]).unwrap_err();
        assert_eq!(
            err,
            "Missing required parameters for this tool.\n\nRequired parameters: field\nMissing parameters: field\n\n\
             Ensure you're passing the correct parameter names as defined in the tool schema."
        );
        // query vs path: no suggestion.
        let err =
            check_required(&map(json!({"query": 1})), &s(&["path"]), &s(&["path"])).unwrap_err();
        assert!(err.contains("Unrecognized parameters: query\n"), "{err}");
        // patern → pattern even though file_path was supplied.
        let err = check_required(
            &map(json!({"patern": 1, "file_path": "x"})),
            &s(&["pattern"]),
            &s(&["pattern", "file_path"]),
        )
        .unwrap_err();
        assert!(
            err.contains("Unrecognized parameters: patern (did you mean \"pattern\"?)"),
            "{err}"
        );
        // Extra keys alone are fine.
        assert!(check_required(&map(json!({"a": 1, "zz": 2})), &s(&["a"]), &s(&["a"])).is_ok());
    }

    #[test]
    fn similarity() {
        assert_eq!(name_similarity("abc", "ABC"), 1.0);
        assert!((name_similarity("path", "file_path") - (0.7 + 0.3 * 4.0 / 9.0)).abs() < 1e-9);
        // Containment needs 3 characters in the shorter name (this is Jaro's score).
        assert!((name_similarity("id", "video_id_list") - 0.717_948_717_948_718).abs() < 1e-9);
        assert_eq!(name_similarity("id", "name"), 0.0);
        assert_eq!(
            suggest("get_wether", ["search", "get_weather"]),
            Some("get_weather")
        );
        assert_eq!(suggest("zzz", ["search", "get_weather"]), None);
    }

    #[test]
    fn schema_violations_by_pointer() {
        let schema = json!({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},
                            "required":["city"],"additionalProperties":false});
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(check_schema(&v, &json!({"city":"Paris"})).is_ok());
        let err = check_schema(&v, &json!({"city": 5, "days": 0, "x": true})).unwrap_err();
        assert_eq!(
            err,
            "The arguments do not match the tool's parameters schema.\n\n\
             - /city: 5 is not of type \"string\"\n\
             - /days: 0 is less than the minimum of 1\n\
             - (root): Additional properties are not allowed ('x' was unexpected)\n\n\
             Fix these and call the tool again."
        );
    }
}
