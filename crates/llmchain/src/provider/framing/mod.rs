//! Byte-stream framing shared by the streaming decoders: Server-Sent Events
//! ([`SseFramer`]), newline-delimited JSON ([`NdjsonFramer`]) and AWS event-stream
//! frames ([`EventStreamFramer`]).
//!
//! Both are fed arbitrary byte chunks and call back once per complete event or line. The
//! bytes handed to the callback borrow from the fed chunk when the event lies wholly
//! inside it (the common case), and from the framer's buffer otherwise, so framing does
//! not allocate per event.
//!
//! Hand-written rather than taken from a crate: the SSE crates on crates.io are tied to
//! an HTTP client or an async runtime, and these framers must be pure, chunking-independent
//! and zero-copy for the decode hot path.

mod eventstream;
mod ndjson;
mod sse;

pub use eventstream::{EventStreamFramer, Frame, encode_frame};
pub use ndjson::NdjsonFramer;
pub use sse::{SseEvent, SseFramer};
