//! Typed answers while they stream: the object so far after each piece of it (the AI
//! SDK's `partialObjectStream`), from the answer's text or from the answer tool's
//! arguments. The reader is the argument preview's ([`ArgumentPreview`]), which keeps
//! its state between fragments: each fragment costs its own length.
//!
//! A partial is drawn when the answer has grown by half since the last one (16 bytes at
//! least), and once more when the answer ends: each partial is a whole object, so drawing
//! one per piece cost the square of the answer's size (a 512 KB answer in 100-byte pieces
//! sent hundreds of megabytes to a served page). Drawn geometrically, all the partials
//! together are at most about three times the answer.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::callbacks::ChainCallbacks;
use crate::message::Message;
use crate::provider::StreamEvent;
use crate::provider::preview::ArgumentPreview;

/// What receives each partial answer.
pub(super) type OnPartial = Arc<dyn Fn(&Value) + Send + Sync>;

/// The chain callback that turns an answer's stream into partial objects, for one run:
/// given to the mode's own receiver and to the chain's callbacks
/// ([`ChainCallbacks::on_partial_answer`]).
pub(super) struct PartialAnswers {
    /// The answer tool's name.
    name: String,
    on_partial: Option<OnPartial>,
    /// The chain's callbacks when the run began.
    callbacks: Vec<Arc<dyn ChainCallbacks>>,
    state: Mutex<State>,
}

/// What one model call has streamed of the answer so far.
#[derive(Default)]
struct State {
    /// The answer's text, read from its first `{` (a Markdown fence before it is skipped).
    text: Option<ArgumentPreview>,
    /// The answer tool's call: its index in the message, and its arguments.
    call: Option<(u32, ArgumentPreview)>,
    /// The last partial given, so an unchanged one is not given again.
    last: Option<Value>,
    /// How many bytes of the answer had been read when a partial was last drawn.
    drawn_at: usize,
}

/// The fewest bytes an answer grows by before the next partial is drawn.
const MIN_STEP: usize = 16;

/// Whether a partial is due after `read` bytes, the last drawn after `drawn_at`.
fn due(read: usize, drawn_at: usize) -> bool {
    read >= drawn_at + (drawn_at / 2).max(MIN_STEP)
}

impl PartialAnswers {
    pub(super) fn new(
        name: String,
        on_partial: Option<OnPartial>,
        callbacks: Vec<Arc<dyn ChainCallbacks>>,
    ) -> PartialAnswers {
        PartialAnswers {
            name,
            on_partial,
            callbacks,
            state: Mutex::default(),
        }
    }
}

impl PartialAnswers {
    /// Gives `partial` (an object, unlike the last one given) to the receivers.
    fn give(&self, state: &mut State, partial: Option<Value>) {
        let Some(partial) = partial.filter(Value::is_object) else {
            return;
        };
        if state.last.as_ref() == Some(&partial) {
            return;
        }
        if let Some(on_partial) = &self.on_partial {
            on_partial(&partial);
        }
        for cb in &self.callbacks {
            cb.on_partial_answer(&partial);
        }
        state.last = Some(partial);
    }

    /// The answer as read so far, whether or not a partial is due: at its end.
    fn flush(&self, state: &mut State) {
        let partial = match (&state.call, &state.text) {
            (Some((_, reader)), _) => reader.preview(),
            (None, Some(reader)) => reader.preview(),
            (None, None) => None,
        };
        self.give(state, partial);
    }
}

impl ChainCallbacks for PartialAnswers {
    fn on_llm_new_delta(&self, event: &StreamEvent<'_>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *state;
        let drawn_at = state.drawn_at;
        let read = match event {
            StreamEvent::TextDelta { text, .. } if state.call.is_none() => {
                let reader = match &mut state.text {
                    Some(reader) => {
                        reader.feed(text);
                        reader
                    }
                    None => match text.find('{') {
                        Some(at) => {
                            let reader = state.text.insert(ArgumentPreview::new());
                            reader.feed(&text[at..]);
                            reader
                        }
                        None => return,
                    },
                };
                due(reader.bytes_read(), drawn_at).then(|| (reader.bytes_read(), reader.preview()))
            }
            StreamEvent::ToolCallStarted { index, name, .. } if *name == self.name => {
                state.call = Some((*index, ArgumentPreview::new()));
                state.drawn_at = 0;
                None
            }
            StreamEvent::ToolCallArguments { index, fragment } => match &mut state.call {
                Some((at, reader)) if at == index => {
                    reader.feed(fragment);
                    due(reader.bytes_read(), drawn_at)
                        .then(|| (reader.bytes_read(), reader.preview()))
                }
                _ => None,
            },
            StreamEvent::ToolCallFinished { index } => {
                if state.call.as_ref().is_some_and(|(at, _)| at == index) {
                    self.flush(state);
                }
                None
            }
            StreamEvent::Stop { .. } => {
                self.flush(state);
                None
            }
            _ => None,
        };
        if let Some((read, partial)) = read {
            state.drawn_at = read;
            self.give(state, partial);
        }
    }

    fn on_llm_new_message(&self, _message: &Message) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // What a stream without a stop event left undrawn.
        self.flush(&mut state);
        // The next model call streams an answer of its own.
        *state = State::default();
    }
}
