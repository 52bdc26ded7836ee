//! [`ToolCall`]: a model's request to run a tool, and the merge of its streamed fragments.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::error::{BLANK, MergeError, ValidationErrors};

/// The error for arguments that parse as JSON but not as an object.
pub const NOT_AN_OBJECT: &str = "a json object is expected for tool arguments";
/// The error for arguments that are not JSON at all.
pub const INVALID_JSON: &str = "invalid json";

/// Whether a call is still being streamed or is ready to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// `call_id` and `name` present, arguments parsed into an object.
    Complete,
    /// Still streaming, or cut off: needs nothing, runs never. A status this version
    /// does not know (written by a newer one) reads as this: the call never runs.
    #[default]
    #[serde(other)]
    Incomplete,
}

/// The kind of tool call. `function` is the only kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolType {
    /// A function (tool) call.
    #[default]
    Function,
}

/// A tool call's arguments: raw text while streaming, a JSON object once complete.
///
/// In the storage format `Raw` is a JSON string and `Object` a JSON object, so an
/// incomplete call restored from storage still holds its raw text.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    /// Text as the model streamed it (possibly a partial JSON document).
    Raw(String),
    /// Parsed arguments.
    Object(Map<String, Value>),
}

impl Arguments {
    /// The raw text, if this is raw text.
    pub fn as_raw(&self) -> Option<&str> {
        match self {
            Arguments::Raw(s) => Some(s),
            Arguments::Object(_) => None,
        }
    }

    /// The parsed object, if parsed.
    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        match self {
            Arguments::Object(m) => Some(m),
            Arguments::Raw(_) => None,
        }
    }

    /// Parses raw text into an object (an object is returned as it is).
    ///
    /// Empty or whitespace-only text means `{}`. Errors are
    /// [`INVALID_JSON`] and [`NOT_AN_OBJECT`].
    pub fn parse(&self) -> Result<Map<String, Value>, &'static str> {
        match self {
            Arguments::Object(m) => Ok(m.clone()),
            Arguments::Raw(s) => parse_object(s),
        }
    }
}

/// Parses text into a JSON object with serde_json (its errors decide). The decoders
/// parse the arguments of the calls they finish themselves, with a faster scan.
pub(crate) fn parse_object(s: &str) -> Result<Map<String, Value>, &'static str> {
    if s.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Map<String, Value>>(s) {
        Ok(m) => Ok(m),
        // A type error is raised at the first token (`[` of `[1, 2`), before the rest is
        // read: the text is "JSON, just not an object" only if it is a JSON value at
        // all. Read as a `Value`, not `IgnoredAny`: skipping checks only the syntax,
        // and `[1e400]` is JSON serde_json cannot hold (found by fuzzing).
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            match serde_json::from_str::<Value>(s) {
                Ok(_) => Err(NOT_AN_OBJECT),
                Err(_) => Err(INVALID_JSON),
            }
        }
        Err(_) => Err(INVALID_JSON),
    }
}

impl From<&str> for Arguments {
    fn from(s: &str) -> Self {
        Arguments::Raw(s.to_owned())
    }
}

impl From<String> for Arguments {
    fn from(s: String) -> Self {
        Arguments::Raw(s)
    }
}

impl From<Map<String, Value>> for Arguments {
    fn from(m: Map<String, Value>) -> Self {
        Arguments::Object(m)
    }
}

impl From<Value> for Arguments {
    /// An object stays an object and a string is raw text; any other value becomes its
    /// JSON text, which [`ToolCall::complete`] then rejects as not an object.
    fn from(v: Value) -> Self {
        match v {
            Value::Object(m) => Arguments::Object(m),
            Value::String(s) => Arguments::Raw(s),
            other => Arguments::Raw(other.to_string()),
        }
    }
}

impl Serialize for Arguments {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Arguments::Raw(t) => s.serialize_str(t),
            Arguments::Object(m) => m.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ArgsVisitor;
        impl<'de> Visitor<'de> for ArgsVisitor {
            type Value = Arguments;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("tool arguments as a JSON object or a string of raw text")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Arguments, E> {
                Ok(Arguments::Raw(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Arguments, E> {
                Ok(Arguments::Raw(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Arguments, A::Error> {
                Map::deserialize(de::value::MapAccessDeserializer::new(map)).map(Arguments::Object)
            }
        }
        d.deserialize_any(ArgsVisitor)
    }
}

/// The execution progress of a call, kept in `metadata["execution_status"]`.
///
/// The seed's four values are `identified`, `executing`, `completed` and `failed`: the
/// chain moves every call it runs `Identified → Executing → Completed | Failed` and
/// persists each step, so a restored conversation knows which calls may have run.
///
/// Two more say that a call was answered **without running**, so that what is stored is
/// what happened (an auditor never reads `completed` for a call that did not run):
/// - `denied`: a reviewer (a person, or a policy such as `--approve never`) said no; the
///   model was told so with a result that is not an error;
/// - `rejected`: refused as wrong before it ran (a reviewer's rejection, or the runtime
///   refusing a turn over its caps); the model got an error + refusal result.
///
/// Both are terminal, like `completed` and `failed`. Readers of the storage format that
/// know only the seed's four should treat an unknown value as "did not complete".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExecutionStatus {
    /// Seen in a model response, not started.
    Identified,
    /// The body is running (or the process died while it was).
    Executing,
    /// Finished with a result.
    Completed,
    /// Finished with an error result.
    Failed,
    /// Not run: a reviewer or a policy denied it (the result says so, not as an error).
    Denied,
    /// Not run: refused as wrong (by a reviewer, or the runtime's caps), with an error
    /// + refusal result.
    Rejected,
}

impl ExecutionStatus {
    /// The string stored in metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::Identified => "identified",
            ExecutionStatus::Executing => "executing",
            ExecutionStatus::Completed => "completed",
            ExecutionStatus::Failed => "failed",
            ExecutionStatus::Denied => "denied",
            ExecutionStatus::Rejected => "rejected",
        }
    }

    /// Parses a stored string; unknown strings give `None`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "identified" => ExecutionStatus::Identified,
            "executing" => ExecutionStatus::Executing,
            "completed" => ExecutionStatus::Completed,
            "failed" => ExecutionStatus::Failed,
            "denied" => ExecutionStatus::Denied,
            "rejected" => ExecutionStatus::Rejected,
            _ => return None,
        })
    }

    /// True for `Completed`, `Failed`, `Denied` and `Rejected`: the call is answered.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            ExecutionStatus::Identified | ExecutionStatus::Executing
        )
    }

    /// True for `Denied` and `Rejected`: answered without its body ever starting.
    pub fn never_ran(self) -> bool {
        matches!(self, ExecutionStatus::Denied | ExecutionStatus::Rejected)
    }
}

impl AsRef<str> for ExecutionStatus {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The metadata key of the execution status.
pub const EXECUTION_STATUS_KEY: &str = "execution_status";

/// The metadata key of what a reviewer did to a call before it ran
/// ([`ToolCall::record_edit`]).
pub const REVIEW_KEY: &str = "review";

/// Represents an LLM's request to use a tool: which tool to execute and the arguments
/// to give it.
///
/// ```
/// use llmchain::message::{ToolCall, ToolCallAttrs};
/// use serde_json::json;
///
/// let call = ToolCall::new_or_panic(ToolCallAttrs {
///     call_id: Some("call_123".into()),
///     name: Some("give_greeting".into()),
///     arguments: Some(json!({"name": "Howard"}).into()),
///     ..Default::default()
/// });
/// assert_eq!(call.arguments_as_map()["name"], "Howard");
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCall {
    /// Always `function`.
    #[serde(rename = "type", default)]
    pub r#type: ToolType,
    /// `incomplete` while streaming; `complete` once validated and parsed.
    #[serde(default)]
    pub status: ToolCallStatus,
    /// The provider's id for the call (`None` when the wire had none or an empty one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Raw text while streaming, an object once complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Arguments>,
    /// Which parallel call a streamed fragment belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// Text for a UI, e.g. "Get weather".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_text: Option<String>,
    /// Provider data (`thought_signature`, `item_id`) and `execution_status`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// The attributes [`ToolCall::new`] validates, one per seed field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCallAttrs {
    /// Defaults to `Incomplete`, which validates nothing.
    pub status: ToolCallStatus,
    /// Required when complete. An empty string counts as absent.
    pub call_id: Option<String>,
    /// Required when complete. An empty string counts as absent.
    pub name: Option<String>,
    /// Raw text or an object; `""` counts as absent, whitespace is kept verbatim.
    pub arguments: Option<Arguments>,
    /// Parallel-call index.
    pub index: Option<u32>,
    /// UI text.
    pub display_text: Option<String>,
    /// Metadata object.
    pub metadata: Map<String, Value>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl ToolCall {
    /// Builds a call and validates it for its status.
    ///
    /// An incomplete call needs nothing. A complete call needs `call_id` and `name`,
    /// and its raw arguments are parsed into an object (empty or whitespace-only text
    /// means `{}`).
    ///
    /// ```
    /// use llmchain::message::{Arguments, ToolCall, ToolCallAttrs, ToolCallStatus};
    ///
    /// let call = ToolCall::new(ToolCallAttrs {
    ///     status: ToolCallStatus::Complete,
    ///     call_id: Some("call_1".into()),
    ///     name: Some("calc".into()),
    ///     arguments: Some(r#"{"key": 1}"#.into()),
    ///     ..Default::default()
    /// })
    /// .unwrap();
    /// assert_eq!(call.arguments_as_map()["key"], 1);
    ///
    /// let err = ToolCall::new(ToolCallAttrs {
    ///     status: ToolCallStatus::Complete,
    ///     call_id: Some("call_1".into()),
    ///     name: Some("calc".into()),
    ///     arguments: Some("[1, 2]".into()),
    ///     ..Default::default()
    /// })
    /// .unwrap_err();
    /// assert_eq!(err.to_string(), "arguments: a json object is expected for tool arguments");
    /// ```
    pub fn new(attrs: ToolCallAttrs) -> Result<ToolCall, ValidationErrors> {
        let arguments = match attrs.arguments {
            Some(Arguments::Raw(s)) if s.is_empty() => None,
            other => other,
        };
        let mut call = ToolCall {
            r#type: ToolType::Function,
            status: attrs.status,
            call_id: non_empty(attrs.call_id),
            name: non_empty(attrs.name),
            arguments,
            index: attrs.index,
            display_text: attrs.display_text,
            metadata: attrs.metadata,
        };
        if call.status == ToolCallStatus::Complete {
            call.status = ToolCallStatus::Incomplete;
            call.complete_in_place()?;
        }
        Ok(call)
    }

    /// [`ToolCall::new`] that panics on invalid attributes (the seed's `new!`).
    ///
    /// # Panics
    /// When validation fails; the panic message is the rendered error.
    #[track_caller]
    pub fn new_or_panic(attrs: ToolCallAttrs) -> ToolCall {
        match ToolCall::new(attrs) {
            Ok(c) => c,
            Err(e) => panic!("invalid ToolCall: {e}"),
        }
    }

    /// A complete call built from its three essentials; the arguments are validated.
    ///
    /// ```
    /// use llmchain::message::ToolCall;
    /// let call = ToolCall::function("call_1", "get_weather", serde_json::json!({"city": "Paris"})).unwrap();
    /// assert!(call.is_complete());
    /// ```
    pub fn function(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arguments>,
    ) -> Result<ToolCall, ValidationErrors> {
        ToolCall::new(ToolCallAttrs {
            status: ToolCallStatus::Complete,
            call_id: Some(call_id.into()),
            name: Some(name.into()),
            arguments: Some(arguments.into()),
            ..Default::default()
        })
    }

    /// True once validated and parsed: only complete calls can run.
    pub fn is_complete(&self) -> bool {
        self.status == ToolCallStatus::Complete
    }

    /// Ensures the status is `Complete`, parsing the arguments.
    ///
    /// An already complete call is returned unchanged (no re-parse).
    ///
    /// ```
    /// use llmchain::message::{ToolCall, ToolCallAttrs};
    /// let call = ToolCall::new_or_panic(ToolCallAttrs {
    ///     call_id: Some("c".into()),
    ///     name: Some("n".into()),
    ///     arguments: Some("invalid".into()),
    ///     ..Default::default()
    /// });
    /// assert_eq!(call.complete().unwrap_err().to_string(), "arguments: invalid json");
    /// ```
    pub fn complete(mut self) -> Result<ToolCall, ValidationErrors> {
        self.complete_in_place()?;
        Ok(self)
    }

    /// [`ToolCall::complete`] in place. On error the call is left as it was
    /// (incomplete, raw arguments kept), so a caller can still report it.
    pub fn complete_in_place(&mut self) -> Result<(), ValidationErrors> {
        if self.is_complete() {
            return Ok(());
        }
        let mut errors = ValidationErrors::new();
        if self.call_id.as_deref().is_none_or(str::is_empty) {
            errors.add("call_id", BLANK);
        }
        if self.name.as_deref().is_none_or(str::is_empty) {
            errors.add("name", BLANK);
        }
        let parsed = match &self.arguments {
            None => None,
            Some(Arguments::Object(_)) => None,
            Some(Arguments::Raw(s)) => match parse_object(s) {
                Ok(m) => Some(m),
                Err(msg) => {
                    errors.add("arguments", msg);
                    None
                }
            },
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        if let Some(m) = parsed {
            self.arguments = Some(Arguments::Object(m));
        }
        self.status = ToolCallStatus::Complete;
        Ok(())
    }

    /// The arguments as a JSON object, whatever their shape: what providers that expect
    /// an object must be sent.
    ///
    /// An object comes back as it is, and text that decodes to an object is decoded;
    /// none, `""`, and undecodable or non-object text become `{}`. It never fails.
    ///
    /// ```
    /// use llmchain::message::{Arguments, ToolCall};
    /// use serde_json::{json, Map};
    ///
    /// let with = |a: Option<Arguments>| ToolCall { arguments: a, ..Default::default() };
    /// let obj = json!({"a": 1}).as_object().unwrap().clone();
    /// assert_eq!(with(Some(Arguments::Object(obj.clone()))).arguments_as_map(), obj);
    /// assert_eq!(with(Some(r#"{"a":1}"#.into())).arguments_as_map(), obj);
    /// assert_eq!(with(Some("".into())).arguments_as_map(), Map::new());
    /// assert_eq!(with(None).arguments_as_map(), Map::new());
    /// ```
    pub fn arguments_as_map(&self) -> Map<String, Value> {
        match &self.arguments {
            None => Map::new(),
            Some(Arguments::Object(m)) => m.clone(),
            Some(Arguments::Raw(s)) => parse_object(s).unwrap_or_default(),
        }
    }

    /// The execution status from metadata, `"identified"` when unset.
    pub fn execution_status(&self) -> &str {
        self.execution_status_or(ExecutionStatus::Identified.as_str())
    }

    /// The execution status from metadata, or `default` when unset.
    pub fn execution_status_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.metadata
            .get(EXECUTION_STATUS_KEY)
            .and_then(Value::as_str)
            .unwrap_or(default)
    }

    /// Whether the call may have run already: stored `executing`, `completed` or
    /// `failed` (its result stored or not), or with a status word this version does not
    /// know (taken as "may have run": at most once never fails open). Unset,
    /// `identified`, `denied` and `rejected` calls never ran.
    ///
    /// This is the at-most-once rule, in one place: a call that may have run, of a tool
    /// that is not idempotent, is answered [`ToolResult::outcome_unknown`] and never run
    /// again, whoever resumes it (the chain, or [`Store::recover`] in an application
    /// without one).
    ///
    /// [`ToolResult::outcome_unknown`]: crate::message::ToolResult::outcome_unknown
    /// [`Store::recover`]: https://docs.rs/llmchain-store/latest/llmchain_store/trait.Store.html#tymethod.recover
    pub fn may_have_run(&self) -> bool {
        match self.metadata.get(EXECUTION_STATUS_KEY) {
            None => false,
            Some(v) => v
                .as_str()
                .and_then(ExecutionStatus::parse)
                .is_none_or(|s| !(s == ExecutionStatus::Identified || s.never_ran())),
        }
    }

    /// The execution status as a typed value (`None` when unset or not one of the four).
    pub fn typed_execution_status(&self) -> Option<ExecutionStatus> {
        self.metadata
            .get(EXECUTION_STATUS_KEY)
            .and_then(Value::as_str)
            .and_then(ExecutionStatus::parse)
    }

    /// Sets the execution status in metadata.
    ///
    /// ```
    /// use llmchain::message::{ExecutionStatus, ToolCall};
    /// let mut call = ToolCall::default();
    /// assert_eq!(call.execution_status(), "identified");
    /// call.set_execution_status(ExecutionStatus::Executing);
    /// assert_eq!(call.execution_status(), "executing");
    /// ```
    pub fn set_execution_status(&mut self, status: impl AsRef<str>) {
        self.metadata.insert(
            EXECUTION_STATUS_KEY.to_owned(),
            Value::String(status.as_ref().to_owned()),
        );
    }

    /// [`ToolCall::set_execution_status`] by value, as the seed's function returns the call.
    #[must_use]
    pub fn with_execution_status(mut self, status: impl AsRef<str>) -> ToolCall {
        self.set_execution_status(status);
        self
    }

    /// Replaces the arguments with ones a reviewer edited, keeping the model's own in
    /// `metadata.review` (`{"edited": true, "original_arguments": …}`), so that the call
    /// as stored (and as sent back to the model) is the call that ran, and the fact of
    /// the edit and what the model asked for are kept. Editing twice keeps the first
    /// original.
    ///
    /// ```
    /// use llmchain::message::ToolCall;
    /// use serde_json::json;
    /// let mut call = ToolCall::function("c1", "write_file", r#"{"content":"original"}"#).unwrap();
    /// call.record_edit(json!({"content": "edited"}).as_object().unwrap().clone());
    /// assert_eq!(call.arguments_as_map()["content"], "edited");
    /// assert!(call.was_edited());
    /// assert_eq!(call.original_arguments().unwrap()["content"], "original");
    /// ```
    pub fn record_edit(&mut self, arguments: Map<String, Value>) {
        if !self.was_edited() {
            let original = match &self.arguments {
                Some(Arguments::Object(m)) => Value::Object(m.clone()),
                Some(Arguments::Raw(r)) => serde_json::from_str::<Value>(r)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| Value::String(r.clone())),
                None => Value::Null,
            };
            let mut review = Map::new();
            review.insert("edited".into(), Value::Bool(true));
            review.insert("original_arguments".into(), original);
            self.metadata
                .insert(REVIEW_KEY.to_owned(), Value::Object(review));
        }
        self.arguments = Some(Arguments::Object(arguments));
    }

    /// Records that a person approved this call (`metadata.review.approved`), after a
    /// review or a tool's interrupt, so that the stored call says so.
    pub fn record_human_approval(&mut self) {
        let review = self
            .metadata
            .entry(REVIEW_KEY.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(r) = review {
            r.insert("approved".into(), Value::Bool(true));
        } else {
            *review = serde_json::json!({"approved": true});
        }
    }

    /// How many times a person approved this call to run again after its tool's own
    /// interrupt (`metadata.review.round`, 0 when never): each round of questions about
    /// one call is a review of its own.
    pub fn review_round(&self) -> u32 {
        self.metadata
            .get(REVIEW_KEY)
            .and_then(|r| r.get("round"))
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0)
    }

    /// Sets [`review_round`](Self::review_round).
    pub fn set_review_round(&mut self, round: u32) {
        let review = self
            .metadata
            .entry(REVIEW_KEY.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !review.is_object() {
            *review = Value::Object(Map::new());
        }
        if let Value::Object(r) = review {
            r.insert("round".into(), Value::from(round));
        }
    }

    /// Whether a person approved this call ([`record_human_approval`](Self::record_human_approval)).
    /// A record of what happened, for people and audits: the runtime never reads it to
    /// decide anything (a tool learns of an approval from its
    /// [`ToolContext`](crate::tool::ToolContext), given by the chain from the decisions
    /// it was handed).
    pub fn human_approved(&self) -> bool {
        self.metadata
            .get(REVIEW_KEY)
            .and_then(|r| r.get("approved"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Whether a reviewer edited the arguments before the call ran
    /// ([`record_edit`](Self::record_edit)).
    pub fn was_edited(&self) -> bool {
        self.metadata
            .get(REVIEW_KEY)
            .and_then(|r| r.get("edited"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The arguments the model sent, when a reviewer edited them.
    pub fn original_arguments(&self) -> Option<&Value> {
        self.metadata
            .get(REVIEW_KEY)
            .filter(|_| self.was_edited())
            .and_then(|r| r.get("original_arguments"))
    }

    /// Merges a streamed fragment (`part`) into the call being accumulated (`primary`).
    ///
    /// `merge(None, part)` is `part`. The rules (all O(len(part)), never O(accumulated)):
    /// - the index must match (`None` and `Some(0)` differ), else [`MergeError::IndexMismatch`];
    /// - an exact repeat of an identified call (same `call_id`, every field equal) is ignored,
    ///   unless it is a whitespace-only text fragment (whitespace is always kept);
    /// - the name is appended unless equal (providers that repeat the full name are fine);
    /// - raw text is concatenated, whitespace fragments included; an object replaces raw
    ///   text when the fragment is complete or nothing was accumulated yet; a text
    ///   fragment after an object is dropped;
    /// - the last non-empty `call_id` wins; `display_text` overwrites when given;
    /// - the status only moves forward; metadata is shallow-merged, the fragment's keys win.
    ///
    /// ```
    /// use llmchain::message::{ToolCall, Arguments};
    /// let a = ToolCall { index: Some(0), name: Some("get_weat".into()), arguments: Some(r#"{"ci"#.into()), ..Default::default() };
    /// let b = ToolCall { index: Some(0), name: Some("her".into()), arguments: Some(r#"ty": "Paris"}"#.into()), ..Default::default() };
    /// let merged = ToolCall::merge(Some(a), b).unwrap();
    /// assert_eq!(merged.name.as_deref(), Some("get_weather"));
    /// assert_eq!(merged.arguments, Some(Arguments::Raw(r#"{"city": "Paris"}"#.into())));
    /// ```
    pub fn merge(primary: Option<ToolCall>, part: ToolCall) -> Result<ToolCall, MergeError> {
        match primary {
            None => Ok(part),
            Some(mut p) => {
                p.merge_from(part)?;
                Ok(p)
            }
        }
    }

    /// [`ToolCall::merge`] into `self` in place.
    pub fn merge_from(&mut self, mut part: ToolCall) -> Result<(), MergeError> {
        self.absorb(&mut part)
    }

    /// [`ToolCall::merge_from`] without moving the fragment: the fields it uses are
    /// taken out of `part` (what is left of it is only fit to be dropped). Fragments
    /// are merged one per streamed chunk, so avoiding the copies of a whole `ToolCall`
    /// is worth it on the hot path.
    pub(crate) fn absorb(&mut self, part: &mut ToolCall) -> Result<(), MergeError> {
        if self.index != part.index {
            return Err(MergeError::IndexMismatch {
                primary: self.index,
                part: part.index,
            });
        }
        // A provider re-sending an identified call whole: ignore the duplicate. Anonymous
        // fragments are never deduplicated, and neither is a whitespace-only text
        // fragment, so two equal whitespace fragments both count even when the provider
        // repeats the id on every fragment.
        if part.call_id.is_some()
            && !part
                .raw_arguments()
                .is_some_and(|s| !s.is_empty() && s.trim().is_empty())
            && *self == *part
        {
            return Ok(());
        }
        let status = part.status;

        match (self.name.as_mut(), part.name.take()) {
            (_, None) => {}
            (Some(mine), Some(theirs)) if *mine == theirs => {}
            (Some(mine), Some(theirs)) => mine.push_str(&theirs),
            (None, Some(theirs)) => self.name = Some(theirs),
        }

        match (self.arguments.as_mut(), part.arguments.take()) {
            (_, None) => {}
            (None, Some(theirs)) => self.arguments = Some(theirs),
            (Some(Arguments::Raw(mine)), Some(Arguments::Raw(theirs))) => {
                if mine.is_empty() {
                    *mine = theirs;
                } else {
                    mine.push_str(&theirs);
                }
            }
            (Some(Arguments::Raw(mine)), Some(Arguments::Object(obj))) => {
                if status == ToolCallStatus::Complete || mine.trim().is_empty() {
                    self.arguments = Some(Arguments::Object(obj));
                }
            }
            (Some(Arguments::Object(_)), Some(Arguments::Raw(_))) => {}
            (Some(Arguments::Object(mine)), Some(Arguments::Object(obj))) => {
                if status == ToolCallStatus::Complete {
                    *mine = obj;
                }
            }
        }

        if let Some(id) = part.call_id.take().filter(|s| !s.is_empty()) {
            self.call_id = Some(id);
        }
        if status == ToolCallStatus::Complete {
            self.status = ToolCallStatus::Complete;
        }
        if let Some(text) = part.display_text.take() {
            self.display_text = Some(text);
        }
        if !part.metadata.is_empty() {
            for (k, v) in std::mem::take(&mut part.metadata) {
                self.metadata.insert(k, v);
            }
        }
        Ok(())
    }

    /// The raw argument text, if the arguments have not been parsed.
    pub fn raw_arguments(&self) -> Option<&str> {
        self.arguments.as_ref().and_then(Arguments::as_raw)
    }

    /// The length in bytes of the accumulated raw arguments (0 when parsed or none).
    pub fn raw_arguments_len(&self) -> usize {
        self.raw_arguments().map_or(0, str::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_may_have_run_unless_it_provably_did_not() {
        let call = ToolCall::function("c", "t", serde_json::json!({})).unwrap();
        assert!(!call.may_have_run(), "no status: never started");
        for (status, may) in [
            (ExecutionStatus::Identified, false),
            (ExecutionStatus::Denied, false),
            (ExecutionStatus::Rejected, false),
            (ExecutionStatus::Executing, true),
            (ExecutionStatus::Completed, true),
            (ExecutionStatus::Failed, true),
        ] {
            assert_eq!(
                call.clone().with_execution_status(status).may_have_run(),
                may,
                "{status}"
            );
        }
        // A word this version does not know, or not a word: it may have run.
        let mut odd = call.clone();
        odd.metadata
            .insert(EXECUTION_STATUS_KEY.into(), "paused".into());
        assert!(odd.may_have_run());
        odd.metadata.insert(EXECUTION_STATUS_KEY.into(), 3.into());
        assert!(odd.may_have_run());
    }
    use serde_json::json;

    fn frag(index: Option<u32>, args: &str) -> ToolCall {
        ToolCall {
            index,
            arguments: Some(args.into()),
            ..Default::default()
        }
    }

    fn complete_attrs(args: &str) -> ToolCallAttrs {
        ToolCallAttrs {
            status: ToolCallStatus::Complete,
            call_id: Some("call_123".into()),
            name: Some("hello_world".into()),
            arguments: Some(args.into()),
            ..Default::default()
        }
    }

    // Reference §8.1 case 1.
    #[test]
    fn new_defaults() {
        let call = ToolCall::new(ToolCallAttrs::default()).unwrap();
        assert_eq!(call.status, ToolCallStatus::Incomplete);
        assert_eq!(call.r#type, ToolType::Function);
        assert_eq!(call.call_id, None);
        assert_eq!(call.name, None);
        assert_eq!(call.arguments, None);
        assert_eq!(call.index, None);
        assert_eq!(call.display_text, None);
        assert!(call.metadata.is_empty());
    }

    // Case 2.
    #[test]
    fn new_complete_parses_arguments() {
        let call = ToolCall::new(complete_attrs(r#"{"key": 1}"#)).unwrap();
        assert_eq!(
            call.arguments_as_map(),
            *json!({"key": 1}).as_object().unwrap()
        );
        assert!(matches!(call.arguments, Some(Arguments::Object(_))));
    }

    // Case 3.
    #[test]
    fn incomplete_keeps_raw_and_whitespace() {
        for s in [r#"{"key": 1}"#, " ", "    "] {
            let call = ToolCall::new(ToolCallAttrs {
                arguments: Some(s.into()),
                ..Default::default()
            })
            .unwrap();
            assert_eq!(call.raw_arguments(), Some(s));
        }
        let call = ToolCall::new(ToolCallAttrs {
            arguments: Some("".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(call.arguments, None);
    }

    #[test]
    fn whitespace_only_completes_to_empty_object() {
        let call = ToolCall::new(complete_attrs("   \n")).unwrap();
        assert_eq!(call.arguments, Some(Arguments::Object(Map::new())));
    }

    // Case 4.
    #[test]
    fn invalid_arguments_errors() {
        let err = ToolCall::new(complete_attrs("invalid")).unwrap_err();
        assert_eq!(err.to_string(), "arguments: invalid json");
        let err = ToolCall::new(complete_attrs("[true,1,2,3]")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "arguments: a json object is expected for tool arguments"
        );
        let err = ToolCall::new(complete_attrs("\"just a string\"")).unwrap_err();
        assert_eq!(err.messages_for("arguments"), vec![NOT_AN_OBJECT]);
        // Found by the fuzzer: a type error is raised at `[` before the rest is read.
        // And a number serde_json cannot hold is not a JSON value it reads.
        for text in [
            "[\u{8}",
            "[1, 2",
            "\"open",
            "[1] x",
            "tru",
            "[247370e23473705\n ]",
        ] {
            let err = ToolCall::new(complete_attrs(text)).unwrap_err();
            assert_eq!(
                err.messages_for("arguments"),
                vec![INVALID_JSON],
                "{text:?}"
            );
        }
    }

    #[test]
    fn complete_requires_id_and_name() {
        let err = ToolCall::new(ToolCallAttrs {
            status: ToolCallStatus::Complete,
            call_id: Some(String::new()),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "call_id: can't be blank; name: can't be blank"
        );
    }

    #[test]
    fn failed_complete_in_place_leaves_call_untouched() {
        let mut call = ToolCall {
            call_id: Some("c".into()),
            name: Some("n".into()),
            arguments: Some("{bad".into()),
            ..Default::default()
        };
        let before = call.clone();
        assert!(call.complete_in_place().is_err());
        assert_eq!(call, before);
    }

    // Case 5.
    #[test]
    fn complete_of_complete_is_unchanged() {
        let call = ToolCall::new(complete_attrs("{}")).unwrap();
        // Even a raw value left on a complete call is not re-parsed.
        let odd = ToolCall {
            arguments: Some("not json".into()),
            ..call.clone()
        };
        assert_eq!(odd.clone().complete().unwrap(), odd);
        assert_eq!(call.clone().complete().unwrap(), call);
    }

    #[test]
    fn arguments_as_map_never_fails() {
        for s in [
            "not json",
            "[1, 2, 3]",
            "\"just a string\"",
            "",
            "null",
            "1",
        ] {
            assert_eq!(frag(None, s).arguments_as_map(), Map::new(), "{s}");
        }
    }

    // Case 6.
    #[test]
    fn merge_basics() {
        let x = ToolCall::new(complete_attrs("{}")).unwrap();
        assert_eq!(ToolCall::merge(None, x.clone()).unwrap(), x);
        assert_eq!(ToolCall::merge(Some(x.clone()), x.clone()).unwrap(), x);
        let a = ToolCall {
            name: Some("get_weat".into()),
            ..Default::default()
        };
        let b = ToolCall {
            name: Some("her".into()),
            ..Default::default()
        };
        assert_eq!(
            ToolCall::merge(Some(a), b).unwrap().name.as_deref(),
            Some("get_weather")
        );
    }

    // Case 7.
    #[test]
    fn merge_status_and_call_id() {
        let a = ToolCall {
            name: Some("get_weather".into()),
            ..Default::default()
        };
        let b = ToolCall {
            status: ToolCallStatus::Complete,
            call_id: Some("call_123".into()),
            ..Default::default()
        };
        let m = ToolCall::merge(Some(a), b).unwrap();
        assert_eq!(m.status, ToolCallStatus::Complete);
        assert_eq!(m.call_id.as_deref(), Some("call_123"));
        assert_eq!(m.name.as_deref(), Some("get_weather"));
        // Status never goes back; an empty id does not erase.
        let back = ToolCall {
            call_id: Some(String::new()),
            ..Default::default()
        };
        let m = ToolCall::merge(Some(m), back).unwrap();
        assert_eq!(m.status, ToolCallStatus::Complete);
        assert_eq!(m.call_id.as_deref(), Some("call_123"));
    }

    // Case 8.
    #[test]
    fn merge_concatenates_arguments() {
        let mut acc: Option<ToolCall> = None;
        for (i, part) in [
            ToolCall::default(),
            frag(None, "{\"ci"),
            frag(None, "ty\": \"Portland\", \"state\": \"OR\"}"),
        ]
        .into_iter()
        .enumerate()
        {
            acc = Some(ToolCall::merge(acc, part).unwrap_or_else(|e| panic!("{i}: {e}")));
        }
        assert_eq!(
            acc.unwrap().raw_arguments(),
            Some("{\"city\": \"Portland\", \"state\": \"OR\"}")
        );
    }

    // Case 9.
    #[test]
    fn merge_all_nil_part_keeps_complete_primary() {
        let p = ToolCall {
            status: ToolCallStatus::Complete,
            call_id: Some("c".into()),
            name: Some("n".into()),
            arguments: Some("{}".into()),
            ..Default::default()
        };
        let m = ToolCall::merge(Some(p.clone()), ToolCall::default()).unwrap();
        assert_eq!(m, p);
    }

    // Case 10.
    #[test]
    fn merge_index_mismatch_is_an_error() {
        let err = ToolCall::merge(Some(frag(Some(0), "a")), frag(Some(2), "b")).unwrap_err();
        assert_eq!(
            err,
            MergeError::IndexMismatch {
                primary: Some(0),
                part: Some(2)
            }
        );
        assert!(
            err.to_string()
                .starts_with("Can only merge tool calls with the same index")
        );
        assert!(ToolCall::merge(Some(frag(None, "a")), frag(Some(0), "b")).is_err());
    }

    // Case 11.
    #[test]
    fn merge_display_text_and_metadata() {
        let mut p = ToolCall {
            display_text: Some("Old".into()),
            ..Default::default()
        };
        p.metadata
            .insert("execution_status".into(), "identified".into());
        p.metadata.insert("custom".into(), "value".into());
        let mut part = ToolCall::default();
        part.metadata
            .insert("execution_status".into(), "executing".into());
        let m = ToolCall::merge(Some(p.clone()), part).unwrap();
        assert_eq!(m.display_text.as_deref(), Some("Old"));
        assert_eq!(
            Value::Object(m.metadata),
            json!({"execution_status": "executing", "custom": "value"})
        );
        let m = ToolCall::merge(
            Some(p),
            ToolCall {
                display_text: Some("New".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(m.display_text.as_deref(), Some("New"));
    }

    // Case 12.
    #[test]
    fn merge_keeps_whitespace_fragments() {
        let parts = [
            "{\"code\": \"def my_function(x):\n  ",
            " ",
            " return x + 1\"}",
        ];
        let mut acc = None;
        for p in parts {
            acc = Some(ToolCall::merge(acc, frag(Some(0), p)).unwrap());
        }
        let acc = acc.unwrap();
        assert_eq!(acc.raw_arguments().unwrap(), parts.concat());
        // Two equal whitespace-only fragments both count.
        let m = ToolCall::merge(Some(frag(Some(0), " ")), frag(Some(0), " ")).unwrap();
        assert_eq!(m.raw_arguments(), Some("  "));
    }

    // Case 13.
    #[test]
    fn text_after_object_is_dropped() {
        let p = ToolCall::new(complete_attrs(r#"{"a": 1}"#)).unwrap();
        let m = ToolCall::merge(Some(p.clone()), frag(None, "garbage")).unwrap();
        assert_eq!(m.arguments, p.arguments);
        assert!(m.is_complete());
    }

    #[test]
    fn complete_object_replaces_raw_text() {
        let p = frag(None, "{\"a\":");
        let done = ToolCall {
            status: ToolCallStatus::Complete,
            arguments: Some(json!({"a": 2}).into()),
            ..Default::default()
        };
        let m = ToolCall::merge(Some(p.clone()), done).unwrap();
        assert_eq!(m.arguments_as_map()["a"], 2);
        // An object on a not-yet-complete fragment does not clobber text already streamed...
        let obj = ToolCall {
            arguments: Some(json!({"a": 3}).into()),
            ..Default::default()
        };
        assert_eq!(
            ToolCall::merge(Some(p), obj.clone())
                .unwrap()
                .raw_arguments(),
            Some("{\"a\":")
        );
        // ...but fills a call that has none (arguments given as an object on the first delta).
        let m = ToolCall::merge(Some(ToolCall::default()), obj).unwrap();
        assert_eq!(m.arguments_as_map()["a"], 3);
    }

    #[test]
    fn serde_shapes() {
        let call = ToolCall::new(complete_attrs(r#"{"a": 1}"#)).unwrap();
        let v = serde_json::to_value(&call).unwrap();
        assert_eq!(
            v,
            json!({"type": "function", "status": "complete", "call_id": "call_123",
                   "name": "hello_world", "arguments": {"a": 1}})
        );
        let raw = frag(Some(1), "{\"a");
        let back: ToolCall = serde_json::from_value(serde_json::to_value(&raw).unwrap()).unwrap();
        assert_eq!(back, raw);
        let err = serde_json::from_value::<ToolCall>(json!({"arguments": [1]})).unwrap_err();
        assert!(err.to_string().contains("tool arguments"), "{err}");
    }

    #[test]
    fn execution_status_roundtrip() {
        let mut c = ToolCall::default();
        assert_eq!(c.execution_status_or("x"), "x");
        assert_eq!(c.typed_execution_status(), None);
        c.set_execution_status("failed");
        assert_eq!(c.typed_execution_status(), Some(ExecutionStatus::Failed));
        let c = c.with_execution_status(ExecutionStatus::Completed);
        assert_eq!(c.execution_status(), "completed");
        assert!(ExecutionStatus::Completed.is_terminal());
        assert!(!ExecutionStatus::Executing.is_terminal());
    }
}
