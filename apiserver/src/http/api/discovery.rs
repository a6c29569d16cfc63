//! Discovery: `/version`, the group and resource lists, aggregated
//! discovery (`apidiscovery.k8s.io/v2`).
//!
//! Besides the registry's resources, the review resources are listed as a
//! real server lists them: create-only and cluster-scoped, in their groups
//! (`authentication.k8s.io/v1`, `authorization.k8s.io/v1`), though nothing
//! of them is stored ([`super::route::REVIEWS`]); `kubectl auth can-i create
//! subjectaccessreviews` and clients that check discovery first find them.

use serde_json::{Value, json};

use super::Api;
use super::route::{REVIEW_GROUPS, reviews};

impl Api {
    /// What `/version` says: the Kubernetes release whose API this serves.
    pub(super) fn version() -> Value {
        let release = kubewasm_types::KUBERNETES_RELEASE;
        let mut numbers = release.trim_start_matches('v').split('.');
        let (major, minor) = (numbers.next(), numbers.next());
        json!({
            "major": major, "minor": minor, "gitVersion": format!("{release}-kubewasm"), "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0", "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        })
    }

    pub(super) fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .registry()
            .groups()
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
            .chain(REVIEW_GROUPS.iter().map(|name| {
                let version = json!({"groupVersion": format!("{name}/v1"), "version": "v1"});
                json!({"name": name, "versions": [version], "preferredVersion": version})
            }))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// Aggregated discovery: every group (the core group for `/api`, the
    /// named ones for `/apis`) with its versions and resources in one reply.
    pub(super) fn aggregated(&self, core: bool) -> Value {
        let registry = self.registry();
        let items: Vec<Value> = registry
            .groups()
            .into_iter()
            .filter(|g| g.name.is_empty() == core)
            .map(|g| {
                let versions: Vec<Value> = g
                    .versions
                    .iter()
                    .map(|v| {
                        let resources: Vec<Value> = registry
                            .in_version(&g.name, v)
                            .map(|r| {
                                let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
                                let mut subresources = Vec::new();
                                if r.status {
                                    subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
                                }
                                if r.scale {
                                    subresources.push(json!({"subresource": "scale",
                                        "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                                        "verbs": ["get", "patch", "update"]}));
                                }
                                json!({
                                    "resource": r.plural,
                                    "responseKind": kind,
                                    "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                                    "singularResource": r.singular,
                                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                                    "shortNames": r.short_names,
                                    "categories": r.categories,
                                    "subresources": subresources,
                                })
                            })
                            .collect();
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": g.name}, "versions": versions})
            })
            .chain(REVIEW_GROUPS.iter().filter(|_| !core).map(|group| {
                let resources: Vec<Value> = reviews(group, "v1")
                    .map(|(plural, kind)| json!({
                        "resource": plural,
                        "responseKind": {"group": group, "version": "v1", "kind": kind},
                        "scope": "Cluster",
                        "singularResource": kind.to_lowercase(),
                        "verbs": ["create"],
                    }))
                    .collect();
                json!({"metadata": {"name": group}, "versions": [
                    {"version": "v1", "resources": resources, "freshness": "Current"}]})
            }))
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
    }

    pub(super) fn resource_list(&self, group: &str, version: &str) -> Value {
        let group_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        let mut resources = Vec::new();
        for r in self.registry().in_version(group, version) {
            resources.push(json!({
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                "shortNames": r.short_names,
                "categories": r.categories,
            }));
            for (sub, kind) in [("status", r.status), ("scale", r.scale)] {
                if kind {
                    resources.push(json!({
                        "name": format!("{}/{sub}", r.plural),
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": if sub == "scale" { "Scale" } else { r.kind.as_str() },
                        "verbs": ["get", "patch", "update"],
                    }));
                }
            }
        }
        for (plural, kind) in reviews(group, version) {
            resources.push(json!({
                "name": plural,
                "singularName": kind.to_lowercase(),
                "namespaced": false,
                "kind": kind,
                "verbs": ["create"],
            }));
        }
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
    }
}
