//! Field sets: the paths an object sets, as server-side apply owns them and
//! `FieldsV1` spells them (`f:name`, `k:{"name":"web"}`, `v:"x"`, `.` for a
//! node itself), built as apimachinery builds them: lists merge by the
//! built-in merge keys, an atomic struct is one leaf, and an update records
//! `.` only for the nodes a zero object of the type lacks.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::schema::protobuf;

/// One segment of a field path, as `FieldsV1` spells it: `f:name` for a
/// map key, `k:{"name":"web"}` for a list element by merge key.
pub(super) type Path = Vec<String>;

/// Leaf paths an object sets.
pub type FieldSet = BTreeSet<Path>;

/// Metadata fields nobody owns.
const UNOWNED_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "selfLink",
];

/// Whether a list field merges the same for every type: the metadata lists.
fn metadata_list(field: &str) -> bool {
    matches!(field, "finalizers" | "ownerReferences")
}

fn element_key(field: &str, item: &Value, custom: bool) -> Option<String> {
    if custom && !metadata_list(field) {
        return None;
    }
    if crate::mutation::strategic::primitive_set(field) {
        // A set of primitives: each element is owned by its value.
        return item.is_string().then(|| format!("v:{item}"));
    }
    let key = crate::mutation::strategic::list_merge_key(field, item)?;
    let mut fields = Map::new();
    fields.insert(key.to_owned(), item.get(key)?.clone());
    // Server-side apply keys some lists by more fields than strategic
    // merge does (`+listMapKey`), a port by its protocol too (`TCP` when
    // an applied configuration leaves out the default), in the order of
    // their names.
    let more: &[&str] = match field {
        "ports" => &["protocol"],
        "topologySpreadConstraints" => &["whenUnsatisfiable"],
        _ => &[],
    };
    for &name in more {
        let value = item.get(name).filter(|v| !v.is_null()).cloned();
        if let Some(value) = value.or_else(|| key_default(name).map(Value::from)) {
            fields.insert(name.to_owned(), value);
        }
    }
    fields.sort_keys();
    Some(format!("k:{}", Value::Object(fields)))
}

/// A list element as server-side apply's paths print it in errors:
/// `[name="c"]` for a keyed list (each key field, defaults included),
/// `[="a"]` for a set, `[0]` by index otherwise.
pub(crate) fn element_segment(field: &str, item: &Value, index: usize) -> String {
    if crate::mutation::strategic::primitive_set(field) {
        return format!("[={item}]");
    }
    let keyed = element_key(field, item, false)
        .and_then(|key| key.strip_prefix("k:").map(str::to_owned))
        .and_then(|json| serde_json::from_str::<Map<String, Value>>(&json).ok());
    match keyed {
        Some(fields) => {
            let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("[{}]", fields.join(","))
        }
        None => format!("[{index}]"),
    }
}

/// The value a key field has when an element leaves it out.
fn key_default(name: &str) -> Option<&'static str> {
    (name == "protocol").then_some("TCP")
}

/// Whether list element `item` is the one a segment's `key` names: each key
/// field equal, or left out where it has a default (an applied port
/// without its protocol is the `TCP` one).
pub(super) fn keyed_by(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(
        |(name, value)| match item.get(name).filter(|v| !v.is_null()) {
            Some(own) => own == value,
            None => key_default(name).is_some_and(|d| value == d),
        },
    )
}

/// The message of `ObjectMeta`, which custom resources share.
const OBJECT_META: &str = "apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The message of `object`'s type, when Kubernetes defines it: a custom
/// resource's fields have none (no struct of its is atomic or present
/// when zero), its metadata aside.
fn root_message(object: &Value, custom: bool) -> Option<String> {
    if custom {
        return None;
    }
    protobuf::message_of(
        object.get("apiVersion")?.as_str()?,
        object.get("kind")?.as_str()?,
    )
}

/// What is known of a field's type.
#[derive(Clone, Copy)]
struct Typed {
    /// Its message (its elements', for a list).
    message: Option<&'static str>,
    /// Whether that message is owned whole (`+structType=atomic`: a
    /// LabelSelector, an OwnerReference).
    atomic: bool,
    /// Whether the field is owned whole, a list or map marked atomic (a
    /// Service's `selector`, a PodSpec's `tolerations`).
    whole: bool,
}

/// The type of `field` in `parent`, if known.
fn typed(parent: Option<&str>, field: &str) -> Typed {
    let message = parent.and_then(|m| protobuf::field_message(m, field));
    Typed {
        message,
        atomic: message.is_some_and(protobuf::atomic),
        whole: parent.is_some_and(|m| protobuf::atomic_field(m, field)),
    }
}

/// The leaf paths `object` sets (`apiVersion`, `kind`, name and namespace
/// aside). An atomic struct (a LabelSelector) is one leaf.
pub fn fields_of(object: &Value, custom: bool) -> FieldSet {
    let mut set = FieldSet::new();
    let root = root_message(object, custom);
    if let Value::Object(map) = object {
        for (k, v) in map {
            if matches!(k.as_str(), "apiVersion" | "kind") {
                continue;
            }
            if k == "metadata" {
                if let Value::Object(meta) = v {
                    for (mk, mv) in meta {
                        if !UNOWNED_METADATA.contains(&mk.as_str()) {
                            collect(
                                &mut set,
                                vec!["f:metadata".into(), format!("f:{mk}")],
                                mk,
                                mv,
                                custom,
                                typed(Some(OBJECT_META), mk),
                            );
                        }
                    }
                }
                continue;
            }
            collect(
                &mut set,
                vec![format!("f:{k}")],
                k,
                v,
                custom,
                typed(root.as_deref(), k),
            );
        }
    }
    set
}

/// Collects `value`'s paths under `path`; `message` is its type (its
/// elements', for a list).
fn collect(set: &mut FieldSet, path: Path, field: &str, value: &Value, custom: bool, node: Typed) {
    let Typed {
        message,
        atomic,
        whole,
    } = node;
    if whole {
        set.insert(path);
        return;
    }
    match value {
        Value::Object(map) if !map.is_empty() && !atomic => {
            for (k, v) in map {
                let mut p = path.clone();
                p.push(format!("f:{k}"));
                collect(set, p, k, v, custom, typed(message, k));
            }
        }
        Value::Array(items)
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| element_key(field, i, custom).is_some()) =>
        {
            for item in items {
                let Some(key) = element_key(field, item, custom) else {
                    continue;
                };
                let mut element = path.clone();
                element.push(key);
                if !item.is_object() || atomic {
                    set.insert(element);
                    continue;
                }
                let mut dot = element.clone();
                dot.push(".".into());
                set.insert(dot);
                if let Value::Object(map) = item {
                    for (k, v) in map {
                        let mut p = element.clone();
                        p.push(format!("f:{k}"));
                        collect(set, p, k, v, custom, typed(message, k));
                    }
                }
            }
        }
        _ => {
            set.insert(path);
        }
    }
}

/// The `.` entries of an update: the maps and keyed lists `new` has that
/// `old` did not, as apimachinery compares them: the old object as Go
/// writes it, where a struct that is not a pointer and a field without
/// `omitempty` are there even when zero (a Deployment's `spec.strategy`, a
/// Pod's `containers`), so only what a pointer, a map or an `omitempty`
/// list brings is created (`labels`, `data`, `rollingUpdate`,
/// `ownerReferences`; any map of a custom resource).
pub(super) fn created(old: &Value, new: &Value, custom: bool) -> FieldSet {
    let mut set = FieldSet::new();
    let root = root_message(new, custom);
    let Value::Object(map) = new else {
        return set;
    };
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let Value::Object(meta) = v else { continue };
                for (mk, mv) in meta {
                    if !UNOWNED_METADATA.contains(&mk.as_str()) {
                        created_under(
                            &mut set,
                            vec!["f:metadata".into(), format!("f:{mk}")],
                            (
                                old.pointer("/metadata").and_then(|m| m.get(mk)),
                                protobuf::always_present(OBJECT_META, mk),
                            ),
                            (mk, mv),
                            custom,
                            typed(Some(OBJECT_META), mk),
                        );
                    }
                }
            }
            _ => created_under(
                &mut set,
                vec![format!("f:{k}")],
                (
                    old.get(k),
                    root.as_deref()
                        .is_some_and(|m| protobuf::always_present(m, k)),
                ),
                (k, v),
                custom,
                typed(root.as_deref(), k),
            ),
        }
    }
    set
}

/// [`created`] at one node: `was` is the old value there and whether a
/// zero object has it, `now` the field and its new value.
fn created_under(
    set: &mut FieldSet,
    path: Path,
    was: (Option<&Value>, bool),
    now: (&str, &Value),
    custom: bool,
    node: Typed,
) {
    if node.whole {
        return;
    }
    let (message, atomic) = (node.message, node.atomic);
    let (old, zero_has) = was;
    let (field, value) = now;
    let existed = old.is_some() || zero_has;
    match value {
        Value::Object(map) if !map.is_empty() && !atomic => {
            if !existed {
                let mut dot = path.clone();
                dot.push(".".into());
                set.insert(dot);
            }
            for (k, v) in map {
                let mut p = path.clone();
                p.push(format!("f:{k}"));
                let zero = existed && message.is_some_and(|m| protobuf::always_present(m, k));
                created_under(
                    set,
                    p,
                    (old.and_then(|o| o.get(k)), zero),
                    (k, v),
                    custom,
                    typed(message, k),
                );
            }
        }
        Value::Array(items)
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| element_key(field, i, custom).is_some()) =>
        {
            if !existed {
                let mut dot = path.clone();
                dot.push(".".into());
                set.insert(dot);
            }
            if atomic {
                return;
            }
            for item in items {
                let (Some(key), Value::Object(fields)) = (element_key(field, item, custom), item)
                else {
                    continue;
                };
                let before = old.and_then(Value::as_array).and_then(|list| {
                    list.iter()
                        .find(|o| element_key(field, o, custom).as_deref() == Some(key.as_str()))
                });
                for (k, v) in fields {
                    let mut p = path.clone();
                    p.push(key.clone());
                    p.push(format!("f:{k}"));
                    let zero =
                        before.is_some() && message.is_some_and(|m| protobuf::always_present(m, k));
                    created_under(
                        set,
                        p,
                        (before.and_then(|b| b.get(k)), zero),
                        (k, v),
                        custom,
                        typed(message, k),
                    );
                }
            }
        }
        _ => {}
    }
}

/// A field set as `FieldsV1` JSON.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    /// A member without children is `{}`: `.` only says a node is a
    /// member beside what it holds.
    fn collapse(node: &mut Map<String, Value>) {
        for child in node.values_mut() {
            if let Value::Object(inner) = child {
                if inner.len() == 1 && inner.contains_key(".") {
                    inner.clear();
                } else {
                    collapse(inner);
                }
            }
        }
    }
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for segment in path {
            node = node
                .entry(segment.clone())
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .unwrap_or_else(|| unreachable!("every node is an object"));
        }
    }
    collapse(&mut root);
    Value::Object(root)
}

/// `FieldsV1` JSON as a field set.
pub fn from_fields_v1(fields: &Value) -> FieldSet {
    fn walk(set: &mut FieldSet, path: &mut Path, node: &Value) {
        match node.as_object() {
            Some(map) if !map.is_empty() => {
                for (k, v) in map {
                    path.push(k.clone());
                    walk(set, path, v);
                    path.pop();
                }
            }
            _ => {
                if !path.is_empty() {
                    set.insert(path.clone());
                }
            }
        }
    }
    let mut set = FieldSet::new();
    walk(&mut set, &mut Vec::new(), fields);
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_atomic_map_or_list_should_be_one_leaf() {
        let service = json!({"apiVersion": "v1", "kind": "Service",
            "spec": {"selector": {"app": "web"}}});
        let set = fields_of(&service, false);
        assert_eq!(
            set,
            FieldSet::from([vec!["f:spec".into(), "f:selector".into()]])
        );
        assert!(
            created(&json!({}), &service, false).is_empty(),
            "no `.` inside a leaf"
        );
    }

    #[test]
    fn a_port_should_be_keyed_by_its_protocol_too() {
        let service = json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [
            {"port": 80, "protocol": "UDP"}, {"port": 443}]}});
        let set = fields_of(&service, false);
        let keys: BTreeSet<&str> = set
            .iter()
            .filter_map(|path| path.get(2).map(String::as_str))
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                r#"k:{"port":443,"protocol":"TCP"}"#,
                r#"k:{"port":80,"protocol":"UDP"}"#
            ])
        );
    }
}
