//! [`ScriptedModel`]: a [`ChatModel`] that replays provider wire bytes through the real
//! decoders — for tests, examples and `llmchain demo`, with no network.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream;
use tokio_util::sync::CancellationToken;

use crate::conversation::Conversation;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelStream};
use crate::provider::render::{ResponseScript, render_stream};
use crate::provider::{Codec, DecoderConfig, EventBatch, Format, RequestOptions, StreamDecoder};

/// One scripted turn.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ScriptedTurn {
    /// Wire bytes of a streamed response, decoded by the format's real decoder. Shared,
    /// so one recorded body can be replayed by many turns and models without copies.
    Stream(Arc<[u8]>),
    /// A failure of the call itself (e.g. an HTTP 529).
    Fail(ModelError),
}

/// A model that answers each call with the next scripted turn.
///
/// Each call also encodes the request with the format's real encoder, and keeps the
/// body, so a test can check what would have been sent.
///
/// ```
/// use llmchain::chain::{ChatModel, ScriptedModel, collect_stream};
/// use llmchain::conversation::Conversation;
/// use llmchain::message::Message;
/// use llmchain::provider::Format;
/// use llmchain::provider::render::ResponseScript;
///
/// let model = ScriptedModel::new(Format::ANTHROPIC)
///     .respond(ResponseScript::text("Hello!"))
///     .unwrap();
/// let mut conv = Conversation::new();
/// conv.messages.push(Message::user("Hi"));
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// let outcome = rt.block_on(collect_stream(model.stream(&conv), |_| {})).unwrap();
/// assert_eq!(outcome.message.text().as_deref(), Some("Hello!"));
/// ```
pub struct ScriptedModel {
    format: Format,
    codec: &'static dyn Codec,
    turns: Mutex<VecDeque<ScriptedTurn>>,
    chunk_size: usize,
    chunk_delay: Option<Duration>,
    config: DecoderConfig,
    requests: Mutex<Vec<Vec<u8>>>,
    model: String,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("format", &self.format)
            .field("chunk_size", &self.chunk_size)
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A scripted model speaking `format`.
    pub fn new(format: Format) -> Self {
        ScriptedModel {
            format,
            codec: format.codec(),
            turns: Mutex::new(VecDeque::new()),
            chunk_size: 7,
            chunk_delay: None,
            config: DecoderConfig {
                // Its events feed a `ModelStream`, whose consumers concatenate them.
                join_fragments: true,
                ..DecoderConfig::default()
            },
            requests: Mutex::new(Vec::new()),
            model: "scripted-model".into(),
        }
    }

    /// Adds a turn rendered from a script. Fails when the format's wire cannot carry
    /// the script (see [`render_stream`]).
    pub fn respond(self, script: ResponseScript) -> Result<Self, ModelError> {
        let bytes = render_stream(self.format, &script)
            .map_err(|e| ModelError::Config(format!("scripted model: {e}")))?;
        Ok(self.respond_bytes(bytes))
    }

    /// Adds a turn of raw wire bytes.
    #[must_use]
    pub fn respond_bytes(self, bytes: impl Into<Arc<[u8]>>) -> Self {
        self.push(ScriptedTurn::Stream(bytes.into()));
        self
    }

    /// Adds a failing turn.
    #[must_use]
    pub fn fail(self, error: ModelError) -> Self {
        self.push(ScriptedTurn::Fail(error));
        self
    }

    /// Adds a turn to a shared model.
    pub fn push(&self, turn: ScriptedTurn) {
        self.turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(turn);
    }

    /// Feeds the decoder this many bytes at a time (default 7: odd sizes split UTF-8
    /// characters, `\r\n` and `data:` prefixes).
    #[must_use]
    pub fn chunk_size(mut self, n: usize) -> Self {
        self.chunk_size = n.max(1);
        self
    }

    /// Waits between chunks, like a real stream.
    #[must_use]
    pub fn chunk_delay(mut self, d: Duration) -> Self {
        self.chunk_delay = Some(d);
        self
    }

    /// The request bodies encoded so far.
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Turns not used yet.
    pub fn remaining_turns(&self) -> usize {
        self.turns.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

struct Replay {
    decoder: Box<dyn StreamDecoder>,
    bytes: Arc<[u8]>,
    pos: usize,
    chunk: usize,
    delay: Option<Duration>,
    pending: VecDeque<ModelEvent>,
    finished: bool,
    /// The error that ends the replay, once the pending events are out.
    error: Option<ModelError>,
    cancel: Option<CancellationToken>,
}

impl Replay {
    /// Ends the replay with `error`, after what the decoder had assembled.
    fn cut_off(&mut self, error: ModelError) {
        self.finished = true;
        self.pending.clear();
        if let Some(m) = self.decoder.interrupt() {
            self.pending.push_back(ModelEvent::Partial(Box::new(m)));
        }
        self.error = Some(error);
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|c| c.is_cancelled())
    }
}

impl ChatModel for ScriptedModel {
    fn model_name(&self) -> &str {
        &self.model
    }

    fn provider_name(&self) -> &str {
        self.format.as_str()
    }

    fn stream<'a>(&'a self, conversation: &'a Conversation) -> ModelStream<'a> {
        self.replay(conversation, None)
    }

    fn stream_until<'a>(
        &'a self,
        conversation: &'a Conversation,
        cancel: CancellationToken,
    ) -> ModelStream<'a> {
        self.replay(conversation, Some(cancel))
    }
}

impl ScriptedModel {
    fn replay<'a>(
        &'a self,
        conversation: &'a Conversation,
        cancel: Option<CancellationToken>,
    ) -> ModelStream<'a> {
        let opts = RequestOptions {
            model: self.model.clone(),
            stream: true,
            ..Default::default()
        };
        match self.codec.encode(conversation, &opts) {
            Ok(body) => self
                .requests
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(body),
            Err(e) => return Box::pin(stream::once(async move { Err(ModelError::Encode(e)) })),
        }
        let turn = self
            .turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        let bytes = match turn {
            None => {
                return Box::pin(stream::once(async {
                    Err(ModelError::Config(
                        "scripted model: no more scripted turns".into(),
                    ))
                }));
            }
            Some(ScriptedTurn::Fail(e)) => return Box::pin(stream::once(async move { Err(e) })),
            Some(ScriptedTurn::Stream(b)) => b,
        };
        let state = Replay {
            decoder: self.codec.stream_decoder(self.config),
            bytes,
            pos: 0,
            chunk: self.chunk_size,
            delay: self.chunk_delay,
            pending: VecDeque::new(),
            finished: false,
            error: None,
            cancel,
        };
        Box::pin(stream::unfold(state, |mut st| async move {
            loop {
                if let Some(ev) = st.pending.pop_front() {
                    return Some((Ok(ev), st));
                }
                if st.finished {
                    let e = st.error.take()?;
                    return Some((Err(e), st));
                }
                if st.is_cancelled() {
                    st.cut_off(ModelError::Cancelled);
                    continue;
                }
                if st.pos >= st.bytes.len() {
                    st.finished = true;
                    let mut events = EventBatch::default();
                    let result = st.decoder.finish(&mut |e| events.push(e));
                    st.pending.extend(events.drain().map(ModelEvent::Event));
                    match result {
                        Ok(outcome) => st.pending.push_back(ModelEvent::Done(Box::new(outcome))),
                        Err(e) => st.cut_off(ModelError::Decode(e)),
                    }
                    continue;
                }
                if let Some(d) = st.delay {
                    match &st.cancel {
                        Some(c) => {
                            tokio::select! {
                                biased;
                                _ = c.cancelled() => continue,
                                _ = tokio::time::sleep(d) => {}
                            }
                        }
                        None => tokio::time::sleep(d).await,
                    }
                }
                let end = (st.pos + st.chunk).min(st.bytes.len());
                let mut events = EventBatch::default();
                let fed = st
                    .decoder
                    .feed(&st.bytes[st.pos..end], &mut |e| events.push(e));
                st.pos = end;
                st.pending.extend(events.drain().map(ModelEvent::Event));
                if let Err(e) = fed {
                    st.cut_off(ModelError::Decode(e));
                }
            }
        }))
    }
}
