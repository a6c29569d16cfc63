//! The EndpointSlice controller: for each Service with a selector, one
//! slice (`<svc>-xxxxx`, labelled `kubernetes.io/service-name` and managed
//! by `endpointslice-controller.k8s.io`) listing the selected Pods that
//! have an address, `ready` as the real controller computes it
//! (`publishNotReadyAddresses`, or Ready and not terminating), with the
//! Service's ports resolved to the Pods' (a named `targetPort` through the
//! containers' ports).

use std::sync::Arc;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::pods::{owned, ready};
use super::reconcile::{Next, Reconciler};
use crate::objects::text_at;
use crate::store::{Event, Store};

/// The controller named in `endpointslice.kubernetes.io/managed-by`.
pub const MANAGER: &str = "endpointslice-controller.k8s.io";

/// The EndpointSlice controller.
#[derive(Debug)]
pub struct EndpointSlices {
    client: Client,
}

impl EndpointSlices {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// Whether `selector` (a Service's `spec.selector`) selects `pod`.
fn selects(selector: &Value, pod: &Value) -> bool {
    selector.as_object().is_some_and(|s| {
        !s.is_empty()
            && s.iter()
                .all(|(k, v)| pod.pointer("/metadata/labels").and_then(|l| l.get(k)) == Some(v))
    })
}

/// A Service port as the Pods serve it.
fn port_of(port: &Value, pods: &[&Arc<Value>]) -> Value {
    let number = match port.get("targetPort") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(name)) => pods.iter().find_map(|p| {
            p.pointer("/spec/containers")?
                .as_array()?
                .iter()
                .find_map(|c| {
                    c.get("ports")?
                        .as_array()?
                        .iter()
                        .find(|cp| cp["name"] == name.as_str())?["containerPort"]
                        .as_i64()
                })
        }),
        _ => None,
    }
    .or_else(|| port.get("port").and_then(Value::as_i64));
    json!({"name": port.get("name").cloned().unwrap_or_else(|| "".into()), "port": number,
           "protocol": port.get("protocol").cloned().unwrap_or_else(|| "TCP".into())})
}

impl Reconciler for EndpointSlices {
    fn primary(&self) -> Kind {
        kinds::SERVICE
    }

    /// A Pod concerns the Services that select it (before or after).
    fn keys(&self, store: &Store, event: &Event) -> Vec<ObjectKey> {
        if event.resource == kinds::POD.key() {
            let ns = text_at(&event.object, "/metadata/namespace");
            return store
                .objects(&kinds::SERVICE.key(), Some(ns))
                .iter()
                .filter(|s| {
                    let selector = s.pointer("/spec/selector").unwrap_or(&Value::Null);
                    selects(selector, &event.object)
                        || event
                            .previous
                            .as_deref()
                            .is_some_and(|p| selects(selector, p))
                })
                .filter_map(|s| ObjectKey::of(s))
                .collect();
        }
        super::reconcile::own_or_owner(kinds::SERVICE, event)
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let store = self.client.store();
        let Some(service) = store.get(&kinds::SERVICE.key(), key) else {
            return Ok(Next::Done);
        };
        let selector = service
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or(Value::Null);
        if selector.as_object().is_none_or(|s| s.is_empty()) {
            return Ok(Next::Done);
        }
        let ns = key.namespace.as_deref().unwrap_or("");
        let pods = store.objects(&kinds::POD.key(), Some(ns));
        let mut chosen: Vec<&Arc<Value>> = pods
            .iter()
            .filter(|p| selects(&selector, p) && !text_at(p, "/status/podIP").is_empty())
            .filter(|p| !matches!(text_at(p, "/status/phase"), "Succeeded" | "Failed"))
            .collect();
        chosen.sort_by_key(|p| text_at(p, "/metadata/name").to_owned());
        let publish = service.pointer("/spec/publishNotReadyAddresses") == Some(&Value::Bool(true));
        let endpoints: Vec<Value> = chosen
            .iter()
            .map(|p| {
                let terminating = p.pointer("/metadata/deletionTimestamp").is_some();
                json!({"addresses": [text_at(p, "/status/podIP")],
                       "conditions": {"ready": publish || (ready(p) && !terminating), "serving": ready(p), "terminating": terminating},
                       "nodeName": text_at(p, "/spec/nodeName"),
                       "targetRef": {"kind": "Pod", "namespace": ns, "name": text_at(p, "/metadata/name"),
                                     "uid": text_at(p, "/metadata/uid")}})
            })
            .collect();
        let ports: Vec<Value> = service
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| port_of(p, &chosen))
            .collect();
        let slices = owned(store, &service, kinds::ENDPOINTSLICE);
        match slices.first() {
            None => {
                let slice = json!({"metadata": {"generateName": format!("{}-", key.name),
                    "labels": {"kubernetes.io/service-name": key.name, "endpointslice.kubernetes.io/managed-by": MANAGER},
                    "ownerReferences": super::pods::owner_ref(kinds::SERVICE, &service)},
                    "addressType": "IPv4", "endpoints": endpoints, "ports": ports});
                self.client
                    .create(kinds::ENDPOINTSLICE, Some(ns), slice)
                    .await?;
            }
            Some(slice)
                if slice["endpoints"] != Value::Array(endpoints.clone())
                    || slice["ports"] != Value::Array(ports.clone()) =>
            {
                let patch = json!({"endpoints": endpoints, "ports": ports});
                self.client
                    .patch(
                        kinds::ENDPOINTSLICE,
                        Some(ns),
                        text_at(slice, "/metadata/name"),
                        None,
                        &patch,
                    )
                    .await?;
            }
            Some(_) => {}
        }
        Ok(Next::Done)
    }
}
