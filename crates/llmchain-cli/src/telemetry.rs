//! OpenTelemetry export of a command's spans (`run`, `chat`, `worker`, `serve`…): the
//! chain's `tracing` spans, which follow the GenAI semantic conventions
//! (`llmchain::telemetry`), sent over OTLP/HTTP (protobuf) when the standard variables
//! say where: `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
//! The SDK and the exporter read the other standard variables themselves
//! (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`); `OTEL_SDK_DISABLED=true` turns it
//! off. Without an endpoint nothing is installed and nothing costs: the spans stay
//! disabled `tracing` spans.
//!
//! The spans are flushed before the process exits ([`Exporting`] is dropped at the end
//! of `main`). Only llmchain's own spans are exported (its crates' targets), at INFO.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithHttpConfig as _;
use std::sync::{Arc, Mutex};

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The variables that say where spans go.
const ENDPOINTS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// The installed exporters: flushed and shut down when dropped.
pub(crate) struct Exporting {
    provider: SdkTracerProvider,
    meters: Option<SdkMeterProvider>,
    spans_failed: LastError,
    metrics_failed: LastError,
}

impl Drop for Exporting {
    fn drop(&mut self) {
        // What ended last (the run's span) is exported before the shutdown: a shutdown
        // alone lost it now and then.
        let _ = self.provider.force_flush();
        if let Err(e) = self.provider.shutdown() {
            eprintln!(
                "llmchain: warning: the last spans were not exported: {}",
                self.spans_failed.why(&e)
            );
        }
        if let Some(meters) = &self.meters
            && let Err(e) = meters.shutdown()
        {
            let why = self.metrics_failed.why(&e);
            // An endpoint that takes traces only (Phoenix, Jaeger, Langfuse) answers
            // the metrics' path with 404 or 405.
            let hint = if why.ends_with("status code: 404") || why.ends_with("status code: 405") {
                " (this endpoint takes no metrics: name it in \
                 OTEL_EXPORTER_OTLP_TRACES_ENDPOINT instead, or set OTEL_METRICS_EXPORTER=none)"
            } else {
                ""
            };
            eprintln!("llmchain: warning: the last metrics were not exported: {why}{hint}");
        }
    }
}

/// The last error of an exporter: the SDK's own shutdown error says only "Failed to
/// shutdown", this says why (a status code, a network error).
#[derive(Clone, Debug, Default)]
struct LastError(Arc<Mutex<Option<String>>>);

impl LastError {
    fn keep(&self, result: &OTelSdkResult) {
        if let Err(e) = result
            && let Ok(mut last) = self.0.lock()
        {
            *last = Some(e.to_string());
        }
    }

    /// What to say of a failed shutdown: the last export error, else the shutdown's.
    fn why(&self, shutdown: &OTelSdkError) -> String {
        let last = self.0.lock().ok().and_then(|l| l.clone());
        let text = last.unwrap_or_else(|| shutdown.to_string());
        let text = text
            .strip_prefix("Operation failed: ")
            .unwrap_or(&text)
            .to_owned();
        crate::shown::inline(&llmchain::redact::urls_in(&text), 300)
    }
}

/// An exporter whose errors are kept in a [`LastError`].
#[derive(Debug)]
struct Watched<E> {
    inner: E,
    failed: LastError,
}

impl<E: SpanExporter> SpanExporter for Watched<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.failed.keep(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: PushMetricExporter> PushMetricExporter for Watched<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        self.failed.keep(&result);
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// The exporter's timeout: `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else 10 s.
fn otlp_timeout() -> std::time::Duration {
    std::env::var("OTEL_EXPORTER_OTLP_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_millis,
        )
}

/// Whether the environment asks for export.
fn wanted(var: impl Fn(&str) -> Option<String>) -> bool {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
    {
        return false;
    }
    ENDPOINTS
        .iter()
        .any(|k| var(k).is_some_and(|v| !v.trim().is_empty()))
}

/// Whether the metrics go out too: when an endpoint for them is named (the common
/// `OTEL_EXPORTER_OTLP_ENDPOINT` or `…_METRICS_ENDPOINT`; a traces-only endpoint, as
/// Langfuse's, sends no metrics to a default address) and `OTEL_METRICS_EXPORTER` is not
/// `none`.
fn metrics_wanted(var: impl Fn(&str) -> Option<String>) -> bool {
    if var("OTEL_METRICS_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none")) {
        return false;
    }
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    ]
    .iter()
    .any(|k| var(k).is_some_and(|v| !v.trim().is_empty()))
}

/// The variables that hold an OTLP endpoint.
const ENDPOINT_VARS: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
];

/// The variables that hold OTLP headers (`k=v,k2=v2`, values percent-encoded).
const HEADER_VARS: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
];

/// The endpoints' passwords and secret query values and every header value, registered
/// with the process's masker: an exporter error that quotes them is masked when shown.
pub(crate) fn register_secrets(var: impl Fn(&str) -> Option<String>) {
    for k in ENDPOINT_VARS {
        if let Some(v) = var(k) {
            llmchain::secrets::register_url(v.trim());
        }
    }
    for k in HEADER_VARS {
        let Some(v) = var(k) else { continue };
        for (_, value) in v.split(',').filter_map(|p| p.split_once('=')) {
            let value = value.trim();
            llmchain::secrets::register_encoded(value);
            // `Authorization=Bearer%20TOKEN`, `Basic …`: the credential alone too.
            let decoded = value.replace("%20", " ");
            if let Some((_, credential)) = decoded.split_once(' ') {
                llmchain::secrets::register_encoded(credential.trim());
            }
        }
    }
}

/// An exporter's error for stderr: each endpoint it quotes redacted (a password shorter
/// than the masker registers too), every URL redacted, the rest masked and escaped.
fn shown_error(e: &dyn std::fmt::Display, var: impl Fn(&str) -> Option<String>) -> String {
    let mut text = e.to_string();
    for k in ENDPOINT_VARS {
        if let Some(v) = var(k).filter(|v| !v.is_empty() && text.contains(v.as_str())) {
            text = text.replace(v.as_str(), &llmchain::redact::url(v.trim()));
        }
    }
    crate::shown::inline(&llmchain::redact::urls_in(&text), 300)
}

/// Installs the OTLP exporter and the `tracing` layer that feeds it, when the
/// environment asks for it; `None` otherwise (and when it cannot be built: said on
/// stderr, the command goes on without it).
pub(crate) fn init() -> Option<Exporting> {
    if !wanted(|k| std::env::var(k).ok()) {
        return None;
    }
    // One HTTP client for the spans and the metrics (each exporter would build its own,
    // with a runtime thread and a TLS configuration: measurable in a short command).
    let client = match reqwest::blocking::Client::builder()
        .timeout(otlp_timeout())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "llmchain: warning: spans are not exported: {}",
                shown_error(&e, |k| std::env::var(k).ok())
            );
            return None;
        }
    };
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client.clone())
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!(
                "llmchain: warning: spans are not exported: {}",
                shown_error(&e, |k| std::env::var(k).ok())
            );
            return None;
        }
    };
    // The service is `llmchain` unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES
    // name it (the builder reads both).
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    let mut resource = Resource::builder();
    if !named {
        resource = resource.with_service_name("llmchain");
    }
    let resource = resource.build();
    let spans_failed = LastError::default();
    let metrics_failed = LastError::default();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Watched {
            inner: exporter,
            failed: spans_failed.clone(),
        })
        .with_resource(resource.clone())
        .build();
    // The conventions' client metrics (`gen_ai.client.token.usage`,
    // `gen_ai.client.operation.duration`), from the chain's `llmchain::metrics` events,
    // to the same endpoint; read at exit, and every minute while a server runs.
    let meters = metrics_wanted(|k| std::env::var(k).ok())
        .then(|| {
            opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_http_client(client)
                .build()
                .ok()
        })
        .flatten()
        .map(|exporter| {
            SdkMeterProvider::builder()
                .with_periodic_exporter(Watched {
                    inner: exporter,
                    failed: metrics_failed.clone(),
                })
                .with_resource(resource)
                .build()
        });
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let tracer = provider.tracer("llmchain");
    let ours = Targets::new()
        .with_target("llmchain::metrics", LevelFilter::OFF)
        .with_target("llmchain", LevelFilter::INFO)
        .with_target("llmchain_store", LevelFilter::INFO)
        .with_target("llmchain_web", LevelFilter::INFO)
        .with_target("llmchain_mcp", LevelFilter::INFO);
    // The conventions' attributes only: no source locations, threads, timings of
    // `tracing`'s own or targets on the spans.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_target(false)
        .with_filter(ours);
    let metrics = meters.as_ref().map(|m| {
        tracing_opentelemetry::MetricsLayer::new(m.clone())
            .with_filter(Targets::new().with_target("llmchain::metrics", LevelFilter::INFO))
    });
    if tracing_subscriber::registry()
        .with(layer)
        .with(metrics)
        .try_init()
        .is_err()
    {
        return None;
    }
    Some(Exporting {
        provider,
        meters,
        spans_failed,
        metrics_failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment of these variables only.
    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_malformed_endpoint_is_shown_without_its_secrets() {
        // Round 5: a stray space made the SDK refuse the endpoint and the warning quoted
        // it whole, password and `?api-key=` included.
        let endpoint = "http://user:otlp-pass-123456@127.0.0.1:4318 /v1?api-key=otlp-key-abcdef12";
        let vars = env(&[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://user:otlp-pass-123456@127.0.0.1:4318 /v1?api-key=otlp-key-abcdef12",
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Bearer%20otlp-header-token-77,x-key=otlp%2Fkey%2B99",
            ),
        ]);
        register_secrets(&vars);
        let error = format!("OTEL_EXPORTER_OTLP_ENDPOINT: invalid endpoint '{endpoint}': bad");
        let shown = shown_error(&error, &vars);
        for secret in ["otlp-pass-123456", "otlp-key-abcdef12"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let echoed = "sent Bearer otlp-header-token-77 and otlp/key+99 and otlp%2Fkey%2B99";
        let shown = crate::shown::inline(echoed, 300);
        assert_eq!(shown, "sent *** and *** and ***");
    }

    #[test]
    fn export_is_asked_for_by_an_endpoint_and_refused_by_the_sdk_switch() {
        assert!(!wanted(env(&[])));
        assert!(wanted(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(wanted(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/v1/traces"
        )])));
        assert!(!wanted(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(!wanted(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ])));
        assert!(!wanted(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ])));
    }

    #[test]
    fn metrics_go_only_where_an_endpoint_for_them_is_named() {
        assert!(metrics_wanted(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(!metrics_wanted(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "https://cloud.langfuse.com/api/public/otel/v1/traces"
        )])));
        assert!(metrics_wanted(env(&[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://127.0.0.1:4318/v1/traces"
            ),
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://127.0.0.1:4318/v1/metrics"
            ),
        ])));
        assert!(!metrics_wanted(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ])));
    }
}
