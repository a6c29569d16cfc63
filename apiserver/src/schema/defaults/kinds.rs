//! The defaulting functions of the built-in types, one per message that
//! has one (see the table in the parent module), ported from Kubernetes
//! v1.37.2's `pkg/apis/*/v1/defaults.go`.

use serde_json::{Map, Value, json};

use super::fields::{blank, in_spec, object, or_blank, or_unset, phase, pull_policy, text, unset};

pub(super) fn container(m: &mut Map<String, Value>) {
    let policy = pull_policy(text(m, "image"));
    or_blank(m, "imagePullPolicy", policy);
    or_blank(m, "terminationMessagePath", "/dev/termination-log");
    or_blank(m, "terminationMessagePolicy", "File");
}

pub(super) fn service_port(m: &mut Map<String, Value>) {
    or_blank(m, "protocol", "TCP");
    let target = m.get("targetPort");
    if blank(target) || target.is_some_and(|t| t == "0") {
        let port = m.get("port").cloned().unwrap_or(Value::Null);
        m.insert("targetPort".into(), port);
    }
}

pub(super) fn service(m: &mut Map<String, Value>) {
    in_spec(m, service_spec);
    let load_balancer = m
        .get("spec")
        .and_then(|s| s.get("type"))
        .is_some_and(|t| t == "LoadBalancer");
    let ingress = m
        .get_mut("status")
        .and_then(|s| s.pointer_mut("/loadBalancer/ingress"))
        .and_then(Value::as_array_mut);
    for ingress in ingress.into_iter().flatten().filter(|_| load_balancer) {
        if let Value::Object(ingress) = ingress
            && !text(ingress, "ip").is_empty()
        {
            or_unset(ingress, "ipMode", "VIP");
        }
    }
}

pub(super) fn service_spec(spec: &mut Map<String, Value>) {
    or_blank(spec, "sessionAffinity", "None");
    match text(spec, "sessionAffinity") {
        "None" => {
            spec.shift_remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            if let Some(client_ip) =
                object(spec, "sessionAffinityConfig").and_then(|c| object(c, "clientIP"))
            {
                or_unset(client_ip, "timeoutSeconds", 10800);
            }
        }
        _ => {}
    }
    or_blank(spec, "type", "ClusterIP");
    let kind = text(spec, "type").to_owned();
    let external_ips = !blank(spec.get("externalIPs"));
    let externally_accessible = matches!(kind.as_str(), "LoadBalancer" | "NodePort")
        || (kind == "ClusterIP" && external_ips);
    if externally_accessible {
        or_blank(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        or_unset(spec, "internalTrafficPolicy", "Cluster");
    }
    if kind == "LoadBalancer" {
        or_unset(spec, "allocateLoadBalancerNodePorts", true);
    }
}

pub(super) fn pod(m: &mut Map<String, Value>) {
    in_spec(m, pod_only);
}

/// A Pod's spec defaults that its templates do not get.
pub(super) fn pod_only(spec: &mut Map<String, Value>) {
    if spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s < 0)
    {
        spec.insert("terminationGracePeriodSeconds".into(), 1.into());
    }
    for list in ["containers", "initContainers"] {
        let containers = spec.get_mut(list).and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            // Requests default to the limits.
            let Some(resources) = container
                .get_mut("resources")
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            if let Some(requests) = object(resources, "requests") {
                for (resource, quantity) in limits {
                    requests.entry(resource).or_insert(quantity);
                }
            }
        }
    }
    or_unset(spec, "enableServiceLinks", true);
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        for list in ["containers", "initContainers"] {
            let containers = spec.get_mut(list).and_then(Value::as_array_mut);
            for container in containers.into_iter().flatten() {
                let ports = container.get_mut("ports").and_then(Value::as_array_mut);
                for port in ports.into_iter().flatten() {
                    if let Value::Object(port) = port
                        && blank(port.get("hostPort"))
                    {
                        let container_port = port.get("containerPort").cloned();
                        if let Some(container_port) = container_port {
                            port.insert("hostPort".into(), container_port);
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn pod_spec(m: &mut Map<String, Value>) {
    if blank(m.get("serviceAccountName"))
        && let Some(deprecated) = m.get("serviceAccount").cloned()
    {
        m.insert("serviceAccountName".into(), deprecated);
    }
    match m.get("serviceAccountName").cloned() {
        Some(name) if !blank(Some(&name)) => {
            m.insert("serviceAccount".into(), name);
        }
        _ => {
            m.shift_remove("serviceAccount");
        }
    }
    or_blank(m, "dnsPolicy", "ClusterFirst");
    or_blank(m, "restartPolicy", "Always");
    or_unset(m, "securityContext", json!({}));
    or_unset(m, "terminationGracePeriodSeconds", 30);
    or_blank(m, "schedulerName", "default-scheduler");
}

pub(super) fn pod_status(m: &mut Map<String, Value>) {
    let ip = text(m, "podIP").to_owned();
    let first = m
        .get("podIPs")
        .and_then(|ips| ips.pointer("/0/ip"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    match (ip.is_empty(), first) {
        (false, None) => {
            m.insert("podIPs".into(), json!([{"ip": ip}]));
        }
        (true, Some(first)) => {
            m.insert("podIP".into(), first.into());
        }
        (false, Some(first)) if first != ip => {
            m.insert("podIPs".into(), json!([{"ip": ip}]));
        }
        _ => {}
    }
}

pub(super) fn probe(m: &mut Map<String, Value>) {
    or_blank(m, "timeoutSeconds", 1);
    or_blank(m, "periodSeconds", 10);
    or_blank(m, "successThreshold", 1);
    or_blank(m, "failureThreshold", 3);
}

pub(super) fn volume(m: &mut Map<String, Value>) {
    // A volume naming no source is an emptyDir.
    if m.iter()
        .all(|(field, value)| field == "name" || value.is_null())
    {
        m.insert("emptyDir".into(), json!({}));
    }
}

pub(super) fn persistent_volume(m: &mut Map<String, Value>) {
    phase(m, "Pending");
    in_spec(m, |spec| {
        or_blank(spec, "persistentVolumeReclaimPolicy", "Retain");
        or_unset(spec, "volumeMode", "Filesystem");
    });
}

pub(super) fn namespace(m: &mut Map<String, Value>) {
    let name = m
        .get("metadata")
        .and_then(Value::as_object)
        .map(|meta| text(meta, "name").to_owned())
        .unwrap_or_default();
    if !name.is_empty()
        && let Some(labels) = object(m, "metadata").and_then(|meta| object(meta, "labels"))
    {
        labels.insert("kubernetes.io/metadata.name".into(), name.into());
    }
}

pub(super) fn limit_range_item(m: &mut Map<String, Value>) {
    if text(m, "type") != "Container" {
        return;
    }
    let resources = |m: &Map<String, Value>, field: &str| {
        m.get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (max, min) = (resources(m, "max"), resources(m, "min"));
    if let Some(default) = object(m, "default") {
        for (resource, quantity) in max {
            default.entry(resource).or_insert(quantity);
        }
    }
    let default = resources(m, "default");
    if let Some(default_request) = object(m, "defaultRequest") {
        for (resource, quantity) in default.into_iter().chain(min) {
            default_request.entry(resource).or_insert(quantity);
        }
    }
}

/// The labels of the object's pod template, if it has any.
pub(super) fn template_labels(m: &Map<String, Value>) -> Option<Value> {
    m.get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.is_object())
        .cloned()
}

pub(super) fn replication_controller(m: &mut Map<String, Value>) {
    if let Some(labels) = template_labels(m) {
        in_spec(m, |spec| {
            if blank(spec.get("selector")) {
                spec.insert("selector".into(), labels.clone());
            }
        });
        labels_from_template(m, labels);
    }
    in_spec(m, |spec| or_unset(spec, "replicas", 1));
}

/// Gives an object without labels its template's.
pub(super) fn labels_from_template(m: &mut Map<String, Value>, labels: Value) {
    if let Some(metadata) = object(m, "metadata")
        && blank(metadata.get("labels"))
    {
        metadata.insert("labels".into(), labels);
    }
}

/// Defaults a rolling update's `maxUnavailable` and `maxSurge` when
/// `strategy` (its `type` defaulted first) is one.
pub(super) fn rolling_update(strategy: &mut Map<String, Value>, unavailable: Value, surge: Value) {
    or_blank(strategy, "type", "RollingUpdate");
    if text(strategy, "type") == "RollingUpdate"
        && let Some(rolling) = object(strategy, "rollingUpdate")
    {
        or_unset(rolling, "maxUnavailable", unavailable);
        or_unset(rolling, "maxSurge", surge);
    }
}

pub(super) fn deployment(m: &mut Map<String, Value>) {
    in_spec(m, |spec| {
        or_unset(spec, "replicas", 1);
        if let Some(strategy) = object(spec, "strategy") {
            rolling_update(strategy, "25%".into(), "25%".into());
        }
        or_unset(spec, "revisionHistoryLimit", 10);
        or_unset(spec, "progressDeadlineSeconds", 600);
    });
}

pub(super) fn daemon_set(m: &mut Map<String, Value>) {
    in_spec(m, |spec| {
        if let Some(strategy) = object(spec, "updateStrategy") {
            rolling_update(strategy, 1.into(), 0.into());
        }
        or_unset(spec, "revisionHistoryLimit", 10);
    });
}

pub(super) fn stateful_set(m: &mut Map<String, Value>) {
    in_spec(m, |spec| {
        or_blank(spec, "podManagementPolicy", "OrderedReady");
        if let Some(strategy) = object(spec, "updateStrategy") {
            if blank(strategy.get("type")) {
                strategy.insert("type".into(), "RollingUpdate".into());
                or_unset(strategy, "rollingUpdate", json!({}));
            }
            if text(strategy, "type") == "RollingUpdate"
                && let Some(Value::Object(rolling)) = strategy.get_mut("rollingUpdate")
            {
                or_unset(rolling, "partition", 0);
                // MaxUnavailableStatefulSet is on by default from 1.37.
                or_unset(rolling, "maxUnavailable", 1);
            }
        }
        if let Some(retention) = object(spec, "persistentVolumeClaimRetentionPolicy") {
            or_blank(retention, "whenDeleted", "Retain");
            or_blank(retention, "whenScaled", "Retain");
        }
        or_unset(spec, "replicas", 1);
        or_unset(spec, "revisionHistoryLimit", 10);
    });
}

pub(super) fn job(m: &mut Map<String, Value>) {
    in_spec(m, job_spec);
    if let Some(labels) = template_labels(m) {
        labels_from_template(m, labels);
    }
}

pub(super) fn job_spec(spec: &mut Map<String, Value>) {
    if unset(spec.get("completions")) && unset(spec.get("parallelism")) {
        spec.insert("completions".into(), 1.into());
        spec.insert("parallelism".into(), 1.into());
    }
    or_unset(spec, "parallelism", 1);
    let per_index = !unset(spec.get("backoffLimitPerIndex"));
    or_unset(spec, "backoffLimit", if per_index { i32::MAX } else { 6 });
    or_unset(spec, "completionMode", "NonIndexed");
    or_unset(spec, "suspend", false);
    let failure_policy = !unset(spec.get("podFailurePolicy"));
    let replacement = if failure_policy {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    or_unset(spec, "podReplacementPolicy", replacement);
    or_unset(spec, "manualSelector", false);
}

pub(super) fn cron_job(m: &mut Map<String, Value>) {
    in_spec(m, |spec| {
        or_blank(spec, "concurrencyPolicy", "Allow");
        or_unset(spec, "suspend", false);
        or_unset(spec, "successfulJobsHistoryLimit", 3);
        or_unset(spec, "failedJobsHistoryLimit", 1);
    });
}

pub(super) fn horizontal_pod_autoscaler(m: &mut Map<String, Value>) {
    in_spec(m, horizontal_pod_autoscaler_spec);
}

pub(super) fn horizontal_pod_autoscaler_spec(spec: &mut Map<String, Value>) {
    or_unset(spec, "minReplicas", 1);
    or_blank(
        spec,
        "metrics",
        json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}]),
    );
    let Some(Value::Object(behavior)) = spec.get_mut("behavior") else {
        return;
    };
    let rules = [
        (
            "scaleUp",
            json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}]}),
        ),
        (
            "scaleDown",
            json!({"selectPolicy": "Max", "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 15}]}),
        ),
    ];
    for (direction, mut defaults) in rules {
        if let (Some(Value::Object(asked)), Value::Object(defaults)) =
            (behavior.get(direction), &mut defaults)
        {
            for field in [
                "selectPolicy",
                "stabilizationWindowSeconds",
                "policies",
                "tolerance",
            ] {
                if let Some(value) = asked.get(field).filter(|v| !v.is_null()) {
                    defaults.insert(field.to_owned(), value.clone());
                }
            }
        }
        behavior.insert(direction.to_owned(), defaults);
    }
}

pub(super) fn csi_driver(m: &mut Map<String, Value>) {
    in_spec(m, |spec| {
        or_unset(spec, "attachRequired", true);
        or_unset(spec, "podInfoOnMount", false);
        or_unset(spec, "storageCapacity", false);
        or_unset(spec, "fsGroupPolicy", "ReadWriteOnceWithFSType");
        or_blank(spec, "volumeLifecycleModes", json!(["Persistent"]));
        or_unset(spec, "requiresRepublish", false);
        or_unset(spec, "seLinuxMount", false);
        or_unset(spec, "preventPodSchedulingIfMissing", false);
    });
}

pub(super) fn network_policy(m: &mut Map<String, Value>) {
    in_spec(m, |spec| {
        if blank(spec.get("policyTypes")) {
            let mut types = vec![Value::from("Ingress")];
            if !blank(spec.get("egress")) {
                types.push("Egress".into());
            }
            spec.insert("policyTypes".into(), types.into());
        }
    });
}

pub(super) fn subject(m: &mut Map<String, Value>) {
    // A ServiceAccount's group is "", which JSON leaves out.
    if blank(m.get("apiGroup")) && matches!(text(m, "kind"), "User" | "Group") {
        m.insert("apiGroup".into(), "rbac.authorization.k8s.io".into());
    }
}

/// `SetDefaults_CustomResourceDefinitionSpec`: the names' singular and list
/// kind from the kind, and no conversion (`None`) unless one is given.
pub(super) fn custom_resource_definition_spec(spec: &mut Map<String, Value>) {
    if let Some(Value::Object(names)) = spec.get_mut("names") {
        let kind = text(names, "kind").to_owned();
        or_blank(names, "singular", kind.to_lowercase());
        if !kind.is_empty() {
            or_blank(names, "listKind", format!("{kind}List"));
        }
    }
    or_unset(spec, "conversion", json!({"strategy": "None"}));
}
