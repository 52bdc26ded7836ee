//! Arbitrary text as tool arguments: `arguments_as_map` never fails and agrees with
//! serde_json; `complete` succeeds exactly for object (or blank) text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::message::{INVALID_JSON, NOT_AN_OBJECT, ToolCall};
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let call = ToolCall {
        call_id: Some("call_1".into()),
        name: Some("tool".into()),
        arguments: Some(text.into()),
        ..Default::default()
    };
    let map = call.arguments_as_map();
    let blank = text.trim().is_empty();
    let parsed = serde_json::from_str::<Map<String, Value>>(text);
    match &parsed {
        Ok(m) => assert_eq!(&map, m),
        Err(_) => assert!(map.is_empty()),
    }
    match call.clone().complete() {
        Ok(done) => {
            assert!(done.is_complete());
            assert!(parsed.is_ok() || blank);
            assert_eq!(done.arguments_as_map(), map);
        }
        Err(e) => {
            assert!(parsed.is_err() && !blank);
            let msgs = e.messages_for("arguments");
            assert_eq!(msgs.len(), 1);
            assert!(msgs[0] == INVALID_JSON || msgs[0] == NOT_AN_OBJECT);
            assert_eq!(
                msgs[0] == NOT_AN_OBJECT,
                serde_json::from_str::<Value>(text).is_ok()
            );
        }
    }
    // Arguments given as any JSON value.
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        let is_object = v.is_object();
        let c = ToolCall {
            call_id: Some("c".into()),
            name: Some("n".into()),
            arguments: Some(v.into()),
            ..Default::default()
        };
        let _ = c.arguments_as_map();
        if is_object {
            assert!(c.complete().is_ok());
        }
    }
});
