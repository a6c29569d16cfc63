//! A plugin's [`Cache`]: its view of the shared informer stores it
//! subscribed to, per declared type and namespace, and where a primary is
//! placed in a ring.

use std::sync::Arc;

use super::informer::Store;
use super::ring::Shard;
use kubewasm_runtime::cache::{Cache, CachedObject};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use kubewasm_runtime::selector::Selector;

/// A plugin's view of the informer stores it subscribed to: the [`Cache`]
/// its reads go through (the runtime's read rules filter it further by the
/// plugin's grants). Per declared type (the primary first), its stores: one
/// per namespace the plugin is confined to, or one for all.
#[derive(Debug)]
pub struct InformerCache {
    types: Vec<Vec<Arc<Store>>>,
}

impl InformerCache {
    /// A view of `types`: per declared type (the primary first), its stores.
    pub(super) fn new(types: Vec<Vec<Arc<Store>>>) -> Self {
        Self { types }
    }

    /// The hash a primary is placed by in a ring: of its namespace, or of
    /// its uid as cached. `None` for a primary placed by uid that is not in
    /// the cache: no replica can place it by its key alone (its watch may
    /// lag behind a child's, or it is gone), so none reconciles it; the
    /// replica of its slot does when its own watch shows it.
    pub(super) fn hash_of(&self, key: &ObjectKey, shard: &Shard) -> Option<u64> {
        use kubewasm_core::shard::{ShardField, place};
        match shard.field() {
            ShardField::Namespace => Some(place(key.namespace.as_deref())),
            ShardField::Uid => {
                let object = self.primary().iter().find_map(|s| s.get(key))?;
                Some(place(Some(object.uid()?)))
            }
        }
    }

    /// Every store.
    pub(super) fn stores(&self) -> impl Iterator<Item = &Arc<Store>> {
        self.types.iter().flatten()
    }

    /// The primary's stores.
    pub(super) fn primary(&self) -> &[Arc<Store>] {
        self.types.first().map_or(&[], Vec::as_slice)
    }

    /// The stores of the first declared type that is `resource`, in
    /// namespace order.
    pub(super) fn stores_of(&self, resource: &ResourceType) -> &[Arc<Store>] {
        self.types
            .iter()
            .find(|stores| {
                stores.first().is_some_and(|s| {
                    let held = s.resource();
                    held.group == resource.group
                        && held.version == resource.version
                        && held.kind == resource.kind
                })
            })
            .map_or(&[], Vec::as_slice)
    }
}

impl Cache for InformerCache {
    fn get(&self, resource: &ResourceType, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.stores_of(resource)
            .iter()
            .filter(|s| {
                s.namespace()
                    .is_none_or(|ns| key.namespace.as_deref() == Some(ns))
            })
            .find_map(|s| s.get(key))
    }

    fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Arc<CachedObject>> {
        self.stores_of(resource)
            .iter()
            .filter(|s| {
                s.namespace()
                    .is_none_or(|ns| namespace.is_none_or(|n| n == ns))
            })
            .flat_map(|store| store.list(namespace))
            .filter(|o| o.selected_by(selector))
            .collect()
    }
}
