//! Strategic merge patch for built-in types: a JSON merge patch, except that
//! lists of objects with a patch merge key are merged element by element,
//! and the `$patch`, `$retainKeys`, `$deleteFromPrimitiveList` and
//! `$setElementOrder` directives are honoured.
//!
//! # Order
//! A merged list is ordered as the real server orders it (apimachinery's
//! `strategicpatch`, `normalizeElementOrder`): the elements the patch names,
//! in the patch's order (or in its `$setElementOrder` list's, if it has
//! one), and the others in the live order, interleaved so that two elements
//! the live list both holds keep their live order, and an element it lacks
//! goes before the live one it is compared with. So a new `env` entry
//! patched in goes first, and `kubectl apply` (which sends
//! `$setElementOrder`) gets its file's order. [`merge_applied`], server-side
//! apply's merge, orders as structured-merge-diff does: the elements both
//! lists hold in the applied order, the others where they stood.
//!
//! # Caveat
//! The merge keys come from a table of the built-in API's list fields (the
//! `patchMergeKey` of their Go definitions) keyed by field name, not from the
//! full schema: a field of the same name in another type merges the same
//! way. Lists without a merge key are replaced, as the API does for atomic
//! lists.

use serde_json::{Map, Value};

/// The merge key of the list held by `field`, from the built-in types.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "readinessGates" => "conditionType",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "taints" => "key",
        "addresses" => "type",
        _ => return None,
    })
}

/// The merge key of one element of the list held by `field`: a Service's
/// ports merge by `port`, a container's by `containerPort`.
pub(crate) fn list_merge_key(field: &str, item: &Value) -> Option<&'static str> {
    if field == "ports" && item.get("containerPort").is_none() {
        return Some("port");
    }
    merge_key(field)
}

/// Fields whose lists are sets of primitives merged by value.
pub(crate) fn primitive_set(field: &str) -> bool {
    matches!(field, "finalizers")
}

/// Applies a strategic merge patch to `doc`.
///
/// # Errors
/// A message when a directive is malformed.
pub fn apply(doc: &mut Value, patch: &Value) -> Result<(), String> {
    Merge { reorder: true }.object(doc, patch)
}

/// Merges an applied configuration into `doc` by the same keys, each
/// keyed list and set in server-side apply's order (see
/// `Merge::applied_list`).
///
/// # Errors
/// As [`apply`].
pub fn merge_applied(doc: &mut Value, body: &Value) -> Result<(), String> {
    Merge { reorder: false }.object(doc, body)
}

/// One merge: a patch's (which orders merged lists as a patch does), or
/// server-side apply's.
#[derive(Clone, Copy)]
struct Merge {
    reorder: bool,
}

/// The merge key of the list `key` holds, as `items` (a patch's list or a
/// `$setElementOrder` list) show it: a Service's and an EndpointSlice's
/// `ports` merge by `port`, a container's by `containerPort`.
fn field_merge_key(key: &str, items: &[Value], is_service_spec: bool) -> Option<&'static str> {
    if !items.iter().all(Value::is_object) {
        return None;
    }
    if key == "ports" && (is_service_spec || items.iter().any(|i| i.get("containerPort").is_none()))
    {
        Some("port")
    } else {
        merge_key(key)
    }
}

impl Merge {
    fn object(self, doc: &mut Value, patch: &Value) -> Result<(), String> {
        let Value::Object(patch) = patch else {
            *doc = patch.clone();
            return Ok(());
        };
        if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
            let mut replacement = patch.clone();
            replacement.remove("$patch");
            *doc = Value::Object(replacement);
            return Ok(());
        }
        if !doc.is_object() {
            *doc = Value::Object(Map::new());
        }
        let Value::Object(map) = doc else {
            return Ok(());
        };
        if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
            let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
            map.retain(|k, _| keep.contains(&k.as_str()) || patch.contains_key(k));
        }
        // A Service's `ports` merge by `port`, a container's by `containerPort`.
        let is_service_spec = map.contains_key("clusterIP")
            || map.contains_key("selector") && !map.contains_key("template");
        // The lists a `$setElementOrder` orders, as they were.
        let ordered: Vec<(&str, &Vec<Value>, Vec<Value>)> = if self.reorder {
            patch
                .iter()
                .filter_map(|(key, order)| {
                    let field = key.strip_prefix("$setElementOrder/")?;
                    let live = match map.get(field) {
                        Some(Value::Array(live)) => live.clone(),
                        _ => Vec::new(),
                    };
                    Some((field, order.as_array()?, live))
                })
                .collect()
        } else {
            Vec::new()
        };
        for (key, value) in patch {
            if key.starts_with("$setElementOrder/") || key == "$retainKeys" || key == "$patch" {
                continue;
            }
            if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
                if let (Some(Value::Array(list)), Value::Array(remove)) =
                    (map.get_mut(field), value)
                {
                    list.retain(|v| !remove.contains(v));
                }
                continue;
            }
            if value.is_null() {
                map.shift_remove(key);
                continue;
            }
            // A list of objects with a merge key merges by it; any other list
            // is replaced.
            let merge_key = match value {
                Value::Array(items) => field_merge_key(key, items, is_service_spec),
                _ => None,
            };
            if let (Some(merge_key), Value::Array(items)) = (merge_key, value) {
                keyed(items, merge_key)?;
            }
            match (map.get_mut(key), value) {
                (Some(Value::Array(current)), Value::Array(items)) => match merge_key {
                    Some(merge_key) if !self.reorder => {
                        self.applied_list(current, items, Some(merge_key))?;
                    }
                    Some(merge_key) => self.list(current, items, merge_key)?,
                    None if primitive_set(key) && !self.reorder => {
                        let items = self.fresh_list(items)?;
                        self.applied_list(current, &items, None)?;
                    }
                    None if primitive_set(key) => {
                        let live = current.clone();
                        // Merged as a new list is made, so a directive element
                        // is dropped the second time as it was the first.
                        let named = self.fresh_list(items)?;
                        for item in &named {
                            if !current.contains(item) {
                                current.push(item.clone());
                            }
                        }
                        *current = in_patch_order(std::mem::take(current), &named, &live, None);
                    }
                    None => *current = self.fresh_list(items)?,
                },
                (Some(current), Value::Object(_)) => self.object(current, value)?,
                _ => {
                    map.insert(key.clone(), self.fresh(value)?);
                }
            }
        }
        for (field, order, live) in ordered {
            if let Some(Value::Array(merged)) = map.get_mut(field) {
                let merge_key = if primitive_set(field) {
                    None
                } else {
                    field_merge_key(field, order, is_service_spec)
                };
                *merged = in_patch_order(std::mem::take(merged), order, &live, merge_key);
            }
        }
        Ok(())
    }

    /// New content (a field the object lacks, an element its list lacks, a
    /// replaced list) as merging it into nothing makes it: its directives
    /// honoured at every depth, as they are where it merges into what is
    /// there, so applying the same patch twice gives the same object.
    fn fresh(self, value: &Value) -> Result<Value, String> {
        match value {
            Value::Object(_) => {
                let mut made = Value::Null;
                self.object(&mut made, value)?;
                Ok(made)
            }
            Value::Array(items) => Ok(Value::Array(self.fresh_list(items)?)),
            other => Ok(other.clone()),
        }
    }

    /// A new list: its directive elements dropped, the others made fresh.
    fn fresh_list(self, items: &[Value]) -> Result<Vec<Value>, String> {
        items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(|i| self.fresh(i))
            .collect()
    }

    /// Merges `items` into `current` by `merge_key`: an element of the
    /// same key merges into the first that holds it, a `delete` removes
    /// every one that does (as apimachinery's `deleteMatchingEntries`), a
    /// new one is appended; then the order, if this merge orders. Linear in
    /// both lists (an index by key), whatever their length.
    fn list(
        self,
        current: &mut Vec<Value>,
        items: &[Value],
        merge_key: &str,
    ) -> Result<(), String> {
        let live = std::mem::take(current);
        let mut index = Positions::of(&live, Some(merge_key));
        let mut slots: Vec<Option<Value>> = live.iter().cloned().map(Some).collect();
        for item in items {
            let id = identity(item, Some(merge_key));
            match item.get("$patch").and_then(Value::as_str) {
                Some("delete") => {
                    for i in index.all.remove(&id).unwrap_or_default() {
                        slots[i] = None;
                    }
                }
                Some("replace") => {
                    *current = self.fresh_list(items)?;
                    return Ok(());
                }
                // `keyed` refused any other directive.
                Some(_) => {}
                None => match index.all.get(&id).and_then(|at| at.first()) {
                    Some(&i) => {
                        if let Some(slot) = &mut slots[i] {
                            self.object(slot, item)?;
                        }
                    }
                    None => {
                        index.all.insert(id, vec![slots.len()]);
                        slots.push(Some(self.fresh(item)?));
                    }
                },
            }
        }
        let merged = slots.into_iter().flatten().collect();
        let named: Vec<Value> = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        *current = in_patch_order(merged, &named, &live, Some(merge_key));
        Ok(())
    }

    /// Merges an applied list into the live one as server-side apply does
    /// (structured-merge-diff's `visitListItems`, walking both lists at
    /// once): the elements both hold in the applied list's order, each
    /// live-only element where it stood, each applied-only one where the
    /// applied list has it. Elements are the same by `merge_key`, or whole
    /// (a set of primitives).
    fn applied_list(
        self,
        current: &mut Vec<Value>,
        items: &[Value],
        merge_key: Option<&str>,
    ) -> Result<(), String> {
        // Directives, though an applied configuration has none, do what they
        // do in a patch, so that applying the same body twice changes
        // nothing the second time (found by fuzzing:
        // fuzz/seeds/patches/regression-apply-a-delete-directive).
        let directive = |item: &Value| {
            item.get("$patch")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        if items
            .iter()
            .any(|i| directive(i).as_deref() == Some("replace"))
        {
            *current = self.fresh_list(items)?;
            return Ok(());
        }
        let deleted: std::collections::HashSet<String> = items
            .iter()
            .filter(|i| directive(i).as_deref() == Some("delete"))
            .map(|i| identity(i, merge_key))
            .collect();
        let live: Vec<Value> = std::mem::take(current)
            .into_iter()
            .filter(|i| !deleted.contains(&identity(i, merge_key)))
            .collect();
        let items: Vec<Value> = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        let items = items.as_slice();
        let lhs: Vec<String> = live.iter().map(|i| identity(i, merge_key)).collect();
        let rhs: Vec<String> = items.iter().map(|i| identity(i, merge_key)).collect();
        let (in_lhs, in_rhs) = (Positions::of_ids(&lhs), Positions::of_ids(&rhs));
        let mut shared = rhs.iter().filter(|id| in_lhs.at(id).is_some());
        let mut next_shared = shared.next();
        let mut merged_rhs = std::collections::HashSet::new();
        // An applied element merged into the live one of its key, if any.
        let merged = |at: Option<usize>, r: usize| -> Result<Value, String> {
            match (at, merge_key) {
                (Some(l), Some(_)) => {
                    let mut item = live[l].clone();
                    self.object(&mut item, &items[r])?;
                    Ok(item)
                }
                _ => self.fresh(&items[r]),
            }
        };
        let (mut l, mut r) = (0, 0);
        let mut out = Vec::with_capacity(live.len().max(items.len()));
        while l < lhs.len() || r < rhs.len() {
            if l < lhs.len() && r < rhs.len() {
                if lhs[l] == rhs[r] {
                    merged_rhs.insert(&rhs[r]);
                    out.push(merged(Some(l), r)?);
                    (l, r) = (l + 1, r + 1);
                    next_shared = shared.next();
                    continue;
                }
                // A shared element, but not the one wanted now.
                if in_rhs.at(&lhs[l]).is_some() && next_shared.is_some_and(|n| *n != lhs[l]) {
                    l += 1;
                    continue;
                }
            }
            if l < lhs.len() {
                if in_rhs.at(&lhs[l]).is_none() {
                    out.push(live[l].clone());
                    l += 1;
                    continue;
                } else if merged_rhs.contains(&lhs[l]) {
                    l += 1;
                }
            }
            if r < rhs.len() {
                merged_rhs.insert(&rhs[r]);
                out.push(merged(in_lhs.at(&rhs[r]), r)?);
                if next_shared == Some(&rhs[r]) {
                    next_shared = shared.next();
                }
                r += 1;
            }
        }
        *current = out;
        Ok(())
    }
}

/// An element's identity in a list: its merge key's value, or the whole
/// element, as JSON text (equal values, equal texts: `serde_json` writes a
/// map's keys in one order).
fn identity(item: &Value, merge_key: Option<&str>) -> String {
    match merge_key {
        Some(key) => item.get(key).map(Value::to_string).unwrap_or_default(),
        None => item.to_string(),
    }
}

/// Where each identity stands in a list.
struct Positions {
    all: std::collections::HashMap<String, Vec<usize>>,
}

impl Positions {
    fn of(list: &[Value], merge_key: Option<&str>) -> Self {
        let ids: Vec<String> = list.iter().map(|item| identity(item, merge_key)).collect();
        Self::of_ids(&ids)
    }

    /// Where each of `ids` (a list's identities, in order) stands.
    fn of_ids(ids: &[String]) -> Self {
        let mut all: std::collections::HashMap<String, Vec<usize>> =
            std::collections::HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            all.entry(id.clone()).or_default().push(i);
        }
        Self { all }
    }

    /// The first position of identity `id`.
    fn at(&self, id: &str) -> Option<usize> {
        self.all.get(id).and_then(|at| at.first().copied())
    }

    /// The first position of `item`'s identity.
    fn first(&self, item: &Value, merge_key: Option<&str>) -> Option<usize> {
        self.at(&identity(item, merge_key))
    }
}

/// Checks the elements of a list merged by `merge_key`, whether it merges
/// into a list or is new: each holds the key (a `$patch` directive aside),
/// as the real server has it (an element it could not place would be
/// appended again at every patch), and a directive is `delete` or `replace`
/// (the same patch is refused whatever the object holds).
fn keyed(items: &[Value], merge_key: &str) -> Result<(), String> {
    for item in items {
        match item.get("$patch") {
            None if item.get(merge_key).is_none() => {
                return Err(format!(
                    "{item} does not contain declared merge key: {merge_key}"
                ));
            }
            None => {}
            Some(directive) if directive == "delete" || directive == "replace" => {}
            Some(other) => return Err(format!("unknown $patch directive {other} in a list")),
        }
    }
    Ok(())
}

/// `merged` in the order the real server gives it (see the module's docs):
/// the elements `order` names, in its order, interleaved with the others in
/// their `live` order. Elements are the same by `merge_key`, or whole.
fn in_patch_order(
    merged: Vec<Value>,
    order: &[Value],
    live: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let (in_order, in_live) = (
        Positions::of(order, merge_key),
        Positions::of(live, merge_key),
    );
    let mut named: Vec<(usize, Value)> = Vec::new();
    let mut others: Vec<(Option<usize>, Value)> = Vec::new();
    for item in merged {
        match in_order.first(&item, merge_key) {
            Some(at) => named.push((at, item)),
            None => others.push((in_live.first(&item, merge_key), item)),
        }
    }
    // Stable sorts, as Go's `sort.SliceStable`.
    named.sort_by_key(|(at, _)| *at);
    others.sort_by_key(|(at, _)| at.unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(named.len() + others.len());
    let mut named = named
        .into_iter()
        .map(|(_, item)| (in_live.first(&item, merge_key), item))
        .peekable();
    let mut others = others.into_iter().peekable();
    loop {
        let take_other = match (others.peek(), named.peek()) {
            (Some((Some(o), _)), Some((Some(n), _))) => o < n,
            (Some(_), Some(_)) => false,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_other {
            others.next()
        } else {
            named.next()
        };
        out.extend(next.map(|(_, item)| item));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_keyed_list_should_refuse_an_element_without_its_key_and_other_lists_be_replaced() {
        // An unknown directive is refused whether the list is there or new
        // (found by fuzzing: only the second apply refused it).
        for mut doc in [json!({}), json!({"containers": []})] {
            let err = apply(
                &mut doc,
                &json!({"containers": [{"name": "a", "$patch": "delet'e"}]}),
            )
            .expect_err("unknown directive");
            assert!(err.contains("unknown $patch directive"), "{err}");
        }
        let mut doc = json!({"spec": {"containers": [{"name": "app", "image": "a:1"}]}});
        let err = apply(&mut doc, &json!({"spec": {"containers": [{"image": "b"}]}}))
            .expect_err("no name");
        assert!(
            err.contains("does not contain declared merge key: name"),
            "{err}"
        );
        // Ports without `containerPort` (an EndpointSlice's) merge by port.
        let mut slice = json!({"ports": [{"name": "http", "port": 80}]});
        apply(
            &mut slice,
            &json!({"ports": [{"port": 80, "protocol": "TCP"}, {"port": 443}]}),
        )
        .expect("merges");
        assert_eq!(
            slice["ports"],
            json!([{"name": "http", "port": 80, "protocol": "TCP"}, {"port": 443}])
        );
        // A list of strings under a keyed name (an endpoint's addresses) is
        // replaced, never appended to.
        let mut endpoint = json!({"addresses": ["10.0.0.1"]});
        for _ in 0..2 {
            apply(&mut endpoint, &json!({"addresses": ["10.0.0.2"]})).expect("replaces");
        }
        assert_eq!(endpoint["addresses"], json!(["10.0.0.2"]));
    }

    #[test]
    fn new_content_should_honour_its_directives_as_merged_content_does() {
        // Found by fuzzing (fuzz/seeds/patches/regression-apply-twice-
        // directive-in-a-new-element): an owner reference added with a nested
        // list holding a delete directive kept the directive, the same patch
        // again dropped it.
        let patch = json!({"metadata": {"ownerReferences": [
            {"uid": "u", "name": "o", "kers": [{"name": "web", "$patch": "delete"}]}]}});
        let mut once = json!({"metadata": {"name": "x"}});
        apply(&mut once, &patch).expect("merges");
        assert_eq!(once["metadata"]["ownerReferences"][0]["kers"], json!([]));
        let mut twice = once.clone();
        apply(&mut twice, &patch).expect("merges");
        assert_eq!(twice, once);
        // The same for an element new to a list that is there.
        let mut more = json!({"metadata": {"ownerReferences": [{"uid": "t", "name": "p"}]}});
        apply(&mut more, &patch).expect("merges");
        assert_eq!(more["metadata"]["ownerReferences"][0]["kers"], json!([]));
        // And for a set of primitives (fuzz/seeds/patches/regression-
        // directive-in-a-set): the second merge pushed the directive.
        let patch = json!({"spec": {"finalizers": [{"name": "web", "$patch": "delete"}, "a"]}});
        let mut once = json!({"spec": {}});
        apply(&mut once, &patch).expect("merges");
        assert_eq!(once["spec"]["finalizers"], json!(["a"]));
        let mut twice = once.clone();
        apply(&mut twice, &patch).expect("merges");
        assert_eq!(twice, once);
    }

    #[test]
    fn containers_should_merge_by_name() {
        let mut doc = json!({"spec": {"containers": [
            {"name": "app", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "side", "image": "s:1"}]}});
        let patch = json!({"spec": {"containers": [
            {"name": "app", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "side", "$patch": "delete"}]}});
        apply(&mut doc, &patch).expect("applies");
        // The new entry first: Kubernetes 1.37.2 gives the same.
        assert_eq!(
            doc,
            json!({"spec": {"containers": [{"name": "app", "image": "a:2",
                "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}]}]}})
        );
    }

    #[test]
    fn merged_lists_should_be_ordered_as_the_real_server_orders_them() {
        let env = |names: &[&str]| -> Value { names.iter().map(|n| json!({"name": n})).collect() };
        /// Live, patch, `$setElementOrder`, merged by the patch, merged by
        /// server-side apply (the patch as the applied list).
        type Case<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            Option<&'a [&'a str]>,
            &'a [&'a str],
            &'a [&'a str],
        );
        let cases: [Case; 6] = [
            // New entries before the live ones, in the patch's order; after
            // them, in an apply.
            (
                &["a", "b"],
                &["c", "d"],
                None,
                &["c", "d", "a", "b"],
                &["a", "b", "c", "d"],
            ),
            // An entry both hold takes the patch's place among the patch's;
            // an apply puts the shared ones in its order.
            (
                &["a", "b", "c"],
                &["c", "a"],
                None,
                &["b", "c", "a"],
                &["b", "c", "a"],
            ),
            (&["a", "b"], &["b", "a"], None, &["b", "a"], &["b", "a"]),
            // `kubectl apply` sends the file's order.
            (&["a"], &["b"], Some(&["a", "b"]), &["a", "b"], &["a", "b"]),
            (
                &["a", "b"],
                &["c"],
                Some(&["b", "c", "a"]),
                &["b", "c", "a"],
                &["a", "b", "c"],
            ),
            // The order alone reorders.
            (
                &["a", "b", "c"],
                &[],
                Some(&["c", "b", "a"]),
                &["c", "b", "a"],
                &["a", "b", "c"],
            ),
        ];
        for (live, patch, order, patched, applied) in cases {
            let mut doc = json!({"env": env(live)});
            let mut body = json!({});
            if !patch.is_empty() {
                body["env"] = env(patch);
            }
            if let Some(order) = order {
                body["$setElementOrder/env"] = env(order);
            }
            apply(&mut doc, &body).expect("merges");
            assert_eq!(doc["env"], env(patched), "{live:?} + {body}");
            let mut doc = json!({"env": env(live)});
            merge_applied(&mut doc, &json!({"env": env(patch)})).expect("merges");
            assert_eq!(doc["env"], env(applied), "{live:?} applied {patch:?}");
            // Applying it again changes nothing.
            let again = doc.clone();
            merge_applied(&mut doc, &json!({"env": env(patch)})).expect("merges");
            assert_eq!(doc, again);
        }
        // A delete directive in an applied list (fuzz/seeds/patches/
        // regression-apply-a-delete-directive): nothing the second time.
        let body = json!({"containers": [{"name": "web", "$patch": "delete"}]});
        let mut doc = json!({"containers": [{"name": "web"}, {"name": "side"}]});
        merge_applied(&mut doc, &body).expect("merges");
        assert_eq!(doc, json!({"containers": [{"name": "side"}]}));
        let mut new = json!({});
        merge_applied(&mut new, &body).expect("merges");
        let once = new.clone();
        merge_applied(&mut new, &body).expect("merges");
        assert_eq!(new, once);
        // A set of primitives the same way.
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        apply(&mut doc, &json!({"metadata": {"finalizers": ["c"]}})).expect("merges");
        assert_eq!(doc["metadata"]["finalizers"], json!(["c", "a", "b"]));
    }

    #[test]
    fn atomic_lists_should_be_replaced_and_maps_merged() {
        let mut doc =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"args": ["x", "y"]}});
        apply(
            &mut doc,
            &json!({"metadata": {"labels": {"b": null, "c": "3"}}, "spec": {"args": ["z"]}}),
        )
        .expect("applies");
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {"args": ["z"]}})
        );
    }

    #[test]
    fn directives_should_be_honoured() {
        let mut doc = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"x": 1, "y": 2}});
        let patch = json!({
            "$setElementOrder/finalizers": ["b"],
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"$patch": "replace", "z": 3}
        });
        apply(&mut doc, &patch).expect("applies");
        assert_eq!(
            doc,
            json!({"metadata": {"finalizers": ["b"]}, "spec": {"z": 3}})
        );
    }

    #[test]
    fn service_ports_should_merge_by_port() {
        let mut doc = json!({"spec": {"selector": {"app": "a"}, "ports": [{"port": 80, "targetPort": 8080}]}});
        apply(
            &mut doc,
            &json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}]}}),
        )
        .expect("applies");
        assert_eq!(
            doc["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080, "name": "http"}, {"port": 443}])
        );
    }
}
