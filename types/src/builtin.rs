//! Every built-in resource type k8s-openapi describes, for the registry.
//!
//! Generated once from k8s-openapi 0.29 (`v1_33`) by listing the types that
//! implement `ListableResource`; the flags say which have a `status` field.
//! Short names, `scale` subresources and the `all` category follow
//! `kubectl api-resources` on a real cluster.

use k8s_openapi::{ListableResource, NamespaceResourceScope, Resource};

use crate::info::{FieldSchema, ResourceInfo};

/// Decodes `value` as a `K` and encodes it back.
fn typed<K: serde::de::DeserializeOwned + serde::Serialize>(
    value: &serde_json::Value,
) -> Result<serde_json::Value, String> {
    let decoded: K = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(decoded).map_err(|e| e.to_string())
}

/// K's OpenAPI v3 schema, from k8s-openapi's descriptions of every field.
pub fn field_schema<K: schemars::JsonSchema>() -> FieldSchema {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let reference = generator.subschema_for::<K>().to_value();
    let definitions = generator.take_definitions(true);
    (reference, definitions)
}

fn info<
    K: Resource
        + ListableResource
        + serde::de::DeserializeOwned
        + serde::Serialize
        + schemars::JsonSchema,
>(
    status: bool,
) -> ResourceInfo
where
    K::Scope: 'static,
{
    let plural = K::URL_PATH_SEGMENT;
    ResourceInfo {
        group: K::GROUP.to_owned(),
        version: K::VERSION.to_owned(),
        kind: K::KIND.to_owned(),
        list_kind: K::LIST_KIND.to_owned(),
        plural: plural.to_owned(),
        singular: K::KIND.to_lowercase(),
        namespaced: std::any::TypeId::of::<K::Scope>()
            == std::any::TypeId::of::<NamespaceResourceScope>(),
        short_names: short_names(plural)
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        categories: if ALL.contains(&plural) {
            vec!["all".to_owned()]
        } else {
            Vec::new()
        },
        status,
        scale: SCALE.contains(&plural),
        generation: GENERATION.contains(&plural),
        create_on_update: CREATE_ON_UPDATE.contains(&plural),
        unconditional_update: !CONDITIONAL_UPDATE.contains(&plural),
        custom: false,
        schema: None,
        typed: Some(typed::<K>),
        field_schema: Some(field_schema::<K>),
        printer_columns: Vec::new(),
    }
}

/// Plurals whose registry strategy allows a PUT to create
/// (`AllowCreateOnUpdate`, Kubernetes v1.37.2's `pkg/registry`).
const CREATE_ON_UPDATE: [&str; 11] = [
    "leases",
    "leasecandidates",
    "endpoints",
    // events.k8s.io's Events too: they share the core strategy.
    "events",
    "limitranges",
    "services",
    "runtimeclasses",
    "clusterroles",
    "clusterrolebindings",
    "roles",
    "rolebindings",
];

/// Plurals whose registry strategy refuses a PUT without a
/// resourceVersion (`AllowUnconditionalUpdate` false in Kubernetes
/// v1.37.2's `pkg/registry`, apiextensions-apiserver's and
/// kube-aggregator's).
const CONDITIONAL_UPDATE: [&str; 24] = [
    "leases",
    "leasecandidates",
    "poddisruptionbudgets",
    "runtimeclasses",
    "csidrivers",
    "csinodes",
    "csistoragecapacities",
    "volumeattachments",
    "storageversions",
    "storageversionmigrations",
    "clustertrustbundles",
    "podcertificaterequests",
    "resourcepoolstatusrequests",
    "podgroups",
    "compositepodgroups",
    "workloads",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "customresourcedefinitions",
    "apiservices",
];

/// Plurals in the `all` category.
const ALL: [&str; 10] = [
    "pods",
    "replicationcontrollers",
    "services",
    "daemonsets",
    "deployments",
    "replicasets",
    "statefulsets",
    "horizontalpodautoscalers",
    "cronjobs",
    "jobs",
];

/// Plurals whose objects carry `metadata.generation`: those whose registry
/// strategy sets it on create, in Kubernetes v1.37 (`Generation = 1` in
/// `pkg/registry/*/*/strategy.go`; customresourcedefinitions in
/// apiextensions-apiserver's), checked against a real kube-apiserver.
const GENERATION: [&str; 27] = [
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "validatingwebhookconfigurations",
    "daemonsets",
    "deployments",
    "replicasets",
    "statefulsets",
    "horizontalpodautoscalers",
    "cronjobs",
    "jobs",
    "pods",
    "podtemplates",
    "replicationcontrollers",
    "endpointslices",
    "flowschemas",
    "prioritylevelconfigurations",
    "ingresses",
    "ingressclasses",
    "networkpolicies",
    "poddisruptionbudgets",
    "deviceclasses",
    "resourceslices",
    "priorityclasses",
    "customresourcedefinitions",
];

/// Plurals with a `scale` subresource.
const SCALE: [&str; 4] = [
    "deployments",
    "replicasets",
    "statefulsets",
    "replicationcontrollers",
];

fn short_names(plural: &str) -> &'static [&'static str] {
    match plural {
        "certificatesigningrequests" => &["csr"],
        "componentstatuses" => &["cs"],
        "configmaps" => &["cm"],
        "cronjobs" => &["cj"],
        "customresourcedefinitions" => &["crd", "crds"],
        "daemonsets" => &["ds"],
        "deployments" => &["deploy"],
        "endpoints" => &["ep"],
        "events" => &["ev"],
        "horizontalpodautoscalers" => &["hpa"],
        "ingresses" => &["ing"],
        "limitranges" => &["limits"],
        "namespaces" => &["ns"],
        "networkpolicies" => &["netpol"],
        "nodes" => &["no"],
        "persistentvolumeclaims" => &["pvc"],
        "persistentvolumes" => &["pv"],
        "poddisruptionbudgets" => &["pdb"],
        "pods" => &["po"],
        "priorityclasses" => &["pc"],
        "replicasets" => &["rs"],
        "replicationcontrollers" => &["rc"],
        "resourcequotas" => &["quota"],
        "serviceaccounts" => &["sa"],
        "services" => &["svc"],
        "statefulsets" => &["sts"],
        "storageclasses" => &["sc"],
        _ => &[],
    }
}

/// Every built-in type, in k8s-openapi's module order.
pub(crate) fn all() -> Vec<ResourceInfo> {
    use k8s_openapi::*;
    vec![
        info::<api::admissionregistration::v1::MutatingWebhookConfiguration>(false),
        info::<api::admissionregistration::v1::ValidatingAdmissionPolicy>(true),
        info::<api::admissionregistration::v1::ValidatingAdmissionPolicyBinding>(false),
        info::<api::admissionregistration::v1::ValidatingWebhookConfiguration>(false),
        info::<api::admissionregistration::v1alpha1::MutatingAdmissionPolicy>(false),
        info::<api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding>(false),
        info::<api::admissionregistration::v1beta1::ValidatingAdmissionPolicy>(true),
        info::<api::admissionregistration::v1beta1::ValidatingAdmissionPolicyBinding>(false),
        info::<api::apiserverinternal::v1alpha1::StorageVersion>(false),
        info::<api::apps::v1::ControllerRevision>(false),
        info::<api::apps::v1::DaemonSet>(true),
        info::<api::apps::v1::Deployment>(true),
        info::<api::apps::v1::ReplicaSet>(true),
        info::<api::apps::v1::StatefulSet>(true),
        info::<api::autoscaling::v1::HorizontalPodAutoscaler>(true),
        info::<api::autoscaling::v2::HorizontalPodAutoscaler>(true),
        info::<api::batch::v1::CronJob>(true),
        info::<api::batch::v1::Job>(true),
        info::<api::certificates::v1::CertificateSigningRequest>(true),
        info::<api::certificates::v1alpha1::ClusterTrustBundle>(false),
        info::<api::certificates::v1beta1::ClusterTrustBundle>(false),
        info::<api::coordination::v1::Lease>(false),
        info::<api::coordination::v1alpha2::LeaseCandidate>(false),
        info::<api::coordination::v1beta1::LeaseCandidate>(false),
        info::<api::core::v1::ComponentStatus>(false),
        info::<api::core::v1::ConfigMap>(false),
        info::<api::core::v1::Endpoints>(false),
        info::<api::core::v1::Event>(false),
        info::<api::core::v1::LimitRange>(false),
        info::<api::core::v1::Namespace>(true),
        info::<api::core::v1::Node>(true),
        info::<api::core::v1::PersistentVolume>(true),
        info::<api::core::v1::PersistentVolumeClaim>(true),
        info::<api::core::v1::Pod>(true),
        info::<api::core::v1::PodTemplate>(false),
        info::<api::core::v1::ReplicationController>(true),
        info::<api::core::v1::ResourceQuota>(true),
        info::<api::core::v1::Secret>(false),
        info::<api::core::v1::Service>(true),
        info::<api::core::v1::ServiceAccount>(false),
        info::<api::discovery::v1::EndpointSlice>(false),
        info::<api::events::v1::Event>(false),
        info::<api::flowcontrol::v1::FlowSchema>(true),
        info::<api::flowcontrol::v1::PriorityLevelConfiguration>(true),
        info::<api::networking::v1::Ingress>(true),
        info::<api::networking::v1::IngressClass>(false),
        info::<api::networking::v1::IPAddress>(false),
        info::<api::networking::v1::NetworkPolicy>(false),
        info::<api::networking::v1::ServiceCIDR>(true),
        info::<api::networking::v1beta1::IPAddress>(false),
        info::<api::networking::v1beta1::ServiceCIDR>(true),
        info::<api::node::v1::RuntimeClass>(false),
        info::<api::policy::v1::PodDisruptionBudget>(true),
        info::<api::rbac::v1::ClusterRole>(false),
        info::<api::rbac::v1::ClusterRoleBinding>(false),
        info::<api::rbac::v1::Role>(false),
        info::<api::rbac::v1::RoleBinding>(false),
        info::<api::resource::v1alpha3::DeviceClass>(false),
        info::<api::resource::v1alpha3::DeviceTaintRule>(false),
        info::<api::resource::v1alpha3::ResourceClaim>(true),
        info::<api::resource::v1alpha3::ResourceClaimTemplate>(false),
        info::<api::resource::v1alpha3::ResourceSlice>(false),
        info::<api::resource::v1beta1::DeviceClass>(false),
        info::<api::resource::v1beta1::ResourceClaim>(true),
        info::<api::resource::v1beta1::ResourceClaimTemplate>(false),
        info::<api::resource::v1beta1::ResourceSlice>(false),
        info::<api::resource::v1beta2::DeviceClass>(false),
        info::<api::resource::v1beta2::ResourceClaim>(true),
        info::<api::resource::v1beta2::ResourceClaimTemplate>(false),
        info::<api::resource::v1beta2::ResourceSlice>(false),
        info::<api::scheduling::v1::PriorityClass>(false),
        info::<api::storage::v1::CSIDriver>(false),
        info::<api::storage::v1::CSINode>(false),
        info::<api::storage::v1::CSIStorageCapacity>(false),
        info::<api::storage::v1::StorageClass>(false),
        info::<api::storage::v1::VolumeAttachment>(true),
        info::<api::storage::v1alpha1::VolumeAttributesClass>(false),
        info::<api::storage::v1beta1::VolumeAttributesClass>(false),
        info::<api::storagemigration::v1alpha1::StorageVersionMigration>(true),
        info::<apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(
            true,
        ),
        info::<kube_aggregator::pkg::apis::apiregistration::v1::APIService>(true),
    ]
}
