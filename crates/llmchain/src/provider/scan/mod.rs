//! The byte scans behind the fast paths of the OpenAI Chat and Anthropic stream
//! decoders, and the only place they live: the framer, the [`Assembler`] and `message`
//! know nothing of them.
//!
//! - [`json`]: strict JSON reading of known shapes in place ([`json::Cursor`]), the
//!   unescaping of argument fragments, and the parse of finished argument text. The
//!   crate's only `unsafe` is here.
//! - [`fragment_run`]: runs of argument-fragment events taken from a stream's raw bytes
//!   between events ([`EventHandler::raw_events`]).
//!
//! Every scan declines what it does not know (returns `None`), and the decoder's full
//! serde path decides; each is tested against that path (`tests/*_fast_path.rs`, the
//! parity property tests) and fuzzed (`fuzz/`).
//!
//! [`Assembler`]: super::assembly::Assembler
//! [`EventHandler::raw_events`]: super::framed::EventHandler::raw_events

pub(crate) mod fragment_run;
pub(crate) mod json;
