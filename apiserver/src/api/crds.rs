//! Serving CustomResourceDefinitions: a created CRD's versions join the
//! registry before the reply; a deleted one's leave it with its objects.

use std::sync::Arc;

use kubewasm_core::ObjectKey;
use serde_json::Value;

use super::Api;
use crate::crd;
use crate::error::ApiError;
use crate::store::{ListAt, ResourceKey, StoreError};

impl Api {
    /// Serves a CRD's versions and marks it established, before the reply.
    pub(super) fn establish(&self, key: &ObjectKey, crd: &Value) -> Result<Arc<Value>, ApiError> {
        let types = crd::served_types(crd).map_err(ApiError::bad_request)?;
        {
            let mut registry = self
                .registry
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(first) = types.first() {
                registry.remove(&first.group, &first.plural);
            }
            for t in types {
                registry.insert(t);
            }
        }
        let status = crd::established_status(crd);
        let storage = ResourceKey::new(crd::GROUP, crd::PLURAL);
        let written = self.store.update::<ApiError>(&storage, key, |current| {
            let mut next = current.clone();
            next["status"] = status;
            Ok(next)
        })?;
        Ok(written.object)
    }

    /// Serves the CRDs the store holds (after a restart). One that breaks
    /// today's rules is left unserved, with a warning.
    pub(super) fn serve_stored_crds(&self) {
        let storage = ResourceKey::new(crd::GROUP, crd::PLURAL);
        let Ok(stored) = self.store.list(&storage, None, ListAt::Latest) else {
            return;
        };
        let mut registry = self
            .registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for definition in stored.items.iter() {
            match crd::served_types(definition) {
                Ok(types) => types.into_iter().for_each(|t| registry.insert(t)),
                Err(reason) => tracing::warn!(
                    crd = definition.pointer("/metadata/name").and_then(serde_json::Value::as_str),
                    %reason,
                    "stored CRD not served"
                ),
            }
        }
    }

    /// Stops serving a deleted CRD's resource and deletes its objects; a
    /// CRD that never passed the rules (so was never served) touches
    /// nothing.
    pub(super) fn retire(&self, crd: &Value) {
        if crd::served_types(crd).is_err() {
            return;
        }
        let (Some(group), Some(plural)) = (
            crd.pointer("/spec/group").and_then(Value::as_str),
            crd.pointer("/spec/names/plural").and_then(Value::as_str),
        ) else {
            return;
        };
        self.registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(group, plural);
        let storage = ResourceKey::new(group, plural);
        if let Ok(snapshot) = self.store.list(&storage, None, ListAt::Latest) {
            for object in snapshot.items.iter() {
                if let Some(key) = ObjectKey::of(object) {
                    // Gone already is fine: another delete won the race.
                    let _ = self.store.delete::<StoreError>(&storage, &key, |_| Ok(()));
                }
            }
        }
    }
}
