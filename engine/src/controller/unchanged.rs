//! Writes the server would not change, left out.
//!
//! A plugin's outcome is whole desired state: every reconcile applies every
//! child and the status again, though after the first nearly all already
//! hold. A real API server pays for a server-side apply that changes
//! nothing almost as much as for one that does (it decodes, merges and
//! compares the whole object, and answers it), so the host sends an apply
//! only when it could change something, and counts the others
//! (`kubewasm_actions_total{result="unchanged"}`).
//!
//! # Rule
//! An apply (or a status apply) is left out when all of these hold:
//! - the key's last step sent this same apply (the object, its field
//!   manager, its subresource and `force`) with exactly this body, and it
//!   succeeded: the fields the manager owns are this body's, so the apply
//!   has nothing to prune and nothing to take over;
//! - the cached object is the one that apply wrote (its uid), and the
//!   manager still has an `Apply` entry in its `managedFields`;
//! - every field of the body holds on the cached object (`kubewasm
//!   replay`'s [`holds`]): maps as subsets (the server's defaults and
//!   other managers' fields beside ours change nothing), lists element by
//!   element and of the same length (an element someone added is one an
//!   apply could remove), the rest equal.
//!
//! A body's `apiVersion` and `kind` are not compared: the cache is kept by
//! type. The cache may lag a write made since: that write's own event
//! brings the key back and the apply is sent then (the loop is
//! level-triggered). A left-out apply stands written with the cached
//! object's resourceVersion, which the [memo](super::memo) takes as what
//! the step wrote.
//!
//! # Memory
//! Three hashes per object a key applied, kept while the key's primary
//! lives (forgotten with the key, as the memo forgets it).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::applier::Written;
use crate::listing::Key;
use kubewasm_runtime::action::{Action, Applied};
use kubewasm_runtime::cache::Cache;
use kubewasm_runtime::replay::holds;
use kubewasm_runtime::resource::ObjectKey;

/// One apply a key's step sent: hashes of its target (type, key, field
/// manager, subresource, force), of the uid it wrote and of its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent {
    target: u64,
    uid: u64,
    body: u64,
}

/// The applies each key's last steps sent (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Unchanged(Mutex<HashMap<Key, Vec<Sent>>>);

fn digest(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

fn target(applied: &Applied<'_>) -> u64 {
    digest((
        applied.resource,
        applied.key,
        applied.field_manager,
        applied.status,
        applied.force,
    ))
}

fn body(applied: &Applied<'_>) -> u64 {
    digest(applied.object.to_string())
}

/// Whether the body of `applied` holds on `live`, its type meta aside.
fn body_holds(live: &Value, applied: &Applied<'_>) -> bool {
    match (live, applied.object) {
        (Value::Object(live), Value::Object(desired)) => desired
            .iter()
            .filter(|(name, _)| !matches!(name.as_str(), "apiVersion" | "kind"))
            .all(|(name, value)| live.get(name).is_some_and(|held| holds(value, held))),
        _ => false,
    }
}

impl Unchanged {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Sent>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// For each of `key`'s `actions`, the cached object's [`Written`] if
    /// the action is an apply the server would not change, else `None`.
    pub(super) fn check(
        &self,
        key: &ObjectKey,
        actions: &[Action],
        cache: &dyn Cache,
    ) -> Vec<Option<Written>> {
        let sent = self.lock();
        let Some(sent) = sent.get(key) else {
            return vec![None; actions.len()];
        };
        actions
            .iter()
            .map(|action| {
                let applied = action.applied()?;
                let last = sent.iter().find(|s| s.target == target(&applied))?;
                let cached = cache.get(applied.resource, applied.key)?;
                let uid = cached.uid()?;
                (last.uid == digest(uid)
                    && cached.applied(applied.field_manager)
                    && last.body == body(&applied)
                    && body_holds(&cached.value(), &applied))
                .then(|| Written {
                    resource_version: cached.resource_version().map(Into::into),
                    uid: Some(uid.into()),
                })
            })
            .collect()
    }

    /// Remembers the applies among `key`'s `actions` that were sent and
    /// answered (`written`, in order; those left out are kept as they
    /// were).
    pub(super) fn sent(&self, key: &Key, actions: &[Action], written: &[Written]) {
        let mut all = self.lock();
        let entries = all.entry(std::sync::Arc::clone(key)).or_default();
        for (action, written) in actions.iter().zip(written) {
            let (Some(applied), Some(uid)) = (action.applied(), written.uid.as_deref()) else {
                continue;
            };
            let sent = Sent {
                target: target(&applied),
                uid: digest(uid),
                body: body(&applied),
            };
            match entries.iter_mut().find(|s| s.target == sent.target) {
                Some(entry) => *entry = sent,
                None => entries.push(sent),
            }
        }
        if entries.is_empty() {
            all.remove(key);
        }
    }

    /// Forgets `key`'s applies: its next ones are sent.
    pub(super) fn forget(&self, key: &ObjectKey) {
        let mut all = self.lock();
        all.remove(key);
        if all.capacity() > 64 && all.len() < all.capacity() / 4 {
            all.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use kubewasm_runtime::action::{Desired, PlanContext, plan};
    use kubewasm_runtime::cache::MemoryCache;
    use kubewasm_runtime::declaration::Declaration;
    use kubewasm_runtime::grants::{Grants, OperatorGrants};

    /// myapp's declaration: MyApps owning Deployments.
    fn declaration() -> Declaration {
        let ty = |group: &str, kind: &str, plural: &str| json!({"group": group, "version": "v1", "kind": kind, "plural": plural, "namespaced": true});
        serde_json::from_value::<Declaration>(json!({
            "name": "myapp", "version": "0.1.0",
            "primary": ty("example.com", "MyApp", "myapps"),
            "primaryVerbs": ["applyStatus"],
            "secondaries": [{"type": ty("apps", "Deployment", "deployments"),
                "verbs": ["get", "watch", "apply"], "labelSelector": "",
                "mapping": {"kind": "ownerReferences"}}],
        }))
        .expect("a declaration")
        .validate()
        .expect("valid")
    }

    /// What myapp's step plans with `replicas` over `cached`: the
    /// Deployment's apply and the status apply.
    fn step(cached: &MemoryCache, replicas: u32) -> Vec<Action> {
        let declaration = declaration();
        let grants = Grants::new(&declaration, &OperatorGrants::unrestricted()).expect("granted");
        let primary = json!({"apiVersion": "example.com/v1", "kind": "MyApp",
            "metadata": {"name": "demo", "namespace": "default", "uid": "u-1"}});
        let key = ObjectKey::namespaced("default", "demo");
        let ctx = PlanContext {
            declaration: &declaration,
            grants: &grants,
            key: &key,
            primary: Some(&primary),
            cache: cached,
            now: jiff::Timestamp::UNIX_EPOCH,
        };
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "demo", "namespace": "default"}, "spec": {"replicas": replicas}});
        let status = json!({"apiVersion": "example.com/v1", "kind": "MyApp",
            "metadata": {"name": "demo", "namespace": "default"}, "status": {"ready": replicas}});
        plan(
            ctx,
            vec![
                Desired::Apply {
                    object: deployment.to_string(),
                    owned: true,
                    force: true,
                },
                Desired::ApplyStatus(status.to_string()),
            ],
        )
        .expect("planned")
    }

    /// The cluster after the step: the Deployment (`uid`, applied by
    /// `manager`, with a default beside ours) and the MyApp's status.
    fn cluster(uid: &str, manager: &str, replicas: u32) -> MemoryCache {
        let managed = json!([{"manager": manager, "operation": "Apply"}]);
        MemoryCache::from_objects([
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "demo", "namespace": "default", "uid": uid, "resourceVersion": "7",
                    "managedFields": managed, "ownerReferences": [{"apiVersion": "example.com/v1",
                        "kind": "MyApp", "name": "demo", "uid": "u-1", "controller": true,
                        "blockOwnerDeletion": true}]},
                "spec": {"replicas": replicas, "revisionHistoryLimit": 10}}),
            json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                "metadata": {"name": "demo", "namespace": "default", "uid": "u-1", "resourceVersion": "8",
                    "managedFields": managed},
                "status": {"ready": replicas}}),
        ])
        .expect("valid")
    }

    fn written(uid: &str, version: &str) -> Written {
        Written {
            resource_version: Some(version.into()),
            uid: Some(uid.into()),
        }
    }

    #[test]
    fn an_apply_sent_and_held_should_be_left_out_until_the_object_or_the_body_changes() {
        let unchanged = Unchanged::default();
        let key: Key = Arc::new(ObjectKey::namespaced("default", "demo"));
        let manager = "kubewasm-myapp";
        let held = cluster("d-1", manager, 2);
        let actions = step(&held, 2);
        // Never sent: both go.
        assert_eq!(unchanged.check(&key, &actions, &held), vec![None, None]);
        unchanged.sent(&key, &actions, &[written("d-1", "7"), written("u-1", "8")]);
        // Sent with this body, and held: both left out, standing for the
        // cached objects.
        assert_eq!(
            unchanged.check(&key, &actions, &held),
            vec![Some(written("d-1", "7")), Some(written("u-1", "8"))]
        );
        // Another body (the plugin asks for more): sent.
        let more = step(&held, 3);
        assert_eq!(unchanged.check(&key, &more, &held), vec![None, None]);
        // Someone changed a field of ours: sent.
        assert_eq!(
            unchanged.check(&key, &actions, &cluster("d-1", manager, 1)),
            vec![None, None]
        );
        // The Deployment deleted and made again: its apply is sent.
        assert_eq!(
            unchanged.check(&key, &actions, &cluster("d-2", manager, 2))[0],
            None
        );
        // Our manager's entry gone from managedFields: sent.
        assert_eq!(
            unchanged.check(&key, &actions, &cluster("d-1", "kubectl", 2)),
            vec![None, None]
        );
        // Not cached: sent.
        assert_eq!(
            unchanged.check(&key, &actions, &MemoryCache::default()),
            vec![None, None]
        );
        // Forgotten (a failure, the primary gone): sent.
        unchanged.forget(&key);
        assert_eq!(unchanged.check(&key, &actions, &held), vec![None, None]);
    }
}
