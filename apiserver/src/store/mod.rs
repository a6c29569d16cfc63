//! The versioned object store: one generic store for every resource type.
//!
//! Objects are JSON values filed by [`ResourceKey`] (group and plural) and
//! [`ObjectKey`] (namespace and name). The store knows nothing of kinds,
//! schemas or subresources; the API layer does. It owns what etcd and the
//! apiserver's watch cache own: versions, history, watches and snapshots.
//!
//! # Guarantees
//! - One global resourceVersion (RV), shared by every type and strictly
//!   increasing: each change takes the next one, like an etcd revision.
//! - A write that changes nothing (the new object equals the stored one,
//!   `metadata.resourceVersion` aside) keeps the RV and records no event,
//!   so server-side-apply reconcilers do not hot-loop.
//! - Every change is recorded as an [`Event`] in a bounded history. A
//!   [`Watcher`] started at RV `n` yields every event of its resource with
//!   an RV above `n`, in RV order, with no gap and no duplicate, for as long
//!   as the history still holds them; past that it gets
//!   [`StoreError::Expired`] (served to clients as a 410 ERROR event).
//! - [`Store::list`] returns a snapshot at one RV. Asking again for the same
//!   RV (a later page of the same list) returns the same snapshot while it
//!   is among the last few taken, or else rebuilds it from the history, or
//!   fails with `Expired` once the history is compacted past it.
//! - Changes are durable before they are acknowledged or watched (see
//!   [`persist`]); a get or a list may show a change a few
//!   milliseconds before its commit completes.
//! - A deleted object's last event carries it stamped with the deletion RV.
//!
//! Beside it: [`index`] (objects by uid and by owner uid), [`persist`] (the
//! database behind `--data-dir`), [`seed`] (what a fresh cluster holds).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kubewasm_core::ObjectKey;
use serde_json::Value;
use tokio::sync::Notify;

use addresses::Addresses;
use index::Indexes;
use persist::{PersistError, Persistence};

mod addresses;
mod history;
pub(crate) mod index;
pub mod persist;
pub mod private;
pub mod seed;

/// Default number of events the history keeps.
pub const DEFAULT_HISTORY: usize = 10_000;

/// Default bound of the history in bytes: what the objects of its events
/// take as JSON. Events of big objects are compacted sooner.
pub const DEFAULT_HISTORY_BYTES: usize = 256 << 20;

pub use addresses::{AddressError, NODE_PORTS, Reservation, SERVICE_RANGE};
pub use kubewasm_types::info::ResourceKey;

/// Which version of a list to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListAt {
    /// The current state.
    Latest,
    /// Exactly this RV (a continued list, or `resourceVersionMatch=Exact`).
    Exact(u64),
    /// This RV or newer (`resourceVersionMatch=NotOlderThan`); served at the
    /// current RV.
    NotOlderThan(u64),
}

/// A list snapshot.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The RV the snapshot shows.
    pub rv: u64,
    /// The objects, ordered by namespace then name.
    pub items: Arc<[Arc<Value>]>,
}

/// How many list snapshots the store keeps, so that the pages of a list
/// share one snapshot instead of rebuilding it from the history each.
const SNAPSHOTS_KEPT: usize = 8;

/// What a kept snapshot shows.
#[derive(Debug, PartialEq, Eq)]
struct SnapshotKey {
    resource: ResourceKey,
    namespace: Option<String>,
    rv: u64,
}

/// A watch on the store: see [`Store::watch`].
#[derive(Debug)]
pub struct Watcher {
    store: Store,
    resource: Option<ResourceKey>,
    /// Every event at or below this RV has been yielded or skipped.
    position: u64,
}

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// It was created.
    Added,
    /// It changed.
    Modified,
    /// It was removed.
    Deleted,
}

impl EventType {
    /// The watch event type as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as recorded in the history.
#[derive(Clone, Debug)]
pub struct Event {
    /// The RV the change took.
    pub rv: u64,
    /// The object's type.
    pub resource: ResourceKey,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for a deletion, its last state,
    /// stamped with the deletion RV).
    pub object: Arc<Value>,
    /// The object before the change (none for a creation): lets watchers
    /// with selectors see an object leave or enter their selection, and
    /// lets snapshots be rebuilt.
    pub previous: Option<Arc<Value>>,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// The object exists already.
    #[error("{resource} \"{key}\" already exists")]
    AlreadyExists {
        /// Its type.
        resource: ResourceKey,
        /// Its key.
        key: ObjectKey,
    },
    /// There is no such object.
    #[error("{resource} \"{key}\" not found")]
    NotFound {
        /// Its type.
        resource: ResourceKey,
        /// Its key.
        key: ObjectKey,
    },
    /// The RV asked for is older than the history reaches.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The RV asked for.
        requested: u64,
        /// The oldest RV still served.
        oldest: u64,
    },
    /// The RV asked for is newer than the store's.
    #[error("too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The RV asked for.
        requested: u64,
        /// The store's RV.
        current: u64,
    },
    /// The database failed: the write is refused, or was not kept.
    #[error(transparent)]
    Persist(#[from] PersistError),
}

type Objects = BTreeMap<ObjectKey, Arc<Value>>;

#[derive(Debug)]
struct State {
    rv: u64,
    objects: BTreeMap<ResourceKey, Objects>,
    /// Events, oldest first, with their objects' size in bytes.
    history: VecDeque<(Event, usize)>,
    capacity: usize,
    /// Bytes of the objects in the history (as JSON), and their bound.
    history_bytes: usize,
    capacity_bytes: usize,
    /// Events with an RV at or below this are gone from the history.
    compacted: u64,
    /// The latest list snapshots taken, oldest first.
    snapshots: VecDeque<(SnapshotKey, Arc<[Arc<Value>]>)>,
    /// Objects by uid and by owner uid.
    indexes: Indexes,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// The Services' addresses in use: taken after `state`, never before.
    addresses: Arc<Mutex<Addresses>>,
    /// Woken by every change, and by the database when the durable RV
    /// moves.
    changed: Arc<Notify>,
    persistence: Option<Persistence>,
}

/// The store. Cheap to clone: clones share the same state.
#[derive(Clone, Debug)]
pub struct Store {
    shared: Arc<Shared>,
}

/// What a write did.
#[derive(Clone, Debug)]
pub struct Written {
    /// The stored object, stamped with its RV.
    pub object: Arc<Value>,
    /// False when the write changed nothing (no new RV, no event).
    pub changed: bool,
}

impl Default for Store {
    fn default() -> Self {
        Self::new(DEFAULT_HISTORY)
    }
}

/// Whether objects of `resource` are Services (whose addresses the store
/// keeps).
fn is_service(resource: &ResourceKey) -> bool {
    resource.group.is_empty() && resource.plural == "services"
}

/// Sets `metadata.resourceVersion`.
fn stamp(object: &mut Value, rv: u64) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// The metadata collections Go's `ObjectMeta` leaves out when empty
/// (`omitempty`): a real server never stores `ownerReferences: []`.
const OMITTED_WHEN_EMPTY: [&str; 5] = [
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `object` as a real server stores it: empty metadata collections left
/// out (an orphaned dependent's last reference removed, a user's
/// `labels: {}`).
fn omit_empty_metadata(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in OMITTED_WHEN_EMPTY {
            let empty = match metadata.get(field) {
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                metadata.shift_remove(field);
            }
        }
    }
}

/// Equal but for `metadata.resourceVersion`.
fn same_content(a: &Value, b: &Value) -> bool {
    let rv = |v: &Value| v.pointer("/metadata/resourceVersion").cloned();
    if rv(a) == rv(b) {
        return a == b;
    }
    let mut b = b.clone();
    match rv(a) {
        Some(version) => {
            if let Some(m) = b.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("resourceVersion".into(), version);
            }
        }
        None => {
            if let Some(m) = b.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
        }
    }
    *a == b
}

impl Store {
    /// An empty store keeping `history` events (at least one).
    pub fn new(history: usize) -> Self {
        Self::starting_at(0, history)
    }

    /// An empty store keeping `history` events and at most `bytes` bytes of
    /// their objects.
    pub fn bounded(history: usize, bytes: usize) -> Self {
        let store = Self::new(history);
        store.state().capacity_bytes = bytes;
        store
    }

    /// An empty store whose next write takes RV `rv + 1`.
    pub fn starting_at(rv: u64, history: usize) -> Self {
        Self::build(rv, BTreeMap::new(), history, None, Arc::default())
    }

    /// A store kept in the database in `dir` (see [`persist`]): what
    /// it holds is loaded, and every write is recorded there.
    ///
    /// # Errors
    /// [`PersistError`] if the database cannot be opened or read.
    pub fn open(dir: &std::path::Path, history: usize) -> Result<Self, PersistError> {
        let changed = Arc::new(Notify::new());
        let persistence = Persistence::open(dir, Arc::clone(&changed))?;
        let (rv, loaded) = persistence.load()?;
        let mut objects: BTreeMap<ResourceKey, Objects> = BTreeMap::new();
        for (resource, key, value) in loaded {
            objects
                .entry(resource)
                .or_default()
                .insert(key, Arc::new(value));
        }
        Ok(Self::build(
            rv,
            objects,
            history,
            Some(persistence),
            changed,
        ))
    }

    fn build(
        rv: u64,
        objects: BTreeMap<ResourceKey, Objects>,
        history: usize,
        persistence: Option<Persistence>,
        changed: Arc<Notify>,
    ) -> Self {
        let mut indexes = Indexes::default();
        let mut addresses = Addresses::default();
        for (resource, stored) in &objects {
            for (key, object) in stored {
                indexes.update(&(resource.clone(), key.clone()), None, Some(object));
                if is_service(resource) {
                    addresses.follow(None, Some(object));
                }
            }
        }
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    rv,
                    objects,
                    history: VecDeque::new(),
                    capacity: history.max(1),
                    history_bytes: 0,
                    capacity_bytes: DEFAULT_HISTORY_BYTES,
                    compacted: rv,
                    snapshots: VecDeque::new(),
                    indexes,
                }),
                addresses: Arc::new(Mutex::new(addresses)),
                changed,
                persistence,
            }),
        }
    }

    /// Waits until every change at or below `rv` is durable (at once in
    /// memory): what a write waits for before it is acknowledged.
    ///
    /// # Errors
    /// [`StoreError::Persist`] once the database has failed.
    pub async fn synced(&self, rv: u64) -> Result<(), StoreError> {
        let Some(persistence) = &self.shared.persistence else {
            return Ok(());
        };
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            persistence.check()?;
            if persistence.durable_rv() >= rv {
                return Ok(());
            }
            changed.await;
        }
    }

    /// Waits until every write so far is durable.
    ///
    /// # Errors
    /// [`StoreError::Persist`] once the database has failed.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.synced(self.current_rv()).await
    }

    /// The RV up to which watchers may see: the durable one, so nobody
    /// watches a change a crash could take back.
    fn visible_rv(&self, state: &State) -> u64 {
        self.shared
            .persistence
            .as_ref()
            .map_or(state.rv, Persistence::durable_rv)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half
        // written: every mutation below completes before it can panic.
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn addresses(&self) -> MutexGuard<'_, Addresses> {
        addresses::lock(&self.shared.addresses)
    }

    /// Addresses for a Service being created, held until the create
    /// commits ([`Reservation::keep`]) and freed if it does not.
    pub fn reservation(&self) -> Reservation {
        Reservation::new(Arc::clone(&self.shared.addresses))
    }

    /// The work the address allocators did so far (probes of their ranges).
    pub fn address_probes(&self) -> u64 {
        self.addresses().probes()
    }

    /// The current RV.
    pub fn current_rv(&self) -> u64 {
        self.state().rv
    }

    /// The oldest RV a watch or an exact list can still start from.
    pub fn oldest_rv(&self) -> u64 {
        self.state().compacted
    }

    /// One object.
    pub fn get(&self, resource: &ResourceKey, key: &ObjectKey) -> Option<Arc<Value>> {
        self.state().objects.get(resource)?.get(key).cloned()
    }

    /// The object with `uid`, with its type (an index lookup).
    pub fn by_uid(&self, uid: &str) -> Option<(ResourceKey, Arc<Value>)> {
        let state = self.state();
        let (resource, key) = state.indexes.by_uid(uid)?;
        let object = state.objects.get(resource)?.get(key)?;
        Some((resource.clone(), Arc::clone(object)))
    }

    /// The objects naming `owner` (a uid) in their `ownerReferences`, with
    /// their types (an index lookup).
    pub fn dependents(&self, owner: &str) -> Vec<(ResourceKey, Arc<Value>)> {
        let state = self.state();
        state
            .indexes
            .dependents(owner)
            .filter_map(|(resource, key)| {
                let object = state.objects.get(resource)?.get(key)?;
                Some((resource.clone(), Arc::clone(object)))
            })
            .collect()
    }

    /// The current objects of `resource` (in `namespace`, or all), in key
    /// order: a read of what is, for a controller, which records no list
    /// snapshot (a snapshot keeps the versions it holds alive).
    pub fn objects(&self, resource: &ResourceKey, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.state().current(resource, namespace).cloned().collect()
    }

    /// Every object of every type in `namespace`, with its type (one range
    /// read per type).
    pub fn in_namespace(&self, namespace: &str) -> Vec<(ResourceKey, Arc<Value>)> {
        let state = self.state();
        state
            .objects
            .keys()
            .flat_map(|resource| {
                state
                    .current(resource, Some(namespace))
                    .map(move |o| (resource.clone(), Arc::clone(o)))
            })
            .collect()
    }

    /// Every stored object `pick` selects, with its type: a scan of the whole
    /// store under one lock (the collector's sweep after it fell behind).
    pub fn find(&self, pick: impl Fn(&Value) -> bool) -> Vec<(ResourceKey, Arc<Value>)> {
        let state = self.state();
        state
            .objects
            .iter()
            .flat_map(|(resource, objects)| objects.values().map(move |o| (resource, o)))
            .filter(|(_, o)| pick(o))
            .map(|(r, o)| (r.clone(), Arc::clone(o)))
            .collect()
    }

    /// Commits one change under the lock: takes the next RV, stamps the
    /// object with it, writes the database, updates memory, records the
    /// event, wakes the watchers. `previous` is none for a creation; a
    /// deletion removes the object and records its last state.
    fn commit(
        &self,
        mut state: MutexGuard<'_, State>,
        resource: &ResourceKey,
        key: &ObjectKey,
        kind: EventType,
        mut object: Value,
        previous: Option<Arc<Value>>,
    ) -> Result<Arc<Value>, StoreError> {
        let rv = state.rv + 1;
        omit_empty_metadata(&mut object);
        stamp(&mut object, rv);
        let encoded = serde_json::to_vec(&object)
            .map_err(|e| StoreError::Persist(PersistError::Io(e.to_string())))?;
        let bytes = encoded.len();
        if let Some(persistence) = &self.shared.persistence {
            let kept = (kind != EventType::Deleted).then_some(encoded);
            persistence.record(rv, resource, key, kept)?;
        }
        let object = Arc::new(object);
        state.rv = rv;
        let after = (kind != EventType::Deleted).then_some(object.as_ref());
        state
            .indexes
            .update(&(resource.clone(), key.clone()), previous.as_deref(), after);
        if is_service(resource) {
            self.addresses().follow(previous.as_deref(), after);
        }
        let objects = state.objects.entry(resource.clone()).or_default();
        if kind == EventType::Deleted {
            objects.remove(key);
        } else {
            objects.insert(key.clone(), Arc::clone(&object));
        }
        state.record(
            Event {
                rv,
                resource: resource.clone(),
                kind,
                object: Arc::clone(&object),
                previous,
            },
            bytes,
        );
        drop(state);
        self.shared.changed.notify_waiters();
        Ok(object)
    }

    /// The stored object, or [`StoreError::NotFound`].
    fn existing(
        state: &State,
        resource: &ResourceKey,
        key: &ObjectKey,
    ) -> Result<Arc<Value>, StoreError> {
        state
            .objects
            .get(resource)
            .and_then(|o| o.get(key))
            .cloned()
            .ok_or_else(|| StoreError::NotFound {
                resource: resource.clone(),
                key: key.clone(),
            })
    }

    /// Creates an object; fails if it exists.
    ///
    /// # Errors
    /// [`StoreError::AlreadyExists`].
    pub fn create(
        &self,
        resource: &ResourceKey,
        key: &ObjectKey,
        object: Value,
    ) -> Result<Arc<Value>, StoreError> {
        let state = self.state();
        if state
            .objects
            .get(resource)
            .is_some_and(|o| o.contains_key(key))
        {
            return Err(StoreError::AlreadyExists {
                resource: resource.clone(),
                key: key.clone(),
            });
        }
        self.commit(state, resource, key, EventType::Added, object, None)
    }

    /// Replaces an object with what `update` makes of the current one, under
    /// the store's lock (etcd's GuaranteedUpdate). `update` does the
    /// caller's checks (preconditions, conflicts, validation) and may fail.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (converted into `E`), or `update`'s error.
    pub fn update<E: From<StoreError>>(
        &self,
        resource: &ResourceKey,
        key: &ObjectKey,
        update: impl FnOnce(&Value) -> Result<Value, E>,
    ) -> Result<Written, E> {
        let state = self.state();
        let current = Self::existing(&state, resource, key)?;
        let mut next = update(&current)?;
        omit_empty_metadata(&mut next);
        if same_content(&current, &next) {
            return Ok(Written {
                object: current,
                changed: false,
            });
        }
        let object = self.commit(
            state,
            resource,
            key,
            EventType::Modified,
            next,
            Some(current),
        )?;
        Ok(Written {
            object,
            changed: true,
        })
    }

    /// Removes an object once `check` accepts it (preconditions); returns
    /// its last state, stamped with the deletion RV.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (converted into `E`), or `check`'s error.
    pub fn delete<E: From<StoreError>>(
        &self,
        resource: &ResourceKey,
        key: &ObjectKey,
        check: impl FnOnce(&Value) -> Result<(), E>,
    ) -> Result<Arc<Value>, E> {
        let state = self.state();
        let current = Self::existing(&state, resource, key)?;
        check(&current)?;
        let last = (*current).clone();
        Ok(self.commit(
            state,
            resource,
            key,
            EventType::Deleted,
            last,
            Some(current),
        )?)
    }
}

impl State {
    /// Appends an event of `bytes` bytes, compacting the oldest ones past
    /// either bound (events or bytes; the newest event always stays).
    fn record(&mut self, event: Event, bytes: usize) {
        self.history.push_back((event, bytes));
        self.history_bytes += bytes;
        while self.history.len() > 1
            && (self.history.len() > self.capacity || self.history_bytes > self.capacity_bytes)
            && let Some((oldest, size)) = self.history.pop_front()
        {
            self.history_bytes -= size;
            self.compacted = oldest.rv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cms() -> ResourceKey {
        ResourceKey::new("", "configmaps")
    }

    fn cm(ns: &str, name: &str, data: &str) -> (ObjectKey, Value) {
        (
            ObjectKey::namespaced(ns, name),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"k": data}}),
        )
    }

    fn rv_of(v: &Value) -> u64 {
        v.pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    fn set_data(value: &str) -> impl FnOnce(&Value) -> Result<Value, StoreError> + '_ {
        move |current| {
            let mut next = current.clone();
            next["data"]["k"] = json!(value);
            Ok(next)
        }
    }

    #[test]
    fn empty_metadata_collections_should_be_left_out_as_go_leaves_them() {
        let store = Store::new(10);
        let cms = cms();
        let key = ObjectKey::namespaced("default", "a");
        let created = store
            .create(
                &cms,
                &key,
                json!({"metadata": {"name": "a", "namespace": "default", "labels": {},
                                    "finalizers": [], "annotations": {"k": "v"}}}),
            )
            .expect("created");
        assert_eq!(
            created["metadata"],
            json!({"name": "a", "namespace": "default", "annotations": {"k": "v"}, "resourceVersion": "1"})
        );
        // An orphaned dependent's last owner reference removed: no list left.
        let orphaned = store
            .update::<StoreError>(&cms, &key, |current| {
                let mut next = current.clone();
                next["metadata"]["ownerReferences"] = json!([]);
                Ok(next)
            })
            .expect("updated");
        assert!(!orphaned.changed, "an empty list is no change");
        assert!(orphaned.object["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn writes_should_take_increasing_rvs_shared_by_all_types() {
        let store = Store::default();
        let (k1, v1) = cm("a", "x", "1");
        let first = store.create(&cms(), &k1, v1).expect("created");
        let secrets = ResourceKey::new("", "secrets");
        let second = store
            .create(
                &secrets,
                &k1,
                json!({"metadata": {"name": "x", "namespace": "a"}}),
            )
            .expect("created");
        let updated = store.update(&cms(), &k1, set_data("2")).expect("updated");
        assert_eq!(
            (rv_of(&first), rv_of(&second), rv_of(&updated.object)),
            (1, 2, 3)
        );
        assert_eq!(store.current_rv(), 3);
    }

    #[test]
    fn create_should_refuse_duplicates_and_update_missing_objects() {
        let store = Store::default();
        let (key, value) = cm("a", "x", "1");
        store.create(&cms(), &key, value.clone()).expect("created");
        assert!(matches!(
            store.create(&cms(), &key, value),
            Err(StoreError::AlreadyExists { .. })
        ));
        let missing = ObjectKey::namespaced("a", "nope");
        assert!(matches!(
            store.update(&cms(), &missing, set_data("1")),
            Err(StoreError::NotFound { .. })
        ));
    }

    #[test]
    fn noop_update_should_keep_the_rv_and_record_nothing() {
        let store = Store::default();
        let (key, value) = cm("a", "x", "1");
        store.create(&cms(), &key, value).expect("created");
        let mut watcher = store.watch(Some(cms()), 1).expect("watch");
        let written = store.update(&cms(), &key, set_data("1")).expect("no-op");
        assert!(!written.changed);
        assert_eq!(store.current_rv(), 1);
        assert!(watcher.try_next().expect("not expired").is_none());
    }

    #[test]
    fn watch_should_see_every_event_after_its_start_in_order() {
        let store = Store::default();
        let (key, value) = cm("a", "x", "1");
        store.create(&cms(), &key, value).expect("created");
        let mut from_zero = store.watch(Some(cms()), 0).expect("watch");
        let mut from_one = store.watch(Some(cms()), 1).expect("watch");
        store.update(&cms(), &key, set_data("2")).expect("updated");
        store
            .create(
                &ResourceKey::new("", "secrets"),
                &key,
                json!({"metadata": {"name": "x"}}),
            )
            .expect("other type");
        let last = store
            .delete::<StoreError>(&cms(), &key, |_| Ok(()))
            .expect("deleted");
        assert_eq!(rv_of(&last), 4, "a deletion is stamped with its own RV");

        let kinds = |w: &mut Watcher| {
            std::iter::from_fn(|| w.try_next().expect("not expired"))
                .map(|e| (e.rv, e.kind))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kinds(&mut from_zero),
            [
                (1, EventType::Added),
                (2, EventType::Modified),
                (4, EventType::Deleted)
            ]
        );
        assert_eq!(
            kinds(&mut from_one),
            [(2, EventType::Modified), (4, EventType::Deleted)]
        );
        assert_eq!(from_one.position(), 4);
    }

    #[test]
    fn watch_should_expire_once_the_history_moves_past_it() {
        let store = Store::new(2);
        let (key, value) = cm("a", "x", "0");
        store.create(&cms(), &key, value).expect("created");
        let mut slow = store.watch(Some(cms()), 1).expect("watch");
        for i in 1..=3 {
            store
                .update(&cms(), &key, set_data(&i.to_string()))
                .expect("updated");
        }
        assert_eq!(store.oldest_rv(), 2);
        assert!(matches!(
            slow.try_next(),
            Err(StoreError::Expired {
                requested: 1,
                oldest: 2
            })
        ));
        assert!(matches!(
            store.watch(None, 1),
            Err(StoreError::Expired { .. })
        ));
        assert!(matches!(
            store.watch(None, 9),
            Err(StoreError::TooLarge { .. })
        ));
        assert!(store.watch(None, 2).is_ok());
    }

    #[test]
    fn exact_list_should_rebuild_the_snapshot_from_history() {
        let store = Store::default();
        let (kx, vx) = cm("a", "x", "1");
        let (ky, vy) = cm("b", "y", "1");
        store.create(&cms(), &kx, vx).expect("x");
        store.create(&cms(), &ky, vy).expect("y");
        let at_two = store.list(&cms(), None, ListAt::Latest).expect("list");
        assert_eq!(at_two.rv, 2);

        store.update(&cms(), &kx, set_data("2")).expect("x changes");
        store
            .delete::<StoreError>(&cms(), &ky, |_| Ok(()))
            .expect("y goes");
        let (kz, vz) = cm("a", "z", "1");
        store.create(&cms(), &kz, vz).expect("z comes");

        let again = store.list(&cms(), None, ListAt::Exact(2)).expect("rebuilt");
        assert_eq!(again.rv, 2);
        assert_eq!(
            again
                .items
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>(),
            at_two
                .items
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
        );
        let latest = store
            .list(&cms(), Some("a"), ListAt::Latest)
            .expect("latest");
        let names: Vec<_> = latest
            .items
            .iter()
            .map(|v| v["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("x"), json!("z")]);
        assert!(matches!(
            store.list(&cms(), None, ListAt::Exact(99)),
            Err(StoreError::TooLarge { .. })
        ));
    }

    #[test]
    fn exact_list_should_expire_with_the_history() {
        let store = Store::new(1);
        let (key, value) = cm("a", "x", "0");
        store.create(&cms(), &key, value).expect("created");
        store.update(&cms(), &key, set_data("1")).expect("updated");
        store.update(&cms(), &key, set_data("2")).expect("updated");
        assert!(matches!(
            store.list(&cms(), None, ListAt::Exact(1)),
            Err(StoreError::Expired { .. })
        ));
    }

    #[tokio::test]
    async fn next_should_wake_on_a_write_from_another_task() {
        let store = Store::default();
        let mut watcher = store.watch(Some(cms()), 0).expect("watch");
        let writer = store.clone();
        let task = tokio::spawn(async move {
            tokio::task::yield_now().await;
            let (key, value) = cm("a", "x", "1");
            writer.create(&cms(), &key, value).expect("created");
        });
        let event = tokio::time::timeout(std::time::Duration::from_secs(5), watcher.next())
            .await
            .expect("woken")
            .expect("not expired");
        assert_eq!((event.rv, event.kind), (1, EventType::Added));
        task.await.expect("writer");
    }

    #[test]
    fn history_should_be_bounded_in_bytes() {
        let store = Store::bounded(1000, 10_000);
        let (key, mut value) = cm("a", "x", "0");
        value["data"]["k"] = json!("y".repeat(3_000));
        store.create(&cms(), &key, value).expect("created");
        for i in 0..5 {
            store
                .update(&cms(), &key, set_data(&format!("{i}{}", "z".repeat(3_000))))
                .expect("updated");
        }
        // Six events of ~3 KB each; 10 KB keeps the last three.
        assert_eq!(store.oldest_rv(), 3);
        assert!(matches!(
            store.watch(Some(cms()), 2),
            Err(StoreError::Expired { .. })
        ));
        assert!(store.watch(Some(cms()), 3).is_ok());
    }

    #[test]
    fn snapshots_should_be_scoped_ordered_and_reused_by_later_pages() {
        let store = Store::default();
        for (ns, name) in [("a-b", "y"), ("a", "x"), ("b", "z"), ("a", "w")] {
            let (key, value) = cm(ns, name, "0");
            store.create(&cms(), &key, value).expect("created");
        }
        let all = store.list(&cms(), None, ListAt::Latest).expect("list");
        let keys: Vec<_> = all.items.iter().filter_map(|o| ObjectKey::of(o)).collect();
        assert_eq!(
            keys,
            [
                ObjectKey::namespaced("a", "w"),
                ObjectKey::namespaced("a", "x"),
                ObjectKey::namespaced("a-b", "y"),
                ObjectKey::namespaced("b", "z")
            ]
        );
        let a = store.list(&cms(), Some("a"), ListAt::Latest).expect("list");
        assert_eq!(a.items.len(), 2);
        let (key, value) = cm("a", "v", "0");
        store.create(&cms(), &key, value).expect("created");
        // The later page sees the same snapshot, the very same one.
        let again = store
            .list(&cms(), None, ListAt::Exact(all.rv))
            .expect("page");
        assert!(Arc::ptr_eq(&again.items, &all.items));
        let a_again = store
            .list(&cms(), Some("a"), ListAt::Exact(a.rv))
            .expect("page");
        assert_eq!(a_again.items.len(), 2);
    }
}
