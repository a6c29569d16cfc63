//! The messages of Kubernetes' `generated.proto` files (`apiserver/protos/`,
//! embedded), parsed once: for each message, its fields by number.
//!
//! The files use a small part of proto2, which is all this reads: `package`,
//! `message Name { … }` (not nested), and fields `optional T name = N;`,
//! `repeated T name = N;`, `map<K, V> name = N;`. Field names are the JSON
//! names. Type names are resolved against the file's package, or absolute
//! when they start with `.`.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

/// The embedded files: (path, text).
const FILES: &[(&str, &str)] = &[
    (
        "api/admissionregistration/v1",
        include_str!("../../../protos/api/admissionregistration/v1/generated.proto"),
    ),
    (
        "api/apps/v1",
        include_str!("../../../protos/api/apps/v1/generated.proto"),
    ),
    (
        "api/authentication/v1",
        include_str!("../../../protos/api/authentication/v1/generated.proto"),
    ),
    (
        "api/authorization/v1",
        include_str!("../../../protos/api/authorization/v1/generated.proto"),
    ),
    (
        "api/autoscaling/v1",
        include_str!("../../../protos/api/autoscaling/v1/generated.proto"),
    ),
    (
        "api/autoscaling/v2",
        include_str!("../../../protos/api/autoscaling/v2/generated.proto"),
    ),
    (
        "api/batch/v1",
        include_str!("../../../protos/api/batch/v1/generated.proto"),
    ),
    (
        "api/certificates/v1",
        include_str!("../../../protos/api/certificates/v1/generated.proto"),
    ),
    (
        "api/coordination/v1",
        include_str!("../../../protos/api/coordination/v1/generated.proto"),
    ),
    (
        "api/core/v1",
        include_str!("../../../protos/api/core/v1/generated.proto"),
    ),
    (
        "api/discovery/v1",
        include_str!("../../../protos/api/discovery/v1/generated.proto"),
    ),
    (
        "api/events/v1",
        include_str!("../../../protos/api/events/v1/generated.proto"),
    ),
    (
        "api/flowcontrol/v1",
        include_str!("../../../protos/api/flowcontrol/v1/generated.proto"),
    ),
    (
        "api/networking/v1",
        include_str!("../../../protos/api/networking/v1/generated.proto"),
    ),
    (
        "api/node/v1",
        include_str!("../../../protos/api/node/v1/generated.proto"),
    ),
    (
        "api/policy/v1",
        include_str!("../../../protos/api/policy/v1/generated.proto"),
    ),
    (
        "api/rbac/v1",
        include_str!("../../../protos/api/rbac/v1/generated.proto"),
    ),
    (
        "api/resource/v1",
        include_str!("../../../protos/api/resource/v1/generated.proto"),
    ),
    (
        "api/scheduling/v1",
        include_str!("../../../protos/api/scheduling/v1/generated.proto"),
    ),
    (
        "api/scheduling/v1alpha3",
        include_str!("../../../protos/api/scheduling/v1alpha3/generated.proto"),
    ),
    (
        "api/storage/v1",
        include_str!("../../../protos/api/storage/v1/generated.proto"),
    ),
    (
        "apiextensions-apiserver/v1",
        include_str!(
            "../../../protos/apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.proto"
        ),
    ),
    (
        "apimachinery/resource",
        include_str!("../../../protos/apimachinery/pkg/api/resource/generated.proto"),
    ),
    (
        "apimachinery/meta/v1",
        include_str!("../../../protos/apimachinery/pkg/apis/meta/v1/generated.proto"),
    ),
    (
        "apimachinery/runtime",
        include_str!("../../../protos/apimachinery/pkg/runtime/generated.proto"),
    ),
    (
        "apimachinery/schema",
        include_str!("../../../protos/apimachinery/pkg/runtime/schema/generated.proto"),
    ),
    (
        "apimachinery/intstr",
        include_str!("../../../protos/apimachinery/pkg/util/intstr/generated.proto"),
    ),
    (
        "kube-aggregator/v1",
        include_str!("../../../protos/kube-aggregator/pkg/apis/apiregistration/v1/generated.proto"),
    ),
];

/// How a field repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Label {
    /// At most once.
    Optional,
    /// A list.
    Repeated,
    /// `map<K, V>`: repeated entries, key 1, value 2.
    Map,
}

/// One field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Field {
    /// The JSON name.
    pub(super) name: String,
    /// The scalar type (`string`, `int64`, …) or a message's full name;
    /// for a map, the value's.
    pub(super) kind: String,
    /// How it repeats.
    pub(super) label: Label,
}

/// Every message, by full name (`api.apps.v1.Deployment`), and its fields
/// by number.
#[derive(Debug, Default)]
pub(super) struct Schema {
    pub(super) messages: HashMap<String, HashMap<u64, Field>>,
}

const SCALARS: [&str; 15] = [
    "string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
    "fixed64", "sfixed32", "sfixed64", "double", "float",
];

/// A type name as written, made absolute against `package`.
fn resolve(package: &str, name: &str) -> String {
    if SCALARS.contains(&name) {
        return name.to_owned();
    }
    match name.strip_prefix('.') {
        Some(absolute) => absolute.to_owned(),
        None => format!("{package}.{name}"),
    }
}

/// Parses one field line (`optional T name = N;`), if it is one.
fn field(package: &str, line: &str) -> Option<(u64, Field)> {
    let line = line.trim().strip_suffix(';')?;
    let (declaration, number) = line.rsplit_once('=')?;
    let number: u64 = number.trim().parse().ok()?;
    let mut words = declaration.split_whitespace();
    let first = words.next()?;
    let (label, kind, name) = if first.starts_with("map<") {
        // `map<string, T> name`: the words split after the comma.
        let value = words.next()?.strip_suffix('>')?;
        (Label::Map, value.to_owned(), words.next()?.to_owned())
    } else {
        let label = match first {
            "optional" | "required" => Label::Optional,
            "repeated" => Label::Repeated,
            _ => return None,
        };
        (label, words.next()?.to_owned(), words.next()?.to_owned())
    };
    Some((
        number,
        Field {
            name,
            kind: resolve(package, &kind),
            label,
        },
    ))
}

/// Parses the files.
fn parse(files: &[(&str, &str)]) -> Schema {
    let mut schema = Schema::default();
    for (_, text) in files {
        let mut package = "";
        let mut current: Option<(String, HashMap<u64, Field>)> = None;
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(p) = trimmed.strip_prefix("package ") {
                package = p.trim_end_matches(';').trim();
            } else if let Some(name) = trimmed
                .strip_prefix("message ")
                .and_then(|m| m.strip_suffix('{'))
            {
                current = Some((format!("{package}.{}", name.trim()), HashMap::new()));
            } else if trimmed == "}" {
                if let Some((name, fields)) = current.take() {
                    schema.messages.insert(name, fields);
                }
            } else if let Some((_, fields)) = current.as_mut()
                && let Some((number, field)) = field(package, trimmed)
            {
                fields.insert(number, field);
            }
        }
    }
    schema
}

/// The parsed schema of the embedded files.
pub(super) static SCHEMA: LazyLock<Schema> = LazyLock::new(|| parse(FILES));

/// What Kubernetes' Go types say that the .proto files do not
/// (`apiserver/protos/gotypes.txt`, written by `tests/real-cluster/gotypes`).
#[derive(Debug, Default)]
struct GoTypes {
    /// String fields whose empty value JSON keeps (pointers, no
    /// `omitempty`).
    empty: HashSet<(&'static str, &'static str)>,
    /// Fields a zero object already has (non-pointer structs, fields
    /// without `omitempty`).
    present: HashSet<(&'static str, &'static str)>,
    /// Messages owned whole (`+structType=atomic`).
    atomic: HashSet<&'static str>,
    /// Lists and maps owned whole (`+listType=atomic`, `+mapType=atomic`).
    atomic_fields: HashSet<(&'static str, &'static str)>,
    /// Fields Go's encoder leaves out when zero (`omitempty`, no pointer).
    omit: HashSet<(&'static str, &'static str)>,
    /// By message, the fields Go's encoder writes for a zero object, and
    /// what it writes.
    zero: HashMap<&'static str, Vec<(&'static str, serde_json::Value)>>,
    /// By message and field, a Go type the schemas do not tell.
    types: HashMap<(&'static str, &'static str), &'static str>,
}

static GO_TYPES: LazyLock<GoTypes> = LazyLock::new(|| {
    let mut facts = GoTypes::default();
    for line in include_str!("../../../protos/gotypes.txt").lines() {
        match line.split(' ').collect::<Vec<_>>()[..] {
            ["empty", message, field] => {
                facts.empty.insert((message, field));
            }
            ["present", message, field] => {
                facts.present.insert((message, field));
            }
            ["atomic", message] => {
                facts.atomic.insert(message);
            }
            ["atomic", message, field] => {
                facts.atomic_fields.insert((message, field));
            }
            ["omit", message, field] => {
                facts.omit.insert((message, field));
            }
            ["type", message, field, go_type] => {
                facts.types.insert((message, field), go_type);
            }
            ["zero", message, field, json] => {
                if let Ok(value) = serde_json::from_str(json) {
                    facts.zero.entry(message).or_default().push((field, value));
                }
            }
            _ => {}
        }
    }
    facts
});

/// The Go type of `field` of `message` where it is a named one the
/// schemas do not tell (`v1.RestartPolicy` for a string).
pub(crate) fn named_go_type(message: &str, field: &str) -> Option<&'static str> {
    GO_TYPES.types.get(&(message, field)).copied()
}

/// Whether an empty string in `field` of `message` is a value JSON keeps
/// (`holderIdentity: ""`), rather than the zero Go's encoder writes for a
/// field JSON leaves out.
pub(super) fn keeps_empty(message: &str, field: &str) -> bool {
    GO_TYPES.empty.contains(&(message, field))
}

/// Whether a zero `message` already has `field` in JSON.
pub(super) fn always_present(message: &str, field: &str) -> bool {
    GO_TYPES.present.contains(&(message, field))
}

/// Whether `message` is owned whole (`+structType=atomic`).
pub(super) fn atomic(message: &str) -> bool {
    GO_TYPES.atomic.contains(message)
}

/// Whether Go's encoder leaves `field` of `message` out when it is zero.
pub(super) fn omitted_when_zero(message: &str, field: &str) -> bool {
    GO_TYPES.omit.contains(&(message, field))
}

/// Whether `field` of `message` is owned whole (`+listType=atomic`,
/// `+mapType=atomic`).
pub(super) fn atomic_field(message: &str, field: &str) -> bool {
    GO_TYPES.atomic_fields.contains(&(message, field))
}

/// The fields a zero `message` has in JSON, and their values (`{}` for a
/// struct, `null` for a nil list, `""`, `0`, `false`).
pub(super) fn zero_fields(message: &str) -> &'static [(&'static str, serde_json::Value)] {
    GO_TYPES.zero.get(message).map_or(&[], Vec::as_slice)
}

/// The package of an API group's version: `apps/v1` is `api.apps.v1`, the
/// core `v1` is `api.core.v1`.
pub(super) fn package_of(api_version: &str) -> Option<String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let package = match group {
        "" => format!("api.core.{version}"),
        "apiextensions.k8s.io" => {
            format!("apiextensions_apiserver.pkg.apis.apiextensions.{version}")
        }
        "apiregistration.k8s.io" => format!("kube_aggregator.pkg.apis.apiregistration.{version}"),
        group => format!("api.{}.{version}", group.split('.').next()?),
    };
    Some(package)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_message_should_parse_and_its_types_resolve() {
        let schema = &*SCHEMA;
        assert!(schema.messages.len() > 500, "{}", schema.messages.len());
        let deployment = &schema.messages["api.apps.v1.Deployment"];
        assert_eq!(
            deployment[&1].kind,
            "apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(deployment[&2].name, "spec");
        let meta = &schema.messages["apimachinery.pkg.apis.meta.v1.ObjectMeta"];
        assert_eq!(
            (meta[&11].name.as_str(), meta[&11].label),
            ("labels", Label::Map)
        );
        assert_eq!(meta[&11].kind, "string");
        // Every message-typed field names a message that exists.
        for (name, fields) in &schema.messages {
            for field in fields.values() {
                assert!(
                    SCALARS.contains(&field.kind.as_str())
                        || schema.messages.contains_key(&field.kind),
                    "{name}.{} has unknown type {}",
                    field.name,
                    field.kind
                );
            }
        }
    }

    #[test]
    fn packages_should_follow_the_group() {
        assert_eq!(package_of("v1").as_deref(), Some("api.core.v1"));
        assert_eq!(package_of("apps/v1").as_deref(), Some("api.apps.v1"));
        assert_eq!(
            package_of("rbac.authorization.k8s.io/v1").as_deref(),
            Some("api.rbac.v1")
        );
        assert_eq!(
            package_of("apiextensions.k8s.io/v1").as_deref(),
            Some("apiextensions_apiserver.pkg.apis.apiextensions.v1")
        );
    }
}
