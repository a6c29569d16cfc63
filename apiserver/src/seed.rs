//! What a fresh cluster holds: the system namespaces, the `kubernetes`
//! Service and its EndpointSlice, one simulated Ready Node, the
//! component statuses, the default ClusterRoles. (Each namespace's
//! ServiceAccount and root CA come from [`crate::namespace`].)

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

/// The simulated node's name.
pub const NODE: &str = "kubewasm-node";

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
    let mut slice_meta = meta("kubernetes", Some("default"));
    slice_meta["labels"] = json!({"kubernetes.io/service-name": "kubernetes",
                                  "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"});
    all.push((
        ResourceKey::new("discovery.k8s.io", "endpointslices"),
        ObjectKey::namespaced("default", "kubernetes"),
        json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1", "metadata": slice_meta,
               "addressType": "IPv4",
               "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true, "serving": true, "terminating": false}}],
               "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}),
    ));
    let mut node_meta = meta(NODE, None);
    node_meta["labels"] = json!({"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux",
                                 "kubernetes.io/arch": "amd64", "node-role.kubernetes.io/control-plane": ""});
    let ready = json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "kubelet is posting ready status (simulated)",
                       "lastHeartbeatTime": now(), "lastTransitionTime": now()});
    let capacity = json!({"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "50Gi"});
    all.push((
        ResourceKey::new("", "nodes"),
        ObjectKey::cluster(NODE),
        json!({"kind": "Node", "apiVersion": "v1", "metadata": node_meta,
               "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
               "status": {"conditions": [ready], "capacity": capacity.clone(), "allocatable": capacity,
                          "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": NODE}],
                          "nodeInfo": {"kubeletVersion": "v1.33.0", "kubeProxyVersion": "v1.33.0",
                                       "containerRuntimeVersion": "kubewasm://simulated", "operatingSystem": "linux",
                                       "architecture": "amd64", "osImage": "kubewasm", "kernelVersion": "",
                                       "machineID": "", "systemUUID": "", "bootID": ""}}}),
    ));
    for component in ["controller-manager", "scheduler", "etcd-0"] {
        all.push((
            ResourceKey::new("", "componentstatuses"),
            ObjectKey::cluster(component),
            json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": meta(component, None),
                   "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}),
        ));
    }
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
