//! What a real kube-apiserver's default mutating admission plugins do to a
//! Pod it creates, after the creator's fields are recorded (so that none of
//! this is in `managedFields`, as on the real server):
//!
//! - `ServiceAccount`: the `default` account when none is named, and, unless
//!   the Pod or its account turns automounting off, a projected
//!   `kube-api-access-XXXXX` volume (the token, the cluster's CA, the
//!   namespace) mounted read-only at [`TOKEN_PATH`] in every container and
//!   init container that mounts nothing there yet;
//! - `Priority`: `priority` and `preemptionPolicy` from the Pod's
//!   PriorityClass (0 and `PreemptLowerPriority` without one), a class
//!   that does not exist refused;
//! - `DefaultTolerationSeconds`: 300 s of tolerating a not-ready and an
//!   unreachable Node, unless the Pod says otherwise.
//!
//! And, where the simulated controllers run to take them off again,
//! `StorageObjectInUseProtection`: a PersistentVolumeClaim or a
//! PersistentVolume is created with its protection finalizer
//! ([`protect_storage`]).
//!
//! The embedded server's ServiceAccount step does not refuse a Pod whose
//! account does not exist yet (a real one does): its own controllers and
//! tests create Pods in a namespace the moment it exists.

use kubewasm_core::ObjectKey;
use kubewasm_types::info::ResourceInfo;
use serde_json::{Value, json};

use crate::http::error::ApiError;
use crate::store::{ResourceKey, Store};

/// Where the service account's token is mounted.
pub(super) const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The token's lifetime in the projected volume (an hour and 7 s, as the
/// real plugin asks for).
const TOKEN_SECONDS: u64 = 3607;

/// The two PriorityClasses every cluster has.
const SYSTEM_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// Admits a Pod being created in `namespace`: the three plugins' changes.
///
/// # Errors
/// 403, as the real `Priority` plugin words it, when the Pod names a
/// PriorityClass that does not exist.
pub(super) fn admit_pod(
    store: &Store,
    info: &ResourceInfo,
    namespace: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let name = crate::objects::text_at(pod, "/metadata/name").to_owned();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    service_account(store, namespace, spec);
    priority(store, info, &name, spec)?;
    tolerations(spec);
    Ok(())
}

/// `StorageObjectInUseProtection`: the protection finalizer of a claim or
/// a volume being created, which its controller removes once it is not in
/// use (the simulated protection controllers).
pub(super) fn protect_storage(info: &ResourceInfo, object: &mut Value) {
    let finalizer = match (info.group.as_str(), info.plural.as_str()) {
        ("", "persistentvolumeclaims") => crate::objects::CLAIM_PROTECTION,
        ("", "persistentvolumes") => crate::objects::VOLUME_PROTECTION,
        _ => return,
    };
    let Some(metadata) = crate::objects::metadata_mut(object) else {
        return;
    };
    let list = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(finalizer.into());
    }
}

fn service_account(store: &Store, namespace: &str, spec: &mut serde_json::Map<String, Value>) {
    let account = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(account) if !account.is_empty() => account.to_owned(),
        _ => "default".to_owned(),
    };
    spec.insert("serviceAccountName".into(), account.clone().into());
    spec.insert("serviceAccount".into(), account.clone().into());
    let stored = store.get(
        &ResourceKey::new("", "serviceaccounts"),
        &ObjectKey {
            namespace: Some(namespace.to_owned()),
            name: account,
        },
    );
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            stored
                .as_deref()
                .and_then(|a| a.get("automountServiceAccountToken"))
                .and_then(Value::as_bool)
        })
        .unwrap_or(true);
    if !automount {
        return;
    }
    let volume = crate::objects::generate_name("kube-api-access-");
    let mut mounted = false;
    for field in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(field).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            if mounts
                .iter()
                .any(|m| m.get("mountPath") == Some(&json!(TOKEN_PATH)))
            {
                continue;
            }
            mounts.push(json!({"name": volume, "readOnly": true, "mountPath": TOKEN_PATH}));
            mounted = true;
        }
    }
    if !mounted {
        return;
    }
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(volumes) = volumes.as_array_mut() {
        volumes.push(json!({"name": volume, "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ],
            "defaultMode": 420
        }}));
    }
}

fn priority(
    store: &Store,
    info: &ResourceInfo,
    name: &str,
    spec: &mut serde_json::Map<String, Value>,
) -> Result<(), ApiError> {
    let class = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    let (value, policy) = match class {
        None => (0, None),
        Some(class) => match SYSTEM_CLASSES.iter().find(|(c, _)| *c == class) {
            Some((_, value)) => (*value, None),
            None => {
                let stored = store
                    .get(
                        &ResourceKey::new("scheduling.k8s.io", "priorityclasses"),
                        &ObjectKey {
                            namespace: None,
                            name: class.clone(),
                        },
                    )
                    .ok_or_else(|| {
                        ApiError::forbidden(format!(
                            "{} \"{name}\" is forbidden: no PriorityClass with name {class} was found",
                            info.plural
                        ))
                    })?;
                (
                    stored.get("value").and_then(Value::as_i64).unwrap_or(0),
                    stored
                        .get("preemptionPolicy")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                )
            }
        },
    };
    spec.insert("priority".into(), value.into());
    spec.entry("preemptionPolicy").or_insert_with(|| {
        policy
            .unwrap_or_else(|| "PreemptLowerPriority".into())
            .into()
    });
    Ok(())
}

fn tolerations(spec: &mut serde_json::Map<String, Value>) {
    let list = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = list.as_array_mut() else {
        return;
    };
    for taint in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = list.iter().any(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if !tolerated {
            list.push(json!({"key": taint, "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> ResourceInfo {
        kubewasm_types::registry::Registry::builtin()
            .get("", "v1", "pods")
            .cloned()
            .expect("pods are built in")
    }

    #[test]
    fn a_pod_should_get_its_account_token_priority_and_tolerations() {
        let store = Store::new(10);
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"},
                           {"name": "b", "volumeMounts": [{"name": "own", "mountPath": TOKEN_PATH}]}],
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 5}]}});
        admit_pod(&store, &pods(), "ns", &mut pod).expect("admitted");
        let spec = &pod["spec"];
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        let volume = spec["volumes"][0]["name"].as_str().expect("a volume");
        assert!(
            volume.starts_with("kube-api-access-") && volume.len() == 21,
            "{volume}"
        );
        assert_eq!(spec["initContainers"][0]["volumeMounts"][0]["name"], volume);
        assert_eq!(
            spec["containers"][0]["volumeMounts"][0]["mountPath"],
            TOKEN_PATH
        );
        assert_eq!(
            spec["containers"][1]["volumeMounts"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        assert_eq!(
            (spec["priority"].clone(), spec["preemptionPolicy"].clone()),
            (json!(0), json!("PreemptLowerPriority"))
        );
        let tolerations = spec["tolerations"].as_array().expect("tolerations");
        assert_eq!(
            tolerations.len(),
            2,
            "the Pod's own unreachable one kept: {tolerations:?}"
        );
        assert_eq!(tolerations[1]["key"], "node.kubernetes.io/not-ready");
    }

    #[test]
    fn automounting_turned_off_or_a_missing_class_should_be_honoured() {
        let store = Store::new(10);
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "automountServiceAccountToken": false, "priorityClassName": "system-node-critical",
            "containers": [{"name": "a"}]}});
        admit_pod(&store, &pods(), "ns", &mut pod).expect("admitted");
        assert_eq!(pod["spec"].get("volumes"), None);
        assert_eq!(pod["spec"]["priority"], 2_000_001_000);
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "priorityClassName": "nowhere", "containers": [{"name": "a"}]}});
        let refused = admit_pod(&store, &pods(), "ns", &mut pod).expect_err("no such class");
        assert_eq!(refused.code, 403);
        assert_eq!(
            refused.message,
            "pods \"p\" is forbidden: no PriorityClass with name nowhere was found"
        );
    }
}
