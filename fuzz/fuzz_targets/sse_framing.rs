//! The SSE framer on arbitrary bytes: never panics, stays within its cap, and gives the
//! same events for the whole input, a split at a fuzzer-chosen point, 1-byte feeds, and
//! event-at-a-time framing (`feed_event`: at most one event a call, never stalling).
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

/// The body framed one event at a time.
fn frame_by_event(body: &[u8]) -> Result<Events, String> {
    let mut f = SseFramer::new(4096);
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let before = out.len();
        let n = f
            .feed_event(rest, &mut |e| {
                out.push((e.event.map(str::to_owned), e.data.to_vec()));
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        assert!(n > 0 && n <= rest.len(), "framed {n} of {} bytes", rest.len());
        assert!(out.len() - before <= 1, "more than one event in one call");
        rest = &rest[n..];
    }
    f.finish(&mut |e| {
        out.push((e.event.map(str::to_owned), e.data.to_vec()));
        Ok(())
    })
    .map_err(|e| e.to_string())?;
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
    assert_eq!(whole, frame_by_event(body));
});
