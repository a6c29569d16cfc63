//! The read side plugins see: a cache of objects keyed by type and identity.
//!
//! [`Cache`] is what the runtime hands to a plugin's `cache` imports. The
//! controller engine backs it with informer stores shared by every plugin;
//! [`MemoryCache`] backs it with fixtures for `kubewasm replay` and tests.
//! Each object is kept both parsed (for selectors and owner references) and
//! as JSON text, so a read copies text across the boundary without
//! serializing again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use kubewasm_core::resource::{ObjectKey, ResourceType, split_api_version};
use kubewasm_core::selector::Selector;

/// One cached object: parsed, and as the JSON text handed to plugins.
#[derive(Debug, PartialEq)]
pub struct CachedObject {
    value: Value,
    json: String,
    /// The field managers that server-side applied it, from the
    /// `managedFields` that informer caches drop.
    appliers: Box<[Box<str>]>,
}

impl CachedObject {
    /// Wraps an object; its appliers are read from its `managedFields`.
    pub fn new(value: Value) -> Self {
        let appliers = value
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|entry| entry["operation"] == "Apply")
            .filter_map(|entry| entry["manager"].as_str())
            .map(Into::into)
            .collect();
        Self::applied_by(value, appliers)
    }

    /// Wraps an object whose `managedFields` were dropped, with the field
    /// managers that applied it.
    pub fn applied_by(value: Value, appliers: Box<[Box<str>]>) -> Self {
        let json = value.to_string();
        Self {
            value,
            json,
            appliers,
        }
    }

    /// Whether `manager` server-side applied this object.
    pub fn applied(&self, manager: &str) -> bool {
        self.appliers.iter().any(|a| &**a == manager)
    }

    /// The object with its appliers as `managedFields` entries when the
    /// cache dropped them: what a fixture keeps, so a replay reads the
    /// same [`CachedObject`] back.
    pub fn to_recorded(&self) -> Value {
        let mut value = self.value.clone();
        if !self.appliers.is_empty()
            && let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut)
            && !metadata.contains_key("managedFields")
        {
            let entries = self
                .appliers
                .iter()
                .map(|manager| serde_json::json!({"manager": &**manager, "operation": "Apply"}))
                .collect();
            metadata.insert("managedFields".into(), Value::Array(entries));
        }
        value
    }

    /// The parsed object.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The object as JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }
}

/// Read access to cached cluster state.
pub trait Cache: Send + Sync {
    /// The object of this type and key, if cached.
    fn get(&self, resource: &ResourceType, key: &ObjectKey) -> Option<Arc<CachedObject>>;

    /// The objects of this type in `namespace` (all namespaces when `None`)
    /// that match `selector`, ordered by namespace then name.
    fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Arc<CachedObject>>;
}

/// Group, version, kind: how [`MemoryCache`] files objects.
type Gvk = (String, String, String);

/// An in-memory cache filled from a list of objects.
#[derive(Debug, Default)]
pub struct MemoryCache {
    objects: HashMap<Gvk, BTreeMap<ObjectKey, Arc<CachedObject>>>,
}

/// Why an object could not be added to a [`MemoryCache`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryCacheError {
    /// `apiVersion`, `kind` or `metadata.name` is missing.
    #[error("object #{index} lacks {field}")]
    MissingField {
        /// Position of the object in its input, from 1.
        index: usize,
        /// The missing field.
        field: &'static str,
    },
}

impl MemoryCache {
    /// Builds a cache from objects, refusing any without `apiVersion`, `kind`
    /// and `metadata.name`. A later object with the same identity replaces
    /// an earlier one.
    ///
    /// # Errors
    /// [`MemoryCacheError`] names the object and the missing field.
    pub fn from_objects(
        objects: impl IntoIterator<Item = Value>,
    ) -> Result<Self, MemoryCacheError> {
        let mut cache = Self::default();
        for (i, object) in objects.into_iter().enumerate() {
            let index = i + 1;
            let missing = |field| MemoryCacheError::MissingField { index, field };
            let api_version = object
                .get("apiVersion")
                .and_then(Value::as_str)
                .ok_or(missing("apiVersion"))?;
            let kind = object
                .get("kind")
                .and_then(Value::as_str)
                .ok_or(missing("kind"))?;
            let key = ObjectKey::of(&object).ok_or(missing("metadata.name"))?;
            let (group, version) = split_api_version(api_version);
            let gvk = (group.to_owned(), version.to_owned(), kind.to_owned());
            cache
                .objects
                .entry(gvk)
                .or_default()
                .insert(key, Arc::new(CachedObject::new(object)));
        }
        Ok(cache)
    }

    /// Number of objects held.
    pub fn len(&self) -> usize {
        self.objects.values().map(BTreeMap::len).sum()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn of_type(&self, resource: &ResourceType) -> Option<&BTreeMap<ObjectKey, Arc<CachedObject>>> {
        self.objects.get(&(
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
        ))
    }
}

impl Cache for MemoryCache {
    fn get(&self, resource: &ResourceType, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        self.of_type(resource)?.get(key).cloned()
    }

    fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Arc<CachedObject>> {
        let Some(objects) = self.of_type(resource) else {
            return Vec::new();
        };
        objects
            .iter()
            .filter(|(key, _)| namespace.is_none() || key.namespace.as_deref() == namespace)
            .filter(|(_, object)| selector.matches(object.value()))
            .map(|(_, object)| Arc::clone(object))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declaration::tests::ty;
    use serde_json::json;

    #[test]
    fn appliers_should_survive_the_stripping_and_a_recording() {
        let object = json!({"metadata": {"name": "a", "managedFields": [
            {"manager": "kubewasm-x", "operation": "Apply"},
            {"manager": "kubectl-edit", "operation": "Update"}]}});
        let read = CachedObject::new(object);
        assert!(read.applied("kubewasm-x") && !read.applied("kubectl-edit"));
        // An informer's copy: its managedFields dropped, its appliers kept.
        let stripped = CachedObject::applied_by(
            json!({"metadata": {"name": "a"}}),
            ["kubewasm-x".into()].into(),
        );
        let recorded = stripped.to_recorded();
        assert_eq!(
            recorded["metadata"]["managedFields"],
            json!([{"manager": "kubewasm-x", "operation": "Apply"}])
        );
        assert!(CachedObject::new(recorded).applied("kubewasm-x"));
    }

    fn cm(namespace: &str, name: &str, app: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": namespace, "name": name, "labels": {"app": app}}})
    }

    #[test]
    fn memory_cache_should_get_and_list_by_namespace_and_selector() {
        let cache = MemoryCache::from_objects([
            cm("b", "x", "web"),
            cm("a", "y", "db"),
            cm("a", "x", "web"),
        ])
        .expect("valid objects");
        let cms = ty("v1", "ConfigMap", "configmaps", true);
        assert_eq!(cache.len(), 3);
        assert!(cache.get(&cms, &ObjectKey::namespaced("a", "y")).is_some());
        assert!(cache.get(&cms, &ObjectKey::namespaced("c", "y")).is_none());

        let everything = Selector::default();
        let names: Vec<_> = cache
            .list(&cms, None, &everything)
            .iter()
            .map(|o| ObjectKey::of(o.value()).expect("named").to_string())
            .collect();
        assert_eq!(names, ["a/x", "a/y", "b/x"]);
        let web = Selector::parse("app=web").expect("parses");
        assert_eq!(cache.list(&cms, Some("a"), &web).len(), 1);
        let secrets = ty("v1", "Secret", "secrets", true);
        assert!(cache.list(&secrets, None, &everything).is_empty());
    }

    #[test]
    fn memory_cache_should_refuse_objects_without_identity() {
        let err = MemoryCache::from_objects([
            cm("a", "x", "web"),
            json!({"apiVersion": "v1", "metadata": {}}),
        ])
        .expect_err("second lacks kind");
        assert_eq!(
            err,
            MemoryCacheError::MissingField {
                index: 2,
                field: "kind"
            }
        );
    }
}
