//! One answer of a chat, run on a task of its own (a client that disconnects does not
//! stop it) under the conversation's run lease, its chunks pushed into the chat's
//! [`Hub`].
//!
//! The run is the store's [`LeasedRun`], the one owner every front end shares (the
//! worker, `llmchain run`): it claims the chat (creating it, appending the user's
//! message, in one transaction), recovers calls a killed server left `executing`,
//! answers what the review inbox decided and records how the turn ended. This module
//! gives it what only a chat has: the claim of a chat this server owns, the user's
//! message, the chunks (the chain's callbacks), the answers held for the sink's next
//! write, and what the client is sent at the end.
//!
//! The chain is the operator's ([`ChainFactory`]: provider, tools, review policy); the
//! conversation is the store's. A call the policy asks about pauses the run with its
//! reviews stored (the review inbox), and the answer ends with a `tool-approval-request`
//! per call, whose approval id is the review's id. The next request (or `llmchain
//! reviews` from anywhere) decides them; the next turn applies exactly the stored
//! decisions. A new message instead of an answer rejects the calls still waiting (the
//! person moved on), recorded in the inbox like any decision.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::chain::{ChainCallbacks, HumanDecision};
use llmchain::message::{
    ExecutionStatus, Message, MessageStatus, Role, TokenUsage, ToolCall, ToolResult,
};
use llmchain::provider::StreamEvent;
use llmchain::tool::CancellationToken;
use llmchain_store::leased_run::DecideFuture;
use llmchain_store::review::pending_for;
use llmchain_store::{
    ChainFactory, Claim, Drive, LeasedRun, NewConversation, NotBuilt, Opening, ReviewFilter, Run,
    RunEnd, RunState, Store, StoreError, StoredConversation, Undecided, Writer,
};
use serde_json::{Map, Value, json};

use crate::catch_up;
use crate::hub::Hub;
use crate::protocol::{Chunk, DONE};
use crate::ui::{Intent, Rulings, id_of, output_of, ui_messages};

/// How long the lease of a chat's run lasts between heartbeats (renewed every third).
const LEASE: Duration = Duration::from_secs(30);

/// The most a chat's conversation may hold before a new message is refused.
pub(crate) const MAX_MESSAGES: usize = 10_000;

/// The conversation metadata key that says which server profile a chat belongs to: a
/// server lists, reads and decides only its own chats.
pub(crate) const OWNER_KEY: &str = "llmchain_serve";

/// What a turn needs of the server.
pub(crate) struct TurnEnv<S> {
    pub store: Arc<S>,
    pub factory: Arc<dyn ChainFactory>,
    pub worker: String,
    pub profile: Option<String>,
    pub shutdown: CancellationToken,
}

impl<S> TurnEnv<S> {
    /// The owner mark of this server's chats (its profile's name).
    pub(crate) fn owner(&self) -> &str {
        self.profile.as_deref().unwrap_or("")
    }

    /// Whether the conversation whose metadata is `metadata` is one of this server's.
    pub(crate) fn owns(&self, metadata: &Map<String, Value>) -> bool {
        metadata.get(OWNER_KEY).and_then(Value::as_str) == Some(self.owner())
    }
}

/// What a request asks of a chat's turn.
pub(crate) struct Ask {
    /// What the request wants.
    pub intent: Intent,
    /// The title of a chat it creates.
    pub title: Option<String>,
    /// The browser's `traceparent`: the turn's spans join that trace.
    pub traceparent: Option<String>,
}

/// Runs one answer of chat `chat` for `ask`, pushing its chunks into `hub`, and ends the
/// stream (`[DONE]`) whatever happens.
pub(crate) async fn run<S: Store + 'static>(
    env: Arc<TurnEnv<S>>,
    chat: String,
    ask: Ask,
    hub: Arc<Hub>,
) {
    let writer = ChunkWriter::new(hub.clone());
    if let Err(text) = turn(&env, &chat, ask, &writer).await {
        let shown = llmchain::secrets::masked(llmchain::redact::urls_in(&text));
        // The text may quote a model's answer: logged only with the content opt-in.
        let content = llmchain::telemetry::capture_content();
        tracing::info!(chat = %chat, error = content.then_some(shown.as_str()), "chat turn failed");
        writer.close_parts();
        writer.push(Chunk::Error { error_text: shown });
    }
    hub.push(bytes::Bytes::from_static(DONE));
    hub.finish();
}

/// What a client is told when the claim of `chat` fails. A claim refused before its
/// opening ran (a run busy elsewhere, a worker's queued run) has not yet checked whose
/// chat it is: one that is not this server's is answered as one that does not exist, as
/// every route answers, never with its holder, its lease or its run.
async fn claim_refused<S: Store>(env: &TurnEnv<S>, chat: &str, e: StoreError) -> String {
    let none = || format!("there is no chat {chat:?}");
    match e {
        StoreError::ConversationNotFound(_) => none(),
        StoreError::ConversationFull { max, .. } => {
            format!("this chat holds {max} messages, the most it may; start another")
        }
        e @ (StoreError::RunBusy { .. }
        | StoreError::QueuedRunOpen { .. }
        | StoreError::RunAlreadyOpen { .. }) => match env.store.get_conversation(chat).await {
            Ok(Some(c)) if env.owns(&c.summary.metadata) => e.to_string(),
            _ => none(),
        },
        other => other.to_string(),
    }
}

async fn turn<S: Store + 'static>(
    env: &TurnEnv<S>,
    chat: &str,
    ask: Ask,
    writer: &ChunkWriter,
) -> Result<(), String> {
    let Ask {
        intent,
        title,
        traceparent,
    } = ask;
    let store = &env.store;
    let err = |e: StoreError| e.to_string();
    // A message to a chat that does not exist yet creates it, marked as this server's.
    let create = match &intent {
        Intent::Message { .. } => {
            let mut new = NewConversation::default();
            new.metadata
                .insert(OWNER_KEY.into(), Value::String(env.owner().to_owned()));
            Some(match title {
                Some(t) => new.with_title(t),
                None => new,
            })
        }
        _ => None,
    };
    let mut extra = serde_json::Map::new();
    extra.insert("serve".into(), json!({"profile": env.profile}));
    let state = RunState {
        // The mode the built chain runs in is saved with its first step.
        mode: llmchain::chain::Mode::while_needs_response().name().into(),
        extra,
        ..Default::default()
    };
    // A new user message is appended in the claim's transaction, unless the chat
    // already ends with it (the client sent it again), is full, or its last answer has
    // calls without results (then it goes after them: see `Drive::message`). A chat
    // that is not this server's is refused whatever the intent, before anything changes.
    let deferred = Arc::new(AtomicBool::new(false));
    let new_message = match &intent {
        Intent::Message { text, client_id } => Some(user_message(text, client_id.as_deref())),
        _ => None,
    };
    let opening = opening(env.owner(), chat, new_message.clone(), deferred.clone());
    let claim = Claim::Chat {
        id: chat.to_owned(),
        create: create.map(Box::new),
        state,
        opening: Some(opening),
    };
    let mut held = match LeasedRun::claim(store.clone(), claim, &env.worker, LEASE).await {
        Ok(held) => held,
        Err(e) => return Err(claim_refused(env, chat, e).await),
    };
    let stored = held
        .conversation()
        .cloned()
        .ok_or_else(|| "the chat was not read with its claim".to_owned())?;

    // What the request asks, applied under the lease.
    let messages = &stored.conversation.messages;
    // The answer continues the last assistant message, or starts after the new user
    // message.
    let answer_start = |len: usize, messages: &[Message]| {
        messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .map_or(len, |u| u + 1)
    };
    // The approvals a client answers: if the store already has their outcomes, the
    // client is caught up first (see `catch_up`).
    let answered: HashSet<String> = match &intent {
        Intent::Approvals { answers } => answers.iter().map(|a| a.id.clone()).collect(),
        _ => HashSet::new(),
    };
    let message_id = match intent {
        // The user's message is stored (see `opening`), or goes after the last answer's
        // results: the answer follows it.
        Intent::Message { .. } if deferred.load(Ordering::Relaxed) => {
            // After the tool message that answers the waiting calls (one batch) and the
            // user's message.
            id_of(messages.len() + 2)
        }
        Intent::Message { .. } => id_of(messages.len()),
        Intent::Regenerate { from } => {
            let start = answer_start(messages.len(), messages);
            let from = from
                .and_then(|f| usize::try_from(f).ok())
                .filter(|&f| f >= start && f <= messages.len())
                .unwrap_or(start);
            // The answer leaves the chat but stays on record (superseded), with every
            // call that ran or may have run.
            store
                .supersede_messages(Writer::Lease(held.lease()), from as i64)
                .await
                .map_err(err)?;
            if let Some(read) = held.conversation_mut() {
                read.conversation.messages.truncate(from);
            }
            id_of(from)
        }
        Intent::Approvals { .. } | Intent::Continue => {
            id_of(answer_start(messages.len(), messages))
        }
    };
    writer.push(Chunk::Start {
        message_id: Some(message_id.clone()),
    });
    writer.push(Chunk::data(
        "run",
        Some("run".into()),
        json!({"runId": held.run().id, "conversationId": chat}),
    ));
    if !answered.is_empty() {
        let reviews = store
            .list_reviews(&ReviewFilter {
                conversation: Some(chat.to_owned()),
                ..Default::default()
            })
            .await
            .map_err(err)?;
        let rulings = Rulings::of_runs(&store.list_runs(chat).await.map_err(err)?);
        let shown = ui_messages(&stored.conversation, &reviews, &rulings);
        if let Some(m) = shown.iter().find(|m| m["id"] == message_id.as_str()) {
            for chunk in catch_up::chunks(m, &answered) {
                writer.push(chunk);
            }
        }
    }

    let started = held
        .start(|run, state| {
            writer.know_calls(&state.conversation.messages);
            async move {
                env.factory
                    .build(&run, state)
                    .await
                    .map_err(|e| NotBuilt::permanent(format!("cannot build the chain: {e}")))
            }
        })
        .await;
    let (held, built) = match started {
        Ok(started) => started,
        Err(ended) => {
            return Err(match ended.end {
                RunEnd::Lost { reason } => {
                    format!("the chat's run was taken over or cancelled ({reason})")
                }
                RunEnd::Failed { error, .. } => error,
                other => format!("the turn could not start: {other:?}"),
            });
        }
    };
    let (chain, mode) = built;
    let chain = chain.with_callbacks(writer.clone());
    // The model's answers wait for the sink's next write (their calls' `executing`, the
    // run's completion).
    let mut drive = Drive::new()
        .holding_answers()
        .cancel_on(env.shutdown.child_token());
    if let Some(parent) = traceparent {
        drive = drive.trace_parent(parent);
    }
    if let Some(message) = new_message.filter(|_| deferred.load(Ordering::Relaxed)) {
        // The person wrote instead of answering: calls still waiting are rejected.
        drive = drive.message(message).undecided(MovedOn {
            store: store.clone(),
        });
    }
    let ended = held.drive(chain, mode, drive).await;
    writer.close_parts();
    let chain = ended.chain;
    // The rule that asked about or denied each of the turn's calls, for the page (a
    // later chunk with the same id replaces an earlier one).
    if let Some(c) = &chain {
        let mut rulings = Rulings::default();
        rulings.add(c.journal());
        let mut calls: Vec<&str> = rulings.calls().collect();
        calls.sort_unstable();
        for call in calls {
            if let Some((id, data)) = rulings.data(call) {
                writer.push(Chunk::data("policy", Some(id), data));
            }
        }
    }
    match ended.end {
        RunEnd::Paused { reviews, .. } => {
            for review in reviews {
                writer.push(Chunk::ToolApprovalRequest {
                    approval_id: review.id,
                    tool_call_id: review.call_id,
                });
            }
            writer.end_step();
            writer.push_usage();
            writer.push(Chunk::Finish {
                finish_reason: Some("tool-calls"),
            });
        }
        RunEnd::Done | RunEnd::Yielded => {
            writer.end_step();
            writer.push_usage();
            writer.push(Chunk::Finish {
                finish_reason: Some(finish_reason(chain.as_ref().and_then(|c| c.last_message()))),
            });
        }
        RunEnd::Cancelled => return Err("the server is stopping; the chat is saved".into()),
        RunEnd::Failed { error, .. } => return Err(error),
        RunEnd::Lost { reason } => {
            return Err(format!(
                "the chat's run was taken over or cancelled ({reason})"
            ));
        }
        other => return Err(format!("the turn ended as {other:?}")),
    }
    Ok(())
}

/// The user's message as stored: its text, and the client's id for it (a resend is
/// told apart by it).
fn user_message(text: &str, client_id: Option<&str>) -> Message {
    let mut message = Message::user(text);
    if let Some(id) = client_id {
        message
            .metadata
            .insert("ui_id".into(), Value::String(id.into()));
    }
    message
}

/// The opening of a turn of chat `chat` (see [`Opening`]): refuses a chat that is not
/// `owner`'s, this server's (as if there were none); for a turn that sends `message`, appends it,
/// none when the chat already ends with it (a client's resend carries the same
/// `client_id`), `ConversationFull` when the chat holds [`MAX_MESSAGES`], and nothing
/// when the last answer has calls without results (`deferred` is set: the message goes
/// after their results).
fn opening(
    owner: &str,
    chat: &str,
    message: Option<Message>,
    deferred: Arc<AtomicBool>,
) -> Opening {
    let chat = chat.to_owned();
    let owner = owner.to_owned();
    Box::new(move |stored: &StoredConversation| {
        if stored
            .summary
            .metadata
            .get(OWNER_KEY)
            .and_then(Value::as_str)
            != Some(owner.as_str())
        {
            return Err(StoreError::ConversationNotFound(chat.clone()));
        }
        let Some(message) = &message else {
            return Ok(Vec::new());
        };
        let messages = &stored.conversation.messages;
        let resent = messages.last().is_some_and(|m| {
            m.role == Role::User
                && message.metadata.contains_key("ui_id")
                && m.metadata.get("ui_id") == message.metadata.get("ui_id")
        });
        if resent {
            return Ok(Vec::new());
        }
        if messages.len() >= MAX_MESSAGES {
            return Err(StoreError::ConversationFull {
                conversation: chat.clone(),
                max: MAX_MESSAGES,
            });
        }
        if llmchain::conversation::unanswered_calls(messages).is_some() {
            deferred.store(true, Ordering::Relaxed);
            return Ok(Vec::new());
        }
        Ok(vec![message.clone()])
    })
}

/// A chat's calls still waiting for an answer when the person sends a new message
/// instead: rejected, in the inbox, by the new message (they did not run; the model is
/// told so), so the message can follow their results.
struct MovedOn<S> {
    store: Arc<S>,
}

impl<S: Store + 'static> Undecided for MovedOn<S> {
    fn decide<'a>(&'a self, run: &'a Run, calls: &'a [ToolCall]) -> DecideFuture<'a> {
        Box::pin(async move {
            let pending = pending_for(self.store.as_ref(), &run.conversation_id, calls).await?;
            for (_, review) in pending {
                let decision = HumanDecision::Reject {
                    reason: Some(format!(
                        "Not run: the user sent a new message instead of approving this call to '{}'.",
                        review.tool
                    )),
                };
                match self
                    .store
                    .decide_review(&review.id, &decision, "llmchain serve (a new message)")
                    .await
                {
                    // Decided meanwhile (the CLI, another tab): that decision stands.
                    Ok(_) | Err(StoreError::ReviewNotPending { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
    }
}

/// The `finishReason` of an answer that ended with `last`.
fn finish_reason(last: Option<&Message>) -> &'static str {
    match last.map(|m| m.status) {
        Some(MessageStatus::Length) => "length",
        Some(MessageStatus::Cancelled) => "other",
        _ => "stop",
    }
}

/// The chain's callbacks as chunks: steps, text and reasoning parts opened and closed
/// around their deltas, calls with their live argument text, then their results.
#[derive(Clone)]
pub(crate) struct ChunkWriter {
    hub: Arc<Hub>,
    state: Arc<Mutex<WriterState>>,
}

#[derive(Default)]
struct WriterState {
    in_step: bool,
    text: Option<String>,
    reasoning: Option<String>,
    parts: u32,
    /// The ids the calls streaming in the current model call will have, by index.
    streamed: HashMap<u32, String>,
    /// Call ids the conversation already uses (a streamed call is named as the chain
    /// will name it: `unique_call_id`).
    taken: HashSet<String>,
    /// The ids given to this model call's streamed calls so far.
    pending: Option<HashSet<String>>,
    usage: TokenUsage,
    has_usage: bool,
}

impl ChunkWriter {
    fn new(hub: Arc<Hub>) -> Self {
        ChunkWriter {
            hub,
            state: Arc::new(Mutex::new(WriterState::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WriterState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn push(&self, chunk: Chunk) {
        self.hub.push(chunk.to_sse());
    }

    /// Learns the call ids a conversation already uses.
    fn know_calls(&self, messages: &[Message]) {
        let mut st = self.lock();
        st.taken = messages
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .filter_map(|c| c.call_id.clone())
            .collect();
    }

    fn start_step(&self, st: &mut WriterState) {
        if !st.in_step {
            st.in_step = true;
            self.push(Chunk::StartStep);
        }
    }

    fn close(&self, st: &mut WriterState) {
        if let Some(id) = st.text.take() {
            self.push(Chunk::TextEnd { id });
        }
        if let Some(id) = st.reasoning.take() {
            self.push(Chunk::ReasoningEnd { id });
        }
    }

    /// Closes the open text and reasoning parts.
    pub(crate) fn close_parts(&self) {
        let mut st = self.lock();
        self.close(&mut st);
    }

    /// Ends the open step.
    pub(crate) fn end_step(&self) {
        let mut st = self.lock();
        self.close(&mut st);
        if st.in_step {
            st.in_step = false;
            self.push(Chunk::FinishStep);
        }
    }

    fn push_usage(&self) {
        let st = self.lock();
        if st.has_usage {
            self.push(Chunk::data(
                "usage",
                Some("usage".into()),
                json!({"inputTokens": st.usage.input_tokens, "outputTokens": st.usage.output_tokens}),
            ));
        }
    }

    fn part_id(st: &mut WriterState, kind: &str) -> String {
        st.parts += 1;
        format!("{kind}{}", st.parts)
    }
}

impl ChainCallbacks for ChunkWriter {
    /// A typed answer so far, as the data part `data-object` (one id: each replaces the
    /// one before, as the AI SDK's client keeps data parts).
    fn on_partial_answer(&self, partial: &Value) {
        self.push(Chunk::data(
            "object",
            Some("object".into()),
            partial.clone(),
        ));
    }

    fn on_llm_new_delta(&self, event: &StreamEvent<'_>) {
        let mut st = self.lock();
        match event {
            StreamEvent::TextDelta { text, .. } if !text.is_empty() => {
                self.start_step(&mut st);
                if let Some(id) = st.reasoning.take() {
                    self.push(Chunk::ReasoningEnd { id });
                }
                let id = match st.text.clone() {
                    Some(id) => id,
                    None => {
                        let id = Self::part_id(&mut st, "t");
                        self.push(Chunk::TextStart { id: id.clone() });
                        st.text = Some(id.clone());
                        id
                    }
                };
                self.push(Chunk::TextDelta {
                    id,
                    delta: text.to_string(),
                });
            }
            StreamEvent::ReasoningDelta { text, .. } if !text.is_empty() => {
                self.start_step(&mut st);
                if let Some(id) = st.text.take() {
                    self.push(Chunk::TextEnd { id });
                }
                let id = match st.reasoning.clone() {
                    Some(id) => id,
                    None => {
                        let id = Self::part_id(&mut st, "r");
                        self.push(Chunk::ReasoningStart { id: id.clone() });
                        st.reasoning = Some(id.clone());
                        id
                    }
                };
                self.push(Chunk::ReasoningDelta {
                    id,
                    delta: text.to_string(),
                });
            }
            StreamEvent::ToolCallStarted {
                index,
                call_id,
                name,
            } => {
                self.start_step(&mut st);
                self.close(&mut st);
                let mut pending = st.pending.take().unwrap_or_else(|| st.taken.clone());
                let id = match call_id {
                    Some(wire) => llmchain::conversation::unique_call_id(&mut pending, wire),
                    None => format!("call_{index}"),
                };
                st.pending = Some(pending);
                st.streamed.insert(*index, id.clone());
                self.push(Chunk::ToolInputStart {
                    tool_call_id: id,
                    tool_name: name.to_string(),
                });
            }
            StreamEvent::ToolCallArguments { index, fragment } if !fragment.is_empty() => {
                if let Some(id) = st.streamed.get(index).cloned() {
                    self.push(Chunk::ToolInputDelta {
                        tool_call_id: id,
                        input_text_delta: fragment.to_string(),
                    });
                }
            }
            _ => {}
        }
    }

    fn on_llm_token_usage(&self, usage: &TokenUsage) {
        let mut st = self.lock();
        st.usage.add(*usage);
        st.has_usage = true;
    }

    fn on_llm_new_message(&self, message: &Message) {
        let mut st = self.lock();
        self.start_step(&mut st);
        self.close(&mut st);
        st.streamed.clear();
        st.pending = None;
        for call in &message.tool_calls {
            let Some(id) = call.call_id.clone() else {
                continue;
            };
            st.taken.insert(id.clone());
            let name = call.name.clone().unwrap_or_default();
            if call.is_complete() {
                self.push(Chunk::ToolInputAvailable {
                    tool_call_id: id,
                    tool_name: name,
                    input: Value::Object(call.arguments_as_map()),
                });
            } else {
                let raw = match &call.arguments {
                    Some(llmchain::message::Arguments::Raw(r)) => Value::String(r.clone()),
                    Some(llmchain::message::Arguments::Object(m)) => Value::Object(m.clone()),
                    None => Value::Null,
                };
                self.push(Chunk::ToolInputError {
                    tool_call_id: id,
                    tool_name: name,
                    input: raw,
                    error_text: "the call's arguments never completed; it does not run".into(),
                });
            }
        }
        if message.tool_calls.is_empty() && st.in_step {
            st.in_step = false;
            self.push(Chunk::FinishStep);
        }
    }

    fn on_tool_execution_completed(&self, call: &ToolCall, result: &ToolResult) {
        let id = call.call_id.clone().unwrap_or_default();
        if result.is_interrupt() {
            return;
        }
        if call.typed_execution_status() == Some(ExecutionStatus::Denied) {
            self.push(Chunk::ToolOutputDenied { tool_call_id: id });
        } else {
            self.push(Chunk::ToolOutputAvailable {
                tool_call_id: id,
                output: output_of(result),
            });
        }
    }

    fn on_tool_execution_failed(&self, call: &ToolCall, result: &ToolResult) {
        self.push(Chunk::ToolOutputError {
            tool_call_id: call.call_id.clone().unwrap_or_default(),
            error_text: result.content_text(),
        });
    }

    fn on_tool_response_created(&self, _message: &Message) {
        let mut st = self.lock();
        if st.in_step {
            st.in_step = false;
            self.push(Chunk::FinishStep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmchain_store::ConversationSummary;

    fn chat(owner: Option<&str>, messages: Vec<Message>) -> StoredConversation {
        let mut metadata = Map::new();
        if let Some(o) = owner {
            metadata.insert(OWNER_KEY.into(), Value::String(o.into()));
        }
        let mut conversation = llmchain::conversation::Conversation::new();
        conversation.messages = messages;
        StoredConversation {
            summary: ConversationSummary {
                id: "c".into(),
                title: None,
                metadata,
                message_count: conversation.messages.len() as i64,
                created_at: 0,
                updated_at: 0,
            },
            conversation,
        }
    }

    #[test]
    fn a_user_message_is_appended_once_and_not_to_a_full_chat() {
        let later = Arc::new(AtomicBool::new(false));
        let open = opening(
            "p",
            "c",
            Some(user_message("hi", Some("u1"))),
            later.clone(),
        );
        let first = open(&chat(Some("p"), vec![])).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].text().as_deref(), Some("hi"));
        assert_eq!(first[0].metadata["ui_id"], "u1");
        // The client sent it again: the chat already ends with it.
        assert!(open(&chat(Some("p"), first.clone())).unwrap().is_empty());
        // Another message with the same text is a new one.
        let other = opening(
            "p",
            "c",
            Some(user_message("hi", Some("u2"))),
            later.clone(),
        );
        assert_eq!(other(&chat(Some("p"), first.clone())).unwrap().len(), 1);
        // Without a client id, nothing tells a resend apart: it is appended.
        let anonymous = opening("p", "c", Some(user_message("hi", None)), later.clone());
        let once = anonymous(&chat(Some("p"), vec![])).unwrap();
        assert_eq!(anonymous(&chat(Some("p"), once)).unwrap().len(), 1);
        let full = vec![Message::assistant("x"); MAX_MESSAGES];
        assert!(matches!(
            open(&chat(Some("p"), full)),
            Err(StoreError::ConversationFull {
                max: MAX_MESSAGES,
                ..
            })
        ));
        assert!(!later.load(Ordering::Relaxed));
    }

    #[test]
    fn a_chat_of_another_owner_is_not_there_and_a_message_waits_for_results() {
        let later = Arc::new(AtomicBool::new(false));
        let open = opening("p", "c", Some(user_message("hi", None)), later.clone());
        // A CLI conversation (no owner) and another profile's chat are not this server's.
        for owner in [None, Some("q")] {
            assert!(matches!(
                open(&chat(owner, vec![])),
                Err(StoreError::ConversationNotFound(_))
            ));
        }
        let no_message = opening("p", "c", None, later.clone());
        assert!(matches!(
            no_message(&chat(Some("q"), vec![])),
            Err(StoreError::ConversationNotFound(_))
        ));
        assert!(no_message(&chat(Some("p"), vec![])).unwrap().is_empty());
        // The last answer's call has no result: the message goes after it, later.
        let call = ToolCall::function("k1", "charge", json!({})).unwrap();
        let waiting = vec![
            Message::user("pay"),
            Message::assistant_with_calls("", vec![call]),
        ];
        assert!(open(&chat(Some("p"), waiting)).unwrap().is_empty());
        assert!(later.load(Ordering::Relaxed));
    }
}
