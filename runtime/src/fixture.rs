//! Recorded calls: one reconcile step as the host ran it, kept as a fixture
//! that `kubewasm replay --fixture` runs again, byte for byte.
//!
//! # Expected flow
//! The engine runs a step recorded against a [`RecordingCache`] over its
//! cache: every object the step reads (the plugin's `get`s and `list`s, and
//! the step's own reads of the primary) is kept. [`Fixture::record`] then
//! makes a fixture of the request (key, configuration, clock, retries), the
//! plugin's confinement and declared types, the objects read, and what the
//! step gave: its [`Report`] (the requests it produced) or its failure.
//! [`Fixture::replay`] runs the same component on the fixture alone; what
//! it gives is what was recorded, so `replay` prints the same bytes.
//!
//! # Guarantees
//! - **What the step saw.** The step's reads agree with one another: each
//!   type is answered from one snapshot of the cache, taken at the step's
//!   first read of it (the live cache may change between two reads of a
//!   step; the recorded step's view does not). Every object it was given is
//!   kept, so a replay's reads find the same objects and miss the same
//!   ones. A recorded step reads each type it touches whole, once.
//! - **Secrets redacted.** Unless asked otherwise, each value of a
//!   Secret's `data` and `stringData` is replaced by `redacted` (base64 in
//!   `data`): a fixture can be attached to a bug report. A plugin that copies
//!   a Secret's value then replays with the redacted one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cache::{Cache, CachedObject, MemoryCache};
use crate::mapper::RestMapper;
use crate::plugin::Plugin;
use crate::replay::{ReplayError, Report};
use crate::request::Request;
use crate::step::{Step, StepError};
use kubewasm_core::resource::{ObjectKey, ResourceType};
use kubewasm_core::selector::Selector;

/// A cache that keeps every object read through it, and answers the step
/// as the inner cache stood at its first read of each type (see the module
/// documentation).
pub struct RecordingCache {
    inner: Arc<dyn Cache>,
    state: Mutex<Recording>,
}

/// What a [`RecordingCache`] holds.
#[derive(Default)]
struct Recording {
    /// Each type the step read, whole, as the inner cache held it then.
    snapshots: BTreeMap<ResourceType, BTreeMap<ObjectKey, Arc<CachedObject>>>,
    /// The objects the step was given.
    seen: BTreeMap<(ResourceType, ObjectKey), Arc<CachedObject>>,
}

impl Recording {
    /// `resource`'s objects as the step sees them: the inner cache's, taken
    /// at the step's first read of the type.
    fn snapshot(
        &mut self,
        inner: &dyn Cache,
        resource: &ResourceType,
    ) -> &BTreeMap<ObjectKey, Arc<CachedObject>> {
        self.snapshots.entry(resource.clone()).or_insert_with(|| {
            inner
                .list(resource, None, &Selector::default())
                .into_iter()
                .filter_map(|object| Some((object.key()?.clone(), object)))
                .collect()
        })
    }

    fn keep(&mut self, resource: &ResourceType, object: &Arc<CachedObject>) {
        if let Some(key) = object.key().cloned() {
            self.seen
                .entry((resource.clone(), key))
                .or_insert_with(|| Arc::clone(object));
        }
    }
}

impl RecordingCache {
    /// Records the reads made through it of `inner`.
    pub fn new(inner: Arc<dyn Cache>) -> Self {
        Self {
            inner,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Recording> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The objects read, by type and key.
    fn objects(&self) -> Vec<Value> {
        self.state()
            .seen
            .values()
            .map(|o| o.to_recorded())
            .collect()
    }
}

/// A step's reads, however many and however the inner cache changes
/// between them, agree with one another: each type is answered from the
/// snapshot of it taken at its first read. The objects given are exactly
/// those a cache of the recorded objects gives back for the same reads (an
/// absent object is absent from both, a list finds the same members), so
/// a replay sees what the step saw.
impl Cache for RecordingCache {
    fn get(&self, resource: &ResourceType, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        let mut state = self.state();
        let found = state
            .snapshot(self.inner.as_ref(), resource)
            .get(key)
            .cloned();
        if let Some(object) = &found {
            state.keep(resource, object);
        }
        found
    }

    fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Arc<CachedObject>> {
        let mut state = self.state();
        let found = crate::cache::select(
            state.snapshot(self.inner.as_ref(), resource),
            namespace,
            selector,
        );
        for object in &found {
            state.keep(resource, object);
        }
        found
    }
}

/// One recorded step (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// The plugin that ran.
    pub plugin: String,
    /// Its component's sha256.
    pub digest: String,
    /// The primary's key (`NAMESPACE/NAME`, or `NAME`).
    pub key: String,
    /// The time of the call.
    pub now: jiff::Timestamp,
    /// Its configuration.
    pub config: Value,
    /// Consecutive failures of the key before this call.
    #[serde(default)]
    pub retries: u32,
    /// Why the previous attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    /// Whether the primary had left the plugin's selector holding its
    /// finalizer ([`Request::released`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
    /// The namespaces it was confined to (`None`: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<BTreeSet<String>>,
    /// The types it declared, as the cluster served them.
    pub types: Vec<ResourceType>,
    /// Every object the step read.
    pub objects: Vec<Value>,
    /// The requests it produced (what `replay` prints), if it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Fixture {
    /// The fixture of a step `plugin` ran for `request` against `cache`,
    /// which gave `result`; Secrets' values redacted unless `secrets`.
    pub fn record(
        plugin: &Plugin,
        request: &Request,
        cache: &RecordingCache,
        result: &Result<Step, StepError>,
        secrets: bool,
    ) -> Self {
        let declaration = plugin.declaration();
        let mut objects = cache.objects();
        if !secrets {
            objects.iter_mut().for_each(redact);
        }
        let (report, failure) = match result {
            Ok(step) => (
                serde_json::to_value(Report::of(step, &request.key)).ok(),
                None,
            ),
            Err(error) => (None, Some(error.detail())),
        };
        Self {
            plugin: declaration.name.clone(),
            digest: plugin.digest().to_owned(),
            key: request.key.to_string(),
            now: request.now,
            config: serde_json::from_str(&request.config).unwrap_or(Value::Null),
            retries: request.retries,
            last_failure: request.last_failure.clone(),
            released: request.released,
            namespaces: plugin.grants().namespaces().cloned(),
            types: std::iter::once(&declaration.primary)
                .chain(declaration.secondaries.iter().map(|s| &s.resource))
                .cloned()
                .collect(),
            objects,
            report,
            failure,
        }
    }

    /// The mapper a replay of it resolves the plugin's types with: the
    /// built-in types and those it recorded.
    pub fn mapper(&self) -> RestMapper {
        let mut mapper = RestMapper::builtin();
        for resource in &self.types {
            mapper.serve(resource);
        }
        mapper
    }

    /// The request it recorded.
    ///
    /// # Errors
    /// [`ReplayError::Fixture`] when its key is none.
    pub fn request(&self) -> Result<Request, ReplayError> {
        let key = self
            .key
            .parse()
            .map_err(|e: kubewasm_core::resource::InvalidKey| {
                ReplayError::Fixture(e.to_string())
            })?;
        Ok(Request {
            config: self.config.to_string(),
            retries: self.retries,
            last_failure: self.last_failure.clone(),
            now: self.now,
            released: self.released,
            ..Request::new(key)
        })
    }

    /// Runs `plugin` (loaded with [`Self::mapper`] and these namespaces) on
    /// the fixture alone: its report, or its failure's text.
    ///
    /// # Errors
    /// [`ReplayError`] when the fixture's objects or key are not ones.
    pub fn replay(&self, plugin: &Plugin) -> Result<Result<Report, String>, ReplayError> {
        let cache: Arc<dyn Cache> = Arc::new(MemoryCache::from_objects(self.objects.clone())?);
        let request = self.request()?;
        Ok(match crate::step::run(plugin, cache, &request) {
            Ok(step) => Ok(Report::of(&step, &request.key)),
            Err(error) => Err(error.detail()),
        })
    }

    /// Whether `replayed` is what was recorded.
    pub fn matches(&self, replayed: &Result<Report, String>) -> bool {
        match replayed {
            Ok(report) => {
                self.failure.is_none() && serde_json::to_value(report).ok() == self.report
            }
            Err(failure) => self.failure.as_ref() == Some(failure),
        }
    }
}

/// Replaces each value of a Secret's `data` and `stringData`.
fn redact(object: &mut Value) {
    let is_secret = object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && object.get("kind").and_then(Value::as_str) == Some("Secret");
    if !is_secret {
        return;
    }
    for (field, redacted) in [("data", "cmVkYWN0ZWQ="), ("stringData", "redacted")] {
        if let Some(values) = object.get_mut(field).and_then(Value::as_object_mut) {
            for value in values.values_mut() {
                *value = Value::String(redacted.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secret_should_be_redacted_and_nothing_else() {
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "t"}});
        redact(&mut secret);
        assert_eq!(secret["data"]["password"], "cmVkYWN0ZWQ=");
        assert_eq!(secret["stringData"]["token"], "redacted");
        let mut config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"password": "hunter2"}});
        let before = config_map.clone();
        redact(&mut config_map);
        assert_eq!(config_map, before);
    }

    #[test]
    fn a_recording_cache_should_keep_the_first_version_of_each_object_read() {
        let config_map = |name: &str, version: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "resourceVersion": version}})
        };
        let inner: Arc<dyn Cache> = Arc::new(
            MemoryCache::from_objects([config_map("a", "1"), config_map("b", "1")])
                .expect("cached"),
        );
        let recording = RecordingCache::new(inner);
        let resource = crate::declaration::tests::ty("v1", "ConfigMap", "configmaps", true);
        assert!(
            recording
                .get(&resource, &ObjectKey::namespaced("default", "a"))
                .is_some()
        );
        assert!(
            recording
                .get(&resource, &ObjectKey::namespaced("default", "nope"))
                .is_none()
        );
        assert_eq!(
            recording
                .list(&resource, Some("default"), &Selector::default())
                .len(),
            2
        );
        let names: Vec<_> = recording
            .objects()
            .iter()
            .map(|o| o["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    /// A cache that changes after its first read: what a live cache may do
    /// between two reads of one step.
    struct Changing {
        before: MemoryCache,
        after: MemoryCache,
        read: std::sync::atomic::AtomicBool,
    }

    impl Changing {
        fn now(&self) -> &MemoryCache {
            if self.read.swap(true, std::sync::atomic::Ordering::SeqCst) {
                &self.after
            } else {
                &self.before
            }
        }
    }

    impl Cache for Changing {
        fn get(&self, resource: &ResourceType, key: &ObjectKey) -> Option<Arc<CachedObject>> {
            self.now().get(resource, key)
        }

        fn list(
            &self,
            resource: &ResourceType,
            namespace: Option<&str>,
            selector: &Selector,
        ) -> Vec<Arc<CachedObject>> {
            self.now().list(resource, namespace, selector)
        }
    }

    #[test]
    fn a_step_should_see_one_state_of_a_changing_cache_and_its_replay_the_same() {
        let config_map = |name: &str, version: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "resourceVersion": version}})
        };
        // Between the step's reads: a changes, b goes, c comes.
        let inner = Changing {
            before: MemoryCache::from_objects([config_map("a", "1"), config_map("b", "1")])
                .expect("cached"),
            after: MemoryCache::from_objects([config_map("a", "2"), config_map("c", "2")])
                .expect("cached"),
            read: std::sync::atomic::AtomicBool::new(false),
        };
        let recording = RecordingCache::new(Arc::new(inner));
        let resource = crate::declaration::tests::ty("v1", "ConfigMap", "configmaps", true);
        let key = |name: &str| ObjectKey::namespaced("default", name);
        let reads = |cache: &dyn Cache| {
            let version = |o: Option<Arc<CachedObject>>| {
                o.and_then(|o| o.resource_version().map(str::to_owned))
            };
            let listed: Vec<String> = cache
                .list(&resource, Some("default"), &Selector::default())
                .iter()
                .map(|o| format!("{:?}@{:?}", o.key(), o.resource_version()))
                .collect();
            (
                version(cache.get(&resource, &key("a"))),
                version(cache.get(&resource, &key("c"))),
                version(cache.get(&resource, &key("a"))),
                listed,
            )
        };
        let seen = reads(&recording);
        assert_eq!(seen.0.as_deref(), Some("1"));
        assert_eq!(seen.1, None, "c came after the step's first read");
        assert_eq!(seen.2.as_deref(), Some("1"), "a as first read");
        assert_eq!(seen.3.len(), 2, "a and b: {:?}", seen.3);
        let replayed = MemoryCache::from_objects(recording.objects()).expect("recorded");
        assert_eq!(
            reads(&replayed),
            seen,
            "the replay reads what the step read"
        );
    }
}
