#![no_main]
//! The ollama stream decoder on arbitrary bytes: no panic, and the same result for every
//! chunking.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    llmchain_fuzz_providers::run(&llmchain::provider::OllamaCodec, data);
});
