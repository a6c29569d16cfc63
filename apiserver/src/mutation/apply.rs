//! Server-side apply: field ownership per manager, in `metadata.managedFields`.
//!
//! # Expected flow
//! An apply by manager `M` of object `A`:
//! 1. computes the fields `A` sets (its leaves, `FieldsV1` paths);
//! 2. refuses, unless `force`, fields another manager owns with a different
//!    value (409, one `FieldManagerConflict` cause per field); with `force`,
//!    takes them over;
//! 3. removes the fields `M` applied last time and no longer sends, unless
//!    another manager also owns them;
//! 4. merges `A` into the object (maps merge; lists with a merge key merge
//!    element by element; other lists are atomic);
//! 5. records `M`'s fields as its `Apply` entry.
//!
//! Other writes (update, patch) take ownership of the fields they change as
//! an `Update` entry of their `fieldManager`, so applying over a field
//! someone edited conflicts, as on a real cluster.
//!
//! # Caveat
//! Merge keys come from the table of built-in list fields
//! ([`crate::mutation::strategic`]); custom resources' lists are atomic (their
//! `x-kubernetes-list-type` is not read yet), except metadata's, which merge
//! as for every type: `finalizers` is a set (each value owned on its own,
//! `v:"…"`) and `ownerReferences` a map keyed by `uid`, so two managers'
//! finalizers and owners coexist.

use serde_json::{Map, Value, json};

pub use super::fieldset::{FieldSet, fields_of, from_fields_v1, to_fields_v1};
use super::fieldset::{Path, created, keyed_by};
use crate::objects::now;

/// The value at a path, if present.
fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut node = object;
    for segment in path {
        if segment == "." {
            return Some(node);
        }
        node = step(node, segment)?;
    }
    Some(node)
}

fn step<'a>(node: &'a Value, segment: &str) -> Option<&'a Value> {
    if let Some(field) = segment.strip_prefix("f:") {
        return node.get(field);
    }
    if let Some(value) = set_value(segment) {
        return node.as_array()?.iter().find(|item| **item == value);
    }
    let key: Map<String, Value> = serde_json::from_str(segment.strip_prefix("k:")?).ok()?;
    node.as_array()?.iter().find(|item| keyed_by(item, &key))
}

/// The value of a set element's segment (`v:"example.com/x"`).
fn set_value(segment: &str) -> Option<Value> {
    serde_json::from_str(segment.strip_prefix("v:")?).ok()
}

/// Removes the value at a path; removing `.` of a list element removes it,
/// and so does removing a set element.
fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    if let Some(value) = set_value(last) {
        if let Some(Value::Array(items)) = value_at_mut(object, parent) {
            items.retain(|item| *item != value);
        }
        return;
    }
    if last == "." {
        if let Some((element, list_path)) = parent.split_last() {
            let key: Option<Map<String, Value>> = element
                .strip_prefix("k:")
                .and_then(|k| serde_json::from_str(k).ok());
            if let (Some(key), Some(Value::Array(items))) = (key, value_at_mut(object, list_path)) {
                items.retain(|item| !keyed_by(item, &key));
            }
        }
        return;
    }
    if let (Some(field), Some(Value::Object(map))) =
        (last.strip_prefix("f:"), value_at_mut(object, parent))
    {
        map.shift_remove(field);
    }
}

/// After `removed` went, removes the maps and lists above it that it left
/// empty and nobody owns as such (a manager that stops applying a
/// container's only field leaves no `containers: []`, nor the `spec` above
/// it, as on a real cluster), up to the first that still holds something.
fn prune_emptied(object: &mut Value, removed: &[String], owned: &FieldSet, wanted: &FieldSet) {
    let mut end = removed.len();
    while end > 1 {
        end -= 1;
        let parent = &removed[..end];
        if parent.last().is_none_or(|s| !s.starts_with("f:")) {
            // A list element: gone with the removal (on to its list), or
            // still holding its key at least.
            if value_at(object, parent).is_some() {
                return;
            }
            continue;
        }
        let emptied = match value_at(object, parent) {
            Some(Value::Object(map)) => map.is_empty(),
            Some(Value::Array(items)) => items.is_empty(),
            _ => false,
        };
        let path = parent.to_vec();
        if !emptied || owned.contains(&path) || wanted.contains(&path) {
            return;
        }
        remove_at(object, parent);
    }
}

fn value_at_mut<'a>(object: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut node = object;
    for segment in path {
        node = if let Some(field) = segment.strip_prefix("f:") {
            node.get_mut(field)?
        } else {
            let key: Map<String, Value> = serde_json::from_str(segment.strip_prefix("k:")?).ok()?;
            node.as_array_mut()?
                .iter_mut()
                .find(|item| keyed_by(item, &key))?
        };
    }
    Some(node)
}

/// The human form of a path: `.spec.containers[name="web"].image`.
pub fn describe(path: &[String]) -> String {
    let mut out = String::new();
    for segment in path {
        if let Some(field) = segment.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(key) = segment.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
            let inner: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(value) = segment.strip_prefix("v:") {
            out.push_str(&format!("[{value}]"));
        }
    }
    out
}

/// A manager's entry in `managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    fields: FieldSet,
    /// The subresource written (`status`), when not the main resource: a
    /// manager's entries are apart per operation and subresource.
    subresource: Option<String>,
}

/// What part of an object a write owns, by where it writes: a status
/// write its `status` and the metadata it changes, recorded in an entry of
/// its own (`subresource: status`); a main write of a type with a status subresource all but its
/// `status` (its strategy resets it); any other write the whole object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The whole object.
    Whole,
    /// The main resource of a type with a status subresource.
    Main,
    /// The status subresource.
    Status,
    /// The scale subresource: the replicas alone, in an entry that names
    /// it and, as apimachinery's scale handler writes it, has no time.
    Scale,
}

impl Part {
    /// Whether a write of this part owns `path`: a status write its
    /// status and the metadata it changed (a real status strategy resets
    /// only the spec, and a Deployment's labels), a main write all but
    /// the status.
    fn owns(self, path: &Path) -> bool {
        let first = path.first().map(String::as_str);
        match self {
            Self::Whole => true,
            Self::Main => first != Some("f:status"),
            Self::Status => matches!(first, Some("f:status" | "f:metadata")),
            Self::Scale => {
                matches!(path.as_slice(), [spec, replicas] if spec == "f:spec" && replicas == "f:replicas")
            }
        }
    }

    /// The part a write owns: of a type with a status subresource
    /// (`has_status`), at `subresource` (none for the main resource).
    pub fn of(has_status: bool, subresource: Option<&str>) -> Self {
        match subresource {
            Some("status") => Self::Status,
            Some("scale") => Self::Scale,
            None if has_status => Self::Main,
            _ => Self::Whole,
        }
    }

    /// The subresource its entries name.
    fn subresource(self) -> Option<&'static str> {
        match self {
            Self::Status => Some("status"),
            Self::Scale => Some("scale"),
            Self::Whole | Self::Main => None,
        }
    }

    /// The time its entries carry: now, but none for the scale handler's.
    fn time(self) -> String {
        if self == Self::Scale {
            String::new()
        } else {
            now()
        }
    }
}

impl Entry {
    /// Whether this is the entry of `manager`'s `operation` on `part`.
    fn is(&self, manager: &str, operation: &str, part: Part) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == part.subresource()
    }

    /// The manager as a conflict names it (apimachinery's `printManager`).
    fn printed(&self) -> String {
        if self.operation == "Update" {
            format!(
                "{:?} using {} at {}",
                self.manager, self.api_version, self.time
            )
        } else {
            format!("{:?}", self.manager)
        }
    }
}

/// The `managedFields` entries of `object`, each set read in this
/// module's terms: a map or list element owned as a member is `…, "."`
/// here, and a set printed without children says it as a bare path
/// ([`to_fields_v1`] prints `{}` for a member without children, as a real
/// server does): a bare path to a node that the object's own fields go
/// under (not a scalar, not an atomic or empty map) is a member's;
/// `present` is the object's own field set ([`fields_of`]).
fn entries(object: &Value, present: &FieldSet) -> Vec<Entry> {
    let member = |path: Path| -> Path {
        // What goes under a path sorts right after it.
        let nested = present
            .range(path.clone()..)
            .find(|q| **q != path)
            .is_some_and(|q| q.starts_with(&path));
        if nested && path.last().is_some_and(|l| l != ".") {
            let mut path = path;
            path.push(".".into());
            return path;
        }
        path
    };
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|e| Entry {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("Update")
                        .to_owned(),
                    api_version: e
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    time: e
                        .get("time")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    fields: e
                        .get("fieldsV1")
                        .map(from_fields_v1)
                        .unwrap_or_default()
                        .into_iter()
                        .map(member)
                        .collect(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes `entries` as the object's `managedFields` (those owning
/// nothing dropped), in the real server's order: by operation (`Apply` before `Update`), then
/// time, manager and subresource (apimachinery's
/// `sortEncodedManagedFields`); the sort is stable, so entries alike keep
/// their order.
fn set_entries(object: &mut Value, mut entries: Vec<Entry>) {
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.subresource).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.subresource,
        ))
    });
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut entry = json!({"manager": e.manager, "operation": e.operation,
                "apiVersion": e.api_version, "time": e.time, "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields)});
            if e.time.is_empty() {
                // No time sorts first (as zero seconds) and is left out.
                if let Some(map) = entry.as_object_mut() {
                    map.shift_remove("time");
                }
            }
            if let Some(subresource) = e.subresource {
                entry["subresource"] = subresource.into();
            }
            entry
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.shift_remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// A field another manager owns with another value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager, as a real server prints it: `"kubectl"`, or
    /// `"kubectl" using v1 at 2026-12-04T01:02:03Z` for an `Update` entry.
    pub manager: String,
    /// The field, human form.
    pub field: String,
}

/// A refused apply's message, as apimachinery words it: one conflict on
/// one line, several grouped by manager (sorted), one field a line.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [one] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager, one.field
        );
    }
    let mut by_manager: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for c in conflicts {
        by_manager.entry(&c.manager).or_default().push(&c.field);
    }
    let lines: Vec<String> = by_manager
        .iter()
        .flat_map(|(manager, fields)| {
            std::iter::once(format!("conflicts with {manager}:"))
                .chain(fields.iter().map(|f| format!("- {f}")))
        })
        .collect();
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Why an apply was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Other managers own fields the apply changes (and it does not force).
    #[error("{} conflict(s) with other managers", .0.len())]
    Conflicts(Vec<Conflict>),
    /// The configuration cannot be merged (a list element without its
    /// merge key, a bad directive).
    #[error("{0}")]
    Invalid(String),
}

/// What an apply needs to know.
#[derive(Clone, Copy, Debug)]
pub struct ApplyRequest<'a> {
    /// The applying manager.
    pub manager: &'a str,
    /// Whether to take over conflicting fields.
    pub force: bool,
    /// The `apiVersion` applied.
    pub api_version: &'a str,
    /// Whether the type is a custom resource (atomic lists).
    pub custom: bool,
    /// What the apply owns, by where it writes.
    pub part: Part,
}

/// The order structured-merge-diff walks a field set in: at each level
/// its leaves before what is under it, each part by name (so a conflict
/// on `.ports` is told before one on `.metadata.labels.x`).
fn set_order(a: &[String], b: &[String]) -> std::cmp::Ordering {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let leaf = |p: &[String]| p.len() <= common + 1;
    match (leaf(a), leaf(b)) {
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a[common.min(a.len())..].cmp(&b[common.min(b.len())..]),
    }
}

/// Whether `applied` sets the field at `path` to another value than
/// `current` has: a conflict with its other owners. A map or a list element
/// is compared by its fields, each a path of its own, so one on both sides
/// differs in none by itself (the defaults inside it are not the applier's
/// to set).
fn differs(current: &Value, applied: &Value, path: &[String]) -> bool {
    let mine = value_at(applied, path);
    !mine.is_some_and(Value::is_object) && value_at(current, path) != mine
}

/// Applies `applied` over `current` (an empty object for a create).
///
/// # Errors
/// [`ApplyError::Conflicts`] when `force` is false and other managers own
/// fields the apply changes; [`ApplyError::Invalid`] when the configuration
/// does not merge.
pub fn apply(
    current: &Value,
    applied: &Value,
    request: ApplyRequest<'_>,
) -> Result<Value, ApplyError> {
    let part = request.part;
    let mut wanted = fields_of(applied, request.custom);
    wanted.retain(|p| part.owns(p));
    let mine = |e: &Entry| e.is(request.manager, "Apply", part);
    let mut managers = entries(current, &fields_of(current, request.custom));
    let mut conflicts = Vec::new();
    for entry in managers.iter().filter(|e| !mine(e)) {
        let mut paths: Vec<&Path> = wanted
            .intersection(&entry.fields)
            .filter(|path| differs(current, applied, path))
            .collect();
        paths.sort_by(|a, b| set_order(a, b));
        conflicts.extend(paths.into_iter().map(|path| Conflict {
            manager: entry.printed(),
            field: describe(path),
        }));
    }
    if !conflicts.is_empty() && !request.force {
        return Err(ApplyError::Conflicts(conflicts));
    }
    let previous: FieldSet = managers
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    // Take over the conflicting fields (none without force): a field set
    // to the value it has stays shared with whoever owned it.
    for entry in managers.iter_mut().filter(|e| !mine(e)) {
        entry
            .fields
            .retain(|p| !wanted.contains(p) || !differs(current, applied, p));
    }
    let owned_by_others: FieldSet = managers
        .iter()
        .filter(|e| !mine(e))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut next = current.clone();
    // Deepest first, so an element goes after its fields.
    let mut dropped: Vec<&Path> = previous
        .difference(&wanted)
        .filter(|p| !owned_by_others.contains(*p))
        .collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for path in dropped {
        remove_at(&mut next, path);
        prune_emptied(&mut next, path, &owned_by_others, &wanted);
    }
    let mut body = applied.clone();
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.shift_remove("managedFields");
        meta.shift_remove("resourceVersion");
    }
    if request.custom {
        // Custom resources' lists are atomic, but metadata's are not: the
        // finalizers are a set and owner references merge by uid, so two
        // managers' entries coexist.
        let metadata = body
            .as_object_mut()
            .and_then(|m| m.shift_remove("metadata"));
        crate::mutation::patch::merge_patch(&mut next, &body);
        if let Some(metadata) = metadata {
            crate::mutation::strategic::merge_applied(&mut next, &json!({"metadata": metadata}))
                .map_err(ApplyError::Invalid)?;
        }
    } else {
        // Apply bodies hold no directives: a strategic merge merges by key.
        crate::mutation::strategic::merge_applied(&mut next, &body).map_err(ApplyError::Invalid)?;
    }
    // An unchanged apply keeps its entry's time, so it is a no-op write.
    // The sets are compared as `managedFields` prints them (as a real
    // server compares its entries): read back, a bare path to an empty map
    // the applier set is a member when others' fields went under it since.
    let printed = to_fields_v1(&wanted);
    let time = managers
        .iter()
        .find(|e| mine(e) && to_fields_v1(&e.fields) == printed)
        .map_or_else(now, |e| e.time.clone());
    managers.retain(|e| !mine(e));
    managers.push(Entry {
        manager: request.manager.to_owned(),
        operation: "Apply".into(),
        api_version: request.api_version.to_owned(),
        time,
        fields: wanted,
        subresource: part.subresource().map(str::to_owned),
    });
    set_entries(&mut next, managers);
    Ok(next)
}

/// Whether anyone owns fields of `object` (it has `managedFields` entries).
/// A real server's field manager tracks an object's fields from its
/// creation or its first apply, never from a later update: an update of an
/// object nobody owns fields of records none, and the first apply gives
/// what it holds to [`BEFORE_FIRST_APPLY`] (apimachinery's
/// `skipNonAppliedManager`).
pub fn tracked(object: &Value) -> bool {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|entries| !entries.is_empty())
}

/// The manager a first apply gives an untracked object's fields to.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Records an update: `manager` owns the fields it changed, as its `Update`
/// entry for `part`, and nobody else does any more. The paths outside
/// `part` (what the write's strategy keeps as it was) are nobody's by it.
pub fn record_update(
    old: &Value,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    custom: bool,
    part: Part,
) {
    let before = fields_of(old, custom);
    let after = fields_of(new, custom);
    // A `.` entry says that a map or a list element exists: it changes
    // when it comes to be, not when what is in it does.
    let mut changed: FieldSet = after
        .iter()
        .filter(|p| {
            !before.contains(*p)
                || (p.last().is_none_or(|l| l != ".") && value_at(old, p) != value_at(new, p))
        })
        .cloned()
        .collect();
    changed.extend(created(old, new, custom));
    changed.retain(|p| part.owns(p));
    let mut managers = entries(old, &before);
    let mut gone: FieldSet = before.difference(&after).cloned().collect();
    gone.extend(created(new, old, custom));
    for entry in &mut managers {
        entry
            .fields
            .retain(|p| !changed.contains(p) && !gone.contains(p));
    }
    if !changed.is_empty() {
        match managers.iter_mut().find(|e| e.is(manager, "Update", part)) {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = part.time();
            }
            None => managers.push(Entry {
                manager: manager.to_owned(),
                operation: "Update".into(),
                api_version: api_version.to_owned(),
                time: part.time(),
                fields: changed,
                subresource: part.subresource().map(str::to_owned),
            }),
        }
    }
    set_entries(new, managers);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Field paths by manager.
    fn owners(object: &Value) -> std::collections::BTreeMap<String, Vec<String>> {
        entries(object, &fields_of(object, false))
            .into_iter()
            .map(|e| {
                (
                    format!("{}/{}", e.manager, e.operation),
                    e.fields.iter().map(|p| describe(p)).collect(),
                )
            })
            .collect()
    }

    fn request(manager: &str, force: bool) -> ApplyRequest<'_> {
        ApplyRequest {
            manager,
            force,
            api_version: "v1",
            custom: false,
            part: Part::Whole,
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": data})
    }

    #[test]
    fn fields_should_round_trip_through_fields_v1() {
        let object = json!({"metadata": {"name": "x", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}], "replicas": 2}});
        let set = fields_of(&object, false);
        let v1 = to_fields_v1(&set);
        assert_eq!(
            v1["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["f:image"],
            json!({})
        );
        assert_eq!(v1["f:metadata"]["f:labels"]["f:a"], json!({}));
        assert!(v1["f:metadata"].get("f:name").is_none());
        assert_eq!(from_fields_v1(&v1), set);
    }

    /// A write through `/scale` takes the replicas from their owner into an
    /// entry of its own, with no time (apimachinery's scale handler), and
    /// one that leaves the replicas as they are records nothing.
    #[test]
    fn a_scale_should_take_the_replicas_into_an_untimed_entry() {
        let mut created =
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "paused": false}});
        record_update(
            &json!({}),
            &mut created,
            "maker",
            "apps/v1",
            false,
            Part::Main,
        );
        let mut scaled = created.clone();
        scaled["spec"]["replicas"] = 3.into();
        record_update(
            &created,
            &mut scaled,
            "maker",
            "apps/v1",
            false,
            Part::Scale,
        );
        let entries = scaled["metadata"]["managedFields"]
            .as_array()
            .expect("entries")
            .clone();
        assert_eq!(entries.len(), 2, "{entries:#?}");
        assert_eq!(
            entries[0],
            json!({"manager": "maker", "operation": "Update", "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                "subresource": "scale"})
        );
        assert_eq!(
            entries[1]["fieldsV1"],
            json!({"f:spec": {".": {}, "f:paused": {}}})
        );
        let mut again = scaled.clone();
        record_update(&scaled, &mut again, "other", "apps/v1", false, Part::Scale);
        assert_eq!(again, scaled);
    }

    /// Applying a configuration again changes nothing, not even its entry's
    /// time, when what it owns reads back from `managedFields` in another
    /// form than it was computed in: an empty map applied over one holding
    /// fields it does not own (`f:data: {}`, a member here, a bare path in
    /// the configuration). Found by fuzzing (`fuzz/seeds/patches`).
    #[test]
    fn an_apply_again_should_keep_its_entry_and_its_time() {
        let mut first =
            apply(&cm(json!({"a": "1"})), &cm(json!({})), request("b", true)).expect("first apply");
        first["metadata"]["managedFields"][0]["time"] = "2000-01-01T00:00:00Z".into();
        let again = apply(&first, &cm(json!({})), request("b", true)).expect("again");
        assert_eq!(again, first);
    }

    /// A manager's applies of the main resource and of its status are two
    /// entries (the status one names its subresource), neither taking the
    /// other's fields, and each applied again is a no-op.
    #[test]
    fn main_and_status_applies_should_be_owned_apart() {
        let at = |part| ApplyRequest {
            part,
            ..request("host", false)
        };
        let spec = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
            "spec": {"size": 1}, "status": {"ignored": true}});
        let status = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
            "status": {"ready": true}});
        let first = apply(&json!({}), &spec, at(Part::Main)).expect("main");
        let both = apply(&first, &status, at(Part::Status)).expect("status");
        let entries = entries(&both, &fields_of(&both, true));
        assert_eq!(entries.len(), 2, "{both}");
        assert_eq!(
            entries
                .iter()
                .map(|e| e.subresource.as_deref())
                .collect::<Vec<_>>(),
            [None, Some("status")]
        );
        assert_eq!(
            both["spec"],
            json!({"size": 1}),
            "the status apply keeps the spec"
        );
        assert!(
            both["metadata"]["managedFields"][0]["fieldsV1"]
                .get("f:status")
                .is_none(),
            "a main apply owns no status field"
        );
        let again = apply(&both, &spec, at(Part::Main)).expect("main again");
        let again = apply(&again, &status, at(Part::Status)).expect("status again");
        assert_eq!(
            again["metadata"]["managedFields"],
            both["metadata"]["managedFields"]
        );
        assert_eq!(again["spec"], both["spec"]);
    }

    #[test]
    fn apply_should_remove_fields_a_manager_stops_applying() {
        let first = apply(
            &json!({}),
            &cm(json!({"a": "1", "b": "2"})),
            request("m", false),
        )
        .expect("applies");
        let second = apply(&first, &cm(json!({"a": "1"})), request("m", false)).expect("applies");
        assert_eq!(second["data"], json!({"a": "1"}));
        assert_eq!(owners(&second)["m/Apply"], [".data.a"]);
    }

    #[test]
    fn two_managers_finalizers_and_owner_references_should_coexist() {
        for custom in [false, true] {
            let by = |manager| ApplyRequest {
                manager,
                force: false,
                api_version: "example.com/v1",
                custom,
                part: Part::Whole,
            };
            let a = json!({"metadata": {"name": "x", "finalizers": ["a.example.com/f"],
                "ownerReferences": [{"uid": "1", "name": "one", "kind": "K", "apiVersion": "v1"}]}});
            let b = json!({"metadata": {"name": "x", "finalizers": ["b.example.com/f"],
                "ownerReferences": [{"uid": "2", "name": "two", "kind": "K", "apiVersion": "v1"}]}});
            let first = apply(&json!({}), &a, by("a")).expect("a applies");
            let both = apply(&first, &b, by("b")).expect("b applies, no conflict");
            assert_eq!(
                both["metadata"]["finalizers"],
                json!(["a.example.com/f", "b.example.com/f"]),
                "custom: {custom}"
            );
            let uids: Vec<&Value> = both["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.get("uid"))
                .collect();
            assert_eq!(uids, [&json!("1"), &json!("2")], "custom: {custom}");
            // A drops its finalizer: B's stays.
            let a_done = json!({"metadata": {"name": "x", "ownerReferences": [
                {"uid": "1", "name": "one", "kind": "K", "apiVersion": "v1"}]}});
            let after = apply(&both, &a_done, by("a")).expect("a re-applies");
            assert_eq!(
                after["metadata"]["finalizers"],
                json!(["b.example.com/f"]),
                "custom: {custom}"
            );
        }
    }

    #[test]
    fn an_element_without_its_merge_key_should_be_refused_not_added_again() {
        // Found by fuzzing: applied twice, it was appended twice.
        let applied = cm(json!({"a": "1"}));
        let mut applied = applied;
        applied["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "X", "name": "o"}]);
        for custom in [false, true] {
            let err = apply(
                &json!({}),
                &applied,
                ApplyRequest {
                    custom,
                    ..request("m", false)
                },
            )
            .expect_err("no uid");
            assert!(
                matches!(&err, ApplyError::Invalid(why) if why.contains("merge key: uid")),
                "{err:?}"
            );
        }
    }

    #[test]
    fn conflicts_should_be_worded_as_a_real_server_words_them() {
        let one = Conflict {
            manager: "\"kubectl\" using v1 at 2026-12-04T01:02:03Z".into(),
            field: ".data.a".into(),
        };
        assert_eq!(
            conflict_message(std::slice::from_ref(&one)),
            "Apply failed with 1 conflict: conflict with \"kubectl\" using v1 at 2026-12-04T01:02:03Z: .data.a"
        );
        let two = Conflict {
            manager: "\"helm\"".into(),
            field: ".data.b".into(),
        };
        assert_eq!(
            conflict_message(&[one, two]),
            "Apply failed with 2 conflicts: conflicts with \"helm\":\n- .data.b\nconflicts with \"kubectl\" using v1 at 2026-12-04T01:02:03Z:\n- .data.a"
        );
    }

    #[test]
    fn apply_should_conflict_with_other_managers_unless_forced() {
        let mine =
            apply(&json!({}), &cm(json!({"a": "1"})), request("one", false)).expect("applies");
        let err =
            apply(&mine, &cm(json!({"a": "2"})), request("two", false)).expect_err("conflict");
        assert_eq!(
            err,
            ApplyError::Conflicts(vec![Conflict {
                manager: "\"one\"".into(),
                field: ".data.a".into()
            }])
        );
        // The same value is shared ownership, not a conflict.
        let shared = apply(&mine, &cm(json!({"a": "1"})), request("two", false)).expect("shares");
        assert_eq!(owners(&shared).len(), 2);
        let forced = apply(&mine, &cm(json!({"a": "2"})), request("two", true)).expect("forced");
        assert_eq!(forced["data"]["a"], "2");
        assert!(
            !owners(&forced).contains_key("one/Apply"),
            "ownership moved"
        );
        // Forcing takes the conflicting fields only: a field set to the
        // value it has stays shared.
        let both = apply(
            &mine,
            &cm(json!({"a": "1", "b": "2"})),
            request("two", true),
        )
        .expect("forced");
        assert_eq!(owners(&both).len(), 2, "a is still one's too");
    }

    #[test]
    fn conflicts_should_be_told_in_the_order_of_the_field_set() {
        let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut paths = [
            path(&["f:metadata", "f:labels", "f:difference"]),
            path(&["f:ports"]),
            path(&["f:endpoints"]),
        ];
        paths.sort_by(|a, b| set_order(a, b));
        assert_eq!(
            paths.iter().map(|p| describe(p)).collect::<Vec<_>>(),
            [".endpoints", ".ports", ".metadata.labels.difference"],
            "as kube-apiserver v1.37.2 tells an EndpointSlice's"
        );
    }

    #[test]
    fn a_list_element_on_both_sides_should_conflict_by_its_fields_only() {
        // As the real server has it (`make difference`, pods/apply): the
        // element's defaults, set by the server, are nobody's conflict.
        let pod = |label: &str, image: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"l": label}},
                   "spec": {"containers": [{"name": "main", "image": image}]}})
        };
        let mut mine = apply(&json!({}), &pod("1", "a"), request("one", false)).expect("applies");
        mine["spec"]["containers"][0]["imagePullPolicy"] = "Always".into();
        let err = apply(&mine, &pod("2", "a"), request("two", false)).expect_err("conflict");
        assert_eq!(
            err,
            ApplyError::Conflicts(vec![Conflict {
                manager: "\"one\"".into(),
                field: ".metadata.labels.l".into()
            }])
        );
        let err = apply(&mine, &pod("1", "b"), request("two", false)).expect_err("conflict");
        assert!(
            matches!(&err, ApplyError::Conflicts(c) if c.len() == 1 && c[0].field.ends_with(".image")),
            "{err:?}"
        );
        // Forced, the label moves and the element stays shared.
        let forced = apply(&mine, &pod("2", "a"), request("two", true)).expect("forced");
        let first = &owners(&forced)["one/Apply"];
        assert!(
            first.contains(&".spec.containers[name=\"main\"]".to_owned()),
            "{first:?}"
        );
        assert!(
            !first.contains(&".metadata.labels.l".to_owned()),
            "{first:?}"
        );
    }

    #[test]
    fn a_field_kept_by_another_manager_should_survive_removal() {
        let one =
            apply(&json!({}), &cm(json!({"a": "1"})), request("one", false)).expect("applies");
        let both = apply(
            &one,
            &cm(json!({"a": "1", "b": "2"})),
            request("two", false),
        )
        .expect("applies");
        let dropped = apply(&both, &cm(json!({"b": "2"})), request("two", false)).expect("applies");
        assert_eq!(
            dropped["data"],
            json!({"a": "1", "b": "2"}),
            "a is still one's"
        );
    }

    #[test]
    fn list_elements_should_merge_by_key_and_go_when_dropped() {
        let deploy = |containers: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": containers}}}})
        };
        let two = apply(
            &json!({}),
            &deploy(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}])),
            request("m", false),
        )
        .expect("applies");
        let one = apply(
            &two,
            &deploy(json!([{"name": "a", "image": "1"}])),
            request("m", false),
        )
        .expect("applies");
        assert_eq!(
            one["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "1"}])
        );
    }

    #[test]
    fn a_create_should_record_what_it_created_as_a_real_server_does() {
        // As kube-apiserver v1.37.2 records `kubectl create`: `.` for a map,
        // a pointer struct or an `omitempty` list the zero object lacks, none
        // for the structs it has; an atomic selector and owner are leaves.
        let mut deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1"}]},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx", "args": ["-v"]}]}}}});
        record_update(
            &json!({}),
            &mut deploy,
            "kubectl",
            "apps/v1",
            false,
            Part::Whole,
        );
        assert_eq!(
            deploy["metadata"]["managedFields"][0]["fieldsV1"],
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}},
                               "f:ownerReferences": {".": {}, "k:{\"uid\":\"u1\"}": {}}},
                "f:spec": {"f:replicas": {}, "f:selector": {},
                    "f:strategy": {"f:type": {}, "f:rollingUpdate": {".": {}, "f:maxSurge": {}}},
                    "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                            ".": {}, "f:args": {}, "f:image": {}, "f:name": {}}}}}}
            })
        );
        // A custom resource has no structs: every map it brings is created.
        let mut custom = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g"}, "spec": {"size": "s", "parts": {"a": 1}}});
        record_update(
            &json!({}),
            &mut custom,
            "kubectl",
            "example.com/v1",
            true,
            Part::Whole,
        );
        assert_eq!(
            custom["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {".": {}, "f:size": {}, "f:parts": {".": {}, "f:a": {}}}})
        );
        // An update that adds labels creates them; one that keeps them does not.
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let old = cm.clone();
        cm["metadata"]["labels"] = json!({"x": "1"});
        record_update(&old, &mut cm, "editor", "v1", false, Part::Whole);
        assert_eq!(
            cm["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:x": {}}}})
        );
    }

    #[test]
    fn a_member_left_without_children_should_print_and_read_back_as_a_real_server_does() {
        // The controller creates the annotations with one of its own.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let mut annotated = cm.clone();
        annotated["metadata"]["annotations"] = json!({"revision": "1"});
        record_update(&cm, &mut annotated, "controller", "v1", false, Part::Whole);
        // A user replaces them: the controller's annotation goes, its
        // ownership of the map stays, printed `{}` (kube-apiserver v1.37.2).
        let mut replaced = annotated.clone();
        replaced["metadata"]["annotations"] = json!({"x": "y"});
        record_update(&annotated, &mut replaced, "user", "v1", false, Part::Whole);
        let fields = |object: &Value, manager: &str| {
            object["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["manager"] == manager)
                .map(|e| e["fieldsV1"].clone())
        };
        assert_eq!(
            fields(&replaced, "controller"),
            Some(json!({"f:metadata": {"f:annotations": {}}}))
        );
        assert_eq!(
            fields(&replaced, "user"),
            Some(json!({"f:metadata": {"f:annotations": {"f:x": {}}}}))
        );
        // Read back, it is the member it was: taking the annotations away
        // takes it from the controller.
        let mut bare = replaced.clone();
        if let Some(meta) = bare["metadata"].as_object_mut() {
            meta.shift_remove("annotations");
        }
        record_update(&replaced, &mut bare, "user", "v1", false, Part::Whole);
        assert_eq!(fields(&bare, "controller"), None, "{bare}");
    }

    #[test]
    fn updates_should_take_ownership_of_what_they_change() {
        let applied =
            apply(&json!({}), &cm(json!({"a": "1"})), request("ssa", false)).expect("applies");
        let mut edited = applied.clone();
        edited["data"]["a"] = json!("hand");
        record_update(
            &applied,
            &mut edited,
            "kubectl-edit",
            "v1",
            false,
            Part::Whole,
        );
        assert_eq!(owners(&edited)["kubectl-edit/Update"], [".data.a"]);
        let err =
            apply(&edited, &cm(json!({"a": "1"})), request("ssa", false)).expect_err("conflict");
        assert!(
            matches!(&err, ApplyError::Conflicts(c) if c[0].manager.starts_with("\"kubectl-edit\" using v1 at ")),
            "{err:?}"
        );
    }

    /// Server-side apply over random configurations: idempotent, and two
    /// managers' disjoint fields both kept.
    mod properties {
        use std::collections::BTreeMap;

        use proptest::prelude::*;

        use super::*;

        /// A Deployment-like configuration: labels, data-like map fields
        /// and containers (a list merged by `name`).
        #[derive(Clone, Debug)]
        struct Config {
            labels: BTreeMap<String, String>,
            annotations: BTreeMap<String, String>,
            containers: BTreeMap<String, String>,
            replicas: Option<u8>,
        }

        fn config() -> impl Strategy<Value = Config> {
            let map = || proptest::collection::btree_map("[a-e]", "[a-z0-9]{0,3}", 0..4);
            (map(), map(), map(), proptest::option::of(0..5u8)).prop_map(
                |(labels, annotations, containers, replicas)| Config {
                    labels,
                    annotations,
                    containers,
                    replicas,
                },
            )
        }

        fn object(c: &Config) -> Value {
            let mut spec = Map::new();
            if !c.containers.is_empty() {
                let containers: Vec<Value> = c
                    .containers
                    .iter()
                    .map(|(name, image)| json!({"name": name, "image": image}))
                    .collect();
                spec.insert(
                    "template".into(),
                    json!({"spec": {"containers": containers}}),
                );
            }
            if let Some(r) = c.replicas {
                spec.insert("replicas".into(), json!(r));
            }
            let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "x", "namespace": "default"}});
            if !c.labels.is_empty() {
                object["metadata"]["labels"] = json!(c.labels);
            }
            if !c.annotations.is_empty() {
                object["metadata"]["annotations"] = json!(c.annotations);
            }
            if !spec.is_empty() {
                object["spec"] = Value::Object(spec);
            }
            object
        }

        /// `c` without the fields `other` sets: disjoint from it.
        fn without(c: &Config, other: &Config) -> Config {
            let keep = |mine: &BTreeMap<String, String>, theirs: &BTreeMap<String, String>| {
                mine.iter()
                    .filter(|(k, _)| !theirs.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            Config {
                labels: keep(&c.labels, &other.labels),
                annotations: keep(&c.annotations, &other.annotations),
                containers: keep(&c.containers, &other.containers),
                replicas: c.replicas.filter(|_| other.replicas.is_none()),
            }
        }

        /// Whether every field `c` sets is in `object` with `c`'s value.
        fn holds(live: &Value, c: &Config) -> bool {
            let applied = object(c);
            fields_of(&applied, false)
                .iter()
                .all(|path| value_at(live, path) == value_at(&applied, path))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn applying_the_same_configuration_twice_should_change_nothing(
                first in config(),
                second in config(),
            ) {
                let once = apply(&json!({}), &object(&first), request("m", false))
                    .map_err(|c| TestCaseError::fail(format!("{c:?}")))?;
                let twice = apply(&once, &object(&first), request("m", false))
                    .map_err(|c| TestCaseError::fail(format!("{c:?}")))?;
                prop_assert_eq!(&once, &twice);
                // And after another configuration in between, the same
                // configuration gives the same object again.
                let other = apply(&once, &object(&second), request("m", false))
                    .map_err(|c| TestCaseError::fail(format!("{c:?}")))?;
                let back = apply(&other, &object(&first), request("m", false))
                    .map_err(|c| TestCaseError::fail(format!("{c:?}")))?;
                prop_assert!(holds(&back, &first));
                prop_assert_eq!(fields_of(&back, false), fields_of(&once, false));
            }

            #[test]
            fn two_managers_disjoint_fields_should_both_survive(
                a in config(),
                b in config(),
                a_again in config(),
            ) {
                let b = without(&b, &a);
                let first = apply(&json!({}), &object(&a), request("a", false))
                    .map_err(|c| TestCaseError::fail(format!("{c:?}")))?;
                let both = apply(&first, &object(&b), request("b", false))
                    .map_err(|c| TestCaseError::fail(format!("a and b: {c:?}")))?;
                prop_assert!(holds(&both, &a) && holds(&both, &b));
                // a applies anew, still not touching b's fields: b's stay,
                // a's dropped ones go, a's new ones come.
                let a_again = without(&a_again, &b);
                let after = apply(&both, &object(&a_again), request("a", false))
                    .map_err(|c| TestCaseError::fail(format!("a again: {c:?}")))?;
                prop_assert!(holds(&after, &b), "b's fields lost: {}", after);
                prop_assert!(holds(&after, &a_again));
                let kept = fields_of(&object(&a), false);
                let wanted = fields_of(&object(&a_again), false)
                    .union(&fields_of(&object(&b), false))
                    .cloned()
                    .collect::<FieldSet>();
                for dropped in kept.difference(&wanted) {
                    prop_assert!(value_at(&after, dropped).is_none(), "{} kept", describe(dropped));
                }
            }
        }
    }
}
