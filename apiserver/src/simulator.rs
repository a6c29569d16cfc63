//! A workload **simulation**, like kwok's stages: no pod runs anywhere.
//!
//! Shortly after a Deployment, ReplicaSet or StatefulSet is created or its
//! spec changes (its `generation` is ahead of `status.observedGeneration`),
//! the simulator writes the status a healthy controller-manager and kubelet
//! would produce: every desired replica ready, available and updated, the
//! generation observed, `Available` and `Progressing` conditions. It lets an
//! operator's status have something real to read in `kubewasm dev`. It is
//! off unless asked for ([`crate::api::ApiConfig::simulate_workloads`]).

use std::time::Duration;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::objects::now;
use crate::store::{EventType, ResourceKey, Store, StoreError};

const KINDS: [&str; 3] = ["deployments", "replicasets", "statefulsets"];

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
    tokio::spawn(async move {
        let mut from = store.current_rv();
        loop {
            let Ok(mut watcher) = store.watch(None, from) else {
                from = store.current_rv();
                continue;
            };
            while let Ok(event) = watcher.next().await {
                from = event.rv;
                let plural = event.resource.plural.as_str();
                if event.resource.group != "apps"
                    || !KINDS.contains(&plural)
                    || event.kind == EventType::Deleted
                {
                    continue;
                }
                if !pending(&event.object) {
                    continue;
                }
                let Some(key) = ObjectKey::of(&event.object) else {
                    continue;
                };
                let store = store.clone();
                let resource = event.resource.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    settle(&store, &resource, &key);
                });
            }
        }
    })
}

fn settle(store: &Store, resource: &ResourceKey, key: &ObjectKey) {
    // Gone or already settled is fine.
    let _ = store.update::<StoreError>(resource, key, |current| {
        let mut next = current.clone();
        if pending(current) {
            next["status"] = simulated_status(&resource.plural, current);
        }
        Ok(next)
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
