//! Protobuf request bodies, for what kubectl sends them for: `kubectl
//! create namespace|configmap|secret|serviceaccount` POST
//! `application/vnd.kubernetes.protobuf` and do not retry as JSON.
//!
//! A body is the `k8s\0` magic then a `runtime.Unknown` envelope (type meta,
//! raw object bytes). The raw bytes of a Namespace, ConfigMap, Secret or
//! ServiceAccount are decoded into the JSON object the rest of the server
//! handles; replies stay JSON, which kubectl accepts. Other kinds are
//! refused with 415 and a message that names them.

use base64::Engine;
use serde_json::{Map, Value, json};

/// Why a protobuf body was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    /// Not a Kubernetes protobuf envelope.
    #[error("not a Kubernetes protobuf body: {0}")]
    Malformed(&'static str),
    /// A kind this server does not decode from protobuf.
    #[error("protobuf bodies of kind {0} are not supported: send JSON")]
    Unsupported(String),
}

/// One field of a protobuf message.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// Iterates the fields of a message: (number, value).
fn fields(mut data: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtobufError> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let (tag, rest) = varint(data)?;
        data = rest;
        let number = tag >> 3;
        match tag & 7 {
            0 => {
                let (v, rest) = varint(data)?;
                data = rest;
                out.push((number, Field::Varint(v)));
            }
            2 => {
                let (len, rest) = varint(data)?;
                let len = usize::try_from(len)
                    .map_err(|_| ProtobufError::Malformed("length overflow"))?;
                if rest.len() < len {
                    return Err(ProtobufError::Malformed("truncated field"));
                }
                out.push((number, Field::Bytes(&rest[..len])));
                data = &rest[len..];
            }
            1 => {
                data = data
                    .get(8..)
                    .ok_or(ProtobufError::Malformed("truncated fixed64"))?
            }
            5 => {
                data = data
                    .get(4..)
                    .ok_or(ProtobufError::Malformed("truncated fixed32"))?
            }
            _ => return Err(ProtobufError::Malformed("unknown wire type")),
        }
    }
    Ok(out)
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

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::Malformed("invalid UTF-8"))
}

/// A `map<string, string>` entry (or bytes values, base64 as JSON has them).
fn map_entry(bytes: &[u8], binary: bool) -> Result<(String, Value), ProtobufError> {
    let (mut key, mut value) = (String::new(), Value::String(String::new()));
    for (n, f) in fields(bytes)? {
        match (n, f) {
            (1, Field::Bytes(b)) => key = text(b)?,
            (2, Field::Bytes(b)) if binary => {
                value = base64::engine::general_purpose::STANDARD.encode(b).into();
            }
            (2, Field::Bytes(b)) => value = text(b)?.into(),
            _ => {}
        }
    }
    Ok((key, value))
}

fn insert_entry(
    map: &mut Map<String, Value>,
    field: &str,
    bytes: &[u8],
    binary: bool,
) -> Result<(), ProtobufError> {
    let (k, v) = map_entry(bytes, binary)?;
    if let Value::Object(m) = map.entry(field).or_insert_with(|| json!({})) {
        m.insert(k, v);
    }
    Ok(())
}

fn push(map: &mut Map<String, Value>, field: &str, value: Value) {
    if let Value::Array(list) = map.entry(field).or_insert_with(|| json!([])) {
        list.push(value);
    }
}

/// ObjectMeta: the fields a create sets.
fn object_meta(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut meta = Map::new();
    for (n, f) in fields(bytes)? {
        match (n, f) {
            (1, Field::Bytes(b)) => {
                meta.insert("name".into(), text(b)?.into());
            }
            (2, Field::Bytes(b)) => {
                meta.insert("generateName".into(), text(b)?.into());
            }
            (3, Field::Bytes(b)) if !b.is_empty() => {
                meta.insert("namespace".into(), text(b)?.into());
            }
            (11, Field::Bytes(b)) => insert_entry(&mut meta, "labels", b, false)?,
            (12, Field::Bytes(b)) => insert_entry(&mut meta, "annotations", b, false)?,
            (14, Field::Bytes(b)) => push(&mut meta, "finalizers", text(b)?.into()),
            _ => {}
        }
    }
    Ok(Value::Object(meta))
}

/// Decodes the object in a protobuf body into JSON.
///
/// # Errors
/// [`ProtobufError`] when the body is not an envelope or the kind is not
/// one decoded here.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(b"k8s\0")
        .ok_or(ProtobufError::Malformed("missing k8s magic"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(envelope)? {
        match (n, f) {
            (1, Field::Bytes(type_meta)) => {
                for (tn, tf) in fields(type_meta)? {
                    match (tn, tf) {
                        (1, Field::Bytes(b)) => api_version = text(b)?,
                        (2, Field::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let mut object = Map::new();
    object.insert("apiVersion".into(), api_version.into());
    object.insert("kind".into(), kind.clone().into());
    if !matches!(
        kind.as_str(),
        "ConfigMap" | "Secret" | "Namespace" | "ServiceAccount"
    ) {
        return Err(ProtobufError::Unsupported(kind));
    }
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, f) {
            (_, 1, Field::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            ("ConfigMap", 2, Field::Bytes(b)) => insert_entry(&mut object, "data", b, false)?,
            ("ConfigMap", 3, Field::Bytes(b)) => insert_entry(&mut object, "binaryData", b, true)?,
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                object.insert("immutable".into(), (v != 0).into());
            }
            ("Secret", 2, Field::Bytes(b)) => insert_entry(&mut object, "data", b, true)?,
            ("Secret", 3, Field::Bytes(b)) => {
                object.insert("type".into(), text(b)?.into());
            }
            ("Secret", 4, Field::Bytes(b)) => insert_entry(&mut object, "stringData", b, false)?,
            _ => {}
        }
    }
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(bytes.len()).unwrap_or(0)];
        out.extend_from_slice(bytes);
        out
    }

    fn entry(k: &str, v: &str) -> Vec<u8> {
        [field(1, k.as_bytes()), field(2, v.as_bytes())].concat()
    }

    #[test]
    fn a_configmap_should_decode_from_kubectls_envelope() {
        let meta = [field(1, b"settings"), field(11, &entry("app", "web"))].concat();
        let raw = [field(1, &meta), field(2, &entry("LOG", "debug"))].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let object = decode(&body).expect("decodes");
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "settings", "labels": {"app": "web"}}, "data": {"LOG": "debug"}})
        );
    }

    #[test]
    fn other_kinds_and_garbage_should_be_refused_by_name() {
        let type_meta = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, b"")].concat();
        assert_eq!(
            decode(&body),
            Err(ProtobufError::Unsupported("Deployment".into()))
        );
        assert!(matches!(decode(b"{}"), Err(ProtobufError::Malformed(_))));
        assert!(matches!(
            decode(b"k8s\0\x0a\xff"),
            Err(ProtobufError::Malformed(_))
        ));
    }
}
