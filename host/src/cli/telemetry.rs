//! What the host tells of itself as it runs: logs on stderr and, with
//! `--otlp-endpoint`, traces over OTLP.
//!
//! # Logs
//! Filtered by `KUBEWASM_LOG` (an `EnvFilter`; by default the host's own
//! records from `info`, and plugins' logs), as text or JSON.
//!
//! # Traces
//! With an endpoint, the spans of the host's own crates (INFO and DEBUG:
//! each reconcile with its guest call, cache reads, planning and writes, as
//! the engine's `controller` module describes them) and the events in them
//! (INFO and above: plugins' logs among them) go to an OpenTelemetry tracer
//! whose batches are sent over OTLP in protobuf over HTTP to
//! `ENDPOINT/v1/traces` (`ENDPOINT` is the collector's base URL, as
//! `OTEL_EXPORTER_OTLP_ENDPOINT` gives it: `http://collector:4318`). The
//! resource is `service.name` `kubewasm` (or `OTEL_SERVICE_NAME`) with
//! `OTEL_RESOURCE_ATTRIBUTES`; the OpenTelemetry SDK's own variables
//! (`OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_TRACES_HEADERS`)
//! apply. Without an endpoint no tracer exists and spans past the log
//! filter cost a disabled callsite.
//!
//! The exporter runs on a thread of its own with a blocking HTTP client:
//! [`Telemetry::start`] and [`Telemetry::shutdown`] are called outside any
//! async runtime (before the command's runtime starts, after it ends).

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, FilterFn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

/// The default log filter, when `KUBEWASM_LOG` is unset or invalid.
const DEFAULT_LOG: &str =
    "warn,kubewasm=info,kubewasm_engine=info,kubewasm_runtime=info,kubewasm::plugin=info";

/// How long the last spans may take to leave at exit. Each export is
/// bounded by the exporter's own timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s
/// by default) and dropped spans are only lost, never waited for: a
/// collector that hangs, refuses or drips costs a reconcile nothing and the
/// host's exit at most this.
const FLUSH: Duration = Duration::from_secs(5);

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub(super) enum TelemetryError {
    /// The OTLP endpoint is not an absolute `http` or `https` URL.
    #[error("--otlp-endpoint {endpoint:?}: not an http:// or https:// URL")]
    Endpoint {
        /// What was given.
        endpoint: String,
    },
    /// The exporter could not be built.
    #[error("the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A subscriber was installed already.
    #[error("logging: {0}")]
    Install(#[from] tracing_subscriber::util::TryInitError),
}

/// The installed subscriber, and the tracer provider whose batches
/// [`Telemetry::shutdown`] flushes.
#[must_use = "shut down to flush the last spans"]
pub(super) struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Installs the global subscriber: logs as `json` or text, and traces
    /// to `otlp_endpoint` if one is given.
    ///
    /// # Errors
    /// [`TelemetryError`]: a bad endpoint, an exporter that could not be
    /// built, a subscriber already installed.
    pub(super) fn start(json: bool, otlp_endpoint: Option<&str>) -> Result<Self, TelemetryError> {
        let filter =
            EnvFilter::try_from_env("KUBEWASM_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG));
        let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        let logs: Box<dyn Layer<Registry> + Send + Sync> = if json {
            logs.json().with_filter(filter).boxed()
        } else {
            logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(filter)
                .boxed()
        };
        let provider = otlp_endpoint.map(provider).transpose()?;
        let traces = provider.as_ref().map(|provider| {
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("kubewasm"))
                .with_filter(FilterFn::new(|m| {
                    traced(m.target(), *m.level(), m.is_span())
                }))
        });
        tracing_subscriber::registry()
            .with(logs)
            .with(traces)
            .try_init()?;
        Ok(Self { provider })
    }

    /// Sends the spans not yet sent and stops the exporter, waiting at
    /// most [`FLUSH`] for a collector that does not answer.
    pub(super) fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown_with_timeout(FLUSH)
        {
            eprintln!("warning: traces: {error}");
        }
    }
}

/// What goes into traces: the host's spans at DEBUG and above, and events
/// at INFO and above in them.
fn traced(target: &str, level: Level, span: bool) -> bool {
    let least = if span { Level::DEBUG } else { Level::INFO };
    target.starts_with("kubewasm") && level <= least
}

/// A tracer provider exporting in batches to `endpoint`'s `/v1/traces`.
fn provider(endpoint: &str) -> Result<SdkTracerProvider, TelemetryError> {
    let traces = traces_url(endpoint)?;
    // The HTTP client's TLS is rustls built with ring only (as the cluster
    // and registry clients'): its provider, unless one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = SpanExporter::builder()
        .with_http()
        .with_endpoint(traces)
        .build()?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("kubewasm");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build())
}

/// The traces URL of a collector's base URL.
fn traces_url(endpoint: &str) -> Result<String, TelemetryError> {
    let bad = || TelemetryError::Endpoint {
        endpoint: endpoint.to_owned(),
    };
    let uri: http::Uri = endpoint.parse().map_err(|_| bad())?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(bad());
    }
    Ok(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_url_should_be_the_collectors_base_url_and_v1_traces() -> anyhow::Result<()> {
        assert_eq!(
            traces_url("http://collector:4318")?,
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://collector:4318/")?,
            "https://collector:4318/v1/traces"
        );
        for bad in [
            "collector:4318",
            "ftp://collector",
            "http://",
            "",
            "not a url",
        ] {
            assert!(
                matches!(traces_url(bad), Err(TelemetryError::Endpoint { .. })),
                "{bad:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn traces_should_hold_the_hosts_spans_and_its_events_from_info() {
        let cases = [
            ("kubewasm_engine::controller", Level::DEBUG, true, true),
            ("kubewasm_runtime::step", Level::TRACE, true, false),
            ("kubewasm::plugin", Level::INFO, false, true),
            ("kubewasm_engine::applier", Level::DEBUG, false, false),
            ("kube_client::client", Level::INFO, true, false),
            ("hyper", Level::ERROR, false, false),
        ];
        for (target, level, span, expected) in cases {
            assert_eq!(
                traced(target, level, span),
                expected,
                "{target} {level} {span}"
            );
        }
    }
}
