//! What a real API server sets on a built-in object as it decodes it, before
//! any registry strategy or admission: the fields Go's types always write,
//! then the defaulting functions of Kubernetes' API groups
//! (`k8s.io/kubernetes/pkg/apis/*/v1/defaults.go` and the `+default` markers
//! of their `zz_generated.defaults.go`, v1.37.2, with that release's default
//! feature gates).
//!
//! # Rules
//! - A message is defaulted wherever it occurs (a Container in a Pod, in a
//!   Deployment's template, in a CronJob's job template), the parent before
//!   the messages it holds, as the generated defaulters walk it.
//! - A field Go's encoder always writes (a struct that is not a pointer, a
//!   list or pointer without `omitempty`, a string without it) is set, when
//!   absent, to what that encoder writes for it (`protos/gotypes.txt`'s
//!   `zero` lines, read from the Go types): an Ingress's `status` is
//!   `{"loadBalancer": {}}`, a Role without rules has `"rules": null`.
//! - A field the client set is never changed, `null` counting as unset (a
//!   nil pointer); a Go string is unset when empty, a list when empty, a
//!   number when zero, as the Go functions test them.
//! - A field Go's encoder leaves out when zero (`omitempty` on a string,
//!   number, bool, list or map) is dropped when it is: a Scale's
//!   `spec.replicas: 0`, a Service account subject's `apiGroup: ""`.
//! - Object metadata is the server's own and is not walked.
//! - Not set: the in-tree volume plugins' defaults (RBD, ScaleIO, iSCSI,
//!   Azure Disk), the rounding of quantities, a ConfigMap's empty `data`
//!   (JSON leaves it out).

use serde_json::{Map, Value, json};

use super::protobuf::{self, Holds};
use fields::{in_spec, omissible, or_blank, or_unset, phase, pull_policy, text, unset};

/// The message of object metadata, not walked.
const OBJECT_META: &str = "apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Deeper than any built-in type nests.
const MAX_DEPTH: usize = 64;

/// Defaults `object`, an object of the built-in `kind` in `api_version`; an
/// object of a kind Kubernetes defines no Go type for is left as it is.
pub fn apply(api_version: &str, kind: &str, object: &mut Value) {
    // A Job's pod template gets no restart policy (a real server refuses
    // one without, `Required value: valid values: "OnFailure", "Never"`),
    // though every other pod spec gets `Always`.
    let template = match (api_version, kind) {
        ("batch/v1", "Job") => Some("/spec/template/spec"),
        ("batch/v1", "CronJob") => Some("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    };
    let unset = template.filter(|t| {
        object
            .pointer(&format!("{t}/restartPolicy"))
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    });
    if let Some(message) = protobuf::message_of(api_version, kind) {
        visit(&message, object, Walk::Defaults, 0);
    }
    if let Some(spec) = unset
        .and_then(|t| object.pointer_mut(t))
        .and_then(Value::as_object_mut)
    {
        spec.shift_remove("restartPolicy");
    }
}

/// A zero object of the built-in `kind` in `api_version` as Go writes it
/// (`{"spec": {"template": {"metadata": {}, …}}, "status": {}, …}`), what
/// a real server compares a created object with to say which fields its
/// creator set; `{}` for a kind without a Go type.
pub fn zero(api_version: &str, kind: &str) -> Value {
    let mut object = json!({});
    if let Some(message) = protobuf::message_of(api_version, kind) {
        visit(&message, &mut object, Walk::Zero, 0);
    }
    object
}

/// What a walk sets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// What Go's encoder writes for a zero value only.
    Zero,
    /// That, and the defaulting functions.
    Defaults,
}

/// Sets what `walk` sets on `value`, a `message`, and on every message it
/// holds.
fn visit(message: &str, value: &mut Value, walk: Walk, depth: usize) {
    if depth > MAX_DEPTH || message == OBJECT_META {
        return;
    }
    let Value::Object(map) = value else {
        return;
    };
    for (field, zero) in protobuf::zero_fields(message) {
        if !map.contains_key(*field) {
            map.insert((*field).to_owned(), zero.clone());
        }
    }
    if walk == Walk::Defaults {
        if let Some(default) = defaulter(message) {
            default(map);
        }
        // What Go's encoder would leave out.
        map.retain(|field, value| {
            !(protobuf::omitted_when_zero(message, field) && omissible(value))
        });
    }
    for (field, held, holds) in protobuf::message_fields(message) {
        if holds == Holds::Inline {
            visit(held, value, walk, depth + 1);
            continue;
        }
        let Value::Object(map) = &mut *value else {
            return;
        };
        match (holds, map.get_mut(field)) {
            (Holds::One, Some(one)) => visit(held, one, walk, depth + 1),
            (Holds::List, Some(Value::Array(items))) => {
                for item in items {
                    visit(held, item, walk, depth + 1);
                }
            }
            (Holds::Map, Some(Value::Object(entries))) => {
                for item in entries.values_mut() {
                    visit(held, item, walk, depth + 1);
                }
            }
            _ => {}
        }
    }
}

type Defaulter = fn(&mut Map<String, Value>);

/// The defaulting function of `message`, if its group has one.
fn defaulter(message: &str) -> Option<Defaulter> {
    let (group, kind) = message
        .strip_prefix("api.")
        .or_else(|| message.strip_prefix("apiextensions_apiserver.pkg.apis."))?
        .rsplit_once('.')?;
    let default: Defaulter = match (group, kind) {
        ("core.v1", "Container" | "EphemeralContainerCommon") => container,
        ("core.v1", "ContainerPort" | "EndpointPort") => |m| or_blank(m, "protocol", "TCP"),
        ("core.v1", "ServicePort") => service_port,
        ("core.v1", "Service") => service,
        ("core.v1", "Pod") => pod,
        ("core.v1", "PodSpec") => pod_spec,
        ("core.v1", "PodStatus") => pod_status,
        ("core.v1", "Probe") => probe,
        ("core.v1", "HTTPGetAction") => |m| {
            or_blank(m, "path", "/");
            or_blank(m, "scheme", "HTTP");
        },
        ("core.v1", "GRPCAction") => |m| or_unset(m, "service", ""),
        ("core.v1", "Volume") => volume,
        ("core.v1", "ImageVolumeSource") => |m| {
            let policy = pull_policy(text(m, "reference"));
            or_blank(m, "pullPolicy", policy);
        },
        (
            "core.v1",
            "SecretVolumeSource"
            | "ConfigMapVolumeSource"
            | "DownwardAPIVolumeSource"
            | "ProjectedVolumeSource",
        ) => |m| or_unset(m, "defaultMode", 0o644),
        ("core.v1", "ServiceAccountTokenProjection") => |m| or_unset(m, "expirationSeconds", 3600),
        ("core.v1", "ObjectFieldSelector") => |m| or_blank(m, "apiVersion", "v1"),
        ("core.v1", "Secret") => |m| or_blank(m, "type", "Opaque"),
        ("core.v1", "PersistentVolume") => persistent_volume,
        ("core.v1", "PersistentVolumeClaim") => |m| phase(m, "Pending"),
        ("core.v1", "PersistentVolumeClaimSpec") => |m| or_unset(m, "volumeMode", "Filesystem"),
        ("core.v1", "HostPathVolumeSource") => |m| or_unset(m, "type", ""),
        ("core.v1", "Namespace") => namespace,
        ("core.v1", "NamespaceStatus") => |m| or_blank(m, "phase", "Active"),
        ("core.v1", "NodeStatus") => |m| {
            if unset(m.get("allocatable"))
                && let Some(capacity) = m.get("capacity").filter(|c| !c.is_null())
            {
                let capacity = capacity.clone();
                m.insert("allocatable".into(), capacity);
            }
        },
        ("core.v1", "LimitRangeItem") => limit_range_item,
        ("core.v1", "ReplicationController") => replication_controller,
        ("apps.v1", "Deployment") => deployment,
        ("apps.v1", "DaemonSet") => daemon_set,
        ("apps.v1", "StatefulSet") => stateful_set,
        ("apps.v1", "ReplicaSet") => |m| in_spec(m, |s| or_unset(s, "replicas", 1)),
        ("batch.v1", "Job") => job,
        ("batch.v1", "CronJob") => cron_job,
        ("batch.v1", "PodFailurePolicyOnPodConditionsPattern") => |m| or_blank(m, "status", "True"),
        ("autoscaling.v1", "HorizontalPodAutoscaler") => {
            |m| in_spec(m, |s| or_unset(s, "minReplicas", 1))
        }
        ("autoscaling.v2", "HorizontalPodAutoscaler") => horizontal_pod_autoscaler,
        ("storage.v1", "StorageClass") => |m| {
            or_unset(m, "reclaimPolicy", "Delete");
            or_unset(m, "volumeBindingMode", "Immediate");
        },
        ("storage.v1", "CSIDriver") => csi_driver,
        ("scheduling.v1", "PriorityClass") => {
            |m| or_unset(m, "preemptionPolicy", "PreemptLowerPriority")
        }
        ("networking.v1", "NetworkPolicyPort") => |m| or_unset(m, "protocol", "TCP"),
        ("networking.v1", "NetworkPolicy") => network_policy,
        ("networking.v1", "IngressClassParametersReference") => |m| or_unset(m, "scope", "Cluster"),
        ("rbac.v1", "RoleBinding" | "ClusterRoleBinding") => |m| {
            if let Some(Value::Object(role)) = m.get_mut("roleRef") {
                or_blank(role, "apiGroup", "rbac.authorization.k8s.io");
            }
        },
        ("rbac.v1", "Subject") => subject,
        ("discovery.v1", "EndpointPort") => |m| {
            or_unset(m, "name", "");
            or_unset(m, "protocol", "TCP");
        },
        ("apiextensions.v1", "CustomResourceDefinitionSpec") => custom_resource_definition_spec,
        ("apiextensions.v1", "ServiceReference") => |m| or_unset(m, "port", 443),
        _ => return None,
    };
    Some(default)
}

mod fields;
mod kinds;
use kinds::*;

#[cfg(test)]
mod tests {
    use super::fields::image_tag;
    use super::*;

    fn defaulted(api_version: &str, kind: &str, mut object: Value) -> Value {
        apply(api_version, kind, &mut object);
        object
    }

    #[test]
    fn a_custom_resource_definition_should_convert_nothing_unless_told() {
        let crd = defaulted(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            json!({"spec": {"names": {"kind": "Gadget", "plural": "gadgets"}}}),
        );
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(crd["spec"]["names"]["singular"], "gadget");
        assert_eq!(crd["spec"]["names"]["listKind"], "GadgetList");
        let webhook = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "n", "name": "s"}}}});
        let crd = defaulted(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            json!({"spec": {"names": {"kind": "Gadget"}, "conversion": webhook}}),
        );
        assert_eq!(
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
            443
        );
    }

    #[test]
    fn a_pod_should_be_defaulted_as_kube_apiserver_1_37_defaults_it() {
        // What kube-apiserver v1.37.2 answered to this create, admission's
        // additions (service account volume, tolerations, priority) aside.
        let pod = defaulted(
            "v1",
            "Pod",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
                "spec": {"nodeName": "n", "containers": [
                    {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}}),
        );
        assert_eq!(
            pod["spec"],
            json!({"nodeName": "n", "containers": [{"name": "main", "image": "busybox",
                "command": ["sleep", "3600"], "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst", "securityContext": {},
                "schedulerName": "default-scheduler", "enableServiceLinks": true})
        );
        assert_eq!(pod["status"], json!({}));
        assert_eq!(
            pod["metadata"],
            json!({"name": "a"}),
            "metadata is not walked"
        );
    }

    #[test]
    fn a_template_should_be_defaulted_as_a_pod_spec_but_not_as_a_pod() {
        let deployment = defaulted(
            "apps/v1",
            "Deployment",
            json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80}],
                    "readinessProbe": {"httpGet": {"port": 80}}}]}}}}),
        );
        let template = &deployment["spec"]["template"]["spec"];
        assert_eq!(template["restartPolicy"], "Always");
        assert_eq!(template.get("enableServiceLinks"), None, "a Pod's only");
        let container = &template["containers"][0];
        assert_eq!(container["imagePullPolicy"], "IfNotPresent");
        assert_eq!(container["ports"][0]["protocol"], "TCP");
        assert_eq!(
            container["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(
            deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
            "25%"
        );
        assert_eq!(deployment["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(deployment["status"], json!({}));
    }

    #[test]
    fn a_set_field_should_never_change() {
        let pod = json!({"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "securityContext": {"runAsUser": 1},
            "containers": [{"name": "c", "image": "a", "imagePullPolicy": "Never"}]}});
        let defaulted = defaulted("v1", "Pod", pod.clone());
        for pointer in [
            "/spec/restartPolicy",
            "/spec/terminationGracePeriodSeconds",
            "/spec/securityContext",
            "/spec/containers/0/imagePullPolicy",
        ] {
            assert_eq!(
                defaulted.pointer(pointer),
                pod.pointer(pointer),
                "{pointer}"
            );
        }
    }

    #[test]
    fn fields_go_always_writes_should_be_there() {
        let ingress = defaulted("networking.k8s.io/v1", "Ingress", json!({"spec": {}}));
        assert_eq!(ingress["status"], json!({"loadBalancer": {}}));
        let role = defaulted("rbac.authorization.k8s.io/v1", "Role", json!({}));
        assert_eq!(role.get("rules"), Some(&Value::Null));
    }

    #[test]
    fn volumes_and_claims_should_get_their_modes() {
        let claim = defaulted("v1", "PersistentVolumeClaim", json!({"spec": {}}));
        assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
        assert_eq!(claim["status"]["phase"], "Pending");
        let volume = defaulted(
            "v1",
            "PersistentVolume",
            json!({"spec": {"hostPath": {"path": "/x"}}}),
        );
        assert_eq!(volume["spec"]["hostPath"]["type"], "");
        assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        let pod = defaulted(
            "v1",
            "Pod",
            json!({"spec": {"volumes": [{"name": "scratch"}, {"name": "s", "secret": {}}]}}),
        );
        assert_eq!(pod["spec"]["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(pod["spec"]["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(pod["spec"]["volumes"][1].get("emptyDir"), None);
    }

    #[test]
    fn image_tags_should_be_read_as_kubernetes_reads_them() {
        for (image, tag) in [
            ("busybox", "latest"),
            ("busybox:latest", "latest"),
            ("nginx:1.27", "1.27"),
            ("localhost:5000/app", "latest"),
            ("localhost:5000/app:v2", "v2"),
            ("app@sha256:abcd", ""),
        ] {
            assert_eq!(image_tag(image), tag, "{image}");
        }
    }

    #[test]
    fn a_zero_object_should_hold_what_go_writes_for_one() {
        let job = zero("batch/v1", "Job");
        assert_eq!(job["spec"]["template"]["metadata"], json!({}));
        assert_eq!(job["spec"]["template"]["spec"]["containers"], Value::Null);
        assert_eq!(job["status"], json!({}));
        assert_eq!(job["spec"].get("backoffLimit"), None, "no defaults");
        assert_eq!(zero("example.com/v1", "Gadget"), json!({}));
    }

    #[test]
    fn zeros_go_leaves_out_should_go() {
        let scale = defaulted("autoscaling/v1", "Scale", json!({"spec": {"replicas": 0}}));
        assert_eq!(scale["spec"], json!({}));
        let deployment = defaulted(
            "apps/v1",
            "Deployment",
            json!({"spec": {"replicas": 0, "paused": false, "minReadySeconds": 0}}),
        );
        assert_eq!(deployment["spec"]["replicas"], 0, "a pointer: kept");
        assert_eq!(deployment["spec"].get("paused"), None);
        assert_eq!(deployment["spec"].get("minReadySeconds"), None);
    }

    #[test]
    fn kinds_without_go_types_should_be_left_alone() {
        let gadget = json!({"spec": {"size": 1}});
        assert_eq!(
            defaulted("example.com/v1", "Gadget", gadget.clone()),
            gadget
        );
    }
}
