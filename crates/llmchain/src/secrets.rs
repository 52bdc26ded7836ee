//! The process's one secret masker, as CI systems mask secrets in their logs: every
//! secret the process holds is registered here as it comes in, and every string that is
//! stored, printed or logged passes through [`mask`] on its way out.
//!
//! What registers itself: every API key and credential wrapped in an
//! [`ApiKey`](crate::http::ApiKey) (keys from the environment, the key store or a
//! config; AWS secret keys and session tokens), every bearer token fetched at run time
//! (an OAuth token of a Google service account, an Azure Entra token, any
//! `TokenSource`'s), and the secret parts of URLs ([`register_url`]: userinfo passwords,
//! secret query values). What masks: provider and transport errors as they are made
//! (`llmchain::http`), a run's last error as the store keeps it (`llmchain-store`), the
//! CLI's messages and logs and a served chat's error chunks.
//!
//! A provider that echoes a credential (the request line of a wrong path, with its
//! `?api-key=`; a token it refused) so never gets it into a terminal, a log or a
//! database. Strings shorter than [`MIN_LEN`] are not registered: masking every `"1234"`
//! would mangle text for no gain.
//!
//! Each secret is also masked in the forms a provider or a library may echo it in:
//! percent-encoded (either hex case), form-encoded, JSON-escaped and in base64 (standard
//! and URL-safe, whole and inside a longer base64 text such as `Basic user:KEY`). A value
//! registered from a URL or a header is registered decoded too ([`register_encoded`]).
//!
//! The forms are searched in one pass with an Aho-Corasick automaton (`aho-corasick`,
//! built again only when a secret is registered); `base64` and `percent-encoding` write
//! the forms.

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The shortest secret registered.
pub const MIN_LEN: usize = 8;

/// What replaces a secret.
pub const MASK: &str = "***";

/// The most secrets kept (a process that fetches a token every few minutes for days
/// keeps the newest ones).
const MAX_SECRETS: usize = 256;

/// RFC 3986's unreserved characters stay; everything else is percent-encoded.
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `application/x-www-form-urlencoded`'s set (a space becomes `+` besides).
const FORM: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'*')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_');

/// The registered secrets (oldest first) and the automaton over all their forms.
struct Known {
    secrets: Vec<String>,
    forms: Vec<String>,
    automaton: Option<Arc<AhoCorasick>>,
}

static KNOWN: RwLock<Known> = RwLock::new(Known {
    secrets: Vec::new(),
    forms: Vec::new(),
    automaton: None,
});

/// Registers `secret`: from now on [`mask`] hides it, in every form it may be echoed in.
/// Shorter than [`MIN_LEN`], or registered already: nothing changes.
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_LEN {
        return;
    }
    let has = |k: &Known| k.secrets.iter().any(|s| s == secret);
    if has(&KNOWN.read().unwrap_or_else(|p| p.into_inner())) {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    if has(&known) {
        return;
    }
    if known.secrets.len() >= MAX_SECRETS {
        // The oldest goes.
        known.secrets.remove(0);
    }
    known.secrets.push(secret.to_owned());
    let mut forms: Vec<String> = known.secrets.iter().flat_map(|s| forms_of(s)).collect();
    // The longest first: a secret that contains another is masked whole.
    forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    forms.dedup();
    known.automaton = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&forms)
        .ok()
        .map(Arc::new);
    known.forms = forms;
}

/// Registers `value` as it is and, when it is percent- or form-encoded (a URL's password
/// or query value, an OTLP header's value), decoded as well.
pub fn register_encoded(value: &str) {
    register(value);
    for plus_is_space in [false, true] {
        let text = if plus_is_space {
            Cow::Owned(value.replace('+', " "))
        } else {
            Cow::Borrowed(value)
        };
        if let Ok(decoded) = percent_encoding::percent_decode_str(&text).decode_utf8()
            && decoded != value
        {
            register(&decoded);
        }
    }
}

/// A secret as it is and as it may be echoed: percent-encoded (both hex cases),
/// form-encoded, JSON-escaped, and in base64 (standard and URL-safe): whole, and the run
/// of characters that stays the same at each of the three byte offsets inside a longer
/// base64 text.
fn forms_of(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_owned()];
    let percent = utf8_percent_encode(secret, URI_COMPONENT).to_string();
    out.push(lower_hex(&percent));
    out.push(percent);
    let form = utf8_percent_encode(secret, FORM)
        .to_string()
        .replace("%20", "+");
    out.push(lower_hex(&form));
    out.push(form);
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json
        .strip_prefix('"')
        .and_then(|j| j.strip_suffix('"'))
        .unwrap_or(&json);
    out.push(json.replace('/', "\\/"));
    out.push(json.to_owned());
    let engines = [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    ];
    for engine in engines {
        out.push(engine.encode(secret));
        for shift in 0..3 {
            let mut bytes = vec![0u8; shift];
            bytes.extend_from_slice(secret.as_bytes());
            let encoded = engine.encode(&bytes);
            // The characters that depend on the secret's bytes only.
            let from = (8 * shift).div_ceil(6);
            let to = 8 * bytes.len() / 6;
            if let Some(core) = encoded.get(from..to) {
                out.push(core.to_owned());
            }
        }
    }
    out.retain(|f| f.len() >= MIN_LEN);
    out
}

/// `%2F` → `%2f`.
fn lower_hex(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut hex_left = 0;
    for c in encoded.chars() {
        if hex_left > 0 {
            out.push(c.to_ascii_lowercase());
            hex_left -= 1;
        } else {
            if c == '%' {
                hex_left = 2;
            }
            out.push(c);
        }
    }
    out
}

/// Registers the secret parts of `url`: its userinfo password and the values of its
/// secret query parameters ([`redact::is_secret_query`](crate::redact::is_secret_query)),
/// as written and decoded.
pub fn register_url(url: &str) {
    let Some((_, rest)) = url.split_once("://") else {
        return;
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some((userinfo, _)) = rest[..authority_end].rsplit_once('@') {
        let password = userinfo.split_once(':').map_or(userinfo, |(_, p)| p);
        register_encoded(password);
    }
    if let Some((_, query)) = rest.split_once('?') {
        let query = query.split_once('#').map_or(query, |(q, _)| q);
        for (key, value) in query.split('&').filter_map(|p| p.split_once('=')) {
            if crate::redact::is_secret_query(key) {
                register_encoded(value);
            }
        }
    }
}

/// Whether `bytes` hold a registered secret in any of its forms.
pub fn found_in(bytes: &[u8]) -> bool {
    automaton().is_some_and(|a| a.is_match(bytes))
}

fn automaton() -> Option<Arc<AhoCorasick>> {
    KNOWN
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .automaton
        .clone()
}

/// `text` with every registered secret replaced by [`MASK`] (borrowed as it is when it
/// holds none).
///
/// ```
/// use llmchain::secrets;
/// secrets::register("sk-doc-example-0123456789");
/// assert_eq!(
///     secrets::mask("Invalid URL (POST /v2/chat?api-key=sk-doc-example-0123456789)"),
///     "Invalid URL (POST /v2/chat?api-key=***)"
/// );
/// assert_eq!(secrets::mask("nothing here"), "nothing here");
/// ```
pub fn mask(text: &str) -> Cow<'_, str> {
    let Some(automaton) = automaton() else {
        return Cow::Borrowed(text);
    };
    if !automaton.is_match(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    automaton.replace_all_with(text, &mut out, |_, _, dst| {
        dst.push_str(MASK);
        true
    });
    Cow::Owned(out)
}

/// [`mask`], owned.
pub fn masked(text: impl Into<String>) -> String {
    let text = text.into();
    match mask(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(m) => m,
    }
}

/// [`mask`] over text that arrives in pieces (a streamed answer): the tail of each piece
/// that could begin a secret is held back until the next piece or [`StreamMask::finish`],
/// so a secret split across pieces is masked too.
#[derive(Debug, Default)]
pub struct StreamMask {
    held: String,
}

impl StreamMask {
    /// What may be shown of the text so far, masked.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        let mut text = masked(std::mem::take(&mut self.held));
        let keep = held_back(&text);
        self.held = text.split_off(text.len() - keep);
        text
    }

    /// The rest, masked: the text has ended.
    pub fn finish(&mut self) -> String {
        masked(std::mem::take(&mut self.held))
    }
}

/// The length of the longest tail of `text` that is the start of a secret's form.
fn held_back(text: &str) -> usize {
    let known = KNOWN.read().unwrap_or_else(|p| p.into_inner());
    let mut keep = 0;
    for form in &known.forms {
        let longest = (form.len() - 1).min(text.len());
        for n in (keep + 1..=longest).rev() {
            let at = text.len() - n;
            if text.is_char_boundary(at) && form.starts_with(&text[at..]) {
                keep = n;
                break;
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_masked_wherever_they_appear() {
        register("tok-test-abcdefgh");
        register("tok-test-abcdefgh-longer");
        register("short");
        let text = "a tok-test-abcdefgh-longer b tok-test-abcdefgh c short";
        assert_eq!(mask(text), "a *** b *** c short");
        assert!(matches!(mask("clean"), Cow::Borrowed(_)));
    }

    #[test]
    fn encoded_forms_of_a_secret_are_masked() {
        register("sk-SECRET/KEY+123==");
        for echoed in [
            "sk-SECRET%2FKEY%2B123%3D%3D",
            "sk-SECRET%2fKEY%2b123%3d%3d",
            "c2stU0VDUkVUL0tFWSsxMjM9PQ==",
            // `Basic user:KEY`: the key inside a longer base64 text.
            "dXNlcjpzay1TRUNSRVQvS0VZKzEyMz09",
            "sk-SECRET\\/KEY+123==",
        ] {
            let text = format!("the provider said: {echoed} is wrong");
            let shown = mask(&text);
            assert!(!shown.contains(echoed), "{echoed} survived: {shown}");
            assert!(shown.contains("***"), "{shown}");
        }
        register("form secret value 42");
        assert_eq!(mask("q=form+secret+value+42&x"), "q=***&x");
    }

    #[test]
    fn a_decoded_url_secret_is_masked() {
        register_url("https://h/v1?api-key=sk-url%2Fencoded%2Bkey%3D");
        assert_eq!(mask("echo sk-url/encoded+key= end"), "echo *** end");
        assert_eq!(mask("echo sk-url%2Fencoded%2Bkey%3D end"), "echo *** end");
    }

    #[test]
    fn a_secret_split_across_pieces_is_masked() {
        register("tok-stream-0123456789");
        let mut m = StreamMask::default();
        let mut shown = String::new();
        for piece in ["the key is tok-str", "eam-01234", "56789 and ", "more tok-"] {
            shown.push_str(&m.push(piece));
        }
        shown.push_str(&m.finish());
        assert_eq!(shown, "the key is *** and more tok-");
    }

    #[test]
    fn url_secrets_are_registered() {
        register_url(
            "https://user:pw-test-9876543210@host/v1?api-key=key-test-13572468&alt=sse&version=2024-01-01",
        );
        assert_eq!(
            mask("echo: pw-test-9876543210 key-test-13572468 2024-01-01"),
            "echo: *** *** 2024-01-01"
        );
    }
}
