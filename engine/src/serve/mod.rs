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
//!
//! # Bounds ([`Limits`])
//! The port is open to whatever the network lets in, so a client that
//! connects and says nothing, or sends its request a byte at a time, must
//! not hold the host's file descriptors: at most `max_connections` are
//! served at once (past that the listener waits, the kernel's backlog
//! holding the rest), a TLS handshake must finish within
//! `handshake_timeout`, and a request's headers, the first or the next on
//! a kept-alive connection, must arrive within `header_read_timeout`
//! (controller-runtime's metrics server: 32 s). HTTP/1.1 only: Prometheus
//! and the kubelet speak it, and controller-runtime's scaffold turns
//! HTTP/2 off on its metrics port (its rapid-reset weakness).

pub mod access;
pub mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

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

/// The bounds of the endpoints' connections (see the module
/// documentation).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time to finish a TLS handshake.
    pub handshake_timeout: Duration,
    /// Time to send a request's headers.
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
        }
    }
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
    serve_within(addr, probe, secure, Limits::default()).await
}

async fn serve_within(
    addr: SocketAddr,
    probe: Probe,
    secure: Option<Secure>,
    limits: Limits,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let task = tokio::spawn(async move {
        loop {
            // At the cap, stop accepting until a connection closes.
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
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
                    None => connection(stream, probe, None, limits).await,
                    Some(secure) => {
                        let acceptor = tokio_rustls::TlsAcceptor::from(secure.tls);
                        match tokio::time::timeout(
                            limits.handshake_timeout,
                            acceptor.accept(stream),
                        )
                        .await
                        {
                            Ok(Ok(stream)) => {
                                connection(stream, probe, Some(secure.access), limits).await;
                            }
                            Ok(Err(error)) => {
                                tracing::debug!(%error, "metrics: TLS handshake failed");
                            }
                            Err(_) => tracing::debug!("metrics: TLS handshake timed out"),
                        }
                    }
                }
                drop(slot);
            });
        }
    });
    Ok((bound, task))
}

/// Serves one connection's requests.
async fn connection<S>(stream: S, probe: Probe, access: Option<Arc<Access>>, limits: Limits)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let (probe, access) = (probe.clone(), access.clone());
        async move { Ok::<_, Infallible>(respond(&probe, access.as_deref(), &request).await) }
    });
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::time::Instant;

    use super::*;

    /// Bounds a test sees broken quickly.
    const SHORT: Limits = Limits {
        max_connections: 2,
        handshake_timeout: Duration::from_millis(300),
        header_read_timeout: Duration::from_millis(300),
    };

    /// The endpoints of a host with no plugin and no reachable server.
    async fn start(secure: Option<Secure>) -> SocketAddr {
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("a URL"),
        ))
        .expect("a client");
        let probe = Probe {
            metrics: Arc::default(),
            informers: Informers::new(client.clone()),
            calls: Arc::default(),
            ready: Arc::default(),
        };
        let secure = secure.map(|tls| Secure {
            tls: tls.tls,
            access: Arc::new(Access::new(client)),
        });
        let (addr, _) = serve_within(
            "127.0.0.1:0".parse().expect("an address"),
            probe,
            secure,
            SHORT,
        )
        .await
        .expect("bound");
        addr
    }

    /// What `stream` sends until the server closes it (failing if it is
    /// not closed within 5 s).
    async fn until_closed(stream: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut got)).await;
        assert!(
            read.is_ok(),
            "still open 5 s on: {}",
            String::from_utf8_lossy(&got)
        );
        String::from_utf8_lossy(&got).into_owned()
    }

    #[tokio::test]
    async fn a_client_silent_slow_or_idle_should_be_closed_and_its_slot_freed() {
        let addr = start(None).await;
        // Two clients hold both slots: one says nothing, one sends half a
        // request.
        let mut silent = TcpStream::connect(addr).await.expect("connected");
        let mut slow = TcpStream::connect(addr).await.expect("connected");
        slow.write_all(b"GET /healthz HTTP/1.1\r\n")
            .await
            .expect("sent");
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A third waits for a slot, and is served once one is freed.
        let asked = Instant::now();
        let mut third = TcpStream::connect(addr).await.expect("connected");
        third
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("sent");
        let answer = until_closed(&mut third).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            asked.elapsed() >= Duration::from_millis(200),
            "served before a slot was freed: the cap did not hold"
        );
        until_closed(&mut silent).await;
        until_closed(&mut slow).await;
        // A kept-alive connection idle after its answer is closed too.
        let mut kept = TcpStream::connect(addr).await.expect("connected");
        kept.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("sent");
        let answer = until_closed(&mut kept).await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    }

    #[tokio::test]
    async fn a_tls_client_that_never_shakes_hands_should_be_closed() {
        let tls = tls::server_config(None).expect("self-signed");
        let addr = start(Some(Secure {
            tls,
            access: Arc::new(Access::new(
                kube::Client::try_from(kube::Config::new(
                    "http://127.0.0.1:9".parse().expect("a URL"),
                ))
                .expect("a client"),
            )),
        }))
        .await;
        let mut silent = TcpStream::connect(addr).await.expect("connected");
        assert_eq!(until_closed(&mut silent).await, "");
    }
}
