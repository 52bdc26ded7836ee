//! `EventBatch` joins adjacent fragments of one kind and position: whatever the events,
//! what a consumer concatenates is unchanged, and nothing is reordered across kinds or
//! positions.

use llmchain::provider::render::{ResponseScript, render_stream};
use llmchain::provider::{DecoderConfig, EventBatch, Format, StreamEvent};
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

/// The same body decoded with and without `join_fragments`, fed `cut` bytes at a time:
/// the same message, the same fragments in the same order, and with joining, no more
/// events (the fast paths report a run of a call's fragments as one).
fn decode_both(format: Format, body: &[u8], cut: usize) -> (usize, usize) {
    let run = |join: bool| {
        let config = DecoderConfig {
            join_fragments: join,
            ..DecoderConfig::default()
        };
        let mut dec = format.codec().stream_decoder(config);
        let mut events = Vec::new();
        for c in body.chunks(cut) {
            dec.feed(c, &mut |e| events.push(e.into_owned())).unwrap();
        }
        let out = dec.finish(&mut |e| events.push(e.into_owned())).unwrap();
        (events, out.message)
    };
    let (plain, m1) = run(false);
    let (joined, m2) = run(true);
    assert_eq!(m1, m2, "{format:?} cut {cut}");
    assert_eq!(atoms(&joined), atoms(&plain), "{format:?} cut {cut}");
    assert!(joined.len() <= plain.len());
    (plain.len(), joined.len())
}

#[test]
fn joined_fragments_decode_to_the_same_message_and_text() {
    let args = format!(
        "{{\"path\": \"a.rs\", \"content\": \"{}\"}}",
        "fn main() {}\\n".repeat(400)
    );
    for format in [Format::OPENAI_CHAT, Format::ANTHROPIC] {
        let mut script = ResponseScript::tool_call("c1", "write_file", &args)
            .with_call("c2", "write_file", &args)
            .with_text("Writing.");
        script.fragment_bytes = 8;
        let body = render_stream(format, &script).unwrap();
        for cut in [1, 7, 300, 4096, 16 << 10, body.len()] {
            let (plain, joined) = decode_both(format, &body, cut);
            if cut >= 4096 {
                assert!(
                    joined * 5 < plain,
                    "{format:?} cut {cut}: {joined} of {plain}"
                );
            }
        }
    }
}

proptest! {
    #[test]
    fn joining_is_invisible_at_any_cut(cut in 1usize..2000, frag in 1usize..20) {
        let args = format!("{{\"q\": \"{}\"}}", "é\\\"x".repeat(200));
        for format in [Format::OPENAI_CHAT, Format::ANTHROPIC] {
            let mut script = ResponseScript::tool_call("c1", "search", &args);
            script.fragment_bytes = frag;
            let body = render_stream(format, &script).unwrap();
            decode_both(format, &body, cut);
        }
    }
}
