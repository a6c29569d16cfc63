//! The StatefulSet controller: Pods `<sts>-0` … `<sts>-N-1`, created in
//! order (with `OrderedReady`, each once the one before is Ready), each
//! with its PersistentVolumeClaims from `volumeClaimTemplates`
//! (`<template>-<sts>-<i>`, kept when the Pod goes), `hostname` its name
//! and `subdomain` the `serviceName`; scaled down from the highest
//! ordinal; a template change rolled out from the highest ordinal, one Pod
//! at a time. Status: counts, `currentRevision`/`updateRevision`,
//! `observedGeneration`.

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{
    BURST, active, from_template, generation, owned, ready, replicas, template_hash,
};
use super::reconcile::{Next, Reconciler};
use crate::objects::text_at;

/// The label of a Pod's revision.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The StatefulSet controller.
#[derive(Debug)]
pub struct StatefulSets {
    client: Client,
}

impl StatefulSets {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    async fn claims(
        &self,
        ns: Option<&str>,
        sts: &Value,
        ordinal: usize,
    ) -> Result<Vec<Value>, ClientError> {
        let name = text_at(sts, "/metadata/name");
        let mut volumes = Vec::new();
        for template in sts
            .pointer("/spec/volumeClaimTemplates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let claim = format!("{}-{name}-{ordinal}", text_at(template, "/metadata/name"));
            let mut pvc = json!({"metadata": {"name": claim,
                "labels": sts.pointer("/spec/selector/matchLabels").cloned().unwrap_or_else(|| json!({}))},
                "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))});
            if let Some(labels) = template
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
            {
                for (k, v) in labels {
                    pvc["metadata"]["labels"][k] = v.clone();
                }
            }
            match self.client.create(kinds::PVC, ns, pvc).await {
                Err(e) if e.code != 409 => return Err(e),
                _ => {}
            }
            volumes.push(json!({"name": text_at(template, "/metadata/name"),
                                "persistentVolumeClaim": {"claimName": claim}}));
        }
        Ok(volumes)
    }
}

fn ordinal(sts: &str, pod: &Value) -> Option<usize> {
    text_at(pod, "/metadata/name")
        .strip_prefix(sts)?
        .strip_prefix('-')?
        .parse()
        .ok()
}

impl Reconciler for StatefulSets {
    fn primary(&self) -> Kind {
        kinds::STATEFULSET
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(sts) = self.client.live(kinds::STATEFULSET, key) else {
            return Ok(Next::Done);
        };
        let ns = key.namespace.as_deref();
        let wanted = usize::try_from(replicas(&sts)).unwrap_or(0);
        let ordered = text_at(&sts, "/spec/podManagementPolicy") != "Parallel";
        let revision = format!(
            "{}-{}",
            key.name,
            template_hash(
                &sts.pointer("/spec/template").cloned().unwrap_or_default(),
                0
            )
        );
        let mut pods: Vec<(usize, std::sync::Arc<Value>)> =
            owned(self.client.store(), &sts, kinds::POD)
                .into_iter()
                .filter_map(|p| Some((ordinal(&key.name, &p)?, p)))
                .collect();
        pods.sort_by_key(|(i, _)| *i);
        let at = |i: usize| pods.iter().find(|(o, _)| *o == i).map(|(_, p)| p);
        // Up: in order.
        let mut created = 0;
        for i in 0..wanted {
            if created == BURST {
                break;
            }
            match at(i) {
                Some(pod) if ordered && !(active(pod) && ready(pod)) => break,
                Some(_) => {}
                None => {
                    let name = format!("{}-{i}", key.name);
                    let labels = json!({"statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": i.to_string(),
                                        REVISION_LABEL: revision});
                    let mut pod = from_template(
                        kinds::STATEFULSET,
                        &sts,
                        "/spec/template",
                        &labels,
                        &json!({}),
                    );
                    pod["metadata"]["name"] = name.clone().into();
                    pod["spec"]["hostname"] = name.into();
                    if let Some(service) = sts.pointer("/spec/serviceName").and_then(Value::as_str)
                    {
                        pod["spec"]["subdomain"] = service.into();
                    }
                    let claims = self.claims(ns, &sts, i).await?;
                    if !claims.is_empty() {
                        let mut volumes = pod["spec"]["volumes"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default();
                        volumes.extend(claims);
                        pod["spec"]["volumes"] = volumes.into();
                    }
                    match self.client.create(kinds::POD, ns, pod).await {
                        Err(e) if e.code != 409 => return Err(e),
                        _ => {}
                    }
                    created += 1;
                    if ordered {
                        break;
                    }
                }
            }
        }
        let all_ready = pods
            .iter()
            .filter(|(i, _)| *i < wanted)
            .all(|(_, p)| active(p) && ready(p))
            && pods.iter().filter(|(i, _)| *i < wanted).count() == wanted;
        // Down: from the highest ordinal.
        if let Some((_, pod)) = pods.iter().rev().find(|(i, p)| *i >= wanted && active(p)) {
            if all_ready || !ordered {
                self.client.delete_object(kinds::POD, pod).await?;
            }
        } else if all_ready
            && let Some((_, stale)) = pods.iter().rev().find(|(i, p)| {
                *i < wanted && text_at(p, &format!("/metadata/labels/{REVISION_LABEL}")) != revision
            })
        {
            // A rolling update: the highest stale Pod goes, and comes back new.
            self.client.delete_object(kinds::POD, stale).await?;
        }
        let live: Vec<&Value> = pods
            .iter()
            .filter(|(_, p)| active(p))
            .map(|(_, p)| p.as_ref())
            .collect();
        let updated = live
            .iter()
            .filter(|p| text_at(p, &format!("/metadata/labels/{REVISION_LABEL}")) == revision)
            .count();
        let ready_count = live.iter().filter(|p| ready(p)).count();
        let current_revision = if updated == live.len() {
            revision.clone()
        } else {
            sts.pointer("/status/currentRevision")
                .and_then(Value::as_str)
                .unwrap_or(&revision)
                .to_owned()
        };
        let status = json!({"observedGeneration": generation(&sts), "replicas": live.len(),
            "readyReplicas": ready_count, "availableReplicas": ready_count, "currentReplicas": updated,
            "updatedReplicas": updated, "currentRevision": current_revision, "updateRevision": revision,
            "collisionCount": 0});
        self.client
            .write_status(kinds::STATEFULSET, &sts, status)
            .await?;
        Ok(Next::Done)
    }
}
