//! A workload **simulation**, like kwok's stages: no pod runs anywhere.
//!
//! Shortly after a Deployment, ReplicaSet or StatefulSet is created or its
//! spec changes (its `generation` is ahead of `status.observedGeneration`),
//! the simulator writes the status a healthy controller-manager and kubelet
//! would produce: every desired replica ready, available and updated, the
//! generation observed, `Available` and `Progressing` conditions. A Pod
//! with no phase yet (or `Pending`) is bound to the simulated Node and
//! marked `Running`, every container ready and started, with the
//! `PodScheduled`, `Initialized`, `ContainersReady` and `Ready` conditions,
//! as a kubelet would report it (kwok's `pod-ready` stage), with an address
//! of its own from the Node's `10.244.0.0/16` (handed out in turn, unique
//! among the last 65,533 Pods); its containers never exit. It lets an operator's status have something real to read in
//! `kubewasm dev`. It is off unless asked for
//! ([`crate::http::api::ApiConfig::simulate_workloads`]).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::objects::now;
use crate::store::{EventType, ResourceKey, Store, StoreError};

const KINDS: [&str; 3] = ["deployments", "replicasets", "statefulsets"];

/// Whether the simulator handles objects of this type.
fn simulated(resource: &ResourceKey) -> bool {
    (resource.group == "apps" && KINDS.contains(&resource.plural.as_str()))
        || (resource.group.is_empty() && resource.plural == "pods")
}

/// Whether a Pod waits for its (simulated) kubelet.
fn pod_pending(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            None | Some("Pending")
        )
}

/// Pod addresses from the simulated Node's `10.244.0.0/16`, in turn.
#[derive(Debug, Default)]
pub struct PodIps {
    handed: AtomicU32,
}

impl PodIps {
    /// The next address: `10.244.0.2` first, never the network's `.0.0`,
    /// `.0.1` (the gateway) or `.255.255`.
    pub fn next(&self) -> Ipv4Addr {
        const USABLE: u32 = (1 << 16) - 3;
        let n = self.handed.fetch_add(1, Ordering::Relaxed) % USABLE;
        Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 244, 0, 2)) + n)
    }
}

/// A Pod as a kubelet reports it running at `ip`: bound, every container
/// started and ready.
pub fn running_pod(pod: &Value, ip: Ipv4Addr) -> Value {
    let time = now();
    let mut next = pod.clone();
    if next.pointer("/spec/nodeName").is_none_or(Value::is_null) {
        next["spec"]["nodeName"] = crate::store::seed::NODE.into();
    }
    let statuses = |field: &str| -> Vec<Value> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"name": c["name"], "image": c["image"], "imageID": "",
                "containerID": format!("kubewasm://{}", crate::objects::new_uid()),
                "ready": field == "containers", "started": field == "containers",
                "restartCount": 0,
                "state": if field == "containers" {
                    json!({"running": {"startedAt": time}})
                } else {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed",
                           "startedAt": time, "finishedAt": time}})
                }})
            })
            .collect()
    };
    let condition = |kind: &str| {
        json!({"type": kind, "status": "True", "lastProbeTime": null,
                                       "lastTransitionTime": time})
    };
    let conditions = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(condition);
    let mut status = json!({
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "hostIPs": [{"ip": "10.0.0.1"}],
        "podIP": ip.to_string(),
        "podIPs": [{"ip": ip.to_string()}],
        "startTime": time,
        "qosClass": "BestEffort",
        "conditions": conditions,
        "containerStatuses": statuses("containers"),
    });
    let init = statuses("initContainers");
    if !init.is_empty() {
        status["initContainerStatuses"] = init.into();
    }
    next["status"] = status;
    next
}

fn pending(object: &Value) -> bool {
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let observed = object
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    object.pointer("/metadata/deletionTimestamp").is_none() && observed != Some(generation)
}

/// The status a healthy rollout of `object` ends in.
pub fn simulated_status(plural: &str, object: &Value) -> Value {
    let replicas = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let mut status = json!({
        "observedGeneration": generation,
        "replicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
    });
    match plural {
        "deployments" => {
            let time = now();
            status["updatedReplicas"] = replicas.into();
            status["conditions"] = json!([
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability.", "lastUpdateTime": time, "lastTransitionTime": time},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": "ReplicaSet has successfully progressed (simulated).", "lastUpdateTime": time,
                 "lastTransitionTime": time},
            ]);
        }
        "statefulsets" => {
            status["currentReplicas"] = replicas.into();
            status["updatedReplicas"] = replicas.into();
        }
        _ => status["fullyLabeledReplicas"] = replicas.into(),
    }
    status
}

/// Starts the simulator: each pending workload gets its status `delay`
/// after the change.
pub fn spawn(store: Store, delay: Duration) -> JoinHandle<()> {
    let ips = Arc::new(PodIps::default());
    tokio::spawn(async move {
        let mut from = store.current_rv();
        loop {
            let Ok(mut watcher) = store.watch(None, from) else {
                from = store.current_rv();
                continue;
            };
            while let Ok(event) = watcher.next().await {
                from = event.rv;
                if !simulated(&event.resource) || event.kind == EventType::Deleted {
                    continue;
                }
                let waiting = if event.resource.plural == "pods" {
                    pod_pending(&event.object)
                } else {
                    pending(&event.object)
                };
                if !waiting {
                    continue;
                }
                let Some(key) = ObjectKey::of(&event.object) else {
                    continue;
                };
                let (store, ips) = (store.clone(), Arc::clone(&ips));
                let resource = event.resource.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    settle(&store, &resource, &key, &ips);
                });
            }
        }
    })
}

fn settle(store: &Store, resource: &ResourceKey, key: &ObjectKey, ips: &PodIps) {
    // Gone or already settled is fine.
    let _ = store.update::<StoreError>(resource, key, |current| {
        Ok(if resource.plural == "pods" {
            if pod_pending(current) {
                running_pod(current, ips.next())
            } else {
                current.clone()
            }
        } else if pending(current) {
            let mut next = current.clone();
            next["status"] = simulated_status(&resource.plural, current);
            next
        } else {
            current.clone()
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_should_settle_with_every_replica_available() {
        let deploy = json!({"metadata": {"generation": 3}, "spec": {"replicas": 4}});
        assert!(pending(&deploy));
        let status = simulated_status("deployments", &deploy);
        assert_eq!(status["availableReplicas"], 4);
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["conditions"][0]["type"], "Available");
        let settled = json!({"metadata": {"generation": 3}, "status": status});
        assert!(!pending(&settled));
    }

    #[test]
    fn a_pod_should_run_on_the_simulated_node_with_every_container_ready() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "busybox"}, {"name": "b", "image": "nginx"}],
            "initContainers": [{"name": "init", "image": "busybox"}]}});
        assert!(pod_pending(&pod));
        let ips = PodIps::default();
        let running = running_pod(&pod, ips.next());
        assert!(!pod_pending(&running));
        assert_eq!(running["spec"]["nodeName"], crate::store::seed::NODE);
        assert_eq!(running["status"]["phase"], "Running");
        let ready: Vec<_> = running["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| (c["name"].as_str(), c["ready"].as_bool()))
            .collect();
        assert_eq!(ready, [(Some("a"), Some(true)), (Some("b"), Some(true))]);
        assert_eq!(
            running["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"],
            0
        );
        let conditions: Vec<_> = running["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] == "True")
            .filter_map(|c| c["type"].as_str())
            .collect();
        for wanted in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            assert!(conditions.contains(&wanted), "{conditions:?}");
        }
        let bound = json!({"spec": {"nodeName": "elsewhere", "containers": []}});
        let other = running_pod(&bound, ips.next());
        assert_eq!(other["spec"]["nodeName"], "elsewhere");
        assert_eq!(
            (&running["status"]["podIP"], &other["status"]["podIP"]),
            (&json!("10.244.0.2"), &json!("10.244.0.3")),
            "each pod an address of its own"
        );
    }

    #[test]
    fn pod_addresses_should_stay_inside_the_nodes_range() {
        let ips = PodIps::default();
        let all: Vec<Ipv4Addr> = (0..(1 << 16)).map(|_| ips.next()).collect();
        assert_eq!(all[255], Ipv4Addr::new(10, 244, 1, 1));
        assert_eq!(all[65_532], Ipv4Addr::new(10, 244, 255, 254));
        assert_eq!(all[65_533], Ipv4Addr::new(10, 244, 0, 2), "wraps around");
    }

    #[tokio::test(start_paused = true)]
    async fn the_simulator_should_write_status_after_its_delay() {
        let store = Store::default();
        let task = spawn(store.clone(), Duration::from_millis(500));
        tokio::task::yield_now().await;
        let deployments = ResourceKey::new("apps", "deployments");
        let key = ObjectKey::namespaced("default", "web");
        store
            .create(&deployments, &key, json!({"metadata": {"name": "web", "namespace": "default", "generation": 1}, "spec": {"replicas": 2}}))
            .expect("created");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            store
                .get(&deployments, &key)
                .is_some_and(|d| d.get("status").is_none()),
            "not before the delay"
        );
        tokio::time::sleep(Duration::from_millis(600)).await;
        let settled = store.get(&deployments, &key).expect("exists");
        assert_eq!(
            settled.pointer("/status/availableReplicas"),
            Some(&json!(2))
        );
        task.abort();
    }
}
