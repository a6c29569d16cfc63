//! A built-in object read as a real server reads it into its Go type,
//! guided by the kind's field-level OpenAPI schema. A real server has two
//! readers, and each has its rules and its words ([`Reader`]):
//!
//! - [`Reader::Json`], the JSON decoder (`sigs.k8s.io/json`, the
//!   case-sensitive fork of `encoding/json`) that reads a create's or an
//!   update's body and a merge or JSON patch's result:
//!   - `null` fits every field (it leaves the zero value);
//!   - a field the type does not name is skipped, and so is a field whose
//!     name differs only in case (those are strict validation's business);
//!   - a value of the wrong JSON type is *remembered* and decoding goes on:
//!     the first one is the error, worded with the struct that holds the
//!     field and the path of JSON names from the root (`Go struct field
//!     PodSpec.spec.containers of type []v1.Container`);
//!   - a type that decodes itself (`IntOrString`, `Quantity`, `Time`) stops
//!     decoding at its first error, which wins over a remembered one;
//!   - a `[]byte` field takes base64 (`illegal base64 data at input byte N`).
//! - [`Reader::Unstructured`], the unstructured converter
//!   (`runtime.DefaultUnstructuredConverter`) that reads a strategic merge
//!   patch's result: its first error stops it, in its own words (`cannot
//!   restore slice from string`, `cannot convert int64 to string`,
//!   `unrecognized type: int32`), and a float with no fraction fits an
//!   integer.
//! - [`Reader::Apply`], server-side apply's typed conversion of an applied
//!   configuration: the shape of each value (a list, a map, a string, a
//!   number, a boolean), its first error stops it, worded with
//!   structured-merge-diff's path (`.spec.containers[name="c"].image:
//!   expected string, got …`); what passes it is converted after, by the
//!   unstructured converter.
//!
//! A custom resource's `metadata` is read as the `ObjectMeta` it is, the
//! rest by its structural schema ([`crate::schema::structural`]).
//!
//! Go type names come from the OpenAPI schema, and from
//! `protos/gotypes.txt` where a field's Go type is a named one the schema
//! does not tell (`v1.RestartPolicy`, a string;
//! [`crate::schema::protobuf::named_go_type`]).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use kubewasm_types::info::{FieldSchema, ResourceInfo};
use serde_json::{Map, Value};

use formats::{base64_std, fits_int, quantity, time};
pub use go::go_printed;
use go::go_quoted;
pub use mismatch::Mismatch;

mod formats;
mod go;
mod mismatch;

/// Which of a real server's readers reads the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The JSON decoder: a create's or update's body, a merge or JSON
    /// patch's result.
    Json,
    /// The unstructured converter: a strategic merge patch's result.
    Unstructured,
    /// Server-side apply's typed conversion of an applied configuration.
    Apply,
}

/// The first error a real server's `reader` meets reading `object` as the
/// built-in kind `info`; `None` when it reads (or the kind has no field
/// schema: a custom resource).
pub fn mismatch(info: &ResourceInfo, object: &Value, reader: Reader) -> Option<Mismatch> {
    if info.custom {
        return metadata_mismatch(object, reader);
    }
    let schema = schema_of(info)?;
    let (reference, definitions) = schema.as_ref();
    Walk::new(reader, definitions).read(reference, object)
}

/// A custom resource's `metadata`, read as the `ObjectMeta` it is (the
/// JSON decoder names its fields from `ObjectMeta`: `ObjectMeta.labels`).
fn metadata_mismatch(object: &Value, reader: Reader) -> Option<Mismatch> {
    static OBJECT_META: LazyLock<FieldSchema> = LazyLock::new(
        kubewasm_types::field_schema::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    );
    let metadata = object.get("metadata")?;
    let (reference, definitions) = &*OBJECT_META;
    let mut walk = Walk::new(reader, definitions);
    walk.smd.push(".metadata".to_owned());
    walk.read(reference, metadata)
}

/// Each kind's field schema, built once (generating it walks every type the
/// kind uses).
fn schema_of(info: &ResourceInfo) -> Option<Arc<FieldSchema>> {
    static SCHEMAS: LazyLock<Mutex<HashMap<String, Arc<FieldSchema>>>> =
        LazyLock::new(Mutex::default);
    let build = info.field_schema?;
    let key = format!("{}/{}", info.api_version(), info.kind);
    let mut schemas = SCHEMAS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(Arc::clone(
        schemas.entry(key).or_insert_with(|| Arc::new(build())),
    ))
}

/// The types that decode themselves, by their definition's name.
#[derive(Clone, Copy)]
enum Special {
    IntOrString,
    Quantity,
    Time,
    /// `RawExtension`, `FieldsV1`, apiextensions' `JSON`…: any JSON.
    Anything,
}

fn special(definition: &str) -> Option<Special> {
    Some(match definition.rsplit('.').next()? {
        "IntOrString" => Special::IntOrString,
        "Quantity" => Special::Quantity,
        "Time" | "MicroTime" => Special::Time,
        "RawExtension"
        | "FieldsV1"
        | "JSON"
        | "JSONSchemaPropsOrArray"
        | "JSONSchemaPropsOrBool"
        | "JSONSchemaPropsOrStringArray" => Special::Anything,
        _ => return None,
    })
}

/// `io.k8s.api.core.v1.Container` → `v1.Container`.
fn go_name(definition: &str) -> String {
    let mut parts = definition.rsplit('.');
    let name = parts.next().unwrap_or(definition);
    match parts.next() {
        Some(package) => format!("{package}.{name}"),
        None => name.to_owned(),
    }
}

/// The definition a schema names (`$ref`, or `allOf` of one `$ref`).
fn reference(schema: &Value) -> Option<&str> {
    let named = schema.get("$ref").or_else(|| {
        schema
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|all| all.first())
            .and_then(|first| first.get("$ref"))
    })?;
    named.as_str()?.rsplit('/').next()
}

/// How Go's JSON decoder names a JSON value's type in an error.
fn json_type(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(_) => "bool".to_owned(),
        Value::Number(_) => "number".to_owned(),
        Value::String(_) => "string".to_owned(),
        Value::Array(_) => "array".to_owned(),
        Value::Object(_) => "object".to_owned(),
    }
}

/// The Go kind of a value in an unstructured object (numbers are `int64`
/// when whole in the text, `float64` otherwise).
fn unstructured_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

/// A scalar field's Go kind, by its schema.
fn scalar_kind(schema: &Value) -> Option<&'static str> {
    let text = |key: &str| schema.get(key).and_then(Value::as_str);
    Some(match (text("type")?, text("format")) {
        ("string", Some("byte")) => return None,
        ("string", _) => "string",
        ("integer", Some("int32")) => "int32",
        ("integer", _) => "int64",
        ("number", _) => "float64",
        ("boolean", _) => "bool",
        _ => return None,
    })
}

struct Walk<'a> {
    reader: Reader,
    /// structured-merge-diff's path of the value being read
    /// ([`Reader::Apply`]).
    smd: Vec<String>,
    definitions: &'a Map<String, Value>,
    /// The JSON names of the struct fields entered, from the root.
    path: Vec<String>,
    /// The Go struct holding the field being read (its definition's name).
    within: String,
    /// The first wrong-typed value met: the JSON decoder goes on past it.
    remembered: Option<Mismatch>,
}

impl<'a> Walk<'a> {
    fn new(reader: Reader, definitions: &'a Map<String, Value>) -> Self {
        Walk {
            reader,
            smd: Vec::new(),
            definitions,
            path: Vec::new(),
            within: String::new(),
            remembered: None,
        }
    }

    /// Reads `object` as `reference`'s type: the error that stops reading,
    /// else the first remembered one.
    fn read(mut self, reference: &Value, object: &Value) -> Option<Mismatch> {
        match self.value(reference, object, None) {
            Err(stop) => Some(stop),
            Ok(()) => self.remembered,
        }
    }

    /// A value of another shape than its field's `expected` one
    /// ([`Reader::Apply`]), printed as structured-merge-diff prints it.
    fn typed(&self, expected: &'static str, value: &Value) -> Mismatch {
        let got = match expected {
            "string" => format!("&value.valueUnstructured{{Value:{}}}", go_quoted(value)),
            "numeric (int or float)" => match value {
                Value::Bool(_) => "bool",
                Value::String(_) => "string",
                Value::Array(_) => "[]interface {}",
                _ => "map[string]interface {}",
            }
            .to_owned(),
            _ => format!("&{{{}}}", go_printed(value)),
        };
        Mismatch::Typed {
            path: self.smd.concat(),
            expected,
            got,
        }
    }

    /// [`Reader::Apply`]'s rule for a value of `schema`'s shape.
    fn shaped(schema: &Value, value: &Value) -> Option<&'static str> {
        let kind = schema.get("type").and_then(Value::as_str);
        let expected = match (kind?, value) {
            ("array", Value::Array(_))
            | ("object", Value::Object(_))
            | ("string", Value::String(_))
            | ("integer" | "number", Value::Number(_))
            | ("boolean", Value::Bool(_)) => return None,
            ("array", _) => "list",
            ("object", _) => "map",
            ("string", _) => "string",
            ("integer" | "number", _) => "numeric (int or float)",
            ("boolean", _) => "boolean",
            _ => return None,
        };
        Some(expected)
    }
    /// A value of the wrong JSON type for the field being read (for the
    /// value itself, when no field is being read).
    fn wrong(&self, value: String, go_type: String) -> Mismatch {
        if self.path.is_empty() {
            return Mismatch::Value { value, go_type };
        }
        Mismatch::Field {
            value,
            within: self
                .within
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_owned(),
            field: self.path.join("."),
            go_type,
        }
    }

    /// A mismatch the JSON decoder remembers and goes on past, and the
    /// unstructured converter stops at.
    fn mismatched(&mut self, mismatch: Mismatch) -> Result<(), Mismatch> {
        match self.reader {
            Reader::Unstructured | Reader::Apply => Err(mismatch),
            Reader::Json => {
                if self.remembered.is_none() {
                    self.remembered = Some(mismatch);
                }
                Ok(())
            }
        }
    }

    /// Reads `value` as `schema`'s type, whose Go type is `named` when the
    /// schema does not tell it; `Err` stops reading.
    fn value(
        &mut self,
        schema: &Value,
        value: &Value,
        named: Option<&str>,
    ) -> Result<(), Mismatch> {
        if value.is_null() {
            return Ok(());
        }
        if let Some(definition) = reference(schema) {
            if let Some(special) = special(definition) {
                return match (self.reader, special, value) {
                    (Reader::Apply, Special::Time, Value::String(_))
                    | (Reader::Apply, Special::Anything | Special::IntOrString, _)
                    | (Reader::Apply, Special::Quantity, _) => Ok(()),
                    (Reader::Apply, Special::Time, other) => Err(self.typed("string", other)),
                    _ => self.special(special, value),
                };
            }
            let Some(resolved) = self.definitions.get(definition) else {
                return Ok(());
            };
            let structure = resolved.get("properties").is_some()
                || (resolved.get("type").and_then(Value::as_str) == Some("object")
                    && resolved.get("additionalProperties").is_none());
            if structure {
                return self.structure(definition, resolved, value);
            }
            return self.value(resolved, value, named);
        }
        let kind = schema.get("type").and_then(Value::as_str);
        if self.reader == Reader::Apply
            && let Some(expected) = Self::shaped(schema, value)
        {
            return Err(self.typed(expected, value));
        }
        match (kind, value) {
            (None, _) => Ok(()),
            (Some("array"), Value::Array(items)) => {
                let Some(item) = schema.get("items") else {
                    return Ok(());
                };
                let named = named.and_then(|n| n.strip_prefix("[]"));
                let field = self.path.last().cloned().unwrap_or_default();
                for (index, element) in items.iter().enumerate() {
                    self.smd
                        .push(crate::mutation::element_segment(&field, element, index));
                    self.value(item, element, named)?;
                    self.smd.pop();
                }
                Ok(())
            }
            (Some("object"), Value::Object(entries)) => {
                let Some(item) = schema.get("additionalProperties").filter(|a| a.is_object())
                else {
                    return Ok(());
                };
                let named = named
                    .and_then(|n| n.strip_prefix("map["))
                    .and_then(|n| n.split_once(']'))
                    .map(|(_, element)| element);
                for (key, entry) in entries {
                    self.smd.push(format!(".{key}"));
                    self.value(item, entry, named)?;
                    self.smd.pop();
                }
                Ok(())
            }
            (Some(_), _) if self.reader == Reader::Apply => Ok(()),
            (Some("string"), Value::String(text))
                if schema.get("format").and_then(Value::as_str) == Some("byte") =>
            {
                match (base64_std(text.as_bytes()), self.reader) {
                    (Ok(()), _) | (_, Reader::Apply) => Ok(()),
                    (Err(at), Reader::Json) => self.mismatched(Mismatch::Base64(at)),
                    (Err(at), Reader::Unstructured) => Err(Mismatch::ConvertedBase64(at)),
                }
            }
            (Some(_), other) => {
                let go_type = named.map_or_else(|| go_type(schema), str::to_owned);
                match self.reader {
                    Reader::Json => self.json_scalar(schema, other, go_type),
                    Reader::Unstructured => self.unstructured_scalar(schema, other, go_type),
                    Reader::Apply => Ok(()),
                }
            }
        }
    }

    /// The JSON decoder's rules for a value where a scalar, a list or a map
    /// is expected: the JSON types must agree, and an integer field takes
    /// an integer literal that fits.
    fn json_scalar(
        &mut self,
        schema: &Value,
        value: &Value,
        go_type: String,
    ) -> Result<(), Mismatch> {
        let kind = schema.get("type").and_then(Value::as_str);
        let fits = match (kind, value) {
            (Some("string"), Value::String(_))
            | (Some("number"), Value::Number(_))
            | (Some("boolean"), Value::Bool(_)) => return Ok(()),
            (Some("integer"), Value::Number(number)) => {
                let bits = if scalar_kind(schema) == Some("int32") {
                    32
                } else {
                    64
                };
                if fits_int(number, bits) {
                    return Ok(());
                }
                format!("number {number}")
            }
            (_, other) => json_type(other),
        };
        let wrong = self.wrong(fits, go_type);
        self.mismatched(wrong)
    }

    /// The unstructured converter's rules for the same.
    fn unstructured_scalar(
        &mut self,
        schema: &Value,
        value: &Value,
        go_type: String,
    ) -> Result<(), Mismatch> {
        let from = unstructured_kind(value);
        let kind = schema.get("type").and_then(Value::as_str);
        let restore = match kind {
            Some("array") => Some("slice"),
            Some("string") if scalar_kind(schema).is_none() => Some("slice"),
            Some("object") => Some("map"),
            _ => None,
        };
        if let Some(what) = restore {
            return Err(Mismatch::Restore { what, from });
        }
        let Some(to) = scalar_kind(schema) else {
            return Ok(());
        };
        let whole = value.as_f64().is_some_and(|f| f.fract() == 0.0);
        match (from, to) {
            ("string", "string") | ("bool", "bool") | ("int64", "int32" | "int64" | "float64") => {
                Ok(())
            }
            ("float64", "float64") => Ok(()),
            ("float64", "int32" | "int64") if whole => Ok(()),
            ("int64", "string") | ("float64", "int32" | "int64") => {
                Err(Mismatch::Convert { from, to: go_type })
            }
            _ => Err(Mismatch::Unrecognized(to)),
        }
    }

    /// Reads an object into the struct `definition`: each field it names,
    /// in the document's order, with that field pushed on the context.
    fn structure(
        &mut self,
        definition: &str,
        resolved: &Value,
        value: &Value,
    ) -> Result<(), Mismatch> {
        let Value::Object(entries) = value else {
            return match self.reader {
                Reader::Apply => Err(self.typed("map", value)),
                Reader::Json => {
                    let wrong = self.wrong(json_type(value), go_name(definition));
                    self.mismatched(wrong)
                }
                Reader::Unstructured => Err(Mismatch::Restore {
                    what: "struct",
                    from: unstructured_kind(value),
                }),
            };
        };
        let no_fields = Map::new();
        let fields = match resolved.get("properties") {
            Some(Value::Object(fields)) => fields,
            _ => &no_fields,
        };
        for (key, field_value) in entries {
            let Some(field) = fields.get(key) else {
                continue;
            };
            // `io.k8s.api.core.v1.PodSpec` is protobuf's `api.core.v1.PodSpec`.
            let message = definition.strip_prefix("io.k8s.").unwrap_or(definition);
            let named = crate::schema::protobuf::named_go_type(&message.replace('-', "_"), key);
            let outer = std::mem::replace(&mut self.within, definition.to_owned());
            self.path.push(key.clone());
            self.smd.push(format!(".{key}"));
            self.value(field, field_value, named)?;
            self.smd.pop();
            self.path.pop();
            self.within = outer;
        }
        Ok(())
    }

    /// A type that decodes itself: its errors stop reading.
    fn special(&self, special: Special, value: &Value) -> Result<(), Mismatch> {
        // `json.Unmarshal(value, &into)` inside the type's `UnmarshalJSON`:
        // the JSON decoder names the field it was reading, the converter
        // (which calls `UnmarshalJSON` itself) does not.
        let refused = |value: String, into: &str| match self.reader {
            Reader::Json => self.wrong(value, into.to_owned()),
            Reader::Unstructured | Reader::Apply => Mismatch::Value {
                value,
                go_type: into.to_owned(),
            },
        };
        match (special, value) {
            (Special::Anything, _) | (Special::IntOrString, Value::String(_)) => Ok(()),
            (Special::IntOrString, Value::Number(number)) if fits_int(number, 32) => Ok(()),
            (Special::IntOrString, Value::Number(number)) => {
                Err(refused(format!("number {number}"), "int32"))
            }
            (Special::IntOrString, other) => Err(refused(json_type(other), "int32")),
            (Special::Quantity, Value::String(text)) => quantity(text.trim()),
            (Special::Quantity, other) => quantity(&other.to_string()),
            (Special::Time, Value::String(text)) => time(text),
            (Special::Time, other) => Err(refused(json_type(other), "string")),
        }
    }
}

/// The Go type a schema describes, as `reflect.Type.String()` prints it.
fn go_type(schema: &Value) -> String {
    if let Some(definition) = reference(schema) {
        return go_name(definition);
    }
    let text = |key: &str| schema.get(key).and_then(Value::as_str);
    match text("type") {
        Some("array") => format!(
            "[]{}",
            schema
                .get("items")
                .map_or_else(|| "interface {}".to_owned(), go_type)
        ),
        Some("object") => format!(
            "map[string]{}",
            schema
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .map_or_else(|| "interface {}".to_owned(), go_type)
        ),
        Some("string") if text("format") == Some("byte") => "[]uint8".to_owned(),
        _ => scalar_kind(schema).unwrap_or("interface {}").to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_types::registry::Registry;
    use serde_json::json;

    fn pod() -> ResourceInfo {
        Registry::builtin()
            .get("", "v1", "pods")
            .expect("pods")
            .clone()
    }

    fn message(info: &ResourceInfo, object: Value) -> Option<String> {
        mismatch(info, &object, Reader::Json).map(|m| m.to_string())
    }

    #[test]
    fn a_wrong_typed_field_should_be_named_as_go_names_it() {
        let body = json!({"metadata": {"name": "p"}, "spec": {"containers": "nope"}});
        assert_eq!(
            message(&pod(), body).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of \
                 type []v1.Container"
            )
        );
        let body =
            json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 1.5}]}]}});
        assert_eq!(
            message(&pod(), body).as_deref(),
            Some(
                "json: cannot unmarshal number 1.5 into Go struct field \
                 ContainerPort.spec.containers.ports.containerPort of type int32"
            )
        );
        let body = json!({"metadata": {"labels": {"a": 5}}});
        assert_eq!(
            message(&pod(), body).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels \
                 of type string"
            )
        );
    }

    #[test]
    fn the_first_remembered_mismatch_should_win_unless_a_self_decoding_type_stops() {
        let body = json!({"spec": {"volumes": 5, "hostNetwork": "yes"}});
        let first = message(&pod(), body).unwrap_or_default();
        assert!(
            first.contains("PodSpec.spec.volumes of type []v1.Volume"),
            "{first}"
        );
        let body = json!({"spec": {"hostNetwork": "yes", "containers": [
            {"name": "c", "resources": {"limits": {"cpu": "lots"}}}
        ]}});
        assert_eq!(
            mismatch(&pod(), &body, Reader::Json),
            Some(Mismatch::QuantityFormat),
            "a quantity's error stops decoding and wins"
        );
    }

    #[test]
    fn null_unknown_and_differently_cased_fields_should_decode() {
        let body = json!({"metadata": null, "spec": {"Containers": 5, "whatever": [1],
            "containers": [{"name": "c", "image": null}]}});
        assert_eq!(message(&pod(), body), None);
    }

    #[test]
    fn self_decoding_types_should_take_what_go_takes() {
        let service = Registry::builtin()
            .get("", "v1", "services")
            .expect("services")
            .clone();
        let port = |target: Value| json!({"spec": {"ports": [{"port": 80, "targetPort": target}]}});
        assert_eq!(message(&service, port(json!("http"))), None);
        assert_eq!(message(&service, port(json!(8080))), None);
        assert_eq!(
            message(&service, port(json!({}))).as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field \
                 ServicePort.spec.ports.targetPort of type int32"
            )
        );
        let limits = |cpu: Value| json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu}}}]}});
        for fine in [
            json!("100m"),
            json!(2),
            json!("1.5Gi"),
            json!("1e3"),
            json!(" 5 "),
        ] {
            assert_eq!(message(&pod(), limits(fine.clone())), None, "{fine}");
        }
        assert_eq!(
            mismatch(&pod(), &limits(json!("5Q")), Reader::Json),
            Some(Mismatch::QuantityFormat)
        );
        assert_eq!(
            mismatch(&pod(), &limits(json!("5Mk")), Reader::Json),
            Some(Mismatch::QuantitySuffix)
        );
        let stamp = |t: Value| json!({"metadata": {"creationTimestamp": t}});
        assert_eq!(message(&pod(), stamp(json!("2026-12-04T18:00:00Z"))), None);
        assert_eq!(
            message(&pod(), stamp(json!("2026-12-04T18:00:00.5+01:00"))),
            None
        );
        assert_eq!(
            message(&pod(), stamp(json!("yesterday"))).as_deref(),
            Some(
                "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \
                 \"yesterday\" as \"2006\""
            )
        );
        assert_eq!(
            message(&pod(), stamp(json!("2026-02-30T00:00:00Z"))).as_deref(),
            Some("parsing time \"2026-02-30T00:00:00Z\": day out of range")
        );
        assert_eq!(
            message(&pod(), stamp(json!(5))).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field \
                 ObjectMeta.metadata.creationTimestamp of type string"
            )
        );
    }

    #[test]
    fn bytes_should_be_standard_base64() {
        let secret = Registry::builtin()
            .get("", "v1", "secrets")
            .expect("secrets")
            .clone();
        let data = |text: &str| json!({"data": {"k": text}});
        for fine in ["", "YWJj", "YWI=", "YQ==", "YW\nJj"] {
            assert_eq!(message(&secret, data(fine)), None, "{fine:?}");
        }
        for (bad, at) in [
            ("abc", 0),
            ("a!bc", 1),
            ("YQ=", 3),
            ("YQ==YQ==", 4),
            ("Y===", 1),
        ] {
            assert_eq!(
                mismatch(&secret, &data(bad), Reader::Json),
                Some(Mismatch::Base64(at)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_unstructured_converter_should_stop_at_its_first_error_in_its_words() {
        let read = |info: &ResourceInfo, object: Value| {
            mismatch(info, &object, Reader::Unstructured).map(|m| m.to_string())
        };
        let spec = |spec: Value| json!({"spec": spec});
        // Each as kube-apiserver v1.37.2 answers a strategic merge patch.
        for (body, said) in [
            (
                spec(json!({"containers": "nope"})),
                "cannot restore slice from string",
            ),
            (
                spec(json!({"activeDeadlineSeconds": "x"})),
                "unrecognized type: int64",
            ),
            (
                spec(json!({"activeDeadlineSeconds": 1.5})),
                "cannot convert float64 to int64",
            ),
            (
                json!({"metadata": {"labels": "x"}}),
                "cannot restore map from string",
            ),
            (
                spec(json!({"securityContext": "x"})),
                "cannot restore struct from: string",
            ),
            (spec(json!({"hostNetwork": "x"})), "unrecognized type: bool"),
            (
                json!({"metadata": {"annotations": {"a": true}}}),
                "unrecognized type: string",
            ),
            (
                spec(
                    json!({"containers": [{"name": "c", "ports": [{"containerPort": {"a": 1}}]}]}),
                ),
                "unrecognized type: int32",
            ),
            (
                spec(
                    json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": "5Mk"}}}]}),
                ),
                "unable to parse quantity's suffix",
            ),
        ] {
            assert_eq!(read(&pod(), body.clone()).as_deref(), Some(said), "{body}");
        }
        assert_eq!(
            read(&pod(), spec(json!({"activeDeadlineSeconds": 2.0}))),
            None
        );
        let config_map = Registry::builtin()
            .get("", "v1", "configmaps")
            .expect("configmaps")
            .clone();
        assert_eq!(
            read(&config_map, json!({"data": {"a": 5}})).as_deref(),
            Some("cannot convert int64 to string")
        );
    }

    #[test]
    fn a_named_go_type_should_be_named_for_the_field_and_not_its_elements() {
        let body = json!({"spec": {"restartPolicy": 5}});
        let said = message(&pod(), body).unwrap_or_default();
        assert!(
            said.ends_with("PodSpec.spec.restartPolicy of type v1.RestartPolicy"),
            "{said}"
        );
        let capabilities = |add: Value| json!({"spec": {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": add}}}]}});
        let said = message(&pod(), capabilities(json!("NET_ADMIN"))).unwrap_or_default();
        assert!(said.ends_with("of type []v1.Capability"), "{said}");
        let said = message(&pod(), capabilities(json!([5]))).unwrap_or_default();
        assert!(said.ends_with("of type v1.Capability"), "{said}");
        let said = mismatch(
            &pod(),
            &json!({"spec": {"restartPolicy": 5}}),
            Reader::Unstructured,
        );
        assert_eq!(
            said.map(|m| m.to_string()).as_deref(),
            Some("cannot convert int64 to v1.RestartPolicy")
        );
    }

    #[test]
    fn a_patch_should_be_printed_as_go_prints_a_map() {
        let patch =
            json!({"spec": {"b": [1, "a", {"c": null}], "a": true}, "metadata": {"x": 1.5}});
        assert_eq!(
            go_printed(&patch),
            "map[metadata:map[x:1.5] spec:map[a:true b:[1 a map[]]]]"
        );
        assert_eq!(go_printed(&json!(1e21)), "1e+21");
        assert_eq!(go_printed(&json!(0.00001)), "1e-05");
        assert_eq!(go_printed(&json!(2.0)), "2");
    }

    #[test]
    fn an_applied_configuration_should_be_refused_by_shape_with_its_path() {
        let read = |info: &ResourceInfo, object: Value| {
            mismatch(info, &object, Reader::Apply).map(|m| m.to_string())
        };
        let containers = |c: Value| json!({"spec": {"containers": [c]}});
        // Each as kube-apiserver v1.37.2 answers an apply.
        for (body, said) in [
            (
                containers(json!({"name": "c", "image": 5})),
                ".spec.containers[name=\"c\"].image: expected string, got \
                 &value.valueUnstructured{Value:5}",
            ),
            (
                containers(json!({"name": "c", "ports": [{"containerPort": "x"}]})),
                ".spec.containers[name=\"c\"].ports[containerPort=\"x\",protocol=\"TCP\"].\
                 containerPort: expected numeric (int or float), got string",
            ),
            (
                containers(json!({"name": "c", "args": [5]})),
                ".spec.containers[name=\"c\"].args[0]: expected string, got \
                 &value.valueUnstructured{Value:5}",
            ),
            (
                json!({"spec": {"hostNetwork": {"a": [1]}}}),
                ".spec.hostNetwork: expected boolean, got &{map[a:[1]]}",
            ),
            (
                json!({"metadata": {"finalizers": [5]}}),
                ".metadata.finalizers[=5]: expected string, got &value.valueUnstructured{Value:5}",
            ),
        ] {
            assert_eq!(read(&pod(), body.clone()).as_deref(), Some(said), "{body}");
        }
        assert_eq!(
            read(
                &pod(),
                containers(json!({"name": "c", "ports": [{"containerPort": 1.5}]}))
            ),
            None,
            "a fraction is a number: the conversion after refuses it"
        );
    }

    #[test]
    fn a_custom_resource_should_have_its_metadata_read_as_object_meta() {
        let mut gadget = pod();
        gadget.custom = true;
        gadget.field_schema = None;
        let said = |object: Value| message(&gadget, object);
        assert_eq!(
            said(json!({"metadata": {"labels": {"a": 5}}, "spec": {"anything": [1]}})).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"
            )
        );
        assert_eq!(
            said(json!({"metadata": "x"})).as_deref(),
            Some("json: cannot unmarshal string into Go value of type v1.ObjectMeta")
        );
        assert_eq!(
            said(json!({"metadata": {"ownerReferences": [{"uid": 5}]}})).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field \
                 OwnerReference.ownerReferences.uid of type types.UID"
            )
        );
        assert_eq!(said(json!({"spec": "whatever its schema says"})), None);
    }
}
