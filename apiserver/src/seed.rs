//! What a fresh cluster holds: the system namespaces, the `kubernetes`
//! Service, the default ClusterRoles.

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use crate::objects::{new_uid, now};
use crate::store::{ResourceKey, Store, StoreError};

fn meta(name: &str, namespace: Option<&str>) -> Value {
    let mut m =
        json!({"name": name, "uid": new_uid(), "creationTimestamp": now(), "generation": 1});
    if let Some(ns) = namespace {
        m["namespace"] = ns.into();
    }
    m
}

/// The objects of a fresh cluster, as (storage key, key, object).
fn objects() -> Vec<(ResourceKey, ObjectKey, Value)> {
    let mut all = Vec::new();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        all.push((
            ResourceKey::new("", "namespaces"),
            ObjectKey::cluster(ns),
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": meta(ns, None),
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        ));
    }
    all.push((
        ResourceKey::new("", "services"),
        ObjectKey::namespaced("default", "kubernetes"),
        json!({"kind": "Service", "apiVersion": "v1",
               "metadata": {"labels": {"component": "apiserver", "provider": "kubernetes"}, "name": "kubernetes",
                            "namespace": "default", "uid": new_uid(), "creationTimestamp": now()},
               "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                        "sessionAffinity": "None"},
               "status": {"loadBalancer": {}}}),
    ));
    let all_rules = json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]);
    let rw = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    let ro = json!(["get", "list", "watch"]);
    for (name, rules) in [
        ("cluster-admin", all_rules),
        (
            "admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": rw}]),
        ),
        (
            "edit",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": rw}]),
        ),
        (
            "view",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ro}]),
        ),
    ] {
        let mut metadata = meta(name, None);
        metadata["labels"] = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
        all.push((
            ResourceKey::new("rbac.authorization.k8s.io", "clusterroles"),
            ObjectKey::cluster(name),
            json!({"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": metadata, "rules": rules}),
        ));
    }
    all
}

/// Creates what a fresh cluster holds; what exists already is kept.
///
/// # Errors
/// None in practice: an existing object is not an error.
pub fn seed(store: &Store) -> Result<(), StoreError> {
    for (resource, key, object) in objects() {
        match store.create(&resource, &key, object) {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(())
}
