//! The HTTP server: hyper over TCP, answering with the [`Api`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioTimer;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::http::api::{Api, MAX_BODY, Reply, Request, parse_query};
use crate::http::auth::Impersonation;
use crate::http::connection::{Busy, ConnectionLimits, Guarded, InFlight, accept_backoff};
use crate::http::error::ApiError;
use crate::http::faults::Faults;
use crate::http::tls::{Credentials, TlsError};

type Body = BoxBody<Bytes, Infallible>;

/// A running server; dropping it stops accepting connections.
#[derive(Debug)]
pub struct ApiServer {
    addr: SocketAddr,
    accept: JoinHandle<()>,
    background: Vec<JoinHandle<()>>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.accept.abort();
        for task in &self.background {
            task.abort();
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound.
    #[error("failed to listen: {0}")]
    Bind(#[from] std::io::Error),
    /// TLS could not be configured.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl ApiServer {
    /// Binds `addr` (port 0 picks a free one) and serves `api`, with the
    /// garbage collector and namespace controller running beside: over HTTPS
    /// with bearer-token authentication when `credentials` are given, over
    /// plain HTTP without authentication otherwise (in-process tests).
    ///
    /// # Errors
    /// [`ServerError`] if the address cannot be bound or TLS configured.
    pub async fn start(
        addr: SocketAddr,
        api: Api,
        credentials: Option<Credentials>,
    ) -> Result<Self, ServerError> {
        Self::start_with(addr, api, credentials, ConnectionLimits::default()).await
    }

    /// [`ApiServer::start`] with other connection bounds.
    ///
    /// # Errors
    /// [`ServerError`] if the address cannot be bound or TLS configured.
    pub async fn start_with(
        addr: SocketAddr,
        api: Api,
        credentials: Option<Credentials>,
        limits: ConnectionLimits,
    ) -> Result<Self, ServerError> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let tls = credentials
            .as_ref()
            .map(|c| c.server_config().map(tokio_rustls::TlsAcceptor::from))
            .transpose()?;
        let api = match &credentials {
            Some(c) => api.with_authentication(c.token()),
            None => api,
        };
        let root_ca = credentials.as_ref().map(|c| c.ca_pem().to_owned());
        let background = vec![
            crate::controllers::gc::spawn(api.store().clone()),
            crate::controllers::namespace::spawn(api.store().clone(), root_ca),
        ];
        let slots = Arc::new(Semaphore::new(limits.max_connections));
        let accept = tokio::spawn(async move {
            let mut failures = 0;
            loop {
                // At the cap, stop accepting until a connection closes.
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                let (stream, peer) = match listener.accept().await {
                    Ok(conn) => {
                        failures = 0;
                        conn
                    }
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(accept_backoff(failures)).await;
                        failures = failures.saturating_add(1);
                        continue;
                    }
                };
                // Responses go out as written: with Nagle's algorithm a
                // response's last small write waits for the client's
                // delayed acknowledgement (up to 200 ms on an idle
                // connection), as kube-apiserver's Go server never lets it.
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%error, "TCP_NODELAY not set");
                }
                let connection = Connection {
                    api: api.clone(),
                    limits,
                    peer,
                };
                let tls = tls.clone();
                tokio::spawn(async move {
                    connection.serve(stream, tls).await;
                    drop(slot);
                });
            }
        });
        Ok(Self {
            addr,
            accept,
            background,
        })
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// One accepted connection.
struct Connection {
    api: Api,
    limits: ConnectionLimits,
    peer: SocketAddr,
}

impl Connection {
    /// Serves the connection until it closes or breaks a bound.
    async fn serve(self, stream: TcpStream, tls: Option<tokio_rustls::TlsAcceptor>) {
        let in_flight = InFlight::default();
        let result = match tls {
            Some(tls) => {
                match tokio::time::timeout(self.limits.handshake_timeout, tls.accept(stream)).await
                {
                    Ok(Ok(stream)) => self.http(stream, in_flight).await,
                    Ok(Err(error)) => {
                        tracing::debug!(peer = %self.peer, %error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(peer = %self.peer, "TLS handshake timed out");
                        return;
                    }
                }
            }
            None => self.http(stream, in_flight).await,
        };
        if let Err(error) = result {
            tracing::debug!(peer = %self.peer, %error, "connection ended with an error");
        }
    }

    async fn http<S>(
        &self,
        stream: S,
        in_flight: InFlight,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let api = self.api.clone();
        let requests = in_flight.clone();
        let service = service_fn(move |request| {
            let api = api.clone();
            let busy = requests.start();
            async move { Ok::<_, Infallible>(serve(&api, request, busy).await) }
        });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.limits.max_streams);
        let io = TokioIo::new(Guarded::new(stream, in_flight, self.limits.idle_timeout));
        builder.serve_connection(io, service).await
    }
}

fn json(code: u16, value: &serde_json::Value) -> Response<Body> {
    // A newline after the document, as Go's json.Encoder (a real server's)
    // writes it.
    let mut text = value.to_string();
    text.push('\n');
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    // A Status that asks the client to wait says it in the header too, as
    // client-go reads it.
    if let Some(seconds) = value
        .pointer("/details/retryAfterSeconds")
        .and_then(serde_json::Value::as_u64)
    {
        response
            .headers_mut()
            .insert(hyper::header::RETRY_AFTER, seconds.into());
    }
    response
}

/// Answers one request; `busy` marks it in flight until the response is
/// done (a watch's, when its stream ends).
async fn serve(api: &Api, request: hyper::Request<Incoming>, busy: Busy) -> Response<Body> {
    let latency = api.config().request_latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let faults = api.config().faults.clone();
    if let Some(pause) = faults.as_deref().and_then(Faults::pause) {
        tracing::debug!(fault = "pause", ?pause, "fault injected");
        tokio::time::sleep(pause).await;
    }
    let (parts, body) = request.into_parts();
    let bearer = parts
        .headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let user = match api.authenticate(bearer) {
        Ok(user) => user,
        Err(error) => return json(error.code, &error.status()),
    };
    let header = |name: &str| {
        parts
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let impersonate = Impersonation {
        user: header("impersonate-user").into_iter().next(),
        groups: header("impersonate-group"),
        uid: header("impersonate-uid").into_iter().next(),
    };
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            let error = ApiError::too_large(MAX_BODY);
            return json(error.code, &error.status());
        }
    };
    let content_type = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let accept = parts
        .headers
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let user_agent = parts
        .headers
        .get(hyper::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let request = Request {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parse_query(parts.uri.query().unwrap_or("")),
        content_type,
        accept,
        user_agent,
        body,
        user,
        impersonate,
    };
    tracing::debug!(method = request.method, path = request.path, "request");
    let write = request.may_write();
    if let Some(faults) = faults.as_deref()
        && let Some(fault) = faults.before(write)
    {
        let error = faults.answer(fault, false).await;
        return json(error.code, &error.status());
    }
    let reply = api.handle(request).await;
    if let Some(faults) = faults.as_deref()
        && let Some(code) = reply.json_code()
        && let Some(fault) = faults.after(write)
    {
        let error = faults.answer(fault, code < 300).await;
        return json(error.code, &error.status());
    }
    respond(reply, busy)
}

/// The HTTP response of `reply`; `busy` goes with a watch's stream.
fn respond(reply: Reply, busy: Busy) -> Response<Body> {
    match reply {
        Reply::Json(code, value) => json(code, &value),
        Reply::Discovery(value) => {
            let mut response = json(200, &value);
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(
                    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                ),
            );
            response
        }
        Reply::Text(code, text) => {
            let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
            *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            response
        }
        Reply::Encoded(content_type, bytes) => {
            let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(content_type),
            );
            response
        }
        Reply::Watch(events) => {
            let stream =
                futures_util::stream::unfold((events, busy), |(mut events, busy)| async move {
                    events
                        .recv()
                        .await
                        .map(|line| (Ok::<_, Infallible>(Frame::data(line)), (events, busy)))
                });
            let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            response
        }
        Reply::Warned(warnings, reply) => {
            let mut response = respond(*reply, busy);
            for warning in warnings {
                if let Ok(value) = hyper::header::HeaderValue::from_str(&warning_header(&warning)) {
                    response.headers_mut().append(hyper::header::WARNING, value);
                }
            }
            response
        }
    }
}

/// A `Warning` header's value as a real server writes it: code 299, no
/// agent, the text quoted (`299 - "text"`).
fn warning_header(text: &str) -> String {
    let quoted: String = text
        .chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_control() => vec![' '],
            c => vec![c],
        })
        .collect();
    format!("299 - \"{quoted}\"")
}
