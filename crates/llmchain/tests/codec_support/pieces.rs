//! Generated streams for the fast-path tests: the pieces a stream is written from.

use proptest::prelude::*;

/// One piece of a generated stream; each test writes it in its format.
#[derive(Debug, Clone)]
pub(crate) enum Piece {
    /// An argument fragment for call or block `index`, written in the format's
    /// `variant` way (the test decides which variants keep the fast shape).
    Fragment {
        index: u8,
        text: String,
        variant: u8,
    },
    /// Something between events (a comment, a ping, a blank line, an ignored field).
    Noise(u8),
}

/// Fragment text: mostly plain ASCII (JSON punctuation included), some escapes,
/// some non-ASCII, sometimes empty.
pub(crate) fn fragment_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z0-9 {}:,]{0,12}",
        1 => "[a-z\"\\\\/\n\t]{1,6}",
        1 => "[a-zé€😀]{1,4}",
        1 => Just(String::new()),
    ]
}

/// Pieces with indices below `indices` and variants below `variants`, mostly
/// fragments (so that runs form).
pub(crate) fn piece(indices: u8, variants: u8) -> impl Strategy<Value = Piece> {
    prop_oneof![
        12 => (0..indices, fragment_text(), 0..variants)
            .prop_map(|(index, text, variant)| Piece::Fragment { index, text, variant }),
        1 => (0u8..3).prop_map(Piece::Noise),
    ]
}
