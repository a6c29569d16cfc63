//! The Deployment controller: one ReplicaSet per Pod template
//! (`<deploy>-<hash>`, the `pod-template-hash` label on it, its selector
//! and its template), a rolling replacement within `maxSurge` and
//! `maxUnavailable` (25% each by default) or a `Recreate`, revisions in
//! `deployment.kubernetes.io/revision` (a template seen before takes its
//! ReplicaSet back with the next revision: `kubectl rollout undo`), old
//! ReplicaSets kept to `revisionHistoryLimit`, and the status `kubectl
//! rollout status` reads: counts, `observedGeneration`, `Available` and
//! `Progressing`.

use std::sync::Arc;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{adopt, condition, generation, owned, replicas, set_condition, template_hash};
use super::reconcile::{Next, Reconciler};
use crate::objects::{selects, text_at};
use crate::store::{Event, Store};

/// The label naming a ReplicaSet's template.
pub const HASH_LABEL: &str = "pod-template-hash";
/// The annotation holding a revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// The Deployment controller.
#[derive(Debug)]
pub struct Deployments {
    client: Client,
}

impl Deployments {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn revision(rs: &Value) -> i64 {
    rs.pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn count(object: &Value, pointer: &str) -> i64 {
    super::pods::count_at(object, pointer, 0)
}

/// An int-or-percent of `total`, rounded up or down, as `maxSurge` and
/// `maxUnavailable` are read.
pub fn scaled(value: Option<&Value>, total: i64, default: &str, round_up: bool) -> i64 {
    let text = match value {
        Some(Value::Number(n)) => return n.as_i64().unwrap_or(0).clamp(0, i64::from(i32::MAX)),
        Some(Value::String(s)) => s.as_str(),
        _ => default,
    };
    // Within bounds whatever was written, so that no sum overflows.
    let percent = |p: i64| p.clamp(0, 10_000);
    match text.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
        Some(p) if round_up => (total * percent(p) + 99) / 100,
        Some(p) => total * percent(p) / 100,
        None => text
            .parse::<i64>()
            .unwrap_or(0)
            .clamp(0, i64::from(i32::MAX)),
    }
}

/// A template as it is compared: without the hash label, and without
/// empty values (null, false, 0, "", {}, []), which clients and the typed
/// round trip write or leave out at will (as Go's `omitempty` does).
fn semantic(template: Option<&Value>) -> Value {
    fn prune(value: &Value) -> Option<Value> {
        match value {
            Value::Null | Value::Bool(false) => None,
            Value::Number(n) if n.as_f64() == Some(0.0) => None,
            Value::String(s) if s.is_empty() => None,
            Value::Object(map) => {
                let kept: serde_json::Map<String, Value> = map
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), prune(v)?)))
                    .collect();
                (!kept.is_empty()).then_some(Value::Object(kept))
            }
            Value::Array(items) => (!items.is_empty()).then(|| {
                Value::Array(
                    items
                        .iter()
                        .map(|i| prune(i).unwrap_or(Value::Null))
                        .collect(),
                )
            }),
            other => Some(other.clone()),
        }
    }
    let mut template = template.and_then(prune).unwrap_or_else(|| json!({}));
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.shift_remove(HASH_LABEL);
    }
    template
}

/// What the ReplicaSets should have: (new, each old), by a rolling update
/// within `surge` and `unavailable`, or by `Recreate`.
fn plan(deploy: &Value, new: i64, new_available: i64, olds: &[(i64, i64)]) -> (i64, Vec<i64>) {
    let desired = replicas(deploy);
    let old_total: i64 = olds.iter().map(|(spec, _)| spec).sum();
    if text_at(deploy, "/spec/strategy/type") == "Recreate" {
        let old_pods: i64 = olds.iter().map(|(_, available)| available).sum();
        let new_target = if old_total == 0 && old_pods == 0 {
            desired
        } else {
            new
        };
        return (new_target, vec![0; olds.len()]);
    }
    let rolling = deploy.pointer("/spec/strategy/rollingUpdate");
    let surge = scaled(
        rolling.and_then(|r| r.get("maxSurge")),
        desired,
        "25%",
        true,
    );
    let mut unavailable = scaled(
        rolling.and_then(|r| r.get("maxUnavailable")),
        desired,
        "25%",
        false,
    );
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    if olds.is_empty() || old_total == 0 {
        return (desired, vec![0; olds.len()]);
    }
    // Scale up the new within the surge.
    let room = desired + surge - (new + old_total);
    let new_target = (new + room.max(0)).min(desired);
    // Scale down the olds: their unavailable Pods freely, then as many as
    // leave `desired - unavailable` available.
    let available: i64 = new_available + olds.iter().map(|(_, a)| a).sum::<i64>();
    let mut removable = (available - (desired - unavailable)).max(0);
    let targets = olds
        .iter()
        .map(|(spec, old_available)| {
            let unhealthy = (spec - old_available).max(0);
            let healthy = (spec - unhealthy).min(removable);
            removable -= healthy;
            spec - unhealthy - healthy
        })
        .collect();
    (new_target, targets)
}

impl Deployments {
    /// Scales `rs` of `deploy` to `to` replicas, noting the Deployment's
    /// size in its annotations.
    async fn scale(&self, rs: &Value, to: i64, deploy: &Value) -> Result<(), ClientError> {
        if count(rs, "/spec/replicas") == to {
            return Ok(());
        }
        let desired = replicas(deploy);
        let patch = json!({"metadata": {"annotations": {
            "deployment.kubernetes.io/desired-replicas": desired.to_string(),
            "deployment.kubernetes.io/max-replicas": (desired + scaled(
                deploy.pointer("/spec/strategy/rollingUpdate/maxSurge"), desired, "25%", true)).to_string()}},
            "spec": {"replicas": to}});
        self.client
            .patch_object(kinds::REPLICASET, rs, &patch)
            .await
    }

    /// Creates the ReplicaSet of the Deployment's current template.
    async fn create_new(
        &self,
        ns: Option<&str>,
        deploy: &Value,
        revision: i64,
        initial: i64,
    ) -> Result<(), ClientError> {
        let collisions = count(deploy, "/status/collisionCount");
        let hash = template_hash(&semantic(deploy.pointer("/spec/template")), collisions);
        let mut template = deploy
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        template["metadata"]["labels"][HASH_LABEL] = hash.clone().into();
        let mut selector = deploy
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or_else(|| json!({}));
        selector["matchLabels"][HASH_LABEL] = hash.clone().into();
        let desired = replicas(deploy);
        let rs = json!({
            "metadata": {
                "name": format!("{}-{hash}", text_at(deploy, "/metadata/name")),
                "labels": template["metadata"]["labels"].clone(),
                "annotations": {
                    REVISION: revision.to_string(),
                    "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                    "deployment.kubernetes.io/max-replicas": desired.to_string(),
                },
                "ownerReferences": super::pods::owner_ref(kinds::DEPLOYMENT, deploy),
            },
            "spec": {"replicas": initial, "selector": selector, "template": template,
                     "minReadySeconds": count(deploy, "/spec/minReadySeconds")},
        });
        let name = text_at(&rs, "/metadata/name").to_owned();
        match self.client.create(kinds::REPLICASET, ns, rs).await {
            // The revision and the creation noted at once, as the real
            // controller notes them before its first full status.
            Ok(_) => {
                let conditions = deploy
                    .pointer("/status/conditions")
                    .cloned()
                    .unwrap_or_else(|| json!([]));
                let created = condition(
                    "Progressing",
                    true,
                    "NewReplicaSetCreated",
                    &format!("Created new replica set \"{name}\""),
                );
                let patch = json!({"metadata": {"annotations": {REVISION: revision.to_string()}},
                                   "status": {"conditions": set_condition(&conditions, created)}});
                self.client
                    .patch(
                        kinds::DEPLOYMENT,
                        ns,
                        text_at(deploy, "/metadata/name"),
                        Some("status"),
                        &patch,
                    )
                    .await
                    .map(drop)
            }
            // A name taken by another template: count the collision.
            Err(e) if e.code == 409 => self
                .client
                .patch(
                    kinds::DEPLOYMENT,
                    ns,
                    text_at(deploy, "/metadata/name"),
                    Some("status"),
                    &json!({"status": {"collisionCount": collisions + 1}}),
                )
                .await
                .map(drop),
            Err(other) => Err(other),
        }
    }
}

/// The status a Deployment reports with `new` its current ReplicaSet among
/// `all` of its own: the sums of their counts, the generation observed,
/// `Available` (at least `replicas - maxUnavailable` available) and
/// `Progressing` (`NewReplicaSetAvailable` once the new one is complete).
fn status_of(deploy: &Value, new: Option<&Value>, all: &[Arc<Value>]) -> Value {
    let desired = replicas(deploy);
    let sum = |pointer: &str| all.iter().map(|rs| count(rs, pointer)).sum::<i64>();
    let updated = new.map_or(0, |rs| count(rs, "/status/replicas"));
    let (total, ready, available, terminating) = (
        sum("/status/replicas"),
        sum("/status/readyReplicas"),
        sum("/status/availableReplicas"),
        sum("/status/terminatingReplicas"),
    );
    let unavailable_allowed = scaled(
        deploy.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
        desired,
        "25%",
        false,
    );
    let minimum = if text_at(deploy, "/spec/strategy/type") == "Recreate" {
        desired
    } else {
        desired - unavailable_allowed
    };
    let current = deploy.get("status").cloned().unwrap_or_else(|| json!({}));
    let conditions = current
        .get("conditions")
        .cloned()
        .unwrap_or_else(|| json!([]));
    let available_condition = if available >= minimum {
        condition(
            "Available",
            true,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        condition(
            "Available",
            false,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let new_name = new.map_or("", |rs| text_at(rs, "/metadata/name"));
    let complete = updated == desired
        && total == desired
        && available == desired
        && new.is_some_and(|rs| count(rs, "/status/availableReplicas") == desired);
    let progressing = if complete {
        condition(
            "Progressing",
            true,
            "NewReplicaSetAvailable",
            &format!("ReplicaSet \"{new_name}\" has successfully progressed."),
        )
    } else {
        condition(
            "Progressing",
            true,
            "ReplicaSetUpdated",
            &format!("ReplicaSet \"{new_name}\" is progressing."),
        )
    };
    let conditions = set_condition(
        &set_condition(&conditions, available_condition),
        progressing,
    );
    let mut status = json!({"observedGeneration": generation(deploy), "replicas": total,
            "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": available,
            "terminatingReplicas": terminating, "conditions": conditions});
    if desired > available {
        status["unavailableReplicas"] = (desired - available).into();
    } else {
        status["unavailableReplicas"] = Value::Null;
    }
    status
}

impl Reconciler for Deployments {
    fn primary(&self) -> Kind {
        kinds::DEPLOYMENT
    }

    /// A ReplicaSet concerns its controller, or, an orphan, the
    /// Deployments of its namespace that select it (to adopt it).
    fn keys(&self, store: &Store, event: &Event) -> Vec<ObjectKey> {
        let owners = super::reconcile::own_or_owner(kinds::DEPLOYMENT, event);
        if !owners.is_empty() || event.resource != kinds::REPLICASET.key() {
            return owners;
        }
        let labels = event
            .object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        store
            .objects(
                &kinds::DEPLOYMENT.key(),
                Some(text_at(&event.object, "/metadata/namespace")),
            )
            .iter()
            .filter(|d| {
                d.pointer("/spec/selector").is_some_and(|s| {
                    s.as_object().is_some_and(|m| !m.is_empty()) && selects(s, labels)
                })
            })
            .filter_map(|d| ObjectKey::of(d))
            .collect()
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(deploy) = self.client.live(kinds::DEPLOYMENT, key) else {
            return Ok(Next::Done);
        };
        let ns = key.namespace.as_deref();
        adopt(&self.client, kinds::DEPLOYMENT, &deploy, kinds::REPLICASET).await?;
        let mut all = owned(self.client.store(), &deploy, kinds::REPLICASET);
        // The new ReplicaSet is the oldest of those of the current
        // template (two after an adoption), as the real controller finds it.
        all.sort_by(|a, b| {
            let created = |rs: &Value| {
                (
                    text_at(rs, "/metadata/creationTimestamp").to_owned(),
                    text_at(rs, "/metadata/name").to_owned(),
                )
            };
            created(a).cmp(&created(b))
        });
        let template = semantic(deploy.pointer("/spec/template"));
        let new = all
            .iter()
            .find(|rs| semantic(rs.pointer("/spec/template")) == template)
            .cloned();
        let olds: Vec<Arc<Value>> = all
            .iter()
            .filter(|rs| Some(*rs) != new.as_ref())
            .cloned()
            .collect();
        // The new one's revision follows every old one's.
        let max_revision = olds.iter().map(|rs| revision(rs)).max().unwrap_or(0);
        all.sort_by_key(|rs| revision(rs));
        let paused = deploy.pointer("/spec/paused") == Some(&Value::Bool(true));
        if !paused {
            let old_counts: Vec<(i64, i64)> = olds
                .iter()
                .map(|rs| {
                    (
                        count(rs, "/spec/replicas"),
                        count(rs, "/status/availableReplicas"),
                    )
                })
                .collect();
            let (new_spec, new_available) = new.as_ref().map_or((0, 0), |rs| {
                (
                    count(rs, "/spec/replicas"),
                    count(rs, "/status/availableReplicas"),
                )
            });
            let (new_target, old_targets) = plan(&deploy, new_spec, new_available, &old_counts);
            match &new {
                None => {
                    return self
                        .create_new(ns, &deploy, max_revision + 1, new_target)
                        .await
                        .map(|()| Next::Done);
                }
                Some(rs) => {
                    if revision(rs) <= max_revision {
                        // A template seen before (a rollback): its
                        // ReplicaSet becomes the newest revision.
                        let patch = json!({"metadata": {"annotations": {REVISION: (max_revision + 1).to_string()}}});
                        self.client
                            .patch_object(kinds::REPLICASET, rs, &patch)
                            .await?;
                    }
                    self.scale(rs, new_target, &deploy).await?;
                }
            }
            for (rs, target) in olds.iter().zip(old_targets) {
                self.scale(rs, target, &deploy).await?;
            }
            // History beyond the limit: the oldest empty ReplicaSets go.
            let limit =
                usize::try_from(count(&deploy, "/spec/revisionHistoryLimit").max(0)).unwrap_or(0);
            let limit = if deploy.pointer("/spec/revisionHistoryLimit").is_some() {
                limit
            } else {
                10
            };
            let empty: Vec<&Arc<Value>> = olds
                .iter()
                .filter(|rs| count(rs, "/spec/replicas") == 0 && count(rs, "/status/replicas") == 0)
                .collect();
            for rs in empty.iter().take(empty.len().saturating_sub(limit)) {
                self.client.delete_object(kinds::REPLICASET, rs).await?;
            }
        }
        let new_revision = new.as_ref().map(|rs| {
            if revision(rs) <= max_revision {
                max_revision + 1
            } else {
                revision(rs)
            }
        });
        let status = status_of(&deploy, new.as_deref(), &all);
        match new_revision {
            // The revision goes with the status, through the status
            // subresource (whose strategy keeps a Deployment's annotations),
            // as the real controller writes it.
            Some(revision)
                if text_at(
                    &deploy,
                    &format!("/metadata/annotations/{}", REVISION.replace('/', "~1")),
                ) != revision.to_string() =>
            {
                let patch = json!({"metadata": {"annotations": {REVISION: revision.to_string()}},
                                   "status": status});
                self.client
                    .patch(kinds::DEPLOYMENT, ns, &key.name, Some("status"), &patch)
                    .await?;
            }
            _ => {
                self.client
                    .write_status(kinds::DEPLOYMENT, &deploy, status)
                    .await?;
            }
        }
        Ok(Next::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(replicas: i64, strategy: Value) -> Value {
        json!({"spec": {"replicas": replicas, "strategy": strategy}})
    }

    #[test]
    fn templates_should_compare_as_their_meaning() {
        let written = json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1", "resources": {}}]}});
        let stored = json!({"metadata": {"generation": 0, "labels": {"app": "web", HASH_LABEL: "abc"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1", "tty": false}], "hostPID": false}});
        assert_eq!(semantic(Some(&written)), semantic(Some(&stored)));
        let other = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}});
        assert_ne!(semantic(Some(&written)), semantic(Some(&other)));
    }

    #[test]
    fn surge_and_unavailability_should_read_as_kubernetes_reads_them() {
        assert_eq!(scaled(None, 3, "25%", true), 1);
        assert_eq!(scaled(None, 3, "25%", false), 0);
        assert_eq!(scaled(Some(&json!(2)), 3, "25%", false), 2);
        assert_eq!(scaled(Some(&json!("50%")), 5, "25%", true), 3);
        // Whatever a user writes, the controller's sums do not overflow.
        let huge = json!({"spec": {"replicas": i64::MAX, "strategy": {"rollingUpdate": {"maxSurge": i64::MAX}}}});
        let desired = super::super::pods::replicas(&huge);
        assert_eq!(desired, i64::from(i32::MAX));
        assert_eq!(plan(&huge, 0, 0, &[(desired, desired)]).0, desired);
        assert_eq!(
            super::super::pods::replicas(&json!({"spec": {"replicas": -5}})),
            0
        );
    }

    #[test]
    fn a_rolling_update_should_surge_then_retire_the_old_as_the_new_becomes_available() {
        let d = deploy(4, json!({"type": "RollingUpdate"}));
        // Start: 4 old available, no new: surge 1, unavailable 1.
        assert_eq!(plan(&d, 0, 0, &[(4, 4)]), (1, vec![3]));
        // New one available: one more each way.
        assert_eq!(plan(&d, 1, 1, &[(3, 3)]), (2, vec![2]));
        // Done: no old left.
        assert_eq!(plan(&d, 4, 4, &[(0, 0)]), (4, vec![0]));
        // Nothing old: the new takes every replica at once.
        assert_eq!(plan(&d, 0, 0, &[]), (4, vec![]));
    }

    #[test]
    fn the_status_should_say_progressing_until_the_new_replica_set_is_complete() {
        let d = json!({"metadata": {"generation": 2}, "spec": {"replicas": 3}});
        let rs = |name: &str, replicas: i64, available: i64| {
            Arc::new(json!({"metadata": {"name": name},
                "status": {"replicas": replicas, "readyReplicas": available, "availableReplicas": available}}))
        };
        let (old, half) = (rs("web-a", 2, 2), rs("web-b", 2, 1));
        let rolling = status_of(&d, Some(&half), &[Arc::clone(&old), Arc::clone(&half)]);
        assert_eq!(
            (
                rolling["replicas"].as_i64(),
                rolling["updatedReplicas"].as_i64()
            ),
            (Some(4), Some(2))
        );
        assert_eq!(
            rolling["unavailableReplicas"],
            Value::Null,
            "3 available of 3 wanted"
        );
        assert_eq!(rolling["conditions"][1]["reason"], "ReplicaSetUpdated");
        let done = rs("web-b", 3, 3);
        let complete = status_of(&d, Some(&done), &[rs("web-a", 0, 0), Arc::clone(&done)]);
        assert_eq!(complete["observedGeneration"], 2);
        assert_eq!(complete["conditions"][0]["type"], "Available");
        assert_eq!(complete["conditions"][0]["status"], "True");
        assert_eq!(
            complete["conditions"][1]["reason"],
            "NewReplicaSetAvailable"
        );
        assert_eq!(complete["unavailableReplicas"], Value::Null);
    }

    #[test]
    fn recreate_should_empty_the_old_before_the_new_starts() {
        let d = deploy(2, json!({"type": "Recreate"}));
        assert_eq!(plan(&d, 0, 0, &[(2, 2)]), (0, vec![0]));
        assert_eq!(plan(&d, 0, 0, &[(0, 0)]), (2, vec![0]));
    }
}
