//! An OpenAPI v2 document in protobuf: gnostic's `openapi.v2.Document`
//! (`github.com/google/gnostic-models/openapiv2/OpenAPIv2.proto`), what
//! client-go's `OpenAPISchema()` asks for (`Accept:
//! application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) and decodes
//! with no fallback to JSON.
//!
//! # Rules
//! - The document is written from its JSON form, so both forms say the same.
//!   Each gnostic message is a table from a JSON key to its field number and
//!   kind; a key its message lacks is not Swagger 2.0 and is left out.
//! - JSON maps become gnostic's repeated `Named*` pairs, in the map's order;
//!   keys that start with `x-` become the message's `vendor_extension`.
//! - A value gnostic keeps as `Any` (`default`, `enum`, `example`, vendor
//!   extensions) is carried as YAML text, which is how Go's readers parse
//!   it (`x-kubernetes-group-version-kind` among them); JSON is YAML.
//! - A schema's `type` is gnostic's `TypeItem` (a string or a list); its
//!   `items` an `ItemsItem` (a schema or a list of them);
//!   `additionalProperties` a schema or a boolean.
//! - A parameter is a body parameter, a query, path, header or form one by
//!   its `in`, or a `$ref`: gnostic's `oneof`s.
//! - proto3: empty strings, `false` and zero numbers are not written;
//!   messages are, even when empty (their presence is meaningful: an empty
//!   `properties` is not a missing one).

use serde_json::Value;

/// How a JSON key of a message is written.
#[derive(Clone, Copy)]
enum Field {
    /// `string`.
    Text(u32),
    /// `repeated string`, from a list of strings.
    Texts(u32),
    Boolean(u32),
    /// `double`.
    Number(u32),
    /// `int64`.
    Integer(u32),
    /// `Any`: the value as YAML text.
    Any(u32),
    /// `repeated Any`, from a list.
    Anys(u32),
    /// A message by its encoder.
    Message(u32, fn(&Value) -> Vec<u8>),
    /// `repeated` messages, from a list.
    Messages(u32, fn(&Value) -> Vec<u8>),
}

/// A message's keys, and the field of its vendor extensions if it has one.
struct Table {
    fields: &'static [(&'static str, Field)],
    extensions: Option<u32>,
}

/// A protobuf message being written.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            // The low seven bits, then a continuation bit.
            self.0.push((value & 0x7f) as u8 | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    fn tag(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.tag(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn text(&mut self, field: u32, text: &str) {
        if !text.is_empty() {
            self.bytes(field, text.as_bytes());
        }
    }

    fn boolean(&mut self, field: u32, value: bool) {
        if value {
            self.tag(field, 0);
            self.varint(1);
        }
    }

    fn number(&mut self, field: u32, value: f64) {
        if value != 0.0 {
            self.tag(field, 1);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn integer(&mut self, field: u32, value: i64) {
        if value != 0 {
            self.tag(field, 0);
            // Negative int64s are ten-byte varints of their two's complement.
            self.varint(value as u64);
        }
    }

    /// One named pair (`Named*`): `name = 1`, `value = 2`.
    fn named(&mut self, field: u32, name: &str, value: &[u8]) {
        let mut pair = Writer::default();
        pair.text(1, name);
        pair.bytes(2, value);
        self.bytes(field, &pair.0);
    }

    /// `key: value` by `field`'s kind; a value of the wrong JSON type is
    /// left out.
    fn field(&mut self, field: Field, value: &Value) {
        match field {
            Field::Text(n) => self.text(n, value.as_str().unwrap_or_default()),
            Field::Texts(n) => {
                for text in value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    self.bytes(n, text.as_bytes());
                }
            }
            Field::Boolean(n) => self.boolean(n, value.as_bool().unwrap_or_default()),
            Field::Number(n) => self.number(n, value.as_f64().unwrap_or_default()),
            Field::Integer(n) => self.integer(n, value.as_i64().unwrap_or_default()),
            Field::Any(n) => self.bytes(n, &any(value)),
            Field::Anys(n) => {
                for item in value.as_array().into_iter().flatten() {
                    self.bytes(n, &any(item));
                }
            }
            Field::Message(n, encode) => self.bytes(n, &encode(value)),
            Field::Messages(n, encode) => {
                for item in value.as_array().into_iter().flatten() {
                    self.bytes(n, &encode(item));
                }
            }
        }
    }
}

/// `value`, an object, written by `table`.
fn by_table(table: &Table, value: &Value) -> Vec<u8> {
    let mut writer = Writer::default();
    for (key, item) in value.as_object().into_iter().flatten() {
        if let Some((_, field)) = table.fields.iter().find(|(name, _)| name == key) {
            writer.field(*field, item);
        } else if let Some(n) = table.extensions
            && key.starts_with("x-")
        {
            writer.named(n, key, &any(item));
        }
    }
    writer.0
}

/// gnostic's `Any`: `yaml = 2`.
fn any(value: &Value) -> Vec<u8> {
    let mut writer = Writer::default();
    writer.text(2, &value.to_string());
    writer.0
}

/// An object's entries as repeated `Named*` pairs in `field`, each value
/// written by `encode`; `x-` keys into `extensions` if given.
fn named_map(
    value: &Value,
    field: u32,
    extensions: Option<u32>,
    encode: fn(&Value) -> Vec<u8>,
) -> Vec<u8> {
    let mut writer = Writer::default();
    for (key, item) in value.as_object().into_iter().flatten() {
        match extensions {
            Some(n) if key.starts_with("x-") => writer.named(n, key, &any(item)),
            _ => writer.named(field, key, &encode(item)),
        }
    }
    writer.0
}

/// The whole document: `Document`.
pub fn document(value: &Value) -> Vec<u8> {
    by_table(&DOCUMENT, value)
}

const DOCUMENT: Table = Table {
    fields: &[
        ("swagger", Field::Text(1)),
        ("info", Field::Message(2, info)),
        ("host", Field::Text(3)),
        ("basePath", Field::Text(4)),
        ("schemes", Field::Texts(5)),
        ("consumes", Field::Texts(6)),
        ("produces", Field::Texts(7)),
        ("paths", Field::Message(8, paths)),
        ("definitions", Field::Message(9, named_schemas)),
    ],
    extensions: Some(16),
};

fn info(value: &Value) -> Vec<u8> {
    const INFO: Table = Table {
        fields: &[
            ("title", Field::Text(1)),
            ("version", Field::Text(2)),
            ("description", Field::Text(3)),
        ],
        extensions: Some(7),
    };
    by_table(&INFO, value)
}

/// `Paths`: `vendor_extension = 1`, `path = 2` (`NamedPathItem`s).
fn paths(value: &Value) -> Vec<u8> {
    named_map(value, 2, Some(1), path_item)
}

/// `Definitions` and a schema's `Properties`: `additional_properties = 1`
/// (`NamedSchema`s).
fn named_schemas(value: &Value) -> Vec<u8> {
    named_map(value, 1, None, schema)
}

fn path_item(value: &Value) -> Vec<u8> {
    const PATH_ITEM: Table = Table {
        fields: &[
            ("$ref", Field::Text(1)),
            ("get", Field::Message(2, operation)),
            ("put", Field::Message(3, operation)),
            ("post", Field::Message(4, operation)),
            ("delete", Field::Message(5, operation)),
            ("options", Field::Message(6, operation)),
            ("head", Field::Message(7, operation)),
            ("patch", Field::Message(8, operation)),
            ("parameters", Field::Messages(9, parameters_item)),
        ],
        extensions: Some(10),
    };
    by_table(&PATH_ITEM, value)
}

fn operation(value: &Value) -> Vec<u8> {
    const OPERATION: Table = Table {
        fields: &[
            ("tags", Field::Texts(1)),
            ("summary", Field::Text(2)),
            ("description", Field::Text(3)),
            ("operationId", Field::Text(5)),
            ("produces", Field::Texts(6)),
            ("consumes", Field::Texts(7)),
            ("parameters", Field::Messages(8, parameters_item)),
            ("responses", Field::Message(9, responses)),
            ("schemes", Field::Texts(10)),
            ("deprecated", Field::Boolean(11)),
        ],
        extensions: Some(13),
    };
    by_table(&OPERATION, value)
}

/// `Responses`: `response_code = 1` (`NamedResponseValue`s),
/// `vendor_extension = 2`.
fn responses(value: &Value) -> Vec<u8> {
    named_map(value, 1, Some(2), response_value)
}

/// `ResponseValue`: `response = 1` or `json_reference = 2`.
fn response_value(value: &Value) -> Vec<u8> {
    const RESPONSE: Table = Table {
        fields: &[
            ("description", Field::Text(1)),
            ("schema", Field::Message(2, schema_item)),
        ],
        extensions: Some(5),
    };
    let mut writer = Writer::default();
    if value.get("$ref").is_some() {
        writer.bytes(2, &by_table(&JSON_REFERENCE, value));
    } else {
        writer.bytes(1, &by_table(&RESPONSE, value));
    }
    writer.0
}

const JSON_REFERENCE: Table = Table {
    fields: &[("$ref", Field::Text(1)), ("description", Field::Text(2))],
    extensions: None,
};

/// `SchemaItem`: `schema = 1` (file schemas are not written).
fn schema_item(value: &Value) -> Vec<u8> {
    let mut writer = Writer::default();
    writer.bytes(1, &schema(value));
    writer.0
}

/// `ParametersItem`: `parameter = 1` or `json_reference = 2`; a
/// `Parameter` is `body_parameter = 1` or `non_body_parameter = 2`, whose
/// `oneof` is header 1, form data 2, query 3, path 4.
fn parameters_item(value: &Value) -> Vec<u8> {
    const BODY: Table = Table {
        fields: &[
            ("description", Field::Text(1)),
            ("name", Field::Text(2)),
            ("in", Field::Text(3)),
            ("required", Field::Boolean(4)),
            ("schema", Field::Message(5, schema)),
        ],
        extensions: Some(6),
    };
    let mut item = Writer::default();
    if value.get("$ref").is_some() {
        item.bytes(2, &by_table(&JSON_REFERENCE, value));
        return item.0;
    }
    let mut parameter = Writer::default();
    match value.get("in").and_then(Value::as_str) {
        Some("body") => parameter.bytes(1, &by_table(&BODY, value)),
        place => {
            let (field, table) = match place {
                Some("header") => (1, &PATH_OR_HEADER),
                Some("formData") => (2, &QUERY_OR_FORM),
                Some("path") => (4, &PATH_OR_HEADER),
                _ => (3, &QUERY_OR_FORM),
            };
            let mut non_body = Writer::default();
            non_body.bytes(field, &by_table(table, value));
            parameter.bytes(2, &non_body.0);
        }
    }
    item.bytes(1, &parameter.0);
    item.0
}

/// `QueryParameterSubSchema` and `FormDataParameterSubSchema` (numbered
/// alike).
const QUERY_OR_FORM: Table = Table {
    fields: &[
        ("required", Field::Boolean(1)),
        ("in", Field::Text(2)),
        ("description", Field::Text(3)),
        ("name", Field::Text(4)),
        ("allowEmptyValue", Field::Boolean(5)),
        ("type", Field::Text(6)),
        ("format", Field::Text(7)),
        ("items", Field::Message(8, primitives_items)),
        ("collectionFormat", Field::Text(9)),
        ("default", Field::Any(10)),
        ("maximum", Field::Number(11)),
        ("exclusiveMaximum", Field::Boolean(12)),
        ("minimum", Field::Number(13)),
        ("exclusiveMinimum", Field::Boolean(14)),
        ("maxLength", Field::Integer(15)),
        ("minLength", Field::Integer(16)),
        ("pattern", Field::Text(17)),
        ("maxItems", Field::Integer(18)),
        ("minItems", Field::Integer(19)),
        ("uniqueItems", Field::Boolean(20)),
        ("enum", Field::Anys(21)),
        ("multipleOf", Field::Number(22)),
    ],
    extensions: Some(23),
};

/// `PathParameterSubSchema` and `HeaderParameterSubSchema` (numbered
/// alike: no `allowEmptyValue`).
const PATH_OR_HEADER: Table = Table {
    fields: &[
        ("required", Field::Boolean(1)),
        ("in", Field::Text(2)),
        ("description", Field::Text(3)),
        ("name", Field::Text(4)),
        ("type", Field::Text(5)),
        ("format", Field::Text(6)),
        ("items", Field::Message(7, primitives_items)),
        ("collectionFormat", Field::Text(8)),
        ("default", Field::Any(9)),
        ("maximum", Field::Number(10)),
        ("exclusiveMaximum", Field::Boolean(11)),
        ("minimum", Field::Number(12)),
        ("exclusiveMinimum", Field::Boolean(13)),
        ("maxLength", Field::Integer(14)),
        ("minLength", Field::Integer(15)),
        ("pattern", Field::Text(16)),
        ("maxItems", Field::Integer(17)),
        ("minItems", Field::Integer(18)),
        ("uniqueItems", Field::Boolean(19)),
        ("enum", Field::Anys(20)),
        ("multipleOf", Field::Number(21)),
    ],
    extensions: Some(22),
};

fn primitives_items(value: &Value) -> Vec<u8> {
    const PRIMITIVES_ITEMS: Table = Table {
        fields: &[
            ("type", Field::Text(1)),
            ("format", Field::Text(2)),
            ("items", Field::Message(3, primitives_items)),
            ("collectionFormat", Field::Text(4)),
            ("default", Field::Any(5)),
            ("maximum", Field::Number(6)),
            ("exclusiveMaximum", Field::Boolean(7)),
            ("minimum", Field::Number(8)),
            ("exclusiveMinimum", Field::Boolean(9)),
            ("maxLength", Field::Integer(10)),
            ("minLength", Field::Integer(11)),
            ("pattern", Field::Text(12)),
            ("maxItems", Field::Integer(13)),
            ("minItems", Field::Integer(14)),
            ("uniqueItems", Field::Boolean(15)),
            ("enum", Field::Anys(16)),
            ("multipleOf", Field::Number(17)),
        ],
        extensions: Some(18),
    };
    by_table(&PRIMITIVES_ITEMS, value)
}

/// `Schema`.
fn schema(value: &Value) -> Vec<u8> {
    const SCHEMA: Table = Table {
        fields: &[
            ("$ref", Field::Text(1)),
            ("format", Field::Text(2)),
            ("title", Field::Text(3)),
            ("description", Field::Text(4)),
            ("default", Field::Any(5)),
            ("multipleOf", Field::Number(6)),
            ("maximum", Field::Number(7)),
            ("exclusiveMaximum", Field::Boolean(8)),
            ("minimum", Field::Number(9)),
            ("exclusiveMinimum", Field::Boolean(10)),
            ("maxLength", Field::Integer(11)),
            ("minLength", Field::Integer(12)),
            ("pattern", Field::Text(13)),
            ("maxItems", Field::Integer(14)),
            ("minItems", Field::Integer(15)),
            ("uniqueItems", Field::Boolean(16)),
            ("maxProperties", Field::Integer(17)),
            ("minProperties", Field::Integer(18)),
            ("required", Field::Texts(19)),
            ("enum", Field::Anys(20)),
            (
                "additionalProperties",
                Field::Message(21, additional_properties),
            ),
            ("type", Field::Message(22, type_item)),
            ("items", Field::Message(23, items_item)),
            ("allOf", Field::Messages(24, schema)),
            ("properties", Field::Message(25, named_schemas)),
            ("discriminator", Field::Text(26)),
            ("readOnly", Field::Boolean(27)),
            ("example", Field::Any(30)),
        ],
        extensions: Some(31),
    };
    by_table(&SCHEMA, value)
}

/// `AdditionalPropertiesItem`: `schema = 1` or `boolean = 2`.
fn additional_properties(value: &Value) -> Vec<u8> {
    let mut writer = Writer::default();
    match value {
        Value::Bool(allowed) => {
            // A oneof's member is written even when it is the default.
            writer.tag(2, 0);
            writer.varint(u64::from(*allowed));
        }
        schema_value => writer.bytes(1, &schema(schema_value)),
    }
    writer.0
}

/// `TypeItem`: `repeated string value = 1`, from a string or a list.
fn type_item(value: &Value) -> Vec<u8> {
    let mut writer = Writer::default();
    match value {
        Value::String(name) => writer.bytes(1, name.as_bytes()),
        other => writer.field(Field::Texts(1), other),
    }
    writer.0
}

/// `ItemsItem`: `repeated Schema schema = 1`, from a schema or a list.
fn items_item(value: &Value) -> Vec<u8> {
    let mut writer = Writer::default();
    match value {
        Value::Array(_) => writer.field(Field::Messages(1, schema), value),
        one => writer.bytes(1, &schema(one)),
    }
    writer.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A protobuf reader just sufficient to check what was written: the
    /// fields of one message as (number, wire type, payload).
    fn fields(mut bytes: &[u8]) -> Vec<(u32, u8, Vec<u8>)> {
        fn varint(bytes: &mut &[u8]) -> u64 {
            let mut value = 0u64;
            for shift in (0..64).step_by(7) {
                let (byte, rest) = bytes.split_first().expect("a varint's byte");
                *bytes = rest;
                value |= u64::from(byte & 0x7f) << shift;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            value
        }
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let key = varint(&mut bytes);
            let (number, wire) = ((key >> 3) as u32, (key & 7) as u8);
            let payload = match wire {
                0 => varint(&mut bytes).to_le_bytes().to_vec(),
                1 => {
                    let (eight, rest) = bytes.split_at(8);
                    bytes = rest;
                    eight.to_vec()
                }
                2 => {
                    let len = usize::try_from(varint(&mut bytes)).expect("a length");
                    let (payload, rest) = bytes.split_at(len);
                    bytes = rest;
                    payload.to_vec()
                }
                other => panic!("wire type {other}"),
            };
            out.push((number, wire, payload));
        }
        out
    }

    fn field(bytes: &[u8], number: u32) -> Vec<Vec<u8>> {
        fields(bytes)
            .into_iter()
            .filter(|(n, _, _)| *n == number)
            .map(|(_, _, payload)| payload)
            .collect()
    }

    fn text(bytes: &[u8], number: u32) -> String {
        field(bytes, number)
            .first()
            .map(|b| String::from_utf8(b.clone()).expect("utf-8"))
            .unwrap_or_default()
    }

    #[test]
    fn a_document_should_carry_its_definitions_as_named_schemas() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "definitions": {
                "io.k8s.api.apps.v1.Deployment": {
                    "description": "Deployment enables declarative updates.",
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"},
                        "replicas": {"type": "integer", "format": "int32", "minimum": -1},
                    },
                    "additionalProperties": false,
                    "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Deployment", "version": "v1"}],
                },
            },
        });
        let bytes = document(&doc);
        assert_eq!(text(&bytes, 1), "2.0");
        assert_eq!(text(&field(&bytes, 2)[0], 2), "v1.33.0");
        let named = &field(&field(&bytes, 9)[0], 1)[0];
        assert_eq!(text(named, 1), "io.k8s.api.apps.v1.Deployment");
        let schema = &field(named, 2)[0];
        assert_eq!(text(schema, 4), "Deployment enables declarative updates.");
        assert_eq!(text(&field(schema, 22)[0], 1), "object");
        assert_eq!(text(schema, 19), "spec");
        let properties = field(&field(schema, 25)[0], 1);
        assert_eq!(properties.len(), 2);
        assert_eq!(text(&properties[0], 1), "spec");
        assert_eq!(
            text(&field(&properties[0], 2)[0], 1),
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let replicas = &field(&properties[1], 2)[0];
        assert_eq!(field(replicas, 9)[0], (-1.0f64).to_le_bytes());
        // `false` is written: the oneof's member says "no other keys".
        assert_eq!(
            fields(&field(schema, 21)[0]),
            [(2, 0, 0u64.to_le_bytes().to_vec())]
        );
        let extension = &field(schema, 31)[0];
        assert_eq!(text(extension, 1), "x-kubernetes-group-version-kind");
        let yaml = text(&field(extension, 2)[0], 2);
        let parsed: Value = serde_json::from_str(&yaml).expect("JSON, which is YAML");
        assert_eq!(parsed[0]["kind"], "Deployment");
    }

    #[test]
    fn parameters_should_take_the_oneof_member_of_their_place() {
        let body = parameters_item(&json!({"name": "body", "in": "body", "required": true,
            "schema": {"$ref": "#/definitions/X"}}));
        let parameter = &field(&body, 1)[0];
        let body_parameter = &field(parameter, 1)[0];
        assert_eq!(text(body_parameter, 2), "body");
        assert_eq!(text(&field(body_parameter, 5)[0], 1), "#/definitions/X");

        let query = parameters_item(&json!({"name": "dryRun", "in": "query", "type": "string",
            "uniqueItems": true}));
        let non_body = &field(&field(&query, 1)[0], 2)[0];
        let sub = &field(non_body, 3)[0];
        assert_eq!(
            (text(sub, 4), text(sub, 6)),
            ("dryRun".into(), "string".into())
        );
        assert_eq!(field(sub, 20)[0], 1u64.to_le_bytes());

        let path = parameters_item(&json!({"name": "namespace", "in": "path", "required": true,
            "type": "string"}));
        let sub = &field(&field(&field(&path, 1)[0], 2)[0], 4)[0];
        assert_eq!(
            (text(sub, 4), text(sub, 5)),
            ("namespace".into(), "string".into())
        );

        let reference = parameters_item(&json!({"$ref": "#/parameters/pretty"}));
        assert_eq!(text(&field(&reference, 2)[0], 1), "#/parameters/pretty");
    }

    #[test]
    fn long_values_and_negative_integers_should_be_written_as_varints() {
        let long = "d".repeat(300);
        let bytes = schema(&json!({"description": long, "minLength": -2}));
        assert_eq!(text(&bytes, 4), long);
        let min_length = &field(&bytes, 12)[0];
        assert_eq!(
            i64::from_le_bytes(min_length[..8].try_into().expect("8")),
            -2
        );
        // Ten bytes on the wire: 0x60 (field 12, varint), then the value.
        let at = bytes.len() - 11;
        assert_eq!(bytes[at], 12 << 3);
    }
}
