#![no_main]
//! The schema rewrites (Gemini, OpenAI strict, Anthropic closed) under an output-size
//! oracle: see `llmchain_fuzz::schema_rewrites`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| llmchain_fuzz::schema_rewrites(data));
