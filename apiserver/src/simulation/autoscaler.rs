//! The horizontal pod autoscaler controller, as far as a cluster without a
//! metrics API takes a real one (`pkg/controller/podautoscaler`): `dev`
//! serves no `metrics.k8s.io`, so no autoscaler scales on a metric, and
//! each says why in its conditions, in the real controller's words.
//!
//! - A target it cannot find: `AbleToScale` `False`/`FailedGetScale`.
//! - A target found: `AbleToScale` `True`/`SucceededGetScale`, then
//!   - at zero replicas (`minReplicas` above zero): `ScalingActive`
//!     `False`/`ScalingDisabled`;
//!   - outside `minReplicas..=maxReplicas`: the target scaled to the bound
//!     through its `scale` subresource, `AbleToScale`
//!     `True`/`SucceededRescale`, `ScaledToZero` `False`, `lastScaleTime`
//!     set;
//!   - within them: the first metric cannot be read, `ScalingActive`
//!     `False` with the reason and message a real controller gives when the
//!     metrics API is not served, and `currentReplicas` reported.
//!
//! Each autoscaler is looked at again every 15 s (the real sync period); a
//! status already so is not written again.

use std::time::Duration;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::count_at;
use super::reconcile::{Next, Reconciler};
use crate::objects::text_at;

/// How often each autoscaler is looked at.
const SYNC_PERIOD: Duration = Duration::from_secs(15);

/// The horizontal pod autoscaler controller.
#[derive(Debug)]
pub struct Autoscalers {
    client: Client,
}

impl Autoscalers {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The scalable types a target may name.
const SCALABLE: [Kind; 3] = [kinds::DEPLOYMENT, kinds::REPLICASET, kinds::STATEFULSET];

/// The target's type and object, or why it cannot be had (the message of
/// a `FailedGetScale`).
fn target(client: &Client, hpa: &Value) -> Result<(Kind, std::sync::Arc<Value>), String> {
    let version = text_at(hpa, "/spec/scaleTargetRef/apiVersion");
    let kind = text_at(hpa, "/spec/scaleTargetRef/kind");
    let name = text_at(hpa, "/spec/scaleTargetRef/name");
    let group = match version.split('/').collect::<Vec<_>>()[..] {
        [_] => "",
        [group, _] => group,
        _ => return Err(format!("unexpected GroupVersion string: {version}")),
    };
    let Some(found) = SCALABLE.iter().find(|k| k.group == group && k.kind == kind) else {
        return Err(format!("no matches for kind {kind:?} in group {group:?}"));
    };
    let ns = text_at(hpa, "/metadata/namespace");
    client
        .store()
        .get(&found.key(), &ObjectKey::namespaced(ns, name))
        .map(|object| (*found, object))
        .ok_or_else(|| format!("{}.{} {name:?} not found", found.plural, found.group))
}

/// `conditions` with the autoscaler condition `kind` set as the real
/// controller's `setCondition` sets it: its transition time changed only
/// with its status.
fn set(conditions: &mut Value, kind: &str, status: bool, reason: &str, message: &str) {
    let status = if status { "True" } else { "False" };
    let next = json!({"type": kind, "status": status, "reason": reason, "message": message});
    *conditions = crate::objects::set_status_condition(conditions, next);
}

/// The reason and message of the first metric that cannot be read, with
/// no metrics API served.
fn unreadable(metric: &Value) -> (&'static str, String) {
    const RESOURCE_API: &str = "unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)";
    let resource = |source: &str| {
        let name = text_at(metric, &format!("/{source}/name"));
        let measure = if text_at(metric, &format!("/{source}/target/type")) == "Utilization" {
            "utilization"
        } else {
            "usage"
        };
        format!(
            "failed to get {name} {measure}: unable to get metrics for resource {name}: {RESOURCE_API}"
        )
    };
    let (reason, cause) = match text_at(metric, "/type") {
        "Resource" => ("FailedGetResourceMetric", resource("resource")),
        "ContainerResource" => ("FailedGetContainerResourceMetric", resource("containerResource")),
        "Pods" => ("FailedGetPodsMetric", "unable to get metric: no custom metrics API (custom.metrics.k8s.io) registered".to_owned()),
        "Object" => ("FailedGetObjectMetric", "unable to get metric: no custom metrics API (custom.metrics.k8s.io) registered".to_owned()),
        _ => ("FailedGetExternalMetric", "unable to get external metric: no external metrics API (external.metrics.k8s.io) registered".to_owned()),
    };
    (
        reason,
        format!("the HPA was unable to compute the replica count: {cause}"),
    )
}

impl Reconciler for Autoscalers {
    fn primary(&self) -> Kind {
        kinds::HPA
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(hpa) = self.client.live(kinds::HPA, key) else {
            return Ok(Next::Done);
        };
        let mut status = hpa.get("status").cloned().unwrap_or_else(|| json!({}));
        let mut conditions = status["conditions"].take();
        match target(&self.client, &hpa) {
            Err(cause) => set(
                &mut conditions,
                "AbleToScale",
                false,
                "FailedGetScale",
                &format!(
                    "the HPA controller was unable to get the target's current scale: {cause}"
                ),
            ),
            Ok((kind, object)) => {
                set(
                    &mut conditions,
                    "AbleToScale",
                    true,
                    "SucceededGetScale",
                    "the HPA controller was able to get the target's current scale",
                );
                let current = count_at(&object, "/spec/replicas", 1);
                let min = count_at(&hpa, "/spec/minReplicas", 1);
                let max = count_at(&hpa, "/spec/maxReplicas", 1);
                status["currentReplicas"] = current.into();
                // Once the target's scale is read, the status is written
                // whole, with the generation it saw (`HPAGeneration`, on in
                // v1.37) and no metric it did not read.
                status["observedGeneration"] = super::pods::generation(&hpa).into();
                status["currentMetrics"] = Value::Null;
                if current == 0 && min != 0 {
                    set(
                        &mut conditions,
                        "ScalingActive",
                        false,
                        "ScalingDisabled",
                        "scaling is disabled since the replica count of the target is zero",
                    );
                    status["desiredReplicas"] = 0.into();
                } else if current < min || current > max {
                    let desired = current.clamp(min, max);
                    self.client
                        .patch(
                            kind,
                            key.namespace.as_deref(),
                            text_at(&object, "/metadata/name"),
                            Some("scale"),
                            &json!({"spec": {"replicas": desired}}),
                        )
                        .await?;
                    set(
                        &mut conditions,
                        "AbleToScale",
                        true,
                        "SucceededRescale",
                        &format!(
                            "the HPA controller was able to update the target scale to {desired}"
                        ),
                    );
                    // `HPAScaleToZero` is on in v1.37: a rescale says
                    // whether it went to zero, which a bound never does.
                    set(
                        &mut conditions,
                        "ScaledToZero",
                        false,
                        "NotScaledToZero",
                        "the HPA controller did not scale the workload to zero",
                    );
                    status["desiredReplicas"] = desired.into();
                    status["lastScaleTime"] = crate::objects::now().into();
                } else {
                    let metrics = hpa.pointer("/spec/metrics").and_then(Value::as_array);
                    if let Some(first) = metrics.and_then(|m| m.first()) {
                        let (reason, message) = unreadable(first);
                        set(&mut conditions, "ScalingActive", false, reason, &message);
                        status["currentMetrics"] =
                            Value::Array(vec![json!({"type": ""}); metrics.map_or(0, Vec::len)]);
                    }
                }
            }
        }
        status["conditions"] = conditions;
        self.client.write_status(kinds::HPA, &hpa, status).await?;
        Ok(Next::After(SYNC_PERIOD))
    }
}
