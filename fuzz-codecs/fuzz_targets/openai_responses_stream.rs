//! The openai_responses_stream decoder on arbitrary bytes: never panics, and gives the same outcome and
//! the same events for the whole body, a fuzzer-chosen split and 1-byte feeds. A small
//! argument cap checks that hostile input cannot grow a call without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::provider::{DecoderConfig, Format, StreamEvent};

fn run(chunks: &[&[u8]]) -> (Result<String, String>, Vec<String>) {
    let config = DecoderConfig {
        max_argument_bytes: 1024,
        max_line_bytes: 8192,
        // Events are compared one by one across chunkings.
        join_fragments: false,
    };
    let mut dec = Format::OpenAiResponses.codec().stream_decoder(config);
    let mut events = Vec::new();
    let mut args = std::collections::BTreeMap::<u32, String>::new();
    let mut text = std::collections::BTreeMap::<usize, String>::new();
    {
        let mut cb = |e: StreamEvent<'_>| match e {
            StreamEvent::ToolCallArguments { index, fragment } => {
                args.entry(index).or_default().push_str(&fragment)
            }
            StreamEvent::TextDelta { index, text: t }
            | StreamEvent::ReasoningDelta { index, text: t } => {
                text.entry(index).or_default().push_str(&t)
            }
            other => events.push(format!("{other:?}")),
        };
        for c in chunks {
            if let Err(e) = dec.feed(c, &mut cb) {
                return (Err(e.to_string()), events);
            }
        }
        let out = dec.finish(&mut cb);
        for a in args.values() {
            assert!(a.len() <= 1024);
        }
        events.push(format!("{args:?}{text:?}"));
        return (
            out.map(|o| format!("{o:?}")).map_err(|e| e.to_string()),
            events,
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let (cut, body) = match data.split_first() {
        Some((c, rest)) => (*c as usize, rest),
        None => return,
    };
    let whole = run(&[body]);
    let at = cut.min(body.len());
    assert_eq!(whole, run(&[&body[..at], &body[at..]]));
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(whole, run(&bytes));
});
