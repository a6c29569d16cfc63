//! What the workload controllers share: owner references, Pods made from a
//! template, and how a Pod counts (active, ready, finished).

use std::sync::Arc;

use serde_json::{Value, json};

use super::client::Kind;
use crate::objects::text_at;
use crate::store::Store;

/// The most Pods a controller creates in one reconcile, as the real
/// controllers' burst: the created Pods' own events bring the owner back
/// for the rest, so one huge `replicas` cannot hold a controller.
pub const BURST: usize = 500;

/// The controlling owner reference to `owner`, of `kind`.
pub fn owner_ref(kind: Kind, owner: &Value) -> Value {
    json!([{"apiVersion": kind.api_version(), "kind": kind.kind,
            "name": text_at(owner, "/metadata/name"), "uid": text_at(owner, "/metadata/uid"),
            "controller": true, "blockOwnerDeletion": true}])
}

/// The objects of `kind` that `owner` controls (by the owner index).
pub fn owned(store: &Store, owner: &Value, kind: Kind) -> Vec<Arc<Value>> {
    let uid = text_at(owner, "/metadata/uid");
    store
        .dependents(uid)
        .into_iter()
        .filter(|(resource, _)| *resource == kind.key())
        .map(|(_, object)| object)
        .filter(|o| {
            o.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|r| r["uid"] == uid && r["controller"] == true)
        })
        .collect()
}

/// Adopts the orphans of `kind` in `owner`'s namespace that its
/// `spec.selector` selects, as a real controller's `ControllerRefManager`
/// claims them: each gets `owner` as its controller, beside the owners it
/// has. An object being deleted, or with a controller, is left alone; an
/// empty selector adopts nothing.
///
/// # Errors
/// What the server refused.
pub async fn adopt(
    client: &super::client::Client,
    owner_kind: Kind,
    owner: &Value,
    kind: Kind,
) -> Result<(), super::client::ClientError> {
    let Some(selector) = owner
        .pointer("/spec/selector")
        .filter(|s| s.as_object().is_some_and(|s| !s.is_empty()))
    else {
        return Ok(());
    };
    let ns = text_at(owner, "/metadata/namespace");
    let orphans: Vec<Arc<Value>> = client
        .store()
        .objects(&kind.key(), Some(ns))
        .into_iter()
        .filter(|o| o.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|o| !has_controller(o))
        .filter(|o| {
            crate::objects::selects(
                selector,
                o.pointer("/metadata/labels").and_then(Value::as_object),
            )
        })
        .collect();
    for orphan in orphans {
        let mut refs = orphan
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        refs.extend(
            owner_ref(owner_kind, owner)
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        let patch = json!({"metadata": {"ownerReferences": refs, "uid": text_at(&orphan, "/metadata/uid")}});
        client.patch_object(kind, &orphan, &patch).await?;
    }
    Ok(())
}

/// Whether `object` has a controlling owner.
fn has_controller(object: &Value) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|r| r["controller"] == true)
}

/// An object from `owner`'s template at `pointer` (`/spec/template`, a
/// CronJob's `/spec/jobTemplate`), controlled by it, with `labels` and
/// `annotations` added.
pub fn from_template(
    kind: Kind,
    owner: &Value,
    pointer: &str,
    labels: &Value,
    annotations: &Value,
) -> Value {
    let template = owner.pointer(pointer).cloned().unwrap_or_else(|| json!({}));
    let mut metadata = template
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (field, extra) in [("labels", labels), ("annotations", annotations)] {
        if let Some(extra) = extra.as_object().filter(|e| !e.is_empty()) {
            let mut map = metadata[field].as_object().cloned().unwrap_or_default();
            for (k, v) in extra {
                map.insert(k.clone(), v.clone());
            }
            metadata[field] = Value::Object(map);
        }
    }
    metadata["ownerReferences"] = owner_ref(kind, owner);
    json!({"metadata": metadata, "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))})
}

/// Whether a Pod counts: not being deleted, not finished.
pub fn active(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && !matches!(text_at(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// Whether a Pod's `Ready` condition is true.
pub fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// `spec.replicas`, 1 when absent.
pub fn replicas(object: &Value) -> i64 {
    count_at(object, "/spec/replicas", 1)
}

/// The count at `pointer` (`default` when absent), within `0..=i32::MAX` as
/// the API's int32 fields are: whatever a user wrote there, the
/// controllers' sums cannot overflow.
pub fn count_at(object: &Value, pointer: &str, default: i64) -> i64 {
    object
        .pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
        .clamp(0, i64::from(i32::MAX))
}

/// `metadata.generation`.
pub fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// FNV-32a of `value`'s JSON, as the safe string Kubernetes names
/// template hashes with (`5d8f7b9c4d`: no vowels, no look-alikes).
pub fn template_hash(value: &Value, collisions: i64) -> String {
    /// JSON with every object's keys in order: equal values, equal text.
    fn canonical(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let fields: Vec<String> = keys
                    .into_iter()
                    .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(canonical).collect();
                format!("[{}]", items.join(","))
            }
            other => other.to_string(),
        }
    }
    let mut hash: u32 = 0x811c_9dc5;
    let suffix = if collisions > 0 {
        collisions.to_string()
    } else {
        String::new()
    };
    let text = format!("{}{suffix}", canonical(value));
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

/// A condition as the workload controllers write them.
pub fn condition(kind: &str, ok: bool, reason: &str, message: &str) -> Value {
    let time = crate::objects::now();
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason,
           "message": message, "lastUpdateTime": time, "lastTransitionTime": time})
}

/// `conditions` with `next` in place of the one of its type; the
/// transition time kept when the status did not change.
pub fn set_condition(conditions: &Value, mut next: Value) -> Value {
    let mut all: Vec<Value> = conditions.as_array().cloned().unwrap_or_default();
    match all.iter_mut().find(|c| c["type"] == next["type"]) {
        Some(existing) => {
            if existing["status"] == next["status"] {
                next["lastTransitionTime"] = existing["lastTransitionTime"].clone();
                if existing["reason"] == next["reason"] {
                    next["lastUpdateTime"] = existing["lastUpdateTime"].clone();
                }
            }
            *existing = next;
        }
        None => all.push(next),
    }
    Value::Array(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hashes_should_be_stable_safe_and_change_with_the_template() {
        let a = template_hash(&json!({"spec": {"image": "nginx:1"}}), 0);
        assert_eq!(a, template_hash(&json!({"spec": {"image": "nginx:1"}}), 0));
        assert_ne!(a, template_hash(&json!({"spec": {"image": "nginx:2"}}), 0));
        assert_ne!(a, template_hash(&json!({"spec": {"image": "nginx:1"}}), 1));
        let (x, y) = (json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1}));
        assert_eq!(
            template_hash(&x, 0),
            template_hash(&y, 0),
            "key order does not count"
        );
        assert!(
            a.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{a}"
        );
    }

    #[test]
    fn a_condition_should_keep_its_transition_time_while_its_status_holds() {
        let old = json!([{"type": "Available", "status": "True", "reason": "R", "lastTransitionTime": "t0", "lastUpdateTime": "u0"}]);
        let same = set_condition(&old, condition("Available", true, "R", "m"));
        assert_eq!(same[0]["lastTransitionTime"], "t0");
        let flipped = set_condition(&old, condition("Available", false, "R", "m"));
        assert_ne!(flipped[0]["lastTransitionTime"], "t0");
        assert_eq!(
            set_condition(&old, condition("Progressing", true, "R", "m"))
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }
}
