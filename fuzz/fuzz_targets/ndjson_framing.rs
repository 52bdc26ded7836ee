#![no_main]
//! The NDJSON framer on arbitrary bytes: no panic, and the same lines for every chunking.

use libfuzzer_sys::fuzz_target;
use llmchain::provider::framing::NdjsonFramer;

fn lines(body: &[u8], size: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut f = NdjsonFramer::new(1 << 12);
    let mut out = Vec::new();
    let mut cb = |l: &[u8]| {
        out.push(l.to_vec());
        Ok(())
    };
    for chunk in body.chunks(size.max(1)) {
        f.feed(chunk, &mut cb).map_err(|e| e.to_string())?;
    }
    f.finish(&mut cb).map_err(|e| e.to_string())?;
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let size = usize::from(first % 16) + 1;
    let whole = lines(body, body.len());
    let chunked = lines(body, size);
    assert_eq!(whole, chunked);
    if let Ok(ls) = whole {
        for l in ls {
            assert!(!l.contains(&b'\n'));
            assert!(l.len() <= 1 << 12);
        }
    }
});
