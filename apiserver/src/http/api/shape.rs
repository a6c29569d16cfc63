//! An object as the API serves it: stamped with the served version's
//! `apiVersion` and `kind`, converted from storage, as a list item; the
//! part of it a subresource writes.

use kubewasm_types::info::ResourceInfo;
use serde_json::Value;

use crate::objects::canonical_order;
use crate::schema::conversion;

/// The object with `apiVersion` and `kind` of the version served, in the
/// API server's field order.
pub(super) fn served(info: &ResourceInfo, object: &Value) -> Value {
    stamped(info, object.clone())
}

/// A stored object as `info`'s view serves it ([`conversion::from_storage`],
/// then [`served`]): what every answer carries.
pub(super) fn shown(info: &ResourceInfo, stored: &Value) -> Value {
    stamped(info, conversion::from_storage(info, stored).into_owned())
}

fn stamped(info: &ResourceInfo, mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), info.api_version().into());
        map.insert("kind".into(), info.kind.clone().into());
    }
    canonical_order(object)
}

/// An item of a list (or of a deletecollection's answer) as a real server
/// writes it: a built-in type's items carry no `apiVersion` and `kind` (Go
/// encodes the typed list, whose items leave them empty); a custom
/// resource's, unstructured, keep them.
pub(super) fn list_item(info: &ResourceInfo, stored: &Value) -> Value {
    let mut item = shown(info, stored);
    if !info.custom
        && let Value::Object(map) = &mut item
    {
        map.shift_remove("apiVersion");
        map.shift_remove("kind");
    }
    item
}

pub(super) fn rv_of(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// Whether this server serves `subresource` of `info`'s objects: the part
/// of an object a subresource writes ([`part_of`]), `scale` where the type
/// has it, a Pod's `log` and `binding`, a ServiceAccount's `token`.
pub(super) fn serves(info: &ResourceInfo, subresource: &str) -> bool {
    part_of(info, subresource).is_some()
        || match (info.group.as_str(), info.plural.as_str(), subresource) {
            (_, _, "scale") => info.scale,
            ("", "pods", "log" | "binding") | ("", "serviceaccounts", "token") => true,
            _ => false,
        }
}

/// The part of an object a subresource writes: `/status` its status (and a
/// CertificateSigningRequest's `/approval` its status conditions), a Pod's
/// `/ephemeralcontainers` its `spec.ephemeralContainers`, a Namespace's
/// `/finalize` its spec, its finalizers (and its metadata, as an update's:
/// what unsticks a Namespace whose finalizer no controller removes).
pub(super) fn part_of(info: &ResourceInfo, subresource: &str) -> Option<&'static str> {
    match (info.group.as_str(), info.plural.as_str(), subresource) {
        (_, _, "status") => Some("/status"),
        ("certificates.k8s.io", "certificatesigningrequests", "approval") => Some("/status"),
        ("", "pods", "ephemeralcontainers") => Some("/spec/ephemeralContainers"),
        ("", "namespaces", "finalize") => Some("/spec"),
        _ => None,
    }
}
