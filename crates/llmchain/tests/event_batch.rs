//! `EventBatch` joins adjacent fragments of one kind and position: whatever the events,
//! what a consumer concatenates is unchanged, and nothing is reordered across kinds or
//! positions.

use llmchain::provider::{EventBatch, StreamEvent};
use proptest::prelude::*;

/// An event as (kind, position, text); kind 4 is a call start, 5 a call's end.
fn event(kind: u8, index: u8, text: &str) -> StreamEvent<'_> {
    let i = usize::from(index);
    let c = u32::from(index);
    match kind {
        0 => StreamEvent::TextDelta {
            index: i,
            text: text.into(),
        },
        1 => StreamEvent::ReasoningDelta {
            index: i,
            text: text.into(),
        },
        2 => StreamEvent::ReasoningSignature {
            index: i,
            signature: text.into(),
        },
        3 => StreamEvent::ToolCallArguments {
            index: c,
            fragment: text.into(),
        },
        4 => StreamEvent::ToolCallStarted {
            index: c,
            call_id: Some(text.into()),
            name: "f".into(),
        },
        _ => StreamEvent::ToolCallFinished { index: c },
    }
}

/// Each fragment split into one entry per character; other events kept whole.
fn atoms(events: &[StreamEvent<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let (tag, text) = match e {
            StreamEvent::TextDelta { index, text } => (format!("t{index}"), text),
            StreamEvent::ReasoningDelta { index, text } => (format!("r{index}"), text),
            StreamEvent::ReasoningSignature { index, signature } => {
                (format!("s{index}"), signature)
            }
            StreamEvent::ToolCallArguments { index, fragment } => (format!("a{index}"), fragment),
            other => {
                out.push(format!("{other:?}"));
                continue;
            }
        };
        out.extend(text.chars().map(|c| format!("{tag}:{c}")));
    }
    out
}

proptest! {
    #[test]
    fn batching_keeps_every_fragment_in_order(
        raw in proptest::collection::vec((0u8..6, 0u8..3, "[a-zé{}\"]{0,6}"), 0..60),
        cut in 1usize..8,
    ) {
        let events: Vec<_> = raw.iter().map(|(k, i, t)| event(*k, *i, t)).collect();
        // Batches of `cut` events, as reads of a body would give.
        let mut batched = Vec::new();
        let mut batch = EventBatch::default();
        for chunk in events.chunks(cut) {
            for e in chunk {
                batch.push(e.clone());
            }
            batched.extend(batch.drain());
        }
        prop_assert!(batch.is_empty());
        prop_assert_eq!(atoms(&batched), atoms(&events));
        // Never more events than came in; adjacent events of one kind and position
        // within a batch are joined.
        prop_assert!(batched.len() <= events.len());
    }
}
