//! Arbitrary fragments through `MessageDelta`: never panics; argument text of a call fed
//! only plain fragments is exactly their concatenation; a cancelled message never runs.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use llmchain::message::{
    ContentPart, DeltaStatus, MessageDelta, TokenUsage, ToolCall, ToolCallStatus,
};

fuzz_target!(|data: &[u8]| {
    let mut acc = MessageDelta::default().with_max_argument_bytes(1 << 12);
    // Per index: the concatenated plain fragments, and whether only those were sent.
    let mut expected: HashMap<Option<u32>, (String, bool)> = HashMap::new();
    for f in llmchain_fuzz::fragments(data) {
        let Some((&ctl, rest)) = f.split_first() else {
            continue;
        };
        let text = String::from_utf8_lossy(rest).into_owned();
        let index = match ctl & 3 {
            0 => None,
            n => Some(u32::from(n) - 1),
        };
        let delta = match (ctl >> 2) & 7 {
            0 => {
                let at = match ctl >> 5 {
                    7 => usize::MAX,
                    n => n as usize,
                };
                let part = if ctl & 1 == 0 {
                    ContentPart::text(text)
                } else {
                    ContentPart::thinking(text).with_option("signature", "s")
                };
                MessageDelta::content_fragment(at, part)
            }
            1 => {
                expected.entry(index).or_default().1 |= ctl & 0x80 != 0;
                MessageDelta::tool_call_fragment(ToolCall {
                    index,
                    call_id: Some(text.clone()),
                    name: Some(text),
                    // A header that repeats text arguments makes the call impure.
                    arguments: (ctl & 0x80 != 0).then(|| "x".into()),
                    ..Default::default()
                })
            }
            2 => {
                expected.entry(index).or_default().1 = true;
                let args = serde_json::from_str::<serde_json::Value>(&text)
                    .map(Into::into)
                    .ok();
                MessageDelta::tool_call_fragment(ToolCall {
                    index,
                    status: ToolCallStatus::Complete,
                    arguments: args,
                    ..Default::default()
                })
            }
            3 => MessageDelta::status_fragment(if ctl & 0x80 == 0 {
                DeltaStatus::Complete
            } else {
                DeltaStatus::Length
            }),
            4 => MessageDelta::usage_fragment(TokenUsage::new(u64::MAX, rest.len() as u64)),
            _ => {
                let call = ToolCall {
                    index,
                    arguments: Some(text.as_str().into()),
                    ..Default::default()
                };
                if acc
                    .clone()
                    .merge(MessageDelta::tool_call_fragment(call.clone()))
                    .is_ok()
                {
                    expected.entry(index).or_default().0.push_str(&text);
                }
                MessageDelta::tool_call_fragment(call)
            }
        };
        let _ = acc.merge(delta);
    }
    for call in &acc.tool_calls {
        if let Some((concat, impure)) = expected.get(&call.index)
            && !impure
        {
            assert_eq!(call.raw_arguments().unwrap_or(""), concat.as_str());
        }
    }
    if let Ok(done) = acc.clone().to_message() {
        for bad in &done.invalid_tool_calls {
            assert!(!done.message.tool_calls[bad.position].is_complete());
        }
    }
    let cancelled = acc.cancel(Some("fuzz".into()));
    assert!(!cancelled.is_tool_call());
});
