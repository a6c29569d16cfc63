//! Children as a set: a reconcile's outcome is the whole set of children of
//! each type declared with `prune`, so the ones it no longer applies are
//! deleted by the host, after the outcome's own actions.
//!
//! # The children pruned
//! An object of a type declared with `prune` is pruned after a `reconcile`
//! when, as the cache holds it:
//! - it has a controller owner reference to the primary's uid (the host set
//!   it, or something did on its behalf: either way the primary controls
//!   it);
//! - this plugin's field manager server-side applied it (another plugin
//!   reconciling the same primary type keeps its own children);
//! - it is not being deleted already;
//! - the outcome neither applies nor deletes it.
//!
//! Each is a delete preconditioned on the uid and resourceVersion the cache
//! holds (a child changed since is left to the next reconcile), checked by
//! the plugin's grants like any delete, in the cache's order (namespace,
//! then name). Nothing is pruned after a `finalize` (the garbage collector
//! removes owned children with their primary) or for a primary not cached.
//! A type not declared with `prune` is never pruned.

use serde_json::Value;

use super::desired::{Desired, Preconditions};
use super::plan::{PlanContext, plan_one};
use super::planned::Action;
use kubewasm_core::resource::{ObjectKey, ResourceType};
use kubewasm_core::rules::ActionError;
use kubewasm_core::selector::Selector;

/// The deletes of the children `planned` (a reconcile's outcome, planned)
/// no longer applies, for every type declared with `prune`; their refusal
/// is numbered after the outcome's actions.
///
/// # Errors
/// The first [`ActionError`] (a delete the grants refuse).
pub fn stale_children(
    ctx: PlanContext<'_>,
    planned: &[Action],
) -> Result<Vec<Action>, ActionError> {
    let Some(uid) = ctx
        .primary
        .and_then(|p| p.pointer("/metadata/uid"))
        .and_then(Value::as_str)
    else {
        return Ok(Vec::new());
    };
    let manager = ctx.declaration.field_manager();
    let namespace = ctx
        .key
        .namespace
        .as_deref()
        .filter(|_| ctx.declaration.primary.namespaced);
    let kept = |resource: &ResourceType, key: &ObjectKey| {
        planned
            .iter()
            .filter_map(Action::object)
            .any(|(r, k, _)| r == resource && k == key)
    };
    let mut stale = Vec::new();
    for set in ctx.declaration.secondaries.iter().filter(|s| s.prune) {
        let resource = &set.resource;
        // A namespaced primary's children are in its namespace (an owner
        // reference never crosses namespaces).
        let scope = namespace.filter(|_| resource.namespaced);
        for child in ctx.cache.list(resource, scope, &Selector::default()) {
            let Some(key) = child.key().cloned() else {
                continue;
            };
            let controlled = child
                .owners()
                .iter()
                .any(|owner| owner.controller && &*owner.uid == uid);
            if !controlled || child.deleting() || !child.applied(&manager) || kept(resource, &key) {
                continue;
            }
            let preconditions = Preconditions {
                uid: child.uid().map(str::to_owned),
                resource_version: child.resource_version().map(str::to_owned),
            };
            let index = planned.len() + stale.len() + 1;
            let delete = Desired::Delete(resource.clone(), key, preconditions);
            stale.push(plan_one(ctx, delete).map_err(|refusal| refusal.at(index))?);
        }
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::action::{Method, plan};
    use crate::cache::MemoryCache;
    use crate::declaration::tests::sample;
    use crate::declaration::{Declaration, Verb};
    use crate::grants::{Grants, OperatorGrants};

    /// myapp's Deployments as a set.
    fn declaration(prune: bool) -> Declaration {
        let mut declaration = sample();
        declaration.secondaries[0].prune = prune;
        declaration.secondaries[0]
            .verbs
            .extend([Verb::List, Verb::Delete]);
        declaration.validate().expect("valid")
    }

    /// A Deployment `name` controlled by `owner` (a uid), applied by
    /// `manager`, in `default`.
    fn child(name: &str, owner: &str, manager: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                "resourceVersion": "5",
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "MyApp", "name": "demo",
                    "uid": owner, "controller": true}],
                "managedFields": [{"manager": manager, "operation": "Apply"}]}})
    }

    /// The deletes a reconcile applying `applied` (Deployment names) gets.
    fn pruned(declaration: &Declaration, cached: Vec<Value>, applied: &[&str]) -> Vec<String> {
        let grants = Grants::new(declaration, &OperatorGrants::unrestricted()).expect("granted");
        let primary = json!({"apiVersion": "example.com/v1", "kind": "MyApp",
            "metadata": {"name": "demo", "namespace": "default", "uid": "u-1"}});
        let key = ObjectKey::namespaced("default", "demo");
        let cache = MemoryCache::from_objects(cached).expect("valid fixture");
        let ctx = PlanContext {
            declaration,
            grants: &grants,
            key: &key,
            primary: Some(&primary),
            cache: &cache,
            now: jiff::Timestamp::UNIX_EPOCH,
        };
        let desired = applied
            .iter()
            .map(|name| Desired::Apply {
                object: json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name}})
                .to_string(),
                owned: true,
                force: true,
            })
            .collect();
        let planned = plan(ctx, desired).expect("granted");
        stale_children(ctx, &planned)
            .expect("granted")
            .iter()
            .map(|delete| {
                let request = delete.request();
                assert_eq!(request.method, Method::Delete);
                format!("{} {}", request.path, request.body["preconditions"])
            })
            .collect()
    }

    #[test]
    fn a_set_should_lose_the_children_the_outcome_no_longer_applies_and_only_those() {
        let cached = vec![
            child("kept", "u-1", "kubewasm-myapp"),
            child("dropped", "u-1", "kubewasm-myapp"),
            // Another plugin's child of the same primary, another primary's
            // child, a child someone else applied: not this plugin's.
            child("other-plugin", "u-1", "kubewasm-other"),
            child("other-primary", "u-2", "kubewasm-myapp"),
            child("by-hand", "u-1", "kubectl"),
        ];
        assert_eq!(
            pruned(&declaration(true), cached.clone(), &["kept"]),
            [
                r#"/apis/apps/v1/namespaces/default/deployments/dropped {"uid":"uid-dropped","resourceVersion":"5"}"#
            ]
        );
        // The default: never pruned.
        assert!(pruned(&declaration(false), cached, &["kept"]).is_empty());
    }

    #[test]
    fn a_child_being_deleted_already_should_not_be_deleted_again() {
        let mut going = child("going", "u-1", "kubewasm-myapp");
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(pruned(&declaration(true), vec![going], &[]).is_empty());
    }

    #[test]
    fn a_set_needs_delete_and_another_type_than_the_primary() {
        let mut no_delete = sample();
        no_delete.secondaries[0].prune = true;
        assert!(matches!(
            no_delete.validate(),
            Err(crate::declaration::DeclarationError::Prune(_))
        ));
        let mut primary = declaration(true);
        primary.secondaries[0].resource = primary.primary.clone();
        assert!(matches!(
            primary.validate(),
            Err(crate::declaration::DeclarationError::Prune(_))
        ));
    }
}
