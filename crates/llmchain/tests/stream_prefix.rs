//! `Codec::is_stream_prefix` (what lets `llmchain decode` read a body as it arrives): once
//! a prefix tells, it agrees with `is_stream_body` on the whole body, for every prefix of
//! every fixture and of arbitrary bodies.

use std::path::Path;

use llmchain::provider::Format;
use proptest::prelude::*;

fn check(body: &[u8]) -> Result<(), String> {
    for &format in Format::ALL {
        let c = format.codec();
        let whole = c.is_stream_body(body);
        for end in 0..=body.len() {
            if let Some(said) = c.is_stream_prefix(&body[..end])
                && said != whole
            {
                return Err(format!(
                    "{format}: the prefix of {end} bytes says streamed={said}, the whole body {whole}: {:?}",
                    String::from_utf8_lossy(body)
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn every_prefix_of_every_fixture_agrees_with_the_whole_body() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut n = 0;
    let mut pending = vec![root];
    while let Some(dir) = pending.pop() {
        for file in std::fs::read_dir(dir).unwrap() {
            let path = file.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let body = std::fs::read(&path).unwrap();
            // Every prefix of small bodies; the first 4 KiB of large ones.
            check(&body[..body.len().min(4096)]).unwrap();
            check(&body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            n += 1;
        }
    }
    assert!(n > 40, "only {n} fixtures found");
}

#[test]
fn the_bom_and_an_unfinished_document_cannot_tell() {
    let ollama = Format::OLLAMA.codec();
    let chat = Format::OPENAI_CHAT.codec();
    for c in [ollama, chat] {
        assert_eq!(c.is_stream_prefix(b""), None);
        assert_eq!(c.is_stream_prefix(b" \n"), None);
    }
    // SSE formats skip a byte-order mark; Ollama's JSON check does not (a BOM makes the
    // body not one JSON document, so it is read as NDJSON).
    assert_eq!(chat.is_stream_prefix(b"\xEF\xBB"), None);
    assert_eq!(ollama.is_stream_prefix(b"\xEF\xBB"), Some(true));
    assert_eq!(chat.is_stream_prefix(b"\xEF\xBB\xBF{"), Some(false));
    assert_eq!(chat.is_stream_prefix(b"data: {"), Some(true));
    assert_eq!(
        ollama.is_stream_prefix(b"{\"message\":{\"content\":\"a"),
        None
    );
    assert_eq!(ollama.is_stream_prefix(b"{\"done\":false}"), None);
    assert_eq!(ollama.is_stream_prefix(b"{\"done\":false}\n{"), Some(true));
    assert_eq!(ollama.is_stream_prefix(b"{\"done\":false}\n \n"), None);
    assert_eq!(ollama.is_stream_prefix(b"{]"), Some(true));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bodies(body in proptest::collection::vec(
        prop_oneof![
            Just(b'{'), Just(b'}'), Just(b'['), Just(b']'), Just(b'"'), Just(b'\n'),
            Just(b' '), Just(b':'), Just(b','), Just(b'1'), Just(b'a'), Just(0xEF),
            Just(0xBB), Just(0xBF), any::<u8>(),
        ],
        0..48,
    )) {
        check(&body).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn ndjson_like_bodies(lines in proptest::collection::vec("[{}\\[\\]\":a1 ,]{0,12}", 0..5)) {
        let body = lines.join("\n");
        check(body.as_bytes()).map_err(TestCaseError::fail)?;
    }
}
