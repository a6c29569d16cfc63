//! The applier: the only place the engine writes to the cluster.
//!
//! It sends the [`ApiRequest`] of each planned [`Action`], in order, and
//! stops at the first failure (the rest are not sent: the key is retried
//! and the plugin plans again from what the cluster then holds). Actions
//! reach it only through [`kubewasm_runtime::step::run`], whose planning checked each
//! against the plugin's grants; the applier adds no write of its own.
//!
//! # Failures
//! [`ApplyError`] says whether a failure is worth retrying soon: conflicts
//! (409), throttling (429), server errors (5xx) and connection failures are
//! [`ApplyError::is_transient`]; the engine retries every failure through
//! the queue's backoff either way, never by blocking a worker. A refusal
//! that says when to come back (`details.retryAfterSeconds` of a 429 or a
//! 5xx, as the API server's priority and fairness sends) is retried no
//! sooner ([`ApplyError::retry_after`]): throttling is honoured, not met
//! with a storm of retries. A delete or a
//! finalizer removal of an object that is already gone (404) is success.
//!
//! An answer is read whole only up to [`ANSWER_LIMIT`] (an object is at
//! most a few MiB: etcd's request limit): a server that sends more fails
//! the write as a transport failure, its excess never held. A body that is
//! not UTF-8 or not JSON is no object (an answer to a write the server
//! made) or a refusal whose message is the body's text.
//!
//! # Unchanged writes
//! The caller may name actions the server would not change (a controller's
//! apply that already holds on the cached object): those are not sent, and
//! count as written with the cached object's [`Written`].
//!
//! # Impersonation
//! An applier made with [`Applier::impersonating`] sends every request as
//! another user (`Impersonate-User`): a tenant's writes are then made as
//! the tenant's ServiceAccount, so the cluster's RBAC bounds them a second
//! time, after the plugin's grants. The host's account needs the
//! `impersonate` verb on that ServiceAccount, and nothing of the tenant's
//! rights.

use http::Request;
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use kube::core::Status;
use tracing::Instrument;

use kubewasm_runtime::action::{Action, ApiRequest, Method};

/// How often a request under way asks whether it may still write
/// ([`Applier::apply_while`]).
pub const FENCE_CHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// The most of an answer's body the applier reads (see the module
/// documentation).
pub const ANSWER_LIMIT: usize = 16 << 20;

/// Why an action was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The API server refused the request.
    #[error("{action} {path} refused: {code} {reason}: {message}")]
    Refused {
        /// The action (`apply`, `delete`, ...).
        action: &'static str,
        /// The request path.
        path: String,
        /// HTTP status code.
        code: u16,
        /// The Status reason (`Conflict`, `Forbidden`, ...).
        reason: String,
        /// The Status message.
        message: String,
        /// How long the server asked the client to wait before retrying.
        retry_after: Option<std::time::Duration>,
    },
    /// Not sent, or abandoned under way: the step's process stopped
    /// leading, or its replica stopped holding the primary's slot (a ring's
    /// fence or handover); the next leader or the slot's next holder
    /// reconciles the primary.
    #[error("{action} {path} not sent: this replica no longer leads or holds the primary's slot")]
    Fenced {
        /// The action.
        action: &'static str,
        /// The request path.
        path: String,
    },
    /// The request did not get an answer.
    #[error("{action} {path} failed: {source}")]
    Transport {
        /// The action.
        action: &'static str,
        /// The request path.
        path: String,
        /// What failed.
        #[source]
        source: kube::Error,
    },
    /// The request could not be built (a bug, never plugin input: paths are
    /// built from validated parts).
    #[error("{action} {path}: invalid request: {source}")]
    Build {
        /// The action.
        action: &'static str,
        /// The request path.
        path: String,
        /// Why.
        #[source]
        source: http::Error,
    },
}

impl ApplyError {
    /// Whether the failure is likely to pass on its own (conflict,
    /// throttling, server error, transport).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Refused { code, .. } => matches!(code, 409 | 429) || *code >= 500,
            Self::Transport { .. } => true,
            Self::Build { .. } | Self::Fenced { .. } => false,
        }
    }

    /// How long the server asked to wait before the request is sent again.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::Refused { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Sends actions to the API server.
#[derive(Clone)]
pub struct Applier {
    client: Client,
    /// The user every request is made as, if not the client's own.
    impersonate: Option<http::HeaderValue>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier")
            .field("impersonate", &self.impersonate)
            .finish_non_exhaustive()
    }
}

impl Applier {
    /// An applier writing through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            impersonate: None,
        }
    }

    /// This applier, sending every request as `user` (see the module
    /// documentation); `None` if `user` cannot be a header value.
    pub fn impersonating(&self, user: &str) -> Option<Self> {
        Some(Self {
            client: self.client.clone(),
            impersonate: Some(http::HeaderValue::from_str(user).ok()?),
        })
    }

    /// Sends `actions` in order, asking `may_write` before each: the first
    /// it refuses, and every one after, is not sent ([`ApplyError::Fenced`]).
    /// While a request is under way `may_write` is asked again every
    /// [`FENCE_CHECK`]: once it refuses, the request is abandoned (its
    /// connection dropped: a server that sees the connection end before it
    /// acts drops the request) and the step is fenced, rather than left
    /// waiting for a partition to heal.
    /// An action with an entry in `unchanged` is not sent either: the
    /// object already holds it, and the entry stands for the answer.
    /// Each action's [`Written`], in order.
    ///
    /// # Errors
    /// The first failure, with the number of actions done before it; the
    /// rest are not sent.
    pub async fn apply_while(
        &self,
        actions: &[Action],
        unchanged: &[Option<Written>],
        may_write: impl Fn() -> bool,
    ) -> Result<Vec<Written>, (usize, ApplyError)> {
        let mut written = Vec::with_capacity(actions.len());
        for (done, action) in actions.iter().enumerate() {
            if let Some(Some(held)) = unchanged.get(done) {
                written.push(held.clone());
                continue;
            }
            if !may_write() {
                let ApiRequest { action, path, .. } = action.request();
                return Err((done, ApplyError::Fenced { action, path }));
            }
            let send = self.send(action);
            tokio::pin!(send);
            let sent = loop {
                tokio::select! {
                    sent = &mut send => break sent,
                    () = tokio::time::sleep(FENCE_CHECK) => if !may_write() {
                        let ApiRequest { action, path, .. } = action.request();
                        tracing::debug!(action, %path, "write abandoned: fenced while under way");
                        return Err((done, ApplyError::Fenced { action, path }));
                    },
                }
            };
            written.push(sent.map_err(|error| (done, error))?);
        }
        Ok(written)
    }

    /// Sends one action: the object its response carries, if any. In its
    /// own span, `kubewasm.write` ([`crate::controller`]'s reconcile span
    /// tells the tree), with the answer's status code.
    async fn send(&self, to_apply: &Action) -> Result<Written, ApplyError> {
        let ApiRequest {
            action,
            method,
            path,
            content_type,
            body,
        } = to_apply.request();
        let method = match method {
            Method::Post => http::Method::POST,
            Method::Patch => http::Method::PATCH,
            Method::Delete => http::Method::DELETE,
        };
        let span = tracing::info_span!(
            "kubewasm.write",
            otel.name = action,
            otel.kind = "client",
            kubewasm.action = action,
            http.request.method = %method,
            url.path = path.split_once('?').map_or(path.as_str(), |(path, _)| path),
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
        );
        let mut builder = Request::builder();
        if let Some(user) = &self.impersonate {
            builder = builder.header("Impersonate-User", user);
        }
        let http_request = builder
            .method(method)
            .uri(&path)
            .header(http::header::CONTENT_TYPE, content_type)
            .header(http::header::ACCEPT, "application/json")
            .body(Body::from(body.to_string().into_bytes()))
            .map_err(|source| ApplyError::Build {
                action,
                path: path.clone(),
                source,
            })?;
        let answer = self.answer(http_request).instrument(span.clone()).await;
        if let Some(code) = answer
            .as_ref()
            .ok()
            .map(|(code, _)| *code)
            .or(match &answer {
                Err(kube::Error::Api(status)) => Some(status.code),
                _ => None,
            })
        {
            span.record("http.response.status_code", code);
        }
        let written = match answer {
            Ok((_, text)) => Ok(Written::read(&text)),
            Err(kube::Error::Api(status)) if status.code == 404 && to_apply.removes() => {
                Ok(Written::default())
            }
            Err(kube::Error::Api(status)) => Err(ApplyError::Refused {
                action,
                path,
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
                retry_after: status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| std::time::Duration::from_secs(s.into())),
            }),
            Err(source) => Err(ApplyError::Transport {
                action,
                path,
                source,
            }),
        };
        if let Err(error) = &written {
            span.record("otel.status_code", "error");
            span.record("otel.status_description", tracing::field::display(error));
        }
        written
    }

    /// The status code and body of a successful answer to `request`; a
    /// refusal as the [`kube::Error::Api`] its `Status` says (as
    /// [`Client::request_text`] reads one). A body past [`ANSWER_LIMIT`] is
    /// a [`kube::Error::Service`] holding its `LengthLimitError`.
    async fn answer(&self, request: Request<Body>) -> Result<(u16, String), kube::Error> {
        let response = self.client.send(request).await?;
        let code = response.status();
        let bytes = http_body_util::Limited::new(response.into_body(), ANSWER_LIMIT)
            .collect()
            .await
            .map_err(kube::Error::Service)?
            .to_bytes();
        // Valid UTF-8 (nearly every answer) is taken as it is, not copied.
        let text = String::from_utf8(Vec::from(bytes))
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        if code.is_client_error() || code.is_server_error() {
            let status = serde_json::from_str::<Status>(&text).unwrap_or_else(|_| {
                Status::failure(text.trim(), "Failed to parse error data").with_code(code.as_u16())
            });
            return Err(kube::Error::Api(status.boxed()));
        }
        Ok((code.as_u16(), text))
    }
}

/// The object a write left, as its answer says: what the engine remembers
/// of it (nothing when the answer is no object: a `Status`, a 404 of
/// something already gone).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Written {
    /// Its `metadata.resourceVersion`.
    #[serde(rename = "resourceVersion")]
    pub resource_version: Option<Box<str>>,
    /// Its `metadata.uid`.
    pub uid: Option<Box<str>>,
}

impl Written {
    /// Reads a response's object's identity (the rest of the body is
    /// skipped, not parsed into values).
    fn read(text: &str) -> Self {
        #[derive(serde::Deserialize)]
        struct Object {
            metadata: Option<Written>,
        }
        serde_json::from_str::<Object>(text)
            .ok()
            .and_then(|object| object.metadata)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Answering, Partition, Reply, cluster};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewasm_runtime::resource::{ObjectKey, ResourceType};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_held_up_when_its_step_is_fenced_should_be_abandoned_and_never_delivered() {
        let (server, client) = cluster().await;
        let config_maps: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
        let created = config_maps
            .create(
                &kube::api::PostParams::default(),
                &serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}}))
                    .expect("a ConfigMap"),
            )
            .await
            .expect("created");
        let action = adding_a_finalizer(&serde_json::to_value(&created).expect("JSON"));
        let partition = Partition::start(server.addr()).await;
        let applier = Applier::new(partition.client());
        // Its requests hang from now; the step is fenced 200 ms later.
        partition.hold();
        let leading = Arc::new(AtomicBool::new(true));
        let fence = Arc::clone(&leading);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            fence.store(false, Ordering::SeqCst);
        });
        let applied = tokio::time::timeout(
            Duration::from_secs(2),
            applier.apply_while(std::slice::from_ref(&action), &[], || {
                leading.load(Ordering::SeqCst)
            }),
        )
        .await
        .expect("abandoned, not left hanging");
        assert!(
            matches!(applied, Err((0, ApplyError::Fenced { .. }))),
            "{applied:?}"
        );
        // Healed: the held connection is reset, what it carried lost; a
        // write the host sent again, or had not given up, would land now.
        partition.release();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = config_maps.get("a").await.expect("the ConfigMap");
        assert_eq!(
            after.metadata.finalizers, None,
            "the abandoned write landed"
        );
    }

    /// A finalizer `x/y` to add to `primary`, the ConfigMap `a` of
    /// `default`.
    fn adding_a_finalizer(primary: &serde_json::Value) -> Action {
        let config_map = ResourceType {
            group: String::new(),
            version: "v1".to_owned(),
            kind: "ConfigMap".to_owned(),
            plural: "configmaps".to_owned(),
            namespaced: true,
        };
        let key = ObjectKey::namespaced("default", "a");
        Action::add_finalizer(&config_map, &key, primary, "x/y").expect("a finalizer to add")
    }

    /// The same write, to a server that is never asked: its answers are
    /// the test's.
    fn a_write() -> Action {
        adding_a_finalizer(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "default", "uid": "u", "resourceVersion": "1"}}))
    }

    #[tokio::test]
    async fn an_answer_past_the_limit_should_fail_the_write_unread() {
        // 1 GiB announced and sent as fast as it is read.
        let server = Answering::start("200 OK", Reply::Endless).await;
        let applied = Applier::new(server.client())
            .apply_while(&[a_write()], &[], || true)
            .await;
        let Err((0, error @ ApplyError::Transport { .. })) = &applied else {
            panic!("{applied:?}");
        };
        assert!(error.is_transient());
        let ApplyError::Transport {
            source: kube::Error::Service(source),
            ..
        } = error
        else {
            panic!("{error:?}");
        };
        assert!(
            source.is::<http_body_util::LengthLimitError>(),
            "{source:?}"
        );
        assert!(
            server.sent() < 2 * ANSWER_LIMIT as u64,
            "{} bytes sent before the applier gave up",
            server.sent()
        );
    }

    #[tokio::test]
    async fn answers_that_are_not_json_should_be_no_object_or_a_plain_refusal() {
        for (line, body) in [
            ("200 OK", &b"<html>made</html>"[..]),
            ("201 Created", b"\xff\xfe{"),
        ] {
            let server = Answering::start(line, Reply::Fixed(body)).await;
            let applied = Applier::new(server.client())
                .apply_while(&[a_write()], &[], || true)
                .await;
            assert_eq!(applied.ok(), Some(vec![Written::default()]), "{line}");
        }
        let server =
            Answering::start("502 Bad Gateway", Reply::Fixed(b"<h1>\xffdown</h1>\n")).await;
        let applied = Applier::new(server.client())
            .apply_while(&[a_write()], &[], || true)
            .await;
        let Err((
            0,
            error @ ApplyError::Refused {
                code: 502, message, ..
            },
        )) = &applied
        else {
            panic!("{applied:?}");
        };
        assert!(error.is_transient());
        assert_eq!(message, "<h1>\u{fffd}down</h1>");
    }

    #[test]
    fn a_response_should_give_its_resource_version_and_uid() {
        let text = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"u-1","resourceVersion":"42","labels":{"x":"y"}},"data":{"k":"v"}}"#;
        let written = Written::read(text);
        assert_eq!(written.resource_version.as_deref(), Some("42"));
        assert_eq!(written.uid.as_deref(), Some("u-1"));
        assert_eq!(Written::read(r#"{"kind":"Status"}"#), Written::default());
        assert_eq!(Written::read("not json"), Written::default());
    }
}
