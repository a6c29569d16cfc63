//! A custom resource's OpenAPI, as apiextensions-apiserver's builder
//! (`pkg/controller/openapi/builder`) writes it: the documents the release
//! published for a template CustomResourceDefinition of the resource's
//! scope ([`super::release`]), with the resource's names in place of the
//! template's, the subresources it does not have left out, and its own
//! schema in place of the template's.
//!
//! # Names
//! The builder derives every name from the group, version, kind, list kind
//! and plural: paths (`/apis/GROUP/VERSION/namespaces/{namespace}/PLURAL`),
//! schema names (the group reversed: `com.example.v1.MyApp`), operation ids
//! and tags (`listExampleComV1NamespacedMyApp`, `exampleCom_v1`: the group
//! without `.k8s.io`, each word capitalised), and descriptions (`create a
//! MyApp`, `create an Apple`, `name of the MyApp`, `List of myapps.`).
//!
//! # The kind's schema
//! Its CRD version's structural schema, with `apiVersion`, `kind` and
//! `metadata` as the template's root has them, and each embedded resource
//! (`x-kubernetes-embedded-resource`) given them too (requiring `kind` and
//! `apiVersion`). In v3 an `x-kubernetes-int-or-string` field says so with
//! `anyOf` (the structural schema's unfolding). In v2, what Swagger 2.0
//! cannot say, or kubectl would read too strictly, is left out, never
//! guessed (the server still enforces the whole schema):
//! - value validations (`format`, bounds, `pattern`, `enum`, `required`, …)
//!   and extensions (CEL rules among them) are kept; defaults and
//!   `allOf`/`anyOf`/`oneOf`/`not` are dropped;
//! - a nullable schema, or one that keeps unknown fields, loses its type,
//!   items and properties; an array left without items, its type; a
//!   nullable property is not required;
//! - a root that keeps unknown fields is an open object.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use kubewasm_types::info::ResourceInfo;

use super::release::{Template, release};

/// The template's names, as its documents spell them.
const TEMPLATE_GROUP: &str = "template.kubewasm.dev";
const TEMPLATE_VERSION: &str = "v1";

/// The schemas only a `scale` subresource's operations name.
const SCALE_SCHEMAS: &str = "io.k8s.api.autoscaling.v1.Scale";

/// An embedded resource's `apiVersion` and `kind`, as the builder
/// describes them.
const EMBEDDED_API_VERSION: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// Which document a schema is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// `/openapi/v2`.
    V2,
    /// `/openapi/v3`.
    V3,
}

/// The template of `info`'s scope.
fn template(info: &ResourceInfo) -> &'static Template {
    let custom = &release().custom;
    if info.namespaced {
        &custom.namespaced
    } else {
        &custom.cluster
    }
}

/// The templates' v3 documents (namespaced, cluster-scoped), parsed once.
static V3_TEMPLATES: LazyLock<[Option<Value>; 2]> = LazyLock::new(|| {
    let custom = &release().custom;
    [&custom.namespaced, &custom.cluster].map(|t| serde_json::from_str(&t.v3).ok())
});

/// The group version document `/openapi/v3` serves for custom resources
/// `infos` (of one group version), or `None` for none.
pub(super) fn v3_document(infos: &[&ResourceInfo]) -> Option<Value> {
    let mut merged: Option<Value> = None;
    for info in infos {
        let parsed = &V3_TEMPLATES[usize::from(!info.namespaced)];
        let Some(mut document) = parsed.clone() else {
            continue;
        };
        let names = Names::of(info);
        names.rename(&mut document);
        if let Some(Value::Object(paths)) = document.get_mut("paths") {
            keep_subresources(paths, info);
        }
        if let Some(Value::Object(schemas)) = document.pointer_mut("/components/schemas") {
            if !info.scale {
                schemas.retain(|name, _| !name.starts_with(SCALE_SCHEMAS));
            }
            let kind = names.model(&info.kind);
            if let Some(root) = schemas.get(&kind).cloned() {
                schemas.insert(kind, kind_schema(info, &root, Form::V3));
            }
        }
        match &mut merged {
            None => merged = Some(document),
            Some(merged) => {
                for section in ["/paths", "/components/schemas"] {
                    if let (Some(Value::Object(into)), Some(Value::Object(from))) =
                        (merged.pointer_mut(section), document.pointer_mut(section))
                    {
                        into.append(from);
                    }
                }
            }
        }
    }
    // Go writes a map's keys in order.
    for section in ["/paths", "/components/schemas"] {
        if let Some(Value::Object(map)) = merged.as_mut().and_then(|m| m.pointer_mut(section)) {
            map.sort_keys();
        }
    }
    merged
}

/// `document` as Go's encoder writes it: `<`, `>`, `&` and the line and
/// paragraph separators escaped.
pub(super) fn go_json(document: &Value) -> String {
    let text = document.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The fields of kube-openapi's schema, in the order it writes them;
/// extensions (`x-…`) follow, in the order of their names.
const SCHEMA_FIELDS: [&str; 40] = [
    "id",
    "$ref",
    "$schema",
    "description",
    "type",
    "nullable",
    "format",
    "title",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "discriminator",
    "readOnly",
    "xml",
    "externalDocs",
    "example",
];

/// The fields of a CEL rule (`x-kubernetes-validations`), in the order Go
/// writes them.
const RULE_FIELDS: [&str; 6] = [
    "rule",
    "message",
    "messageExpression",
    "reason",
    "fieldPath",
    "optionalOldSelf",
];

/// `schema`'s keys in the order Go writes them (see [`SCHEMA_FIELDS`]); a
/// value (a default, an example) with its keys in order, as Go writes a
/// map.
fn go_order(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    let mut fields: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    let rank = |key: &str| {
        SCHEMA_FIELDS
            .iter()
            .position(|field| *field == key)
            .unwrap_or(SCHEMA_FIELDS.len())
    };
    fields.sort_by(|(a, _), (b, _)| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    for (key, value) in &mut fields {
        match key.as_str() {
            "properties" | "patternProperties" | "definitions" | "dependencies" => {
                if let Value::Object(named) = value {
                    named.sort_keys();
                    named.values_mut().for_each(go_order);
                }
            }
            "items" | "additionalProperties" | "not" | "additionalItems" => go_order(value),
            "allOf" | "oneOf" | "anyOf" => {
                if let Value::Array(schemas) = value {
                    schemas.iter_mut().for_each(go_order);
                }
            }
            "x-kubernetes-validations" => {
                for rule in value.as_array_mut().into_iter().flatten() {
                    if let Value::Object(rule) = rule {
                        let mut fields: Vec<(String, Value)> =
                            std::mem::take(rule).into_iter().collect();
                        let rank = |key: &str| RULE_FIELDS.iter().position(|f| *f == key);
                        fields.sort_by_key(|(key, _)| rank(key));
                        rule.extend(fields);
                    }
                }
            }
            _ => sort_all_keys(value),
        }
    }
    map.extend(fields);
}

/// Every object's keys in `value` in order.
fn sort_all_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_all_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_all_keys),
        _ => {}
    }
}

/// What custom resource `info` adds to `/openapi/v2`: its paths and its
/// kind's and list's definitions, into `paths` and `definitions`.
pub(super) fn add_to_v2(
    info: &ResourceInfo,
    paths: &mut Map<String, Value>,
    definitions: &mut Map<String, Value>,
) {
    let additions = &template(info).v2;
    let names = Names::of(info);
    let mut added = Value::Object(additions.paths.clone());
    names.rename(&mut added);
    if let Value::Object(mut added) = added {
        keep_subresources(&mut added, info);
        paths.append(&mut added);
    }
    let mut added = Value::Object(additions.definitions.clone());
    names.rename(&mut added);
    if let Value::Object(mut added) = added {
        let kind = names.model(&info.kind);
        if let Some(root) = added.get(&kind).cloned() {
            added.insert(kind, kind_schema(info, &root, Form::V2));
        }
        definitions.append(&mut added);
    }
}

/// Leaves out of `paths` the subresources `info` does not have.
fn keep_subresources(paths: &mut Map<String, Value>, info: &ResourceInfo) {
    paths.retain(|path, _| {
        (info.status || !path.ends_with("/{name}/status"))
            && (info.scale || !path.ends_with("/{name}/scale"))
    });
}

/// The template's names replaced by a resource's, in one pass over each
/// text (so that a name of the resource's is never replaced again).
struct Names {
    /// Each template text, and what replaces it, the first that matches at
    /// a place winning (longer texts first where one starts another).
    replacements: Vec<(&'static str, String)>,
    model_prefix: String,
    version: String,
}

impl Names {
    fn of(info: &ResourceInfo) -> Self {
        let (group, version, kind) = (&info.group, &info.version, &info.kind);
        let model_prefix = format!("{}.{version}.", reversed_group(group));
        let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
        let replacements = vec![
            ("dev.kubewasm.template.v1.", model_prefix.clone()),
            (
                "/apis/template.kubewasm.dev/v1/",
                format!("/apis/{group}/{version}/"),
            ),
            (
                "TemplateKubewasmDevV1",
                format!(
                    "{}{}",
                    operation_id(trimmed, true),
                    operation_id(version, true)
                ),
            ),
            (
                "templateKubewasmDev_v1",
                format!(
                    "{}_{}",
                    operation_id(trimmed, false),
                    operation_id(version, false)
                ),
            ),
            ("create a Widget", format!("create{}{kind}", article(kind))),
            ("delete a Widget", format!("delete{}{kind}", article(kind))),
            ("WidgetList", info.list_kind.clone()),
            ("Widget", kind.clone()),
            ("widgets", info.plural.clone()),
            (TEMPLATE_GROUP, group.clone()),
        ];
        Names {
            replacements,
            model_prefix,
            version: version.clone(),
        }
    }

    /// The schema name of `kind` in the resource's group version.
    fn model(&self, kind: &str) -> String {
        format!("{}{kind}", self.model_prefix)
    }

    fn replace(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        'scan: while let Some(first) = rest.chars().next() {
            for (from, to) in &self.replacements {
                if let Some(after) = rest.strip_prefix(from) {
                    out.push_str(to);
                    rest = after;
                    continue 'scan;
                }
            }
            out.push(first);
            rest = &rest[first.len_utf8()..];
        }
        out
    }

    /// Every key and text in `value` renamed; a group-version-kind of the
    /// template's group gets the resource's version.
    fn rename(&self, value: &mut Value) {
        match value {
            Value::String(text) => *text = self.replace(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.rename(item)),
            Value::Object(map) => {
                let template_gvk = map.get("group").and_then(Value::as_str) == Some(TEMPLATE_GROUP)
                    && map.get("version").and_then(Value::as_str) == Some(TEMPLATE_VERSION);
                let renamed: Map<String, Value> = std::mem::take(map)
                    .into_iter()
                    .map(|(key, mut item)| {
                        self.rename(&mut item);
                        (self.replace(&key), item)
                    })
                    .collect();
                *map = renamed;
                if template_gvk {
                    map.insert("version".into(), Value::String(self.version.clone()));
                }
            }
            _ => {}
        }
    }
}

/// A group's dot-separated words reversed (`example.com`: `com.example`),
/// as the builder names a custom resource's schemas.
pub(super) fn reversed_group(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

/// apiserver's `ToValidOperationID`: letters and `_` kept (and digits but
/// first), each word after another character capitalised, the first if
/// `capitalize_first`.
fn operation_id(text: &str, capitalize_first: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut capitalize = capitalize_first;
    for (i, c) in text.chars().enumerate() {
        if c.is_alphabetic() || c == '_' || (i != 0 && c.is_ascii_digit()) {
            if capitalize {
                out.extend(c.to_uppercase());
                capitalize = false;
            } else {
                out.push(c);
            }
        } else {
            capitalize = true;
        }
    }
    out
}

/// apiserver's `GetArticleForNoun` with spaces around: none for a plural
/// (`…s` but not `…ss`), `an` before a vowel, `a` otherwise.
fn article(noun: &str) -> &'static str {
    if noun.ends_with('s') && !noun.ends_with("ss") {
        return " ";
    }
    match noun.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => " an ",
        _ => " a ",
    }
}

/// `info`'s kind schema in `form`, `template` the template's renamed one
/// (whose `apiVersion`, `kind` and `metadata` the root gets).
fn kind_schema(info: &ResourceInfo, template: &Value, form: Form) -> Value {
    let keeps_unknown =
        |schema: &Value| schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    let mut schema = match info.schema.as_deref() {
        Some(schema) if !(form == Form::V2 && keeps_unknown(schema)) => {
            let metadata = template.pointer("/properties/metadata").cloned();
            let mut schema = match form {
                Form::V3 => unfold(schema),
                Form::V2 => Value::Object(fit_for_v2(schema)),
            };
            if let Some(metadata) = &metadata {
                add_embedded(&mut schema, metadata, form);
            }
            if let (Value::Object(root), Some(Value::Object(from))) =
                (&mut schema, template.get("properties"))
            {
                let properties = root.entry("properties").or_insert_with(|| json!({}));
                if let Value::Object(properties) = properties {
                    for name in ["apiVersion", "kind", "metadata"] {
                        if let Some(property) = from.get(name) {
                            properties.insert(name.into(), property.clone());
                        }
                    }
                }
            }
            schema
        }
        // kubectl would refuse every field but three if any were named, so
        // an open root (in v2) names none.
        _ => json!({"type": "object"}),
    };
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": info.group, "kind": info.kind, "version": info.version}]);
    go_order(&mut schema);
    schema
}

/// A structural schema as the structural schema's `Unfold` leaves it: an
/// `x-kubernetes-int-or-string` node says so with `anyOf` (before its own
/// `allOf` when it has an `anyOf` already), unless it does already.
fn unfold(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut map = map.clone();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for property in properties.values_mut() {
            *property = unfold(property);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(nested) = map.get_mut(key)
            && nested.is_object()
        {
            *nested = unfold(nested);
        }
    }
    if map.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        let pattern = json!([{"type": "integer"}, {"type": "string"}]);
        let first_all_of = map.get("allOf").and_then(|all| all.get(0));
        let said =
            map.get("anyOf") == Some(&pattern) || first_all_of == Some(&json!({"anyOf": pattern}));
        if !said {
            if map.contains_key("anyOf") {
                let mut all_of = vec![json!({"anyOf": pattern})];
                if let Some(Value::Array(rest)) = map.remove("allOf") {
                    all_of.extend(rest);
                }
                map.insert("allOf".into(), Value::Array(all_of));
            } else {
                map.insert("anyOf".into(), pattern);
            }
        }
    }
    Value::Object(map)
}

/// Each embedded resource under `schema` (not the root) given `apiVersion`,
/// `kind` and `metadata` (the root's `metadata`), requiring `kind` and
/// `apiVersion`; in v2, not under a node that keeps unknown fields.
fn add_embedded(schema: &mut Value, metadata: &Value, form: Form) {
    let Value::Object(map) = schema else {
        return;
    };
    let mut nested: Vec<&mut Value> = Vec::new();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        nested.extend(properties.values_mut());
    }
    for node in nested {
        add_embedded(node, metadata, form);
        if let Value::Object(node) = node {
            embed(node, metadata, form);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(node) = map.get_mut(key) {
            add_embedded(node, metadata, form);
            if let Value::Object(node) = node {
                embed(node, metadata, form);
            }
        }
    }
}

/// `node` given the properties of an embedded resource, if it is one.
fn embed(node: &mut Map<String, Value>, metadata: &Value, form: Form) {
    let flag = |key: &str| node.get(key) == Some(&json!(true));
    if !flag("x-kubernetes-embedded-resource")
        || (form == Form::V2 && flag("x-kubernetes-preserve-unknown-fields"))
    {
        return;
    }
    let properties = node.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(properties) = properties {
        properties.insert(
            "apiVersion".into(),
            json!({"description": EMBEDDED_API_VERSION, "type": "string"}),
        );
        properties.insert(
            "kind".into(),
            json!({"description": EMBEDDED_KIND, "type": "string"}),
        );
        properties.insert("metadata".into(), metadata.clone());
    }
    let required = node.entry("required").or_insert_with(|| json!([]));
    if let Value::Array(required) = required {
        for name in ["kind", "apiVersion"] {
            if !required.iter().any(|r| r == name) {
                required.push(json!(name));
            }
        }
    }
}

/// A structural schema made fit for v2 and for kubectl (see the module's
/// docs); embedded resources are [`add_embedded`]'s.
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
    if flag(schema, "nullable") || flag(schema, "x-kubernetes-preserve-unknown-fields") {
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
    fit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::openapi::tests::with_myapps;

    fn myapps() -> ResourceInfo {
        with_myapps()
            .get("example.com", "v1", "myapps")
            .cloned()
            .expect("served")
    }

    #[test]
    fn names_should_be_derived_as_the_builder_derives_them() {
        assert_eq!(operation_id("example.com", true), "ExampleCom");
        assert_eq!(operation_id("v1beta1", true), "V1beta1");
        assert_eq!(operation_id("my-group.io", false), "myGroupIo");
        assert_eq!(article("MyApp"), " a ");
        assert_eq!(article("Apple"), " an ");
        assert_eq!(article("Class"), " a ");
        assert_eq!(article("Settings"), " ");
        assert_eq!(reversed_group("stable.example.com"), "com.example.stable");
    }

    #[test]
    fn a_custom_resources_v3_document_should_name_it_everywhere_the_template_named_widgets() {
        let mut info = myapps();
        info.kind = "Apple".into();
        info.list_kind = "AppleCollection".into();
        info.plural = "apples".into();
        info.scale = false;
        let document = v3_document(&[&info]).expect("a document");
        let text = document.to_string();
        for template in ["Widget", "widgets", TEMPLATE_GROUP, "TemplateKubewasm"] {
            assert!(!text.contains(template), "{template} left in {text}");
        }
        let create =
            &document["paths"]["/apis/example.com/v1/namespaces/{namespace}/apples"]["post"];
        assert_eq!(create["description"], "create an Apple");
        assert_eq!(create["operationId"], "createExampleComV1NamespacedApple");
        assert_eq!(create["tags"], json!(["exampleCom_v1"]));
        assert_eq!(
            create["x-kubernetes-group-version-kind"],
            json!({"group": "example.com", "kind": "Apple", "version": "v1"})
        );
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["com.example.v1.AppleCollection"]["description"],
            "AppleCollection is a list of Apple"
        );
        assert!(schemas.get("io.k8s.api.autoscaling.v1.Scale").is_none());
        assert!(
            document["paths"]
                .as_object()
                .expect("paths")
                .keys()
                .all(|p| !p.ends_with("/scale"))
        );
        let apple = &schemas["com.example.v1.Apple"];
        assert_eq!(apple["required"], json!(["spec"]));
        assert_eq!(
            apple["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(
            apple["properties"]["spec"]["properties"]["replicas"]["default"],
            1
        );
    }

    #[test]
    fn an_int_or_string_should_say_so_with_any_of_in_v3() {
        let pattern = json!([{"type": "integer"}, {"type": "string"}]);
        let unfolded = unfold(&json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true},
            "said": {"x-kubernetes-int-or-string": true, "anyOf": pattern},
            "other": {"x-kubernetes-int-or-string": true, "anyOf": [{"maxLength": 3}]},
        }}));
        let properties = &unfolded["properties"];
        assert_eq!(properties["port"]["anyOf"], pattern);
        assert_eq!(properties["said"]["anyOf"], pattern);
        assert!(properties["said"].get("allOf").is_none());
        assert_eq!(properties["other"]["allOf"], json!([{"anyOf": pattern}]));
    }

    #[test]
    fn a_custom_resource_should_keep_its_fields_and_validations_but_not_its_defaults_in_v2() {
        let info = myapps();
        let (mut paths, mut definitions) = (Map::new(), Map::new());
        add_to_v2(&info, &mut paths, &mut definitions);
        let myapp = &definitions["com.example.v1.MyApp"];
        assert_eq!(
            myapp["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(myapp["properties"]["kind"]["type"], "string");
        let replicas = &myapp["properties"]["spec"]["properties"]["replicas"];
        assert_eq!(replicas, &json!({"type": "integer", "minimum": 0}));
        assert_eq!(
            myapp["properties"]["spec"]["required"],
            json!(["image", "port"])
        );
        assert!(definitions.contains_key("com.example.v1.MyAppList"));
        assert!(
            paths.contains_key("/apis/example.com/v1/namespaces/{namespace}/myapps/{name}/status")
        );
        assert!(!paths.keys().any(|p| p.ends_with("/scale")));
    }

    /// What the real server (Kubernetes 1.37.2) publishes for a CRD with
    /// each case (`kubectl get --raw /openapi/v2`), less descriptions.
    #[test]
    fn what_v2_cannot_say_should_be_left_out_as_the_real_server_leaves_it() {
        let mut fit = Value::Object(fit_for_v2(&json!({
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
        })));
        let metadata =
            json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"});
        add_embedded(&mut fit, &metadata, Form::V2);
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
        assert_eq!(embedded["properties"]["metadata"], metadata);
        assert_eq!(embedded["properties"]["kind"]["type"], "string");
        assert_eq!(embedded["properties"]["spec"], json!({"type": "object"}));
        assert_eq!(
            properties["labels"],
            json!({"type": "object", "additionalProperties": {}})
        );
        assert_eq!(properties["nullableField"], json!({}));
    }

    #[test]
    fn an_open_root_should_name_no_field_in_v2() {
        let mut info = myapps();
        info.schema = Some(std::sync::Arc::new(
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        ));
        let schema = kind_schema(&info, &json!({}), Form::V2);
        assert_eq!(schema["type"], "object");
        assert!(schema.get("properties").is_none());
    }
}
