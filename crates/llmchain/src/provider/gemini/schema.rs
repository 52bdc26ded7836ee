//! Rewriting a JSON Schema into the OpenAPI 3.0 subset Gemini's `parameters` accepts.
//!
//! Gemini's `parameters` and `responseSchema` reject `$ref`, `$defs`,
//! `additionalProperties`, `$schema`, `const`, `oneOf`, type arrays and most `format`s.
//! The encoder sends a schema with a `$ref` as it is, in `parametersJsonSchema` or
//! `responseJsonSchema` (which take JSON Schema, references included), and rewrites the
//! others with [`gemini_schema`]:
//! - inlines `$ref`s to `#/$defs/...` and `#/definitions/...` (a cycle becomes a bare
//!   `{"type": "object"}` at the point it recurs), within a budget of nodes and bytes:
//!   a definition referenced twice by each level would otherwise grow as 2^levels;
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

/// The fewest schema nodes the rewrite may produce (more for a larger input: eight per
/// input node).
const MIN_NODE_BUDGET: usize = 10_000;

/// The fewest bytes of copied keywords the rewrite may produce (more for a larger input:
/// eight times its size).
const MIN_BYTE_BUDGET: usize = 1 << 20;

/// A schema whose rewrite would exceed the rewrite's budget: its `$ref`s expand to more
/// than it may produce (a definition referenced twice by each of N levels expands to 2^N
/// copies).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the schema's `$ref`s expand to more than {limit_nodes} nodes or {limit_bytes} bytes \
     when inlined for Gemini's `parameters`; send it as JSON Schema \
     (`parametersJsonSchema`) or reference each definition fewer times"
)]
pub struct SchemaTooLarge {
    /// The node budget this schema had.
    pub limit_nodes: usize,
    /// The byte budget this schema had.
    pub limit_bytes: usize,
}

/// The Gemini form of `schema`, or [`SchemaTooLarge`] when inlining its `$ref`s would
/// produce more than eight times its size (and more than 10,000 nodes or 1 MiB).
///
/// ```
/// use serde_json::json;
/// let s = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
///   "properties": {"loc": {"$ref": "#/$defs/Loc"}, "n": {"type": ["integer", "null"]}},
///   "additionalProperties": false, "$defs": {"Loc": {"type": "string", "const": "x"}}});
/// assert_eq!(llmchain::provider::gemini_schema(&s).unwrap(), json!({"type": "object",
///   "properties": {"loc": {"type": "string", "enum": ["x"]}, "n": {"type": "integer", "nullable": true}}}));
/// ```
pub fn gemini_schema(schema: &Value) -> Result<Value, SchemaTooLarge> {
    let (nodes, bytes) = measure(schema);
    let limit_nodes = MIN_NODE_BUDGET.max(nodes.saturating_mul(8));
    let limit_bytes = MIN_BYTE_BUDGET.max(bytes.saturating_mul(8));
    let mut rewriter = Rewriter {
        root: schema.as_object(),
        stack: Vec::new(),
        nodes_left: limit_nodes,
        bytes_left: limit_bytes,
    };
    rewriter.rewrite(schema, 0).ok_or(SchemaTooLarge {
        limit_nodes,
        limit_bytes,
    })
}

/// Whether `schema` holds a `$ref` anywhere (then Gemini gets it as JSON Schema).
pub(crate) fn has_refs(schema: &Value) -> bool {
    match schema {
        Value::Object(o) => o
            .iter()
            .any(|(k, v)| (k == "$ref" && v.is_string()) || has_refs(v)),
        Value::Array(a) => a.iter().any(has_refs),
        _ => false,
    }
}

/// A value's node count and approximate serialized size, without serializing it.
fn measure(v: &Value) -> (usize, usize) {
    match v {
        Value::Object(o) => o.iter().fold((1, 2), |(n, b), (k, v)| {
            let (vn, vb) = measure(v);
            (n + vn, b + k.len() + 4 + vb)
        }),
        Value::Array(a) => a.iter().fold((1, 2), |(n, b), v| {
            let (vn, vb) = measure(v);
            (n + vn, b + vb + 1)
        }),
        Value::String(s) => (1, s.len() + 2),
        _ => (1, 8),
    }
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

/// One rewrite: the root (for `$ref`s), the references being expanded (for cycles), and
/// what is left of the budget. `None` from a method means the budget ran out.
struct Rewriter<'a> {
    root: Option<&'a Map<String, Value>>,
    stack: Vec<&'a str>,
    nodes_left: usize,
    bytes_left: usize,
}

impl<'a> Rewriter<'a> {
    /// Charges one node and `bytes` copied bytes.
    fn charge(&mut self, bytes: usize) -> Option<()> {
        self.nodes_left = self.nodes_left.checked_sub(1)?;
        self.bytes_left = self.bytes_left.checked_sub(bytes)?;
        Some(())
    }

    /// A copy of a kept keyword's value, charged.
    fn copy(&mut self, key: &str, v: &Value) -> Option<Value> {
        let (nodes, bytes) = measure(v);
        self.nodes_left = self.nodes_left.checked_sub(nodes)?;
        self.bytes_left = self.bytes_left.checked_sub(bytes + key.len() + 4)?;
        Some(v.clone())
    }

    fn rewrite(&mut self, schema: &'a Value, depth: usize) -> Option<Value> {
        self.charge(2)?;
        let Some(obj) = schema.as_object() else {
            // `true` / `false` schemas and junk: accept anything.
            return Some(Value::Object(Map::new()));
        };
        if depth > MAX_DEPTH {
            return Some(object_type());
        }
        if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
            if self.stack.contains(&r) {
                return Some(object_type());
            }
            let Some(target) = lookup(self.root, r) else {
                return Some(object_type());
            };
            self.stack.push(r);
            let out = self.rewrite(target, depth + 1);
            self.stack.pop();
            let mut out = out?;
            // Sibling keywords of `$ref` (e.g. a description) refine the target: the same
            // object rewritten, where `$ref` is not a kept keyword.
            if let (Value::Object(o), Value::Object(s)) = (&mut out, self.keywords(obj, depth)?) {
                for (k, v) in s {
                    o.insert(k, v);
                }
            }
            return Some(out);
        }
        self.keywords(obj, depth)
    }

    /// The rewrite of `obj`'s own keywords (`$ref` aside).
    fn keywords(&mut self, obj: &'a Map<String, Value>, depth: usize) -> Option<Value> {
        let mut out = Map::new();
        let mut nullable = obj
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(false);

        // allOf: merge the branches into this schema.
        if let Some(Value::Array(all)) = obj.get("allOf") {
            for branch in all {
                if let Value::Object(b) = self.rewrite(branch, depth + 1)? {
                    merge_into(&mut out, b);
                }
            }
        }

        for (k, v) in obj {
            match k.as_str() {
                "type" => match v {
                    Value::String(t) if t == "null" => nullable = true,
                    Value::String(_) => {
                        out.insert(k.clone(), self.copy(k, v)?);
                    }
                    Value::Array(types) => {
                        let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                        nullable |= non_null.len() < types.len();
                        match non_null.as_slice() {
                            [] => {}
                            [one] => {
                                out.insert("type".into(), self.copy(k, one)?);
                            }
                            many => {
                                let mut branches = Vec::with_capacity(many.len());
                                for t in many {
                                    self.charge(8)?;
                                    let mut m = Map::new();
                                    m.insert("type".into(), self.copy(k, t)?);
                                    branches.push(Value::Object(m));
                                }
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
                        kept.push(self.rewrite(b, depth + 1)?);
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
                        let value = self.copy(k, v)?;
                        out.insert("enum".into(), Value::Array(vec![value]));
                        out.entry("type").or_insert_with(|| "string".into());
                    }
                }
                "enum" => {
                    if let Value::Array(vals) = v
                        && vals.iter().all(Value::is_string)
                    {
                        out.insert(k.clone(), self.copy(k, v)?);
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
                            out.insert(k.clone(), self.copy(k, v)?);
                        }
                    }
                }
                "properties" => {
                    if let Value::Object(props) = v {
                        let mut p = Map::new();
                        for (name, s) in props {
                            self.charge(name.len() + 4)?;
                            p.insert(name.clone(), self.rewrite(s, depth + 1)?);
                        }
                        out.insert(k.clone(), Value::Object(p));
                    }
                }
                "items" => {
                    out.insert(k.clone(), self.rewrite(v, depth + 1)?);
                }
                "nullable" | "allOf" => {}
                _ if KEEP.contains(&k.as_str()) => {
                    out.insert(k.clone(), self.copy(k, v)?);
                }
                // additionalProperties, $ref, $schema, $id, $defs, definitions, $comment,
                // examples, patternProperties, ...: not accepted.
                _ => {}
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        // `required` may only name properties that exist.
        if let Some(Value::Array(req)) = out.remove("required") {
            let props = out.get("properties").and_then(Value::as_object);
            let kept: Vec<Value> = req
                .into_iter()
                .filter(|r| {
                    r.as_str()
                        .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)))
                })
                .collect();
            if !kept.is_empty() {
                out.insert("required".into(), Value::Array(kept));
            }
        }
        Some(Value::Object(out))
    }
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
        let g = gemini_schema(&s).unwrap();
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
            gemini_schema(&s).unwrap();
        }
        // Deep nesting is cut.
        let mut s = json!({"type": "string"});
        for _ in 0..200 {
            s = json!({"type": "array", "items": s});
        }
        gemini_schema(&s).unwrap();
    }

    /// Level i references level i+1 twice: 2^levels copies when inlined.
    fn doubling(levels: usize) -> Value {
        let mut defs = Map::new();
        for i in 0..levels {
            let next = format!("#/$defs/L{}", i + 1);
            defs.insert(
                format!("L{i}"),
                json!({"type": "object", "description": "a level of the chain",
                       "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
            );
        }
        defs.insert(format!("L{levels}"), json!({"type": "string"}));
        json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}, "$defs": defs})
    }

    #[test]
    fn an_exponential_schema_is_refused_within_its_budget() {
        // 8 levels: 2^8 leaves, within the budget, and inlined.
        let small = gemini_schema(&doubling(8)).unwrap();
        assert_eq!(
            small.pointer("/properties/root/properties/a/properties/b/type"),
            Some(&json!("object"))
        );
        // 18 levels were a 16 MB body, 28 ran the machine out of memory: refused at
        // once, naming the budget.
        for levels in [18, 28, 64, 200] {
            let err = gemini_schema(&doubling(levels)).unwrap_err();
            assert!(err.limit_nodes >= MIN_NODE_BUDGET);
            assert!(err.to_string().contains("parametersJsonSchema"), "{err}");
        }
        assert!(has_refs(&doubling(3)));
        assert!(!has_refs(
            &json!({"type": "object", "properties": {"$ref": {"type": "string"}}})
        ));
    }

    #[test]
    fn copied_keywords_count_against_the_byte_budget() {
        // Few nodes, but each copy of the definition carries a 100 KB description.
        let big = "x".repeat(100_000);
        let mut s = doubling(7);
        s["$defs"]["L7"] = json!({"type": "string", "description": big});
        assert!(gemini_schema(&s).is_err());
    }
}
