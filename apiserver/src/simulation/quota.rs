//! The resource quota controller: every ResourceQuota's status, as
//! kube-controller-manager's writes it (`pkg/controller/resourcequota`):
//! `hard` is the spec's, `used` what the namespace holds of each resource
//! `hard` names that is counted in objects.
//!
//! Counted: `pods` and `count/pods` (Pods not finished, nor past their
//! deletion's grace), `services`, `services.loadbalancers`,
//! `services.nodeports` (node ports allocated), `configmaps`, `secrets`,
//! `persistentvolumeclaims`, `replicationcontrollers`, `resourcequotas`,
//! and `count/<resource>[.<group>]` of any type. Compute and storage
//! amounts (`requests.cpu`, `limits.memory`, `requests.storage`...) are not
//! summed: `dev` runs no container, so they are left out of `used`. Quotas
//! are reported, not enforced: no admission refuses a write over one.

use kubewasm_core::ObjectKey;
use serde_json::{Map, Value, json};

use super::client::{Client, ClientError, Kind, kinds};
use super::reconcile::{Next, Reconciler};
use crate::objects::text_at;
use crate::store::{Event, ResourceKey, Store};

/// The resource quota controller.
#[derive(Debug)]
pub struct Quotas {
    client: Client,
}

impl Quotas {
    /// A controller writing through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// Whether a Pod counts against `pods`: not finished, and not past the
/// grace of its deletion.
fn counted_pod(pod: &Value) -> bool {
    if matches!(text_at(pod, "/status/phase"), "Succeeded" | "Failed") {
        return false;
    }
    let deleted = text_at(pod, "/metadata/deletionTimestamp")
        .parse::<jiff::Timestamp>()
        .ok();
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    match (deleted, grace) {
        (Some(at), Some(grace)) => at.as_second() + grace >= jiff::Timestamp::now().as_second(),
        _ => true,
    }
}

/// What namespace `ns` holds of `resource` (a name of `hard`), or `None`
/// for an amount that is not counted in objects.
fn usage(store: &Store, ns: &str, resource: &str) -> Option<usize> {
    let objects =
        |group: &str, plural: &str| store.objects(&ResourceKey::new(group, plural), Some(ns));
    let services = || objects("", "services");
    Some(match resource {
        "pods" | "count/pods" => objects("", "pods")
            .iter()
            .filter(|p| counted_pod(p))
            .count(),
        "services.loadbalancers" => services()
            .iter()
            .filter(|s| text_at(s, "/spec/type") == "LoadBalancer")
            .count(),
        "services.nodeports" => services()
            .iter()
            .filter(|s| matches!(text_at(s, "/spec/type"), "NodePort" | "LoadBalancer"))
            .flat_map(|s| {
                s.pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|p| p.get("nodePort").is_some_and(|n| !n.is_null()))
            .count(),
        "services"
        | "configmaps"
        | "secrets"
        | "persistentvolumeclaims"
        | "replicationcontrollers"
        | "resourcequotas" => objects("", resource).len(),
        _ => {
            let counted = resource.strip_prefix("count/")?;
            let (plural, group) = counted.split_once('.').unwrap_or((counted, ""));
            objects(group, plural).len()
        }
    })
}

/// A merge patch making the map at `current` into `wanted`: `wanted`, with
/// a null for each key no longer there.
fn replacing(current: Option<&Value>, wanted: Map<String, Value>) -> Value {
    if wanted.is_empty() {
        // An empty list of resources is left out, as Go's `omitempty` does.
        return Value::Null;
    }
    let mut patch = wanted;
    for key in current
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        patch.entry(key.clone()).or_insert(Value::Null);
    }
    Value::Object(patch)
}

impl Reconciler for Quotas {
    fn primary(&self) -> Kind {
        kinds::RESOURCEQUOTA
    }

    /// Any object's change concerns the quotas of its namespace.
    fn keys(&self, store: &Store, event: &Event) -> Vec<ObjectKey> {
        let ns = text_at(&event.object, "/metadata/namespace");
        if ns.is_empty() {
            return Vec::new();
        }
        store
            .objects(&kinds::RESOURCEQUOTA.key(), Some(ns))
            .iter()
            .filter_map(|q| ObjectKey::of(q))
            .collect()
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Next, ClientError> {
        let Some(quota) = self.client.live(kinds::RESOURCEQUOTA, key) else {
            return Ok(Next::Done);
        };
        let ns = key.namespace.as_deref().unwrap_or("");
        let hard = quota
            .pointer("/spec/hard")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let used: Map<String, Value> = hard
            .keys()
            .filter_map(|resource| {
                let count = usage(self.client.store(), ns, resource)?;
                Some((resource.clone(), count.to_string().into()))
            })
            .collect();
        let status = json!({
            "hard": replacing(quota.pointer("/status/hard"), hard),
            "used": replacing(quota.pointer("/status/used"), used),
        });
        self.client
            .write_status(kinds::RESOURCEQUOTA, &quota, status)
            .await?;
        Ok(Next::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &Store, group: &str, plural: &str, name: &str, object: Value) {
        let mut object = object;
        object["metadata"] = json!({"name": name, "namespace": "team"});
        store
            .create(
                &ResourceKey::new(group, plural),
                &ObjectKey::namespaced("team", name),
                object,
            )
            .expect("created");
    }

    #[test]
    fn usage_should_count_objects_as_the_quota_controller_does() {
        let store = Store::default();
        put(
            &store,
            "",
            "pods",
            "running",
            json!({"status": {"phase": "Running"}}),
        );
        put(
            &store,
            "",
            "pods",
            "done",
            json!({"status": {"phase": "Succeeded"}}),
        );
        put(
            &store,
            "",
            "services",
            "lb",
            json!({"spec": {"type": "LoadBalancer",
            "ports": [{"port": 80, "nodePort": 30001}, {"port": 443, "nodePort": 30002}]}}),
        );
        put(
            &store,
            "",
            "services",
            "plain",
            json!({"spec": {"type": "ClusterIP"}}),
        );
        put(&store, "apps", "deployments", "web", json!({}));
        let used = |resource: &str| usage(&store, "team", resource);
        assert_eq!(used("pods"), Some(1), "a finished Pod does not count");
        assert_eq!(used("count/pods"), Some(1));
        assert_eq!(used("services"), Some(2));
        assert_eq!(used("services.loadbalancers"), Some(1));
        assert_eq!(used("services.nodeports"), Some(2));
        assert_eq!(used("count/deployments.apps"), Some(1));
        assert_eq!(used("configmaps"), Some(0));
        assert_eq!(used("requests.cpu"), None, "an amount is not counted");
    }

    #[test]
    fn a_resource_no_longer_listed_should_be_patched_away() {
        let current = json!({"pods": "1", "secrets": "2"});
        let wanted: Map<String, Value> = [("pods".to_owned(), json!("3"))].into_iter().collect();
        assert_eq!(
            replacing(Some(&current), wanted),
            json!({"pods": "3", "secrets": null})
        );
        assert_eq!(replacing(Some(&current), Map::new()), Value::Null);
    }
}
