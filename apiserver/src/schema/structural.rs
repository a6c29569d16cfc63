//! Structural schemas of custom resources: defaulting, pruning and
//! validation, in that order, as the apiextensions server applies them.
//!
//! Supported: `type` (object, array, string, integer, number, boolean),
//! `properties`, `additionalProperties` (a schema or `false`), `items`,
//! `required`, `enum`, `nullable`, `minimum`/`maximum` (and their
//! `exclusive` forms), `minLength`/`maxLength`, `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`,
//! `default`, `x-kubernetes-preserve-unknown-fields`,
//! `pattern` (as Go's `regexp` reads it: [`super::pattern`]),
//! `x-kubernetes-int-or-string` and `x-kubernetes-embedded-resource`.
//! Not supported yet: `format`, CEL validation rules.
//!
//! `apiVersion`, `kind` and `metadata` at the root (and of an embedded
//! resource) are never pruned. A schema of `metadata` is read as the API
//! server reads it: only its `name` and `generateName` properties are
//! validated (a CRD may say no more of it, [`kubewasm_types::crd`]); the
//! rest of an object's metadata is the server's, whatever the schema says.

use serde_json::{Map, Value};

/// What processing found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Fields removed because the schema does not know them (what
    /// `fieldValidation=Strict` refuses).
    pub unknown: Vec<String>,
    /// Validation errors, in the API server's wording.
    pub errors: Vec<String>,
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// Defaults, prunes and validates `object` against `schema` (the version's
/// `openAPIV3Schema`).
pub fn process(object: &mut Value, schema: &Value) -> Findings {
    let mut findings = Findings::default();
    walk(object, schema, "", true, &mut findings);
    findings
}

/// How findings name the field at `path`: the root as `<root>`.
fn shown(path: &str) -> &str {
    if path.is_empty() { "<root>" } else { path }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(value: &mut Value, schema: &Value, path: &str, root: bool, findings: &mut Findings) {
    let display = shown(path);
    if value.is_null() {
        if !flag(schema, "nullable") && schema.get("type").is_some() && !root {
            findings.errors.push(format!(
                "{display}: Invalid value: \"null\": {display} in body must be of type {}",
                schema["type"].as_str().unwrap_or("object")
            ));
        }
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !matches!(type_of(value), "integer" | "string") {
            findings.errors.push(format!("{display}: Invalid value: {value}: {display} in body must be of type integer or string"));
        }
        return;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_of(value);
        let fits = actual == expected || (expected == "number" && actual == "integer");
        if !fits {
            findings.errors.push(format!("{display}: Invalid value: \"{actual}\": {display} in body must be of type {expected}: \"{actual}\""));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let listed: Vec<String> = options.iter().map(Value::to_string).collect();
        findings.errors.push(format!(
            "{display}: Unsupported value: {value}: supported values: {}",
            listed.join(", ")
        ));
    }
    match value {
        Value::Object(map) => object(map, schema, path, root, findings),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, item_schema, &format!("{path}[{i}]"), false, findings);
                }
            }
            // After the items, as kube-openapi's slice validator checks.
            counted(schema, "Items", "items", items.len(), display, findings);
        }
        Value::String(s) => string(s, schema, display, findings),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
                let exclusive = flag(schema, "exclusiveMinimum");
                if x < min || (exclusive && x == min) {
                    findings.errors.push(format!(
                        "{display}: Invalid value: {n}: {display} in body should be greater than {}{min}",
                        if exclusive { "" } else { "or equal to " }
                    ));
                }
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
                let exclusive = flag(schema, "exclusiveMaximum");
                if x > max || (exclusive && x == max) {
                    findings.errors.push(format!(
                        "{display}: Invalid value: {n}: {display} in body should be less than {}{max}",
                        if exclusive { "" } else { "or equal to " }
                    ));
                }
            }
        }
        _ => {}
    }
}

/// A string's `maxLength`, `minLength` and `pattern`, in that order, the
/// first that fails ending the checks (kube-openapi's string validator),
/// worded as the API server words each (lengths in characters).
fn string(s: &str, schema: &Value, display: &str, findings: &mut Findings) {
    let length = s.chars().count() as u64;
    let quoted = Value::String(s.to_owned());
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && length > max
    {
        findings.errors.push(format!(
            "{display}: Too long: may not be more than {max} bytes"
        ));
    } else if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && length < min
    {
        findings.errors.push(format!(
            "{display}: Invalid value: {quoted}: {display} in body should be at least {min} chars long"
        ));
    } else if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && super::pattern::matches(pattern, s) == Some(false)
    {
        findings.errors.push(format!(
            "{display}: Invalid value: {quoted}: {display} in body should match '{pattern}'"
        ));
    }
}

/// An array's `minItems` and `maxItems` (`what` `Items`, `noun` `items`)
/// or an object's `minProperties` and `maxProperties`, as the API server
/// words them: too few as an invalid count, too many as `TooMany`.
fn counted(
    schema: &Value,
    what: &str,
    noun: &str,
    count: usize,
    display: &str,
    findings: &mut Findings,
) {
    if let Some(min) = schema.get(format!("min{what}")).and_then(Value::as_u64)
        && (count as u64) < min
    {
        findings.errors.push(format!(
            "{display}: Invalid value: {count}: {display} in body should have at least {min} {noun}"
        ));
    }
    if let Some(max) = schema.get(format!("max{what}")).and_then(Value::as_u64)
        && (count as u64) > max
    {
        let items = if max == 1 { "item" } else { "items" };
        findings.errors.push(format!(
            "{display}: Too many: {count}: must have at most {max} {items}"
        ));
    }
}

fn object(
    map: &mut Map<String, Value>,
    schema: &Value,
    path: &str,
    root: bool,
    findings: &mut Findings,
) {
    // The count is checked after defaulting and pruning, and reported
    // before the fields' findings (kube-openapi's object validator).
    let first_finding = findings.errors.len();
    let properties = schema.get("properties").and_then(Value::as_object);
    // Defaulting: missing properties with a default.
    if let Some(properties) = properties {
        for (key, property) in properties {
            if !map.contains_key(key)
                && let Some(default) = property.get("default")
            {
                map.insert(key.clone(), default.clone());
            }
        }
    }
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let additional = schema.get("additionalProperties");
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let keep_meta =
            (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
        let property_schema = properties.and_then(|p| p.get(&key)).or(match additional {
            Some(Value::Object(_)) => additional,
            _ => None,
        });
        match property_schema {
            Some(property) if keep_meta && key == "metadata" => {
                if let Some(Value::Object(metadata)) = map.get_mut(&key) {
                    metadata_names(metadata, property, &child(path, &key), findings);
                }
            }
            Some(property) => {
                if let Some(v) = map.get_mut(&key) {
                    walk(v, property, &child(path, &key), false, findings);
                }
            }
            None if keep_meta || preserve || additional == Some(&Value::Bool(true)) => {}
            None => {
                map.shift_remove(&key);
                findings.unknown.push(child(path, &key));
            }
        }
    }
    let mut counts = Findings::default();
    let display = shown(path);
    counted(
        schema,
        "Properties",
        "properties",
        map.len(),
        display,
        &mut counts,
    );
    findings
        .errors
        .splice(first_finding..first_finding, counts.errors);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for field in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(field) {
                findings
                    .errors
                    .push(format!("{}: Required value", child(path, field)));
            }
        }
    }
}

/// Validates the two fields of an object's metadata a schema may restrict.
fn metadata_names(
    metadata: &mut Map<String, Value>,
    schema: &Value,
    path: &str,
    findings: &mut Findings,
) {
    for field in ["name", "generateName"] {
        if let (Some(value), Some(property)) = (
            metadata.get_mut(field),
            schema.pointer(&format!("/properties/{field}")),
        ) {
            walk(value, property, &child(path, field), false, findings);
        }
    }
}

/// Fields of `original` that `known` (its typed round trip) lacks: what a
/// built-in type does not know. Nulls are ignored (they decode as absent).
pub fn unknown_fields(original: &Value, known: &Value) -> Vec<String> {
    fn diff(a: &Value, b: Option<&Value>, path: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Null, _) => {}
            (_, None) => out.push(path.to_owned()),
            (Value::Object(map), Some(Value::Object(other))) => {
                for (k, v) in map {
                    diff(v, other.get(k), &child(path, k), out);
                }
            }
            (Value::Array(items), Some(Value::Array(other))) => {
                for (i, v) in items.iter().enumerate() {
                    diff(v, other.get(i), &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    diff(original, Some(known), "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["image"], "properties": {
                "replicas": {"type": "integer", "minimum": 0, "default": 1},
                "image": {"type": "string", "minLength": 3},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "port": {"x-kubernetes-int-or-string": true}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}})
    }

    #[test]
    fn unknown_fields_should_be_what_the_round_trip_lost() {
        let original = json!({"metadata": {"name": "x", "labels": null}, "data": {"a": "1"}, "dta": {}, "spec": [{"a": 1, "b": 2}]});
        let known = json!({"metadata": {"name": "x"}, "data": {"a": "1"}, "spec": [{"a": 1}]});
        assert_eq!(unknown_fields(&original, &known), ["dta", "spec[0].b"]);
    }

    #[test]
    fn defaults_should_fill_and_unknown_fields_be_pruned() {
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "MyApp", "metadata": {"name": "x"},
            "spec": {"image": "nginx", "typo": 1, "extra": {"anything": true}, "port": "http"}, "junk": 1});
        let findings = process(&mut object, &schema());
        assert_eq!(findings.errors, Vec::<String>::new());
        assert_eq!(findings.unknown, ["spec.typo", "junk"]);
        assert_eq!(object["spec"]["replicas"], 1);
        assert_eq!(object["spec"]["extra"], json!({"anything": true}));
        assert_eq!(object["metadata"], json!({"name": "x"}));
    }

    #[test]
    fn a_metadata_schema_should_restrict_only_name_and_generate_name() {
        // What controller-gen writes, and a name rule.
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
            "spec": {"type": "object"}}});
        let metadata = json!({"name": "web", "namespace": "a", "uid": "u", "labels": {"app": "web"},
            "annotations": {"k": "v"}, "finalizers": ["f"]});
        let mut object = json!({"metadata": metadata, "spec": {}});
        let findings = process(&mut object, &schema);
        assert_eq!(findings, Findings::default());
        assert_eq!(object["metadata"], metadata, "metadata is never pruned");
        let mut long = json!({"metadata": {"name": "too-long"}});
        assert_eq!(
            process(&mut long, &schema).errors,
            ["metadata.name: Too long: may not be more than 5 bytes"]
        );
    }

    #[test]
    fn validation_should_word_errors_as_the_api_server() {
        let mut object = json!({"spec": {"image": "ng", "replicas": -1, "mode": "c"}, "status": {"ready": "yes"}});
        let errors = process(&mut object, &schema()).errors;
        assert!(errors.contains(&"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0".to_owned()), "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e.contains("spec.image in body should be at least 3 chars long")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("spec.mode: Unsupported value: \"c\"")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("status.ready in body must be of type boolean")),
            "{errors:?}"
        );
        let mut missing = json!({"spec": {}});
        assert!(
            process(&mut missing, &schema())
                .errors
                .contains(&"spec.image: Required value".to_owned())
        );
    }

    /// As a real server (v1.37.2) words them: the first of the lengths and
    /// the pattern to fail, each item of a list by its index.
    #[test]
    fn a_string_should_match_its_pattern() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 4},
            "list": {"type": "array", "items": {"type": "string", "pattern": "^x"}},
        }});
        let mut object = json!({"name": "Bad_Name", "list": ["xa", "b"]});
        assert_eq!(
            process(&mut object, &schema).errors,
            [
                "name: Too long: may not be more than 4 bytes",
                "list[1]: Invalid value: \"b\": list[1] in body should match '^x'",
            ]
        );
        let mut unmatched = json!({"name": "Bad"});
        assert_eq!(
            process(&mut unmatched, &schema).errors,
            ["name: Invalid value: \"Bad\": name in body should match '^[a-z]+(-[a-z]+)*$'"]
        );
        let mut good = json!({"name": "ok", "list": ["x"]});
        assert!(process(&mut good, &schema).errors.is_empty());
    }

    /// As a real server (v1.37.2) words them, `kubectl create` of each.
    #[test]
    fn counts_should_be_worded_as_the_api_server() {
        let schema = json!({"type": "object", "properties": {
            "short": {"type": "string", "minLength": 3, "pattern": "^z"},
            "few": {"type": "array", "minItems": 2, "items": {"type": "string"}},
            "many": {"type": "array", "maxItems": 1, "items": {"type": "integer"}},
            "props": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
            "minprops": {"type": "object", "minProperties": 2,
                "additionalProperties": {"type": "string"}},
        }});
        for (object, error) in [
            (
                json!({"short": "ab"}),
                "short: Invalid value: \"ab\": short in body should be at least 3 chars long",
            ),
            (
                json!({"few": ["a"]}),
                "few: Invalid value: 1: few in body should have at least 2 items",
            ),
            (
                json!({"many": [1, 2, 3]}),
                "many: Too many: 3: must have at most 1 item",
            ),
            (
                json!({"props": {"a": "1", "b": "2"}}),
                "props: Too many: 2: must have at most 1 item",
            ),
            (
                json!({"minprops": {"a": "1"}}),
                "minprops: Invalid value: 1: minprops in body should have at least 2 properties",
            ),
        ] {
            let mut object = object;
            assert_eq!(process(&mut object, &schema).errors, [error]);
        }
    }
}
