//! The watches of `Plugin` and `ClusterPlugin` objects, feeding the work
//! queue of plugin resources.
//!
//! One reflector per kind keeps a store of its objects. An object's key is
//! queued when what the host acts on changes: it appears, its `uid` or
//! `metadata.generation` changes (its spec), or it goes. A status write
//! (the host's own, every few seconds) changes neither, so it queues
//! nothing, as controller-runtime's `GenerationChangedPredicate` has it:
//! a refusal's retry then waits its backoff. After a relist, the keys that
//! vanished while the watch was down are queued too. A key queued so also
//! interrupts its plugin's load in flight (a pull stalled on a registry
//! included): that load is for what the object no longer asks, and its key
//! is looked at again once it ends.
//!
//! A replica that starts leading queues every key, so that the statuses
//! another replica left are brought up to date.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use kubewasm_runtime::resource::ObjectKey;
use tokio::task::JoinSet;

use super::spec::ResourceId;
use crate::loader::Interrupter;
use crate::queue::{Priority, WorkQueue};

/// What of an object the host acts on: its identity and its generation.
type Fingerprint = (Option<String>, Option<i64>);

fn key_of<K: Resource>(object: &K) -> ObjectKey {
    ObjectKey {
        namespace: object.namespace(),
        name: object.name_any(),
    }
}

fn fingerprint<K: Resource>(object: &K) -> Fingerprint {
    (object.uid(), object.meta().generation)
}

/// A reflector of `api` whose changes queue their keys on `queue`, each
/// interrupting its plugin's load in flight; sets `listed` once it listed.
pub(super) fn reflect<K>(
    api: Api<K>,
    (queue, loads): (&Arc<WorkQueue>, &Interrupter),
    listed: &Arc<AtomicBool>,
    tasks: &mut JoinSet<()>,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let (queue, listed, loads) = (Arc::clone(queue), Arc::clone(listed), loads.clone());
    let changes = move |key: ObjectKey| {
        loads.interrupt(&ResourceId::from(&key).plugin_name());
        queue.add(key, Priority::Event);
    };
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        // What was last seen of each object, and of those a relist shows.
        let mut seen: HashMap<ObjectKey, Fingerprint> = HashMap::new();
        let mut relisted: HashMap<ObjectKey, Fingerprint> = HashMap::new();
        let changed = |seen: &HashMap<ObjectKey, Fingerprint>,
                       key: &ObjectKey,
                       now: &Fingerprint| { seen.get(key) != Some(now) };
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => relisted.clear(),
                Ok(watcher::Event::InitApply(object)) => {
                    relisted.insert(key_of(&object), fingerprint(&object));
                }
                Ok(watcher::Event::InitDone) => {
                    // Queued only now: the store shows a relist's objects
                    // from its end on, and a key handed out before would
                    // find its object missing.
                    for (key, now) in &relisted {
                        if changed(&seen, key, now) {
                            changes(key.clone());
                        }
                    }
                    for gone in seen.keys().filter(|k| !relisted.contains_key(*k)) {
                        changes(gone.clone());
                    }
                    seen = std::mem::take(&mut relisted);
                    listed.store(true, Ordering::Relaxed);
                }
                Ok(watcher::Event::Apply(object)) => {
                    let (key, now) = (key_of(&object), fingerprint(&object));
                    if changed(&seen, &key, &now) {
                        changes(key.clone());
                        seen.insert(key, now);
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    let key = key_of(&object);
                    seen.remove(&key);
                    changes(key);
                }
                Err(error) => tracing::warn!(%error, "plugin resource watch failed; retrying"),
            }
        }
    });
    store
}

/// How far RBAC has changed: counters that only grow, one for
/// cluster-wide objects (ClusterRoles, ClusterRoleBindings, and a relist,
/// when a change may have been missed) and one per namespace (its Roles and
/// RoleBindings).
#[derive(Clone, Debug, Default)]
pub(super) struct RbacEpochs {
    cluster: u64,
    namespaces: HashMap<String, u64>,
}

impl RbacEpochs {
    /// The epoch of the rights of an account of `namespace`: it moves
    /// exactly when RBAC that may concern them changes.
    pub(super) fn of(&self, namespace: Option<&str>) -> u64 {
        let own = namespace.and_then(|ns| self.namespaces.get(ns)).copied();
        self.cluster.wrapping_add(own.unwrap_or(0))
    }

    fn changed(&mut self, namespace: Option<String>) {
        match namespace {
            Some(ns) => *self.namespaces.entry(ns).or_default() += 1,
            None => self.cluster += 1,
        }
    }
}

/// The RBAC epochs, moved whenever a Role, RoleBinding, ClusterRole or
/// ClusterRoleBinding changes or goes. Each change also queues the Plugins
/// it may concern (those of a Role's namespace; every Plugin for a
/// cluster-wide change), so that their tenants' rights are reviewed again
/// at once.
pub(super) fn rbac(
    client: kube::Client,
    plugins: Store<super::types::PluginResource>,
    queue: &Arc<WorkQueue>,
    tasks: &mut JoinSet<()>,
) -> tokio::sync::watch::Receiver<RbacEpochs> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use kube::core::PartialObjectMeta;

    /// A change's namespace: `Some(None)` for cluster-wide, `None` for no
    /// change (an object of a relist).
    fn changed<K: Resource>(event: &watcher::Event<K>) -> Option<Option<String>> {
        match event {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => Some(o.namespace()),
            watcher::Event::InitDone => Some(None),
            watcher::Event::Init | watcher::Event::InitApply(_) => None,
        }
    }
    fn changes<K>(
        client: &kube::Client,
    ) -> futures_util::stream::BoxStream<'static, Option<Option<String>>>
    where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    {
        let api = Api::<PartialObjectMeta<K>>::all(client.clone());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .filter_map(|event| async move {
                match event {
                    Ok(event) => Some(changed(&event)),
                    Err(error) => {
                        tracing::warn!(%error, "RBAC watch failed; retrying");
                        None
                    }
                }
            })
            .boxed()
    }

    let (epochs, receiver) = tokio::sync::watch::channel(RbacEpochs::default());
    let queue = Arc::clone(queue);
    let streams = futures_util::stream::select_all([
        changes::<Role>(&client),
        changes::<RoleBinding>(&client),
        changes::<ClusterRole>(&client),
        changes::<ClusterRoleBinding>(&client),
    ]);
    tasks.spawn(async move {
        let mut streams = std::pin::pin!(streams);
        while let Some(change) = streams.next().await {
            let Some(namespace) = change else { continue };
            epochs.send_modify(|e| e.changed(namespace.clone()));
            for plugin in plugins.state() {
                let key = key_of(plugin.as_ref());
                if namespace.is_none() || key.namespace == namespace {
                    queue.add(key, Priority::Event);
                }
            }
        }
    });
    receiver
}

/// Queues every key of `stores` whenever `leading` turns true.
pub(super) fn resync_when_leading<A, B>(
    mut leading: tokio::sync::watch::Receiver<bool>,
    stores: (Store<A>, Store<B>),
    queue: &Arc<WorkQueue>,
    tasks: &mut JoinSet<()>,
) where
    A: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    B: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let queue = Arc::clone(queue);
    tasks.spawn(async move {
        while leading.changed().await.is_ok() {
            if !*leading.borrow_and_update() {
                continue;
            }
            let (plugins, cluster) = (stores.0.state(), stores.1.state());
            let keys = plugins
                .iter()
                .map(|o| key_of(o.as_ref()))
                .chain(cluster.iter().map(|o| key_of(o.as_ref())));
            for key in keys {
                queue.add(key, Priority::Resync);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;

    use super::*;
    use crate::loader::{Loaded, Prepared, Refused};
    use crate::plugin_resource::types::{CommonSpec, PluginResource, PluginSpec};
    use crate::queue::{Backoff, Done};

    /// The next key the queue hands out, within a few seconds.
    async fn next_key(queue: &WorkQueue) -> ObjectKey {
        let (key, _) = tokio::time::timeout(Duration::from_secs(5), queue.next())
            .await
            .expect("a key within 5 s")
            .expect("the queue runs");
        queue.done(&key, Done::Forget);
        (*key).clone()
    }

    #[test]
    fn a_role_should_move_the_epoch_of_its_namespace_and_a_cluster_role_of_all() {
        let mut epochs = RbacEpochs::default();
        let before = (epochs.of(Some("a")), epochs.of(Some("b")), epochs.of(None));
        epochs.changed(Some("a".into()));
        assert_ne!(epochs.of(Some("a")), before.0);
        assert_eq!(
            (epochs.of(Some("b")), epochs.of(None)),
            (before.1, before.2)
        );
        let after_role = (epochs.of(Some("a")), epochs.of(Some("b")));
        epochs.changed(None);
        assert_ne!(epochs.of(Some("a")), after_role.0);
        assert_ne!(epochs.of(Some("b")), after_role.1);
    }

    #[tokio::test]
    async fn a_resource_should_be_queued_for_its_spec_and_identity_never_for_its_status() {
        let (_server, client) = crate::testing::cluster().await;
        let crds = Api::<CustomResourceDefinition>::all(client.clone());
        for crd in crate::plugin_resource::crds() {
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("CRD created");
        }
        let queue = Arc::new(WorkQueue::new(Backoff::default()));
        let listed = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let mut loads = crate::loader::Loads::<()>::default();
        let _store = reflect(
            Api::<PluginResource>::all(client.clone()),
            (&queue, &loads.interrupter()),
            &listed,
            &mut tasks,
        );
        let api = Api::<PluginResource>::namespaced(client, "default");
        let spec = PluginSpec {
            common: CommonSpec {
                source: "oci://127.0.0.1:5000/p:1".into(),
                ..CommonSpec::default()
            },
            ..PluginSpec::default()
        };
        api.create(&PostParams::default(), &PluginResource::new("p", spec))
            .await
            .expect("created");
        let key = ObjectKey::namespaced("default", "p");
        assert_eq!(next_key(&queue).await, key, "a new resource is queued");
        assert!(listed.load(Ordering::Relaxed));

        // The host's own status writes queue nothing (no reload, no retry
        // before its backoff).
        for phase in ["Pending", "Running", "Failed"] {
            api.patch_status(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": phase}})),
            )
            .await
            .expect("status written");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(queue.depth(), 0, "status writes queued a key");

        // A spec change is a new generation: queued, and the load of the
        // last one, stalled on its registry, stopped.
        loads.spawn("default.p", (), |slot| {
            slot.wait(std::future::pending::<Result<Prepared, Refused>>())?
        });
        api.patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("spec changed");
        assert_eq!(next_key(&queue).await, key, "a new generation is queued");
        let stopped = tokio::time::timeout(Duration::from_secs(10), loads.next()).await;
        assert!(
            matches!(
                stopped,
                Ok(Some((
                    _,
                    Loaded::Refused {
                        error: Refused::Cancelled,
                        ..
                    }
                )))
            ),
            "{stopped:?}"
        );

        // Gone: queued, so its plugin stops.
        api.delete("p", &Default::default()).await.expect("deleted");
        assert_eq!(next_key(&queue).await, key, "a deletion is queued");
    }
}
