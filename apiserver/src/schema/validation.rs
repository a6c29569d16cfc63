//! The validation a real kube-apiserver runs on a built-in object beyond
//! its name and schema: the fields its type requires and the rules between
//! them, worded and ordered as the real server's (`pkg/apis/*/validation`,
//! Kubernetes 1.37), so that one 422 lists every problem a real one lists.
//!
//! Each problem is a field error as [`ApiError::invalid_fields`] reads it
//! (`<field>: <Reason>[: <detail>]`). What is here is what the difference
//! tool (`make difference`) has compared with a real server; a type not
//! named is checked for its name and schema only.
//!
//! [`ApiError::invalid_fields`]: crate::http::error::ApiError::invalid_fields

use kubewasm_types::info::ResourceInfo;
use serde_json::Value;

/// A job template's restart policies.
const JOB_RESTART: &str = "\"OnFailure\", \"Never\"";

/// The problems of `object` (of `info`'s type, in its served version, in
/// `namespace`), with `name` (the name's problems) where the type's
/// validation reports them.
pub fn problems(
    info: &ResourceInfo,
    object: &Value,
    namespace: Option<&str>,
    name: Vec<String>,
) -> Vec<String> {
    if info.custom {
        return name;
    }
    let look = Look(object);
    let mut found = Vec::new();
    match (info.group.as_str(), info.plural.as_str()) {
        ("events.k8s.io", "events") => {
            event_namespace(&look, namespace.unwrap_or_default(), &mut found);
            found.extend(name);
            look.required("/eventTime", "eventTime", &mut found);
            let kind = look.text("/type");
            if kind != "Normal" && kind != "Warning" {
                found.push(format!(
                    "type: Invalid value: \"\": has invalid value: {kind}"
                ));
            }
            return found;
        }
        ("", "pods") => look.required("/spec/containers", "spec.containers", &mut found),
        ("", "resourcequotas") => {
            for key in look
                .0
                .pointer("/spec/hard")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, _)| k)
            {
                found.extend(
                    crate::objects::label_key_problems(key)
                        .into_iter()
                        .map(|why| format!("spec.hard[{key}]: Invalid value: \"{key}\": {why}")),
                );
            }
        }
        ("policy", "poddisruptionbudgets") => {
            let spec = |field: &str| {
                look.0
                    .pointer(&format!("/spec/{field}"))
                    .unwrap_or(&Value::Null)
            };
            if !spec("minAvailable").is_null() && !spec("maxUnavailable").is_null() {
                // Go prints the internal spec, its fields by their Go names.
                let printed = format!(
                    "{{\"MinAvailable\":{},\"Selector\":{},\"MaxUnavailable\":{},\"UnhealthyPodEvictionPolicy\":{}}}",
                    spec("minAvailable"),
                    spec("selector"),
                    spec("maxUnavailable"),
                    spec("unhealthyPodEvictionPolicy")
                );
                found.push(format!(
                    "spec: Invalid value: {printed}: minAvailable and maxUnavailable cannot be both set"
                ));
            }
            for field in ["minAvailable", "maxUnavailable"] {
                if let Some(Value::String(text)) = look.0.pointer(&format!("/spec/{field}"))
                    && !text
                        .strip_suffix('%')
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                {
                    found.push(format!(
                        "spec.{field}: Invalid value: \"{text}\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
                    ));
                }
            }
        }
        ("", "services") => {
            let headless = look.text("/spec/clusterIP") == "None";
            if !headless && look.text("/spec/type") != "ExternalName" {
                look.required("/spec/ports", "spec.ports", &mut found);
            }
        }
        ("", "persistentvolumes") => volume(&look, &mut found),
        ("", "persistentvolumeclaims") => {
            if look.absent("/spec/accessModes") {
                found.push(
                    "spec.accessModes: Required value: at least 1 access mode is required".into(),
                );
            }
            look.required(
                "/spec/resources/requests/storage",
                "spec.resources[storage]",
                &mut found,
            );
        }
        ("apps", "statefulsets" | "deployments" | "replicasets" | "daemonsets") => {
            if let Some(replicas) = look
                .0
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .filter(|r| *r < 0)
            {
                found.push(format!(
                    "spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
                ));
            }
            // A DaemonSet's validation does not ask for a selector (a
            // missing one selects nothing, which the next rule reports).
            if info.plural != "daemonsets" {
                look.required("/spec/selector", "spec.selector", &mut found);
            }
            if !selects(&look) {
                let labels = look.0.pointer("/spec/template/metadata/labels");
                found.push(format!(
                    "spec.template.metadata.labels: Invalid value: {}: `selector` does not match template `labels`",
                    labels.unwrap_or(&Value::Null)
                ));
            }
            look.required(
                "/spec/template/spec/containers",
                "spec.template.spec.containers",
                &mut found,
            );
        }
        ("batch", "jobs") => job_template(&look, "/spec/template", &mut found),
        ("batch", "cronjobs") => {
            job_template(&look, "/spec/jobTemplate/spec/template", &mut found);
            look.required("/spec/schedule", "spec.schedule", &mut found);
        }
        ("rbac.authorization.k8s.io", "rolebindings") => {
            role_ref(&look, &["Role", "ClusterRole"], &mut found);
        }
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            role_ref(&look, &["ClusterRole"], &mut found);
        }
        ("storage.k8s.io", "storageclasses") => {
            look.required("/provisioner", "provisioner", &mut found);
        }
        ("networking.k8s.io", "ingresses")
            if look.absent("/spec/defaultBackend") && look.absent("/spec/rules") =>
        {
            found.push(
                "spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"
                    .into(),
            );
        }
        ("networking.k8s.io", "ingressclasses") => {
            look.required("/spec/controller", "spec.controller", &mut found);
        }
        ("discovery.k8s.io", "endpointslices") => {
            look.required("/addressType", "addressType", &mut found);
        }
        ("node.k8s.io", "runtimeclasses") => look.required("/handler", "handler", &mut found),
        ("autoscaling", "horizontalpodautoscalers") => autoscaler(&look, &mut found),
        _ => {}
    }
    let mut all = name;
    all.extend(found);
    all
}

/// What a Pod's update may change of its spec: its containers' and init
/// containers' images, `activeDeadlineSeconds`, `tolerations` (the real
/// server: additions only), `terminationGracePeriodSeconds` and its
/// scheduling gates; nothing else.
const POD_MUTABLE: [&str; 4] = [
    "activeDeadlineSeconds",
    "tolerations",
    "terminationGracePeriodSeconds",
    "schedulingGates",
];

/// Checks a Pod's update (`current` to `desired`, both as decoded): the
/// refusal of a real server when the spec changes beyond [`POD_MUTABLE`]
/// and images, without the Go diff of the two specs it appends.
///
/// # Errors
/// The field error, as [`problems`] words them.
pub fn pod_update(current: &Value, desired: &Value) -> Result<(), String> {
    let (Some(old), Some(new)) = (current.get("spec"), desired.get("spec")) else {
        return Ok(());
    };
    let comparable = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(map) = spec.as_object_mut() {
            for field in POD_MUTABLE {
                map.shift_remove(field);
            }
            for list in ["containers", "initContainers"] {
                for container in map
                    .get_mut(list)
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_object_mut)
                {
                    container.shift_remove("image");
                }
            }
        }
        spec
    };
    if comparable(old) == comparable(new) {
        return Ok(());
    }
    Err("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,\
         `spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to \
         existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was \
         previously negative)"
        .to_owned())
}

/// An object read by JSON pointer.
struct Look<'a>(&'a Value);

impl Look<'_> {
    fn text(&self, pointer: &str) -> &str {
        self.0
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Whether the value at `pointer` is missing or empty (Go's zero value).
    fn absent(&self, pointer: &str) -> bool {
        match self.0.pointer(pointer) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            Some(_) => false,
        }
    }

    fn required(&self, pointer: &str, field: &str, found: &mut Vec<String>) {
        if self.absent(pointer) {
            found.push(format!("{field}: Required value"));
        }
    }
}

/// The legacy Event rule: an Event without `eventTime` is about an object
/// in its own namespace (or in none, for Events in `default`); one with it
/// names the object's namespace unless it is in `default` or `kube-system`.
fn event_namespace(look: &Look<'_>, namespace: &str, found: &mut Vec<String>) {
    let regarding = look.text("/regarding/namespace");
    let matches = if look.absent("/eventTime") {
        if regarding.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            regarding == namespace
        }
    } else {
        !regarding.is_empty() || namespace == "default" || namespace == "kube-system"
    };
    if !matches {
        found.push(format!(
            "involvedObject.namespace: Invalid value: \"{regarding}\": does not match event.namespace"
        ));
    }
}

/// Whether a workload's `matchLabels` select its template's labels (its
/// `matchExpressions` are left to the controllers): a missing selector
/// selects nothing.
fn selects(look: &Look<'_>) -> bool {
    let Some(selector) = look.0.pointer("/spec/selector").and_then(Value::as_object) else {
        return false;
    };
    let labels = look.0.pointer("/spec/template/metadata/labels");
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// A Job's pod template: containers, and a restart policy of `OnFailure`
/// or `Never`.
fn job_template(look: &Look<'_>, template: &str, found: &mut Vec<String>) {
    let field = template.trim_start_matches('/').replace('/', ".");
    look.required(
        &format!("{template}/spec/containers"),
        &format!("{field}.spec.containers"),
        found,
    );
    match look.text(&format!("{template}/spec/restartPolicy")) {
        "OnFailure" | "Never" => {}
        "" => found.push(format!(
            "{field}.spec.restartPolicy: Required value: valid values: {JOB_RESTART}"
        )),
        other => found.push(format!(
            "{field}.spec.restartPolicy: Unsupported value: \"{other}\": supported values: {JOB_RESTART}"
        )),
    }
}

/// A binding's `roleRef`: a kind among `kinds`, a name.
fn role_ref(look: &Look<'_>, kinds: &[&str], found: &mut Vec<String>) {
    let kind = look.text("/roleRef/kind");
    if !kinds.contains(&kind) {
        let supported: Vec<String> = kinds.iter().map(|k| format!("\"{k}\"")).collect();
        found.push(format!(
            "roleRef.kind: Unsupported value: \"{kind}\": supported values: {}",
            supported.join(", ")
        ));
    }
    look.required("/roleRef/name", "roleRef.name", found);
}

/// The sources a PersistentVolume may name (`spec.<source>`), one of which
/// it must.
const VOLUME_SOURCES: [&str; 22] = [
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// A PersistentVolume's access modes, capacity (its storage alone) and
/// source.
fn volume(look: &Look<'_>, found: &mut Vec<String>) {
    look.required("/spec/accessModes", "spec.accessModes", found);
    let capacity = look.0.pointer("/spec/capacity").and_then(Value::as_object);
    if capacity.is_none_or(serde_json::Map::is_empty) {
        found.push("spec.capacity: Required value".into());
    }
    if capacity.is_none_or(|c| c.len() != 1 || !c.contains_key("storage")) {
        let shown = capacity.filter(|c| !c.is_empty()).map_or_else(
            || "null".to_owned(),
            |c| Value::Object(c.clone()).to_string(),
        );
        found.push(format!(
            "spec.capacity: Unsupported value: {shown}: supported values: \"storage\""
        ));
    }
    if VOLUME_SOURCES
        .iter()
        .all(|source| look.absent(&format!("/spec/{source}")))
    {
        found.push("spec: Required value: must specify a volume type".into());
    }
}

/// A HorizontalPodAutoscaler's bounds and target.
fn autoscaler(look: &Look<'_>, found: &mut Vec<String>) {
    let number = |pointer: &str| look.0.pointer(pointer).and_then(Value::as_i64);
    let (min, max) = (
        number("/spec/minReplicas").unwrap_or(1),
        number("/spec/maxReplicas"),
    );
    if max.unwrap_or(0) < min {
        found.push(format!(
            "spec.maxReplicas: Invalid value: {}: must be greater than or equal to `minReplicas`",
            max.unwrap_or(0)
        ));
    }
    look.required(
        "/spec/scaleTargetRef/kind",
        "spec.scaleTargetRef.kind",
        found,
    );
    look.required(
        "/spec/scaleTargetRef/name",
        "spec.scaleTargetRef.name",
        found,
    );
    let api_version = look.text("/spec/scaleTargetRef/apiVersion");
    if !api_version.contains('/') {
        found.push(format!(
            "spec.scaleTargetRef.apiVersion: Invalid value: \"{api_version}\": apiVersion must specify API group"
        ));
    }
    // Scaling to zero (`HPAScaleToZero`, on in v1.37) needs a metric that
    // is not the target's own Pods'.
    let external = look
        .0
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|m| matches!(m["type"].as_str(), Some("Object" | "External")));
    if number("/spec/minReplicas") == Some(0) && !external {
        found.push(
            "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas"
                .into(),
        );
    }
    // The declarative checks come last, in field order; an int32 at zero
    // is not set.
    if let Some(min) = number("/spec/minReplicas").filter(|m| *m < 0) {
        found.push(format!(
            "spec.minReplicas: Invalid value: {min}: must be greater than or equal to 0"
        ));
    }
    match max.unwrap_or(0) {
        0 => found.push("spec.maxReplicas: Required value".into()),
        max if max < 0 => found.push(format!(
            "spec.maxReplicas: Invalid value: {max}: must be greater than or equal to 1"
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(group: &str, plural: &str) -> ResourceInfo {
        kubewasm_types::registry::Registry::builtin()
            .all()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
            .expect("served")
    }

    /// The real kube-apiserver's causes for a body with a bad name and
    /// nothing else (v1.37.2, `make difference`, each type's create).
    #[test]
    fn an_empty_body_should_be_refused_with_every_cause_a_real_server_gives() {
        let name = || vec!["metadata.name: Invalid value: \"Not_Valid\": bad".to_owned()];
        let empty = json!({"metadata": {"name": "Not_Valid"}});
        let fields = |group: &str, plural: &str, ns: Option<&str>| -> Vec<String> {
            problems(&info(group, plural), &empty, ns, name())
                .iter()
                .map(|p| p.split(": ").next().unwrap_or_default().to_owned())
                .collect()
        };
        assert_eq!(
            fields("batch", "cronjobs", Some("ns")),
            [
                "metadata.name",
                "spec.jobTemplate.spec.template.spec.containers",
                "spec.jobTemplate.spec.template.spec.restartPolicy",
                "spec.schedule"
            ]
        );
        assert_eq!(
            fields("events.k8s.io", "events", Some("ns")),
            [
                "involvedObject.namespace",
                "metadata.name",
                "eventTime",
                "type"
            ]
        );
        assert_eq!(
            fields("apps", "statefulsets", Some("ns")),
            [
                "metadata.name",
                "spec.selector",
                "spec.template.metadata.labels",
                "spec.template.spec.containers"
            ]
        );
        assert_eq!(
            fields("autoscaling", "horizontalpodautoscalers", Some("ns")),
            [
                "metadata.name",
                "spec.maxReplicas",
                "spec.scaleTargetRef.kind",
                "spec.scaleTargetRef.name",
                "spec.scaleTargetRef.apiVersion",
                "spec.maxReplicas"
            ]
        );
        let binding = problems(
            &info("rbac.authorization.k8s.io", "clusterrolebindings"),
            &empty,
            None,
            Vec::new(),
        );
        assert_eq!(
            binding,
            [
                "roleRef.kind: Unsupported value: \"\": supported values: \"ClusterRole\"",
                "roleRef.name: Required value"
            ]
        );
    }

    #[test]
    fn a_pods_update_should_change_only_what_a_real_server_lets_it() {
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}],
                                  "volumes": [{"name": "kube-api-access-abcde"}]}});
        let mut image = pod.clone();
        image["spec"]["containers"][0]["image"] = "x:2".into();
        image["spec"]["activeDeadlineSeconds"] = 5.into();
        assert_eq!(pod_update(&pod, &image), Ok(()));
        let without_volumes = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}]}});
        let refused = pod_update(&pod, &without_volumes).expect_err("a volume dropped");
        assert!(
            refused.starts_with("spec: Forbidden: pod updates may not change fields other than")
        );
    }

    #[test]
    fn negative_replicas_should_be_refused_first() {
        let set = json!({"spec": {"replicas": -1, "selector": {"matchLabels": {"a": "1"}},
            "template": {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c"}]}}}});
        assert_eq!(
            problems(&info("apps", "deployments"), &set, Some("ns"), Vec::new()),
            ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
        );
    }

    #[test]
    fn a_whole_object_should_pass() {
        let service = json!({"spec": {"clusterIP": "None"}});
        assert!(problems(&info("", "services"), &service, Some("ns"), Vec::new()).is_empty());
        let set = json!({"spec": {"selector": {"matchLabels": {"a": "1"}},
            "template": {"metadata": {"labels": {"a": "1", "b": "2"}},
                         "spec": {"containers": [{"name": "c"}]}}}});
        assert!(problems(&info("apps", "statefulsets"), &set, Some("ns"), Vec::new()).is_empty());
        let event = json!({"eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal",
                           "regarding": {"namespace": "ns"}});
        assert!(
            problems(
                &info("events.k8s.io", "events"),
                &event,
                Some("ns"),
                Vec::new()
            )
            .is_empty()
        );
    }

    /// The real kube-apiserver's words (v1.37.2, an outsider's bodies, kept
    /// as `tests/difference/sequences/outsider-validation.txt`).
    #[test]
    fn budgets_quotas_and_autoscalers_should_be_refused_in_a_real_server_s_words() {
        let said = |group: &str, plural: &str, body: Value| {
            problems(&info(group, plural), &body, Some("ns"), Vec::new())
        };
        let budget = said(
            "policy",
            "poddisruptionbudgets",
            json!({"spec": {"minAvailable": "abc%", "maxUnavailable": "5", "selector": {"matchLabels": {"app": "x"}}}}),
        );
        assert_eq!(budget.len(), 3, "{budget:?}");
        assert_eq!(
            budget[0],
            "spec: Invalid value: {\"MinAvailable\":\"abc%\",\"Selector\":{\"matchLabels\":{\"app\":\"x\"}},\"MaxUnavailable\":\"5\",\"UnhealthyPodEvictionPolicy\":null}: minAvailable and maxUnavailable cannot be both set"
        );
        assert!(budget[2].starts_with("spec.maxUnavailable: Invalid value: \"5\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%'"));
        let quota = said(
            "",
            "resourcequotas",
            json!({"spec": {"hard": {"count/": "1"}}}),
        );
        assert_eq!(quota.len(), 2, "{quota:?}");
        assert_eq!(
            quota[0],
            "spec.hard[count/]: Invalid value: \"count/\": name part must be non-empty"
        );
        let zero = said(
            "autoscaling",
            "horizontalpodautoscalers",
            json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                            "minReplicas": 0, "maxReplicas": 3,
                            "metrics": [{"type": "Resource", "resource": {"name": "cpu"}}]}}),
        );
        assert_eq!(
            zero,
            [
                "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas"
            ]
        );
    }
}
