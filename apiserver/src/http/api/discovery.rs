//! Discovery: `/version`, the group and resource lists, aggregated
//! discovery (`apidiscovery.k8s.io/v2`).
//!
//! A built-in type is listed as its release's server lists it
//! ([`kubewasm_types::release`], recorded from it): its entry whole (verbs,
//! short names, categories, storage version hash), then those of its
//! subresources this server serves, in that server's order, its groups in
//! its order. A custom resource is listed as a real server lists a CRD's.
//! The review resources and the core group's `bindings` are listed as a
//! real server lists them, create-only, though nothing of them is stored
//! ([`super::route::served_apart`]): `kubectl auth can-i create
//! subjectaccessreviews` and clients that check discovery first find them.
//! A subresource a real server serves and this one does not (`pods/exec`,
//! `pods/eviction`) is not listed.

use kubewasm_types::info::ResourceInfo;
use kubewasm_types::registry::Group;
use kubewasm_types::release::{Entry, release};
use serde_json::{Value, json};

use super::Api;
use super::route::{REVIEW_GROUPS, served_apart};
use super::shape;

/// A custom resource's verbs, in the order a real server lists a CRD's.
const CUSTOM_VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

impl Api {
    /// What `/version` says: the Kubernetes release whose API this serves,
    /// emulating itself and compatible with the release before, as a real
    /// server of it says; what built it is this server's own.
    pub(super) fn version() -> Value {
        let release = kubewasm_types::KUBERNETES_RELEASE;
        let mut numbers = release.trim_start_matches('v').split('.');
        let (major, minor) = (numbers.next().unwrap_or("1"), numbers.next().unwrap_or("0"));
        let previous = minor
            .parse::<u32>()
            .map_or_else(|_| minor.to_owned(), |m| m.saturating_sub(1).to_string());
        json!({
            "major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
            "minCompatibilityMajor": major, "minCompatibilityMinor": previous,
            "gitVersion": format!("{release}-kubewasm"), "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0", "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
        })
    }

    /// Every served group, the review groups among them, in the release's
    /// order, then the custom resources' by name.
    fn served_groups(&self) -> Vec<Group> {
        let mut groups = self.registry().groups();
        for name in REVIEW_GROUPS {
            if !groups.iter().any(|g| g.name == name) {
                groups.push(Group {
                    name: name.to_owned(),
                    versions: vec!["v1".to_owned()],
                });
            }
        }
        groups.sort_by_key(|g| release().group_position(&g.name).unwrap_or(usize::MAX));
        groups
    }

    pub(super) fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .served_groups()
            .into_iter()
            .filter(|g| !g.name.is_empty())
            .map(|g| {
                let versions: Vec<Value> = g
                    .versions
                    .iter()
                    .map(|v| json!({"groupVersion": format!("{}/{v}", g.name), "version": v}))
                    .collect();
                json!({"name": g.name, "versions": versions, "preferredVersion": versions[0]})
            })
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// The `APIResource` entries of `group`/`version`: a built-in group
    /// version's as recorded, what this server serves of them; another's
    /// built from its custom resources.
    fn entries(&self, group: &str, version: &str) -> Vec<Value> {
        let registry = self.registry();
        let recorded: Vec<Entry<'_>> = release().entries(group, version).collect();
        if recorded.is_empty() {
            return registry
                .in_version(group, version)
                .flat_map(custom_entries)
                .collect();
        }
        recorded
            .into_iter()
            .filter(|entry| match entry.name().split_once('/') {
                None => {
                    registry.get(group, version, entry.name()).is_some()
                        || served_apart(group, version, entry.name())
                }
                Some((plural, sub)) => registry
                    .get(group, version, plural)
                    .is_some_and(|info| shape::serves(info, sub)),
            })
            .map(|entry| entry.value().clone())
            .collect()
    }

    /// Aggregated discovery: every group (the core group for `/api`, the
    /// named ones for `/apis`) with its versions and resources in one
    /// reply, each resource with its subresources, made of the entries the
    /// legacy lists serve as a real server makes it of them (a kind of the
    /// resource's own group and version named with neither).
    pub(super) fn aggregated(&self, core: bool) -> Value {
        let items: Vec<Value> = self
            .served_groups()
            .into_iter()
            .filter(|g| g.name.is_empty() == core)
            .map(|g| {
                let versions: Vec<Value> = g
                    .versions
                    .iter()
                    .map(|v| {
                        let entries = self.entries(&g.name, v);
                        // A built-in kind of the resource's own group and
                        // version is named with neither; a custom one with both.
                        let own = if release().entries(&g.name, v).next().is_some() {
                            ("", "")
                        } else {
                            (g.name.as_str(), v.as_str())
                        };
                        let resources: Vec<Value> = entries
                            .iter()
                            .filter(|e| !name_of(e).contains('/'))
                            .map(|e| aggregated_resource(e, &entries, own))
                            .collect();
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                // The core group's item names no group, as a real server's.
                let metadata = if g.name.is_empty() {
                    json!({})
                } else {
                    json!({"name": g.name})
                };
                json!({"metadata": metadata, "versions": versions})
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
    }

    pub(super) fn resource_list(&self, group: &str, version: &str) -> Value {
        let group_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        let resources = self.entries(group, version);
        if group.is_empty() {
            // The core group's list has no `apiVersion`, as a real server's.
            json!({"kind": "APIResourceList", "groupVersion": group_version, "resources": resources})
        } else {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
        }
    }
}

/// This machine's architecture as Go names it (`amd64`, `arm64`), as a
/// real server's `platform` says it.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

fn name_of(entry: &Value) -> &str {
    entry["name"].as_str().unwrap_or_default()
}

/// A custom resource's entries as a real server lists a CRD's: the
/// resource, then its `status` and `scale` subresources.
fn custom_entries(r: &ResourceInfo) -> Vec<Value> {
    let mut entries = vec![json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": CUSTOM_VERBS,
        "shortNames": r.short_names,
        "categories": r.categories,
        "storageVersionHash": r.storage_version_hash,
    })];
    for (sub, served) in [("status", r.status), ("scale", r.scale)] {
        if served {
            let mut entry = json!({"name": format!("{}/{sub}", r.plural), "singularName": "",
                "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]});
            if sub == "scale" {
                entry["group"] = "autoscaling".into();
                entry["version"] = "v1".into();
                entry["kind"] = "Scale".into();
            }
            entries.push(entry);
        }
    }
    for entry in &mut entries {
        for field in ["shortNames", "categories", "storageVersionHash"] {
            let empty =
                entry[field].is_null() || entry[field].as_array().is_some_and(Vec::is_empty);
            if empty && let Some(map) = entry.as_object_mut() {
                map.shift_remove(field);
            }
        }
    }
    entries
}

/// The kind an entry names, as aggregated discovery writes it: the group
/// and version the entry names, or `own`.
fn response_kind(entry: &Value, (group, version): (&str, &str)) -> Value {
    json!({
        "group": entry.get("group").cloned().unwrap_or_else(|| group.into()),
        "version": entry.get("version").cloned().unwrap_or_else(|| version.into()),
        "kind": entry["kind"],
    })
}

/// One resource of aggregated discovery, from its legacy entry and those
/// of its subresources among `entries`.
fn aggregated_resource(entry: &Value, entries: &[Value], own: (&str, &str)) -> Value {
    let name = name_of(entry);
    let mut resource = json!({
        "resource": name,
        "responseKind": response_kind(entry, own),
        "scope": if entry["namespaced"] == true { "Namespaced" } else { "Cluster" },
        "singularResource": entry["singularName"],
        "verbs": entry["verbs"],
    });
    for list in ["shortNames", "categories"] {
        if entry[list].as_array().is_some_and(|l| !l.is_empty()) {
            resource[list] = entry[list].clone();
        }
    }
    let subresources: Vec<Value> = entries
        .iter()
        .filter_map(|e| {
            let sub = name_of(e).strip_prefix(name)?.strip_prefix('/')?;
            Some(json!({"subresource": sub, "responseKind": response_kind(e, own), "verbs": e["verbs"]}))
        })
        .collect();
    if !subresources.is_empty() {
        resource["subresources"] = subresources.into();
    }
    resource
}
