//! A loopback HTTP proxy in front of an API server: a client given
//! [`Proxy::kubeconfig`] talks plain HTTP to it, and it forwards every
//! request through a kube-rs client of the server (which holds the server's
//! address, its CA and the admin's credentials), streaming each answer back
//! (watches included). What passes is counted by verb, as the server would
//! count it, so the API requests of a process are measured outside it and
//! the same way whatever its client library.
//!
//! It can stand for a network partition ([`Proxy::hold`]): requests that
//! come while it holds are neither forwarded nor answered, as packets lost
//! on the way; [`Proxy::release`] ends the partition, and what was held is
//! lost (answered 502, as a connection reset would be), never delivered
//! late.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use hyper::body::{Bytes, Incoming};

/// What the proxy saw of one request: its method, path and query, and
/// headers, with its body.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path and query.
    pub target: String,
    /// The `Content-Type` header, or empty.
    pub content_type: String,
    /// The `Accept` header, or empty.
    pub accept: String,
    /// The request's body.
    pub body: Bytes,
}

impl Seen {
    /// The verb the API server counts this request as: `get`, `list`,
    /// `watch`, `create`, `update`, `apply`, `patch`, `delete`,
    /// `deletecollection`; `discovery` for what learns the API (the
    /// groups, their resources, OpenAPI, the version), `other` for the
    /// rest.
    pub fn verb(&self) -> &'static str {
        let (path, query) = self.target.split_once('?').unwrap_or((&self.target, ""));
        let watch = query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1");
        // /api/v1/namespaces/NS/configmaps/NAME: a name after the resource.
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let core = match segments.first() {
            Some(&"api") => true,
            Some(&"apis") => false,
            _ if self.method == "GET" => return "discovery",
            _ => return "other",
        };
        let resource_at = if core { 2 } else { 3 };
        if segments.len() <= resource_at && self.method == "GET" {
            return "discovery";
        }
        let rest = segments.get(resource_at..).unwrap_or_default();
        let rest = match rest {
            ["namespaces", _, rest @ ..] if !rest.is_empty() => rest,
            rest => rest,
        };
        let named = rest.len() >= 2;
        match (self.method.as_str(), named) {
            ("GET", _) if watch => "watch",
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) if self.content_type.starts_with("application/apply-patch") => "apply",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => "other",
        }
    }

    /// Whether the request asks the server to change something.
    pub fn writes(&self) -> bool {
        !matches!(
            self.verb(),
            "get" | "list" | "watch" | "discovery" | "other"
        )
    }
}

/// Called with every request before it is forwarded.
type Observer = dyn Fn(&Seen) + Send + Sync;

/// The proxy, serving until dropped.
pub struct Proxy {
    address: std::net::SocketAddr,
    counts: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    /// Whether requests are held, and how many partitions began.
    partition: tokio::sync::watch::Sender<(bool, u64)>,
    serving: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy forwarding to `upstream`'s server.
    pub async fn start(upstream: kube::Client) -> std::io::Result<Self> {
        Self::observing(upstream, |_| {}).await
    }

    /// The same, calling `observe` with each request as it passes.
    pub async fn observing(
        upstream: kube::Client,
        observe: impl Fn(&Seen) + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let observe: Arc<Observer> = Arc::new(observe);
        let (partition, partitioned) = tokio::sync::watch::channel((false, 0));
        let shared = Arc::new(Forward {
            upstream,
            counts: counts.clone(),
            observe,
            partitioned,
        });
        let serving = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let forward = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let forward = forward.clone();
                        async move { forward.forward(request).await }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    // A connection's end (the client gone) is not the
                    // proxy's error.
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(io, service)
                    .await;
                });
            }
        });
        Ok(Self {
            address,
            counts,
            partition,
            serving,
        })
    }

    /// Starts a partition: requests from now on are held, unanswered.
    pub fn hold(&self) {
        self.partition.send_modify(|(held, count)| {
            if !*held {
                *held = true;
                *count += 1;
            }
        });
    }

    /// Ends the partition: the requests held are lost (answered 502), and
    /// new ones go through.
    pub fn release(&self) {
        self.partition.send_modify(|(held, _)| *held = false);
    }

    /// A kubeconfig whose server is this proxy (plain HTTP, no
    /// credentials: the proxy adds the upstream's).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: proxy, cluster: {{server: \"http://{}\"}}}}]\n\
             users: [{{name: proxy, user: {{}}}}]\n\
             contexts: [{{name: proxy, context: {{cluster: proxy, user: proxy, namespace: default}}}}]\n\
             current-context: proxy\n",
            self.address
        )
    }

    /// Requests forwarded so far, by verb ([`Seen::verb`]).
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

struct Forward {
    upstream: kube::Client,
    counts: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    observe: Arc<Observer>,
    partitioned: tokio::sync::watch::Receiver<(bool, u64)>,
}

/// What the proxy answers with: the upstream's streamed body, or its own
/// error text.
type Answer = http::Response<http_body_util::combinators::UnsyncBoxBody<Bytes, kube::Error>>;

impl Forward {
    async fn forward(
        &self,
        request: http::Request<Incoming>,
    ) -> Result<Answer, std::convert::Infallible> {
        Ok(self.send(request).await.unwrap_or_else(|error| {
            let text = Bytes::from(error.to_string());
            let body = http_body_util::Full::new(text)
                .map_err(|never| match never {})
                .boxed_unsync();
            let mut answer = http::Response::new(body);
            *answer.status_mut() = http::StatusCode::BAD_GATEWAY;
            answer
        }))
    }

    async fn send(&self, request: http::Request<Incoming>) -> Result<Answer, ProxyError> {
        let (parts, body) = request.into_parts();
        let header = |name: http::header::HeaderName| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let seen = Seen {
            method: parts.method.to_string(),
            target: parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned(),
            content_type: header(http::header::CONTENT_TYPE),
            accept: header(http::header::ACCEPT),
            body: body.collect().await?.to_bytes(),
        };
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(seen.verb()).or_default() += 1;
        }
        (self.observe)(&seen);
        let mut partitioned = self.partitioned.clone();
        let (held, partition) = *partitioned.borrow_and_update();
        if held {
            // Lost: its partition's end answers it with an error.
            let _ = partitioned
                .wait_for(|(held, count)| !*held || *count != partition)
                .await;
            return Err(ProxyError::Partitioned);
        }
        let mut forwarded = http::Request::builder()
            .method(parts.method.clone())
            .uri(&seen.target);
        for (name, value) in &parts.headers {
            // The upstream client sets its own host, credentials, length
            // and connection headers.
            if !HOP_BY_HOP.contains(name) && name.as_str() != "keep-alive" {
                forwarded = forwarded.header(name, value);
            }
        }
        let response = self
            .upstream
            .send(forwarded.body(kube::client::Body::from(seen.body.to_vec()))?)
            .await?;
        Ok(response.map(BodyExt::boxed_unsync))
    }
}

/// Headers of the connection or the credentials, not of the request.
const HOP_BY_HOP: [http::header::HeaderName; 8] = [
    http::header::HOST,
    http::header::AUTHORIZATION,
    http::header::CONNECTION,
    http::header::CONTENT_LENGTH,
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
    http::header::TE,
    http::header::TRAILER,
];

/// Why a request could not be forwarded.
#[derive(Debug, thiserror::Error)]
enum ProxyError {
    #[error("reading the request: {0}")]
    Read(#[from] hyper::Error),
    #[error("building the request: {0}")]
    Build(#[from] http::Error),
    #[error("forwarding: {0}")]
    Forward(#[from] kube::Error),
    #[error("lost in a partition")]
    Partitioned,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(method: &str, target: &str, content_type: &str) -> Seen {
        Seen {
            method: method.into(),
            target: target.into(),
            content_type: content_type.into(),
            accept: String::new(),
            body: Bytes::new(),
        }
    }

    #[test]
    fn requests_should_be_counted_by_the_verb_the_server_counts() {
        // Method, target, Content-Type (`-` for none), verb.
        let cases = "
            GET /api/v1/namespaces/default/configmaps/a - get
            GET /api/v1/namespaces/default/configmaps - list
            GET /api/v1/configmaps?watch=true&resourceVersion=5 - watch
            GET /apis/apps/v1/deployments?limit=500 - list
            GET /apis/apps/v1/namespaces/ns/deployments/d - get
            GET /api/v1/namespaces/ns - get
            POST /api/v1/namespaces/ns/configmaps application/json create
            PUT /apis/example.com/v1/namespaces/ns/myapps/a/status - update
            PATCH /apis/apps/v1/namespaces/ns/deployments/d?force=true application/apply-patch+yaml apply
            PATCH /api/v1/namespaces/ns/pods/p application/merge-patch+json patch
            DELETE /api/v1/namespaces/ns/pods/p - delete
            DELETE /api/v1/namespaces/ns/pods - deletecollection
            GET /api - discovery
            GET /api/v1 - discovery
            GET /apis - discovery
            GET /apis/apps/v1 - discovery
            GET /openapi/v3 - discovery
            GET /version - discovery";
        for line in cases.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let [method, target, content_type, verb] = line.split(' ').collect::<Vec<_>>()[..]
            else {
                panic!("{line}: four fields");
            };
            let content_type = if content_type == "-" {
                ""
            } else {
                content_type
            };
            let request = seen(method, target, content_type);
            assert_eq!(request.verb(), verb, "{method} {target}");
            assert_eq!(
                request.writes(),
                !matches!(verb, "get" | "list" | "watch" | "discovery"),
                "{method} {target}"
            );
        }
    }
}
