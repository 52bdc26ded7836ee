//! The SSE framer on arbitrary bytes: never panics, stays within its cap, and gives the
//! same events for the whole input, a split at a fuzzer-chosen point, and 1-byte feeds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llmchain::provider::framing::SseFramer;

type Events = Vec<(Option<String>, Vec<u8>)>;

fn frame(chunks: &[&[u8]]) -> Result<Events, String> {
    let mut f = SseFramer::new(4096);
    let mut out = Vec::new();
    let mut cb = |e: llmchain::provider::framing::SseEvent<'_>| {
        assert!(e.data.len() <= 4096);
        out.push((e.event.map(str::to_owned), e.data.to_vec()));
        Ok(())
    };
    for c in chunks {
        f.feed(c, &mut cb).map_err(|e| e.to_string())?;
    }
    f.finish(&mut cb).map_err(|e| e.to_string())?;
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let (cut, body) = match data.split_first() {
        Some((c, rest)) => (*c as usize, rest),
        None => return,
    };
    let whole = frame(&[body]);
    let at = cut.min(body.len());
    let split = frame(&[&body[..at], &body[at..]]);
    assert_eq!(whole, split);
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(whole, frame(&bytes));
});
