//! The simulated **scheduler and kubelet**, in the manner of kwok's stages:
//! no container runs anywhere, but every Pod goes through the states a
//! real node reports, on simulated Nodes (`--nodes`, one by default).
//!
//! A Pod's life, each step [`Kubelet::delay`] after the one before:
//! 1. *Unscheduled* (no `spec.nodeName`): bound to the schedulable Node
//!    with the fewest Pods among those carrying its `nodeSelector`'s
//!    labels, through `pods/binding` as the scheduler does (`spec.nodeName`
//!    and `PodScheduled` in one write); with none, it stays Pending.
//! 2. *Pending* on its Node: started. `phase: Running`, `podIP` from the
//!    Node's `podCIDR` (each Pod its own), `hostIP` the Node's, `startTime`,
//!    `containerStatuses` running and ready, init containers completed,
//!    the `Initialized`, `ContainersReady` and `Ready` conditions, as a
//!    kubelet writes them (kwok's `pod-ready`).
//! 3. *Running*, for a Pod that runs to completion (`restartPolicy:
//!    Never` or `OnFailure`, as every Job's Pod, whatever owns it), or one
//!    asked to succeed: its containers exit 0 and it is `Succeeded` (kwok's
//!    `pod-complete`, which completes a Job's Pods only). Other Pods
//!    (`restartPolicy: Always`, the default) run until deleted.
//! 4. *Terminating* (`deletionTimestamp`): removed once its grace period
//!    or [`Kubelet::delay`] has passed, whichever is shorter (its
//!    containers stop on SIGTERM), and its finalizers are gone; on a Node
//!    that does not exist, no kubelet stops it: the pod garbage collector
//!    removes it after its quarantine ([`ORPHANED_AFTER`]).
//!
//! The annotation [`SIMULATE`] changes the story, to try a controller's
//! failure paths: `fail` (its containers exit 1: a Pod that does not
//! restart is `Failed`, one that does crash-loops, never ready),
//! `unready` (running, never ready), `succeed` (exits 0 like a Job's).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::client::{Client, ClientError, Kind, kinds};
use super::reconcile::{Next, Reconciler};
use crate::objects::{new_uid, now, text_at};

/// The annotation that tells the simulated kubelet how a Pod should end.
pub const SIMULATE: &str = "kubewasm.dev/simulate";

/// The Nodes of a simulated cluster of `count`: the seeded control plane
/// node, then `kubewasm-node-2`… (each its address and its Pods' `/16`).
pub fn nodes(count: usize) -> Vec<Value> {
    let count = count.clamp(1, 100);
    let mut all = vec![crate::store::seed::node(
        crate::store::seed::NODE,
        "127.0.0.1",
        "10.244.0.0/16",
        true,
    )];
    for i in 2..=count {
        all.push(crate::store::seed::node(
            &format!("{}-{i}", crate::store::seed::NODE),
            &format!("172.18.0.{i}"),
            &format!("10.{}.0.0/16", 110 + i),
            false,
        ));
    }
    all
}

/// The `n`th Pod address of a Node's `/16` (`10.244.0.0/16` gives
/// `10.244.0.2` first): never the network's first two (network, gateway)
/// nor its last, wrapping after 65,533.
pub fn pod_ip(cidr: &str, n: u32) -> Ipv4Addr {
    const USABLE: u32 = (1 << 16) - 3;
    let base = cidr
        .split('/')
        .next()
        .and_then(|a| a.parse::<Ipv4Addr>().ok())
        .unwrap_or(Ipv4Addr::new(10, 244, 0, 0));
    Ipv4Addr::from((u32::from(base) & 0xffff_0000) + 2 + n % USABLE)
}

/// How a Pod is asked to end ([`SIMULATE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Story {
    /// Runs and is ready, until deleted.
    Normal,
    Fail,
    Unready,
    /// Runs, then its containers exit 0.
    Succeed,
}

impl Story {
    fn of(pod: &Value) -> Self {
        match text_at(
            pod,
            &format!("/metadata/annotations/{}", SIMULATE.replace('/', "~1")),
        ) {
            "fail" => Self::Fail,
            "unready" => Self::Unready,
            "succeed" => Self::Succeed,
            _ if runs_to_completion(pod) => Self::Succeed,
            _ => Self::Normal,
        }
    }
}

/// Whether a Pod's containers are not restarted once they exit
/// (`restartPolicy: Never` or `OnFailure`): it ends `Succeeded` or
/// `Failed`, where a Pod left at `Always` runs until deleted.
fn runs_to_completion(pod: &Value) -> bool {
    matches!(text_at(pod, "/spec/restartPolicy"), "Never" | "OnFailure")
}

/// Where a Pod is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Unscheduled,
    Pending,
    Running,
    Terminating,
    Finished,
}

fn stage(pod: &Value) -> Stage {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return Stage::Terminating;
    }
    if text_at(pod, "/spec/nodeName").is_empty() {
        return Stage::Unscheduled;
    }
    match text_at(pod, "/status/phase") {
        "" | "Pending" => Stage::Pending,
        "Running" => Stage::Running,
        _ => Stage::Finished,
    }
}

/// How long a Pod being deleted on a Node that does not exist waits (no
/// kubelet stops it) before the pod garbage collector removes it: its
/// quarantine of orphaned Pods.
const ORPHANED_AFTER: Duration = Duration::from_secs(40);

/// The simulated scheduler and kubelet of every simulated Node.
#[derive(Debug)]
pub struct Kubelet {
    client: Client,
    /// How long each step of a Pod's life takes.
    pub delay: Duration,
    /// When each Pod was first seen in its current stage.
    seen: Mutex<HashMap<ObjectKey, (Stage, Instant)>>,
    /// Addresses handed out, per Node.
    handed: Mutex<HashMap<String, u32>>,
}

impl Kubelet {
    /// Whether `pod` is bound to a Node that does not exist.
    fn orphaned(&self, pod: &Value) -> bool {
        let node = text_at(pod, "/spec/nodeName");
        !node.is_empty()
            && self
                .client
                .store()
                .get(&kinds::NODE.key(), &ObjectKey::cluster(node))
                .is_none()
    }

    /// A kubelet writing through `client`, each step taking `delay`.
    pub fn new(client: Client, delay: Duration) -> Self {
        Self {
            client,
            delay,
            seen: Mutex::default(),
            handed: Mutex::default(),
        }
    }

    /// How long `key` must still wait in `stage` before its next step
    /// (none: go on). The clock starts when the stage is first seen.
    fn wait(&self, key: &ObjectKey, stage: Stage, wanted: Duration) -> Option<Duration> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let since = match seen.get(key) {
            Some((s, since)) if *s == stage => *since,
            _ => {
                seen.insert(key.clone(), (stage, Instant::now()));
                return Some(wanted);
            }
        };
        wanted.checked_sub(since.elapsed()).filter(|d| !d.is_zero())
    }

    fn forget(&self, key: &ObjectKey) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// The schedulable Node with the fewest Pods among those carrying
    /// every label of `pod`'s `nodeSelector`; none when no Node does (the
    /// Pod stays Pending, as a real scheduler leaves it).
    fn pick_node(&self, pod: &Value) -> Option<String> {
        let store = self.client.store();
        let nodes = store.objects(&kinds::NODE.key(), None);
        let pods = store.objects(&kinds::POD.key(), None);
        let mut load: HashMap<&str, usize> = HashMap::new();
        for pod in &pods {
            *load.entry(text_at(pod, "/spec/nodeName")).or_default() += 1;
        }
        let selector = pod.pointer("/spec/nodeSelector").and_then(Value::as_object);
        nodes
            .iter()
            .filter(|n| n.pointer("/spec/unschedulable") != Some(&Value::Bool(true)))
            .filter(|n| {
                selector.into_iter().flatten().all(|(label, value)| {
                    n.pointer("/metadata/labels")
                        .and_then(|labels| labels.get(label))
                        == Some(value)
                })
            })
            .map(|n| text_at(n, "/metadata/name"))
            .min_by_key(|name| load.get(name).copied().unwrap_or(0))
            .map(str::to_owned)
    }

    fn next_ip(&self, node: &Value) -> Ipv4Addr {
        let name = text_at(node, "/metadata/name").to_owned();
        let mut handed = self.handed.lock().unwrap_or_else(PoisonError::into_inner);
        let n = handed.entry(name).or_default();
        let ip = pod_ip(text_at(node, "/spec/podCIDR"), *n);
        *n = n.wrapping_add(1);
        ip
    }

    async fn patch_status(&self, key: &ObjectKey, status: Value) -> Result<Next, ClientError> {
        self.client
            .patch(
                kinds::POD,
                key.namespace.as_deref(),
                &key.name,
                Some("status"),
                &json!({"status": status}),
            )
            .await?;
        Ok(Next::Done)
    }
}

/// The status of a Pod its kubelet has just started on `node`, at `ip`,
/// as `story` goes.
fn started(pod: &Value, node: &Value, ip: Ipv4Addr, story: Story) -> Value {
    let time = now();
    let host_ip = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .unwrap_or("127.0.0.1");
    let failed = story == Story::Fail && runs_to_completion(pod);
    let ready = story != Story::Fail && story != Story::Unready;
    let containers = |field: &str| -> Vec<Value> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let main = field == "containers";
                let state = if !main {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": time, "finishedAt": time}})
                } else if failed {
                    json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": time, "finishedAt": time}})
                } else if story == Story::Fail {
                    json!({"waiting": {"reason": "CrashLoopBackOff",
                           "message": format!("back-off restarting failed container {} (simulated)", c["name"].as_str().unwrap_or(""))}})
                } else {
                    json!({"running": {"startedAt": time}})
                };
                json!({"name": c["name"], "image": c["image"], "imageID": "",
                       "containerID": format!("kubewasm://{}", new_uid()),
                       "ready": main && ready, "started": main && !failed && story != Story::Fail,
                       "restartCount": if story == Story::Fail && !runs_to_completion(pod) { 1 } else { 0 },
                       "state": state})
            })
            .collect()
    };
    let condition = |kind: &str, ok: bool| {
        json!({"type": kind, "status": if ok { "True" } else { "False" }, "lastProbeTime": null,
               "lastTransitionTime": time})
    };
    let mut status = json!({
        "phase": if failed { "Failed" } else { "Running" },
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip.to_string(),
        "podIPs": [{"ip": ip.to_string()}],
        "startTime": time,
        "qosClass": "BestEffort",
        "conditions": [
            condition("PodReadyToStartContainers", true),
            condition("Initialized", true),
            condition("Ready", ready),
            condition("ContainersReady", ready),
            condition("PodScheduled", true),
        ],
        "containerStatuses": containers("containers"),
    });
    let init = containers("initContainers");
    if !init.is_empty() {
        status["initContainerStatuses"] = init.into();
    }
    status
}

/// The status of a Pod whose containers all exited 0.
fn succeeded(pod: &Value) -> Value {
    let time = now();
    let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
    status["phase"] = "Succeeded".into();
    if let Some(containers) = status
        .get_mut("containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for c in containers {
            let started = c
                .pointer("/state/running/startedAt")
                .cloned()
                .unwrap_or_else(|| time.clone().into());
            c["ready"] = false.into();
            c["started"] = false.into();
            c["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                                               "startedAt": started, "finishedAt": time}});
        }
    }
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions {
            if matches!(
                c["type"].as_str(),
                Some("Ready" | "ContainersReady" | "PodReadyToStartContainers")
            ) {
                c["status"] = "False".into();
                c["reason"] = "PodCompleted".into();
                c["lastTransitionTime"] = time.clone().into();
            }
        }
    }
    status
}

impl Reconciler for Kubelet {
    fn primary(&self) -> Kind {
        kinds::POD
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let store = self.client.store();
        let Some(pod) = store.get(&kinds::POD.key(), key) else {
            self.forget(key);
            return Ok(Next::Done);
        };
        let stage = stage(&pod);
        let wanted = match stage {
            Stage::Unscheduled => Duration::ZERO,
            Stage::Terminating if self.orphaned(&pod) => ORPHANED_AFTER,
            Stage::Terminating => {
                let grace = pod
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                self.delay.min(Duration::from_secs(grace))
            }
            Stage::Running if matches!(Story::of(&pod), Story::Succeed) => self.delay,
            Stage::Running | Stage::Finished => {
                // Nothing more to time: the clock of this Pod is dropped.
                self.forget(key);
                return Ok(Next::Done);
            }
            Stage::Pending => self.delay,
        };
        if let Some(left) = self.wait(key, stage, wanted) {
            return Ok(Next::After(left));
        }
        match stage {
            Stage::Unscheduled => {
                let Some(node) = self.pick_node(&pod) else {
                    return Ok(Next::After(self.delay));
                };
                let binding = json!({"apiVersion": "v1", "kind": "Binding",
                                     "metadata": {"name": key.name}, "target": {"kind": "Node", "name": node}});
                self.client
                    .post(
                        kinds::POD,
                        key.namespace.as_deref(),
                        &key.name,
                        "binding",
                        &binding,
                    )
                    .await?;
                Ok(Next::Done)
            }
            Stage::Pending => {
                let node_name = text_at(&pod, "/spec/nodeName");
                let Some(node) = store.get(&kinds::NODE.key(), &ObjectKey::cluster(node_name))
                else {
                    // Bound to a Node that does not exist: it stays Pending.
                    return Ok(Next::Done);
                };
                let ip = self.next_ip(&node);
                self.patch_status(key, started(&pod, &node, ip, Story::of(&pod)))
                    .await
            }
            Stage::Running => self.patch_status(key, succeeded(&pod)).await,
            Stage::Terminating => {
                self.client
                    .delete(kinds::POD, key.namespace.as_deref(), &key.name, Some(0))
                    .await?;
                Ok(Next::Done)
            }
            Stage::Finished => Ok(Next::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_pod_should_report_what_a_kubelet_writes() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [
            {"name": "a", "image": "busybox"}, {"name": "b", "image": "nginx"}],
            "initContainers": [{"name": "init", "image": "busybox"}]}});
        let node = nodes(2).pop().expect("two nodes");
        let status = started(&pod, &node, pod_ip("10.112.0.0/16", 0), Story::Normal);
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["hostIP"], "172.18.0.2");
        assert_eq!(status["podIP"], "10.112.0.2");
        let ready: Vec<_> = status["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| (c["name"].as_str(), c["ready"].as_bool()))
            .collect();
        assert_eq!(ready, [(Some("a"), Some(true)), (Some("b"), Some(true))]);
        assert_eq!(
            status["initContainerStatuses"][0]["state"]["terminated"]["exitCode"],
            0
        );
        for wanted in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            assert!(
                status["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == wanted && c["status"] == "True"),
                "{wanted}: {status}"
            );
        }
        let done = succeeded(&json!({"status": status}));
        assert_eq!(done["phase"], "Succeeded");
        assert_eq!(
            done["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            0
        );
    }

    #[test]
    fn a_pod_asked_to_fail_should_fail_or_crash_loop_by_its_restart_policy() {
        let node = nodes(1).remove(0);
        let pod = |policy: &str| {
            json!({"metadata": {"annotations": {SIMULATE: "fail"}},
            "spec": {"restartPolicy": policy, "containers": [{"name": "a", "image": "x"}]}})
        };
        let never = started(
            &pod("Never"),
            &node,
            pod_ip("10.244.0.0/16", 0),
            Story::of(&pod("Never")),
        );
        assert_eq!(never["phase"], "Failed");
        assert_eq!(
            never["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            1
        );
        let always = started(
            &pod("Always"),
            &node,
            pod_ip("10.244.0.0/16", 0),
            Story::of(&pod("Always")),
        );
        assert_eq!(always["phase"], "Running");
        assert_eq!(
            always["containerStatuses"][0]["state"]["waiting"]["reason"],
            "CrashLoopBackOff"
        );
        assert_eq!(always["containerStatuses"][0]["ready"], false);
    }

    #[test]
    fn a_pod_that_runs_to_completion_should_succeed_whatever_owns_it() {
        let pod = |policy: Option<&str>, owner: &str| {
            let mut pod = json!({"metadata": {"ownerReferences": [{"apiVersion": "example.com/v1",
                "kind": owner, "name": "o", "uid": "u", "controller": true}]},
                "spec": {"containers": [{"name": "a", "image": "x"}]}});
            if let Some(policy) = policy {
                pod["spec"]["restartPolicy"] = policy.into();
            }
            pod
        };
        assert_eq!(Story::of(&pod(Some("Never"), "Job")), Story::Succeed);
        assert_eq!(Story::of(&pod(Some("Never"), "BatchRun")), Story::Succeed);
        assert_eq!(
            Story::of(&pod(Some("OnFailure"), "Workflow")),
            Story::Succeed
        );
        assert_eq!(Story::of(&pod(Some("Always"), "ReplicaSet")), Story::Normal);
        assert_eq!(Story::of(&pod(None, "ReplicaSet")), Story::Normal);
    }

    #[test]
    fn pod_addresses_should_stay_inside_the_nodes_range() {
        let all: Vec<Ipv4Addr> = (0..(1 << 16)).map(|n| pod_ip("10.244.0.0/16", n)).collect();
        assert_eq!(all[0], Ipv4Addr::new(10, 244, 0, 2));
        assert_eq!(all[255], Ipv4Addr::new(10, 244, 1, 1));
        assert_eq!(all[65_532], Ipv4Addr::new(10, 244, 255, 254));
        assert_eq!(all[65_533], Ipv4Addr::new(10, 244, 0, 2), "wraps around");
    }

    #[test]
    fn nodes_should_each_have_their_own_addresses() {
        let all = nodes(3);
        let names: Vec<&str> = all.iter().map(|n| text_at(n, "/metadata/name")).collect();
        assert_eq!(
            names,
            ["kubewasm-node", "kubewasm-node-2", "kubewasm-node-3"]
        );
        assert_eq!(text_at(&all[2], "/spec/podCIDR"), "10.113.0.0/16");
    }
}
