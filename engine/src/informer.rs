//! Shared informers: one watch and one store per (resource type, scope,
//! label selector), however many plugins read it.
//!
//! # Lifecycle
//! [`Informers::subscribe`] returns a [`Subscription`]. The first
//! subscription to a (type, scope, selector) starts its informer: a task running
//! kube-runtime's `watcher` (paged initial list, or a streaming one with [`InitialList::Streaming`]; bookmarks, relist on 410,
//! backoff on errors) into a [`Store`]. Every later subscription shares it.
//! When the last subscription is dropped the task is aborted and the store
//! freed.
//!
//! # Guarantees
//! - The store holds every object the watch delivered, stripped of
//!   `managedFields` and the `last-applied-configuration` annotation, each
//!   kept parsed and as JSON text ([`CachedObject`]).
//! - A relist replaces the store in one step when it completes, so reads
//!   never see a half-listed cluster; handlers then hear of the objects that
//!   are new or changed (by resourceVersion) and of those that vanished
//!   while the watch was down, and of nothing else.
//! - Every handler sees every change (added, modified, deleted, relisted)
//!   after the store has it, and a new subscriber first sees every object
//!   the store already holds. Handlers run on the informer's task and must
//!   not block: they queue keys. No handler runs with the store locked,
//!   so a handler may read it.
//! - What no change brought is told apart: the objects of the first list
//!   and those a new subscriber is replayed are [`Change::Listed`], so a
//!   queue can hold them in bulk and serve them after fresh events (as
//!   controller-runtime's priority queue does with its initial list).
//! - [`Store::synced`] turns true once the first list is complete and
//!   stays true.
//!
//! # Shares
//! In a ring, the informer of a key with a [`InformerKey::shard`] holds the
//! replica's share only: the objects of the slots it holds ([`Share`]),
//! asked of the server as a `shardSelector` when it serves them (checked
//! once, [`share::served`]), and
//! filtered in the host by the same rule in any case. When the slots change
//! the informer lists again under the new share: the objects new to the
//! store are [`Change::Listed`] (a replica that acquired a slot is shown
//! every primary of it), those that left the share leave the store without
//! a word (they were not deleted: another replica holds them now), and
//! those deleted meanwhile are [`Change::Deleted`]. An empty share is an
//! empty store, listed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::listing::Key;
use super::listing::Keys;
use super::ring::Shard;
use super::share::{self, Share};
use super::store::Objects;
pub use super::store::Store;
use kubewasm_core::shard::ShardField;
use kubewasm_runtime::cache::{Appliers, CachedObject, Entry, Meta, Owner};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};

/// How an informer gets its first list (and every relist).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialList {
    /// Paged `list` calls, then a watch from the list's resourceVersion:
    /// what every API server serves.
    #[default]
    Paged,
    /// One watch with `sendInitialEvents=true` (KEP-3157): the objects
    /// stream in as events, with no list response to hold in memory on
    /// either side. Only for a server that serves it (Kubernetes 1.32+ with
    /// the `WatchList` feature on, or the embedded API server): one that
    /// ignores the parameter would leave the store without the objects that
    /// existed before the watch.
    Streaming,
}

/// What an informer watches: a type, in one namespace or all, and a label
/// selector (`""` for all).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerKey {
    /// The type.
    pub resource: ResourceType,
    /// The one namespace watched (a plugin confined to namespaces watches
    /// only those, so the host needs no cluster-wide read for it); `None`:
    /// every namespace, or a cluster-scoped type.
    pub namespace: Option<String>,
    /// The label selector, as the API server takes it.
    pub selector: String,
    /// In a ring, what the objects are placed by: the store holds this
    /// replica's share only. `None`: every object.
    pub shard: Option<ShardField>,
}

/// A change an informer saw, after its store applied it: the object's key
/// (the store's own copy, which work queues share) and the object.
#[derive(Clone, Copy, Debug)]
pub enum Change<'a> {
    /// Held when the handler subscribed, or found by the first list: no
    /// change the handler could have missed brought it. With the store,
    /// every key of which is listed with it (a queue walks it).
    Listed(&'a Key, &'a Arc<CachedObject>, &'a Arc<dyn Keys>),
    /// Added or modified (also what a relist found new or changed), with
    /// the state the store held before, if it held one.
    Applied(
        &'a Key,
        &'a Arc<CachedObject>,
        Option<&'a Arc<CachedObject>>,
    ),
    /// Deleted (also an object a relist no longer found).
    Deleted(&'a Key, &'a Arc<CachedObject>),
}

impl<'a> Change<'a> {
    /// The object's key.
    pub fn key(&self) -> &'a Key {
        match self {
            Self::Listed(k, _, _) | Self::Applied(k, _, _) | Self::Deleted(k, _) => k,
        }
    }

    /// The object, as it is now or as it was last.
    pub fn object(&self) -> &'a Arc<CachedObject> {
        match self {
            Self::Listed(_, o, _) | Self::Applied(_, o, _) | Self::Deleted(_, o) => o,
        }
    }

    /// The state a modified object had before the change, as the store
    /// held it (`None` for an object new to the store, listed or deleted).
    pub fn previous(&self) -> Option<&'a Arc<CachedObject>> {
        match self {
            Self::Applied(_, _, previous) => *previous,
            Self::Listed(..) | Self::Deleted(..) => None,
        }
    }
}

/// A function called with every change.
pub type Handler = Arc<dyn Fn(Change<'_>) + Send + Sync>;

/// A running informer: its store, its handlers and its task.
struct Informer {
    store: Arc<Store>,
    handlers: Arc<RwLock<HashMap<u64, Handler>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Informer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every informer of the host, shared by every plugin.
#[derive(Clone)]
pub struct Informers {
    client: kube::Client,
    initial_list: InitialList,
    shard: Option<Arc<Shard>>,
    running: Arc<Mutex<HashMap<InformerKey, Weak<Informer>>>>,
    next_id: Arc<AtomicU64>,
}

/// A plugin's hold on an informer: its store, and its handler registered
/// until this is dropped. The last one dropped stops the informer.
pub struct Subscription {
    informer: Arc<Informer>,
    id: u64,
}

impl Subscription {
    /// The informer's store.
    pub fn store(&self) -> &Arc<Store> {
        &self.informer.store
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.informer
            .handlers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

impl Informers {
    /// No informers yet, watching through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            initial_list: InitialList::default(),
            shard: None,
            running: Arc::default(),
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Informers that list the way `initial_list` says (for informers
    /// started from now on).
    #[must_use]
    pub fn with_initial_list(mut self, initial_list: InitialList) -> Self {
        self.initial_list = initial_list;
        self
    }

    /// Informers whose sharded keys hold the share of the slots `shard`
    /// holds (for informers started from now on).
    #[must_use]
    pub fn with_shard(mut self, shard: Arc<Shard>) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Subscribes `handler` to the informer of `key`, starting it if it is
    /// not running. Must be called within a tokio runtime.
    pub fn subscribe(&self, key: &InformerKey, handler: Handler) -> Subscription {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.retain(|_, informer| informer.strong_count() > 0);
        let informer = match running.get(key).and_then(Weak::upgrade) {
            Some(informer) => informer,
            None => {
                let informer = Arc::new(self.start(key));
                running.insert(key.clone(), Arc::downgrade(&informer));
                informer
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // The new handler first hears of every object the store holds, under
        // the handlers' lock: the informer task applies a change to the
        // store before it reads the handlers, so each change reaches the new
        // handler through this replay or through the task, never neither
        // (an informer that listed before this subscription, or a task
        // faster than this function, loses nothing). The store itself is
        // not locked while the handler runs: no handler runs under it, so
        // one may read the store (a queue's walk over it does).
        {
            let mut handlers = informer
                .handlers
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let held: Vec<(Key, Arc<CachedObject>)> = informer
                .store
                .read()
                .iter()
                .map(|(k, o)| (Arc::clone(k), Arc::clone(o)))
                .collect();
            let listing: Arc<dyn Keys> = Arc::clone(&informer.store) as _;
            for (key, object) in &held {
                handler(Change::Listed(key, object, &listing));
            }
            handlers.insert(id, handler);
        }
        Subscription { informer, id }
    }

    /// Informers running now, with their object counts.
    pub fn running(&self) -> Vec<(InformerKey, Arc<Store>)> {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running
            .iter()
            .filter_map(|(k, w)| w.upgrade().map(|i| (k.clone(), Arc::clone(&i.store))))
            .collect()
    }

    fn start(&self, key: &InformerKey) -> Informer {
        let store = Arc::new(Store::new(key.resource.clone(), key.namespace.clone()));
        let handlers: Arc<RwLock<HashMap<u64, Handler>>> = Arc::default();
        let mut config = watcher::Config::default();
        if self.initial_list == InitialList::Streaming {
            config = config.streaming_lists();
        }
        if !key.selector.is_empty() {
            config = config.labels(&key.selector);
        }
        let source = Source {
            client: self.client.clone(),
            resource: api_resource(&key.resource),
            namespace: key.namespace.clone(),
            config,
            slots: key
                .shard
                .zip(self.shard.as_ref())
                .map(|(field, shard)| (field, shard.slots())),
        };
        let task = tokio::spawn(run(
            source,
            Arc::clone(&store),
            Arc::clone(&handlers),
            key.clone(),
        ));
        Informer {
            store,
            handlers,
            task,
        }
    }
}

/// What an informer's task watches.
struct Source {
    client: kube::Client,
    resource: ApiResource,
    namespace: Option<String>,
    config: watcher::Config,
    /// Sharded: the field objects are placed by, and the slots held.
    slots: Option<(ShardField, watch::Receiver<u64>)>,
}

impl Source {
    fn api(&self, client: kube::Client) -> Api<DynamicObject> {
        match &self.namespace {
            Some(namespace) => Api::namespaced_with(client, namespace, &self.resource),
            None => Api::all_with(client, &self.resource),
        }
    }

    /// The share to hold now; `None`: not sharded.
    fn share(&mut self) -> Option<Share> {
        self.slots
            .as_mut()
            .map(|(field, slots)| Share::new(*field, *slots.borrow_and_update()))
    }

    /// Until the slots held change (never, not sharded).
    async fn reshard(&mut self) {
        let changed = match self.slots.as_mut() {
            Some((_, slots)) => slots.changed().await.is_ok(),
            None => false,
        };
        if !changed {
            std::future::pending::<()>().await;
        }
    }
}

/// kube's description of a resolved type.
pub(crate) fn api_resource(resource: &ResourceType) -> ApiResource {
    ApiResource {
        group: resource.group.clone(),
        version: resource.version.clone(),
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        plural: resource.plural.clone(),
    }
}

/// The informer's task: the watch, into the store, out to the handlers;
/// sharded, watched again under each new share.
async fn run(
    mut source: Source,
    store: Arc<Store>,
    handlers: Arc<RwLock<HashMap<u64, Handler>>>,
    key: InformerKey,
) {
    let resource = api_resource(&key.resource);
    let mut feed = Feed {
        types: TypeMeta {
            api_version: resource.api_version,
            kind: resource.kind,
        },
        listing: Arc::clone(&store) as _,
        store,
        handlers,
        relist: None,
        share: None,
        reshard: false,
    };
    // Whether the server filters by a shard selector; `None`: not asked yet
    // (or the question failed: asked again at the next share).
    let mut served: Option<bool> = None;
    loop {
        feed.share = source.share();
        let client = match feed.share.as_ref().map(Share::selector) {
            None => source.client.clone(),
            Some(None) => {
                feed.empty();
                source.reshard().await;
                feed.reshard = true;
                continue;
            }
            Some(Some(selector)) => {
                let sharded = share::client_with(&source.client, selector);
                if served.is_none() {
                    served = match share::served(
                        &sharded,
                        &source.client,
                        source.api(sharded.clone()).resource_url(),
                    )
                    .await
                    {
                        Ok(served) => {
                            tracing::info!(resource = %key.resource, served,
                            "informer share: {}", if served {
                                "the server filters by shardSelector"
                            } else {
                                "the server ignores shardSelector; filtered in the host"
                            });
                            Some(served)
                        }
                        Err(error) => {
                            tracing::warn!(resource = %key.resource, %error,
                                "could not ask whether the server serves shardSelector; filtered in the host");
                            None
                        }
                    };
                }
                if served == Some(true) {
                    sharded
                } else {
                    source.client.clone()
                }
            }
        };
        let mut stream = watcher::watcher(source.api(client), source.config.clone())
            .default_backoff()
            .boxed();
        loop {
            tokio::select! {
                event = stream.next() => match event {
                    Some(Ok(event)) => {
                        feed.store.watch_worked();
                        feed.event(event);
                    }
                    Some(Err(error)) => {
                        feed.store.watch_failed();
                        tracing::warn!(resource = %key.resource, namespace = ?key.namespace,
                            selector = %key.selector, %error,
                            "watch failed; retrying with backoff");
                    }
                    None => return,
                },
                () = source.reshard() => {
                    feed.reshard = true;
                    break;
                }
            }
        }
    }
}

/// An informer's store and handlers, fed the watch's events.
struct Feed {
    /// The type of what it watches: a real server's list items carry no
    /// `apiVersion` and `kind`, the cache's objects always do.
    types: TypeMeta,
    store: Arc<Store>,
    listing: Arc<dyn Keys>,
    handlers: Arc<RwLock<HashMap<u64, Handler>>>,
    /// The objects of a list under way.
    relist: Option<Objects>,
    /// Sharded: the share held.
    share: Option<Share>,
    /// Whether the list under way follows a new share.
    reshard: bool,
}

impl Feed {
    fn notify(&self, change: Change<'_>) {
        let handlers: Vec<Handler> = self
            .handlers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for handler in handlers {
            handler(change);
        }
    }

    fn admits(&self, object: &DynamicObject) -> bool {
        self.share.as_ref().is_none_or(|s| s.admits_object(object))
    }

    /// An empty share: nothing held, nothing said, listed.
    fn empty(&mut self) {
        self.relist = None;
        self.store.write().clear();
        self.store.synced.send_replace(true);
    }

    fn event(&mut self, event: Event<DynamicObject>) {
        match event {
            Event::Init => self.relist = Some(Objects::new()),
            Event::InitApply(object) => {
                if !self.admits(&object) {
                    return;
                }
                if let (Some(buffer), Some((okey, cached))) =
                    (self.relist.as_mut(), cached(object, &self.types))
                {
                    buffer.insert(okey, cached);
                }
            }
            Event::InitDone => self.listed(),
            Event::Apply(object) => {
                if !self.admits(&object) {
                    return;
                }
                if let Some((okey, cached)) = cached(object, &self.types) {
                    // An update keeps the key the store (and queues) hold.
                    let (okey, previous) = {
                        let mut objects = self.store.write();
                        let (okey, previous) = match objects.remove_entry(&*okey) {
                            Some((held, previous)) => (held, Some(previous)),
                            None => (okey, None),
                        };
                        objects.insert(Arc::clone(&okey), Arc::clone(&cached));
                        (okey, previous)
                    };
                    self.notify(Change::Applied(&okey, &cached, previous.as_ref()));
                }
            }
            Event::Delete(object) => {
                if !self.admits(&object) {
                    return;
                }
                if let Some((okey, cached)) = cached(object, &self.types) {
                    let held = self.store.write().remove_entry(&*okey).map(|(k, _)| k);
                    self.notify(Change::Deleted(&held.unwrap_or(okey), &cached));
                }
            }
        }
    }

    /// A list is complete: the store replaced in one step, then the
    /// handlers told what is new (listed, after the first list or a new
    /// share), changed (by resourceVersion) or deleted.
    fn listed(&mut self) {
        let Some(fresh) = self.relist.take() else {
            return;
        };
        let listing = !self.store.synced() || std::mem::take(&mut self.reshard);
        let (new, changed, gone) = {
            let mut objects = self.store.write();
            let old = std::mem::replace(&mut *objects, fresh);
            let (mut new, mut changed) = (Vec::new(), Vec::new());
            for (k, o) in objects.iter() {
                match old.get(k) {
                    None => new.push((Arc::clone(k), Arc::clone(o))),
                    Some(was) if was.resource_version() != o.resource_version() => {
                        changed.push((Arc::clone(k), Arc::clone(o), Arc::clone(was)));
                    }
                    // A new share lists what it kept too: a slot given up
                    // and taken back before this list dropped the keys
                    // queued meanwhile (their steps refused, the slot not
                    // held), and nothing else queues them again.
                    Some(_) if listing => new.push((Arc::clone(k), Arc::clone(o))),
                    Some(_) => {}
                }
            }
            // What left the share was not deleted: another replica has it.
            let gone: Vec<(Key, Arc<CachedObject>)> = old
                .into_iter()
                .filter(|(k, o)| {
                    !objects.contains_key(k)
                        && self.share.as_ref().is_none_or(|s| s.admits_cached(o))
                })
                .collect();
            (new, changed, gone)
        };
        for (k, o) in &new {
            self.notify(if listing {
                Change::Listed(k, o, &self.listing)
            } else {
                Change::Applied(k, o, None)
            });
        }
        changed
            .iter()
            .for_each(|(k, o, was)| self.notify(Change::Applied(k, o, Some(was))));
        gone.iter()
            .for_each(|(k, o)| self.notify(Change::Deleted(k, o)));
        self.store.synced.send_replace(true);
        tracing::debug!(resource = %self.store.resource(), objects = self.store.len(), "informer listed");
    }
}

/// The object's key and its cached form, stripped of what no plugin needs,
/// with its `apiVersion` and `kind` (`types`) where the server left them
/// out (a real server's list items).
fn cached(mut object: DynamicObject, types: &TypeMeta) -> Option<(Key, Arc<CachedObject>)> {
    if object.types.is_none() {
        object.types = Some(types.clone());
    }
    let key = ObjectKey {
        namespace: object.metadata.namespace.clone(),
        name: object.metadata.name.clone()?,
    };
    // Who applied it is kept (children as a set are pruned by it), the
    // rest of `managedFields` stripped before it is turned into JSON: what
    // is dropped is never converted.
    let appliers = Appliers::read(object.metadata.managed_fields.iter().flatten().filter_map(
        |entry| {
            Some(Entry {
                manager: entry.manager.as_deref()?,
                apply: entry.operation.as_deref() == Some("Apply"),
                time: entry.time.as_ref().map(|t| t.0.as_second()),
            })
        },
    ));
    strip(&mut object);
    // Written as text straight from the typed object, its metadata read
    // from the typed fields: no `Value` is built of it.
    let metadata = &object.metadata;
    let owners = metadata
        .owner_references
        .iter()
        .flatten()
        .map(|owner| Owner {
            api_version: owner.api_version.as_str().into(),
            kind: owner.kind.as_str().into(),
            name: owner.name.as_str().into(),
            uid: owner.uid.as_str().into(),
            controller: owner.controller == Some(true),
        })
        .collect();
    let meta = Meta::new(
        Some(key.clone()),
        metadata.uid.as_deref(),
        metadata.resource_version.as_deref(),
        metadata
            .labels
            .iter()
            .flatten()
            .map(|(name, value)| (name.as_str(), value.as_str())),
        owners,
        metadata.deletion_timestamp.is_some(),
    );
    let json = serde_json::to_string(&object).ok()?;
    Some((
        Arc::new(key),
        Arc::new(CachedObject::from_parts(json, meta, appliers)),
    ))
}

/// Removes `managedFields` and the `last-applied-configuration` annotation.
fn strip(object: &mut DynamicObject) {
    let metadata = &mut object.metadata;
    metadata.managed_fields = None;
    if let Some(annotations) = &mut metadata.annotations {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        if annotations.is_empty() {
            metadata.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::time::Duration;

    fn config_maps() -> InformerKey {
        InformerKey {
            resource: ResourceType {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespaced: true,
            },
            namespace: None,
            selector: String::new(),
            shard: None,
        }
    }

    /// A handler recording the names it hears of.
    fn recorder() -> (Handler, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let handler: Handler = Arc::new(move |change: Change<'_>| {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(change.key().name.clone());
        });
        (handler, seen)
    }

    async fn until(what: &str, check: impl Fn() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("never: {what}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn subscribers_should_share_one_informer_and_free_it_when_the_last_leaves() {
        let (_server, client) = crate::testing::cluster().await;
        let informers = Informers::new(client.clone());
        let (first, first_seen) = recorder();
        let a = informers.subscribe(&config_maps(), first);
        a.store().wait_synced().await;
        let cms: Api<DynamicObject> =
            Api::namespaced_with(client, "default", &api_resource(&config_maps().resource));
        let cm: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}}),
        )
        .expect("object");
        cms.create(&kube::api::PostParams::default(), &cm)
            .await
            .expect("created");
        let seen = |s: &Arc<Mutex<Vec<String>>>| {
            s.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&"shared".to_owned())
        };
        until("the first subscriber hears of it", || seen(&first_seen)).await;

        // A late subscriber shares the store and first hears of what it holds.
        let (second, second_seen) = recorder();
        let b = informers.subscribe(&config_maps(), second);
        assert!(seen(&second_seen), "replayed at once");
        assert!(Arc::ptr_eq(a.store(), b.store()));
        assert_eq!(informers.running().len(), 1, "one watch for both");

        drop(a);
        assert_eq!(informers.running().len(), 1, "still held");
        drop(b);
        assert!(
            informers.running().is_empty(),
            "freed with the last subscriber"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_streaming_list_should_fill_the_store_like_a_paged_one() {
        let (_server, client) = crate::testing::cluster().await;
        let cms: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            "default",
            &api_resource(&config_maps().resource),
        );
        for name in ["before-1", "before-2"] {
            let cm: DynamicObject = serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
            )
            .expect("object");
            cms.create(&kube::api::PostParams::default(), &cm)
                .await
                .expect("created");
        }
        let names = |store: &Store| -> Vec<String> {
            store
                .list(Some("default"))
                .iter()
                .filter_map(|o| Some(o.key()?.name.clone()))
                .filter(|n| n.starts_with("before"))
                .collect()
        };
        let paged = Informers::new(client.clone());
        let streaming = Informers::new(client).with_initial_list(InitialList::Streaming);
        let (handler, seen) = recorder();
        let p = paged.subscribe(&config_maps(), Arc::new(|_| {}));
        let s = streaming.subscribe(&config_maps(), handler);
        let synced = async {
            p.store().wait_synced().await;
            s.store().wait_synced().await;
        };
        tokio::time::timeout(Duration::from_secs(20), synced)
            .await
            .expect("both listed (a streaming list ends with its bookmark)");
        assert_eq!(names(s.store()), ["before-1", "before-2"]);
        assert_eq!(names(s.store()), names(p.store()));
        assert_eq!(s.store().len(), p.store().len());
        let heard = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert!(heard.contains(&"before-2".to_owned()), "{heard:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_namespaced_informer_should_watch_and_hold_its_namespace_only() {
        let (_server, client) = crate::testing::cluster().await;
        let resource = api_resource(&config_maps().resource);
        for namespace in ["default", "kube-system"] {
            let cm: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1",
                "kind": "ConfigMap", "metadata": {"name": format!("in-{namespace}")}}))
            .expect("object");
            Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
                .create(&kube::api::PostParams::default(), &cm)
                .await
                .expect("created");
        }
        let informers = Informers::new(client);
        let scoped = InformerKey {
            namespace: Some("default".into()),
            ..config_maps()
        };
        let (handler, seen) = recorder();
        let one = informers.subscribe(&scoped, handler);
        let all = informers.subscribe(&config_maps(), Arc::new(|_| {}));
        one.store().wait_synced().await;
        all.store().wait_synced().await;
        assert_eq!(informers.running().len(), 2, "a watch per scope");
        assert_eq!(one.store().namespace(), Some("default"));
        let held = |store: &Store, name: &str| {
            let namespace = name.trim_start_matches("in-");
            store.get(&ObjectKey::namespaced(namespace, name)).is_some()
        };
        assert!(held(one.store(), "in-default") && !held(one.store(), "in-kube-system"));
        assert!(held(all.store(), "in-default") && held(all.store(), "in-kube-system"));
        assert!(one.store().list(Some("kube-system")).is_empty());
        let heard = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert!(
            heard.iter().all(|n| n != "in-kube-system"),
            "never told of another namespace: {heard:?}"
        );
    }

    /// A slot given up and taken back between two lists: the keys queued
    /// meanwhile were dropped (their steps refused, the slot not held), so
    /// the list that follows the new share tells of every object again,
    /// kept or new; a plain relist (a watch restarted) tells of none.
    #[test]
    fn a_new_share_should_list_again_the_objects_it_kept() {
        let store = Arc::new(Store::new(config_maps().resource, None));
        let (handler, seen) = recorder();
        let mut feed = Feed {
            types: TypeMeta {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            listing: Arc::clone(&store) as _,
            store,
            handlers: Arc::new(RwLock::new(HashMap::from([(0, handler)]))),
            relist: None,
            share: Some(Share::new(ShardField::Uid, u64::MAX)),
            reshard: false,
        };
        let object = |name: &str| -> DynamicObject {
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                    "resourceVersion": "1"}}))
            .expect("an object")
        };
        let list = |feed: &mut Feed, names: &[&str]| -> Vec<String> {
            feed.event(Event::Init);
            names
                .iter()
                .for_each(|n| feed.event(Event::InitApply(object(n))));
            feed.event(Event::InitDone);
            let mut told =
                std::mem::take(&mut *seen.lock().unwrap_or_else(PoisonError::into_inner));
            told.sort();
            told
        };
        assert_eq!(list(&mut feed, &["a", "b"]), ["a", "b"], "the first list");
        assert!(
            list(&mut feed, &["a", "b"]).is_empty(),
            "a relist of the same objects"
        );
        feed.reshard = true;
        assert_eq!(
            list(&mut feed, &["a", "b", "c"]),
            ["a", "b", "c"],
            "a new share: what it kept, and what is new"
        );
        assert!(!feed.reshard, "a list under the new share was told of");
    }

    #[test]
    fn a_list_item_without_its_type_should_be_cached_with_it() {
        // A real server's list items: no apiVersion, no kind.
        let item: DynamicObject =
            serde_json::from_value(json!({"metadata": {"name": "a", "namespace": "default"}}))
                .expect("an object");
        assert!(item.types.is_none());
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let (_, cached) = cached(item, &types).expect("named");
        assert_eq!(cached.value()["apiVersion"], "v1");
        assert_eq!(cached.value()["kind"], "ConfigMap");
    }

    #[test]
    fn an_object_should_be_cached_as_its_value_would_be() {
        let value = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1",
                "resourceVersion": "7", "deletionTimestamp": "2026-12-05T08:00:00Z",
                "labels": {"tier": "web", "app": "shop"},
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "MyApp",
                    "name": "shop", "uid": "u-0", "controller": true}],
                "managedFields": [
                    {"manager": "kubectl", "operation": "Update", "time": "2026-12-05T08:00:00Z"},
                    {"manager": "kubewasm-myapp", "operation": "Apply", "time": "2026-12-05T08:00:01Z"}]},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "shop"}}}}});
        let object: DynamicObject = serde_json::from_value(value.clone()).expect("an object");
        let types = TypeMeta {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
        };
        let mut stripped = object.clone();
        strip(&mut stripped);
        let stripped = serde_json::to_value(stripped).expect("a value");
        let (key, cached) = cached(object, &types).expect("named");
        let appliers = Appliers::of_managed_fields(value.pointer("/metadata/managedFields"));
        let expected = CachedObject::applied_by(stripped, appliers);
        assert_eq!(*cached, expected);
        assert!(cached.last_applied_by("kubewasm-myapp"));
        assert_eq!(*key, ObjectKey::namespaced("team-a", "web"));
        assert_eq!(cached.label("app"), Some("shop"));
        assert!(cached.deleting() && cached.owners()[0].controller);
    }

    #[test]
    fn strip_should_drop_managed_fields_and_last_applied_only() {
        let object =
            |value: Value| -> DynamicObject { serde_json::from_value(value).expect("an object") };
        let cached_value = |value: Value| {
            let types = TypeMeta {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            };
            let (_, cached) = cached(object(value), &types).expect("named");
            cached.value()
        };
        let stripped = cached_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "managedFields": [{"manager": "x"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"}}}));
        assert_eq!(
            stripped["metadata"],
            json!({"name": "a", "annotations": {"keep": "me"}})
        );
        let only = cached_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}));
        assert_eq!(only["metadata"], json!({"name": "a"}));
        assert_eq!(only["kind"], "ConfigMap");
    }
}
