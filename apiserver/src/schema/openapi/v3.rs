//! `/openapi/v3`: what kubectl downloads before `create -f`, `apply` and
//! `explain`.
//!
//! Each group-version document lists, for every resource, its collection
//! and item paths with their operations, a `fieldValidation` parameter on
//! writes (kubectl then sends `fieldValidation=Strict` and leaves validation
//! to the server), and a schema per kind carrying
//! `x-kubernetes-group-version-kind`. Built-in kinds have field-level
//! schemas (k8s-openapi's, with every field's description and type, so
//! `kubectl explain deployments.spec.replicas` works); custom resources
//! have open objects here (their CRD schemas are enforced by
//! [`crate::schema::structural`]).

use serde_json::{Map, Value, json};

use kubewasm_types::info::ResourceInfo;
use kubewasm_types::registry::Registry;

/// Where a v3 document's references point.
const PREFIX: &str = "#/components/schemas/";

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A stable hash of what a group-version serves, for `?hash=`.
fn hash(registry: &Registry, group: &str, version: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for r in registry.in_version(group, version) {
        for b in r
            .kind
            .bytes()
            .chain(r.plural.bytes())
            .chain([u8::from(r.status), u8::from(r.scale)])
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016X}")
}

/// The index: one entry per served group-version.
pub fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for group in registry.groups() {
        for version in &group.versions {
            let path = gv_path(&group.name, version);
            let url = format!(
                "/openapi/v3/{path}?hash={}",
                hash(registry, &group.name, version)
            );
            paths.insert(path, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

fn operation(info: &ResourceInfo, schema: &str, verb: &str, write: bool) -> Value {
    let mut op = json!({
        "operationId": format!("{verb}{}", info.kind),
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": super::gvk(info),
        "responses": {"200": {"description": "OK", "content": {"application/json": {
            "schema": {"$ref": format!("{PREFIX}{schema}")}}}}},
    });
    if write {
        op["parameters"] = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
    }
    op
}

/// The document of one group-version, if it is served.
pub fn document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for info in registry.in_version(group, version) {
        let name = match super::add_builtin(&mut schemas, info, PREFIX) {
            Some(name) => name,
            None => {
                let name = super::reversed_name(info);
                schemas.insert(
                    name.clone(),
                    json!({
                        "type": "object",
                        "description": format!("{} is a {} resource.", info.kind, info.api_version()),
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                        },
                        "x-kubernetes-preserve-unknown-fields": true,
                        "x-kubernetes-group-version-kind": [super::gvk(info)],
                    }),
                );
                name
            }
        };
        let collection = super::collection_path(info);
        paths.insert(
            collection.clone(),
            json!({"get": operation(info, &name, "list", false), "post": operation(info, &name, "post", true)}),
        );
        let item = json!({
            "get": operation(info, &name, "get", false),
            "put": operation(info, &name, "put", true),
            "patch": operation(info, &name, "patch", true),
            "delete": operation(info, &name, "delete", false),
        });
        paths.insert(format!("{collection}/{{name}}"), item.clone());
        if info.status {
            paths.insert(format!("{collection}/{{name}}/status"), item);
        }
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": super::info_version()},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_should_point_at_every_group_version() {
        let registry = Registry::builtin();
        let index = index(&registry);
        let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap_or_default();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        assert!(index["paths"]["api/v1"].is_object());
    }

    #[test]
    fn documents_should_carry_gvk_and_field_validation() {
        let registry = Registry::builtin();
        let doc = document(&registry, "apps", "v1").expect("apps/v1");
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        assert_eq!(patch["parameters"][0]["name"], "fieldValidation");
        assert!(doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"].is_object());
        assert!(document(&registry, "nope", "v1").is_none());
    }
}
