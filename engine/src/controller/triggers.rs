//! Reads as triggers: a secondary declared with the `reads` mapping
//! enqueues the primaries whose last successful reconcile read an object of
//! it that changed, appeared or went. No mapping code to write: what a
//! reconcile read is what it depends on.
//!
//! # The index
//! After each successful `reconcile` with its primary present, the reads
//! the call made of the plugin's `reads` types replace those its key had:
//! each `get` by type and key (found or not: a get that found nothing is
//! triggered by the object's creation), each `list` by type, namespace and
//! selector. A key whose primary is gone is dropped. A failed reconcile
//! keeps what the key had (it is retried anyway).
//!
//! A change of an object of a `reads` type, in its new state or in its
//! previous one (a deleted object: its last), enqueues:
//! - the keys that got it by key;
//! - the keys that listed its type in its namespace (or in all) with a
//!   selector its labels match, before or after: an object entering or
//!   leaving a listed selector triggers.
//!
//! # Bound
//! A call's reads are recorded up to
//! [`MAX_READS`](kubewasm_runtime::read_set::MAX_READS). A key whose last
//! reconcile read more (or recorded none) has no complete read set: it is
//! enqueued by every change of a `reads` type instead (correct, costlier),
//! counted in `kubewasm_read_triggers_overflowed_total`. Other mappings
//! declared for the type still apply.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use kubewasm_runtime::cache::CachedObject;
use kubewasm_runtime::declaration::{Declaration, Mapping};
use kubewasm_runtime::read_set::{Read, ReadSet};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use kubewasm_runtime::selector::Selector;

use crate::listing::Key;

/// A read a key is triggered by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Watched {
    Get(ResourceType, ObjectKey),
    List(ResourceType, Option<String>, String),
}

/// A list's scope: its type, namespace (or all) and selector.
type Scope = (ResourceType, Option<String>, String);

#[derive(Default)]
struct Index {
    /// What each key read last (to take it out again).
    by_key: HashMap<Key, Box<[Watched]>>,
    /// The keys that got an object, by type and key.
    gets: HashMap<(ResourceType, ObjectKey), HashSet<Key>>,
    /// The keys that listed a type in a namespace with a selector, the
    /// selector parsed once.
    lists: HashMap<Scope, (Selector, HashSet<Key>)>,
    /// The keys whose read set is incomplete.
    overflowed: HashSet<Key>,
}

/// The index of what each key last read of the plugin's `reads` types (see
/// the module documentation).
#[derive(Default)]
pub(super) struct Triggers(Mutex<Index>);

impl Triggers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces what `key` read with `reads`, the reads of its successful
    /// reconcile on a plugin declaring `declaration`, as far as its `reads`
    /// types go; returns whether they were incomplete (overflowed).
    pub(super) fn record(&self, key: &Key, reads: &ReadSet, declaration: &Declaration) -> bool {
        let types: Vec<&ResourceType> = declaration
            .secondaries
            .iter()
            .filter(|s| s.mapping == Mapping::Reads)
            .map(|s| &s.resource)
            .collect();
        if types.is_empty() {
            // No `reads` type (any more: a swap may have taken it away).
            let mut index = self.lock();
            if !index.by_key.is_empty() || !index.overflowed.is_empty() {
                index.remove(key);
            }
            return false;
        }
        // A read is indexed under the type as declared (the handler's),
        // whatever version the plugin named.
        let declared = |resource: &ResourceType| {
            types
                .iter()
                .find(|t| t.same_kind(resource))
                .map(|t| (*t).clone())
        };
        let watched: Box<[Watched]> = reads
            .reads()
            .iter()
            .filter_map(|read| match read {
                Read::Get { resource, key, .. } => {
                    Some(Watched::Get(declared(resource)?, key.clone()))
                }
                Read::List {
                    resource,
                    namespace,
                    selector,
                    ..
                } => Some(Watched::List(
                    declared(resource)?,
                    namespace.clone(),
                    selector.clone(),
                )),
            })
            .collect();
        let mut index = self.lock();
        index.remove(key);
        let overflowed = reads.overflowed();
        if overflowed {
            index.overflowed.insert(Arc::clone(key));
        }
        for read in &watched {
            match read {
                Watched::Get(resource, object) => {
                    index
                        .gets
                        .entry((resource.clone(), object.clone()))
                        .or_default()
                        .insert(Arc::clone(key));
                }
                Watched::List(resource, namespace, selector) => {
                    // Recorded only once the cache parsed it.
                    let Ok(parsed) = Selector::parse(selector) else {
                        continue;
                    };
                    index
                        .lists
                        .entry((resource.clone(), namespace.clone(), selector.clone()))
                        .or_insert_with(|| (parsed, HashSet::new()))
                        .1
                        .insert(Arc::clone(key));
                }
            }
        }
        index.by_key.insert(Arc::clone(key), watched);
        overflowed
    }

    /// Drops what `key` read: its primary is gone.
    pub(super) fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }

    /// The keys a change of an object of `resource` triggers: its states
    /// `states` (the new one and the previous one, or the last one).
    pub(super) fn readers<'a>(
        &self,
        resource: &ResourceType,
        states: impl IntoIterator<Item = &'a CachedObject>,
    ) -> HashSet<Key> {
        let index = self.lock();
        let mut keys: HashSet<Key> = index.overflowed.iter().cloned().collect();
        for state in states {
            let Some(object) = state.key() else {
                continue;
            };
            if let Some(getters) = index.gets.get(&(resource.clone(), object.clone())) {
                keys.extend(getters.iter().cloned());
            }
            for ((listed, namespace, _), (selector, listers)) in &index.lists {
                let in_scope = namespace.is_none() || *namespace == object.namespace;
                if listed == resource && in_scope && state.selected_by(selector) {
                    keys.extend(listers.iter().cloned());
                }
            }
        }
        keys
    }
}

impl Index {
    fn remove(&mut self, key: &ObjectKey) {
        self.overflowed.remove(key);
        let Some(watched) = self.by_key.remove(key) else {
            return;
        };
        for read in watched.iter() {
            match read {
                Watched::Get(resource, object) => {
                    let entry = (resource.clone(), object.clone());
                    if let Some(keys) = self.gets.get_mut(&entry) {
                        keys.remove(key);
                        if keys.is_empty() {
                            self.gets.remove(&entry);
                        }
                    }
                }
                Watched::List(resource, namespace, selector) => {
                    let entry = (resource.clone(), namespace.clone(), selector.clone());
                    if let Some((_, keys)) = self.lists.get_mut(&entry) {
                        keys.remove(key);
                        if keys.is_empty() {
                            self.lists.remove(&entry);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kubewasm_runtime::declaration::{Declaration, Secondary};
    use kubewasm_runtime::read_set::MAX_READS;
    use serde_json::{Value, json};

    use super::*;

    fn config_maps() -> ResourceType {
        ResourceType {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespaced: true,
        }
    }

    /// A plugin reconciling ConfigMaps too (any primary does) that reads
    /// ConfigMaps as triggers.
    fn declaration(mapping: Mapping) -> Declaration {
        Declaration {
            name: "reader".into(),
            version: "0.1.0".into(),
            primary: ResourceType {
                group: "example.com".into(),
                kind: "App".into(),
                plural: "apps".into(),
                ..config_maps()
            },
            primary_verbs: BTreeSet::new(),
            primary_selector: String::new(),
            secondaries: vec![Secondary {
                resource: config_maps(),
                verbs: BTreeSet::new(),
                label_selector: String::new(),
                mapping,
                prune: false,
            }],
            managed_finalizer: false,
            resync_seconds: None,
            max_concurrency: None,
            config_schema: None,
            schedule: None,
        }
    }

    fn key(name: &str) -> Key {
        Arc::new(ObjectKey::namespaced("default", name))
    }

    fn get(name: &str) -> Read {
        Read::Get {
            resource: config_maps(),
            key: ObjectKey::namespaced("default", name),
            found: None,
        }
    }

    fn list(namespace: Option<&str>, selector: &str) -> Read {
        Read::List {
            resource: config_maps(),
            namespace: namespace.map(str::to_owned),
            selector: selector.into(),
            found: Vec::new(),
        }
    }

    fn config_map(namespace: &str, name: &str, tier: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": namespace, "labels": {"tier": tier}}})
    }

    fn readers(triggers: &Triggers, states: &[Value]) -> BTreeSet<String> {
        let states: Vec<CachedObject> = states.iter().cloned().map(CachedObject::new).collect();
        triggers
            .readers(&config_maps(), &states)
            .iter()
            .map(|k| k.name.clone())
            .collect()
    }

    fn names(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_change_should_trigger_who_got_it_and_who_listed_it_before_or_after() {
        let triggers = Triggers::default();
        let decl = declaration(Mapping::Reads);
        triggers.record(
            &key("by-name"),
            &[get("settings")].into_iter().collect(),
            &decl,
        );
        triggers.record(
            &key("by-list"),
            &[list(Some("default"), "tier=web")].into_iter().collect(),
            &decl,
        );
        triggers.record(
            &key("everywhere"),
            &[list(None, "")].into_iter().collect(),
            &decl,
        );

        let settings = config_map("default", "settings", "db");
        assert_eq!(
            readers(&triggers, &[settings]),
            names(&["by-name", "everywhere"])
        );
        // Entering the listed selector, or leaving it: the lister either way.
        let before = config_map("default", "other", "db");
        let after = config_map("default", "other", "web");
        assert_eq!(
            readers(&triggers, &[after.clone(), before.clone()]),
            names(&["by-list", "everywhere"])
        );
        assert_eq!(
            readers(&triggers, &[before, after]),
            names(&["by-list", "everywhere"])
        );
        // Another namespace: only the list of all namespaces.
        assert_eq!(
            readers(&triggers, &[config_map("elsewhere", "other", "web")]),
            names(&["everywhere"])
        );
    }

    #[test]
    fn a_new_reconcile_should_replace_what_a_key_read_and_a_gone_primary_drop_it() {
        let triggers = Triggers::default();
        let decl = declaration(Mapping::Reads);
        triggers.record(&key("a"), &[get("old")].into_iter().collect(), &decl);
        triggers.record(&key("a"), &[get("new")].into_iter().collect(), &decl);
        assert!(readers(&triggers, &[config_map("default", "old", "x")]).is_empty());
        assert_eq!(
            readers(&triggers, &[config_map("default", "new", "x")]),
            names(&["a"])
        );
        triggers.forget(&ObjectKey::namespaced("default", "a"));
        assert!(readers(&triggers, &[config_map("default", "new", "x")]).is_empty());
        assert!(triggers.lock().gets.is_empty(), "nothing left behind");
    }

    #[test]
    fn only_reads_types_are_kept_and_an_overflow_triggers_on_every_change() {
        let triggers = Triggers::default();
        let not_reads = declaration(Mapping::Custom);
        triggers.record(&key("a"), &[get("x")].into_iter().collect(), &not_reads);
        assert!(readers(&triggers, &[config_map("default", "x", "x")]).is_empty());

        let decl = declaration(Mapping::Reads);
        let many: ReadSet = (0..=MAX_READS).map(|i| get(&format!("cm-{i}"))).collect();
        assert!(triggers.record(&key("greedy"), &many, &decl), "overflowed");
        assert_eq!(
            readers(&triggers, &[config_map("default", "unrelated", "x")]),
            names(&["greedy"])
        );
    }
}
