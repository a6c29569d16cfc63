//! Serving CustomResourceDefinitions: a created CRD's versions join the
//! registry before the reply; a deleted one's leave it with its objects.

use kubewasm_core::ObjectKey;
use kubewasm_types::crd;
use serde_json::{Value, json};

use super::Api;
use crate::http::error::ApiError;
use crate::mutation::apply;
use crate::objects::now;
use crate::store::{ListAt, ResourceKey, StoreError};

impl Api {
    /// Serves a CRD's versions and marks it established, before the reply
    /// (which shows the CRD as written, before this: a real server's
    /// apiextensions controllers accept its names a moment after). The
    /// status is written as those controllers write it: by `kube-apiserver`,
    /// through `/status`.
    pub(super) fn establish(&self, key: &ObjectKey, crd: &Value) -> Result<(), ApiError> {
        let types = crd::served_types(crd).map_err(ApiError::bad_request)?;
        {
            let mut registry = self
                .registry
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(first) = types.first() {
                registry.remove(&first.group, &first.plural);
                self.served_since
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .entry(first.storage_key())
                    .or_insert_with(|| self.store.current_rv());
            }
            for t in types {
                registry.insert(t);
            }
        }
        let status = established_status(crd);
        let storage = ResourceKey::new(crd::GROUP, crd::PLURAL);
        self.store.update::<ApiError>(&storage, key, |current| {
            let mut next = current.clone();
            next["status"] = status;
            apply::record_update(
                current,
                &mut next,
                "kube-apiserver",
                &format!("{}/v1", crd::GROUP),
                false,
                apply::Part::of(true, Some("status")),
            );
            Ok(next)
        })?;
        Ok(())
    }

    /// The first RV a watch of the custom resource stored at `key` may
    /// start from (0 for a built-in type).
    pub(super) fn served_since(&self, key: &ResourceKey) -> u64 {
        self.served_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
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
        self.served_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&storage);
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

/// A created CRD's status, as its registry strategy writes it: Go's zero
/// status, and the version it stores in as its only stored version.
pub(super) fn created_status(crd: &mut Value) {
    let stored = stored_versions(crd);
    if let Some(status) = crd.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("storedVersions".into(), stored.into());
    }
}

/// The names of the versions a CRD stores in (one, in a valid CRD).
fn stored_versions(crd: &Value) -> Vec<Value> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// The status of an accepted, established CRD.
fn established_status(crd: &Value) -> Value {
    let names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let stored = stored_versions(crd);
    let condition = |kind: &str, reason: &str, message: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now(), "reason": reason, "message": message});
    json!({
        "acceptedNames": names,
        "storedVersions": stored,
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_established_crd_should_say_so_and_name_its_stored_version() {
        let crd = json!({"metadata": {"name": "myapps.example.com"}, "spec": {"group": "example.com",
            "scope": "Namespaced", "names": {"plural": "myapps", "kind": "MyApp"},
            "versions": [
                {"name": "v1", "served": true, "storage": true},
                {"name": "v1beta1", "served": false, "storage": false}]}});
        let status = established_status(&crd);
        assert_eq!(status["conditions"][1]["type"], "Established");
        assert_eq!(status["storedVersions"], json!(["v1"]));
    }
}
