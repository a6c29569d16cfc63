//! The host's own HTTP endpoints: `/metrics` (Prometheus text),
//! `/healthz` and `/livez` (503 while the engine is wedged: see
//! [`crate::health`]) and `/readyz` (every informer has listed once; 503
//! before).
//!
//! # Served securely
//! With [`Secure`] (`kubewasm run --metrics-secure`) every endpoint is
//! served over TLS ([`tls`]) and `/metrics` answers only a client whose
//! bearer token the cluster authenticates and whose user it allows to
//! `get /metrics` ([`access`]): 401 without a token the cluster knows, 403
//! for a user it does not allow, as controller-runtime's secure metrics
//! server answers. The probes stay open: the kubelet's carry no token.

pub mod access;
pub mod tls;

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
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use super::health::{Calls, wedged};
use super::informer::Informers;
use super::metrics::Metrics;
use access::{Access, Decision};

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

/// How the endpoints are served securely (see the module documentation).
#[derive(Clone)]
pub struct Secure {
    /// The TLS configuration.
    pub tls: Arc<rustls::ServerConfig>,
    /// Who may read `/metrics`.
    pub access: Arc<Access>,
}

/// Binds `addr` (port 0 picks a free one) and serves the endpoints until
/// the returned task is aborted, over TLS and with `/metrics` guarded when
/// `secure` is given. The bound address comes back with it.
///
/// # Errors
/// The bind failure.
pub async fn serve(
    addr: SocketAddr,
    probe: Probe,
    secure: Option<Secure>,
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
            let secure = secure.clone();
            tokio::spawn(async move {
                match secure {
                    None => connection(stream, probe, None).await,
                    Some(secure) => {
                        let acceptor = tokio_rustls::TlsAcceptor::from(secure.tls);
                        match acceptor.accept(stream).await {
                            Ok(stream) => connection(stream, probe, Some(secure.access)).await,
                            Err(error) => tracing::debug!(%error, "metrics: TLS handshake failed"),
                        }
                    }
                }
            });
        }
    });
    Ok((bound, task))
}

/// Serves one connection's requests.
async fn connection<S>(stream: S, probe: Probe, access: Option<Arc<Access>>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let (probe, access) = (probe.clone(), access.clone());
        async move { Ok::<_, Infallible>(respond(&probe, access.as_deref(), &request).await) }
    });
    if let Err(error) = auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(%error, "metrics connection ended");
    }
}

async fn respond<B>(
    probe: &Probe,
    access: Option<&Access>,
    request: &hyper::Request<B>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    if path == "/metrics"
        && let Some(access) = access
    {
        let authorization = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        let refused = match access.check(authorization).await {
            Ok(Decision::Allowed) => None,
            Ok(Decision::Unauthenticated) => {
                Some((StatusCode::UNAUTHORIZED, "Unauthorized\n".to_owned()))
            }
            Ok(Decision::Forbidden { user }) => Some((
                StatusCode::FORBIDDEN,
                format!("Forbidden: {user} may not get /metrics\n"),
            )),
            Err(error) => {
                tracing::warn!(%error, "metrics: the request's token could not be reviewed");
                Some((
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the token could not be reviewed\n".to_owned(),
                ))
            }
        };
        if let Some((status, body)) = refused {
            return response(status, "text/plain", body);
        }
    }
    answer(probe, path)
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
    response(status, content_type, body)
}

fn response(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
