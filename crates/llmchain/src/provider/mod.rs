//! Provider wire formats: pure codecs (no I/O) for each format.
//!
//! Each format has a request encoder ([`Codec::encode`]), a streaming decoder fed
//! arbitrary byte chunks ([`Codec::stream_decoder`]) and a non-streaming decoder
//! ([`Codec::decode_response`]). Decoding never depends on how bytes are chunked.

mod error;
mod event;
mod format;
mod outcome;
pub mod preview;

pub use error::{DecodeError, EncodeError};
pub use event::{StopReason, StreamEvent};
pub use format::{Codec, DecoderConfig, Format, RequestOptions, StreamDecoder};
pub use outcome::{
    DecodeOutcome, DecodeReport, ProviderError, ReportIncompleteCall, ReportToolCall,
};
