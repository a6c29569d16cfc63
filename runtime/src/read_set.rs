//! What one call read through the cache: each `get`'s key and the object it
//! found, each `list`'s scope and the objects it returned, in order, bounded.
//!
//! # Expected flow
//! The `cache` imports record every read a call makes ([`ReadSet::get`],
//! [`ReadSet::list`]) as it returns (a denied read records nothing: it gives
//! the same answer until the grants change, and grants are the plugin's
//! version's). The call's [`Reply`](crate::Reply) carries the set out.
//! The engine keeps, per key, the [`Witness`] of its last successful
//! reconcile: the resourceVersion each read saw, a fingerprint of each
//! list. [`Witness::unchanged`] reads again through the same rules
//! ([`crate::reads`]) and says whether every read would give what it gave:
//! a reconcile whose inputs are unchanged need not run again.
//!
//! # Guarantees
//! - **Bounded.** At most [`MAX_READS`] reads are recorded per call; a call
//!   reading more has no witness ([`ReadSet::witness`] is `None`), so it is
//!   never skipped. The objects are the cache's own (`Arc`s), never copies.
//! - **Same rules.** A witness is checked with [`crate::reads::get`] and
//!   [`crate::reads::list`], the very functions the imports call: what the
//!   plugin would see, not what the cache holds.
//! - **Conservative.** An object without a resourceVersion (a fixture) is
//!   compared by its text; a read that now fails counts as changed.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::cache::{Cache, CachedObject};
use crate::grants::Grants;
use crate::reads;
use kubewasm_core::resource::{ObjectKey, ResourceType};

/// Most reads recorded per call.
pub const MAX_READS: usize = 256;

/// One read and what it gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    /// `cache.get`.
    Get {
        /// The type, as the plugin named it.
        resource: ResourceType,
        /// The key.
        key: ObjectKey,
        /// What it found.
        found: Option<Arc<CachedObject>>,
    },
    /// `cache.list`.
    List {
        /// The type, as the plugin named it.
        resource: ResourceType,
        /// The namespace, or all.
        namespace: Option<String>,
        /// The label selector passed.
        selector: String,
        /// What it returned, in order.
        found: Vec<Arc<CachedObject>>,
    },
}

/// What one call read (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadSet {
    reads: Vec<Read>,
    /// Reads were left out: more were made than [`MAX_READS`], or none
    /// was recorded.
    overflowed: bool,
}

/// A set of the reads given, bounded as a call's is (what a test of what
/// consumes read sets starts from).
impl FromIterator<Read> for ReadSet {
    fn from_iter<I: IntoIterator<Item = Read>>(reads: I) -> Self {
        let mut set = Self::default();
        reads.into_iter().for_each(|read| set.push(read));
        set
    }
}

impl ReadSet {
    fn push(&mut self, read: Read) {
        if self.reads.len() < MAX_READS {
            self.reads.push(read);
        } else {
            self.overflowed = true;
        }
    }

    /// The reads of a call that recorded none
    /// ([`RuntimeConfig::record_reads`](crate::RuntimeConfig::record_reads)
    /// off): no witness.
    pub(crate) fn not_recorded() -> Self {
        Self {
            reads: Vec::new(),
            overflowed: true,
        }
    }

    /// Records a `get` and what it found.
    pub(crate) fn get(
        &mut self,
        resource: ResourceType,
        key: ObjectKey,
        found: Option<Arc<CachedObject>>,
    ) {
        self.push(Read::Get {
            resource,
            key,
            found,
        });
    }

    /// Records a `list` and what it returned.
    pub(crate) fn list(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        selector: String,
        found: Vec<Arc<CachedObject>>,
    ) {
        self.push(Read::List {
            resource,
            namespace,
            selector,
            found,
        });
    }

    /// The reads, in the order made.
    pub fn reads(&self) -> &[Read] {
        &self.reads
    }

    /// Whether reads were left out (more than [`MAX_READS`], or none
    /// recorded).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// What tells whether the reads would give the same again, with
    /// `inputs` (anything else the call depended on: the engine's version
    /// and primary) compared too; `None` when reads were left out.
    pub fn witness(&self, inputs: impl Hash) -> Option<Witness> {
        if self.overflowed {
            return None;
        }
        let mut seen = std::hash::DefaultHasher::new();
        let queries = self
            .reads
            .iter()
            .map(|read| match read {
                Read::Get {
                    resource,
                    key,
                    found,
                } => {
                    found.as_deref().map(version).hash(&mut seen);
                    Query::Get {
                        resource: resource.clone(),
                        key: key.clone(),
                    }
                }
                Read::List {
                    resource,
                    namespace,
                    selector,
                    found,
                } => {
                    fingerprint(found).hash(&mut seen);
                    Query::List {
                        resource: resource.clone(),
                        namespace: namespace.clone(),
                        selector: selector.clone(),
                    }
                }
            })
            .collect();
        inputs.hash(&mut seen);
        Some(Witness { queries, seen })
    }
}

/// An object's resourceVersion, or (none: a fixture) a fingerprint of its
/// text.
fn version(object: &CachedObject) -> Version<'_> {
    match object.resource_version() {
        Some(version) => Version::Resource(version),
        None => {
            let mut hasher = std::hash::DefaultHasher::new();
            object.json().hash(&mut hasher);
            Version::Text(hasher.finish())
        }
    }
}

/// Which version of an object was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Version<'a> {
    Resource(&'a str),
    Text(u64),
}

/// A fingerprint of a list's objects: their keys and versions, in order.
fn fingerprint(objects: &[Arc<CachedObject>]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    objects.len().hash(&mut hasher);
    for object in objects {
        object.key().hash(&mut hasher);
        version(object).hash(&mut hasher);
    }
    hasher.finish()
}

/// One read (or write) as the witness makes it again.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Query {
    Get {
        resource: ResourceType,
        key: ObjectKey,
    },
    List {
        resource: ResourceType,
        namespace: Option<String>,
        selector: String,
    },
    /// An object the outcome wrote or deleted: looked up in the host's
    /// cache, whatever the plugin may read.
    Wrote {
        resource: ResourceType,
        key: ObjectKey,
    },
}

/// The queries a call made, and a hash of what they gave: what a skipped
/// call is compared by (see the module documentation). Held per key, so
/// kept small: the answers are hashed, never kept.
#[derive(Clone, Debug)]
pub struct Witness {
    queries: Vec<Query>,
    seen: std::hash::DefaultHasher,
}

impl PartialEq for Witness {
    fn eq(&self, other: &Self) -> bool {
        self.queries == other.queries && self.digest() == other.digest()
    }
}

impl Witness {
    /// A hash of everything the queries gave (and what was added to it).
    pub fn digest(&self) -> u64 {
        self.seen.finish()
    }

    /// Adds an object the outcome wrote, with the resourceVersion the
    /// write gave it, or deleted (`None`): a child deleted or changed by
    /// someone else makes the inputs differ, so a plugin that applies
    /// without reading still heals its children.
    pub fn wrote(&mut self, resource: &ResourceType, key: &ObjectKey, version: Option<&str>) {
        self.queries.push(Query::Wrote {
            resource: resource.clone(),
            key: key.clone(),
        });
        version.map(Version::Resource).hash(&mut self.seen);
    }

    /// The queries alone, to be asked again ([`Queries::digest`]) and
    /// compared with [`Self::digest`].
    pub fn into_queries(self) -> Queries {
        Queries(self.queries.into_boxed_slice())
    }

    /// Whether every read, made again through `cache` under `grants`, and
    /// every object written, looked up again, give what they gave, with the
    /// same `inputs`.
    pub fn unchanged(&self, cache: &dyn Cache, grants: &Grants, inputs: impl Hash) -> bool {
        Queries::ask(&self.queries, cache, grants, inputs) == Some(self.digest())
    }

    /// How many queries it holds.
    pub fn len(&self) -> usize {
        self.queries.len()
    }

    /// Whether the call read and wrote nothing.
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}

/// A witness's queries without their answers (what the engine keeps per
/// key, beside the digest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Queries(Box<[Query]>);

impl Queries {
    /// The digest the queries give now through `cache` under `grants`,
    /// with `inputs` (hashed after the reads, before what was written, as
    /// [`ReadSet::witness`] and [`Witness::wrote`] did); `None` when a read
    /// fails.
    fn ask(
        queries: &[Query],
        cache: &dyn Cache,
        grants: &Grants,
        inputs: impl Hash,
    ) -> Option<u64> {
        let mut seen = std::hash::DefaultHasher::new();
        let mut wrote = Vec::new();
        for query in queries {
            match query {
                Query::Get { resource, key } => {
                    let found = reads::get(cache, grants, resource, key).ok()?;
                    found.as_deref().map(version).hash(&mut seen);
                }
                Query::List {
                    resource,
                    namespace,
                    selector,
                } => {
                    let found =
                        reads::list(cache, grants, resource, namespace.as_deref(), selector)
                            .ok()?;
                    fingerprint(&found).hash(&mut seen);
                }
                Query::Wrote { resource, key } => wrote.push((resource, key)),
            }
        }
        inputs.hash(&mut seen);
        for (resource, key) in wrote {
            let cached = cache.get(resource, key);
            cached.as_deref().map(version).hash(&mut seen);
        }
        Some(seen.finish())
    }

    /// The digest the queries give now (see [`Witness::unchanged`]).
    pub fn digest(&self, cache: &dyn Cache, grants: &Grants, inputs: impl Hash) -> Option<u64> {
        Self::ask(&self.0, cache, grants, inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::MemoryCache;
    use crate::declaration::Verb;
    use crate::declaration::tests::sample;
    use crate::grants::OperatorGrants;
    use serde_json::json;

    fn config_map(name: &str, version: &str, labels: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
            "namespace": "default", "resourceVersion": version, "labels": labels}})
    }

    fn config_maps() -> ResourceType {
        crate::declaration::tests::ty("v1", "ConfigMap", "configmaps", true)
    }

    /// A read set of a get of `a` and a list of `app=x`, made on `cache`.
    fn read(cache: &MemoryCache, grants: &Grants) -> ReadSet {
        let mut set = ReadSet::default();
        let key = ObjectKey::namespaced("default", "a");
        let found = reads::get(cache, grants, &config_maps(), &key).expect("granted");
        set.get(config_maps(), key, found);
        let found =
            reads::list(cache, grants, &config_maps(), Some("default"), "app=x").expect("granted");
        set.list(config_maps(), Some("default".into()), "app=x".into(), found);
        set
    }

    fn grants() -> Grants {
        let mut declaration = sample().validate().expect("valid");
        declaration.secondaries[0].resource = config_maps();
        declaration.secondaries[0].verbs = [Verb::Get, Verb::List, Verb::Watch].into();
        Grants::new(&declaration, &OperatorGrants::unrestricted()).expect("granted")
    }

    #[test]
    fn a_witness_should_see_a_change_of_what_was_read_and_nothing_else() {
        let grants = grants();
        // `a` is got, `b` listed by its label, `other` not read.
        let cache = |a: &str, b_labels, other: &str, other_labels| {
            MemoryCache::from_objects([
                config_map("a", a, json!({})),
                config_map("b", "1", b_labels),
                config_map("other", other, other_labels),
            ])
            .expect("cached")
        };
        let before = cache("1", json!({"app": "x"}), "1", json!({}));
        let witness = read(&before, &grants).witness(()).expect("bounded");
        assert_eq!(witness.len(), 2);
        assert!(witness.unchanged(&before, &grants, ()));
        assert!(
            !witness.unchanged(&before, &grants, "another version"),
            "other inputs"
        );
        let unrelated = cache("1", json!({"app": "x"}), "2", json!({}));
        assert!(
            witness.unchanged(&unrelated, &grants, ()),
            "something else changed"
        );
        let got = cache("2", json!({"app": "x"}), "1", json!({}));
        assert!(
            !witness.unchanged(&got, &grants, ()),
            "the object got changed"
        );
        let left = cache("1", json!({"app": "y"}), "1", json!({}));
        assert!(
            !witness.unchanged(&left, &grants, ()),
            "one left the selector"
        );
        let entered = cache("1", json!({"app": "x"}), "2", json!({"app": "x"}));
        assert!(!witness.unchanged(&entered, &grants, ()), "one entered it");
        let gone =
            MemoryCache::from_objects([config_map("b", "1", json!({"app": "x"}))]).expect("cached");
        assert!(
            !witness.unchanged(&gone, &grants, ()),
            "the object got went"
        );
    }

    #[test]
    fn a_witness_should_see_what_was_written_changed_or_deleted() {
        let grants = grants();
        let mut witness = ReadSet::default().witness(()).expect("bounded");
        let (a, b) = (
            ObjectKey::namespaced("default", "a"),
            ObjectKey::namespaced("default", "b"),
        );
        witness.wrote(&config_maps(), &a, Some("5"));
        witness.wrote(&config_maps(), &b, None);
        let cache =
            |objects: Vec<serde_json::Value>| MemoryCache::from_objects(objects).expect("cached");
        let written = cache(vec![config_map("a", "5", json!({}))]);
        assert!(witness.unchanged(&written, &grants, ()));
        let edited = cache(vec![config_map("a", "6", json!({}))]);
        assert!(
            !witness.unchanged(&edited, &grants, ()),
            "changed by someone"
        );
        assert!(
            !witness.unchanged(&cache(vec![]), &grants, ()),
            "deleted by someone"
        );
        let back = cache(vec![
            config_map("a", "5", json!({})),
            config_map("b", "1", json!({})),
        ]);
        assert!(
            !witness.unchanged(&back, &grants, ()),
            "a deleted one is back"
        );
    }

    #[test]
    fn a_call_reading_more_than_the_bound_should_have_no_witness() {
        let mut set = ReadSet::default();
        for i in 0..=MAX_READS {
            set.get(
                config_maps(),
                ObjectKey::namespaced("default", format!("k{i}")),
                None,
            );
        }
        assert!(set.overflowed());
        assert_eq!(set.reads().len(), MAX_READS);
        assert!(set.witness(()).is_none());
    }
}
