//! The read side plugins see: a cache of objects keyed by type and identity.
//!
//! [`Cache`] is what the runtime hands to a plugin's `cache` imports. The
//! controller engine backs it with informer stores shared by every plugin;
//! [`MemoryCache`] backs it with fixtures for `kubewasm replay` and tests.
//! Each object is kept as the JSON text handed to plugins (a read copies
//! text across the boundary without serializing again) and, parsed once
//! when cached, its [`Meta`]: what the host reads of every object on its
//! hot paths (key, uid, version, labels, owners). The whole object is
//! parsed only where a step needs its body ([`CachedObject::value`]): a
//! parsed object takes ten times its text, and the cache holds every
//! object of every watched type.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use kubewasm_core::resource::{ObjectKey, ResourceType, split_api_version};
use kubewasm_core::selector::Selector;

/// One cached object: its JSON text and its [`Meta`].
#[derive(Debug, PartialEq)]
pub struct CachedObject {
    json: Box<str>,
    meta: Meta,
    /// Who server-side applied it, from the `managedFields` that informer
    /// caches drop.
    appliers: Appliers,
}

/// The field managers that server-side applied an object, read from its
/// `managedFields`, and whether one of them wrote it last.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Appliers {
    names: Box<[Box<str>]>,
    /// The applier (an index into `names`) whose entry's `time` is later
    /// than every other entry's, with that time (seconds since the epoch);
    /// `None` when another manager wrote in the same second or since, or
    /// when the entries carry no time.
    last: Option<(u16, i64)>,
}

/// One `managedFields` entry as [`Appliers::read`] takes it.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// `manager`.
    pub manager: &'a str,
    /// Whether `operation` is `Apply` (server-side apply).
    pub apply: bool,
    /// `time`, in seconds since the epoch.
    pub time: Option<i64>,
}

impl Appliers {
    /// The appliers among `entries`, and which wrote last.
    pub fn read<'a>(entries: impl IntoIterator<Item = Entry<'a>>) -> Self {
        let mut names: Vec<Box<str>> = Vec::new();
        // The newest time seen, and the applier that holds it alone.
        let mut newest: Option<(i64, Option<u16>)> = None;
        for entry in entries {
            let index = entry.apply.then(|| {
                let at = names.iter().position(|n| **n == *entry.manager);
                at.unwrap_or_else(|| {
                    names.push(entry.manager.into());
                    names.len() - 1
                })
            });
            let index = index.and_then(|i| u16::try_from(i).ok());
            let Some(time) = entry.time else { continue };
            newest = match newest {
                Some((at, _)) if time < at => newest,
                // The same applier's other entry (its status) at the same
                // second still leaves it the last writer.
                Some((at, holder)) if time == at => {
                    Some((at, holder.filter(|h| index == Some(*h))))
                }
                _ => Some((time, index)),
            };
        }
        Self {
            names: names.into(),
            last: newest.and_then(|(at, holder)| Some((holder?, at))),
        }
    }

    /// Appliers known by name only (none of them known to be the last
    /// writer).
    pub fn named(names: impl IntoIterator<Item = impl Into<Box<str>>>) -> Self {
        Self {
            names: names.into_iter().map(Into::into).collect(),
            last: None,
        }
    }

    /// Reads an object's `metadata.managedFields` (JSON).
    pub fn of_managed_fields(entries: Option<&Value>) -> Self {
        let entries = entries.and_then(Value::as_array).into_iter().flatten();
        Self::read(entries.filter_map(|entry| {
            Some(Entry {
                manager: entry["manager"].as_str()?,
                apply: entry["operation"] == "Apply",
                time: entry["time"]
                    .as_str()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .map(|t| t.as_second()),
            })
        }))
    }
}

/// What the host reads of a cached object without parsing it again.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Meta {
    key: Option<ObjectKey>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    /// Sorted by label name.
    labels: Box<[(Box<str>, Box<str>)]>,
    owners: Box<[Owner]>,
    deleting: bool,
}

/// One of an object's `metadata.ownerReferences`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Owner {
    /// `apiVersion` of the owner.
    pub api_version: Box<str>,
    /// `kind` of the owner.
    pub kind: Box<str>,
    /// `name` of the owner (in the object's namespace, if any).
    pub name: Box<str>,
    /// `uid` of the owner.
    pub uid: Box<str>,
    /// Whether the owner is the object's controller.
    pub controller: bool,
}

impl Meta {
    /// An object's metadata from its parts (an informer's typed object).
    pub fn new<'a>(
        key: Option<ObjectKey>,
        uid: Option<&str>,
        resource_version: Option<&str>,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        owners: Box<[Owner]>,
        deleting: bool,
    ) -> Self {
        let mut labels: Box<[(Box<str>, Box<str>)]> = labels
            .into_iter()
            .map(|(name, value)| (name.into(), value.into()))
            .collect();
        labels.sort_unstable();
        Self {
            key,
            uid: uid.map(Into::into),
            resource_version: resource_version.map(Into::into),
            labels,
            owners,
            deleting,
        }
    }

    fn of(object: &Value) -> Self {
        let metadata = object.get("metadata");
        let text = |field: &str| metadata.and_then(|m| m.get(field)).and_then(Value::as_str);
        let labels = metadata
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| Some((name.as_str(), value.as_str()?)));
        let owners = metadata
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|owner| {
                let text = |field: &str| owner[field].as_str().unwrap_or_default().into();
                Owner {
                    api_version: text("apiVersion"),
                    kind: text("kind"),
                    name: text("name"),
                    uid: text("uid"),
                    controller: owner["controller"] == true,
                }
            })
            .collect();
        Self::new(
            ObjectKey::of(object),
            text("uid"),
            text("resourceVersion"),
            labels,
            owners,
            metadata.is_some_and(|m| !m["deletionTimestamp"].is_null()),
        )
    }
}

impl CachedObject {
    /// Wraps an object; its appliers are read from its `managedFields`.
    pub fn new(value: Value) -> Self {
        let appliers = Appliers::of_managed_fields(value.pointer("/metadata/managedFields"));
        Self::applied_by(value, appliers)
    }

    /// Wraps an object whose `managedFields` were dropped, with the field
    /// managers that applied it.
    pub fn applied_by(value: Value, appliers: Appliers) -> Self {
        Self::from_parts(value.to_string(), Meta::of(&value), appliers)
    }

    /// An object already serialized, with its metadata: `meta` must be
    /// `json`'s (an informer builds both from its typed object).
    pub fn from_parts(json: String, meta: Meta, appliers: Appliers) -> Self {
        Self {
            json: json.into_boxed_str(),
            meta,
            appliers,
        }
    }

    /// Whether `manager` server-side applied this object.
    pub fn applied(&self, manager: &str) -> bool {
        self.appliers.names.iter().any(|a| &**a == manager)
    }

    /// Whether `manager` server-side applied this object and wrote it last:
    /// no other manager changed it since, by its `managedFields`' times.
    pub fn last_applied_by(&self, manager: &str) -> bool {
        self.appliers
            .last
            .and_then(|(i, _)| self.appliers.names.get(usize::from(i)))
            .is_some_and(|last| &**last == manager)
    }

    /// The object with its appliers as `managedFields` entries when the
    /// cache dropped them: what a fixture keeps, so a replay reads the
    /// same [`CachedObject`] back.
    pub fn to_recorded(&self) -> Value {
        let mut value = self.value();
        if !self.appliers.names.is_empty()
            && let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut)
            && !metadata.contains_key("managedFields")
        {
            let last = self.appliers.last;
            let entries = (0u16..)
                .zip(&self.appliers.names)
                .map(|(i, manager)| {
                    let mut entry =
                        serde_json::json!({"manager": &**manager, "operation": "Apply"});
                    if let Some((_, at)) = last.filter(|(l, _)| *l == i)
                        && let Ok(time) = jiff::Timestamp::from_second(at)
                    {
                        entry["time"] = time.to_string().into();
                    }
                    entry
                })
                .collect();
            metadata.insert("managedFields".into(), Value::Array(entries));
        }
        value
    }

    /// The object, parsed from its text: for a step that reads its body.
    /// What the host reads of every object is in [`meta`](Self::meta).
    pub fn value(&self) -> Value {
        // The text was written from a `Value`, whose depth serde_json's
        // parse limit bounded where it came from (the API server's answer
        // or a fixture); it parses back.
        serde_json::from_str(&self.json).unwrap_or_else(|error| {
            tracing::error!(%error, "a cached object's text did not parse back");
            Value::Null
        })
    }

    /// The object as JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Its key (namespace and name), if it has a name.
    pub fn key(&self) -> Option<&ObjectKey> {
        self.meta.key.as_ref()
    }

    /// Its namespace, if namespaced.
    pub fn namespace(&self) -> Option<&str> {
        self.key()?.namespace.as_deref()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.meta.uid.as_deref()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.meta.resource_version.as_deref()
    }

    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        let labels = &self.meta.labels;
        let at = labels.binary_search_by(|(l, _)| (**l).cmp(name)).ok()?;
        Some(&labels[at].1)
    }

    /// Whether `selector` selects it by its labels.
    pub fn selected_by(&self, selector: &Selector) -> bool {
        selector.matches_labels(|name| self.label(name))
    }

    /// Its owner references.
    pub fn owners(&self) -> &[Owner] {
        &self.meta.owners
    }

    /// Whether it has a `deletionTimestamp`.
    pub fn deleting(&self) -> bool {
        self.meta.deleting
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
        self.of_type(resource)
            .map(|objects| select(objects, namespace, selector))
            .unwrap_or_default()
    }
}

/// The objects of one type in `namespace` (all namespaces when `None`) that
/// `selector` selects, in their order: a list's answer from a map of them.
pub(crate) fn select(
    objects: &BTreeMap<ObjectKey, Arc<CachedObject>>,
    namespace: Option<&str>,
    selector: &Selector,
) -> Vec<Arc<CachedObject>> {
    objects
        .iter()
        .filter(|(key, _)| namespace.is_none() || key.namespace.as_deref() == namespace)
        .filter(|(_, object)| object.selected_by(selector))
        .map(|(_, object)| Arc::clone(object))
        .collect()
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
            Appliers::named(["kubewasm-x"]),
        );
        let recorded = stripped.to_recorded();
        assert_eq!(
            recorded["metadata"]["managedFields"],
            json!([{"manager": "kubewasm-x", "operation": "Apply"}])
        );
        assert!(CachedObject::new(recorded).applied("kubewasm-x"));
    }

    #[test]
    fn the_last_writer_should_be_an_applier_alone_in_the_newest_second() {
        let read =
            |fields: Value| CachedObject::new(json!({"metadata": {"managedFields": fields}}));
        let entry = |manager: &str, op: &str, time: &str| json!({"manager": manager, "operation": op, "time": time});
        let (t1, t2) = ("2026-12-05T08:00:01Z", "2026-12-05T08:00:02Z");
        // Created by kubectl, its status applied by the plugin after.
        let settled = read(json!([
            entry("kubectl", "Update", t1),
            entry("kubewasm-x", "Apply", t2)
        ]));
        assert!(settled.last_applied_by("kubewasm-x"));
        assert!(!settled.last_applied_by("kubectl"));
        // Changed by kubectl since (or in the same second): not the plugin's.
        for edited in [t2, "2026-12-05T08:00:03Z"] {
            let object = read(json!([
                entry("kubewasm-x", "Apply", t2),
                entry("kubectl", "Update", edited)
            ]));
            assert!(!object.last_applied_by("kubewasm-x"), "edited at {edited}");
        }
        // Its object and its status applied in the same second: still its.
        let both = read(json!([
            entry("kubewasm-x", "Apply", t2),
            entry("kubewasm-x", "Apply", t2),
            entry("kubectl", "Update", t1)
        ]));
        assert!(both.last_applied_by("kubewasm-x"));
        // A manager that only updates never counts; no times, no last writer.
        assert!(!read(json!([entry("kubectl", "Update", t2)])).last_applied_by("kubectl"));
        let untimed = read(json!([{"manager": "kubewasm-x", "operation": "Apply"}]));
        assert!(untimed.applied("kubewasm-x") && !untimed.last_applied_by("kubewasm-x"));
        // A recording keeps who wrote last.
        let recorded = CachedObject::new(settled.to_recorded());
        assert!(recorded.last_applied_by("kubewasm-x"));
    }

    #[test]
    fn meta_should_hold_what_the_host_reads_and_value_the_whole_object() {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1",
                "resourceVersion": "42", "deletionTimestamp": "2026-12-05T08:00:00Z",
                "labels": {"tier": "web", "app": "shop", "empty": ""},
                "ownerReferences": [
                    {"apiVersion": "example.com/v1", "kind": "MyApp", "name": "shop",
                     "uid": "u-0", "controller": true},
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "uid": "u-2"}]},
            "spec": {"replicas": 2}});
        let cached = CachedObject::new(object.clone());
        assert_eq!(cached.key(), Some(&ObjectKey::namespaced("team-a", "web")));
        assert_eq!(cached.namespace(), Some("team-a"));
        assert_eq!(
            (cached.uid(), cached.resource_version()),
            (Some("u-1"), Some("42"))
        );
        assert_eq!(
            (
                cached.label("app"),
                cached.label("tier"),
                cached.label("empty")
            ),
            (Some("shop"), Some("web"), Some(""))
        );
        assert_eq!(cached.label("missing"), None);
        assert!(cached.selected_by(&Selector::parse("app=shop,tier in (web)").expect("parses")));
        assert!(!cached.selected_by(&Selector::parse("app!=shop").expect("parses")));
        let owners: Vec<_> = cached
            .owners()
            .iter()
            .map(|o| (&*o.kind, &*o.name, &*o.uid, o.controller))
            .collect();
        assert_eq!(
            owners,
            [
                ("MyApp", "shop", "u-0", true),
                ("ConfigMap", "settings", "u-2", false)
            ]
        );
        assert!(cached.deleting());
        assert_eq!(cached.value(), object);
        assert_eq!(
            serde_json::from_str::<Value>(cached.json()).ok(),
            Some(object)
        );

        let bare = CachedObject::new(json!({"metadata": {"name": "n", "deletionTimestamp": null}}));
        assert_eq!(bare.key(), Some(&ObjectKey::cluster("n")));
        assert_eq!(
            (bare.namespace(), bare.uid(), bare.resource_version()),
            (None, None, None)
        );
        assert!(bare.owners().is_empty() && !bare.deleting());
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
            .map(|o| o.key().expect("named").to_string())
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
