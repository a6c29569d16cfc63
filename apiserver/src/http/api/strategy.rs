//! What a built-in type's registry strategy does to a write, beyond
//! defaults (`crate::schema::defaults`): a Namespace's finalizer and a
//! Job's selector on create, a Namespace's finalizers and a Service's
//! allocations on update, a PersistentVolume's phase transition time, what a status write keeps of
//! the object.

use kubewasm_types::info::ResourceInfo;
use serde_json::{Value, json};

use crate::objects::metadata_mut;

/// Adds `kubernetes` to a Namespace's `spec.finalizers` unless it is there.
pub(super) fn kubernetes_finalizer(namespace: &mut Value) {
    let Some(map) = namespace.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        let finalizers = spec.entry("finalizers").or_insert_with(|| json!([]));
        if !finalizers.is_array() {
            *finalizers = json!([]);
        }
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f == "kubernetes")
        {
            list.push("kubernetes".into());
        }
    }
}

/// What a PersistentVolume's strategy stamps: the time its phase last
/// changed, at its create (`Pending`) and at a status write that changes
/// the phase without saying when.
pub(super) fn phase_transition(info: &ResourceInfo, current: Option<&Value>, desired: &mut Value) {
    if !(info.group.is_empty() && info.plural == "persistentvolumes") {
        return;
    }
    let phase = |v: &Value| v.pointer("/status/phase").cloned();
    let stamp = |v: &Value| v.pointer("/status/lastPhaseTransitionTime").cloned();
    let changed = match current {
        None => true,
        Some(old) => phase(old) != phase(desired) && stamp(old) == stamp(desired),
    };
    if changed && let Some(status) = desired.get_mut("status").and_then(Value::as_object_mut) {
        status.entry("phase").or_insert_with(|| "Pending".into());
        status.insert(
            "lastPhaseTransitionTime".into(),
            crate::objects::now().into(),
        );
    }
}

/// What a Service's update keeps of what was allocated to it when the
/// writer leaves it out (the real registry's `patchAllocatedValues`): its
/// cluster IPs and their families, each port's node port (matched by port and protocol), its
/// health check node port.
pub(super) fn keep_allocated(current: &Value, desired: &mut Value) {
    let Some(old) = current.get("spec").and_then(Value::as_object) else {
        return;
    };
    let Some(new) = desired.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let unset = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        _ => false,
    };
    for field in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "healthCheckNodePort",
    ] {
        if unset(new.get(field))
            && let Some(value) = old.get(field).filter(|v| !unset(Some(v)))
        {
            new.insert(field.to_owned(), value.clone());
        }
    }
    let key = |p: &Value| {
        (
            p.get("port").cloned(),
            p.get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP")
                .to_owned(),
        )
    };
    let old_ports = old.get("ports").and_then(Value::as_array);
    if let (Some(old_ports), Some(Value::Array(ports))) = (old_ports, new.get_mut("ports")) {
        for port in ports.iter_mut().filter(|p| unset(p.get("nodePort"))) {
            if let Some(node_port) = old_ports
                .iter()
                .find(|o| key(o) == key(port))
                .and_then(|o| o.get("nodePort"))
                .filter(|v| !unset(Some(v)))
            {
                port["nodePort"] = node_port.clone();
            }
        }
    }
}

/// What a Namespace's update keeps of it: its `spec.finalizers`, which
/// only its `finalize` subresource changes.
pub(super) fn keep_finalizers(current: &Value, desired: &mut Value) {
    let finalizers = current.pointer("/spec/finalizers").cloned();
    let Some(map) = desired.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        match finalizers {
            Some(list) => spec.insert("finalizers".into(), list),
            None => spec.shift_remove("finalizers"),
        };
    }
}

/// What the Job strategy gives a Job created without `manualSelector`: its
/// template labelled with its name and uid (the legacy labels too), and a
/// selector of its uid, so that its Pods are its alone.
pub(super) fn job_selector(job: &mut Value, name: &str) {
    if job.pointer("/spec/manualSelector") == Some(&Value::Bool(true)) {
        return;
    }
    let uid = job.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
    let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = spec
        .entry("template")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(|t| t.entry("metadata").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .map(|m| m.entry("labels").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(labels) = labels {
        for (label, value) in [
            ("batch.kubernetes.io/controller-uid", &uid),
            ("batch.kubernetes.io/job-name", &Value::from(name)),
            ("controller-uid", &uid),
            ("job-name", &Value::from(name)),
        ] {
            labels.entry(label).or_insert_with(|| value.clone());
        }
    }
    let selector = spec
        .entry("selector")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(|s| s.entry("matchLabels").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(selector) = selector {
        selector
            .entry("batch.kubernetes.io/controller-uid")
            .or_insert(uid);
    }
}

/// What a built-in type's status strategy keeps of `current` in a status
/// write's `desired`: everything but metadata and status (the spec), a
/// Deployment's labels, a Pod's owner references.
pub(super) fn status_strategy(info: &ResourceInfo, current: &Value, desired: &mut Value) {
    let (Value::Object(old), Value::Object(new)) = (current, &mut *desired) else {
        return;
    };
    new.retain(|field, _| {
        matches!(field.as_str(), "metadata" | "status") || old.contains_key(field)
    });
    for (field, value) in old {
        if !matches!(field.as_str(), "metadata" | "status") {
            new.insert(field.clone(), value.clone());
        }
    }
    let kept = match (info.group.as_str(), info.kind.as_str()) {
        ("apps", "Deployment") => "labels",
        ("", "Pod") => "ownerReferences",
        _ => return,
    };
    let before = current.pointer(&format!("/metadata/{kept}")).cloned();
    if let Some(metadata) = metadata_mut(desired) {
        match before {
            Some(value) => metadata.insert(kept.to_owned(), value),
            None => metadata.shift_remove(kept),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_update_should_keep_what_was_allocated_unless_it_says_otherwise() {
        let current = json!({"spec": {"clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7"],
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080},
                      {"port": 53, "protocol": "UDP", "nodePort": 30053}]}});
        let mut desired =
            json!({"spec": {"ports": [{"port": 80}, {"port": 53, "nodePort": 31000}]}});
        keep_allocated(&current, &mut desired);
        assert_eq!(desired["spec"]["clusterIP"], "10.96.0.7");
        assert_eq!(desired["spec"]["clusterIPs"], json!(["10.96.0.7"]));
        assert_eq!(desired["spec"]["ports"][0]["nodePort"], 30080);
        assert_eq!(
            desired["spec"]["ports"][1]["nodePort"], 31000,
            "its own kept"
        );
    }

    #[test]
    fn a_volume_should_be_stamped_when_its_phase_changes() {
        let volumes = kubewasm_types::registry::Registry::builtin()
            .get("", "v1", "persistentvolumes")
            .cloned()
            .expect("served");
        let mut created = json!({"status": {}});
        phase_transition(&volumes, None, &mut created);
        assert_eq!(created["status"]["phase"], "Pending");
        assert!(created["status"]["lastPhaseTransitionTime"].is_string());
        let old = json!({"status": {"phase": "Pending", "lastPhaseTransitionTime": "2000-01-01T00:00:00Z"}});
        let mut same = old.clone();
        phase_transition(&volumes, Some(&old), &mut same);
        assert_eq!(same, old, "no change of phase, no stamp");
        let mut moved = json!({"status": {"phase": "Available", "lastPhaseTransitionTime": "2000-01-01T00:00:00Z"}});
        phase_transition(&volumes, Some(&old), &mut moved);
        assert_ne!(
            moved["status"]["lastPhaseTransitionTime"],
            "2000-01-01T00:00:00Z"
        );
    }
}
