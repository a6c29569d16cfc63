//! Resource types, object keys and verbs: the identities the host and
//! plugins share.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A Kubernetes resource type: group, version, kind, plural and scope.
#[doc(alias = "GroupVersionKind")]
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    /// Version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural name used in URLs.
    pub plural: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

impl ResourceType {
    /// The `apiVersion` of objects of this type: `group/version`, or `version`
    /// for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The resource type of `K`.
    ///
    /// ```
    /// use kubewasm_core::ResourceType;
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// let ty = ResourceType::of::<Deployment>();
    /// assert_eq!((ty.group.as_str(), ty.plural.as_str(), ty.namespaced), ("apps", "deployments", true));
    /// ```
    #[cfg(feature = "k8s-openapi")]
    pub fn of<K: k8s_openapi::Resource>() -> Self
    where
        K::Scope: 'static,
    {
        use std::any::TypeId;
        Self {
            group: K::GROUP.to_owned(),
            version: K::VERSION.to_owned(),
            kind: K::KIND.to_owned(),
            plural: K::URL_PATH_SEGMENT.to_owned(),
            namespaced: TypeId::of::<K::Scope>()
                == TypeId::of::<k8s_openapi::NamespaceResourceScope>(),
        }
    }

    /// Whether `other` is the same kind of the same group, whatever the
    /// version named (a plugin may name another served version).
    pub fn same_kind(&self, other: &ResourceType) -> bool {
        self.group == other.group && self.kind == other.kind
    }

    /// Whether an object with this `apiVersion` and `kind` is of this type.
    pub fn is(&self, api_version: &str, kind: &str) -> bool {
        let (group, version) = split_api_version(api_version);
        self.group == group && self.version == version && self.kind == kind
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.kind)
    }
}

/// Splits an `apiVersion` into group and version (the group is empty for `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// The identity of one object of a known type: namespace (none when
/// cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectKey {
    /// Namespace; `None` for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A key in a namespace.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// A key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }

    /// The namespace the object of `resource` with this key counts as being
    /// in, for grants and events: its own; a Namespace, itself; another
    /// cluster-scoped object, none.
    pub fn placed_in(&self, resource: &ResourceType) -> Option<&str> {
        let is_namespace = resource.group.is_empty() && resource.kind == "Namespace";
        self.namespace
            .as_deref()
            .or(is_namespace.then_some(self.name.as_str()))
    }

    /// Another name in the same namespace.
    pub fn with_name(&self, name: impl Into<String>) -> Self {
        Self {
            namespace: self.namespace.clone(),
            name: name.into(),
        }
    }

    /// The key of an object, read from its `metadata`.
    pub fn of(object: &Value) -> Option<Self> {
        let metadata = object.get("metadata")?;
        let name = metadata.get("name")?.as_str()?.to_owned();
        let namespace = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .map(str::to_owned);
        Some(Self { namespace, name })
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Why a key did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid object key `{0}`: expected NAMESPACE/NAME or NAME")]
pub struct InvalidKey(String);

impl FromStr for ObjectKey {
    type Err = InvalidKey;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidKey(s.to_owned());
        match s.split_once('/') {
            Some((namespace, name)) => {
                if namespace.is_empty() || name.is_empty() || name.contains('/') {
                    return Err(invalid());
                }
                Ok(Self::namespaced(namespace, name))
            }
            None if s.is_empty() => Err(invalid()),
            None => Ok(Self::cluster(s)),
        }
    }
}

/// A verb a plugin may need on a resource type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verb {
    /// Read one object from the cache.
    Get,
    /// List objects from the cache.
    List,
    /// Be notified of changes.
    Watch,
    /// Create or update through server-side apply.
    Apply,
    /// Write the status subresource through server-side apply.
    ApplyStatus,
    /// Delete objects.
    Delete,
}

impl Verb {
    /// Every verb.
    pub const ALL: [Self; 6] = [
        Self::Get,
        Self::List,
        Self::Watch,
        Self::Apply,
        Self::ApplyStatus,
        Self::Delete,
    ];

    /// The verb's name as the WIT spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Apply => "apply",
            Self::ApplyStatus => "apply-status",
            Self::Delete => "delete",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_should_omit_core_group() {
        let ty = ResourceType {
            group: String::new(),
            version: "v1".into(),
            kind: "Service".into(),
            plural: "services".into(),
            namespaced: true,
        };
        assert_eq!(ty.api_version(), "v1");
        assert!(ty.is("v1", "Service"));
        assert!(!ty.is("apps/v1", "Service"));
    }

    #[test]
    fn key_should_parse_both_scopes_and_reject_garbage() {
        assert_eq!(
            "default/demo".parse::<ObjectKey>(),
            Ok(ObjectKey::namespaced("default", "demo"))
        );
        assert_eq!(
            "node-1".parse::<ObjectKey>(),
            Ok(ObjectKey::cluster("node-1"))
        );
        for bad in ["", "/x", "x/", "a/b/c"] {
            assert!(bad.parse::<ObjectKey>().is_err(), "{bad}");
        }
    }
}

/// A verb name that is not one of [`Verb::ALL`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown verb `{0}`")]
pub struct UnknownVerb(String);

impl FromStr for Verb {
    type Err = UnknownVerb;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownVerb(s.to_owned()))
    }
}
