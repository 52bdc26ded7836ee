//! Arbitrary bytes as the conversation file of `llmchain encode`: the same steps the CLI
//! takes (UTF-8 check, `Conversation::from_json`, `Codec::encode` for every format,
//! streamed and not). Never panics; a load error names a path; every body encoded is a
//! JSON object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::conversation::Conversation;
use llmchain::provider::{Format, RequestOptions};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let conv = match Conversation::from_json(text) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.path.is_empty() && !e.message.is_empty());
            return;
        }
    };
    for &format in Format::ALL {
        for stream in [false, true] {
            let opts = RequestOptions {
                model: "m".into(),
                stream,
                ..RequestOptions::default()
            };
            match format.codec().encode(&conv, &opts) {
                Ok(body) => {
                    let v: Value = serde_json::from_slice(&body)
                        .unwrap_or_else(|e| panic!("{format} body is not JSON: {e}"));
                    assert!(v.is_object(), "{format} body is not an object");
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
});
