//! The DaemonSet controller: one Pod (`<ds>-xxxxx`) on every schedulable
//! Node its template's `nodeSelector` selects, pinned to it by `nodeAffinity` on `metadata.name` as the real
//! controller does (and bound to it); a Pod on a Node that is gone is
//! removed; a template change rolled out one Node at a time. Status: the
//! counts `kubectl rollout status` reads, `observedGeneration`.

use std::sync::Arc;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{active, from_template, generation, owned, ready, template_hash};
use super::reconcile::{Next, Reconciler};
use super::statefulset::REVISION_LABEL;
use crate::objects::text_at;
use crate::store::{Event, Store};

/// The DaemonSet controller.
#[derive(Debug)]
pub struct DaemonSets {
    client: Client,
}

impl DaemonSets {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Reconciler for DaemonSets {
    fn primary(&self) -> Kind {
        kinds::DAEMONSET
    }

    /// A Node's change concerns every DaemonSet.
    fn keys(&self, store: &Store, event: &Event) -> Vec<ObjectKey> {
        if event.resource == kinds::NODE.key() {
            return store
                .objects(&kinds::DAEMONSET.key(), None)
                .iter()
                .filter_map(|d| ObjectKey::of(d))
                .collect();
        }
        super::reconcile::own_or_owner(kinds::DAEMONSET, event)
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let store = self.client.store();
        let Some(ds) = self.client.live(kinds::DAEMONSET, key) else {
            return Ok(Next::Done);
        };
        let ns = key.namespace.as_deref();
        let selector = ds
            .pointer("/spec/template/spec/nodeSelector")
            .and_then(Value::as_object);
        let selected = |node: &Value| {
            selector.into_iter().flatten().all(|(key, value)| {
                node.pointer("/metadata/labels")
                    .and_then(|labels| labels.get(key))
                    == Some(value)
            })
        };
        let nodes: Vec<String> = store
            .objects(&kinds::NODE.key(), None)
            .iter()
            .filter(|n| n.pointer("/spec/unschedulable") != Some(&Value::Bool(true)))
            .filter(|n| selected(n))
            .map(|n| text_at(n, "/metadata/name").to_owned())
            .collect();
        let revision = template_hash(
            &ds.pointer("/spec/template").cloned().unwrap_or_default(),
            0,
        );
        let pods: Vec<Arc<Value>> = owned(store, &ds, kinds::POD)
            .into_iter()
            .filter(|p| active(p))
            .collect();
        let on = |node: &str| pods.iter().find(|p| text_at(p, "/spec/nodeName") == node);
        for node in nodes.iter().filter(|n| on(n).is_none()) {
            let mut pod = from_template(
                kinds::DAEMONSET,
                &ds,
                "/spec/template",
                &json!({REVISION_LABEL: revision}),
                &json!({}),
            );
            pod["metadata"]["generateName"] = format!("{}-", key.name).into();
            pod["spec"]["nodeName"] = node.clone().into();
            pod["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
            self.client.create(kinds::POD, ns, pod).await?;
        }
        for pod in pods
            .iter()
            .filter(|p| !nodes.iter().any(|n| n == text_at(p, "/spec/nodeName")))
        {
            self.client.delete_object(kinds::POD, pod).await?;
        }
        let stale =
            |p: &&Arc<Value>| text_at(p, &format!("/metadata/labels/{REVISION_LABEL}")) != revision;
        if pods.iter().all(|p| ready(p))
            && let Some(pod) = pods.iter().find(stale)
        {
            self.client.delete_object(kinds::POD, pod).await?;
        }
        let scheduled = nodes.iter().filter(|n| on(n).is_some()).count();
        let ready_count = pods.iter().filter(|p| ready(p)).count();
        let updated = pods.iter().filter(|p| !stale(p)).count();
        let status = json!({"observedGeneration": generation(&ds), "desiredNumberScheduled": nodes.len(),
            "currentNumberScheduled": scheduled, "numberMisscheduled": 0, "numberReady": ready_count,
            "numberAvailable": ready_count, "updatedNumberScheduled": updated,
            "numberUnavailable": nodes.len().saturating_sub(ready_count)});
        self.client
            .write_status(kinds::DAEMONSET, &ds, status)
            .await?;
        Ok(Next::Done)
    }
}
