//! Mapping a secondary's changes to its primaries' keys, as its declared
//! mapping says: owner references, a label, or the plugin's own `map-keys`
//! (run on a blocking thread, on the version current when the change came).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::departed::Departed;
use super::triggers::Triggers;
use super::version::Current;
use crate::informer::{Change, Handler};
use crate::listing::Key;
use crate::queue::{Priority, WorkQueue};
use kubewasm_runtime::MapChange;
use kubewasm_runtime::cache::{Cache, CachedObject};
use kubewasm_runtime::declaration::Mapping;
use kubewasm_runtime::resource::{ObjectKey, ResourceType};

/// Where a controller's mapped changes go, whatever its version: its
/// queue, its `map-keys` work, its index of reads.
#[derive(Clone)]
pub(super) struct Targets {
    pub(super) queue: Arc<WorkQueue>,
    /// Where `map-keys` work is sent ([`map_custom`] runs it).
    pub(super) custom: mpsc::UnboundedSender<Mapped>,
    pub(super) triggers: Arc<Triggers>,
    /// The primaries that left the selector holding the finalizer.
    pub(super) departed: Arc<Departed>,
}

/// Maps a secondary's changes to primary keys, by its declared mapping.
pub(super) fn mapping_handler(
    mapping: &Mapping,
    resource: &ResourceType,
    primary: &ResourceType,
    targets: &Targets,
) -> Handler {
    let queue = Arc::clone(&targets.queue);
    let primary = primary.clone();
    match mapping {
        Mapping::None => Arc::new(|_| {}),
        Mapping::OwnerReferences => Arc::new(move |change: Change<'_>| {
            for key in both_states(&change, |object| owners(object, &primary)) {
                enqueue(&queue, &change, key);
            }
        }),
        Mapping::Label(label) => {
            let label = label.clone();
            Arc::new(move |change: Change<'_>| {
                for key in both_states(&change, |object| labelled(object, &label, &primary)) {
                    enqueue(&queue, &change, key);
                }
            })
        }
        Mapping::Reads => {
            let (triggers, resource) = (Arc::clone(&targets.triggers), resource.clone());
            Arc::new(move |change: Change<'_>| {
                let states = std::iter::once(change.object())
                    .chain(change.previous())
                    .map(|o| &**o);
                for key in triggers.readers(&resource, states) {
                    enqueue(&queue, &change, key);
                }
            })
        }
        Mapping::Custom => {
            let custom = targets.custom.clone();
            let resource = resource.clone();
            Arc::new(move |change: Change<'_>| {
                let listed = matches!(change, Change::Listed(..));
                // The receiver lives as long as the controller.
                let _ = custom.send(Mapped {
                    resource: resource.clone(),
                    object: Arc::clone(change.object()),
                    previous: change.previous().map(Arc::clone),
                    deleted: matches!(change, Change::Deleted(..)),
                    listed,
                });
            })
        }
    }
}

/// Queues the primary `key` a change maps to: listed in bulk when the
/// change is a listing, as a fresh event otherwise.
pub(super) fn enqueue(queue: &WorkQueue, change: &Change<'_>, key: impl Into<Key>) {
    match change {
        Change::Listed(..) => queue.add_listed(key),
        Change::Applied(..) | Change::Deleted(..) => queue.add(key, Priority::Event),
    }
}

/// The keys an object maps to in its state after a change and in its
/// state before (a modified one's), once each: an object whose owner or
/// label moved from one primary to another maps to both, the one it left
/// included.
fn both_states<I: IntoIterator<Item = ObjectKey>>(
    change: &Change<'_>,
    keys: impl Fn(&CachedObject) -> I,
) -> BTreeSet<ObjectKey> {
    std::iter::once(change.object())
        .chain(change.previous())
        .flat_map(|object| keys(object))
        .collect()
}

/// A secondary's change, on its way to the plugin's `map-keys`.
pub(super) struct Mapped {
    resource: ResourceType,
    /// The object as it is now, or as it was last when deleted.
    object: Arc<CachedObject>,
    /// A modified object's state before the change.
    previous: Option<Arc<CachedObject>>,
    /// Whether the change was a deletion.
    deleted: bool,
    /// Whether the change was a listing.
    listed: bool,
}

/// Primary keys among an object's owner references.
fn owners(object: &CachedObject, primary: &ResourceType) -> Vec<ObjectKey> {
    object
        .owners()
        .iter()
        .filter(|owner| {
            *owner.kind == primary.kind
                && kubewasm_runtime::resource::split_api_version(&owner.api_version).0
                    == primary.group
        })
        .map(|owner| key_in(primary, object.namespace(), &owner.name))
        .collect()
}

/// The primary key a label names, as the contract says: label values
/// cannot hold `/`, so a namespaced primary is `name` (in the object's
/// namespace) or `namespace.name` (split at the first `.`: namespaces are
/// DNS labels, without dots); a cluster-scoped one is its whole name.
fn labelled(object: &CachedObject, label: &str, primary: &ResourceType) -> Option<ObjectKey> {
    let value = object.label(label)?;
    let namespace = object.namespace();
    Some(match value.split_once('.').filter(|_| primary.namespaced) {
        Some((ns, name)) => key_in(primary, Some(ns), name),
        None => key_in(primary, namespace, value),
    })
}

fn key_in(primary: &ResourceType, namespace: Option<&str>, name: &str) -> ObjectKey {
    match namespace.filter(|_| primary.namespaced) {
        Some(ns) => ObjectKey::namespaced(ns, name),
        None => ObjectKey::cluster(name),
    }
}

/// Runs `map-keys` for the secondaries mapped by the plugin.
pub(super) async fn map_custom(
    current: Current,
    queue: Arc<WorkQueue>,
    mut changes: mpsc::UnboundedReceiver<Mapped>,
) {
    while let Some(change) = changes.recv().await {
        let version = current.get();
        let (plugin, cache) = (Arc::clone(&version.plugin), Arc::clone(&version.cache));
        let config = version.config.clone();
        let Mapped {
            resource,
            object,
            previous,
            deleted,
            listed,
        } = change;
        let mapped = tokio::task::spawn_blocking(move || {
            let change = MapChange {
                object: object.json(),
                previous: previous.as_deref().map(CachedObject::json),
                deleted,
            };
            plugin.map(cache as Arc<dyn Cache>, &resource, change, &config)
        })
        .await;
        match mapped {
            Ok(Ok(keys)) if listed => keys.into_iter().for_each(|k| queue.add_listed(k)),
            Ok(Ok(keys)) => keys.into_iter().for_each(|k| queue.add(k, Priority::Event)),
            Ok(Err(error)) => tracing::warn!(%error, "map-keys failed"),
            Err(error) => tracing::error!(%error, "map-keys task failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn myapp() -> ResourceType {
        ResourceType {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "MyApp".into(),
            plural: "myapps".into(),
            namespaced: true,
        }
    }

    #[test]
    fn owners_should_map_owners_of_the_primary_kind_and_group_only() {
        let child = CachedObject::new(
            json!({"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [
            {"apiVersion": "example.com/v1", "kind": "MyApp", "name": "a", "uid": "1"},
            {"apiVersion": "other.com/v1", "kind": "MyApp", "name": "b", "uid": "2"},
            {"apiVersion": "example.com/v2", "kind": "MyApp", "name": "c", "uid": "3"},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "d", "uid": "4"}]}}),
        );
        assert_eq!(
            owners(&child, &myapp()),
            [
                ObjectKey::namespaced("ns", "a"),
                ObjectKey::namespaced("ns", "c")
            ]
        );
    }

    #[test]
    fn labelled_should_take_a_name_or_a_namespaced_name() {
        let object = |value: &str| {
            CachedObject::new(
                json!({"metadata": {"name": "x", "namespace": "ns", "labels": {"app": value}}}),
            )
        };
        assert_eq!(
            labelled(&object("demo"), "app", &myapp()),
            Some(ObjectKey::namespaced("ns", "demo"))
        );
        assert_eq!(
            labelled(&object("other.demo"), "app", &myapp()),
            Some(ObjectKey::namespaced("other", "demo"))
        );
        assert_eq!(
            labelled(&object("other.demo.v2"), "app", &myapp()),
            Some(ObjectKey::namespaced("other", "demo.v2"))
        );
        assert_eq!(labelled(&object("demo"), "missing", &myapp()), None);
        // A cluster-scoped primary's name is the whole value, dots and all.
        let cluster = ResourceType {
            namespaced: false,
            ..myapp()
        };
        assert_eq!(
            labelled(&object("other.demo"), "app", &cluster),
            Some(ObjectKey::cluster("other.demo"))
        );
    }
}
