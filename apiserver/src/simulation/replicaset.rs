//! The ReplicaSet controller: as many Pods as `spec.replicas`, made from
//! the template (`<rs>-xxxxx`, controlled by the ReplicaSet); surplus Pods
//! removed unscheduled first, then unready, then newest; the counts
//! (`replicas`, `fullyLabeledReplicas`, `readyReplicas`,
//! `availableReplicas`, `terminatingReplicas`) and `observedGeneration` in
//! its status.

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{BURST, active, from_template, generation, owned, ready, replicas};
use super::reconcile::{Next, Reconciler};
use crate::objects::text_at;

/// The ReplicaSet controller.
#[derive(Debug)]
pub struct ReplicaSets {
    client: Client,
}

impl ReplicaSets {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The order surplus Pods go in: unscheduled, then not ready, then newest.
fn removal_order(pod: &Value) -> (bool, bool, std::cmp::Reverse<String>) {
    (
        !text_at(pod, "/spec/nodeName").is_empty(),
        ready(pod),
        std::cmp::Reverse(text_at(pod, "/metadata/creationTimestamp").to_owned()),
    )
}

impl Reconciler for ReplicaSets {
    fn primary(&self) -> Kind {
        kinds::REPLICASET
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(rs) = self.client.live(kinds::REPLICASET, key) else {
            return Ok(Next::Done);
        };
        let ns = key.namespace.as_deref();
        let (mut pods, stopped): (Vec<_>, Vec<_>) = owned(self.client.store(), &rs, kinds::POD)
            .into_iter()
            .partition(|p| active(p));
        let terminating = stopped
            .iter()
            .filter(|p| p.pointer("/metadata/deletionTimestamp").is_some())
            .count();
        let wanted = usize::try_from(replicas(&rs)).unwrap_or(0);
        if pods.len() < wanted {
            let mut pod = from_template(
                kinds::REPLICASET,
                &rs,
                "/spec/template",
                &json!({}),
                &json!({}),
            );
            pod["metadata"]["generateName"] = format!("{}-", key.name).into();
            for _ in pods.len()..wanted.min(pods.len() + BURST) {
                self.client.create(kinds::POD, ns, pod.clone()).await?;
            }
        } else if pods.len() > wanted {
            pods.sort_by_key(|p| removal_order(p));
            for pod in &pods[..pods.len() - wanted] {
                self.client.delete_object(kinds::POD, pod).await?;
            }
            pods.drain(..pods.len() - wanted);
        }
        let count = pods.len();
        let ready = pods.iter().filter(|p| ready(p)).count();
        let status = json!({"replicas": count, "fullyLabeledReplicas": count, "readyReplicas": ready,
                            "availableReplicas": ready, "terminatingReplicas": terminating,
                            "observedGeneration": generation(&rs)});
        self.client
            .write_status(kinds::REPLICASET, &rs, status)
            .await?;
        Ok(Next::Done)
    }
}
