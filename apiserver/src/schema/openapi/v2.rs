//! `/openapi/v2`: one Swagger 2.0 document of every served kind.
//!
//! kubectl reads it (as [`super::gnostic`]'s protobuf) to validate on the
//! client what the v3 documents cannot vouch for, the items of a `v1 List`
//! above all: an item of a kind it finds here is checked field by field
//! (`ValidationError(Deployment.spec): unknown field "replicass"`), an item
//! of a kind it does not find is left to the server. Go's parser of the
//! document (kube-openapi's `proto.NewOpenAPIData`) refuses it whole for one
//! reference to a missing definition, one array without one item schema or
//! one schema of several types.
//!
//! It is the release's document ([`super::release`]) with each custom
//! resource's paths and definitions ([`super::custom::add_to_v2`]) among
//! the built-in ones, in the order of their names, as the real server
//! merges them.

use serde_json::{Map, Value, json};

use kubewasm_types::registry::Registry;

use super::release::release;

/// The document.
pub fn document(registry: &Registry) -> Value {
    let mut document: Value = serde_json::from_str(&release().v2)
        .unwrap_or_else(|_| json!({"swagger": "2.0", "paths": {}, "definitions": {}}));
    let (mut paths, mut definitions) = (Map::new(), Map::new());
    for info in registry.all().filter(|info| info.custom) {
        super::custom::add_to_v2(info, &mut paths, &mut definitions);
    }
    for (section, mut added) in [("paths", paths), ("definitions", definitions)] {
        if added.is_empty() {
            continue;
        }
        if let Some(Value::Object(into)) = document.get_mut(section) {
            into.append(&mut added);
            into.sort_keys();
        }
    }
    document
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::openapi::tests::with_myapps;

    /// Every `$ref` in `value`.
    fn references(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    match item {
                        Value::String(r) if key == "$ref" => out.push(r.clone()),
                        _ => references(item, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| references(i, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_should_name_a_definition_and_every_array_one_item_schema() {
        let doc = document(&with_myapps());
        let mut found = Vec::new();
        references(&doc, &mut found);
        assert!(found.len() > 1000, "{}", found.len());
        for reference in found {
            let named = match reference.split_once("/") {
                Some(("#", rest)) => rest.split_once('/').map(|(section, name)| {
                    doc[section]
                        .as_object()
                        .is_some_and(|s| s.contains_key(name))
                }),
                _ => None,
            };
            assert_eq!(named, Some(true), "{reference} names nothing");
        }
        fn check(value: &Value, at: &str) {
            if let Value::Object(map) = value {
                if map.get("type") == Some(&json!("array")) {
                    assert!(
                        map["items"].is_object(),
                        "{at}: an array without one item schema"
                    );
                }
                assert!(
                    !map.get("type").is_some_and(Value::is_array),
                    "{at}: several types"
                );
                for (key, item) in map {
                    check(item, &format!("{at}.{key}"));
                }
            }
        }
        for (name, schema) in doc["definitions"].as_object().expect("definitions") {
            check(schema, name);
        }
    }

    #[test]
    fn kinds_and_lists_should_be_found_by_their_group_version_kind() {
        let doc = document(&with_myapps());
        let kinds: Vec<(String, String)> = doc["definitions"]
            .as_object()
            .expect("definitions")
            .iter()
            .flat_map(|(name, schema)| {
                schema["x-kubernetes-group-version-kind"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |gvk| {
                        (
                            name.clone(),
                            gvk["kind"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
            })
            .collect();
        for (name, kind) in [
            ("io.k8s.api.apps.v1.Deployment", "Deployment"),
            ("io.k8s.api.apps.v1.DeploymentList", "DeploymentList"),
            ("io.k8s.api.core.v1.ConfigMap", "ConfigMap"),
            ("com.example.v1.MyApp", "MyApp"),
            ("com.example.v1.MyAppList", "MyAppList"),
        ] {
            assert!(
                kinds.contains(&(name.into(), kind.into())),
                "{name} as {kind}"
            );
        }
        assert_eq!(
            doc["definitions"]["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        // A field named as a keyword is a field.
        let props = &doc["definitions"]["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]
            ["properties"];
        for field in ["allOf", "anyOf", "oneOf", "not", "nullable"] {
            assert!(props[field].is_object(), "{field}");
        }
        assert_eq!(
            doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"],
            "int-or-string"
        );
        let deployment = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        assert_eq!(deployment["patch"]["x-kubernetes-action"], "patch");
        assert_eq!(deployment["parameters"][0]["name"], "name");
    }
}
