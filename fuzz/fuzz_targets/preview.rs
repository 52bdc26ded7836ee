//! Arbitrary fragments through the argument preview reader: never panics, accepts
//! exactly what serde_json accepts, and ends with the value serde_json parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::provider::preview::{ArgumentPreview, PreviewEvent};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let frags = llmchain_fuzz::fragments(data);
    let whole: Vec<u8> = frags.concat();
    let mut p = ArgumentPreview::new();
    let mut events = Vec::new();
    for (i, f) in frags.iter().enumerate() {
        p.feed_bytes(f, &mut events);
        if i % 4 == 0 {
            let _ = p.preview();
        }
    }
    events.extend(p.finish());
    let errors = events
        .iter()
        .filter(|e| matches!(e, PreviewEvent::Error(_)))
        .count();
    assert!(errors <= 1);
    match serde_json::from_slice::<Value>(&whole) {
        Ok(v) => {
            assert!(p.is_done(), "{:?}", p.error());
            assert_eq!(p.preview(), Some(v));
        }
        Err(_) => assert!(p.error().is_some(), "accepted invalid JSON"),
    }
});
