//! The helpers of defaulting: what counts as unset, setting a field
//! unless it is, reaching into a nested map.

use serde_json::{Map, Value, json};

/// Whether a value counts as unset for a Go pointer, list or map: absent or
/// `null`.
pub(super) fn unset(value: Option<&Value>) -> bool {
    value.is_none_or(Value::is_null)
}

/// Whether a value counts as unset for a Go string, number or list the
/// defaulting function tests by its zero: absent, `null`, `""`, `0`, `[]`.
pub(super) fn blank(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::Bool(_)) => false,
    }
}

/// Whether `value` is a zero Go's `omitempty` leaves out: `null`, `""`,
/// `0`, `false`, an empty list or map.
pub(super) fn omissible(value: &Value) -> bool {
    match value {
        Value::Bool(b) => !b,
        other => blank(Some(other)),
    }
}

/// Sets `field` unless it is set (see [`unset`]).
pub(super) fn or_unset(map: &mut Map<String, Value>, field: &str, value: impl Into<Value>) {
    if unset(map.get(field)) {
        map.insert(field.to_owned(), value.into());
    }
}

/// Sets `field` unless it is set (see [`blank`]).
pub(super) fn or_blank(map: &mut Map<String, Value>, field: &str, value: impl Into<Value>) {
    if blank(map.get(field)) {
        map.insert(field.to_owned(), value.into());
    }
}

/// The string at `field`, or `""`.
pub(super) fn text<'a>(map: &'a Map<String, Value>, field: &str) -> &'a str {
    map.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The map at `field`, an empty one made if it is unset; `None` if it holds
/// something else (which validation refuses).
pub(super) fn object<'a>(
    map: &'a mut Map<String, Value>,
    field: &str,
) -> Option<&'a mut Map<String, Value>> {
    let value = map.entry(field).or_insert(Value::Null);
    if value.is_null() {
        *value = json!({});
    }
    value.as_object_mut()
}

/// Defaults the object's `spec` with `default`.
pub(super) fn in_spec(map: &mut Map<String, Value>, default: impl FnOnce(&mut Map<String, Value>)) {
    if let Some(spec) = object(map, "spec") {
        default(spec);
    }
}

/// Sets the object's `status.phase` unless it has one.
pub(super) fn phase(map: &mut Map<String, Value>, phase: &str) {
    if let Some(status) = object(map, "status") {
        or_blank(status, "phase", phase);
    }
}

/// The tag of an image reference as Kubernetes' `ParseImageName` reads it:
/// `latest` when it names neither a tag nor a digest.
pub(super) fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None if digest || image.is_empty() => "",
        None => "latest",
    }
}

/// The pull policy an image gets: `Always` for `latest`.
pub(super) fn pull_policy(image: &str) -> &'static str {
    if image_tag(image) == "latest" {
        "Always"
    } else {
        "IfNotPresent"
    }
}
