//! The OpenAPI documents clients download.
//!
//! - [`v3`]: `/openapi/v3` and one document per group-version, what kubectl
//!   reads before `create -f`, `apply` and `explain` (it sends
//!   `fieldValidation=Strict` to the kinds these documents vouch for).
//! - [`v2`]: `/openapi/v2`, one document of every served kind, in JSON or in
//!   [`gnostic`]'s protobuf (the only form client-go's `OpenAPISchema()`
//!   reads). kubectl validates against it on the client whatever the v3
//!   documents cannot vouch for: the items of a `v1 List`.
//!
//! Both name a kind's schema as the real server does: built-in kinds by
//! k8s-openapi's names (`io.k8s.api.apps.v1.Deployment`), custom resources
//! by their group reversed (`com.example.v1.MyApp`), and both mark it with
//! `x-kubernetes-group-version-kind`, by which clients find it.

pub mod gnostic;
pub mod v2;
pub mod v3;

use serde_json::{Map, Value, json};

use kubewasm_types::info::ResourceInfo;

/// The version the documents' `info` carries: the release's, as the
/// server's `/version` says it.
fn info_version() -> String {
    format!("{}-kubewasm", kubewasm_types::KUBERNETES_RELEASE)
}

/// `info`'s kind as `x-kubernetes-group-version-kind` lists it.
fn gvk(info: &ResourceInfo) -> Value {
    json!({"group": info.group, "version": info.version, "kind": info.kind})
}

/// The name of a kind's schema when k8s-openapi has none for it: the group
/// reversed, then the version and the kind, as the real server names a
/// custom resource's (`example.com` `v1` `MyApp`: `com.example.v1.MyApp`).
/// The core group, which has no name, is `io.k8s.api.core`.
fn reversed_name(info: &ResourceInfo) -> String {
    let (version, kind) = (&info.version, &info.kind);
    if info.group.is_empty() {
        return format!("io.k8s.api.core.{version}.{kind}");
    }
    let reversed: Vec<&str> = info.group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// `info`'s collection (`/apis/apps/v1/namespaces/{namespace}/deployments`).
fn collection_path(info: &ResourceInfo) -> String {
    let base = if info.group.is_empty() {
        format!("/api/{}", info.version)
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let scope = if info.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    format!("{base}{scope}/{}", info.plural)
}

/// Adds a built-in kind's schema and those it uses (k8s-openapi's) to
/// `definitions`, every reference under `prefix` (`#/components/schemas/`
/// in v3, `#/definitions/` in v2); returns its name. A schema already there
/// is kept, so that a kind's marks survive another kind that uses it (a
/// StatefulSet's claim templates are PersistentVolumeClaims). The kind's
/// own schema is marked with its kind. No schema requires `metadata`
/// (k8s-openapi's Rust field is not optional; the API's is, as the real
/// server's documents say).
fn add_builtin(
    definitions: &mut Map<String, Value>,
    info: &ResourceInfo,
    prefix: &str,
) -> Option<String> {
    let field_schema = info.field_schema?;
    let (reference, used) = field_schema();
    let name = reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())?
        .to_owned();
    add_definitions(definitions, used, prefix);
    if let Some(Value::Object(schema)) = definitions.get_mut(&name) {
        let kinds = schema
            .entry("x-kubernetes-group-version-kind")
            .or_insert_with(|| json!([]));
        if let Value::Array(kinds) = kinds
            && !kinds.contains(&gvk(info))
        {
            kinds.push(gvk(info));
        }
    }
    Some(name)
}

/// The extensions `extensions.txt` gives a definition (field `-`) or one
/// of its fields, by (definition, field).
type Extensions =
    std::collections::HashMap<(&'static str, &'static str), Vec<(&'static str, Value)>>;

/// `extensions.txt`, read once.
fn extensions() -> &'static Extensions {
    static EXTENSIONS: std::sync::OnceLock<Extensions> = std::sync::OnceLock::new();
    EXTENSIONS.get_or_init(|| {
        let mut extensions = Extensions::new();
        for line in include_str!("extensions.txt").lines() {
            if line.starts_with('#') {
                continue;
            }
            let mut words = line.splitn(4, ' ');
            if let (Some(definition), Some(field), Some(key), Some(value)) =
                (words.next(), words.next(), words.next(), words.next())
                && let Ok(value) = serde_json::from_str(value)
            {
                extensions
                    .entry((definition, field))
                    .or_default()
                    .push((key, value));
            }
        }
        extensions
    })
}

/// Adds what [`extensions`] gives definition `name` and its fields to
/// `schema`, where it does not say already.
fn add_extensions(name: &str, schema: &mut Map<String, Value>) {
    let table = extensions();
    let add = |target: &mut Map<String, Value>, field: &str| {
        for (key, value) in table.get(&(name, field)).into_iter().flatten() {
            target
                .entry(key.to_owned())
                .or_insert_with(|| value.clone());
        }
    };
    add(schema, "-");
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (field, property) in properties.iter_mut() {
            if let Value::Object(property) = property {
                add(property, field);
            }
        }
    }
}

/// Adds k8s-openapi's schemas `used` to `definitions` (see
/// [`add_builtin`]), with the extensions the real server's carry.
fn add_definitions(definitions: &mut Map<String, Value>, used: Map<String, Value>, prefix: &str) {
    for (name, mut schema) in used {
        if definitions.contains_key(&name) {
            continue;
        }
        rebase_references(&mut schema, prefix);
        if let Value::Object(map) = &mut schema {
            add_extensions(&name, map);
        }
        if let Value::Object(map) = &mut schema
            && let Some(Value::Array(required)) = map.get_mut("required")
        {
            required.retain(|field| field != "metadata");
            if required.is_empty() {
                map.remove("required");
            }
        }
        definitions.insert(name, schema);
    }
}

/// Rewrites every `$ref` in `schema` to point under `prefix`.
fn rebase_references(schema: &mut Value, prefix: &str) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(reference) if key == "$ref" => {
                        let name = reference.rsplit('/').next().unwrap_or_default();
                        *reference = format!("{prefix}{name}");
                    }
                    _ => rebase_references(value, prefix),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rebase_references(v, prefix)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_types::registry::Registry;

    #[test]
    fn a_builtin_kind_should_be_named_by_k8s_openapi_and_marked_with_its_kind() {
        let registry = Registry::builtin();
        let deployments = registry.get("apps", "v1", "deployments").expect("served");
        let mut definitions = Map::new();
        let name =
            add_builtin(&mut definitions, deployments, "#/definitions/").expect("a field schema");
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        let deployment = &definitions[&name];
        // As Kubernetes 1.37's swagger.json says (1.33's required nothing).
        assert_eq!(deployment["required"], json!(["spec"]), "{deployment}");
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        assert_eq!(
            deployment["properties"]["spec"]["allOf"][0]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(definitions.contains_key("io.k8s.api.apps.v1.DeploymentSpec"));
    }

    #[test]
    fn fields_should_carry_how_they_merge_as_the_real_servers_documents_say() {
        let registry = Registry::builtin();
        let mut definitions = Map::new();
        let deployments = registry.get("apps", "v1", "deployments").expect("served");
        add_builtin(&mut definitions, deployments, "#/definitions/");
        let containers = &definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        let finalizers = &definitions["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
            ["finalizers"];
        assert_eq!(finalizers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(
            definitions["io.k8s.api.core.v1.LocalObjectReference"]["x-kubernetes-map-type"],
            "atomic"
        );
        // Every line of the table reads.
        let lines = include_str!("extensions.txt")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count();
        assert_eq!(extensions().values().map(Vec::len).sum::<usize>(), lines);
    }

    #[test]
    fn a_kind_another_uses_should_keep_its_mark() {
        let registry = Registry::builtin();
        let mut definitions = Map::new();
        for plural in ["persistentvolumeclaims", "statefulsets"] {
            let group = if plural == "statefulsets" { "apps" } else { "" };
            let info = registry.get(group, "v1", plural).expect("served");
            add_builtin(&mut definitions, info, "#/definitions/");
        }
        assert_eq!(
            definitions["io.k8s.api.core.v1.PersistentVolumeClaim"]["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": "PersistentVolumeClaim"}])
        );
    }

    #[test]
    fn a_kind_without_a_field_schema_should_be_named_by_its_group_reversed() {
        let registry = Registry::builtin();
        let mut info = registry
            .get("apps", "v1", "deployments")
            .cloned()
            .expect("served");
        info.group = "apps.example.com".into();
        assert_eq!(reversed_name(&info), "com.example.apps.v1.Deployment");
        info.group = String::new();
        assert_eq!(reversed_name(&info), "io.k8s.api.core.v1.Deployment");
        assert_eq!(
            collection_path(&info),
            "/api/v1/namespaces/{namespace}/deployments"
        );
    }
}
