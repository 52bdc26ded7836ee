//! Fragment input: the input is a sequence of `length byte, bytes…` records, so
//! the fuzzer controls both the content and where it is cut.

/// Splits `data` into fragments; each is preceded by one length byte (taken mod 32).
pub fn fragments(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let n = (data[i] % 32) as usize;
        i += 1;
        let end = (i + n).min(data.len());
        out.push(&data[i..end]);
        i = end;
    }
    out
}
