//! What a browser page elsewhere could make the server do, refused before any route
//! runs (the outermost layer of [`ChatServer::router`](crate::ChatServer::router)):
//!
//! - **A foreign `Host:`** (DNS rebinding: a page of `attacker.example`, its name
//!   resolved to 127.0.0.1, reading chats and deciding calls as a same-origin page):
//!   only the loopback names and [`ServeConfig::allowed_hosts`](crate::ServeConfig) are
//!   answered.
//! - **A request that changes something from another origin** (CSRF: a form or a
//!   `text/plain` fetch needs no preflight): a `POST` must be `application/json` (which a
//!   page elsewhere cannot send without a preflight that CORS refuses) and, when the
//!   browser names its `Origin`, come from the server's own origin or a configured CORS
//!   origin. Clients that are not browsers send no `Origin` and are not concerned.
//! - **Framing** (clickjacking the approval buttons): every answer carries
//!   `X-Frame-Options: DENY` and `frame-ancestors 'none'`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ServeConfig;

/// The loopback names every server answers.
const LOOPBACK: [&str; 4] = ["localhost", "127.0.0.1", "[::1]", "::1"];

/// The checks of one server.
pub(crate) struct Guard {
    hosts: Vec<String>,
    any_host: bool,
    origins: Vec<String>,
}

impl Guard {
    pub(crate) fn new(config: &ServeConfig) -> Self {
        Guard {
            hosts: config
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.contains('*'))
                .collect(),
            any_host: config.allowed_hosts.iter().any(|h| h.trim() == "*"),
            origins: config
                .cors_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether a `Host:` value (its port aside) is allowed.
    fn host_allowed(&self, host: &str) -> bool {
        self.any_host || self.host_named(host)
    }

    /// Whether a `Host:` value is one of the server's own names (loopback or configured),
    /// not merely let in by `*`: only such a name makes a page's origin its own.
    fn host_named(&self, host: &str) -> bool {
        let name = host_name(host).to_ascii_lowercase();
        LOOPBACK.contains(&name.as_str()) || self.hosts.contains(&name)
    }

    /// Why a request that changes something is refused, if it is.
    fn refuses_change(&self, headers: &HeaderMap, host: &str) -> Option<(StatusCode, String)> {
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Some((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the request as JSON (content-type: application/json)".into(),
            ));
        }
        let origin = headers.get(header::ORIGIN)?;
        let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
        // The page's own origin is the host it was served from, when that host is one of
        // the server's names: with `--allow-host '*'` the request's Host is the
        // attacker's to choose (DNS rebinding), so it proves nothing.
        let own = self.host_named(host)
            && ["http", "https"]
                .iter()
                .any(|scheme| origin == format!("{scheme}://{}", host.to_ascii_lowercase()));
        if own || self.origins.contains(&origin) {
            return None;
        }
        Some((
            StatusCode::FORBIDDEN,
            format!(
                "a page of {} may not use this server: only its own page, or an origin given with --cors",
                quoted(&origin)
            ),
        ))
    }
}

/// A header's value as an error names it: quoted, at most 100 characters.
fn quoted(s: &str) -> String {
    format!("{:?}", s.chars().take(100).collect::<String>())
}

/// `host` without its port: `example.com:3000` → `example.com`, `[::1]:3000` → `[::1]`.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// The middleware: see the module's docs.
pub(crate) async fn guard(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()))
        .unwrap_or_default();
    let refused = if !guard.host_allowed(&host) {
        Some((
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "this server does not answer for the host {}; start it with --allow-host NAME to add one",
                quoted(&host)
            ),
        ))
    } else if !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        guard.refuses_change(request.headers(), &host)
    } else {
        None
    };
    let mut response = match refused {
        Some((status, message)) => crate::error(status, message),
        None => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static("frame-ancestors 'none'"));
    response.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str], origins: &[&str]) -> Guard {
        Guard::new(&ServeConfig {
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            cors_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..ServeConfig::default()
        })
    }

    #[test]
    fn hosts_are_loopback_or_named() {
        let g = guard(&["chat.example.com"], &[]);
        for ok in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:3000",
            "[::1]:3000",
            "LOCALHOST:1",
            "chat.example.com",
            "Chat.Example.com:443",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:3000",
            "127.0.0.1.nip.io:3000",
            "localhost.attacker.example",
            "",
            "10.0.0.5:3000",
        ] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
        assert!(guard(&["*"], &[]).host_allowed("anything.example:1"));
    }

    #[test]
    fn changes_are_json_from_the_own_origin_or_a_cors_one() {
        let g = guard(&[], &["https://app.example.com/"]);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        let host = "127.0.0.1:3000";
        // A client that is not a browser: JSON, no origin.
        assert!(
            g.refuses_change(&headers(&[("content-type", "application/json")]), host)
                .is_none()
        );
        assert!(
            g.refuses_change(
                &headers(&[("content-type", "application/json; charset=utf-8")]),
                host
            )
            .is_none()
        );
        // The page itself, and a configured origin.
        for origin in ["http://127.0.0.1:3000", "https://app.example.com"] {
            assert!(
                g.refuses_change(
                    &headers(&[("content-type", "application/json"), ("origin", origin)]),
                    host
                )
                .is_none(),
                "{origin}"
            );
        }
        // A simple request (no preflight) and a page elsewhere.
        let (status, _) = g
            .refuses_change(&headers(&[("content-type", "text/plain")]), host)
            .unwrap();
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(g.refuses_change(&HeaderMap::new(), host).is_some());
        for origin in ["https://attacker.example", "null", "http://127.0.0.1:3001"] {
            let (status, _) = g
                .refuses_change(
                    &headers(&[("content-type", "application/json"), ("origin", origin)]),
                    host,
                )
                .unwrap();
            assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
        }
    }

    #[test]
    fn a_wildcard_host_never_makes_a_foreign_origin_its_own() {
        // Round 5: with `--allow-host '*'`, Host and Origin both `attacker.example` were
        // taken for the server's own page.
        let g = guard(&["*"], &[]);
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert(
            "origin",
            HeaderValue::from_static("http://attacker.example"),
        );
        let (status, _) = g.refuses_change(&h, "attacker.example").unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN);
        h.insert("origin", HeaderValue::from_static("http://127.0.0.1:3000"));
        assert!(g.refuses_change(&h, "127.0.0.1:3000").is_none());
        // A named host's own page is still its own.
        let g = guard(&["*", "chat.example.com"], &[]);
        h.insert(
            "origin",
            HeaderValue::from_static("https://chat.example.com"),
        );
        assert!(g.refuses_change(&h, "chat.example.com").is_none());
        assert!(!g.hosts.iter().any(|h| h.contains('*')));
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("example.com:3000"), "example.com");
        assert_eq!(host_name("[::1]:3000"), "[::1]");
        assert_eq!(host_name("[::1]"), "[::1]");
        assert_eq!(host_name("example.com"), "example.com");
        assert_eq!(host_name("::1"), "::1");
    }
}
