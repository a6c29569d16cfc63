//! The host's own HTTP endpoints: `/metrics` (Prometheus text),
//! `/healthz` and `/livez` (503 while the engine is wedged: see
//! [`crate::health`]) and `/readyz` (every informer has listed once; 503
//! before).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use super::health::{Calls, wedged};
use super::informer::Informers;
use super::metrics::Metrics;

/// What the endpoints read.
#[derive(Clone)]
pub struct Probe {
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The informers, for their gauges and their watches.
    pub informers: Informers,
    /// The guest calls under way.
    pub calls: Arc<Calls>,
    /// Whether the host is ready (its caches synced).
    pub ready: Arc<AtomicBool>,
}

/// Binds `addr` (port 0 picks a free one) and serves the endpoints until
/// the returned task is aborted. The bound address comes back with it.
///
/// # Errors
/// The bind failure.
pub async fn serve(
    addr: SocketAddr,
    probe: Probe,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "metrics listener: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let probe = probe.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let response = answer(&probe, request.uri().path());
                    async move { Ok::<_, Infallible>(response) }
                });
                let io = TokioIo::new(stream);
                if let Err(error) = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(io, service)
                    .await
                {
                    tracing::debug!(%error, "metrics connection ended");
                }
            });
        }
    });
    Ok((bound, task))
}

fn answer(probe: &Probe, path: &str) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            probe.metrics.encode(&probe.informers),
        ),
        "/healthz" | "/livez" => match wedged(&probe.calls, &probe.informers) {
            None => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
            Some(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("wedged: {why}\n"),
            ),
        },
        "/readyz" if probe.ready.load(Ordering::Relaxed) => {
            (StatusCode::OK, "text/plain", "ok\n".to_owned())
        }
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "caches not synced\n".to_owned(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
