//! Every built-in codec passes the public conformance suite
//! (`llmchain::provider::conformance`), as a codec written elsewhere must.

use llmchain::provider::Format;
use llmchain::provider::conformance;
use llmchain::provider::render::render_stream;

#[test]
fn every_built_in_codec_conforms() {
    for &format in Format::ALL {
        if let Err(e) = conformance::check_codec(format.codec(), &|s| render_stream(format, s)) {
            panic!("{format}: {e}");
        }
    }
}
