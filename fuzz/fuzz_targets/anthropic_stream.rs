//! The anthropic stream decoder on arbitrary bytes, through the one driver
//! (`llmchain_fuzz::stream_decoder`): no panic, the argument cap holds, and the whole
//! body, a fuzzer-chosen split, byte-by-byte feeds and joined fragments all read alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::provider::Format;

fuzz_target!(|data: &[u8]| llmchain_fuzz::stream_decoder(Format::ANTHROPIC, data));
