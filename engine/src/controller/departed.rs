//! Primaries that left the plugin's `primary-selector` while holding its
//! managed finalizer: they get `finalize` (a decorator's cleanup), not
//! silence.
//!
//! # Why
//! The primary's informer watches only the objects its selector takes, so
//! an object that stops matching looks deleted to it. A really deleted
//! object never holds the plugin's finalizer in its last state (the API
//! server removes an object only once its finalizers are gone, the host's
//! last among them), so one that does has left the selector (or the watch
//! lost sight of it): the plugin must clean up for it and let go.
//!
//! # Rules
//! - Its last state is kept, by key, until `finalize` succeeded and the
//!   finalizer was removed (the removal's patch tests its uid, so a new
//!   object of the same name is never touched); seen again by the primary's
//!   informer (back in the selector), it is forgotten.
//! - The key's step runs `finalize` against the plugin's cache with that
//!   state as the primary ([`WithPrimary`]: a `get` of it finds it, a list
//!   of its type does not, as it is outside the selector): what the host
//!   saw last of it, since it no longer caches it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kubewasm_runtime::cache::{Cache, CachedObject};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use kubewasm_runtime::selector::Selector;
use serde_json::Value;

use crate::listing::Key;

/// The primaries that left the selector holding the finalizer (see the
/// module documentation), by key.
#[derive(Default)]
pub(super) struct Departed(Mutex<HashMap<Key, Arc<CachedObject>>>);

impl Departed {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<CachedObject>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The primary's informer no longer shows `key`, last seen as `last`:
    /// kept if it holds `finalizer`.
    pub(super) fn gone(&self, key: &Key, last: &Arc<CachedObject>, finalizer: &str) {
        let holds = last
            .value()
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|v| v == finalizer));
        if holds {
            self.lock().insert(Arc::clone(key), Arc::clone(last));
        }
    }

    /// The primary's informer shows `key` (again): nothing to let go.
    pub(super) fn back(&self, key: &ObjectKey) {
        let mut departed = self.lock();
        if !departed.is_empty() {
            departed.remove(key);
        }
    }

    /// Where a ring places `key` that departed: by the uid it had (placed
    /// by namespace, its key places it, as the cache does).
    pub(super) fn hash_of(&self, key: &ObjectKey) -> Option<u64> {
        let last = self.get(key)?;
        Some(kubewasm_core::shard::place(Some(last.uid()?)))
    }

    /// The last state of `key`, if it departed.
    pub(super) fn get(&self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.lock().get(key).cloned()
    }
}

/// A plugin's cache with one primary that is no longer in it.
pub(super) struct WithPrimary {
    pub(super) inner: Arc<dyn Cache>,
    pub(super) resource: ResourceType,
    pub(super) key: ObjectKey,
    pub(super) object: Arc<CachedObject>,
}

impl Cache for WithPrimary {
    fn get(&self, resource: &ResourceType, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        let primary = resource.same_kind(&self.resource) && *key == self.key;
        if primary {
            Some(Arc::clone(&self.object))
        } else {
            self.inner.get(resource, key)
        }
    }

    fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Arc<CachedObject>> {
        self.inner.list(resource, namespace, selector)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(finalizers: Value) -> Arc<CachedObject> {
        Arc::new(CachedObject::new(json!({"metadata": {
            "name": "a", "namespace": "default", "uid": "u-a", "finalizers": finalizers}})))
    }

    #[test]
    fn only_a_primary_holding_the_finalizer_should_be_kept_until_it_is_back() {
        let departed = Departed::default();
        let key: Key = Arc::new(ObjectKey::namespaced("default", "a"));
        departed.gone(&key, &object(json!(["other"])), "kubewasm.dev/x");
        assert!(departed.get(&key).is_none(), "deleted, or never ours");
        departed.gone(&key, &object(json!(["kubewasm.dev/x"])), "kubewasm.dev/x");
        assert!(departed.get(&key).is_some());
        departed.back(&key);
        assert!(departed.get(&key).is_none());
    }
}
