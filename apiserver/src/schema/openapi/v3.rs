//! `/openapi/v3`: what kubectl downloads before `create -f`, `apply` and
//! `explain`.
//!
//! The index lists every document by its path with `?hash=`, the SHA-512
//! of the document's text, as the real server does. The release's own
//! documents (every built-in group version, the groups, `/version`, …) are
//! served as the release published them ([`super::release`]); a custom
//! resources' group version gets the document
//! [`super::custom::v3_document`] writes. kubectl sends
//! `fieldValidation=Strict` to the kinds these documents vouch for and
//! leaves validation to the server.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha512};

use kubewasm_types::info::ResourceInfo;
use kubewasm_types::registry::Registry;

use super::release::release;

/// A document's path in the index (`apis/example.com/v1`).
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The custom resources served, by their group version's path.
fn custom_group_versions(
    registry: &Registry,
) -> std::collections::BTreeMap<String, Vec<&ResourceInfo>> {
    let mut by_path = std::collections::BTreeMap::<String, Vec<&ResourceInfo>>::new();
    for info in registry.all().filter(|info| info.custom) {
        let path = gv_path(&info.group, &info.version);
        if !release().v3.contains_key(&path) {
            by_path.entry(path).or_default().push(info);
        }
    }
    by_path
}

/// The index: one entry per document, in the order of their paths.
pub fn index(registry: &Registry) -> Value {
    let mut documents: Vec<(String, Vec<u8>)> = release()
        .v3
        .iter()
        .map(|(path, text)| (path.clone(), hash(text.as_bytes())))
        .collect();
    for (path, infos) in custom_group_versions(registry) {
        if let Some(document) = super::custom::v3_document(&infos) {
            documents.push((path, hash(super::custom::go_json(&document).as_bytes())));
        }
    }
    documents.sort();
    let paths: Map<String, Value> = documents
        .into_iter()
        .map(|(path, hash)| {
            let url = format!("/openapi/v3/{path}?hash={}", hex::encode_upper(hash));
            (path, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

fn hash(text: &[u8]) -> Vec<u8> {
    Sha512::digest(text).to_vec()
}

/// The text of the document at `path` (`apis/apps/v1`), if there is one.
pub fn document(registry: &Registry, path: &str) -> Option<String> {
    if let Some(text) = release().v3.get(path) {
        return Some(text.clone());
    }
    let mut customs = custom_group_versions(registry);
    let infos = customs.remove(path)?;
    super::custom::v3_document(&infos).map(|document| super::custom::go_json(&document))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::openapi::tests::with_myapps;

    #[test]
    fn the_index_should_point_at_every_document_by_its_hash() {
        let registry = with_myapps();
        let index = index(&registry);
        let paths = index["paths"].as_object().expect("paths");
        for (path, entry) in paths {
            let url = entry["serverRelativeURL"].as_str().unwrap_or_default();
            let text = document(&registry, path).expect("listed, served");
            let expected = format!(
                "/openapi/v3/{path}?hash={}",
                hex::encode_upper(hash(text.as_bytes()))
            );
            assert_eq!(url, expected);
        }
        for path in ["api/v1", "apis/apps/v1", "apis/example.com/v1", "version"] {
            assert!(paths.contains_key(path), "{path}");
        }
        assert!(document(&registry, "apis/nope/v1").is_none());
        assert!(document(&Registry::builtin(), "apis/example.com/v1").is_none());
    }

    #[test]
    fn a_built_in_document_should_be_the_releases() {
        let text = document(&Registry::builtin(), "apis/apps/v1").expect("apps/v1");
        let doc: Value = serde_json::from_str(&text).expect("JSON");
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        assert!(
            patch["parameters"]
                .as_array()
                .expect("parameters")
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"].is_object());
    }
}
