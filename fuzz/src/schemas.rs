//! The schema rewrites under an output-size oracle: Gemini's OpenAPI subset
//! (`gemini_schema`, and the Gemini codec's `parameters`/`parametersJsonSchema`), OpenAI's
//! strict mode (`strict_schema`, and the OpenAI Chat codec's strict tool and answer), and
//! Anthropic's closed objects (its codec's typed answer).
//!
//! Input: JSON when it starts with `{`; otherwise the bytes drive a generator of schemas
//! whose definitions reference each other (`$ref` siblings, `allOf`, `anyOf`, `items`,
//! type arrays…), which is where a rewrite that inlines can grow exponentially.
//! The oracle: no rewrite or request body is more than a small multiple of the schema
//! (Gemini's inlining within its stated budget), and none panics.

use llmchain::conversation::{Conversation, ResponseFormat, ToolDefinition};
use llmchain::provider::{Format, RequestOptions, gemini_schema};
use serde_json::{Map, Value, json};

/// Bytes of slack every bound allows beside its multiple (a few fixed keywords).
const SLACK: usize = 4096;

struct Gen<'a> {
    bytes: std::slice::Iter<'a, u8>,
    defs: usize,
}

impl Gen<'_> {
    fn byte(&mut self) -> Option<u8> {
        self.bytes.next().copied()
    }

    fn reference(&mut self, b: u8) -> Value {
        json!({"$ref": format!("#/$defs/D{}", usize::from(b) % self.defs)})
    }

    fn node(&mut self, depth: usize) -> Value {
        let Some(b) = self.byte() else {
            return json!({"type": "string"});
        };
        if depth > 5 {
            return self.reference(b);
        }
        match b % 11 {
            0 => json!({"type": "string"}),
            1 | 2 => {
                let r = self.byte().unwrap_or(b);
                self.reference(r)
            }
            3 => {
                let n = 1 + usize::from(self.byte().unwrap_or(0) % 4);
                let mut props = Map::new();
                for i in 0..n {
                    props.insert(format!("p{i}"), self.node(depth + 1));
                }
                json!({"type": "object", "properties": props, "required": ["p0", "ghost"]})
            }
            4 => json!({"anyOf": [self.node(depth + 1), self.node(depth + 1), {"type": "null"}]}),
            5 => json!({"allOf": [self.node(depth + 1), self.node(depth + 1)]}),
            6 => json!({"type": "array", "items": self.node(depth + 1)}),
            7 => {
                let len = usize::from(self.byte().unwrap_or(0)) * 8;
                json!({"type": ["string", "integer", "null"], "description": "d".repeat(len)})
            }
            8 => {
                let r = self.byte().unwrap_or(b);
                let mut v = self.reference(r);
                v["description"] = "sibling of a $ref".into();
                v["const"] = "c".into();
                v
            }
            9 => json!({"oneOf": [self.node(depth + 1), {"const": "x"}], "enum": ["a", 1]}),
            _ => json!({"type": "object", "additionalProperties": self.node(depth + 1),
                        "format": "uri", "default": {"k": [1, 2, 3]}}),
        }
    }
}

/// The schema the input stands for.
pub fn schema_from(data: &[u8]) -> Value {
    if data.first() == Some(&b'{')
        && let Ok(v) = serde_json::from_slice::<Value>(data)
    {
        return v;
    }
    let Some((&first, rest)) = data.split_first() else {
        return json!({"type": "object"});
    };
    let defs = 1 + usize::from(first % 32);
    let mut g = Gen {
        bytes: rest.iter(),
        defs,
    };
    let mut table = Map::new();
    for i in 0..defs {
        table.insert(format!("D{i}"), g.node(0));
    }
    json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": table})
}

fn len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

fn encoded(format: Format, conv: &Conversation) -> usize {
    let opts = RequestOptions {
        model: "m".into(),
        stream: true,
        ..Default::default()
    };
    format.codec().encode(conv, &opts).map_or(0, |b| b.len())
}

/// Runs every rewrite on the input's schema and checks the size oracle.
pub fn schema_rewrites(data: &[u8]) {
    let schema = schema_from(data);
    let n = len(&schema);

    if let Ok(g) = gemini_schema(&schema) {
        // The rewrite's own budget is 8× the schema (1 MiB at least), in bytes of copied
        // keywords; serialized escapes cost at most 6× a character.
        let budget = (n * 8).max(1 << 20);
        assert!(len(&g) <= budget * 6 + SLACK, "gemini_schema: {} from {n}", len(&g));
    }
    let strict = llmchain::provider::openai_chat::strict_schema(&schema);
    assert!(len(&strict) <= n * 8 + SLACK, "strict_schema: {} from {n}", len(&strict));

    // Through the codecs: as a strict tool's parameters, and as a typed answer alone.
    let tool = ToolDefinition {
        name: "t".into(),
        description: String::new(),
        parameters_schema: schema.clone(),
        strict: true,
        options: Map::new(),
    };
    let mut with_tool = Conversation::default();
    with_tool.tools.push(tool);
    with_tool.messages.push(llmchain::message::Message::user("go"));
    let mut answer = Conversation::default();
    answer.response_format = Some(ResponseFormat::new("answer", schema.clone()));
    answer.messages.push(llmchain::message::Message::user("go"));
    for &format in Format::ALL {
        for conv in [&with_tool, &answer] {
            let body = encoded(format, conv);
            assert!(
                body <= n * 8 + SLACK,
                "{format} body of {body} bytes from a {n}-byte schema"
            );
        }
    }
}
