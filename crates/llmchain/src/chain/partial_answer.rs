//! Typed answers while they stream: the object so far after each piece of it (the AI
//! SDK's `partialObjectStream`), from the answer's text or from the answer tool's
//! arguments. The reader is the argument preview's ([`ArgumentPreview`]), which keeps
//! its state between fragments: each fragment costs its own length.

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

impl ChainCallbacks for PartialAnswers {
    fn on_llm_new_delta(&self, event: &StreamEvent<'_>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *state;
        let partial = match event {
            StreamEvent::TextDelta { text, .. } => {
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
                reader.preview()
            }
            StreamEvent::ToolCallStarted { index, name, .. } if *name == self.name => {
                state.call = Some((*index, ArgumentPreview::new()));
                None
            }
            StreamEvent::ToolCallArguments { index, fragment } => match &mut state.call {
                Some((at, reader)) if at == index => {
                    reader.feed(fragment);
                    reader.preview()
                }
                _ => None,
            },
            _ => None,
        };
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

    fn on_llm_new_message(&self, _message: &Message) {
        // The next model call streams an answer of its own.
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = State::default();
    }
}
