//! [`Extract`]: a run whose end is a typed answer — an object matching a JSON Schema.
//!
//! The conversation's [`ResponseFormat`] tells the codec to ask its provider for the
//! schema its own way; the model may call tools first, then answers. A provider with a
//! native mechanism answers in text, which is parsed and checked against the schema; a
//! provider without one (Bedrock) calls the answer tool, whose arguments are checked the
//! same way. An answer that does not match is sent back to the model, naming where it
//! went wrong, within the chain's failure budget; the last failure names the path.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::ChainError;
use super::llm_chain::LLMChain;
use super::mode::{CustomMode, DEFAULT_MAX_RUNS, ModeFuture, RunOutcome};
use super::partial_answer::{OnPartial, PartialAnswers};
use super::state::ChainState;
use super::steps::Steps;
use crate::conversation::{Conversation, ResponseFormat};
use crate::message::{Message, MessageStatus, Role};
use crate::step;
use crate::tool::Tool;

/// A run mode that ends with a typed answer; see the module docs. Run it with
/// [`Mode::custom`](super::Mode::custom) (any owner of a run can), then read the answer
/// with [`Extract::answer`]; [`LLMChain::extract`] does both for a Rust type.
#[derive(Clone)]
pub struct Extract {
    format: ResponseFormat,
    validator: Arc<jsonschema::Validator>,
    max_runs: u32,
    partial: Option<OnPartial>,
}

impl std::fmt::Debug for Extract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extract")
            .field("format", &self.format)
            .field("max_runs", &self.max_runs)
            .field("partial", &self.partial.is_some())
            .finish_non_exhaustive()
    }
}

/// Where an `Extract` run keeps its answer format and its count of answers that did not
/// match, in the run's hook state.
const STATE_KEY: &str = "extract@1";

/// Where an answer went wrong: a JSON pointer (`(root)` for the whole answer) and what.
fn first_violation(validator: &jsonschema::Validator, value: &Value) -> Option<(String, String)> {
    validator.iter_errors(value).next().map(|e| {
        let path = e.instance_path().as_str();
        let path = if path.is_empty() { "(root)" } else { path };
        (path.to_owned(), e.to_string())
    })
}

impl Extract {
    /// An answer matching `format`: its schema must compile and describe an object.
    pub fn new(format: ResponseFormat) -> Result<Extract, ChainError> {
        format.check().map_err(ChainError::AnswerSchema)?;
        let validator = jsonschema::validator_for(&format.schema)
            .map_err(|e| ChainError::AnswerSchema(format!("the answer's schema: {e}")))?;
        Ok(Extract {
            format,
            validator: Arc::new(validator),
            max_runs: DEFAULT_MAX_RUNS,
            partial: None,
        })
    }

    /// An answer of type `T` (its schemars schema, named after the type).
    pub fn of<T: JsonSchema>() -> Result<Extract, ChainError> {
        let schema = crate::tool::schema_for::<T>();
        let name: String = T::schema_name()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        Extract::new(ResponseFormat::new(name, schema))
    }

    /// With another max-runs guard (model calls in this run; default 25).
    pub fn max_runs(mut self, max_runs: u32) -> Extract {
        self.max_runs = max_runs;
        self
    }

    /// Calls `on_partial` with the object so far each time the streamed answer grows
    /// (the answer's text, or the answer tool's arguments): every partial is a view of
    /// the final answer — its keys, prefixes of its strings and arrays, its finished
    /// scalars — at any chunking. Partials are not checked against the schema; the
    /// answer is.
    ///
    /// ```
    /// # use llmchain::chain::Extract;
    /// #[derive(schemars::JsonSchema)]
    /// struct Story { title: String, text: String }
    /// let extract = Extract::of::<Story>()?.on_partial(|so_far| eprintln!("{so_far}"));
    /// # Ok::<(), llmchain::chain::ChainError>(())
    /// ```
    pub fn on_partial(mut self, on_partial: impl Fn(&Value) + Send + Sync + 'static) -> Extract {
        self.partial = Some(Arc::new(on_partial));
        self
    }

    /// The answer asked for.
    pub fn format(&self) -> &ResponseFormat {
        &self.format
    }

    /// The answer at the end of `conversation`: the answer tool's arguments, or the last
    /// assistant message's text parsed as JSON, checked against the schema.
    pub fn answer(&self, conversation: &Conversation) -> Result<Value, ChainError> {
        match self.checked(conversation) {
            Some(Ok(value)) => Ok(value),
            Some(Err((path, message))) => Err(ChainError::InvalidAnswer { path, message }),
            None => Err(ChainError::InvalidAnswer {
                path: "(root)".into(),
                message: "the conversation holds no answer".into(),
            }),
        }
    }

    /// What the conversation's end offers as the answer, checked against the schema:
    /// the value, or where and why it is wrong; `None` when it ends with neither an
    /// answer call nor an assistant's text.
    fn checked(&self, conversation: &Conversation) -> Option<Result<Value, (String, String)>> {
        Some(self.candidate(conversation)?.and_then(|value| {
            match first_violation(&self.validator, &value) {
                None => Ok(value),
                Some(violation) => Err(violation),
            }
        }))
    }

    /// What the conversation's end offers as the answer, parsed (not checked).
    fn candidate(&self, conversation: &Conversation) -> Option<Result<Value, (String, String)>> {
        let messages = &conversation.messages;
        // Through the answer tool: the newest successful result of it.
        if let Some(id) = messages
            .iter()
            .rev()
            .take_while(|m| m.role == Role::Tool)
            .flat_map(|m| m.tool_results.iter())
            .find(|r| r.name.as_deref() == Some(&self.format.name) && !r.is_error())
            .map(|r| r.tool_call_id.as_str())
        {
            return arguments_of(conversation, id).map(Ok);
        }
        let last = messages.last().filter(|m| m.role == Role::Assistant)?;
        if !last.tool_calls.is_empty() {
            return None;
        }
        if last.status != MessageStatus::Complete {
            return Some(Err((
                "(root)".into(),
                "the answer was cut off before its end".into(),
            )));
        }
        Some(parse(&last.text().unwrap_or_default()))
    }

    /// The answer tool: what a provider without a native mechanism answers through. Its
    /// arguments are checked against the schema (a refusal names the path); it records
    /// nothing.
    fn answer_tool(&self) -> Result<Tool, ChainError> {
        let validator = self.validator.clone();
        let description = self.format.description.clone().unwrap_or_else(|| {
            "Give your final answer by calling this tool, with the answer as its arguments.".into()
        });
        Tool::builder(self.format.name.clone())
            .description(description)
            .schema(self.format.schema.clone())
            .strict(self.format.strict)
            .idempotent(true)
            .parse_args(move |args: Map<String, Value>| {
                let value = Value::Object(args);
                if let Some((path, message)) = first_violation(&validator, &value) {
                    return Err(feedback(&path, &message));
                }
                match value {
                    Value::Object(args) => Ok(args),
                    _ => Err(String::from("the answer is not an object")),
                }
            })
            .handler(|_args, _ctx| async { "Answer received." })
            .build()
            .map_err(|e| ChainError::AnswerSchema(e.to_string()))
    }

    /// The typed mode a run recorded in its state (`hooks["extract@1"]`), for whoever
    /// resumes it in another process: `None` when the run was not an `Extract`, an error
    /// when what it recorded no longer compiles. Partial answers are not recorded: give
    /// [`Extract::on_partial`] again.
    pub fn recorded(state: &ChainState) -> Option<Result<Extract, ChainError>> {
        let format = state.hooks.get(STATE_KEY)?.get("format")?;
        Some(
            serde_json::from_value::<ResponseFormat>(format.clone())
                .map_err(|e| ChainError::AnswerSchema(format!("the recorded answer: {e}")))
                .and_then(Extract::new),
        )
    }

    /// Answers that did not match so far in this run (kept in the run's state, so a
    /// resumed run goes on counting).
    fn invalid_so_far(chain: &LLMChain) -> u32 {
        chain
            .state
            .hooks
            .get(STATE_KEY)
            .and_then(|s| s.get("invalid"))
            .and_then(Value::as_u64)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Records the mode (its answer format) and the count in the run's state.
    fn record(&self, chain: &mut LLMChain, invalid: u32) {
        let format = serde_json::to_value(&self.format).unwrap_or(Value::Null);
        chain.state.hooks.insert(
            STATE_KEY.into(),
            serde_json::json!({"format": format, "invalid": invalid}),
        );
    }

    async fn drive(&self, chain: &mut LLMChain) -> Result<RunOutcome, ChainError> {
        Steps::ensure_mode_state(chain);
        let mut invalid = Self::invalid_so_far(chain);
        self.record(chain, invalid);
        loop {
            if chain.has_unanswered_calls() {
                step!(Steps::execute_tools(chain).await);
                step!(Ok(Steps::check_tool_interrupts(chain)));
                if let Some(Ok(_)) = self.candidate(chain.conversation()) {
                    return Ok(RunOutcome::Done);
                }
                // The answer tool refused its arguments as many times as the budget
                // allows: say where the answer went wrong.
                if chain.state.current_failure_count >= chain.max_retry_count
                    && let Some(refusal) = self.refused_answer(chain.conversation())
                {
                    return Err(ChainError::InvalidAnswer {
                        path: refusal.0,
                        message: refusal.1,
                    });
                }
                continue;
            }
            step!(Steps::call_llm(chain).await);
            if chain.has_unanswered_calls() {
                step!(Steps::check_max_runs(chain, self.max_runs));
                continue;
            }
            let checked = match self.checked(chain.conversation()) {
                Some(Ok(_)) => return Ok(RunOutcome::Done),
                Some(Err(violation)) => violation,
                None => ("(root)".into(), "the model gave no answer".into()),
            };
            invalid += 1;
            self.record(chain, invalid);
            if invalid >= chain.max_retry_count.max(1) {
                return Err(ChainError::InvalidAnswer {
                    path: checked.0,
                    message: checked.1,
                });
            }
            // The count is saved with the feedback: a run killed after it goes on
            // counting (the feedback does not start a new run).
            chain
                .add_message(Message::feedback(feedback(&checked.0, &checked.1)))
                .await?;
            chain.save_state().await?;
            step!(Steps::check_max_runs(chain, self.max_runs));
        }
    }

    /// Where the newest call of the answer tool went wrong, as (path, what), when the
    /// tool refused it.
    fn refused_answer(&self, conversation: &Conversation) -> Option<(String, String)> {
        let m = conversation
            .messages
            .last()
            .filter(|m| m.role == Role::Tool)?;
        let refused = m
            .tool_results
            .iter()
            .find(|r| r.name.as_deref() == Some(&self.format.name) && r.is_error())?;
        first_violation(
            &self.validator,
            &arguments_of(conversation, &refused.tool_call_id)?,
        )
    }
}

/// The arguments of the call `id` of the conversation's assistant messages (the newest
/// first), as an object.
fn arguments_of(conversation: &Conversation, id: &str) -> Option<Value> {
    conversation
        .messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_calls.iter())
        .find(|c| c.call_id.as_deref() == Some(id))
        .map(|c| Value::Object(c.arguments_as_map()))
}

/// What the model is told when its answer does not match.
fn feedback(path: &str, message: &str) -> String {
    format!(
        "Your answer does not match the required JSON schema at {path}: {message}. Answer \
         again with only the corrected JSON object."
    )
}

/// An answer's text as JSON: the text itself, or the object inside a Markdown fence.
fn parse(text: &str) -> Result<Value, (String, String)> {
    let text = text.trim();
    let inner = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.trim_end().strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    serde_json::from_str(inner)
        .map_err(|e| ("(root)".into(), format!("the answer is not JSON ({e})")))
}

impl CustomMode for Extract {
    fn name(&self) -> &'static str {
        "extract"
    }

    fn run<'a>(&'a self, chain: &'a mut LLMChain) -> ModeFuture<'a> {
        Box::pin(async move {
            let previous = chain
                .state
                .conversation
                .response_format
                .replace(self.format.clone());
            let added = chain.tool(&self.format.name).is_none();
            if added {
                match self.answer_tool() {
                    Ok(tool) => chain.add_tool(tool),
                    Err(e) => {
                        chain.state.conversation.response_format = previous;
                        return Err(e);
                    }
                }
            }
            // Partial answers go to the mode's receiver and to the chain's callbacks.
            let watching = (self.partial.is_some() || !chain.callbacks.is_empty()).then(|| {
                let watch = PartialAnswers::new(
                    self.format.name.clone(),
                    self.partial.clone(),
                    chain.callbacks.clone(),
                );
                chain.callbacks.push(Arc::new(watch));
                chain.callbacks.len() - 1
            });
            let outcome = self.drive(chain).await;
            if let Some(at) = watching {
                chain.callbacks.remove(at);
            }
            if added {
                chain.remove_tool(&self.format.name);
            }
            chain.state.conversation.response_format = previous;
            outcome
        })
    }
}

impl LLMChain {
    /// Runs the chain to a typed answer: an object of type `T`, matching its schemars
    /// schema. The model may call tools first. An answer that does not match is sent
    /// back to the model within the failure budget; [`ChainError::InvalidAnswer`] names
    /// the path of the last one. Calls that wait for a person end it with
    /// [`ChainError::NotAnswered`] (run [`Extract`] as a mode to resume them).
    ///
    /// ```
    /// # async fn demo(chain: &mut llmchain::chain::LLMChain) -> Result<(), llmchain::chain::ChainError> {
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct City { name: String, population: u64 }
    /// let city: City = chain.extract::<City>().await?;
    /// # Ok(()) }
    /// ```
    pub async fn extract<T: JsonSchema + DeserializeOwned>(&mut self) -> Result<T, ChainError> {
        let value = self.extract_value(Extract::of::<T>()?).await?;
        serde_path_to_error::deserialize(value).map_err(|e| ChainError::InvalidAnswer {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })
    }

    /// [`extract`](Self::extract) for a schema known at run time: the checked answer.
    pub async fn extract_value(&mut self, extract: Extract) -> Result<Value, ChainError> {
        match self.run(super::Mode::custom(extract.clone())).await? {
            RunOutcome::Done => extract.answer(self.conversation()),
            other => Err(ChainError::NotAnswered(format!("{other:?}"))),
        }
    }
}
