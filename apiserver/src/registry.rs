//! Which resource types the server serves: every built-in type, plus the
//! custom resources of established CRDs. Discovery, routing and OpenAPI
//! all read from here.
//!
//! # Caveat
//! Versions of one resource share one storage ([`ResourceInfo::storage_key`]
//! is group and plural). Objects are served with the requested `apiVersion`
//! but are not converted between schemas: what is read through another
//! version is what was written.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::store::ResourceKey;

/// Decodes an object into its typed form and encodes it back.
pub type TypedRoundTrip = fn(&serde_json::Value) -> Result<serde_json::Value, String>;

/// One served resource type at one version.
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Kind of its lists.
    pub list_kind: String,
    /// Plural name (the URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names (`cm`, `deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether it has a `status` subresource.
    pub status: bool,
    /// Whether it has a `scale` subresource.
    pub scale: bool,
    /// Whether it is a custom resource (served for a CRD).
    pub custom: bool,
    /// A custom resource's structural schema (`openAPIV3Schema`).
    pub schema: Option<std::sync::Arc<serde_json::Value>>,
    /// A built-in type's typed round trip (decode into its k8s-openapi type,
    /// encode back): what survives it is what the type knows, so strict field
    /// validation reports what does not.
    pub typed: Option<TypedRoundTrip>,
    /// A built-in kind's field-level OpenAPI schema: its own schema (a
    /// reference) and the definitions it uses.
    pub field_schema: Option<fn() -> FieldSchema>,
    /// A CRD version's `additionalPrinterColumns`, for tables.
    pub printer_columns: Vec<serde_json::Value>,
}

/// A kind's OpenAPI v3 schema: a `$ref` to it, and the component schemas
/// it refers to, by name (`io.k8s.api.apps.v1.Deployment`).
pub type FieldSchema = (
    serde_json::Value,
    serde_json::Map<String, serde_json::Value>,
);

impl ResourceInfo {
    /// Where its objects are stored: shared by all its versions.
    pub fn storage_key(&self) -> ResourceKey {
        ResourceKey::new(self.group.clone(), self.plural.clone())
    }

    /// The `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Kubernetes' version priority: GA before beta before alpha, then higher
/// numbers first (`v2` > `v1` > `v1beta2` > `v1beta1` > `v1alpha1`).
/// Versions outside that pattern sort last, alphabetically.
pub fn version_priority(version: &str) -> impl Ord + use<> {
    let parse = || -> Option<(u8, u32, u32)> {
        let rest = version.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u32 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        let (tier, number) = if let Some(n) = tail.strip_prefix("beta") {
            (2, n)
        } else {
            (1, tail.strip_prefix("alpha")?)
        };
        Some((tier, major, number.parse().ok()?))
    };
    match parse() {
        Some((tier, major, minor)) => {
            (Reverse(tier), Reverse(major), Reverse(minor), String::new())
        }
        None => (Reverse(0), Reverse(0), Reverse(0), version.to_owned()),
    }
}

/// A served API group: its versions, best first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Name; empty for the core group.
    pub name: String,
    /// Versions, preferred first.
    pub versions: Vec<String>,
}

/// The served resource types, keyed by group, version and plural.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    resources: BTreeMap<(String, String, String), ResourceInfo>,
}

impl Registry {
    /// Every built-in type.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        for info in crate::builtin::all() {
            registry.insert(info);
        }
        registry
    }

    /// Serves `info` (replacing an entry of the same group, version, plural).
    pub fn insert(&mut self, info: ResourceInfo) {
        let key = (
            info.group.clone(),
            info.version.clone(),
            info.plural.clone(),
        );
        self.resources.insert(key, info);
    }

    /// Stops serving every version of `group`'s `plural`; returns them.
    pub fn remove(&mut self, group: &str, plural: &str) -> Vec<ResourceInfo> {
        let keys: Vec<_> = self
            .resources
            .keys()
            .filter(|(g, _, p)| g == group && p == plural)
            .cloned()
            .collect();
        keys.into_iter()
            .filter_map(|k| self.resources.remove(&k))
            .collect()
    }

    /// The type served at `group`/`version`/`plural`.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceInfo> {
        self.resources
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }

    /// Every type served in `group`/`version`, by plural.
    pub fn in_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a ResourceInfo> + 'a {
        self.resources
            .values()
            .filter(move |r| r.group == group && r.version == version)
    }

    /// Every served type.
    pub fn all(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.resources.values()
    }

    /// The served groups (the core group first, then by name), each with
    /// its versions, preferred first.
    pub fn groups(&self) -> Vec<Group> {
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for r in self.resources.values() {
            let versions = groups.entry(r.group.as_str()).or_default();
            if !versions.contains(&r.version) {
                versions.push(r.version.clone());
            }
        }
        groups
            .into_iter()
            .map(|(name, mut versions)| {
                versions.sort_by_key(|v| version_priority(v));
                Group {
                    name: name.to_owned(),
                    versions,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_should_serve_every_k8s_openapi_type_once() {
        let registry = Registry::builtin();
        assert_eq!(registry.all().count(), 81);
        let cm = registry.get("", "v1", "configmaps").expect("configmaps");
        assert_eq!(
            (cm.kind.as_str(), cm.list_kind.as_str(), cm.namespaced),
            ("ConfigMap", "ConfigMapList", true)
        );
        assert_eq!(cm.short_names, ["cm"]);
        let deploy = registry
            .get("apps", "v1", "deployments")
            .expect("deployments");
        assert!(deploy.status && deploy.scale && deploy.categories == ["all"]);
        let ns = registry.get("", "v1", "namespaces").expect("namespaces");
        assert!(!ns.namespaced && ns.status);
        let crd = registry
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .expect("crds");
        assert_eq!(crd.short_names, ["crd", "crds"]);
    }

    #[test]
    fn groups_should_prefer_stable_then_newer_versions() {
        let groups = Registry::builtin().groups();
        let versions = |name: &str| {
            groups
                .iter()
                .find(|g| g.name == name)
                .map(|g| g.versions.clone())
                .unwrap_or_default()
        };
        assert_eq!(groups[0].name, "", "the core group first");
        assert_eq!(versions("autoscaling"), ["v2", "v1"]);
        assert_eq!(
            versions("resource.k8s.io"),
            ["v1beta2", "v1beta1", "v1alpha3"]
        );
        assert_eq!(versions("admissionregistration.k8s.io")[0], "v1");
    }

    #[test]
    fn version_priority_should_follow_kubernetes() {
        let mut versions = [
            "v1alpha1", "v1", "v2beta1", "v1beta2", "v2", "foo", "v1beta1", "v10",
        ];
        versions.sort_by_key(|v| version_priority(v));
        assert_eq!(
            versions,
            [
                "v10", "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }

    #[test]
    fn remove_should_drop_every_version_of_a_resource() {
        let mut registry = Registry::builtin();
        let removed = registry.remove("autoscaling", "horizontalpodautoscalers");
        assert_eq!(removed.len(), 2);
        assert!(
            registry
                .get("autoscaling", "v1", "horizontalpodautoscalers")
                .is_none()
        );
    }
}
