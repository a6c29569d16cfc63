//! What a plugin resource asks for, and how one generation of it loads:
//! the name it runs as, its limits over the host's, its pull secrets'
//! credentials, the artifact pulled and prepared under its grants.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kubewasm_runtime::CallLimits;
use kubewasm_runtime::grants::OperatorGrants;
use kubewasm_runtime::resource::ObjectKey;

use super::types::{ClusterPluginResource, CommonSpec, PluginLimits, PluginResource, PluginStatus};
use crate::loader::{self, Prepared, Refused, Setup, Slot, Sources, SpecError};
use crate::oci::{self, Credentials, Puller, Receipt};
use crate::rights::Reads;
use crate::signature::{self, PublicKeys, SignatureError};

/// How the host runs plugin resources.
#[derive(Clone, Debug, Default)]
pub struct ResourceOptions {
    /// Where a ClusterPlugin's pull secrets are by default: the host's
    /// namespace.
    pub host_namespace: String,
    /// Make a Plugin's writes as this ServiceAccount of its namespace, and
    /// run it only while that account may read what it declares.
    pub impersonate: Option<String>,
    /// Let a Plugin's pulls use the host's registry credentials too (by
    /// default a tenant pulls with its own pull secrets only).
    pub share_registry_credentials: bool,
}

impl ResourceOptions {
    /// The account `id`'s plugin acts as, namespace and name: a Plugin's,
    /// with impersonation on.
    pub(super) fn tenant_account<'a>(&'a self, id: &'a ResourceId) -> Option<(&'a str, &'a str)> {
        Some((id.namespace.as_deref()?, self.impersonate.as_deref()?))
    }
}

/// A plugin resource: a namespaced `Plugin` or a `ClusterPlugin`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId {
    /// The Plugin's namespace; `None` for a ClusterPlugin.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl ResourceId {
    /// The name its plugin runs as: `NAMESPACE.NAME` for a Plugin, the
    /// name of a ClusterPlugin.
    pub fn plugin_name(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{namespace}.{}", self.name),
            None => self.name.clone(),
        }
    }

    /// [`Self::plugin_name`], if it can name a plugin: the resource's name
    /// a DNS label (a ClusterPlugin `team-a.mover` would pose as the
    /// Plugin `team-a/mover`), 63 characters at most in all.
    ///
    /// # Errors
    /// [`SpecError::Name`].
    pub fn checked_plugin_name(&self) -> Result<String, SpecError> {
        let name = self.plugin_name();
        if kubewasm_core::validation::is_dns_label(&self.name)
            && kubewasm_runtime::is_plugin_name(&name)
        {
            Ok(name)
        } else {
            Err(SpecError::Name(name))
        }
    }

    /// Its key in the work queue: a Plugin's is namespaced, a
    /// ClusterPlugin's is not, so the two kinds never share one.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// The kind it is of.
    pub fn kind(&self) -> &'static str {
        if self.namespace.is_some() {
            "Plugin"
        } else {
            "ClusterPlugin"
        }
    }
}

impl From<&ObjectKey> for ResourceId {
    fn from(key: &ObjectKey) -> Self {
        Self {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        }
    }
}

impl std::fmt::Display for ResourceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "Plugin {namespace}/{}", self.name),
            None => write!(f, "ClusterPlugin {}", self.name),
        }
    }
}

/// One generation of a resource, as a load started for it.
#[derive(Clone, Debug)]
pub struct Generation {
    pub(super) id: ResourceId,
    pub(super) uid: String,
    pub(super) generation: i64,
    pub(super) concurrency: Option<u32>,
    pub(super) share: u32,
}

/// Parses a quantity of bytes: an integer with an optional binary
/// (`Ki`..`Ei`) or decimal (`k`, `M`..`E`) suffix.
fn bytes_of(quantity: &str) -> Option<u64> {
    let digits = quantity.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let factor: u64 = match &quantity[digits.len()..] {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(factor)
}

/// A resource's limits over the host's.
fn limits(spec: Option<&PluginLimits>, host: CallLimits) -> Result<CallLimits, SpecError> {
    let Some(spec) = spec else {
        return Ok(host);
    };
    let mut limits = host;
    if let Some(memory) = &spec.memory {
        let bytes = bytes_of(memory).ok_or_else(|| SpecError::Memory(memory.clone()))?;
        limits.memory = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    if let Some(ms) = spec.deadline_milliseconds {
        limits.deadline = Duration::from_millis(ms);
    }
    let output = &mut limits.output;
    for (field, value) in [
        (&mut output.actions, spec.max_actions),
        (&mut output.object_bytes, spec.max_object_bytes),
        (&mut output.outcome_bytes, spec.max_outcome_bytes),
        (&mut output.log_records, spec.max_log_records),
        (&mut output.hostcalls, spec.max_hostcalls),
    ] {
        if let Some(value) = value {
            *field = value;
        }
    }
    Ok(limits)
}

/// What a resource asks for, with the grants its kind implies.
#[derive(Clone)]
pub(super) struct Asked {
    pub(super) id: ResourceId,
    pub(super) uid: String,
    pub(super) generation: i64,
    pub(super) common: CommonSpec,
    pub(super) grants: OperatorGrants,
    pub(super) status: Option<PluginStatus>,
}

impl Asked {
    pub(super) fn of_plugin(object: &PluginResource) -> Option<Self> {
        let namespace = object.namespace()?;
        Some(Self {
            grants: OperatorGrants {
                namespaces: Some([namespace.clone()].into()),
                rules: object.spec.grants.as_ref().and_then(|g| g.rules.clone()),
                tenant: true,
            },
            id: ResourceId {
                namespace: Some(namespace),
                name: object.name_any(),
            },
            uid: object.uid()?,
            generation: object.metadata.generation.unwrap_or_default(),
            common: object.spec.common.clone(),
            status: object.status.clone(),
        })
    }

    pub(super) fn of_cluster_plugin(object: &ClusterPluginResource) -> Option<Self> {
        let grants = object.spec.grants.clone().unwrap_or_default();
        Some(Self {
            grants: OperatorGrants {
                namespaces: grants.namespaces,
                rules: grants.rules,
                tenant: false,
            },
            id: ResourceId {
                namespace: None,
                name: object.name_any(),
            },
            uid: object.uid()?,
            generation: object.metadata.generation.unwrap_or_default(),
            common: object.spec.common.clone(),
            status: object.status.clone(),
        })
    }

    /// The generation a load of it starts for.
    pub(super) fn generation(&self) -> Generation {
        Generation {
            id: self.id.clone(),
            uid: self.uid.clone(),
            generation: self.generation,
            concurrency: self.common.limits.as_ref().and_then(|l| l.concurrency),
            share: self.common.share.unwrap_or(crate::fair::DEFAULT_SHARE),
        }
    }
}

/// The namespace a resource's reference to a Secret or ConfigMap reads:
/// a Plugin's own (naming another is refused), a ClusterPlugin's named one
/// or the host's.
fn namespace_of(
    options: &ResourceOptions,
    id: &ResourceId,
    name: &str,
    named: Option<&String>,
) -> Result<String, SpecError> {
    match (&id.namespace, named) {
        (Some(own), Some(named)) if own != named => Err(SpecError::ForeignSecret {
            name: name.to_owned(),
            namespace: named.clone(),
        }),
        (Some(own), _) => Ok(own.clone()),
        (None, named) => Ok(named
            .cloned()
            .unwrap_or_else(|| options.host_namespace.clone())),
    }
}

/// The credentials of a resource's pull secrets.
fn pull_credentials(
    client: &kube::Client,
    options: &ResourceOptions,
    id: &ResourceId,
    common: &CommonSpec,
) -> Result<Credentials, SpecError> {
    let mut credentials = Credentials::default();
    for secret in &common.image_pull_secrets {
        let namespace = namespace_of(options, id, &secret.name, secret.namespace.as_ref())?;
        let failed = |reason: String| SpecError::PullSecret {
            namespace: namespace.clone(),
            name: secret.name.clone(),
            reason,
        };
        let api = Api::<Secret>::namespaced(client.clone(), &namespace);
        let found = tokio::runtime::Handle::current()
            .block_on(api.get(&secret.name))
            .map_err(|e| failed(e.to_string()))?;
        let data = found
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .ok_or_else(|| failed("it has no `.dockerconfigjson`".to_owned()))?;
        let text = std::str::from_utf8(&data.0)
            .map_err(|_| failed("its `.dockerconfigjson` is not UTF-8".to_owned()))?;
        credentials = credentials.overridden_by(&Credentials::parse(text).map_err(failed)?);
    }
    Ok(credentials)
}

/// The public keys a resource's `spec.verify` names.
fn verify_keys(
    client: &kube::Client,
    options: &ResourceOptions,
    id: &ResourceId,
    common: &CommonSpec,
) -> Result<PublicKeys, SpecError> {
    let mut keys = PublicKeys::default();
    let references = common
        .verify
        .as_ref()
        .map_or(&[][..], |v| v.keys.as_slice());
    for reference in references {
        let data_key = reference
            .key
            .clone()
            .unwrap_or_else(|| "cosign.pub".to_owned());
        let (kind, name) = match (&reference.secret, &reference.config_map) {
            (Some(secret), None) => ("Secret", secret),
            (None, Some(map)) => ("ConfigMap", map),
            _ => {
                return Err(SpecError::VerifyKey {
                    origin: "spec.verify.keys".to_owned(),
                    reason: "each key names exactly one of `secret` and `configMap`".to_owned(),
                });
            }
        };
        let namespace = namespace_of(options, id, name, reference.namespace.as_ref())?;
        let origin = format!("{kind} {namespace}/{name} `{data_key}`");
        let failed = |reason: String| SpecError::VerifyKey {
            origin: origin.clone(),
            reason,
        };
        let handle = tokio::runtime::Handle::current();
        let text = if kind == "Secret" {
            let found = handle
                .block_on(Api::<Secret>::namespaced(client.clone(), &namespace).get(name))
                .map_err(|e| failed(e.to_string()))?;
            let bytes = found
                .data
                .and_then(|d| d.get(&data_key).map(|b| b.0.clone()));
            bytes.and_then(|b| String::from_utf8(b).ok())
        } else {
            let found = handle
                .block_on(Api::<ConfigMap>::namespaced(client.clone(), &namespace).get(name))
                .map_err(|e| failed(e.to_string()))?;
            found.data.and_then(|d| d.get(&data_key).cloned())
        };
        let text = text.ok_or_else(|| failed("no such data key (UTF-8 PEM)".to_owned()))?;
        keys.add_pem(&origin, &text)
            .map_err(|e| failed(e.to_string()))?;
    }
    Ok(keys)
}

/// Loads the generation `asked` of a resource (on a blocking thread of
/// the tokio runtime), under `slot`: its pull and its signature's stop
/// when the load is cancelled.
pub(super) fn load(
    sources: &Sources,
    client: &kube::Client,
    options: &ResourceOptions,
    asked: Asked,
    slot: &Slot,
) -> Result<Prepared, Refused> {
    let Asked {
        id,
        uid,
        common,
        grants,
        ..
    } = asked;
    let name = id.plugin_name();
    id.checked_plugin_name()?;
    grants.validate()?;
    let limits = limits(common.limits.as_ref(), sources.runtime.call_limits())?;
    let credentials = pull_credentials(client, options, &id, &common)?;
    let reference = oci::parse_reference(&common.source)?;
    let puller = match &id.namespace {
        Some(_) => Puller::Tenant {
            credentials,
            share_host: options.share_registry_credentials,
            resource: &uid,
        },
        None => Puller::Operator(credentials),
    };
    let pulled = slot.wait(sources.artifacts.fetch_for(&reference, &puller))??;
    // Signed by a key the host or the resource requires, on this digest.
    let keys = sources
        .required_signatures
        .with(&verify_keys(client, options, &id, &common)?);
    if !keys.is_empty() {
        let access = sources.artifacts.access_for(&puller);
        let artifacts = &sources.artifacts;
        match slot.wait(signature::verify(
            &reference,
            &pulled.digest,
            &keys,
            &access,
        ))? {
            Ok(()) => artifacts.give_receipt(Receipt::Verified, &uid, &pulled.digest),
            // Verified for it before: the registry down, it keeps that digest.
            Err(SignatureError::Oci(error))
                if error.is_unreachable()
                    && artifacts.has_receipt(Receipt::Verified, &uid, &pulled.digest) =>
            {
                tracing::warn!(resource = %id, digest = %pulled.digest, %error,
                    "signature not checked again (registry unreachable): verified for it before");
            }
            Err(error) => return Err(error.into()),
        }
    }
    let config = match &common.config {
        Some(config) => Some((
            serde_json::to_string(config).map_err(SpecError::Config)?,
            "spec.config".to_owned(),
        )),
        None => None,
    };
    let setup = Setup {
        name,
        grants,
        limits: Some(limits),
        config,
    };
    let mut prepared = loader::prepare(sources, loader::Source::Bytes(&pulled.bytes), setup, slot)?;
    prepared.artifact = Some(pulled.digest);
    if let Some((namespace, account)) = options.tenant_account(&id) {
        let reads = Reads::of(prepared.plugin.declaration());
        slot.wait(reads.check(client, namespace, account))??;
    }
    Ok(prepared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_should_read_as_kubernetes_writes_them() {
        assert_eq!(bytes_of("64Mi"), Some(64 << 20));
        assert_eq!(bytes_of("1Gi"), Some(1 << 30));
        assert_eq!(bytes_of("500000"), Some(500_000));
        assert_eq!(bytes_of("2M"), Some(2_000_000));
        for bad in ["", "Mi", "1.5Gi", "-1", "64MB", "99999999999999999999Ti"] {
            assert_eq!(bytes_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_resource_should_tighten_the_host_limits_and_keep_the_rest() {
        let host = CallLimits {
            deadline: Duration::from_secs(1),
            memory: 256 << 20,
            output: kubewasm_runtime::Limits::default(),
        };
        assert_eq!(limits(None, host).expect("none"), host);
        let spec = PluginLimits {
            memory: Some("32Mi".into()),
            deadline_milliseconds: Some(100),
            max_actions: Some(10),
            ..PluginLimits::default()
        };
        let limits = limits(Some(&spec), host).expect("valid");
        assert_eq!(limits.memory, 32 << 20);
        assert_eq!(limits.deadline, Duration::from_millis(100));
        assert_eq!(limits.output.actions, 10);
        assert_eq!(limits.output.object_bytes, host.output.object_bytes);
        let bad = PluginLimits {
            memory: Some("lots".into()),
            ..PluginLimits::default()
        };
        assert!(matches!(
            super::limits(Some(&bad), host),
            Err(SpecError::Memory(_))
        ));
    }

    #[test]
    fn a_tenant_plugin_should_run_under_a_name_no_other_plugin_can_have() {
        let tenant = ResourceId {
            namespace: Some("team-a".into()),
            name: "mover".into(),
        };
        let cluster = ResourceId {
            namespace: None,
            name: "mover".into(),
        };
        assert_eq!(tenant.plugin_name(), "team-a.mover");
        assert_eq!(cluster.plugin_name(), "mover");
        assert_eq!(tenant.checked_plugin_name().expect("valid"), "team-a.mover");
        // A ClusterPlugin's name may have dots, but then it is no plugin
        // name: it cannot pose as a tenant's.
        let posing = ResourceId {
            namespace: None,
            name: "team-a.mover".into(),
        };
        assert!(matches!(
            posing.checked_plugin_name(),
            Err(SpecError::Name(_))
        ));
        let dotted = ResourceId {
            namespace: Some("team-a".into()),
            name: "mover.x".into(),
        };
        assert!(dotted.checked_plugin_name().is_err());
        assert!(!kubewasm_runtime::is_plugin_name("team-a.mover.x"));
        assert!(!kubewasm_runtime::is_plugin_name(&"a".repeat(64)));
        assert_eq!(tenant.to_string(), "Plugin team-a/mover");
    }
}
