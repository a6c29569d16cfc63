//! What the server of the Kubernetes release kubewasm speaks serves by
//! default, recorded from it by `tests/real-cluster/discovery`
//! (`release.json`): every group version's `APIResourceList` as its legacy
//! discovery answers it, subresources included, in its order.
//!
//! The built-in types' table ([`crate::registry::Registry::builtin`]) takes
//! from it what k8s-openapi's description of a type does not say: its
//! singular name, short names, categories and verbs, and whether it has
//! `status` and `scale`. The embedded API server's discovery serves its
//! entries as recorded, and the mapper `kubewasm replay` uses knows the
//! types only a server serves (`bindings`, the reviews) from it.

use std::sync::LazyLock;

use serde_json::Value;

/// The recorded discovery, as `tests/real-cluster/discovery` writes it.
pub const RECORDED: &str = include_str!("release.json");

/// The recorded discovery, read once. (Recorded from a real server; a test
/// beside checks that it reads whole.)
static RELEASE: LazyLock<Release> = LazyLock::new(|| {
    let recorded: Value = serde_json::from_str(RECORDED).unwrap_or_default();
    let lists = recorded["groupVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|list| {
            let group_version = list["groupVersion"].as_str().unwrap_or_default();
            let (group, version) = match group_version.split_once('/') {
                Some((group, version)) => (group, version),
                None => ("", group_version),
            };
            ResourceList {
                group: group.to_owned(),
                version: version.to_owned(),
                resources: list["resources"].as_array().cloned().unwrap_or_default(),
            }
        })
        .collect();
    Release {
        version: recorded["version"].as_str().unwrap_or_default().to_owned(),
        lists,
    }
});

/// The release's discovery.
#[derive(Debug)]
pub struct Release {
    version: String,
    lists: Vec<ResourceList>,
}

/// One group version's resources, subresources included.
#[derive(Debug)]
struct ResourceList {
    group: String,
    version: String,
    resources: Vec<Value>,
}

/// The recorded release.
pub fn release() -> &'static Release {
    &RELEASE
}

impl Release {
    /// Its `/version`'s `gitVersion` (`v1.37.2`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Every group version: group (empty for the core group), version, and
    /// its `APIResource` entries as recorded.
    pub fn lists(&self) -> impl Iterator<Item = (&str, &str, &[Value])> {
        self.lists
            .iter()
            .map(|l| (l.group.as_str(), l.version.as_str(), l.resources.as_slice()))
    }

    /// Where `group` comes in the server's order of its groups (the core
    /// group first), if it serves it.
    pub fn group_position(&self, group: &str) -> Option<usize> {
        self.lists.iter().position(|l| l.group == group)
    }

    /// The entries of `group`/`version`, subresources included, in the
    /// server's order (none for a group version it does not serve).
    pub fn entries(&self, group: &str, version: &str) -> impl Iterator<Item = Entry<'_>> {
        self.list(group, version).iter().map(Entry)
    }

    fn list(&self, group: &str, version: &str) -> &[Value] {
        self.lists
            .iter()
            .find(|l| l.group == group && l.version == version)
            .map_or(&[], |l| l.resources.as_slice())
    }

    /// The `APIResource` entry of `plural` in `group`/`version`.
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<Entry<'_>> {
        self.list(group, version)
            .iter()
            .find(|r| r["name"] == plural)
            .map(Entry)
    }

    /// The entries of `plural`'s subresources (`pods/status`, `pods/log`),
    /// in the server's order.
    pub fn subresources<'a>(
        &'a self,
        group: &str,
        version: &str,
        plural: &'a str,
    ) -> impl Iterator<Item = Entry<'a>> + 'a {
        self.list(group, version)
            .iter()
            .filter(move |r| {
                r["name"]
                    .as_str()
                    .and_then(|name| name.strip_prefix(plural))
                    .is_some_and(|rest| rest.starts_with('/'))
            })
            .map(Entry)
    }
}

/// One `APIResource` of the recorded discovery.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a>(&'a Value);

impl<'a> Entry<'a> {
    /// The entry as the server answered it.
    pub fn value(self) -> &'a Value {
        self.0
    }

    /// Its name: a plural, or `plural/subresource`.
    pub fn name(self) -> &'a str {
        self.0["name"].as_str().unwrap_or_default()
    }

    /// The subresource it is (`status`), if it is one.
    pub fn subresource(self) -> Option<&'a str> {
        self.name().split_once('/').map(|(_, sub)| sub)
    }

    /// Its kind.
    pub fn kind(self) -> &'a str {
        self.0["kind"].as_str().unwrap_or_default()
    }

    /// Its singular name (empty for a subresource).
    pub fn singular(self) -> &'a str {
        self.0["singularName"].as_str().unwrap_or_default()
    }

    /// Whether it is namespaced.
    pub fn namespaced(self) -> bool {
        self.0["namespaced"].as_bool().unwrap_or_default()
    }

    /// The group and version of its kind when not its own (a `scale`
    /// subresource's `autoscaling/v1`).
    pub fn kind_group_version(self) -> Option<(&'a str, &'a str)> {
        Some((
            self.0.get("group")?.as_str()?,
            self.0.get("version")?.as_str()?,
        ))
    }

    fn strings(self, field: &str) -> Vec<String> {
        self.0[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    }

    /// Whether it lists `verb`.
    pub fn has_verb(self, verb: &str) -> bool {
        self.0["verbs"]
            .as_array()
            .is_some_and(|verbs| verbs.iter().any(|v| v == verb))
    }

    /// Its verbs (`get`, `list`, `watch`, …).
    pub fn verbs(self) -> Vec<String> {
        self.strings("verbs")
    }

    /// Its short names (`cm`).
    pub fn short_names(self) -> Vec<String> {
        self.strings("shortNames")
    }

    /// Its categories (`all`).
    pub fn categories(self) -> Vec<String> {
        self.strings("categories")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recording_should_read_whole() {
        let recorded: Value = serde_json::from_str(RECORDED).expect("JSON");
        let release = release();
        assert!(
            release.version().starts_with("v1."),
            "{}",
            release.version()
        );
        assert_eq!(
            release.lists().count(),
            recorded["groupVersions"].as_array().map_or(0, Vec::len)
        );
        for (group, version, resources) in release.lists() {
            assert!(
                !version.is_empty() && !resources.is_empty(),
                "{group}/{version}"
            );
            for resource in resources.iter().map(Entry) {
                assert!(!resource.name().is_empty() && !resource.kind().is_empty());
                assert!(
                    !resource.verbs().is_empty(),
                    "{group}/{version} {}",
                    resource.name()
                );
            }
        }
    }

    #[test]
    fn a_resource_should_have_its_entry_and_its_subresources() {
        let release = release();
        let pods = release.resource("", "v1", "pods").expect("pods");
        assert_eq!(
            (pods.kind(), pods.singular(), pods.namespaced()),
            ("Pod", "pod", true)
        );
        assert_eq!(pods.short_names(), ["po"]);
        assert_eq!(pods.categories(), ["all"]);
        let subresources: Vec<_> = release
            .subresources("", "v1", "pods")
            .filter_map(Entry::subresource)
            .collect();
        assert!(subresources.contains(&"status") && subresources.contains(&"log"));
        assert!(release.subresources("", "v1", "pod").next().is_none());
        let scale = release
            .subresources("apps", "v1", "deployments")
            .find(|s| s.subresource() == Some("scale"))
            .expect("deployments/scale");
        assert_eq!(scale.kind_group_version(), Some(("autoscaling", "v1")));
        let namespaces = release
            .resource("", "v1", "namespaces")
            .expect("namespaces");
        assert!(!namespaces.verbs().contains(&"deletecollection".to_owned()));
    }
}
