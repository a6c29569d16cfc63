//! What a fresh cluster holds: the system namespaces, the `kubernetes`
//! Service and its EndpointSlice, one simulated Ready Node, the
//! component statuses, the default ClusterRoles. (Each namespace's
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

/// The user-facing roles of a real cluster, aggregated as there: `view`
/// holds `system:aggregate-to-view` (reads, no Secrets); `edit` holds
/// `view` and `system:aggregate-to-edit` (writes, Secrets); `admin` holds
/// `edit` and `system:aggregate-to-admin` (Roles and RoleBindings).
/// Each entry: name, `aggregate-to-*` labels, the label it aggregates, rules.
fn default_roles() -> Vec<(&'static str, Vec<&'static str>, Option<&'static str>, Value)> {
    let workloads = json!([
        {"apiGroups": [""], "resources": ["configmaps", "endpoints", "persistentvolumeclaims", "pods", "pods/log",
            "pods/status", "replicationcontrollers", "replicationcontrollers/scale", "services", "serviceaccounts",
            "events", "limitranges", "resourcequotas", "namespaces", "namespaces/status"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets", "deployments", "deployments/scale", "deployments/status",
            "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale", "controllerrevisions"]},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"]},
        {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"]},
    ]);
    let with_verbs = |rules: &Value, verbs: &[&str]| -> Value {
        Value::Array(
            rules
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    let mut r = r.clone();
                    r["verbs"] = json!(verbs);
                    r
                })
                .collect(),
        )
    };
    let read = ["get", "list", "watch"];
    let write = ["create", "delete", "deletecollection", "patch", "update"];
    let mut edit = with_verbs(&workloads, &write);
    if let Some(rules) = edit.as_array_mut() {
        rules.push(json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "delete", "deletecollection", "patch", "update"]}));
        rules.push(
            json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}),
        );
        rules.push(json!({"apiGroups": [""], "resources": ["pods/exec", "pods/attach", "pods/portforward", "pods/eviction"], "verbs": ["create", "get"]}));
    }
    let admin = json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
         "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
    ]);
    vec![
        (
            "cluster-admin",
            vec![],
            None,
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        ("admin", vec![], Some("aggregate-to-admin"), json!([])),
        (
            "edit",
            vec!["aggregate-to-admin"],
            Some("aggregate-to-edit"),
            json!([]),
        ),
        (
            "view",
            vec!["aggregate-to-edit"],
            Some("aggregate-to-view"),
            json!([]),
        ),
        (
            "system:aggregate-to-admin",
            vec!["aggregate-to-admin"],
            None,
            admin,
        ),
        (
            "system:aggregate-to-edit",
            vec!["aggregate-to-edit"],
            None,
            edit,
        ),
        (
            "system:aggregate-to-view",
            vec!["aggregate-to-view"],
            None,
            with_verbs(&workloads, &read),
        ),
    ]
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
                      "nodeInfo": {"kubeletVersion": "v1.33.0", "kubeProxyVersion": "v1.33.0",
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
    for (name, labels, aggregation, rules) in default_roles() {
        let mut metadata = meta(name, None);
        let mut all_labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
        for label in labels {
            all_labels[format!("rbac.authorization.k8s.io/{label}")] = "true".into();
        }
        metadata["labels"] = all_labels;
        let mut role = json!({"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1",
                              "metadata": metadata, "rules": rules});
        if let Some(to) = aggregation {
            role["aggregationRule"] = json!({"clusterRoleSelectors": [
                {"matchLabels": {format!("rbac.authorization.k8s.io/{to}"): "true"}}]});
        }
        all.push((
            ResourceKey::new("rbac.authorization.k8s.io", "clusterroles"),
            ObjectKey::cluster(name),
            role,
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
