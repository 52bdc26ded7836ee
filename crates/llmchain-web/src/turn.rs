//! One answer of a chat, run on a task of its own (a client that disconnects does not
//! stop it) under the conversation's run lease, its chunks pushed into the chat's
//! [`Hub`].
//!
//! The chain is the operator's ([`ChainFactory`]: provider, tools, review policy); the
//! conversation is the store's. A call the policy asks about pauses the run with its
//! reviews stored (the review inbox), and the answer ends with a `tool-approval-request`
//! per call, whose approval id is the review's id. The next request (or `llmchain
//! reviews` from anywhere) decides them; the next turn applies exactly the stored
//! decisions ([`run_answering`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmchain::chain::{ChainCallbacks, ChainError, LLMChain, RunOutcome};
use llmchain::message::{
    ExecutionStatus, Message, MessageStatus, Role, TokenUsage, ToolCall, ToolResult,
};
use llmchain::provider::StreamEvent;
use llmchain::tool::CancellationToken;
use llmchain_store::review::{new_reviews, run_answering};
use llmchain_store::sink::{StoreSink, chain_state, keep_extra, run_state};
use llmchain_store::{
    ChainFactory, Heartbeat, NewConversation, Opening, ReviewFilter, ReviewStatus, RunState,
    RunStatus, Store, StoreError, Writer,
};
use serde_json::{Value, json};

use crate::catch_up;
use crate::hub::Hub;
use crate::protocol::{Chunk, DONE};
use crate::ui::{Intent, id_of, output_of, ui_messages};

/// How long the lease of a chat's run lasts between heartbeats (renewed every third).
const LEASE: Duration = Duration::from_secs(30);

/// The most a chat's conversation may hold before a new message is refused.
pub(crate) const MAX_MESSAGES: usize = 10_000;

/// What a turn needs of the server.
pub(crate) struct TurnEnv<S> {
    pub store: Arc<S>,
    pub factory: Arc<dyn ChainFactory>,
    pub worker: String,
    pub profile: Option<String>,
    pub shutdown: CancellationToken,
}

/// Runs one answer of chat `chat` for `intent`, pushing its chunks into `hub`, and ends
/// the stream (`[DONE]`) whatever happens.
pub(crate) async fn run<S: Store + 'static>(
    env: Arc<TurnEnv<S>>,
    chat: String,
    intent: Intent,
    title: Option<String>,
    hub: Arc<Hub>,
) {
    let writer = ChunkWriter::new(hub.clone());
    if let Err(text) = turn(&env, &chat, intent, title, &writer).await {
        tracing::info!(chat = %chat, error = %text, "chat turn failed");
        writer.close_parts();
        writer.push(Chunk::Error {
            error_text: llmchain::redact::urls_in(&text),
        });
    }
    hub.push(bytes::Bytes::from_static(DONE));
    hub.finish();
}

async fn turn<S: Store + 'static>(
    env: &TurnEnv<S>,
    chat: &str,
    intent: Intent,
    title: Option<String>,
    writer: &ChunkWriter,
) -> Result<(), String> {
    let store = &env.store;
    let err = |e: StoreError| e.to_string();
    // This process holds the chat's run: no other process runs it meanwhile. A message
    // to a chat that does not exist yet creates it; the chat is read under the lease, in
    // the same transaction.
    let create = match &intent {
        Intent::Message { .. } => {
            let new = NewConversation::default();
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
        mode: "while_needs_response".into(),
        extra,
        ..Default::default()
    };
    // A new user message is appended in the same transaction, unless the chat already
    // ends with it (the client sent it again) or is full.
    let opening = match &intent {
        Intent::Message { text, client_id } => Some(user_message(chat, text, client_id.as_deref())),
        _ => None,
    };
    let (run, stored) = store
        .claim_and_read(chat, create, &env.worker, LEASE, &state, opening)
        .await
        .map_err(|e| match e {
            StoreError::ConversationNotFound(_) => format!("there is no chat {chat:?}"),
            StoreError::ConversationFull { max, .. } => {
                format!("this chat holds {max} messages, the most it may; start another")
            }
            other => other.to_string(),
        })?;
    let lease = run
        .lease()
        .ok_or_else(|| "the chat's run has no lease".to_owned())?;
    let stop = env.shutdown.child_token();
    let heartbeat = Heartbeat::spawn(store.clone(), lease.clone(), LEASE, stop.clone());
    let finish = |status: RunStatus, chain: Option<&LLMChain>| {
        let mut saved = chain
            .map(|c| run_state(c.state(), &run.state.mode))
            .unwrap_or_else(|| run.state.clone());
        keep_extra(&mut saved, &run.state.extra);
        saved.status = status;
        saved
    };

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
    // What the intent changes, applied to `stored` too once the catch-up below has read
    // it as it was: the chain starts from it without reading the chat again.
    let mut truncated = None;
    let message_id = match intent {
        // The user's message is stored (see `opening`): the answer follows it.
        Intent::Message { .. } => id_of(messages.len()),
        Intent::Regenerate { from } => {
            let start = answer_start(messages.len(), messages);
            let from = from
                .and_then(|f| usize::try_from(f).ok())
                .filter(|&f| f >= start && f <= messages.len())
                .unwrap_or(start);
            store
                .truncate_messages(Writer::Lease(&lease), from as i64)
                .await
                .map_err(err)?;
            truncated = Some(from);
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
        json!({"runId": run.id, "conversationId": chat}),
    ));
    if !answered.is_empty() {
        let reviews = store
            .list_reviews(&ReviewFilter {
                conversation: Some(chat.to_owned()),
                ..Default::default()
            })
            .await
            .map_err(err)?;
        let shown = ui_messages(&stored.conversation, &reviews);
        if let Some(m) = shown.iter().find(|m| m["id"] == message_id.as_str()) {
            for chunk in catch_up::chunks(m, &answered) {
                writer.push(chunk);
            }
        }
    }

    let mut conversation = stored.conversation;
    if let Some(keep) = truncated {
        conversation.messages.truncate(keep);
    }
    let state = chain_state(conversation, Some(&run.state));
    writer.know_calls(&state.conversation.messages);
    let (chain, mode) = env
        .factory
        .build(&run, state)
        .await
        .map_err(|e| format!("cannot build the chain: {e}"))?;
    // The model's answers wait for the sink's next write (their calls' `executing`, the
    // run's completion): the run is ended through the sink below.
    let sink = StoreSink::new(store.clone(), chat.to_owned())
        .with_lease(lease.clone(), mode.name())
        .keeping(&run.state.extra)
        .holding_answers();
    let mut chain = chain
        .with_sink(Arc::new(sink.clone()))
        .with_callbacks(writer.clone());
    let token = chain.cancellation_token();
    let forward = {
        let stop = stop.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            token.cancel();
        })
    };
    let outcome = run_answering(store.as_ref(), chat, &mut chain, mode).await;
    forward.abort();
    let lost = heartbeat.stopped();
    drop(heartbeat);
    if let Some(why) = lost {
        // Nothing more is written: the lease is someone else's.
        sink.drop_held();
        return Err(format!(
            "the chat's run was taken over or cancelled ({why:?})"
        ));
    }
    writer.close_parts();
    match outcome {
        Ok(RunOutcome::ReviewRequired(_) | RunOutcome::Interrupted(_)) => {
            // What waits is written before the run pauses (nothing, as a rule: the
            // state that pauses it was written with it).
            sink.flush().await.map_err(|e| e.to_string())?;
            let reviews = new_reviews(&chain);
            let saved = finish(RunStatus::Paused, Some(&chain));
            store
                .pause_run(&lease, &saved, &reviews)
                .await
                .map_err(err)?;
            let open = store
                .list_reviews(&ReviewFilter {
                    conversation: Some(chat.to_owned()),
                    status: Some(ReviewStatus::Pending),
                    ..Default::default()
                })
                .await
                .map_err(err)?;
            for r in reviews {
                if let Some(review) = open
                    .iter()
                    .find(|o| o.call_id == r.call_id && o.round == r.round)
                {
                    writer.push(Chunk::ToolApprovalRequest {
                        approval_id: review.id.clone(),
                        tool_call_id: r.call_id,
                    });
                }
            }
            writer.end_step();
            writer.push_usage();
            writer.push(Chunk::Finish {
                finish_reason: Some("tool-calls"),
            });
        }
        Ok(_) => {
            let saved = finish(RunStatus::Done, Some(&chain));
            sink.complete(&saved).await.map_err(|e| e.to_string())?;
            writer.end_step();
            writer.push_usage();
            writer.push(Chunk::Finish {
                finish_reason: Some(finish_reason(chain.last_message())),
            });
        }
        Err(ChainError::Cancelled) => {
            let saved = finish(RunStatus::Cancelled, Some(&chain));
            if let Err(e) = sink.complete(&saved).await {
                tracing::info!(chat = %chat, error = %e, "the stopped turn's last writes were not saved");
            }
            return Err("the server is stopping; the chat is saved".into());
        }
        Err(e) => {
            let message = e.to_string();
            if let Err(e) = sink.flush().await {
                tracing::info!(chat = %chat, error = %e, "the failed turn's last writes were not saved");
            }
            let _ = store
                .update_run(&lease, &finish(RunStatus::Running, Some(&chain)))
                .await;
            let _ = store.fail_run(&lease, &message, false).await;
            return Err(message);
        }
    }
    Ok(())
}

/// The opening of a turn that sends the user's `text`: the message to append, none when
/// the chat already ends with it (a client's resend carries the same `client_id`), or
/// `ConversationFull` when the chat holds [`MAX_MESSAGES`].
fn user_message(chat: &str, text: &str, client_id: Option<&str>) -> Opening {
    let chat = chat.to_owned();
    let mut message = Message::user(text);
    if let Some(id) = client_id {
        message
            .metadata
            .insert("ui_id".into(), Value::String(id.into()));
    }
    Box::new(move |messages: &[Message]| {
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
        Ok(vec![message.clone()])
    })
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

    #[test]
    fn a_user_message_is_appended_once_and_not_to_a_full_chat() {
        let open = user_message("c", "hi", Some("u1"));
        let first = open(&[]).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].text().as_deref(), Some("hi"));
        assert_eq!(first[0].metadata["ui_id"], "u1");
        // The client sent it again: the chat already ends with it.
        assert!(open(&first).unwrap().is_empty());
        // Another message with the same text is a new one.
        assert_eq!(
            user_message("c", "hi", Some("u2"))(&first).unwrap().len(),
            1
        );
        // Without a client id, nothing tells a resend apart: it is appended.
        let anonymous = user_message("c", "hi", None);
        assert_eq!(anonymous(&anonymous(&[]).unwrap()).unwrap().len(), 1);
        let full = vec![Message::assistant("x"); MAX_MESSAGES];
        assert!(matches!(
            open(&full),
            Err(StoreError::ConversationFull {
                max: MAX_MESSAGES,
                ..
            })
        ));
    }
}
