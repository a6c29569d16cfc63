//! The `Plugin` and `ClusterPlugin` resources of group `kubewasm.dev`, as
//! the API serves them: their CustomResourceDefinitions are generated from
//! these types (`kubewasm crds`, `deploy/crds.yaml`).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use kubewasm_runtime::grants::Rule;

/// A spec type and the resource kind around it: both kinds have the same
/// group, status, category and printer columns.
macro_rules! plugin_kind {
    (
        $(#[$doc:meta])*
        struct $spec:ident,
        kind = $kind:literal, root = $root:literal, shortname = $short:literal,
        doc = $kind_doc:literal $(, $namespaced:ident)?;
        $(#[$grants_doc:meta])*
        grants: $grants:ty
    ) => {
        $(#[$doc])*
        #[derive(
            CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq, JsonSchema,
        )]
        #[allow(
            clippy::duplicated_attributes,
            reason = "every printcolumn(...) of kube names its type_"
        )]
        #[kube(
            group = "kubewasm.dev",
            version = "v1alpha1",
            kind = $kind,
            root = $root,
            doc = $kind_doc,
            $($namespaced,)?
            status = "PluginStatus",
            shortname = $short,
            category = "kubewasm",
            printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
            printcolumn(
                name = "Ready",
                type_ = "string",
                json_path = ".status.conditions[?(@.type==\"Ready\")].status"
            ),
            printcolumn(name = "Source", type_ = "string", json_path = ".spec.source"),
            printcolumn(
                name = "Digest",
                type_ = "string",
                json_path = ".status.digest",
                priority = 1
            ),
            printcolumn(name = "Reconciles", type_ = "integer", json_path = ".status.reconciles"),
            printcolumn(name = "Failures", type_ = "integer", json_path = ".status.failures"),
            printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
        )]
        #[serde(rename_all = "camelCase")]
        pub struct $spec {
            /// What every plugin resource has.
            #[serde(flatten)]
            pub common: CommonSpec,
            $(#[$grants_doc])*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub grants: Option<$grants>,
        }
    };
}

plugin_kind! {
    /// A tenant's plugin: confined to its own namespace whatever it declares
    /// (its reads, its writes and its informers).
    struct PluginSpec,
    kind = "Plugin", root = "PluginResource", shortname = "wplugin",
    doc = "A tenant's plugin, confined to its namespace: kubewasm runs the component `spec.source` names.",
    namespaced;
    /// What the plugin may do in its namespace: an upper bound on its
    /// declaration (omitted: what it declares).
    grants: TenantGrants
}

plugin_kind! {
    /// An administrator's plugin: the namespaces it reaches are its grants'.
    struct ClusterPluginSpec,
    kind = "ClusterPlugin", root = "ClusterPluginResource", shortname = "wcplugin",
    doc = "An administrator's plugin: kubewasm runs the component `spec.source` names, in the namespaces its grants list.";
    /// What the plugin may do, and in which namespaces (omitted: what it
    /// declares, every namespace but the system ones for writes).
    grants: ClusterGrants
}

/// The spec both kinds share.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonSpec {
    /// The component: an OCI reference, `[oci://]REGISTRY/REPOSITORY:TAG`
    /// or `...@sha256:DIGEST`.
    pub source: String,
    /// Secrets of type `kubernetes.io/dockerconfigjson` holding the
    /// registry's credentials: in the Plugin's namespace, or for a
    /// ClusterPlugin in the one each names (default: the host's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<SecretReference>,
    /// Limits of every call, within the host's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PluginLimits>,
    /// The configuration handed to the plugin, checked against its
    /// `config-schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub config: Option<Value>,
    /// Signatures its artifact must carry (checked on the manifest digest,
    /// again whenever it changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifySpec>,
    /// Stop the plugin (its queue and informers go) until unset.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// Its share of the host's workers when plugins compete for them
    /// (default 1): worker time goes by weighted fair queueing over
    /// tenants (a Plugin's namespace; a ClusterPlugin is one of its own),
    /// then their plugins. An idle plugin's share goes to the busy ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub share: Option<u32>,
}

/// Signatures a plugin resource's artifact must carry.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifySpec {
    /// Public keys (cosign's `cosign.pub`, ECDSA P-256 PEM): the artifact's
    /// manifest digest must be signed (cosign's layout) by one of them.
    pub keys: Vec<KeyReference>,
}

/// A public key held in a Secret or a ConfigMap.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyReference {
    /// The Secret holding it (this or `configMap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The ConfigMap holding it (this or `secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// The data key (default `cosign.pub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its namespace: a Plugin's own only; a ClusterPlugin's default is the
    /// host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A Secret by name (and namespace, for a ClusterPlugin).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    /// The Secret's name.
    pub name: String,
    /// Its namespace: a Plugin's own only; a ClusterPlugin's default is
    /// the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A tenant's grants: types and verbs, in its namespace.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantGrants {
    /// Types and verbs, as in a grants file (omitted: what it declares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<Rule>>,
}

/// An administrator's grants: types, verbs and namespaces.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGrants {
    /// Namespaces it may read and write (omitted: every namespace; writes
    /// but the system ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<BTreeSet<String>>,
    /// Types and verbs, as in a grants file (omitted: what it declares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<Rule>>,
}

/// Limits of every call; each omitted one is the host's.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginLimits {
    /// Largest linear memory of an instance, a quantity (`64Mi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// CPU deadline of one call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub deadline_milliseconds: Option<u64>,
    /// Reconciles of this plugin running at once (at most the host's 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub concurrency: Option<u32>,
    /// Most actions in one outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_actions: Option<u64>,
    /// Most bytes of one object the plugin returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_object_bytes: Option<u64>,
    /// Most bytes of one outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_outcome_bytes: Option<u64>,
    /// Most log records per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_log_records: Option<u64>,
    /// Most host calls (cache reads, log records) per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hostcalls: Option<u64>,
}

/// Where a plugin resource stands.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Seen; its first version is loading.
    Pending,
    /// A version runs (`Degraded` says whether a newer one was refused).
    Running,
    /// `spec.suspend`: nothing runs.
    Suspended,
    /// Nothing runs: its version was refused.
    Failed,
}

/// What the host reports of a plugin resource.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    /// Where it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The manifest digest of the artifact running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The name the plugin runs as (its field manager is
    /// `kubewasm-<name>`, its finalizer `kubewasm.dev/<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_name: Option<String>,
    /// The generation this status is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (a version runs and serves) and `Degraded` (the latest
    /// generation was refused: the reason says why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Why the latest generation was refused, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Reconciles that succeeded, since this host started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciles: Option<u64>,
    /// Reconciles that failed, since this host started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<u64>,
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
