//! One informer's objects: what its watch delivered, by key, each kept
//! parsed and as JSON text; read by plugins' caches and walked by queues.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::listing::Key;
use super::listing::Keys;
use kubewasm_runtime::cache::CachedObject;
use kubewasm_runtime::resource::{ObjectKey, ResourceType};

pub(super) type Objects = BTreeMap<Key, Arc<CachedObject>>;

/// How far apart a failing watch's failures come at most: its backoff
/// grows to 30 s (with jitter).
const FAILURES_APART: Duration = Duration::from_secs(60);

/// One informer's objects.
#[derive(Debug)]
pub struct Store {
    resource: ResourceType,
    namespace: Option<String>,
    objects: RwLock<Objects>,
    pub(super) synced: watch::Sender<bool>,
    pub(super) restarts: AtomicU64,
    /// Its watch's first and last failures since it last worked: `None`
    /// while it works.
    failing: Mutex<Option<(Instant, Instant)>>,
}

impl Store {
    pub(super) fn new(resource: ResourceType, namespace: Option<String>) -> Self {
        Self {
            resource,
            namespace,
            objects: RwLock::default(),
            synced: watch::Sender::new(false),
            restarts: AtomicU64::new(0),
            failing: Mutex::new(None),
        }
    }

    /// The type this store holds.
    pub fn resource(&self) -> &ResourceType {
        &self.resource
    }

    /// The one namespace it holds; `None`: every namespace.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The object with this key.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.read().get(key).cloned()
    }

    /// Objects in `namespace` (all when `None`), by namespace then name.
    pub fn list(&self, namespace: Option<&str>) -> Vec<Arc<CachedObject>> {
        let objects = self.read();
        match namespace {
            None => objects.values().cloned().collect(),
            Some(ns) => {
                let start = ObjectKey::namespaced(ns, "");
                objects
                    .range::<ObjectKey, _>(start..)
                    .take_while(|(k, _)| k.namespace.as_deref() == Some(ns))
                    .map(|(_, o)| Arc::clone(o))
                    .collect()
            }
        }
    }

    /// The keys of every object held, by namespace then name.
    pub fn keys(&self) -> Vec<Key> {
        self.read().keys().cloned().collect()
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Whether the first list is complete.
    pub fn synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first list is complete.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        // The sender lives as long as the store.
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Times the watch restarted after an error.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Records a failure of its watch (which is retried with backoff).
    pub(super) fn watch_failed(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        let first = failing.map_or(now, |(first, _)| first);
        *failing = Some((first, now));
    }

    /// Records an event of its watch: it works.
    pub(super) fn watch_worked(&self) {
        *self.failing.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// How long its watch has been failing: from its first failure, while
    /// failures keep coming (the last within [`FAILURES_APART`]; a watch
    /// that came back on a quiet type delivers no event to say so).
    pub fn watch_down_for(&self) -> Option<Duration> {
        let failing = *self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        let (first, last) = failing?;
        (last.elapsed() < FAILURES_APART).then(|| first.elapsed())
    }

    pub(super) fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects> {
        self.objects.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Keys for Store {
    fn first_after(&self, after: Option<&ObjectKey>) -> Option<Key> {
        let objects = self.read();
        match after {
            None => objects.keys().next().cloned(),
            Some(after) => objects
                .range::<ObjectKey, _>((Bound::Excluded(after), Bound::Unbounded))
                .next()
                .map(|(k, _)| Arc::clone(k)),
        }
    }

    fn count_after(&self, after: Option<&ObjectKey>) -> usize {
        let objects = self.read();
        match after {
            None => objects.len(),
            Some(after) => objects
                .range::<ObjectKey, _>((Bound::Excluded(after), Bound::Unbounded))
                .count(),
        }
    }

    fn holds(&self, key: &ObjectKey) -> bool {
        self.read().contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::resource::ResourceType;

    #[tokio::test(start_paused = true)]
    async fn a_watch_should_be_down_from_its_first_failure_while_failures_keep_coming() {
        let resource: ResourceType =
            serde_json::from_value(serde_json::json!({"group": "", "version": "v1",
                "kind": "ConfigMap", "plural": "configmaps", "namespaced": true}))
            .expect("a type");
        let store = Store::new(resource, None);
        assert_eq!(store.watch_down_for(), None);
        store.watch_failed();
        tokio::time::advance(Duration::from_secs(10)).await;
        store.watch_failed();
        assert_eq!(store.watch_down_for(), Some(Duration::from_secs(10)));
        assert_eq!(store.restarts(), 2);
        store.watch_worked();
        assert_eq!(store.watch_down_for(), None);
        // Failures that stop without an event: the watch came back on a
        // quiet type.
        store.watch_failed();
        tokio::time::advance(FAILURES_APART - Duration::from_millis(1)).await;
        assert!(store.watch_down_for().is_some());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(store.watch_down_for(), None);
    }
}
