//! Rewriting a JSON Schema into the OpenAPI 3.0 subset Gemini's `parameters` accepts.
//!
//! Gemini rejects `$ref`, `$defs`, `additionalProperties`, `$schema`, `const`, `oneOf`,
//! type arrays and most `format`s. The rewrite:
//! - inlines `$ref`s to `#/$defs/...` and `#/definitions/...` (a cycle becomes a bare
//!   `{"type": "object"}` at the point it recurs);
//! - turns `["string", "null"]` into `"type": "string", "nullable": true`, and a `null`
//!   branch of `anyOf`/`oneOf` into `nullable`;
//! - turns `oneOf` into `anyOf`, `const` into a one-value `enum`, and merges `allOf`;
//! - keeps only the keywords Gemini knows, `enum`s of strings only, and the string
//!   formats `enum` and `date-time`;
//! - drops `required` names that are not properties.

use serde_json::{Map, Value};

const KEEP: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// Nesting deeper than this is cut (hostile or runaway schemas).
const MAX_DEPTH: usize = 64;

/// The Gemini form of `schema`.
///
/// ```
/// use serde_json::json;
/// let s = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
///   "properties": {"loc": {"$ref": "#/$defs/Loc"}, "n": {"type": ["integer", "null"]}},
///   "additionalProperties": false, "$defs": {"Loc": {"type": "string", "const": "x"}}});
/// assert_eq!(llmchain::provider::gemini_schema(&s), json!({"type": "object",
///   "properties": {"loc": {"type": "string", "enum": ["x"]}, "n": {"type": "integer", "nullable": true}}}));
/// ```
pub fn gemini_schema(schema: &Value) -> Value {
    let defs = schema.as_object();
    let mut stack = Vec::new();
    rewrite(schema, defs, &mut stack, 0)
}

fn lookup<'a>(root: Option<&'a Map<String, Value>>, reference: &str) -> Option<&'a Value> {
    let root = root?;
    let (table, name) = if let Some(n) = reference.strip_prefix("#/$defs/") {
        ("$defs", n)
    } else if let Some(n) = reference.strip_prefix("#/definitions/") {
        ("definitions", n)
    } else {
        return None;
    };
    // JSON pointer escapes.
    let name = name.replace("~1", "/").replace("~0", "~");
    root.get(table)?.get(&name)
}

fn rewrite(
    schema: &Value,
    root: Option<&Map<String, Value>>,
    stack: &mut Vec<String>,
    depth: usize,
) -> Value {
    let Some(obj) = schema.as_object() else {
        // `true` / `false` schemas and junk: accept anything.
        return Value::Object(Map::new());
    };
    if depth > MAX_DEPTH {
        return object_type();
    }
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        if stack.iter().any(|s| s == r) {
            return object_type();
        }
        let Some(target) = lookup(root, r) else {
            return object_type();
        };
        stack.push(r.to_owned());
        let mut out = rewrite(target, root, stack, depth + 1);
        stack.pop();
        // Sibling keywords of `$ref` (e.g. a description) refine the target.
        let mut siblings = obj.clone();
        siblings.remove("$ref");
        if let (Value::Object(o), Value::Object(s)) = (
            &mut out,
            rewrite(&Value::Object(siblings), root, stack, depth + 1),
        ) {
            for (k, v) in s {
                o.insert(k, v);
            }
        }
        return out;
    }

    let mut out = Map::new();
    let mut nullable = obj
        .get("nullable")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    // allOf: merge the branches into this schema.
    if let Some(Value::Array(all)) = obj.get("allOf") {
        for branch in all {
            if let Value::Object(b) = rewrite(branch, root, stack, depth + 1) {
                merge_into(&mut out, b);
            }
        }
    }

    for (k, v) in obj {
        match k.as_str() {
            "type" => match v {
                Value::String(t) if t == "null" => nullable = true,
                Value::String(_) => {
                    out.insert(k.clone(), v.clone());
                }
                Value::Array(types) => {
                    let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                    nullable |= non_null.len() < types.len();
                    match non_null.as_slice() {
                        [] => {}
                        [one] => {
                            out.insert("type".into(), (*one).clone());
                        }
                        many => {
                            let branches = many
                                .iter()
                                .map(|t| {
                                    let mut m = Map::new();
                                    m.insert("type".into(), (*t).clone());
                                    Value::Object(m)
                                })
                                .collect();
                            out.insert("anyOf".into(), Value::Array(branches));
                        }
                    }
                }
                _ => {}
            },
            "anyOf" | "oneOf" => {
                let Value::Array(branches) = v else { continue };
                let mut kept = Vec::new();
                for b in branches {
                    if b.get("type").and_then(Value::as_str) == Some("null") {
                        nullable = true;
                        continue;
                    }
                    kept.push(rewrite(b, root, stack, depth + 1));
                }
                if kept.len() == 1 {
                    if let Some(Value::Object(b)) = kept.pop() {
                        merge_into(&mut out, b);
                    }
                } else if !kept.is_empty() {
                    out.insert("anyOf".into(), Value::Array(kept));
                }
            }
            "const" => {
                if let Value::String(_) = v {
                    out.insert("enum".into(), Value::Array(vec![v.clone()]));
                    out.entry("type").or_insert_with(|| "string".into());
                }
            }
            "enum" => {
                if let Value::Array(vals) = v
                    && vals.iter().all(Value::is_string)
                {
                    out.insert(k.clone(), v.clone());
                }
            }
            "format" => {
                if let Some(f) = v.as_str() {
                    let is_string = obj.get("type").and_then(Value::as_str) == Some("string");
                    let ok = if is_string {
                        matches!(f, "enum" | "date-time")
                    } else {
                        matches!(f, "int32" | "int64" | "float" | "double")
                    };
                    if ok {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            "properties" => {
                if let Value::Object(props) = v {
                    let mut p = Map::new();
                    for (name, s) in props {
                        p.insert(name.clone(), rewrite(s, root, stack, depth + 1));
                    }
                    out.insert(k.clone(), Value::Object(p));
                }
            }
            "items" => {
                out.insert(k.clone(), rewrite(v, root, stack, depth + 1));
            }
            "nullable" | "allOf" => {}
            _ if KEEP.contains(&k.as_str()) => {
                out.insert(k.clone(), v.clone());
            }
            // additionalProperties, $schema, $id, $defs, definitions, $comment, examples,
            // patternProperties, ...: not accepted.
            _ => {}
        }
    }
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    // `required` may only name properties that exist.
    if let Some(Value::Array(req)) = out.get("required").cloned() {
        let props = out.get("properties").and_then(Value::as_object);
        let kept: Vec<Value> = req
            .into_iter()
            .filter(|r| {
                r.as_str()
                    .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)))
            })
            .collect();
        if kept.is_empty() {
            out.remove("required");
        } else {
            out.insert("required".into(), Value::Array(kept));
        }
    }
    Value::Object(out)
}

fn object_type() -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::String("object".into()));
    Value::Object(m)
}

/// Merges `from` into `into`: properties and required lists are joined, other keys are
/// set when absent.
fn merge_into(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        match (k.as_str(), into.get_mut(&k), v) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (pk, pv) in theirs {
                    mine.insert(pk, pv);
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for r in theirs {
                    if !mine.contains(&r) {
                        mine.push(r);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                into.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refs_cycles_and_keywords() {
        let s = json!({
            "type": "object",
            "$defs": {"Node": {"type": "object", "properties": {
                "value": {"type": "string", "format": "uri"},
                "next": {"$ref": "#/$defs/Node"}}, "additionalProperties": false}},
            "properties": {
                "root": {"$ref": "#/$defs/Node", "description": "the head"},
                "mode": {"oneOf": [{"const": "a"}, {"const": "b"}]},
                "opt": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "both": {"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
                                   {"properties": {"b": {"type": "number"}}}]},
                "nums": {"type": "integer", "enum": [1, 2]}
            },
            "required": ["root", "ghost"]
        });
        let g = gemini_schema(&s);
        assert_eq!(
            g,
            json!({"type": "object", "properties": {
                "root": {"type": "object", "description": "the head", "properties": {
                    "value": {"type": "string"},
                    "next": {"type": "object"}}},
                "mode": {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "enum": ["b"]}]},
                "opt": {"type": "integer", "nullable": true},
                "both": {"properties": {"a": {"type": "string"}, "b": {"type": "number"}}, "required": ["a"]},
                "nums": {"type": "integer"}
            }, "required": ["root"]})
        );
    }

    #[test]
    fn junk_never_panics() {
        for s in [
            json!(true),
            json!(null),
            json!({"$ref": "#/nope"}),
            json!({"type": 3}),
        ] {
            let _ = gemini_schema(&s);
        }
        // Deep nesting is cut.
        let mut s = json!({"type": "string"});
        for _ in 0..200 {
            s = json!({"type": "array", "items": s});
        }
        let _ = gemini_schema(&s);
    }
}
