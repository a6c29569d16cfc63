//! The garbage collector and the namespace controller, run as the real
//! controller-manager runs them: asynchronously, driven by the store's
//! events.
//!
//! - **Background** deletion: once every owner named in an object's
//!   `ownerReferences` is gone, the object is deleted. That holds for an
//!   object written after its owners went too (a controller's apply that
//!   raced its owner's deletion): as the real collector does with dangling
//!   references, it is deleted once seen.
//! - **Foreground** deletion (`foregroundDeletion` finalizer): the owner's
//!   dependents are deleted first; the finalizer is removed when none is left.
//! - **Orphan** deletion (`orphan` finalizer): the owner's references are
//!   removed from its dependents, then the finalizer.
//! - **Namespaces** being deleted are emptied, then removed.
//!
//! Deleting means what an API delete means: an object with finalizers gets
//! a `deletionTimestamp` and stays until they are removed.
//!
//! Dependents and owners are found through the store's indexes (by owner
//! uid, by uid) and a namespace's objects by range reads: a deletion costs
//! what it touches, not the size of the store. Only the sweep after the
//! collector fell behind the history scans everything.

use std::sync::Arc;

use kubewasm_core::ObjectKey;
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::objects::{begin_deletion, metadata_mut, strings_at};
use crate::store::{Event, EventType, ResourceKey, Store, StoreError};

/// The finalizer of foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of orphan deletion.
pub const ORPHAN: &str = "orphan";

fn namespaces() -> ResourceKey {
    ResourceKey::new("", "namespaces")
}

fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

fn finalizers(object: &Value) -> Vec<String> {
    strings_at(object, "/metadata/finalizers")
}

fn owner_uids(object: &Value) -> Vec<String> {
    crate::store::index::owner_uids(object)
        .map(str::to_owned)
        .collect()
}

fn deleting(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some()
}

/// Starts the collector on `store`; it runs until the task is aborted.
pub fn spawn(store: Store) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut from = store.current_rv();
        loop {
            let mut watcher = match store.watch(None, from) {
                Ok(w) => w,
                Err(_) => {
                    // Fell behind the history: resume from now, then sweep.
                    from = store.current_rv();
                    sweep(&store);
                    continue;
                }
            };
            // Until the history moves past this watcher; then resume.
            while let Ok(event) = watcher.next().await {
                from = event.rv;
                handle(&store, &event);
            }
        }
    })
}

/// Reacts to one change.
fn handle(store: &Store, event: &Event) {
    let object = &event.object;
    match event.kind {
        EventType::Deleted => {
            if let Some(uid) = uid(object) {
                collect_dependents_of(store, uid);
            }
            // A namespace being emptied may be done now.
            if let Some(ns) = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
            {
                finish_namespace(store, ns);
            }
            // Owners waiting in foreground for their last dependent.
            for owner in owner_uids(object) {
                release_foreground_owner(store, &owner);
            }
        }
        EventType::Added | EventType::Modified if deleting(object) => {
            let f = finalizers(object);
            if let Some(uid) = uid(object) {
                if f.iter().any(|x| x == ORPHAN) {
                    orphan_dependents(store, uid);
                    remove_finalizer(store, &event.resource, object, ORPHAN);
                } else if f.iter().any(|x| x == FOREGROUND) {
                    let dependents = dependents(store, uid);
                    if dependents.is_empty() {
                        remove_finalizer(store, &event.resource, object, FOREGROUND);
                    }
                    for (resource, dependent) in dependents {
                        delete(store, &resource, &dependent);
                    }
                }
            }
            if event.resource == namespaces()
                && let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str)
            {
                empty_namespace(store, name);
                finish_namespace(store, name);
            }
        }
        EventType::Added | EventType::Modified => {
            collect_if_dangling(store, &event.resource, object)
        }
    }
}

/// Deletes an object written with owners that are all gone, if it is still
/// the object the event saw (same uid) and its owners are still gone.
fn collect_if_dangling(store: &Store, resource: &ResourceKey, seen: &Value) {
    let owners = owner_uids(seen);
    if owners.is_empty() || owners.iter().any(|u| exists(store, u)) {
        return;
    }
    let Some(key) = ObjectKey::of(seen) else {
        return;
    };
    if let Some(current) = store.get(resource, &key)
        && uid(&current) == uid(seen)
        && owner_uids(&current).iter().all(|u| !exists(store, u))
    {
        delete(store, resource, &current);
    }
}

/// After falling behind: deletes every object whose owners are all gone.
fn sweep(store: &Store) {
    let live: std::collections::HashSet<String> = store
        .find(|_| true)
        .iter()
        .filter_map(|(_, o)| uid(o).map(str::to_owned))
        .collect();
    for (resource, object) in store.find(|o| !owner_uids(o).is_empty()) {
        if owner_uids(&object).iter().all(|u| !live.contains(u)) {
            delete(store, &resource, &object);
        }
    }
}

fn dependents(store: &Store, owner: &str) -> Vec<(ResourceKey, Arc<Value>)> {
    store.dependents(owner)
}

fn exists(store: &Store, uid: &str) -> bool {
    store.by_uid(uid).is_some()
}

/// Background deletion: dependents whose owners are all gone are deleted.
fn collect_dependents_of(store: &Store, owner: &str) {
    for (resource, dependent) in dependents(store, owner) {
        let others_alive = owner_uids(&dependent)
            .iter()
            .any(|u| u != owner && exists(store, u));
        if !others_alive {
            delete(store, &resource, &dependent);
        }
    }
}

fn release_foreground_owner(store: &Store, owner: &str) {
    if let Some((resource, object)) = store.by_uid(owner)
        && deleting(&object)
        && finalizers(&object).iter().any(|f| f == FOREGROUND)
        && dependents(store, owner).is_empty()
    {
        remove_finalizer(store, &resource, &object, FOREGROUND);
    }
}

fn orphan_dependents(store: &Store, owner: &str) {
    for (resource, dependent) in dependents(store, owner) {
        let Some(key) = ObjectKey::of(&dependent) else {
            continue;
        };
        let _ = store.update::<StoreError>(&resource, &key, |current| {
            let mut next = current.clone();
            if let Some(refs) = next
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner));
            }
            Ok(next)
        });
    }
}

/// Deletes as an API delete does: finalizers make it graceful.
fn delete(store: &Store, resource: &ResourceKey, object: &Value) {
    let Some(key) = ObjectKey::of(object) else {
        return;
    };
    if finalizers(object).is_empty() {
        let _ = store.delete::<StoreError>(resource, &key, |_| Ok(()));
    } else if !deleting(object) {
        let _ = store.update::<StoreError>(resource, &key, |current| {
            let mut next = current.clone();
            if let Some(m) = metadata_mut(&mut next) {
                begin_deletion(m, 0);
            }
            Ok(next)
        });
    }
}

/// Removes one finalizer; the object goes once none is left. Taking the
/// last one off an object being deleted deletes it as it is stored, as a
/// real server's store does (`errEmptiedFinalizers`): watchers see it go
/// with the finalizer it had, in one event.
fn remove_finalizer(store: &Store, resource: &ResourceKey, object: &Value, finalizer: &str) {
    let Some(key) = ObjectKey::of(object) else {
        return;
    };
    let last =
        |current: &Value| deleting(current) && finalizers(current).iter().all(|f| f == finalizer);
    /// The object was not deleted: it has other finalizers (or is gone).
    struct Kept;
    impl From<StoreError> for Kept {
        fn from(_: StoreError) -> Self {
            Kept
        }
    }
    let gone = store.delete::<Kept>(resource, &key, |current| {
        if last(current) { Ok(()) } else { Err(Kept) }
    });
    if gone.is_ok() {
        return;
    }
    let _ = store.update::<StoreError>(resource, &key, |current| {
        let mut next = current.clone();
        if let Some(list) = next
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            list.retain(|f| f != finalizer);
        }
        Ok(next)
    });
}

fn empty_namespace(store: &Store, namespace: &str) {
    for (resource, object) in store.in_namespace(namespace) {
        delete(store, &resource, &object);
    }
}

/// The namespace controller's deletion conditions, in its order: each
/// `False` with its "ok" reason and message, or `True` with what remains.
const DELETION_CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// A terminating namespace's `status.conditions` once its content was
/// deleted: what remains (by resource, then by finalizer), in the words
/// of the real namespace controller, which writes them as
/// `kube-controller-manager` before it removes the namespace.
fn deletion_conditions(store: &Store, namespace: &Value) -> Value {
    let name = namespace
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut by_resource = std::collections::BTreeMap::<String, usize>::new();
    let mut by_finalizer = std::collections::BTreeMap::<String, usize>::new();
    for (resource, object) in store.in_namespace(name) {
        *by_resource
            .entry(format!("{}.{}", resource.plural, resource.group))
            .or_default() += 1;
        for finalizer in finalizers(&object) {
            *by_finalizer.entry(finalizer).or_default() += 1;
        }
    }
    // In key order, which is the order of the sentences Go sorts.
    let listed = |counts: std::collections::BTreeMap<String, usize>, word: &str| {
        counts
            .into_iter()
            .map(|(what, n)| format!("{what}{word}{n} resource instances"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let remaining: [Option<(&str, String)>; 5] = [
        None,
        None,
        None,
        (!by_resource.is_empty()).then(|| {
            let what = listed(by_resource, " has ");
            (
                "SomeResourcesRemain",
                format!("Some resources are remaining: {what}"),
            )
        }),
        (!by_finalizer.is_empty()).then(|| {
            let what = listed(by_finalizer, " in ");
            (
                "SomeFinalizersRemain",
                format!("Some content in the namespace has finalizers remaining: {what}"),
            )
        }),
    ];
    // Conditions of other types keep their places, as the controller's
    // `updateConditions` keeps them.
    let old = namespace
        .pointer("/status/conditions")
        .cloned()
        .unwrap_or(Value::Null);
    DELETION_CONDITIONS.iter().zip(remaining).fold(
        old,
        |conditions, ((kind, ok_reason, ok_message), remains)| {
            let (status, reason, message) = match remains {
                Some((reason, message)) => ("True", reason, message),
                None => ("False", *ok_reason, (*ok_message).to_owned()),
            };
            let next = serde_json::json!({"type": kind, "status": status, "lastTransitionTime": null,
                                          "reason": reason, "message": message});
            crate::objects::set_status_condition(&conditions, next)
        },
    )
}

/// Removes a terminating namespace once nothing is left in it, after
/// writing its deletion conditions (when they changed).
fn finish_namespace(store: &Store, namespace: &str) {
    let key = ObjectKey::cluster(namespace);
    let Some(current) = store.get(&namespaces(), &key).filter(|ns| deleting(ns)) else {
        return;
    };
    let conditions = deletion_conditions(store, &current);
    if current.pointer("/status/conditions") != Some(&conditions) {
        let _ = store.update::<StoreError>(&namespaces(), &key, |current| {
            let mut next = current.clone();
            next["status"]["conditions"] = conditions;
            crate::mutation::apply::record_update(
                current,
                &mut next,
                "kube-controller-manager",
                "v1",
                false,
                crate::mutation::apply::Part::Status,
            );
            Ok(next)
        });
    }
    if store.in_namespace(namespace).is_empty() {
        let _ = store.delete::<StoreError>(&namespaces(), &key, |_| Ok(()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(store: &Store, plural: &str, ns: &str, name: &str, finalizers: &[&str]) {
        store
            .create(
                &ResourceKey::new("", plural),
                &ObjectKey::namespaced(ns, name),
                json!({"metadata": {"name": name, "namespace": ns, "finalizers": finalizers}}),
            )
            .expect("created");
    }

    fn condition(conditions: &Value, kind: &str) -> (String, String, String) {
        let c = conditions
            .as_array()
            .and_then(|all| all.iter().find(|c| c["type"] == kind))
            .cloned()
            .unwrap_or_default();
        let text = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
        (text("status"), text("reason"), text("message"))
    }

    #[test]
    fn deletion_conditions_should_say_what_remains_in_the_real_controller_s_words() {
        let store = Store::default();
        let ns = json!({"metadata": {"name": "team"}});
        put(&store, "pods", "team", "a", &["example.com/hold"]);
        put(
            &store,
            "pods",
            "team",
            "b",
            &["example.com/hold", "other/x"],
        );
        put(&store, "configmaps", "team", "c", &[]);
        let conditions = deletion_conditions(&store, &ns);
        assert_eq!(conditions.as_array().map(Vec::len), Some(5));
        assert_eq!(
            condition(&conditions, "NamespaceContentRemaining"),
            (
                "True".into(),
                "SomeResourcesRemain".into(),
                "Some resources are remaining: configmaps. has 1 resource instances, pods. has 2 resource instances".into()
            )
        );
        assert_eq!(
            condition(&conditions, "NamespaceFinalizersRemaining"),
            (
                "True".into(),
                "SomeFinalizersRemain".into(),
                "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances, other/x in 1 resource instances".into()
            )
        );
        assert_eq!(
            condition(&conditions, "NamespaceDeletionContentFailure").1,
            "ContentDeleted"
        );
        // Emptied: every condition its "ok" form, the transition time
        // changed only where the status did.
        let before = json!({"metadata": {"name": "team"}, "status": {"conditions": conditions}});
        for (plural, name) in [("pods", "a"), ("pods", "b"), ("configmaps", "c")] {
            store
                .delete::<StoreError>(
                    &ResourceKey::new("", plural),
                    &ObjectKey::namespaced("team", name),
                    |_| Ok(()),
                )
                .expect("deleted");
        }
        let emptied = deletion_conditions(&store, &before);
        assert_eq!(
            condition(&emptied, "NamespaceContentRemaining"),
            (
                "False".into(),
                "ContentRemoved".into(),
                "All content successfully removed".into()
            )
        );
        assert_eq!(
            emptied[0]["lastTransitionTime"],
            before["status"]["conditions"][0]["lastTransitionTime"]
        );
    }

    #[test]
    fn the_last_finalizer_of_a_deleting_object_should_delete_it_as_stored() {
        let store = Store::default();
        let pods = ResourceKey::new("", "pods");
        let key = ObjectKey::namespaced("team", "a");
        store
            .create(
                &pods,
                &key,
                json!({"metadata": {"name": "a", "namespace": "team", "finalizers": [ORPHAN],
                                    "deletionTimestamp": "2026-12-04T00:00:00Z"}}),
            )
            .expect("created");
        let mut watch = store.watch(None, store.current_rv()).expect("watch");
        let object = store.get(&pods, &key).expect("stored");
        remove_finalizer(&store, &pods, &object, ORPHAN);
        assert!(store.get(&pods, &key).is_none());
        let event = futures_util::FutureExt::now_or_never(watch.next())
            .expect("an event at once")
            .expect("the deletion");
        assert_eq!(event.kind, EventType::Deleted);
        assert_eq!(event.object["metadata"]["finalizers"], json!([ORPHAN]));
    }
}
