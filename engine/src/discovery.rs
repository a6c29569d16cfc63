//! The cluster's types, read from its discovery documents, for the
//! [`RestMapper`] every declaration is resolved against, and kept up while
//! the host runs ([`Discovered`], [`keep_up`]).
//!
//! # Expected flow
//! The host reads discovery once at start ([`mapper`]: a cluster it cannot
//! read is an error), then [`keep_up`] watches what changes the types a
//! cluster serves (CustomResourceDefinitions, and APIServices where the
//! cluster serves them; metadata only) and reads discovery again after
//! each change. Loads take the types as they are then
//! ([`Discovered::now`]); whoever runs plugins waits on
//! [`Discovered::changed`] to load what waited for a type, and to stop what
//! declares a type no longer served.
//!
//! # Refreshes, a small state machine
//! ```text
//!             change seen                     refresh due
//!   Idle ───────────────────▶ Due(at, then) ─────────────▶ read, publish if it differs
//!    ▲  every RESYNC: read       │ more changes: at moves    │ follow-ups left: Due
//!    └───────────────────────────┴───────────────────────────┘ none: Idle
//! ```
//! A change is read [`SETTLE`] after it (a burst of changes, one read),
//! then again after each of [`FOLLOW_UPS`]: a real API server serves a new
//! CRD's type a little after the CRD shows `Established`, with no further
//! change to watch. Every [`RESYNC`] discovery is read regardless (an
//! aggregated API that stopped answering). A read that fails is logged and
//! the types stay as they were. A new [`RestMapper`] is published only
//! when it differs, with the next epoch.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use http::Request;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use kubewasm_runtime::mapper::{MapperError, RestMapper};

/// How long after a change discovery is read: the changes of one
/// `kubectl apply` come together.
pub const SETTLE: Duration = Duration::from_millis(100);

/// When discovery is read again after a change, counted from the change.
pub const FOLLOW_UPS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// How often discovery is read with no change seen.
pub const RESYNC: Duration = Duration::from_secs(60);

/// Why discovery failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// A discovery request failed.
    #[error("discovery request {path} failed: {source}")]
    Request {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A discovery document did not parse as one.
    #[error("discovery document {path} is invalid: {source}")]
    Document {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: MapperError,
    },
}

async fn get(client: &Client, path: &str) -> Result<Value, DiscoveryError> {
    let request = Request::get(path)
        .body(Vec::new())
        .map_err(|e| DiscoveryError::Request {
            path: path.to_owned(),
            source: kube::Error::HttpError(e),
        })?;
    client
        .request::<Value>(request)
        .await
        .map_err(|source| DiscoveryError::Request {
            path: path.to_owned(),
            source,
        })
}

/// Every type the cluster serves: the core group and every version of
/// every API group, as kube-rs's discovery walks them.
///
/// # Errors
/// [`DiscoveryError`] naming the document that failed.
pub async fn mapper(client: &Client) -> Result<RestMapper, DiscoveryError> {
    let mut paths = vec!["/api/v1".to_owned()];
    let groups = get(client, "/apis").await?;
    for group in groups["groups"].as_array().into_iter().flatten() {
        for version in group["versions"].as_array().into_iter().flatten() {
            if let Some(gv) = version["groupVersion"].as_str() {
                paths.push(format!("/apis/{gv}"));
            }
        }
    }
    let mut mapper = RestMapper::default();
    for path in paths {
        let document = get(client, &path).await?;
        mapper
            .add_discovery(&document)
            .map_err(|source| DiscoveryError::Document { path, source })?;
    }
    Ok(mapper)
}

/// The types as served at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// How each type is served.
    pub mapper: Arc<RestMapper>,
    /// Counts the changes published: a load refused for a type not served
    /// at an epoch is tried again at any later one.
    pub epoch: u64,
}

/// The cluster's types as discovery serves them now, kept up by
/// [`keep_up`]; cloned by everything that loads plugins.
#[derive(Clone, Debug)]
pub struct Discovered(tokio::sync::watch::Receiver<Snapshot>);

impl Discovered {
    /// Types that never change (tests, `replay`-like uses).
    pub fn fixed(mapper: RestMapper) -> Self {
        Self::publisher(mapper).1
    }

    /// A publisher of the types, starting from `mapper`, and its handle.
    fn publisher(mapper: RestMapper) -> (tokio::sync::watch::Sender<Snapshot>, Self) {
        let (sender, receiver) = tokio::sync::watch::channel(Snapshot {
            mapper: Arc::new(mapper),
            epoch: 0,
        });
        (sender, Self(receiver))
    }

    /// The types as served now.
    pub fn now(&self) -> Snapshot {
        self.0.borrow().clone()
    }

    /// How each type is served now.
    pub fn mapper(&self) -> Arc<RestMapper> {
        Arc::clone(&self.0.borrow().mapper)
    }

    /// The epoch of the types as served now.
    pub fn epoch(&self) -> u64 {
        self.0.borrow().epoch
    }

    /// Waits until the types change from those this handle saw last
    /// (never, when nothing keeps them up).
    pub async fn changed(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Watches what changes the cluster's types and reads discovery again
/// after each change (see the module documentation), starting from
/// `first`: the handle, and the task to spawn (it ends when every handle
/// is dropped).
pub fn keep_up(
    client: Client,
    first: RestMapper,
) -> (Discovered, impl Future<Output = ()> + Send + 'static) {
    // Metadata only: a change's content never matters, only that it came.
    let watched: Vec<ApiResource> = [
        (
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
        ("apiregistration.k8s.io", "APIService", "apiservices"),
    ]
    .into_iter()
    .filter(|(group, kind, _)| first.serves(group, "v1", kind))
    .map(|(group, kind, plural)| ApiResource {
        group: group.to_owned(),
        version: "v1".to_owned(),
        api_version: format!("{group}/v1"),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    })
    .collect();
    let (sender, discovered) = Discovered::publisher(first);
    let task = async move {
        let mut streams = Vec::new();
        for resource in watched {
            if may_watch(&client, &resource).await {
                streams.push(changes(
                    Api::all_with(client.clone(), &resource),
                    resource.kind,
                ));
            } else {
                tracing::info!(kind = %resource.kind, every = ?RESYNC,
                    "this host may not list and watch them: the cluster's types are read again periodically instead");
            }
        }
        let read = move || {
            let client = client.clone();
            async move { mapper(&client).await }
        };
        refresh(sender, futures_util::stream::select_all(streams), read).await;
    };
    (discovered, task)
}

/// Whether this host's account may list and watch `resource` cluster-wide
/// (a SelfSubjectAccessReview each; a host confined to a namespace may
/// not, and falls back to reading discovery every [`RESYNC`]). A review
/// that fails counts as allowed: the watch says the rest.
async fn may_watch(client: &Client, resource: &ApiResource) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let api = Api::<SelfSubjectAccessReview>::all(client.clone());
    for verb in ["list", "watch"] {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(resource.group.clone()),
                    resource: Some(resource.plural.clone()),
                    verb: Some(verb.to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        match api.create(&kube::api::PostParams::default(), &review).await {
            Ok(answer) if !answer.status.as_ref().is_some_and(|s| s.allowed) => return false,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "access review failed; watching anyway");
            }
        }
    }
    true
}

/// A unit for each change of the objects `api` reaches (and each relist:
/// what changed meanwhile is unknown).
fn changes(
    api: Api<PartialObjectMeta<DynamicObject>>,
    kind: String,
) -> futures_util::stream::BoxStream<'static, ()> {
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            let kind = kind.clone();
            async move {
            match event {
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                    Some(())
                }
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                Err(error) => {
                    tracing::warn!(%error, kind, "watch of what changes the served types failed; retrying");
                    None
                }
            }
            }
        })
        .boxed()
}

/// What [`refresh`] waits for.
enum Refresh {
    /// Nothing changed lately: the next read is the resync's.
    Idle,
    /// A change was seen: read at `at`, then at each of `then`.
    Due {
        at: tokio::time::Instant,
        then: Vec<tokio::time::Instant>,
    },
}

impl Refresh {
    /// After a change seen at `now`: a read due already stays due (a
    /// stream of changes does not put it off), the follow-ups start again.
    fn changed(self, now: tokio::time::Instant) -> Self {
        let at = match self {
            Self::Due { at, .. } => at,
            Self::Idle => now + SETTLE,
        };
        Self::Due {
            at,
            then: FOLLOW_UPS.iter().map(|d| now + *d).collect(),
        }
    }

    /// When the next read is due (`resync`: the resync's).
    fn at(&self, resync: tokio::time::Instant) -> tokio::time::Instant {
        match self {
            Self::Idle => resync,
            Self::Due { at, .. } => *at.min(&resync),
        }
    }

    /// After a read.
    fn read(self) -> Self {
        match self {
            Self::Idle => Self::Idle,
            Self::Due { mut then, .. } => match then.first().copied() {
                Some(at) => {
                    then.remove(0);
                    Self::Due { at, then }
                }
                None => Self::Idle,
            },
        }
    }
}

/// Reads the types with `read` whenever `changes` says they may have
/// changed, and every [`RESYNC`]; publishes them through `sender` when they
/// differ. Ends when no one holds a [`Discovered`] any longer.
async fn refresh<F, Fut>(
    sender: tokio::sync::watch::Sender<Snapshot>,
    changes: impl Stream<Item = ()> + Send,
    mut read: F,
) where
    F: FnMut() -> Fut + Send,
    Fut: Future<Output = Result<RestMapper, DiscoveryError>> + Send,
{
    let mut changes = std::pin::pin!(changes.fuse());
    let mut state = Refresh::Idle;
    let mut resync = tokio::time::Instant::now() + RESYNC;
    loop {
        tokio::select! {
            () = sender.closed() => return,
            Some(()) = changes.next() => {
                state = state.changed(tokio::time::Instant::now());
                continue;
            }
            () = tokio::time::sleep_until(state.at(resync)) => {}
        }
        let now = tokio::time::Instant::now();
        if now >= resync {
            resync = now + RESYNC;
        }
        state = state.read();
        match read().await {
            Ok(mapper) => {
                sender.send_if_modified(|current| {
                    if *current.mapper == mapper {
                        return false;
                    }
                    current.mapper = Arc::new(mapper);
                    current.epoch += 1;
                    tracing::info!(epoch = current.epoch, "the cluster's served types changed");
                    true
                });
            }
            Err(error) => {
                tracing::warn!(%error, "discovery not read again; the types stay as they were");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A mapper serving `kinds` (in `example.com/v1`, namespaced).
    fn serving(kinds: &[&str]) -> RestMapper {
        let resources: Vec<Value> = kinds
            .iter()
            .map(|kind| {
                serde_json::json!({"name": format!("{}s", kind.to_lowercase()), "kind": kind,
                    "namespaced": true, "verbs": ["get", "list", "watch"]})
            })
            .collect();
        let mut mapper = RestMapper::default();
        mapper
            .add_discovery(&serde_json::json!({"kind": "APIResourceList",
                "groupVersion": "example.com/v1", "resources": resources}))
            .expect("a discovery document");
        mapper
    }

    /// A refresh task whose reads count themselves and give what `served`
    /// holds then; the channel its changes come through.
    fn started(
        served: Arc<std::sync::Mutex<Vec<&'static str>>>,
        reads: Arc<AtomicUsize>,
    ) -> (Discovered, tokio::sync::mpsc::UnboundedSender<()>) {
        let (sender, discovered) = Discovered::publisher(serving(&[]));
        let (changes, rx) = tokio::sync::mpsc::unbounded_channel();
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|change| (change, rx))
        });
        tokio::spawn(refresh(sender, stream, move || {
            reads.fetch_add(1, Ordering::SeqCst);
            let kinds = served.lock().expect("lock").clone();
            async move { Ok(serving(&kinds)) }
        }));
        (discovered, changes)
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_should_be_read_after_it_settles_then_followed_up() {
        let served = Arc::new(std::sync::Mutex::new(vec![]));
        let reads = Arc::new(AtomicUsize::new(0));
        let (mut discovered, changes) = started(Arc::clone(&served), Arc::clone(&reads));
        let start = tokio::time::Instant::now();
        let at = |d: Duration| tokio::time::sleep_until(start + d);
        // A CRD created: its type served only a little after its change.
        changes.send(()).expect("sent");
        changes.send(()).expect("sent");
        at(SETTLE + Duration::from_millis(1)).await;
        assert_eq!(
            reads.load(Ordering::SeqCst),
            1,
            "a burst of changes, one read"
        );
        assert_eq!(discovered.epoch(), 0, "nothing new yet");
        served.lock().expect("lock").push("Widget");
        discovered.changed().await;
        assert_eq!(
            start.elapsed(),
            FOLLOW_UPS[0],
            "the first follow-up read it"
        );
        assert_eq!(discovered.epoch(), 1);
        assert!(discovered.mapper().serves("example.com", "v1", "Widget"));
        at(FOLLOW_UPS[1] + Duration::from_millis(1)).await;
        assert_eq!(reads.load(Ordering::SeqCst), 3, "then the last follow-up");
        assert_eq!(
            discovered.epoch(),
            1,
            "the same types are not published again"
        );
        at(RESYNC - Duration::from_millis(1)).await;
        assert_eq!(reads.load(Ordering::SeqCst), 3, "idle until the resync");
        at(RESYNC + Duration::from_millis(1)).await;
        assert_eq!(reads.load(Ordering::SeqCst), 4, "read at the resync");
    }

    #[tokio::test(start_paused = true)]
    async fn a_type_gone_should_be_published() {
        let served = Arc::new(std::sync::Mutex::new(vec!["Widget"]));
        let reads = Arc::new(AtomicUsize::new(0));
        let (mut discovered, changes) = started(Arc::clone(&served), reads);
        changes.send(()).expect("sent");
        discovered.changed().await;
        assert!(discovered.mapper().serves("example.com", "v1", "Widget"));
        served.lock().expect("lock").clear();
        changes.send(()).expect("sent");
        discovered.changed().await;
        assert!(!discovered.mapper().serves("example.com", "v1", "Widget"));
        assert_eq!(discovered.epoch(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn fixed_types_should_never_change() {
        let mut fixed = Discovered::fixed(serving(&["Widget"]));
        let waited = tokio::time::timeout(Duration::from_secs(3600), fixed.changed()).await;
        assert!(waited.is_err(), "no change, ever");
    }
}
