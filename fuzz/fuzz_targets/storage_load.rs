//! Arbitrary bytes as a storage document: never panics; an error names a path; what
//! loads writes back and loads again to the same document.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::conversation::Conversation;
use llmchain::message::Message;
use llmchain::storage_format;

fuzz_target!(|data: &[u8]| {
    match storage_format::from_slice::<Conversation>(data) {
        Ok(c) => {
            let text = serde_json::to_string(&c).expect("a loaded conversation serializes");
            let back: Conversation =
                storage_format::from_str(&text).expect("a written conversation loads");
            assert_eq!(serde_json::to_string(&back).unwrap(), text);
        }
        Err(e) => assert!(!e.path.is_empty() && !e.message.is_empty()),
    }
    if let Ok(m) = storage_format::from_slice::<Message>(data) {
        let text = serde_json::to_string(&m).unwrap();
        let back: Message = storage_format::from_str(&text).expect("a written message loads");
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        let _ = back.validate();
    }
});
