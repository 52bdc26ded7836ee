#![no_main]
//! Text from outside (an error message, a stored record, a URL a user typed) through the
//! one URL redaction: `llmchain::redact::url` and `urls_in`.
//!
//! Checks: no panic on any input (UTF-8 boundaries, `://` anywhere, `@`, `?`, `#`);
//! both are idempotent (a redacted text redacts to itself); and a password planted in a
//! URL's userinfo never survives `urls_in`.

use libfuzzer_sys::fuzz_target;
use llmchain::redact;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = redact::urls_in(&text);
    assert_eq!(redact::urls_in(&once), once);
    let url = redact::url(&text);
    assert_eq!(redact::url(&url), url);
    // A secret in the userinfo of a URL spliced into the text never comes out.
    let secret = "Zq9SECRETpw7";
    if !text.contains(secret) {
        let planted = format!("{text} http://user:{secret}@h/p {text}");
        assert!(!redact::urls_in(&planted).contains(secret), "{planted:?}");
    }
});
