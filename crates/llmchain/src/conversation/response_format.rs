//! [`ResponseFormat`]: the JSON Schema a typed answer must match. Each codec asks its
//! provider for it in the provider's own way (OpenAI's `response_format`, the Responses
//! API's `text.format`, Anthropic's `output_config`, Gemini's `responseSchema`, Ollama's
//! `format`; Bedrock through a tool the model is made to call); the chain's
//! [`Extract`](crate::chain::Extract) mode checks the answer against the schema.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The answer asked for: an object matching `schema`.
///
/// ```
/// use llmchain::conversation::ResponseFormat;
/// use serde_json::json;
/// let format = ResponseFormat::new(
///     "city",
///     json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
/// );
/// assert!(format.check().is_ok());
/// assert!(ResponseFormat::new("no spaces allowed", json!({"type": "object"})).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResponseFormat {
    /// The answer's name (1 to 64 of `a-z A-Z 0-9 _ -`): OpenAI's `json_schema.name`,
    /// and the name of the tool a provider without a native mechanism answers through.
    pub name: String,
    /// What the answer is, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the answer: an object.
    pub schema: Value,
    /// Ask the provider to enforce the schema where it can (OpenAI's `strict`: the
    /// schema is rewritten as strict mode requires). On by default.
    #[serde(default = "on")]
    pub strict: bool,
}

fn on() -> bool {
    true
}

/// The longest answer name providers take.
const MAX_NAME: usize = 64;

impl ResponseFormat {
    /// An answer named `name` matching `schema`, strict.
    pub fn new(name: impl Into<String>, schema: Value) -> Self {
        ResponseFormat {
            name: name.into(),
            description: None,
            schema,
            strict: true,
        }
    }

    /// For a schema given alone (a file, a request): named by its `title` when that is
    /// a valid name, `answer` otherwise.
    pub fn for_schema(schema: Value) -> Self {
        let name = schema
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| valid_name(t))
            .unwrap_or("answer")
            .to_owned();
        let description = schema
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        ResponseFormat {
            description,
            ..ResponseFormat::new(name, schema)
        }
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Whether the provider is asked to enforce the schema.
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Whether providers will take it: a valid name, and a schema that describes an
    /// object (the root every provider's mechanism requires).
    pub fn check(&self) -> Result<(), String> {
        if !valid_name(&self.name) {
            return Err(format!(
                "the answer's name {:?} is not 1 to {MAX_NAME} letters, digits, '_' or '-'",
                self.name
            ));
        }
        let Some(root) = self.schema.as_object() else {
            return Err("the answer's schema is not a JSON object".into());
        };
        let object = root.get("type").and_then(Value::as_str) == Some("object")
            || (root.get("type").is_none() && root.contains_key("properties"));
        if !object {
            return Err(
                "the answer's schema must describe an object (\"type\": \"object\"); wrap a \
                 list or a value in one"
                    .into(),
            );
        }
        Ok(())
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_alone_is_named_by_its_title_when_it_can_be() {
        let f = ResponseFormat::for_schema(json!({"title": "Invoice", "type": "object"}));
        assert_eq!(f.name, "Invoice");
        let f = ResponseFormat::for_schema(json!({"title": "An invoice", "type": "object"}));
        assert_eq!(f.name, "answer");
        assert!(f.strict);
    }

    #[test]
    fn only_objects_are_answers() {
        assert!(
            ResponseFormat::new("a", json!({"type": "array"}))
                .check()
                .is_err()
        );
        assert!(ResponseFormat::new("a", json!(true)).check().is_err());
        assert!(
            ResponseFormat::new("a", json!({"properties": {}}))
                .check()
                .is_ok()
        );
        assert!(
            ResponseFormat::new("", json!({"type": "object"}))
                .check()
                .is_err()
        );
        let long = "x".repeat(65);
        assert!(
            ResponseFormat::new(long, json!({"type": "object"}))
                .check()
                .is_err()
        );
    }

    #[test]
    fn it_reads_back_strict_by_default() {
        let f: ResponseFormat =
            serde_json::from_value(json!({"name": "a", "schema": {"type": "object"}})).unwrap();
        assert!(f.strict);
        assert_eq!(serde_json::to_value(&f).unwrap()["strict"], true);
    }
}
