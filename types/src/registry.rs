//! Which resource types are served: every built-in type, plus the custom
//! resources of established CRDs. The API server's discovery, routing and
//! OpenAPI read from here; the host's REST mapper and `kubewasm types`
//! start from [`Registry::builtin`].

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::info::ResourceInfo;

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

    /// The served groups, each with its versions, preferred first: those
    /// its release serves in that server's order (the core group first),
    /// then the others (custom resources') by name.
    pub fn groups(&self) -> Vec<Group> {
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for r in self.resources.values() {
            let versions = groups.entry(r.group.as_str()).or_default();
            if !versions.contains(&r.version) {
                versions.push(r.version.clone());
            }
        }
        let release = crate::release::release();
        let recorded: Vec<(&str, &str)> = release
            .lists()
            .map(|(group, version, _)| (group, version))
            .collect();
        let position = |group: &str, version: &str| {
            recorded
                .iter()
                .position(|(g, v)| *g == group && *v == version)
                .unwrap_or(usize::MAX)
        };
        let mut groups: Vec<Group> = groups
            .into_iter()
            .map(|(name, mut versions)| {
                versions.sort_by_key(|v| (position(name, v), version_priority(v)));
                Group {
                    name: name.to_owned(),
                    versions,
                }
            })
            .collect();
        // Stable: the groups no release serves stay in name order.
        groups.sort_by_key(|g| release.group_position(&g.name).unwrap_or(usize::MAX));
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_should_serve_what_the_release_serves_once() {
        let registry = Registry::builtin();
        // The real server's discovery, recorded: every type it serves but
        // the create-only reviews and bindings, which k8s-openapi lists not.
        let recorded: serde_json::Value =
            serde_json::from_str(include_str!("release.json")).expect("JSON");
        let mut served: Vec<(String, String, bool)> = recorded["groupVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|gv| {
                let api_version = gv["groupVersion"].as_str().unwrap_or_default();
                gv["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |r| {
                        let plural = r["name"].as_str().unwrap_or_default();
                        let namespaced = r["namespaced"].as_bool().unwrap_or_default();
                        (
                            format!("{api_version}/{plural}"),
                            r["kind"].as_str().unwrap_or_default().to_owned(),
                            namespaced,
                        )
                    })
            })
            .filter(|(path, kind, _)| {
                !kind.ends_with("Review") && kind != "Binding" && !is_subresource(path)
            })
            .collect();
        let mut listed: Vec<(String, String, bool)> = registry
            .all()
            .map(|r| {
                let group_version = match r.group.as_str() {
                    "" => r.version.clone(),
                    group => format!("{group}/{}", r.version),
                };
                (
                    format!("{group_version}/{}", r.plural),
                    r.kind.clone(),
                    r.namespaced,
                )
            })
            .collect();
        served.sort();
        listed.sort();
        fn is_subresource(path: &str) -> bool {
            // `GROUP/VERSION/PLURAL/SUB`, or the core group's `v1/PLURAL/SUB`.
            path.split('/').count() > if path.starts_with("v1/") { 2 } else { 3 }
        }
        assert_eq!(listed, served);
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
