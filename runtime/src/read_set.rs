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
use crate::resource::{ObjectKey, ResourceType};

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

    /// What tells whether the reads would give the same again; `None` when
    /// reads were left out.
    pub fn witness(&self) -> Option<Witness> {
        if self.overflowed {
            return None;
        }
        let seen = self
            .reads
            .iter()
            .map(|read| match read {
                Read::Get {
                    resource,
                    key,
                    found,
                } => Seen::Get {
                    resource: resource.clone(),
                    key: key.clone(),
                    version: found.as_deref().map(version),
                },
                Read::List {
                    resource,
                    namespace,
                    selector,
                    found,
                } => Seen::List {
                    resource: resource.clone(),
                    namespace: namespace.clone(),
                    selector: selector.clone(),
                    fingerprint: fingerprint(found),
                },
            })
            .collect();
        Some(Witness(seen))
    }
}

/// An object's resourceVersion, or (none: a fixture) a fingerprint of its
/// text.
fn version(object: &CachedObject) -> Version {
    match object
        .value()
        .pointer("/metadata/resourceVersion")
        .and_then(serde_json::Value::as_str)
    {
        Some(version) => Version::Resource(version.into()),
        None => {
            let mut hasher = std::hash::DefaultHasher::new();
            object.json().hash(&mut hasher);
            Version::Text(hasher.finish())
        }
    }
}

/// Which version of an object was seen.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Version {
    Resource(Box<str>),
    Text(u64),
}

/// A fingerprint of a list's objects: their keys and versions, in order.
fn fingerprint(objects: &[Arc<CachedObject>]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    objects.len().hash(&mut hasher);
    for object in objects {
        ObjectKey::of(object.value()).hash(&mut hasher);
        version(object).hash(&mut hasher);
    }
    hasher.finish()
}

/// One read as the witness keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Get {
        resource: ResourceType,
        key: ObjectKey,
        version: Option<Version>,
    },
    List {
        resource: ResourceType,
        namespace: Option<String>,
        selector: String,
        fingerprint: u64,
    },
    /// An object the outcome wrote (with the resourceVersion the write
    /// gave it) or deleted (`None`): compared with what the host's cache
    /// holds, whatever the plugin may read.
    Wrote {
        resource: ResourceType,
        key: ObjectKey,
        version: Option<Box<str>>,
    },
}

/// The versions a call's reads saw: what a skipped call is compared by
/// (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Witness(Vec<Seen>);

impl Witness {
    /// Whether every read, made again through `cache` under `grants`,
    /// gives what it gave.
    pub fn unchanged(&self, cache: &dyn Cache, grants: &Grants) -> bool {
        self.0.iter().all(|seen| match seen {
            Seen::Get {
                resource,
                key,
                version: seen,
            } => reads::get(cache, grants, resource, key)
                .is_ok_and(|found| found.as_deref().map(version) == *seen),
            Seen::List {
                resource,
                namespace,
                selector,
                fingerprint: seen,
            } => reads::list(cache, grants, resource, namespace.as_deref(), selector)
                .is_ok_and(|found| fingerprint(&found) == *seen),
            Seen::Wrote {
                resource,
                key,
                version: written,
            } => {
                let cached = cache.get(resource, key);
                match (cached.as_deref().map(version), written) {
                    (None, None) => true,
                    (Some(Version::Resource(cached)), Some(written)) => cached == *written,
                    _ => false,
                }
            }
        })
    }

    /// Adds an object the outcome wrote, with the resourceVersion the
    /// write gave it, or deleted (`None`): a child deleted or changed by
    /// someone else makes the inputs differ, so a plugin that applies
    /// without reading still heals its children.
    pub fn wrote(&mut self, resource: &ResourceType, key: &ObjectKey, version: Option<&str>) {
        self.0.push(Seen::Wrote {
            resource: resource.clone(),
            key: key.clone(),
            version: version.map(Into::into),
        });
    }

    /// How many reads it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the call read nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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
        let witness = read(&before, &grants).witness().expect("bounded");
        assert_eq!(witness.len(), 2);
        assert!(witness.unchanged(&before, &grants));
        let unrelated = cache("1", json!({"app": "x"}), "2", json!({}));
        assert!(
            witness.unchanged(&unrelated, &grants),
            "something else changed"
        );
        let got = cache("2", json!({"app": "x"}), "1", json!({}));
        assert!(!witness.unchanged(&got, &grants), "the object got changed");
        let left = cache("1", json!({"app": "y"}), "1", json!({}));
        assert!(!witness.unchanged(&left, &grants), "one left the selector");
        let entered = cache("1", json!({"app": "x"}), "2", json!({"app": "x"}));
        assert!(!witness.unchanged(&entered, &grants), "one entered it");
        let gone =
            MemoryCache::from_objects([config_map("b", "1", json!({"app": "x"}))]).expect("cached");
        assert!(!witness.unchanged(&gone, &grants), "the object got went");
    }

    #[test]
    fn a_witness_should_see_what_was_written_changed_or_deleted() {
        let grants = grants();
        let mut witness = ReadSet::default().witness().expect("bounded");
        let (a, b) = (
            ObjectKey::namespaced("default", "a"),
            ObjectKey::namespaced("default", "b"),
        );
        witness.wrote(&config_maps(), &a, Some("5"));
        witness.wrote(&config_maps(), &b, None);
        let cache =
            |objects: Vec<serde_json::Value>| MemoryCache::from_objects(objects).expect("cached");
        let written = cache(vec![config_map("a", "5", json!({}))]);
        assert!(witness.unchanged(&written, &grants));
        let edited = cache(vec![config_map("a", "6", json!({}))]);
        assert!(!witness.unchanged(&edited, &grants), "changed by someone");
        assert!(
            !witness.unchanged(&cache(vec![]), &grants),
            "deleted by someone"
        );
        let back = cache(vec![
            config_map("a", "5", json!({})),
            config_map("b", "1", json!({})),
        ]);
        assert!(!witness.unchanged(&back, &grants), "a deleted one is back");
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
        assert!(set.witness().is_none());
    }
}
