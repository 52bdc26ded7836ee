//! A run's trace context: the W3C `traceparent` of whoever started it, kept in the run's
//! state (`extra.trace.traceparent`), so that every attempt of the run — a worker that
//! claims it, one that resumes it after a review or after another died — opens its spans
//! in that trace, as children of that span ([`LeasedRun`](crate::LeasedRun) does).
//!
//! The `traceparent` is parsed here rather than through the SDK's propagator: it is one
//! fixed 55-character format (`00-{trace id}-{span id}-{flags}`), and the store stays on
//! the OpenTelemetry API crate alone.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use serde_json::json;

use crate::model::RunState;

/// Where a run's state keeps its trace context.
pub const TRACE_KEY: &str = "trace";

/// The `traceparent` a run's state keeps, if it is a well-formed one.
pub fn traceparent(state: &RunState) -> Option<&str> {
    state
        .extra
        .get(TRACE_KEY)?
        .get("traceparent")?
        .as_str()
        .filter(|t| parse(t).is_some())
}

/// Keeps `traceparent` in `state` (refused when it is not a well-formed one).
pub fn keep(state: &mut RunState, traceparent: &str) -> bool {
    if parse(traceparent).is_none() {
        return false;
    }
    state
        .extra
        .insert(TRACE_KEY.into(), json!({"traceparent": traceparent}));
    true
}

/// The remote span context of a `traceparent` (`00-{32 hex}-{16 hex}-{2 hex}`, not all
/// zeros), or `None`.
pub fn parse(traceparent: &str) -> Option<SpanContext> {
    let t = traceparent;
    if t.len() != 55 {
        return None;
    }
    let mut parts = t.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || version != "00" || trace.len() != 32 || span.len() != 16 {
        return None;
    }
    let hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !hex(trace) || !hex(span) || !hex(flags) {
        return None;
    }
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// The `traceparent` of the current `tracing` span, when an OpenTelemetry layer gives
/// it a valid context.
pub fn current() -> Option<String> {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let context = tracing::Span::current().context();
    let span = context.span();
    let c = span.span_context();
    c.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            c.trace_id(),
            c.span_id(),
            c.trace_flags().to_u8()
        )
    })
}

/// Makes `span`'s parent the span `traceparent` names (a no-op without an
/// OpenTelemetry layer, or for a malformed `traceparent`).
pub fn set_parent(span: &tracing::Span, traceparent: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if let Some(remote) = parse(traceparent) {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_parsed_kept_and_refused_when_malformed() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c = parse(good).unwrap();
        assert_eq!(c.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(c.is_sampled() && c.is_remote());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        let mut state = RunState::default();
        assert!(traceparent(&state).is_none());
        assert!(!keep(&mut state, "nope"));
        assert!(keep(&mut state, good));
        assert_eq!(traceparent(&state), Some(good));
    }
}
