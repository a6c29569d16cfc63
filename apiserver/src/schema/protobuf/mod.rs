//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), what
//! kubectl's typed generators send (`kubectl create deployment|job|role|
//! rolebinding|token|…`, `kubectl auth can-i`) and do not retry as JSON.
//!
//! A body is the `k8s\0` magic then a `runtime.Unknown` envelope (type meta,
//! raw object bytes). The raw bytes are decoded by the message of the
//! envelope's kind in Kubernetes' own schemas ([`schema`], the
//! `generated.proto` files of every stable group) into the JSON object the
//! rest of the server handles; replies stay JSON, which kubectl accepts.
//!
//! # Rules
//! - Field names are the schema's, which are the JSON names.
//! - The types JSON spells differently are mapped as the API does: `Time`
//!   and `MicroTime` to RFC 3339, `IntOrString` to a number or a string,
//!   `Quantity` to its string, `RawExtension` and `FieldsV1` to the JSON
//!   they carry, `Duration` to Go's duration text, `bytes` to base64.
//! - Go's encoder writes fields that are not pointers even when empty: an
//!   empty string and a zero `Time` are left out, as JSON's `omitempty`
//!   leaves them out, except in the fields whose empty string JSON keeps
//!   (a Lease's `holderIdentity`, a pointer; see `protos/gotypes.txt`). Zero numbers and
//!   `false` are left out where JSON's `omitempty` leaves them out (a
//!   ConfigMap's `generation`), kept elsewhere (a pointer's zero
//!   `replicas` is meaningful); empty messages are kept.
//! - Fields Go embeds inline (a Volume's `VolumeSource`, an IngressRule's
//!   value, a reference's `LocalObjectReference`, …) are merged into their
//!   parent, as in JSON.
//! - Unknown field numbers are skipped; a truncated or malformed message, a
//!   kind without a schema, or nesting past 100 levels is refused.

mod schema;

use base64::Engine;
use serde_json::{Map, Number, Value, json};

use schema::{Label, SCHEMA, package_of};

/// Why a protobuf body was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    /// Not a Kubernetes protobuf envelope, or a malformed message.
    #[error("not a valid Kubernetes protobuf body: {0}")]
    Malformed(&'static str),
    /// A kind this server has no schema for.
    #[error("protobuf bodies of kind {0} are not supported: send JSON")]
    Unsupported(String),
}

/// Fields that Go embeds with `json:",inline"`: their fields are the
/// parent's in JSON. (`message type`, `field name`.)
const INLINE: [(&str, &str); 8] = [
    ("api.core.v1.LocalObjectReference", "localObjectReference"),
    ("api.core.v1.VolumeSource", "volumeSource"),
    (
        "api.core.v1.PersistentVolumeSource",
        "persistentVolumeSource",
    ),
    ("api.core.v1.ProbeHandler", "handler"),
    (
        "api.core.v1.EphemeralContainerCommon",
        "ephemeralContainerCommon",
    ),
    ("api.networking.v1.IngressRuleValue", "ingressRuleValue"),
    (
        "api.admissionregistration.v1.RuleWithOperations",
        "ruleWithOperations",
    ),
    ("api.admissionregistration.v1.Rule", "rule"),
];

/// The package of `meta.k8s.io/v1`'s messages.
const META_V1: &str = "apimachinery.pkg.apis.meta.v1";

/// The kinds every group version registers as its own
/// (`metav1.AddToGroupVersion`): client-go sends a delete's `DeleteOptions`
/// under the resource's group version (`coordination.k8s.io/v1`), and the
/// message is meta/v1's.
const META_KINDS: [&str; 6] = [
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "GetOptions",
    "ListOptions",
];

/// Deepest message nesting decoded.
const MAX_DEPTH: usize = 100;

/// One wire field: its number and payload.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

fn varint(data: &[u8]) -> Result<(u64, &[u8]), ProtobufError> {
    let mut value = 0u64;
    for (i, byte) in data.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, &data[i + 1..]));
        }
    }
    Err(ProtobufError::Malformed("bad varint"))
}

/// The fields of a message, in order.
fn fields(mut data: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtobufError> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let (tag, rest) = varint(data)?;
        data = rest;
        let number = tag >> 3;
        let field = match tag & 7 {
            0 => {
                let (v, rest) = varint(data)?;
                data = rest;
                Wire::Varint(v)
            }
            1 => {
                let bytes: [u8; 8] = data
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(ProtobufError::Malformed("truncated fixed64"))?;
                data = &data[8..];
                Wire::Fixed64(u64::from_le_bytes(bytes))
            }
            2 => {
                let (len, rest) = varint(data)?;
                let len = usize::try_from(len)
                    .map_err(|_| ProtobufError::Malformed("length overflow"))?;
                let bytes = rest
                    .get(..len)
                    .ok_or(ProtobufError::Malformed("truncated field"))?;
                data = &rest[len..];
                Wire::Bytes(bytes)
            }
            5 => {
                let bytes: [u8; 4] = data
                    .get(..4)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(ProtobufError::Malformed("truncated fixed32"))?;
                data = &data[4..];
                Wire::Fixed32(u32::from_le_bytes(bytes))
            }
            _ => return Err(ProtobufError::Malformed("unknown wire type")),
        };
        out.push((number, field));
    }
    Ok(out)
}

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::Malformed("invalid UTF-8"))
}

const META: &str = "apimachinery.pkg.apis.meta.v1";

/// An RFC 3339 time from seconds and nanoseconds; none for the zero time.
fn time(bytes: &[u8], micros: bool) -> Result<Option<Value>, ProtobufError> {
    let (mut seconds, mut nanos) = (0i64, 0i32);
    for (n, f) in fields(bytes)? {
        match (n, f) {
            #[allow(
                clippy::cast_possible_wrap,
                reason = "protobuf varints carry two's-complement integers of the declared width"
            )]
            (1, Wire::Varint(v)) => seconds = v as i64,
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_possible_wrap,
                reason = "protobuf varints carry two's-complement integers of the declared width"
            )]
            (2, Wire::Varint(v)) => nanos = v as i32,
            _ => {}
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(None);
    }
    let at = jiff::Timestamp::new(seconds, nanos)
        .map_err(|_| ProtobufError::Malformed("time out of range"))?;
    let format = if micros {
        "%Y-%m-%dT%H:%M:%S.%6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Some(at.strftime(format).to_string().into()))
}

/// The bytes of field 1 (empty when absent).
fn first_bytes(bytes: &[u8]) -> Result<&[u8], ProtobufError> {
    Ok(fields(bytes)?
        .into_iter()
        .find_map(|(n, f)| match (n, f) {
            (1, Wire::Bytes(b)) => Some(b),
            _ => None,
        })
        .unwrap_or_default())
}

/// The value of a message of a type JSON spells differently; none when it
/// is an ordinary message.
fn special(kind: &str, bytes: &[u8]) -> Result<Option<Option<Value>>, ProtobufError> {
    let value = match kind.strip_prefix(META).map(|k| k.trim_start_matches('.')) {
        Some("Time") => time(bytes, false)?,
        Some("MicroTime") => time(bytes, true)?,
        Some("FieldsV1") => Some(embedded_json(first_bytes(bytes)?)?),
        Some("Duration") => {
            let nanos = fields(bytes)?
                .into_iter()
                .find_map(|(n, f)| match (n, f) {
                    (1, Wire::Varint(v)) => Some(v),
                    _ => None,
                })
                .unwrap_or(0);
            Some(go_duration(nanos).into())
        }
        _ => match kind {
            "apimachinery.pkg.util.intstr.IntOrString" => Some(int_or_string(bytes)?),
            "apimachinery.pkg.api.resource.Quantity" => Some(text(first_bytes(bytes)?)?.into()),
            "apimachinery.pkg.runtime.RawExtension" => Some(embedded_json(first_bytes(bytes)?)?),
            _ => return Ok(None),
        },
    };
    Ok(Some(value))
}

fn embedded_json(bytes: &[u8]) -> Result<Value, ProtobufError> {
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes).map_err(|_| ProtobufError::Malformed("embedded JSON"))
}

fn int_or_string(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    for (n, f) in fields(bytes)? {
        match (n, f) {
            (1, Wire::Varint(v)) => is_string = v == 1,
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_possible_wrap,
                reason = "protobuf varints carry two's-complement integers of the declared width"
            )]
            (2, Wire::Varint(v)) => int = i64::from(v as i32),
            (3, Wire::Bytes(b)) => string = text(b)?,
            _ => {}
        }
    }
    Ok(if is_string { string.into() } else { int.into() })
}

/// Go's `time.Duration` text: `1h0m0s`, `1m30s`, `500ms`, `0s`.
fn go_duration(nanos: u64) -> String {
    let seconds = nanos / 1_000_000_000;
    if seconds == 0 {
        return match nanos {
            0 => "0s".into(),
            n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
            n => format!("{n}ns"),
        };
    }
    let (h, m, s) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// A scalar of `kind` from its wire form.
fn scalar(kind: &str, wire: &Wire<'_>) -> Result<Value, ProtobufError> {
    #[allow(
        clippy::cast_possible_wrap,
        clippy::cast_possible_truncation,
        reason = "protobuf varints carry two's-complement integers of the declared width"
    )]
    let value = match (kind, wire) {
        ("string", Wire::Bytes(b)) => text(b)?.into(),
        ("bytes", Wire::Bytes(b)) => base64::engine::general_purpose::STANDARD.encode(b).into(),
        ("bool", Wire::Varint(v)) => (*v != 0).into(),
        ("int32", Wire::Varint(v)) => i64::from(*v as i32).into(),
        ("int64", Wire::Varint(v)) => (*v as i64).into(),
        ("uint32" | "uint64", Wire::Varint(v)) => (*v).into(),
        ("sint32" | "sint64", Wire::Varint(v)) => (((*v >> 1) as i64) ^ -((*v & 1) as i64)).into(),
        ("double", Wire::Fixed64(v)) => Number::from_f64(f64::from_bits(*v))
            .map(Value::Number)
            .ok_or(ProtobufError::Malformed("not a finite number"))?,
        ("float", Wire::Fixed32(v)) => Number::from_f64(f64::from(f32::from_bits(*v)))
            .map(Value::Number)
            .ok_or(ProtobufError::Malformed("not a finite number"))?,
        ("fixed64" | "sfixed64", Wire::Fixed64(v)) => (*v as i64).into(),
        ("fixed32" | "sfixed32", Wire::Fixed32(v)) => i64::from(*v as i32).into(),
        _ => return Err(ProtobufError::Malformed("a field of the wrong wire type")),
    };
    Ok(value)
}

/// The values one wire field carries: one, or several for a packed
/// repeated scalar.
fn values(kind: &str, wire: &Wire<'_>, depth: usize) -> Result<Vec<Option<Value>>, ProtobufError> {
    match wire {
        Wire::Bytes(b) if SCHEMA.messages.contains_key(kind) => {
            Ok(vec![message(kind, b, depth + 1)?])
        }
        Wire::Bytes(b) if !matches!(kind, "string" | "bytes") => {
            // Packed repeated scalars.
            let mut out = Vec::new();
            let mut rest = *b;
            while !rest.is_empty() {
                let (v, next) = varint(rest)?;
                rest = next;
                out.push(Some(scalar(kind, &Wire::Varint(v))?));
            }
            Ok(out)
        }
        wire => Ok(vec![Some(scalar(kind, wire)?)]),
    }
}

fn zero(n: &Number) -> bool {
    n.as_f64() == Some(0.0)
}

/// A message of `kind` as JSON; none for what JSON leaves out (a zero
/// time).
fn message(kind: &str, bytes: &[u8], depth: usize) -> Result<Option<Value>, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::Malformed("nested too deep"));
    }
    if let Some(value) = special(kind, bytes)? {
        return Ok(value);
    }
    let Some(schema) = SCHEMA.messages.get(kind) else {
        return Err(ProtobufError::Unsupported(kind.to_owned()));
    };
    let mut object = Map::new();
    for (number, wire) in fields(bytes)? {
        let Some(field) = schema.get(&number) else {
            continue;
        };
        match field.label {
            Label::Optional => match values(&field.kind, &wire, depth)?.pop().flatten() {
                Some(Value::Object(inner))
                    if INLINE.contains(&(field.kind.as_str(), field.name.as_str())) =>
                {
                    object.extend(inner);
                }
                // Go writes a zero number or `false` that JSON's
                // `omitempty` leaves out.
                Some(Value::Number(n)) if zero(&n) && omitted_when_zero(kind, &field.name) => {}
                Some(Value::Bool(false)) if omitted_when_zero(kind, &field.name) => {}
                Some(value)
                    if value != Value::String(String::new())
                        || schema::keeps_empty(kind, &field.name) =>
                {
                    object.insert(field.name.clone(), value);
                }
                _ => {}
            },
            Label::Repeated => {
                let decoded = values(&field.kind, &wire, depth)?;
                if let Value::Array(list) = object
                    .entry(field.name.clone())
                    .or_insert_with(|| json!([]))
                {
                    list.extend(decoded.into_iter().map(|v| v.unwrap_or(Value::Null)));
                }
            }
            Label::Map => {
                let Wire::Bytes(entry) = wire else {
                    return Err(ProtobufError::Malformed(
                        "a map entry that is not a message",
                    ));
                };
                let (mut key, mut value) = (String::new(), Value::Null);
                for (n, f) in fields(entry)? {
                    match n {
                        1 => {
                            key = scalar("string", &f)?
                                .as_str()
                                .unwrap_or_default()
                                .to_owned()
                        }
                        2 => {
                            value = values(&field.kind, &f, depth)?
                                .pop()
                                .flatten()
                                .unwrap_or(Value::Null)
                        }
                        _ => {}
                    }
                }
                if value.is_null() && field.kind == "string" {
                    value = "".into();
                }
                if let Value::Object(map) = object
                    .entry(field.name.clone())
                    .or_insert_with(|| json!({}))
                {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(Some(Value::Object(object)))
}

/// The message of objects of `kind` in `api_version`
/// (`api.apps.v1.Deployment`), if Kubernetes defines it.
pub(crate) fn message_of(api_version: &str, kind: &str) -> Option<String> {
    let message = format!("{}.{kind}", package_of(api_version)?);
    SCHEMA.messages.contains_key(&message).then_some(message)
}

/// The message of `field` in `message` (of its elements, for a list), if
/// it is one.
pub(crate) fn field_message(message: &str, field: &str) -> Option<&'static str> {
    SCHEMA
        .messages
        .get(message)?
        .values()
        .find(|f| f.name == field)
        .map(|f| f.kind.as_str())
        .filter(|kind| SCHEMA.messages.contains_key(*kind))
}

/// Whether a zero `message`, as Go writes it in JSON, already has `field`:
/// a struct that is not a pointer, or a field without `omitempty`.
pub(crate) fn always_present(message: &str, field: &str) -> bool {
    schema::always_present(message, field)
}

/// Whether objects of `message` are owned whole, a leaf of field sets
/// (`+structType=atomic`: a LabelSelector, an OwnerReference).
pub(crate) fn atomic(message: &str) -> bool {
    schema::atomic(message)
}

/// Whether `field` of `message`, a list or a map, is owned whole, a leaf of
/// field sets (`+listType=atomic`, `+mapType=atomic`: a Service's
/// `selector`, an EndpointSlice's `ports`).
pub(crate) fn atomic_field(message: &str, field: &str) -> bool {
    schema::atomic_field(message, field)
}

/// What Go's encoder writes for the fields of a zero `message` (those a
/// real server's answers always hold): each field's JSON name and value.
pub(crate) fn zero_fields(message: &str) -> &'static [(&'static str, Value)] {
    schema::zero_fields(message)
}

/// Whether Go's encoder leaves `field` of `message` out when it holds its
/// zero value (`omitempty` on a string, number, bool, list or map).
pub(crate) fn omitted_when_zero(message: &str, field: &str) -> bool {
    schema::omitted_when_zero(message, field)
}

/// The Go type of `field` of `message` where it is a named type the
/// schemas do not tell (`v1.RestartPolicy`, a string), as decoding errors
/// print it.
pub(crate) fn named_go_type(message: &str, field: &str) -> Option<&'static str> {
    schema::named_go_type(message, field)
}

/// How a field holding messages holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holds {
    /// One message.
    One,
    /// A list of them.
    List,
    /// A map of them, by key.
    Map,
    /// One, whose fields are the parent's in JSON (`json:",inline"`).
    Inline,
}

/// The fields of `message` that hold messages: each one's JSON name, its
/// message and how it holds it.
pub(crate) fn message_fields(
    message: &str,
) -> impl Iterator<Item = (&'static str, &'static str, Holds)> {
    SCHEMA
        .messages
        .get(message)
        .into_iter()
        .flat_map(std::collections::HashMap::values)
        .filter(|f| SCHEMA.messages.contains_key(&f.kind))
        .map(|f| {
            let holds = match f.label {
                _ if INLINE.contains(&(f.kind.as_str(), f.name.as_str())) => Holds::Inline,
                Label::Optional => Holds::One,
                Label::Repeated => Holds::List,
                Label::Map => Holds::Map,
            };
            (f.name.as_str(), f.kind.as_str(), holds)
        })
}

/// Decodes the object in a protobuf body into JSON.
///
/// # Errors
/// [`ProtobufError`] when the body is not an envelope, is malformed, or
/// its kind has no schema here.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(b"k8s\0")
        .ok_or(ProtobufError::Malformed("missing k8s magic"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(envelope)? {
        match (n, f) {
            (1, Wire::Bytes(type_meta)) => {
                for (tn, tf) in fields(type_meta)? {
                    match (tn, tf) {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let name = package_of(&api_version)
        .map(|package| format!("{package}.{kind}"))
        .filter(|name| SCHEMA.messages.contains_key(name))
        .or_else(|| {
            // A `Status` is unversioned: `v1` only, as a real server's
            // refusals are written.
            (META_KINDS.contains(&kind.as_str())
                || (api_version.as_str(), kind.as_str()) == ("v1", "Status"))
                .then(|| format!("{META_V1}.{kind}"))
        })
        .ok_or_else(|| ProtobufError::Unsupported(format!("{kind} ({api_version})")))?;
    let mut object = match message(&name, raw, 0)? {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    object.insert("apiVersion".into(), api_version.into());
    object.insert("kind".into(), kind.into());
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let byte = u8::try_from(v & 0x7f).unwrap_or(0);
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn len_field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_varint(u64::from(number) << 3 | 2, &mut out);
        encode_varint(bytes.len() as u64, &mut out);
        out.extend_from_slice(bytes);
        out
    }

    fn varint_field(number: u8, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_varint(u64::from(number) << 3, &mut out);
        encode_varint(value, &mut out);
        out
    }

    fn entry(k: &str, v: &str) -> Vec<u8> {
        [len_field(1, k.as_bytes()), len_field(2, v.as_bytes())].concat()
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [
            len_field(1, api_version.as_bytes()),
            len_field(2, kind.as_bytes()),
        ]
        .concat();
        [
            b"k8s\0".to_vec(),
            len_field(1, &type_meta),
            len_field(2, raw),
        ]
        .concat()
    }

    #[test]
    fn a_configmap_should_decode_from_kubectls_envelope() {
        // As Go writes it: empty strings and a zero creation time included.
        let meta = [
            len_field(1, b"settings"),
            len_field(2, b""),
            len_field(8, &[]),
            len_field(11, &entry("app", "web")),
        ]
        .concat();
        let raw = [len_field(1, &meta), len_field(2, &entry("LOG", "debug"))].concat();
        let object = decode(&envelope("v1", "ConfigMap", &raw)).expect("decodes");
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "settings", "labels": {"app": "web"}}, "data": {"LOG": "debug"}})
        );
    }

    #[test]
    fn a_deployment_should_decode_with_nested_messages_lists_and_special_types() {
        let container = [
            len_field(1, b"web"),
            len_field(2, b"nginx"),
            // ports: containerPort 80
            len_field(6, &varint_field(3, 80)),
        ]
        .concat();
        let pod_spec = len_field(2, &container);
        let template = [
            len_field(1, &len_field(11, &entry("app", "web"))),
            len_field(2, &pod_spec),
        ]
        .concat();
        let selector = len_field(1, &entry("app", "web"));
        // maxSurge: IntOrString string "25%"; maxUnavailable: int 0.
        let surge = [varint_field(1, 1), len_field(3, b"25%")].concat();
        let unavailable = [varint_field(1, 0), varint_field(2, 0)].concat();
        let rolling = [len_field(1, &unavailable), len_field(2, &surge)].concat();
        let strategy = [len_field(1, b"RollingUpdate"), len_field(2, &rolling)].concat();
        let spec = [
            varint_field(1, 0),
            len_field(2, &selector),
            len_field(3, &template),
            len_field(4, &strategy),
        ]
        .concat();
        let raw = [len_field(1, &len_field(1, b"web")), len_field(2, &spec)].concat();
        let object = decode(&envelope("apps/v1", "Deployment", &raw)).expect("decodes");
        assert_eq!(object["spec"]["replicas"], 0, "a zero count is kept");
        assert_eq!(
            object["spec"]["selector"],
            json!({"matchLabels": {"app": "web"}})
        );
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"],
            json!([{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}])
        );
        assert_eq!(
            object["spec"]["strategy"]["rollingUpdate"],
            json!({"maxUnavailable": 0, "maxSurge": "25%"})
        );
    }

    #[test]
    fn inline_fields_should_merge_into_their_parent() {
        // An IngressRule: host, then the embedded IngressRuleValue's http.
        let path = [len_field(1, b"/"), len_field(3, b"Prefix")].concat();
        let http = len_field(1, &path);
        let rule = [len_field(1, b"foo.com"), len_field(2, &len_field(1, &http))].concat();
        let spec = len_field(3, &rule);
        let raw = [len_field(1, &len_field(1, b"ing")), len_field(2, &spec)].concat();
        let object = decode(&envelope("networking.k8s.io/v1", "Ingress", &raw)).expect("decodes");
        assert_eq!(
            object["spec"]["rules"],
            json!([{"host": "foo.com", "http": {"paths": [{"path": "/", "pathType": "Prefix"}]}}])
        );
    }

    #[test]
    fn times_quantities_and_durations_should_read_as_json_spells_them() {
        let at = [varint_field(1, 1_700_000_000)].concat();
        assert_eq!(time(&at, false), Ok(Some(json!("2023-11-14T22:13:20Z"))));
        assert_eq!(time(&[], false), Ok(None));
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(500_000_000), "500ms");
        let quantity = len_field(1, b"500m");
        assert_eq!(
            special("apimachinery.pkg.api.resource.Quantity", &quantity),
            Ok(Some(Some(json!("500m"))))
        );
    }

    #[test]
    fn an_empty_string_should_stay_where_json_keeps_it() {
        // A Lease released by client-go's leader election: holderIdentity
        // is a pointer to "", the empty name of its ObjectMeta is not.
        let lease = [
            len_field(1, &len_field(1, b"")),
            len_field(2, &[len_field(1, b""), varint_field(2, 15)].concat()),
        ]
        .concat();
        assert_eq!(
            decode(&envelope("coordination.k8s.io/v1", "Lease", &lease)),
            Ok(json!({
                "metadata": {},
                "spec": {"holderIdentity": "", "leaseDurationSeconds": 15},
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
            }))
        );
    }

    #[test]
    fn a_zero_number_should_stay_only_where_json_keeps_it() {
        // ObjectMeta's generation (omitempty) at 0 and a Lease's
        // leaseDurationSeconds (a pointer) at 0, as Go writes both.
        let lease = [
            len_field(1, &[len_field(1, b"l"), varint_field(7, 0)].concat()),
            len_field(2, &varint_field(2, 0)),
        ]
        .concat();
        assert_eq!(
            decode(&envelope("coordination.k8s.io/v1", "Lease", &lease)),
            Ok(json!({
                "metadata": {"name": "l"},
                "spec": {"leaseDurationSeconds": 0},
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
            }))
        );
    }

    #[test]
    fn delete_options_should_decode_under_any_group_version() {
        // client-go's delete of a ConfigMap: 31 bytes, the options empty.
        let empty = [
            envelope("v1", "DeleteOptions", b""),
            len_field(3, b""),
            len_field(4, b""),
        ]
        .concat();
        assert_eq!(empty.len(), 31);
        assert_eq!(
            decode(&empty),
            Ok(json!({"apiVersion": "v1", "kind": "DeleteOptions"}))
        );
        // A Lease's, in the background with a uid precondition.
        let options = [
            len_field(2, &len_field(1, b"3f1c")),
            len_field(4, b"Background"),
        ]
        .concat();
        assert_eq!(
            decode(&envelope(
                "coordination.k8s.io/v1",
                "DeleteOptions",
                &options
            )),
            Ok(json!({
                "preconditions": {"uid": "3f1c"},
                "propagationPolicy": "Background",
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "DeleteOptions",
            }))
        );
        // Only the options: other meta kinds stay unknown to a group.
        assert!(matches!(
            decode(&envelope("apps/v1", "Status", b"")),
            Err(ProtobufError::Unsupported(_))
        ));
    }

    #[test]
    fn unknown_kinds_and_garbage_should_be_refused() {
        assert!(matches!(
            decode(&envelope("example.com/v1", "Widget", b"")),
            Err(ProtobufError::Unsupported(_))
        ));
        assert!(matches!(decode(b"{}"), Err(ProtobufError::Malformed(_))));
        assert!(matches!(
            decode(b"k8s\0\x0a\xff"),
            Err(ProtobufError::Malformed(_))
        ));
        // A name that is not UTF-8, a truncated field, a wrong wire type.
        let bad_name = [len_field(1, &len_field(1, &[0xff, 0xfe]))].concat();
        assert!(decode(&envelope("v1", "ConfigMap", &bad_name)).is_err());
        let truncated = [0x0a, 0x10, b'x'];
        assert!(decode(&envelope("v1", "ConfigMap", &truncated)).is_err());
        let wrong_wire = varint_field(1, 5);
        assert!(decode(&envelope("v1", "ConfigMap", &wrong_wire)).is_err());
    }

    #[test]
    fn nesting_past_the_bound_should_be_refused() {
        // JSONSchemaProps nests itself through `not` (field 28).
        let mut props = Vec::new();
        for _ in 0..150 {
            props = len_field(28, &props);
        }
        let kind = "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";
        assert!(SCHEMA.messages.contains_key(kind));
        assert_eq!(
            message(kind, &props, 0),
            Err(ProtobufError::Malformed("nested too deep"))
        );
    }
}
