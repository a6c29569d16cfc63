//! The reconcile request and typed reads from the host's cache.

use k8s_openapi::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::backend;
use crate::error::{Error, Result};
use crate::types::{ObjectKey, ResourceType};

/// One reconcile (or finalize) call: the key, the configuration, and reads
/// from the host's informer caches. Reads are limited to the types the
/// plugin declared; anything else is denied with an [`Error`] naming it.
#[derive(Clone, Debug)]
pub struct Context {
    pub(crate) key: ObjectKey,
    pub(crate) resource: ResourceType,
    pub(crate) config: String,
    pub(crate) retries: u32,
    pub(crate) last_failure: Option<String>,
    /// In `map_keys`: the changed object's state before the change.
    pub(crate) previous: Option<Value>,
    /// In `map_keys`: whether the changed object was deleted.
    pub(crate) deleted: bool,
    /// In `scheduled`: the time the schedule named.
    pub(crate) scheduled_at: Option<k8s_openapi::jiff::Timestamp>,
}

impl Context {
    /// A context for `key` of `resource` with an empty configuration.
    pub fn new(resource: ResourceType, key: ObjectKey) -> Self {
        Self {
            key,
            resource,
            config: "{}".into(),
            retries: 0,
            last_failure: None,
            previous: None,
            deleted: false,
            scheduled_at: None,
        }
    }

    /// In [`Reconciler::scheduled`](crate::Reconciler::scheduled): the
    /// time the schedule named (the call runs at it or shortly after).
    pub fn scheduled_at(&self) -> Option<k8s_openapi::jiff::Timestamp> {
        self.scheduled_at
    }

    /// In [`Reconciler::map_keys`](crate::Reconciler::map_keys): a modified
    /// object's state before the change (`None` for an object created,
    /// listed or deleted). Return the keys it maps to as well as the new
    /// state's: those are the primaries the object left.
    pub fn previous(&self) -> Option<&Value> {
        self.previous.as_ref()
    }

    /// In [`Reconciler::map_keys`](crate::Reconciler::map_keys): whether the
    /// changed object was deleted (the object given is its last state).
    pub fn deleted(&self) -> bool {
        self.deleted
    }

    /// The primary's key.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The primary's name.
    pub fn name(&self) -> &str {
        &self.key.name
    }

    /// The primary's namespace (`None` when cluster-scoped).
    pub fn namespace(&self) -> Option<&str> {
        self.key.namespace.as_deref()
    }

    /// The primary's resource type.
    pub fn resource(&self) -> &ResourceType {
        &self.resource
    }

    /// Consecutive failures of this key before this call.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Why the previous attempt failed, if it did (including host denials).
    pub fn last_failure(&self) -> Option<&str> {
        self.last_failure.as_deref()
    }

    /// The plugin's configuration, deserialized.
    ///
    /// # Errors
    /// If the configuration does not match `T`.
    pub fn config<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.config)
            .map_err(|e| Error::msg(format!("invalid configuration: {e}")))
    }

    /// The primary object, or `None` if it is gone from the cache.
    ///
    /// # Errors
    /// If the read is denied or the object does not deserialize as `K`.
    pub fn primary<K: Resource + DeserializeOwned>(&self) -> Result<Option<K>>
    where
        K::Scope: 'static,
    {
        self.get(&self.key)
    }

    /// The object of type `K` with this key.
    ///
    /// # Errors
    /// If the read is denied or the object does not deserialize as `K`.
    pub fn get<K: Resource + DeserializeOwned>(&self, key: &ObjectKey) -> Result<Option<K>>
    where
        K::Scope: 'static,
    {
        self.get_raw(&ResourceType::of::<K>(), key)?
            .map(|object| decode::<K>(object))
            .transpose()
    }

    /// Objects of type `K` in `namespace` (all namespaces for `None`) that
    /// match `label_selector` (empty for all).
    ///
    /// # Errors
    /// If the read is denied, the selector is invalid, or an object does not
    /// deserialize as `K`.
    pub fn list<K: Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<K>>
    where
        K::Scope: 'static,
    {
        self.list_raw(&ResourceType::of::<K>(), namespace, label_selector)?
            .into_iter()
            .map(decode::<K>)
            .collect()
    }

    /// An object as the JSON text the host holds, unparsed: for plugins that
    /// parse lazily or only part of an object.
    ///
    /// # Errors
    /// If the read is denied.
    pub fn get_text(&self, resource: &ResourceType, key: &ObjectKey) -> Result<Option<String>> {
        backend::get(resource, key)
    }

    /// An object as untyped JSON.
    ///
    /// # Errors
    /// If the read is denied.
    pub fn get_raw(&self, resource: &ResourceType, key: &ObjectKey) -> Result<Option<Value>> {
        self.get_text(resource, key)?
            .map(|text| serde_json::from_str(&text).map_err(Error::from))
            .transpose()
    }

    /// Objects as untyped JSON.
    ///
    /// # Errors
    /// If the read is denied or the selector is invalid.
    pub fn list_raw(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<Value>> {
        backend::list(resource, namespace, label_selector)?
            .iter()
            .map(|text| serde_json::from_str(text).map_err(Error::from))
            .collect()
    }
}

fn decode<K: Resource + DeserializeOwned>(object: Value) -> Result<K> {
    serde_json::from_value(object)
        .map_err(|e| Error::msg(format!("failed to decode {}: {e}", K::KIND)))
}
