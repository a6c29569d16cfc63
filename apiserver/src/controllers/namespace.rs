//! What every namespace holds, as the real controller-manager provides it:
//! the `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap with
//! the cluster's CA (when the server has one: over plain HTTP it has none).
//!
//! Run as a controller: every namespace present at start, then every one
//! created, is given what it lacks; what exists is left alone (a user may
//! have changed it). A namespace being deleted is not refilled.

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::objects::{new_uid, now};
use crate::store::{EventType, ListAt, ResourceKey, Store, StoreError};

fn namespaces() -> ResourceKey {
    ResourceKey::new("", "namespaces")
}

/// Starts the controller; it runs until the task is aborted.
pub fn spawn(store: Store, root_ca: Option<String>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Ok(current) = store.list(&namespaces(), None, ListAt::Latest) else {
                return;
            };
            for namespace in current.items.iter() {
                fill(&store, namespace, root_ca.as_deref());
            }
            let Ok(mut watcher) = store.watch(Some(namespaces()), current.rv) else {
                continue;
            };
            // Until the history moves past the watcher; then list again.
            while let Ok(event) = watcher.next().await {
                if event.kind != EventType::Deleted {
                    fill(&store, &event.object, root_ca.as_deref());
                }
            }
        }
    })
}

/// Gives a live namespace what it lacks.
fn fill(store: &Store, namespace: &Value, root_ca: Option<&str>) {
    if namespace.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let Some(name) = namespace.pointer("/metadata/name").and_then(Value::as_str) else {
        return;
    };
    let metadata = |object: &str| json!({"name": object, "namespace": name, "uid": new_uid(), "creationTimestamp": now()});
    let mut wanted = vec![(
        ResourceKey::new("", "serviceaccounts"),
        "default",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata("default")}),
    )];
    if let Some(ca) = root_ca {
        let mut cm_meta = metadata("kube-root-ca.crt");
        cm_meta["annotations"] = json!({"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."});
        wanted.push((
            ResourceKey::new("", "configmaps"),
            "kube-root-ca.crt",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm_meta, "data": {"ca.crt": ca}}),
        ));
    }
    for (resource, object, value) in wanted {
        let key = ObjectKey::namespaced(name, object);
        match store.create(&resource, &key, value) {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(error) => {
                tracing::warn!(%error, namespace = name, object, "could not fill namespace")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_namespace_should_get_its_service_account_and_root_ca() {
        let store = Store::default();
        crate::store::seed::seed(&store).expect("seeded");
        let controller = spawn(store.clone(), Some("PEM".into()));
        store
            .create(
                &namespaces(),
                &ObjectKey::cluster("team-a"),
                json!({"metadata": {"name": "team-a"}}),
            )
            .expect("created");
        let sa = ResourceKey::new("", "serviceaccounts");
        let cms = ResourceKey::new("", "configmaps");
        for ns in ["default", "kube-system", "team-a"] {
            let mut found = false;
            for _ in 0..100 {
                found = store
                    .get(&sa, &ObjectKey::namespaced(ns, "default"))
                    .is_some()
                    && store
                        .get(&cms, &ObjectKey::namespaced(ns, "kube-root-ca.crt"))
                        .is_some_and(|cm| cm["data"]["ca.crt"] == "PEM");
                if found {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(found, "{ns} was not filled");
        }
        controller.abort();
    }
}
