//! The store's secondary indexes: objects by uid and by owner uid, so the
//! garbage collector finds an owner's dependents, or whether an owner
//! lives, without scanning the store.
//!
//! # Invariant
//! Kept under the store's lock and updated by every change, the indexes
//! name exactly the stored objects: an entry for each object's uid, and
//! one under each uid in its `ownerReferences`.

use std::collections::{BTreeSet, HashMap};

use kubewasm_core::ObjectKey;
use serde_json::Value;

use kubewasm_types::info::ResourceKey;

/// Where an object is filed.
pub(crate) type Location = (ResourceKey, ObjectKey);

/// The indexes.
#[derive(Debug, Default)]
pub(crate) struct Indexes {
    by_uid: HashMap<String, Location>,
    by_owner: HashMap<String, BTreeSet<Location>>,
}

fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

/// The uids of an object's owners.
pub(crate) fn owner_uids(object: &Value) -> impl Iterator<Item = &str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
}

impl Indexes {
    /// Records that the object at `location` changed from `before` to
    /// `after` (none for a creation or a deletion).
    pub(crate) fn update(
        &mut self,
        location: &Location,
        before: Option<&Value>,
        after: Option<&Value>,
    ) {
        if let Some(before) = before {
            if let Some(uid) = uid(before) {
                self.by_uid.remove(uid);
            }
            for owner in owner_uids(before) {
                if let Some(dependents) = self.by_owner.get_mut(owner) {
                    dependents.remove(location);
                    if dependents.is_empty() {
                        self.by_owner.remove(owner);
                    }
                }
            }
        }
        if let Some(after) = after {
            if let Some(uid) = uid(after) {
                self.by_uid.insert(uid.to_owned(), location.clone());
            }
            for owner in owner_uids(after) {
                self.by_owner
                    .entry(owner.to_owned())
                    .or_default()
                    .insert(location.clone());
            }
        }
    }

    /// Where the object with `uid` is.
    pub(crate) fn by_uid(&self, uid: &str) -> Option<&Location> {
        self.by_uid.get(uid)
    }

    /// Where the objects naming `owner` in their `ownerReferences` are.
    pub(crate) fn dependents(&self, owner: &str) -> impl Iterator<Item = &Location> {
        self.by_owner.get(owner).into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn indexes_should_follow_owner_changes_and_deletions() {
        let mut indexes = Indexes::default();
        let at = (
            ResourceKey::new("apps", "replicasets"),
            ObjectKey::namespaced("a", "web-1"),
        );
        let owned_by = |owners: &[&str]| {
            let refs: Vec<Value> = owners.iter().map(|u| json!({"uid": u})).collect();
            json!({"metadata": {"uid": "rs", "ownerReferences": refs}})
        };
        let first = owned_by(&["d1", "d2"]);
        indexes.update(&at, None, Some(&first));
        assert_eq!(indexes.by_uid("rs"), Some(&at));
        assert_eq!(indexes.dependents("d1").count(), 1);
        let second = owned_by(&["d2"]);
        indexes.update(&at, Some(&first), Some(&second));
        assert_eq!(indexes.dependents("d1").count(), 0);
        assert_eq!(indexes.dependents("d2").count(), 1);
        indexes.update(&at, Some(&second), None);
        assert_eq!(indexes.by_uid("rs"), None);
        assert_eq!(indexes.dependents("d2").count(), 0);
        assert!(indexes.by_owner.is_empty() && indexes.by_uid.is_empty());
    }
}
