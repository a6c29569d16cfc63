//! `/openapi/v2`: one Swagger 2.0 document of every served kind.
//!
//! kubectl reads it (as [`super::gnostic`]'s protobuf) to validate on the
//! client what the v3 documents cannot vouch for, the items of a `v1 List`
//! above all: an item of a kind it finds here is checked field by field
//! (`ValidationError(Deployment.spec): unknown field "replicass"`), an item
//! of a kind it does not find is left to the server. Go's parser of the
//! document (kube-openapi's `proto.NewOpenAPIData`) refuses it whole for one
//! reference to a missing definition, one array without one item schema or
//! one schema of several types, so every definition a schema names is here.
//!
//! # What it holds
//! - `definitions`: every built-in kind's schema and those it uses
//!   (k8s-openapi's, as in v3), every custom resource's made fit for v2 as
//!   the real server makes it (below), each kind's list, and the schemas
//!   the operations name (`Status`, `DeleteOptions`, `Patch`). A kind's and
//!   a list's schema carry `x-kubernetes-group-version-kind`.
//! - `paths`: each resource's collection, item and status, with their
//!   operations (`x-kubernetes-action`, the kind, the write parameters).
//!
//! # A custom resource's schema (apiextensions-apiserver's `BuildOpenAPIV2`)
//! As the real server publishes it (Kubernetes 1.37.2, checked case by case
//! in the tests): what Swagger 2.0 cannot say, or what kubectl would read
//! too strictly, is left out, never guessed; the server still enforces the
//! whole schema.
//! - Value validations (`format`, bounds, `pattern`, `enum`, `required`, …)
//!   and extensions (CEL rules among them) are kept; defaults and
//!   `allOf`/`anyOf`/`oneOf`/`not` are dropped.
//! - A nullable schema, or one that keeps unknown fields, loses its type,
//!   items and properties; an array left without items, its type; a
//!   nullable property is not required.
//! - A root that keeps unknown fields is an open object; any other gets
//!   `apiVersion` and `kind` as strings and `metadata` as `ObjectMeta`, and
//!   so does each embedded resource inside it (which then requires `kind`
//!   and `apiVersion`).

use serde_json::{Map, Value, json};

use kubewasm_types::info::ResourceInfo;
use kubewasm_types::registry::Registry;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// Where a v2 document's references point.
const PREFIX: &str = "#/definitions/";

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// The document.
pub fn document(registry: &Registry) -> Value {
    let mut definitions = Map::new();
    for (_, used) in [
        kubewasm_types::field_schema::<meta::ObjectMeta>(),
        kubewasm_types::field_schema::<meta::ListMeta>(),
        kubewasm_types::field_schema::<meta::Status>(),
        kubewasm_types::field_schema::<meta::DeleteOptions>(),
        kubewasm_types::field_schema::<meta::Patch>(),
    ] {
        super::add_definitions(&mut definitions, used, PREFIX);
    }
    let mut paths = Map::new();
    for info in registry.all() {
        let name = match super::add_builtin(&mut definitions, info, PREFIX) {
            Some(name) => name,
            None => {
                let name = super::reversed_name(info);
                definitions.insert(name.clone(), custom_kind(info));
                name
            }
        };
        let list = match name.rsplit_once('.') {
            Some((prefix, _)) => format!("{prefix}.{}", info.list_kind),
            None => info.list_kind.clone(),
        };
        definitions.insert(list.clone(), list_kind(info, &name));
        resource_paths(&mut paths, info, &name, &list);
    }
    for (name, schema) in definitions.iter_mut() {
        as_swagger_2(schema);
        if let Some(mut published) = published_as(name) {
            if let Some(description) = schema.get("description") {
                published["description"] = description.clone();
            }
            *schema = published;
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": super::info_version()},
        "paths": paths,
        "definitions": definitions,
    })
}

/// What the real server publishes in v2 for the built-in definitions
/// k8s-openapi describes otherwise (less the description): an
/// int-or-string and a quantity are strings (which kubectl lets a number
/// be), JSON any value.
fn published_as(name: &str) -> Option<Value> {
    match name {
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => {
            Some(json!({"type": "string", "format": "int-or-string"}))
        }
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => Some(json!({"type": "string"})),
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON" => Some(json!({})),
        _ => None,
    }
}

/// An OpenAPI 3.0 schema as Swagger 2.0 writes it. A reference with a
/// description, `{"description": …, "allOf": [{"$ref": …}]}` in 3.0, is
/// `$ref` beside the description (Go's reader takes a schema of `allOf`
/// alone for an arbitrary value and would check nothing under it); 2.0 has
/// no `oneOf`, `anyOf`, `not` or `nullable`.
fn as_swagger_2(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    if let Some(Value::Array(all_of)) = map.get("allOf")
        && let [Value::Object(only)] = all_of.as_slice()
        && only.len() == 1
        && let Some(reference) = only.get("$ref").cloned()
    {
        map.remove("allOf");
        map.insert("$ref".into(), reference);
    }
    for key in ["oneOf", "anyOf", "not", "nullable"] {
        map.remove(key);
    }
    // Only where schemas are: `properties` names fields, not keywords.
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(as_swagger_2);
    }
    for key in ["items", "additionalProperties", "allOf"] {
        match map.get_mut(key) {
            Some(Value::Array(schemas)) => schemas.iter_mut().for_each(as_swagger_2),
            Some(one) => as_swagger_2(one),
            None => {}
        }
    }
}

/// A kind's list: `apiVersion`, `kind`, `metadata` and its `items`.
fn list_kind(info: &ResourceInfo, item: &str) -> Value {
    let mut properties = Map::new();
    properties.insert(
        "items".into(),
        json!({
            "description": format!("List of {}.", info.plural),
            "type": "array",
            "items": {"$ref": format!("{PREFIX}{item}")},
        }),
    );
    properties.insert(
        "metadata".into(),
        json!({"description": "Standard list metadata.", "$ref": format!("{PREFIX}{LIST_META}")}),
    );
    add_type_meta(&mut properties);
    json!({
        "description": format!("{} is a list of {}", info.list_kind, info.kind),
        "type": "object",
        "required": ["items"],
        "properties": properties,
        "x-kubernetes-group-version-kind": [{
            "group": info.group, "version": info.version, "kind": info.list_kind,
        }],
    })
}

/// `apiVersion` and `kind` added to `properties`.
fn add_type_meta(properties: &mut Map<String, Value>) {
    properties.insert(
        "apiVersion".into(),
        json!({
            "description": "APIVersion defines the versioned schema of this representation of an object.",
            "type": "string",
        }),
    );
    properties.insert(
        "kind".into(),
        json!({
            "description": "Kind is a string value representing the REST resource this object represents.",
            "type": "string",
        }),
    );
}

/// `apiVersion`, `kind` and `metadata` added to an object's `properties`.
fn add_object_properties(schema: &mut Map<String, Value>) {
    let mut properties = match schema.remove("properties") {
        Some(Value::Object(properties)) => properties,
        _ => Map::new(),
    };
    add_type_meta(&mut properties);
    properties.insert(
        "metadata".into(),
        json!({"description": "Standard object's metadata.", "$ref": format!("{PREFIX}{OBJECT_META}")}),
    );
    schema.insert("properties".into(), Value::Object(properties));
}

/// A custom resource's schema, made fit for v2 (see the module's docs).
fn custom_kind(info: &ResourceInfo) -> Value {
    let keeps_unknown = |schema: &Value| {
        schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
    };
    let mut schema = match info.schema.as_deref() {
        Some(schema) if !keeps_unknown(schema) => {
            let mut fit = fit_for_v2(schema);
            add_object_properties(&mut fit);
            fit
        }
        // kubectl would refuse every field but these three if any were
        // named, so an open root names none.
        _ => Map::from_iter([("type".to_owned(), json!("object"))]),
    };
    schema.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([super::gvk(info)]),
    );
    Value::Object(schema)
}

/// A structural schema made fit for v2 and for kubectl (see the module's
/// docs).
fn fit_for_v2(schema: &Value) -> Map<String, Value> {
    let mut fit = Map::new();
    let Value::Object(schema) = schema else {
        return fit;
    };
    let flag = |schema: &Map<String, Value>, key: &str| schema.get(key) == Some(&Value::Bool(true));
    for (key, value) in schema {
        let kept = match key.as_str() {
            "default" | "nullable" | "allOf" | "anyOf" | "oneOf" | "not" => continue,
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, property)| (name.clone(), Value::Object(fit_for_v2(property))))
                    .collect(),
            ),
            "items" | "additionalProperties" if value.is_object() => {
                Value::Object(fit_for_v2(value))
            }
            _ => value.clone(),
        };
        fit.insert(key.clone(), kept);
    }
    let keeps_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields");
    if flag(schema, "nullable") || keeps_unknown {
        for key in ["type", "items", "properties"] {
            fit.remove(key);
        }
    }
    if fit.get("type") == Some(&json!("array")) && !fit.contains_key("items") {
        fit.remove("type");
    }
    // A nullable field is not required: kubectl would refuse its null.
    let nullable: Vec<&String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, property)| property.as_object().is_some_and(|p| flag(p, "nullable")))
        .map(|(name, _)| name)
        .collect();
    if let Some(Value::Array(required)) = fit.get_mut("required") {
        required.retain(|name| !nullable.iter().any(|n| name.as_str() == Some(n.as_str())));
    }
    if flag(schema, "x-kubernetes-embedded-resource") && !keeps_unknown {
        add_object_properties(&mut fit);
        let required = fit.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(required) = required {
            for name in ["kind", "apiVersion"] {
                if !required.iter().any(|r| r == name) {
                    required.push(json!(name));
                }
            }
        }
    }
    fit
}

/// A resource's paths: its collection, its items and their status.
fn resource_paths(paths: &mut Map<String, Value>, info: &ResourceInfo, kind: &str, list: &str) {
    let collection = super::collection_path(info);
    let namespace = json!({
        "name": "namespace", "in": "path", "required": true, "type": "string",
        "uniqueItems": true, "description": "object name and auth scope, such as for teams and projects",
    });
    let name = json!({
        "name": "name", "in": "path", "required": true, "type": "string",
        "uniqueItems": true, "description": format!("name of the {}", info.kind),
    });
    let scope: Vec<Value> = if info.namespaced {
        vec![namespace]
    } else {
        Vec::new()
    };
    let item_scope: Vec<Value> = scope.iter().cloned().chain([name]).collect();
    if info.namespaced {
        // Every namespace's objects at once.
        let all = collection.replacen("/namespaces/{namespace}", "", 1);
        paths.insert(all, json!({"get": operation(info, "list", list, None)}));
    }
    paths.insert(
        collection.clone(),
        json!({
            "get": operation(info, "list", list, None),
            "post": operation(info, "post", kind, Some(kind)),
            "parameters": scope,
        }),
    );
    let item = json!({
        "get": operation(info, "get", kind, None),
        "put": operation(info, "put", kind, Some(kind)),
        "patch": operation(info, "patch", kind, Some(PATCH)),
        "delete": operation(info, "delete", STATUS, Some(DELETE_OPTIONS)),
        "parameters": item_scope,
    });
    if info.status {
        let mut status = item.clone();
        if let Some(item) = status.as_object_mut() {
            item.remove("delete");
        }
        paths.insert(format!("{collection}/{{name}}/status"), status);
    }
    paths.insert(format!("{collection}/{{name}}"), item);
}

/// One operation: `action` answering `response`, taking `body` if given
/// (then also the write parameters).
fn operation(info: &ResourceInfo, action: &str, response: &str, body: Option<&str>) -> Value {
    let consumes = match action {
        "patch" if info.custom => json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]),
        "patch" => json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ]),
        _ => json!(["*/*"]),
    };
    let mut parameters = Vec::new();
    if let Some(body) = body {
        parameters.push(json!({
            "name": "body", "in": "body", "required": action != "delete",
            "schema": {"$ref": format!("{PREFIX}{body}")},
        }));
        for (name, description) in [
            (
                "dryRun",
                "When present, indicates that modifications should not be persisted.",
            ),
            (
                "fieldManager",
                "a name associated with the actor or entity that is making these changes.",
            ),
            (
                "fieldValidation",
                "instructs the server on how to handle objects in the request containing unknown or duplicate fields.",
            ),
        ] {
            parameters.push(json!({
                "name": name, "in": "query", "type": "string", "uniqueItems": true,
                "description": description,
            }));
        }
    }
    json!({
        "operationId": format!("{action}{}", info.kind),
        "consumes": consumes,
        "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
        "schemes": ["https"],
        "parameters": parameters,
        "responses": {
            "200": {"description": "OK", "schema": {"$ref": format!("{PREFIX}{response}")}},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": super::gvk(info),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_myapps() -> Registry {
        let crd: Value = serde_yaml::from_str(include_str!("../../../../plugins/myapp/crd.yaml"))
            .expect("the example CRD");
        let mut registry = Registry::builtin();
        for info in kubewasm_types::crd::served_types(&crd).expect("a valid CRD") {
            registry.insert(info);
        }
        registry
    }

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
        let definitions = doc["definitions"].as_object().expect("definitions");
        let mut found = Vec::new();
        references(&doc, &mut found);
        assert!(found.len() > 1000, "{}", found.len());
        for reference in found {
            let name = reference
                .strip_prefix(PREFIX)
                .expect("under #/definitions/");
            assert!(definitions.contains_key(name), "{reference} names nothing");
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
        for (name, schema) in definitions {
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
        assert_eq!(deployment["parameters"][1]["name"], "name");
    }

    #[test]
    fn a_custom_resource_should_keep_its_fields_and_validations_but_not_its_defaults() {
        let doc = document(&with_myapps());
        let myapp = &doc["definitions"]["com.example.v1.MyApp"];
        assert_eq!(
            myapp["properties"]["metadata"]["$ref"],
            format!("{PREFIX}{OBJECT_META}")
        );
        assert_eq!(myapp["properties"]["kind"]["type"], "string");
        let replicas = &myapp["properties"]["spec"]["properties"]["replicas"];
        assert_eq!(replicas, &json!({"type": "integer", "minimum": 0}));
        assert_eq!(
            myapp["properties"]["spec"]["required"],
            json!(["image", "port"])
        );
    }

    /// What the real server (Kubernetes 1.37.2) publishes for a CRD with
    /// each case (`kubectl get --raw /openapi/v2`), less descriptions.
    #[test]
    fn what_v2_cannot_say_should_be_left_out_as_the_real_server_leaves_it() {
        let fit = fit_for_v2(&json!({
            "type": "object",
            "required": ["size", "nullableField"],
            "x-kubernetes-validations": [{"rule": "self.size > 0"}],
            "anyOf": [{"required": ["mode"]}, {"required": ["tags"]}],
            "properties": {
                "size": {"type": "integer", "default": 3, "maximum": 10, "format": "int32"},
                "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[ab]$", "maxLength": 1},
                "maybe": {"type": "object", "nullable": true, "properties": {"x": {"type": "string"}}},
                "anything": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"x": {"type": "string"}}},
                "list": {"type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "tags": {"type": "array", "items": {"type": "string"},
                    "x-kubernetes-list-type": "set", "maxItems": 5},
                "port": {"x-kubernetes-int-or-string": true,
                    "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "properties": {"spec": {"type": "object"}}},
                "labels": {"type": "object",
                    "additionalProperties": {"type": "string", "nullable": true}},
                "nullableField": {"type": "string", "nullable": true},
            },
        }));
        assert_eq!(fit["required"], json!(["size"]));
        assert_eq!(
            fit["x-kubernetes-validations"],
            json!([{"rule": "self.size > 0"}])
        );
        assert!(fit.get("anyOf").is_none());
        let properties = &fit["properties"];
        assert_eq!(
            properties["size"],
            json!({"type": "integer", "format": "int32", "maximum": 10})
        );
        assert_eq!(
            properties["mode"],
            json!({"type": "string", "maxLength": 1, "pattern": "^[ab]$", "enum": ["a", "b"]})
        );
        assert_eq!(properties["maybe"], json!({}));
        assert_eq!(
            properties["anything"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(
            properties["list"],
            json!({"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": true}})
        );
        assert_eq!(
            properties["tags"],
            json!({"type": "array", "maxItems": 5, "items": {"type": "string"},
                "x-kubernetes-list-type": "set"})
        );
        assert_eq!(
            properties["port"],
            json!({"x-kubernetes-int-or-string": true})
        );
        let embedded = &properties["embedded"];
        assert_eq!(embedded["required"], json!(["kind", "apiVersion"]));
        assert_eq!(
            embedded["properties"]["metadata"]["$ref"],
            format!("{PREFIX}{OBJECT_META}")
        );
        assert_eq!(embedded["properties"]["kind"]["type"], "string");
        assert_eq!(embedded["properties"]["spec"], json!({"type": "object"}));
        assert_eq!(
            properties["labels"],
            json!({"type": "object", "additionalProperties": {}})
        );
        assert_eq!(properties["nullableField"], json!({}));
    }

    #[test]
    fn an_open_root_should_name_no_field() {
        let mut info = with_myapps()
            .get("example.com", "v1", "myapps")
            .cloned()
            .expect("served");
        info.schema = Some(std::sync::Arc::new(
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        ));
        let schema = custom_kind(&info);
        assert_eq!(schema["type"], "object");
        assert!(schema.get("properties").is_none());
    }
}
