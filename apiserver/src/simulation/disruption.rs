//! The disruption controller: every PodDisruptionBudget's status, as
//! kube-controller-manager's writes it (`pkg/controller/disruption`).
//!
//! - The Pods it covers are those of its namespace its `selector` selects
//!   (none without a selector, all with an empty one).
//! - `minAvailable` as a number: `desiredHealthy` is that number and
//!   `expectedPods` the Pods covered. `minAvailable` as a percentage, or
//!   `maxUnavailable`: `expectedPods` is the sum of the scales of the Pods'
//!   controllers (a ReplicaSet's, or its Deployment's; a StatefulSet's; any
//!   other owner's `spec.replicas`), Pods with no controller left out, and
//!   `desiredHealthy` follows from it (percentages rounded up).
//! - `currentHealthy` counts the covered Pods that are ready and not being
//!   deleted nor recently disrupted (`disruptedPods`, kept two minutes);
//!   `disruptionsAllowed` is `currentHealthy - desiredHealthy`, never below
//!   zero, and zero while no Pod is expected.
//! - The `DisruptionAllowed` condition: `True`/`SufficientPods` when a
//!   disruption is allowed, `False`/`InsufficientPods` otherwise, and
//!   `False`/`SyncFailed` with the cause when the counts cannot be made
//!   (a Pod's controller not found).
//!
//! A status already so is not written again.

use std::collections::HashMap;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::deployment::scaled;
use super::pods::{generation, ready};
use super::reconcile::{Next, Reconciler, controller_of};
use crate::objects::{selects, set_status_condition, text_at};
use crate::store::{Event, Store};

/// How long a Pod named in `disruptedPods` counts as disrupted, waiting
/// for its deletion (the real controller's `DeletionTimeout`).
const DELETION_TIMEOUT_SECONDS: i64 = 120;

/// The disruption controller.
#[derive(Debug)]
pub struct Disruption {
    client: Client,
}

impl Disruption {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// Whether `pdb`'s selector selects `pod` (no selector selects none).
fn covers(pdb: &Value, pod: &Value) -> bool {
    pdb.pointer("/spec/selector")
        .filter(|s| !s.is_null())
        .is_some_and(|s| {
            selects(
                s,
                pod.pointer("/metadata/labels").and_then(Value::as_object),
            )
        })
}

/// The Pods of `pdb`'s namespace it covers.
fn covered(store: &Store, pdb: &Value) -> Vec<std::sync::Arc<Value>> {
    store
        .objects(&kinds::POD.key(), Some(text_at(pdb, "/metadata/namespace")))
        .into_iter()
        .filter(|p| covers(pdb, p))
        .collect()
}

/// The scale of the controller of `pod`, by the controller's uid (a
/// ReplicaSet a Deployment controls counts as its Deployment); `None` for
/// a Pod with no controller; an error in the real controller's words when
/// the controller is not found.
fn controller_scale(store: &Store, pod: &Value) -> Result<Option<(String, i64)>, String> {
    let Some(owner) = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
    else {
        return Ok(None);
    };
    let ns = text_at(pod, "/metadata/namespace");
    let named = |kind: Kind, name: &str| store.get(&kind.key(), &ObjectKey::namespaced(ns, name));
    let scale = |object: &Value| {
        Some((
            text_at(object, "/metadata/uid").to_owned(),
            super::pods::replicas(object),
        ))
    };
    let found = match text_at(owner, "/kind") {
        "ReplicaSet" => named(kinds::REPLICASET, text_at(owner, "/name"))
            .filter(|rs| rs["metadata"]["uid"] == owner["uid"])
            .and_then(|rs| match controller_of(&rs, kinds::DEPLOYMENT.kind) {
                Some(deployment) => store
                    .get(&kinds::DEPLOYMENT.key(), &deployment)
                    .and_then(|d| scale(&d)),
                None => scale(&rs),
            }),
        "StatefulSet" => named(kinds::STATEFULSET, text_at(owner, "/name")).and_then(|s| scale(&s)),
        _ => None,
    };
    match found {
        Some(found) => Ok(Some(found)),
        None => Err(format!(
            "found no controllers for pod {:?}",
            text_at(pod, "/metadata/name")
        )),
    }
}

/// `expectedPods` and `desiredHealthy` of `pdb` over `pods`.
fn expected(
    store: &Store,
    pdb: &Value,
    pods: &[std::sync::Arc<Value>],
) -> Result<(i64, i64), String> {
    let min = pdb.pointer("/spec/minAvailable");
    let max = pdb.pointer("/spec/maxUnavailable").filter(|m| !m.is_null());
    if max.is_none()
        && let Some(Value::Number(n)) = min
    {
        let count = i64::try_from(pods.len()).unwrap_or(i64::MAX);
        return Ok((count, n.as_i64().unwrap_or(0)));
    }
    let mut scales: HashMap<String, i64> = HashMap::new();
    for pod in pods {
        if let Some((uid, scale)) = controller_scale(store, pod)? {
            scales.insert(uid, scale);
        }
    }
    let count: i64 = scales.values().sum();
    let percentage = |value: &Value| match value {
        Value::String(text) if !text.ends_with('%') => Err(
            "invalid value for IntOrString: invalid type: string is not a percentage".to_owned(),
        ),
        _ => Ok(scaled(Some(value), count, "0", true)),
    };
    Ok(match (max, min) {
        (Some(max), _) => (count, (count - percentage(max)?).max(0)),
        (None, Some(min)) => (count, percentage(min)?),
        (None, None) => (count, 0),
    })
}

/// `disruptedPods` kept: the covered Pods not being deleted whose
/// disruption is recent.
fn disrupted(pdb: &Value, pods: &[std::sync::Arc<Value>]) -> serde_json::Map<String, Value> {
    let Some(listed) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    else {
        return serde_json::Map::new();
    };
    let now = jiff::Timestamp::now();
    pods.iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .filter_map(|p| {
            let name = text_at(p, "/metadata/name");
            let at = listed.get(name)?;
            let when: jiff::Timestamp = at.as_str()?.parse().ok()?;
            (when.as_second() + DELETION_TIMEOUT_SECONDS > now.as_second())
                .then(|| (name.to_owned(), at.clone()))
        })
        .collect()
}

/// The `DisruptionAllowed` condition.
fn allowed(status: bool, reason: &str, message: &str, observed: i64) -> Value {
    json!({"type": "DisruptionAllowed", "status": if status { "True" } else { "False" },
           "reason": reason, "message": message, "observedGeneration": observed})
}

impl Reconciler for Disruption {
    fn primary(&self) -> Kind {
        kinds::PDB
    }

    /// A Pod concerns the budgets covering it (before or after); a
    /// workload's scale, the budgets of its namespace.
    fn keys(&self, store: &Store, event: &Event) -> Vec<ObjectKey> {
        let budgets = |ns: &str| store.objects(&kinds::PDB.key(), Some(ns));
        let ns = text_at(&event.object, "/metadata/namespace");
        if event.resource == kinds::POD.key() {
            return budgets(ns)
                .iter()
                .filter(|pdb| {
                    covers(pdb, &event.object)
                        || event.previous.as_deref().is_some_and(|p| covers(pdb, p))
                })
                .filter_map(|pdb| ObjectKey::of(pdb))
                .collect();
        }
        if [kinds::REPLICASET, kinds::DEPLOYMENT, kinds::STATEFULSET]
            .iter()
            .any(|k| event.resource == k.key())
        {
            return budgets(ns)
                .iter()
                .filter_map(|pdb| ObjectKey::of(pdb))
                .collect();
        }
        super::reconcile::own_or_owner(kinds::PDB, event)
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let store = self.client.store();
        let Some(pdb) = self.client.live(kinds::PDB, key) else {
            return Ok(Next::Done);
        };
        let conditions = pdb
            .pointer("/status/conditions")
            .cloned()
            .unwrap_or(Value::Null);
        let pods = covered(store, &pdb);
        let status = match expected(store, &pdb, &pods) {
            Ok((expected, desired)) => {
                let disrupted = disrupted(&pdb, &pods);
                let healthy = pods
                    .iter()
                    .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
                    .filter(|p| !disrupted.contains_key(text_at(p, "/metadata/name")))
                    .filter(|p| ready(p))
                    .count();
                let healthy = i64::try_from(healthy).unwrap_or(i64::MAX);
                let allowed_now = if expected <= 0 {
                    0
                } else {
                    (healthy - desired).max(0)
                };
                let observed = generation(&pdb);
                let condition = if allowed_now > 0 {
                    allowed(true, "SufficientPods", "", observed)
                } else {
                    allowed(false, "InsufficientPods", "", observed)
                };
                json!({"currentHealthy": healthy, "desiredHealthy": desired,
                       "expectedPods": expected, "disruptionsAllowed": allowed_now,
                       "disruptedPods": if disrupted.is_empty() { Value::Null } else { Value::Object(disrupted) },
                       "observedGeneration": observed,
                       "conditions": set_status_condition(&conditions, condition)})
            }
            // The fail-safe: no disruption allowed, and why.
            Err(cause) => {
                let observed = pdb
                    .pointer("/status/observedGeneration")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                json!({"disruptionsAllowed": 0,
                       "conditions": set_status_condition(&conditions, allowed(false, "SyncFailed", &cause, observed))})
            }
        };
        self.client.write_status(kinds::PDB, &pdb, status).await?;
        Ok(Next::Done)
    }
}
