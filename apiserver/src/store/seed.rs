//! What a fresh cluster holds: the system namespaces, the `kubernetes`
//! Service and its EndpointSlice, one simulated Ready Node, the
//! component statuses, the real server's bootstrap ClusterRoles and
//! ClusterRoleBindings. (Each namespace's
//! ServiceAccount and root CA come from [`crate::controllers::namespace`].)

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use crate::objects::{new_uid, now};
use crate::store::{ResourceKey, Store, StoreError};

fn meta(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({"name": name, "uid": new_uid(), "creationTimestamp": now()});
    if let Some(ns) = namespace {
        m["namespace"] = ns.into();
    }
    m
}

/// The real server's bootstrap RBAC policy, recorded from the Kubernetes
/// release kubewasm speaks by `tests/real-cluster/bootstrap-rbac`: every
/// ClusterRole and ClusterRoleBinding a fresh cluster holds (`admin`,
/// `edit` and `view` aggregated from the `system:aggregate-to-*` roles, the
/// controllers' and components' roles, the discovery and self-review
/// grants of every user), their aggregated rules filled.
const BOOTSTRAP_RBAC: &str = include_str!("bootstrap-rbac.json");

/// The recorded ClusterRoles and ClusterRoleBindings, as objects to store.
/// (Recorded from a real server; a test beside checks that it reads whole.)
fn bootstrap_rbac() -> Vec<(ResourceKey, ObjectKey, Value)> {
    let recorded: Value = serde_json::from_str(BOOTSTRAP_RBAC).unwrap_or_default();
    recorded["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let plural = match item["kind"].as_str()? {
                "ClusterRole" => "clusterroles",
                "ClusterRoleBinding" => "clusterrolebindings",
                _ => return None,
            };
            let name = item.pointer("/metadata/name")?.as_str()?;
            let mut object = item.clone();
            object["apiVersion"] = "rbac.authorization.k8s.io/v1".into();
            let mut metadata = meta(name, None);
            for field in ["labels", "annotations"] {
                if item["metadata"][field].is_object() {
                    metadata[field] = item["metadata"][field].clone();
                }
            }
            // Who wrote what at start (the API server, the aggregation
            // controller), stamped now, as a real server's entries are.
            let entries: Vec<Value> = item["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    json!({"manager": e["manager"], "operation": e["operation"],
                        "apiVersion": e["apiVersion"], "time": now(),
                        "fieldsType": e["fieldsType"], "fieldsV1": e["fieldsV1"]})
                })
                .collect();
            if !entries.is_empty() {
                metadata["managedFields"] = entries.into();
            }
            object["metadata"] = metadata;
            Some((
                ResourceKey::new("rbac.authorization.k8s.io", plural),
                ObjectKey::cluster(name),
                object,
            ))
        })
        .collect()
}

/// The simulated node's name.
pub const NODE: &str = "kubewasm-node";

/// A simulated Node, Ready, named `name` at `address`, its Pods'
/// addresses in `pod_cidr` (a `/16`); `control_plane` marks the first.
pub fn node(name: &str, address: &str, pod_cidr: &str, control_plane: bool) -> Value {
    let mut node_meta = meta(name, None);
    node_meta["labels"] = json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                 "kubernetes.io/arch": "amd64"});
    if control_plane {
        node_meta["labels"]["node-role.kubernetes.io/control-plane"] = "".into();
    }
    let ready = json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "kubelet is posting ready status (simulated)",
                       "lastHeartbeatTime": now(), "lastTransitionTime": now()});
    let capacity = json!({"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "50Gi"});
    let cidr = pod_cidr;
    json!({"kind": "Node", "apiVersion": "v1", "metadata": node_meta,
           "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
           "status": {"conditions": [ready], "capacity": capacity.clone(), "allocatable": capacity,
                      "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
                      "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                      "nodeInfo": {"kubeletVersion": kubewasm_types::KUBERNETES_RELEASE, "kubeProxyVersion": kubewasm_types::KUBERNETES_RELEASE,
                                   "containerRuntimeVersion": "kubewasm://simulated", "operatingSystem": "linux",
                                   "architecture": "amd64", "osImage": "kubewasm", "kernelVersion": "",
                                   "machineID": "", "systemUUID": "", "bootID": ""}}})
}

/// The objects of a fresh cluster, as (storage key, key, object).
fn objects() -> Vec<(ResourceKey, ObjectKey, Value)> {
    let mut all = Vec::new();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let mut metadata = meta(ns, None);
        metadata["labels"] = json!({"kubernetes.io/metadata.name": ns});
        all.push((
            ResourceKey::new("", "namespaces"),
            ObjectKey::cluster(ns),
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": metadata,
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
    slice_meta["generation"] = 1.into();
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
    all.push((
        ResourceKey::new("", "nodes"),
        ObjectKey::cluster(NODE),
        node(NODE, "127.0.0.1", "10.244.0.0/16", true),
    ));
    for component in ["controller-manager", "scheduler", "etcd-0"] {
        all.push((
            ResourceKey::new("", "componentstatuses"),
            ObjectKey::cluster(component),
            json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": meta(component, None),
                   "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}),
        ));
    }
    all.extend(bootstrap_rbac());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The recording reads whole: every item a ClusterRole or a
    /// ClusterRoleBinding with a name, the user-facing roles among them.
    #[test]
    fn the_recorded_bootstrap_policy_should_read_whole() {
        let recorded: Value = serde_json::from_str(BOOTSTRAP_RBAC).expect("JSON");
        let items = recorded["items"].as_array().expect("items");
        let objects = bootstrap_rbac();
        assert_eq!(objects.len(), items.len(), "every item an object");
        for name in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:basic-user",
        ] {
            assert!(
                objects.iter().any(|(_, key, _)| key.name == name),
                "{name} recorded"
            );
        }
    }
}
