//! Planning: a plugin's desired actions checked against its declaration
//! and grants, and completed into the actions the host sends.

use serde_json::{Map, Value, json};

use super::desired::{Desired, DesiredEvent};
use super::event::{self, EventBody};
use super::planned::{Action, Planned};
use crate::cache::Cache;
use crate::declaration::{Declaration, Verb};
use crate::grants::Grants;
use kubewasm_core::resource::{ObjectKey, ResourceType};
use kubewasm_core::rules::{self, ActionError, Refusal, invalid};

/// What planning needs to know about the reconcile in progress.
#[derive(Clone, Copy)]
pub struct PlanContext<'a> {
    /// The plugin's declaration.
    pub declaration: &'a Declaration,
    /// The plugin's grants.
    pub grants: &'a Grants,
    /// The primary's key.
    pub key: &'a ObjectKey,
    /// The primary object as cached, if it exists.
    pub primary: Option<&'a Value>,
    /// The cache the plugin read (deletes take their uid precondition from
    /// it).
    pub cache: &'a dyn Cache,
    /// The time of the reconcile (events carry it).
    pub now: jiff::Timestamp,
}

/// Metadata fields the server owns; stripped from apply bodies.
const SERVER_OWNED_METADATA: [&str; 6] = [
    "resourceVersion",
    "uid",
    "managedFields",
    "creationTimestamp",
    "generation",
    "selfLink",
];

/// Checks and completes a plugin's desired actions.
///
/// # Errors
/// The first [`ActionError`]; nothing is planned then.
pub fn plan(ctx: PlanContext<'_>, desired: Vec<Desired>) -> Result<Vec<Action>, ActionError> {
    desired
        .into_iter()
        .enumerate()
        .map(|(i, d)| plan_one(ctx, d).map_err(|refusal| refusal.at(i + 1)))
        .collect()
}

/// Checks and completes the desired actions of a `scheduled` call, which
/// has no primary: an owned apply, or an event about the primary, is
/// refused before the rest of the rules (`ctx.key` is no object's then).
///
/// # Errors
/// The first [`ActionError`]; nothing is planned then.
pub fn plan_scheduled(
    ctx: PlanContext<'_>,
    desired: Vec<Desired>,
) -> Result<Vec<Action>, ActionError> {
    let without_primary = desired.iter().position(|d| {
        matches!(
            d,
            Desired::Apply { owned: true, .. }
                | Desired::Event(DesiredEvent {
                    regarding: None,
                    ..
                })
        )
    });
    if let Some(i) = without_primary {
        return Err(invalid(
            "a scheduled call has no primary: apply unowned, and say what an event is about (`regarding`)",
        )
        .at(i + 1));
    }
    plan(ctx, desired)
}

pub(super) fn plan_one(ctx: PlanContext<'_>, desired: Desired) -> Result<Action, Refusal> {
    let field_manager = ctx.declaration.field_manager();
    match desired {
        Desired::Apply {
            object,
            owned,
            force,
        } => {
            let (resource, key, mut object) = parse_object(ctx, &object, Verb::Apply)?;
            let metadata = metadata_mut(&mut object)?;
            for field in SERVER_OWNED_METADATA {
                metadata.remove(field);
            }
            if owned {
                set_controller(ctx, &resource, &key, metadata)?;
            }
            Ok(Action(Planned::Apply {
                resource,
                key,
                field_manager,
                object,
                force,
            }))
        }
        Desired::ApplyStatus(object) => {
            let (resource, key, object) = parse_object(ctx, &object, Verb::ApplyStatus)?;
            let status = object
                .get("status")
                .cloned()
                .ok_or_else(|| invalid("a status apply needs a `status`"))?;
            let mut metadata = Map::new();
            metadata.insert("name".into(), key.name.clone().into());
            if let Some(namespace) = &key.namespace {
                metadata.insert("namespace".into(), namespace.clone().into());
            }
            let mut object = json!({
                "apiVersion": resource.api_version(),
                "kind": resource.kind,
                "metadata": metadata,
            });
            // An empty status owns nothing: it is sent without `status`,
            // which removes the manager's status fields. Sent as `{}`, a
            // real server removes them and stores the emptied map as null,
            // which a custom resource's `type: object` status refuses (422;
            // kubernetes/kubernetes#104694).
            if status.as_object().is_none_or(|fields| !fields.is_empty()) {
                object["status"] = status;
            }
            Ok(Action(Planned::ApplyStatus {
                resource,
                key,
                field_manager,
                object,
            }))
        }
        Desired::Delete(resource, key, preconditions) => {
            let resource = rules::check(ctx.grants, Verb::Delete, &resource)?.clone();
            rules::check_target(ctx.grants, Verb::Delete, &resource, &key)?;
            let uid = preconditions.uid.or_else(|| {
                ctx.cache
                    .get(&resource, &key)
                    .and_then(|o| o.uid().map(str::to_owned))
            });
            Ok(Action(Planned::Delete {
                resource,
                key,
                uid,
                resource_version: preconditions.resource_version,
            }))
        }
        Desired::Event(event) => plan_event(ctx, event),
    }
}

/// Parses an object, resolves its declared type, fills in its namespace
/// (the primary's, for a namespaced object naming none), checks it by the
/// write rules (`kubewasm_core::rules`).
fn parse_object(
    ctx: PlanContext<'_>,
    text: &str,
    verb: Verb,
) -> Result<(ResourceType, ObjectKey, Value), Refusal> {
    let mut object: Value = serde_json::from_str(text)
        .map_err(|e| invalid(format!("object is not valid JSON: {e}")))?;
    let (resource, key) =
        rules::object_target(ctx.grants, verb, &object, ctx.key.namespace.as_deref())?;
    if let Some(namespace) = key.namespace.as_ref().filter(|_| resource.namespaced) {
        metadata_mut(&mut object)?.insert("namespace".into(), namespace.clone().into());
    }
    Ok((resource, key, object))
}

fn metadata_mut(object: &mut Value) -> Result<&mut Map<String, Value>, Refusal> {
    object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| invalid("`metadata` is not an object"))
}

/// Makes the primary the controller owner of a child.
fn set_controller(
    ctx: PlanContext<'_>,
    child_type: &ResourceType,
    child: &ObjectKey,
    metadata: &mut Map<String, Value>,
) -> Result<(), Refusal> {
    let owner_type = &ctx.declaration.primary;
    let uid = rules::owner_uid(owner_type, ctx.key, ctx.primary, child_type, child)?;
    let owner_ref = json!({
        "apiVersion": owner_type.api_version(),
        "kind": owner_type.kind,
        "name": ctx.key.name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    });
    let refs = metadata
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| invalid("`metadata.ownerReferences` is not a list"))?;
    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
    if let Some(other) = refs
        .iter()
        .find(|r| r.get("controller") == Some(&Value::Bool(true)))
    {
        return Err(invalid(format!(
            "{child_type} `{child}` already has a controller: {}",
            other.get("name").and_then(Value::as_str).unwrap_or("?")
        )));
    }
    refs.push(owner_ref);
    Ok(())
}

fn plan_event(ctx: PlanContext<'_>, event: DesiredEvent) -> Result<Action, Refusal> {
    let (resource, key) = match event.regarding {
        Some((resource, key)) => {
            let resource = rules::check(ctx.grants, Verb::Get, &resource)?.clone();
            (resource, key)
        }
        None => (ctx.declaration.primary.clone(), ctx.key.clone()),
    };
    // Recording an event is a write in the namespace it lands in.
    rules::check_target(ctx.grants, Verb::Apply, &resource, &key)?;
    let namespace = event::namespace_for(&resource, &key);
    ctx.grants
        .check_namespace(Verb::Apply, &event::event_type(), namespace)?;
    if event.reason.is_empty()
        || event.reason.len() > 128
        || event.action.is_empty()
        || event.action.len() > 128
    {
        return Err(invalid(
            "an event needs a reason and an action of 1 to 128 characters",
        ));
    }
    let is_primary = resource == ctx.declaration.primary && &key == ctx.key;
    let uid = ctx
        .primary
        .filter(|_| is_primary)
        .and_then(|p| p.pointer("/metadata/uid"));
    let object = EventBody {
        regarding: event::regarding(&resource, &key, uid),
        namespace,
        controller: &format!("kubewasm.dev/{}", ctx.declaration.name),
        event_type: event.event_type,
        reason: &event.reason,
        action: &event.action,
        note: event.note,
    }
    .object(ctx.now);
    Ok(Action(Planned::Event { object }))
}

#[cfg(test)]
mod tests {
    use super::super::desired::{EventType, Preconditions};
    use super::super::request::{Method, resource_path};
    use super::*;
    use crate::declaration::tests::{sample, ty};
    use crate::grants::OperatorGrants;

    struct Fixture {
        declaration: Declaration,
        grants: Grants,
        key: ObjectKey,
        primary: Value,
        cache: crate::cache::MemoryCache,
    }

    impl Fixture {
        fn new() -> Self {
            let declaration = sample().validate().expect("valid");
            let grants =
                Grants::new(&declaration, &OperatorGrants::unrestricted()).expect("granted");
            Self {
                declaration,
                grants,
                key: ObjectKey::namespaced("default", "demo"),
                primary: json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                    "metadata": {"name": "demo", "namespace": "default", "uid": "u-1"}}),
                cache: crate::cache::MemoryCache::from_objects([json!({"apiVersion": "v1",
                    "kind": "ConfigMap", "metadata": {"name": "cached", "namespace": "default",
                    "uid": "u-cm"}})])
                .expect("valid fixture"),
            }
        }

        fn plan(&self, desired: Vec<Desired>) -> Result<Vec<Action>, ActionError> {
            plan(
                PlanContext {
                    declaration: &self.declaration,
                    grants: &self.grants,
                    key: &self.key,
                    primary: Some(&self.primary),
                    cache: &self.cache,
                    now: jiff::Timestamp::UNIX_EPOCH,
                },
                desired,
            )
        }
    }

    fn deployment(extra_metadata: Value) -> String {
        let mut metadata = json!({"name": "demo", "resourceVersion": "7", "managedFields": []});
        if let (Some(m), Some(extra)) = (metadata.as_object_mut(), extra_metadata.as_object()) {
            m.extend(extra.clone());
        }
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": {"replicas": 2}})
            .to_string()
    }

    #[test]
    fn plan_should_complete_an_owned_apply() {
        let fx = Fixture::new();
        let actions = fx
            .plan(vec![Desired::Apply {
                object: deployment(json!({})),
                owned: true,
                force: true,
            }])
            .expect("granted");
        let request = actions[0].request();
        assert_eq!(request.method, Method::Patch);
        assert_eq!(
            request.path,
            "/apis/apps/v1/namespaces/default/deployments/demo?fieldManager=kubewasm-myapp&force=true"
        );
        let meta = &request.body["metadata"];
        assert_eq!(meta["namespace"], "default");
        assert!(meta.get("resourceVersion").is_none() && meta.get("managedFields").is_none());
        assert_eq!(
            meta["ownerReferences"],
            json!([{"apiVersion": "example.com/v1", "kind": "MyApp", "name": "demo", "uid": "u-1",
                    "controller": true, "blockOwnerDeletion": true}])
        );
    }

    #[test]
    fn plan_should_deny_undeclared_types_and_verbs() {
        let fx = Fixture::new();
        let secret =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}).to_string();
        let err = fx
            .plan(vec![
                Desired::Apply {
                    object: deployment(json!({})),
                    owned: false,
                    force: true,
                },
                Desired::Apply {
                    object: secret,
                    owned: false,
                    force: true,
                },
            ])
            .expect_err("secret undeclared");
        assert!(matches!(err, ActionError::Denied { index: 2, .. }), "{err}");
        assert!(err.to_string().contains("may not apply v1 Secret"), "{err}");

        let err = fx
            .plan(vec![Desired::Delete(
                fx.declaration.secondaries[0].resource.clone(),
                fx.key.clone(),
                Preconditions::default(),
            )])
            .expect_err("delete undeclared");
        assert!(
            err.to_string()
                .contains("may not delete apps/v1 Deployment"),
            "{err}"
        );
    }

    #[test]
    fn plan_should_refuse_cross_namespace_owners_and_foreign_controllers() {
        let fx = Fixture::new();
        let elsewhere = deployment(json!({"namespace": "other"}));
        let err = fx
            .plan(vec![Desired::Apply {
                object: elsewhere,
                owned: true,
                force: true,
            }])
            .expect_err("cross ns");
        assert!(err.to_string().contains("cannot cross namespaces"), "{err}");

        let foreign = deployment(
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u-2", "controller": true}]}),
        );
        let err = fx
            .plan(vec![Desired::Apply {
                object: foreign,
                owned: true,
                force: true,
            }])
            .expect_err("foreign");
        assert!(
            err.to_string().contains("already has a controller: x"),
            "{err}"
        );
    }

    #[test]
    fn plan_should_reduce_status_to_identity_and_status() {
        let fx = Fixture::new();
        let obj = json!({"apiVersion": "example.com/v1", "kind": "MyApp", "metadata": {"name": "demo", "labels": {"a": "b"}},
                          "spec": {"replicas": 3}, "status": {"availableReplicas": 2}});
        let actions = fx
            .plan(vec![Desired::ApplyStatus(obj.to_string())])
            .expect("granted");
        let request = actions[0].request();
        assert!(
            request
                .path
                .starts_with("/apis/example.com/v1/namespaces/default/myapps/demo/status?")
        );
        assert_eq!(
            request.body,
            json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                   "metadata": {"name": "demo", "namespace": "default"}, "status": {"availableReplicas": 2}})
        );
    }

    /// An empty status is applied as no status (what it owns: nothing),
    /// never as `{}`, which a real server turns into null and refuses.
    #[test]
    fn an_empty_status_should_be_applied_as_none() {
        let fx = Fixture::new();
        let obj = json!({"apiVersion": "example.com/v1", "kind": "MyApp", "metadata": {"name": "demo"},
                          "status": {}});
        let actions = fx
            .plan(vec![Desired::ApplyStatus(obj.to_string())])
            .expect("granted");
        assert_eq!(
            actions[0].request().body,
            json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                   "metadata": {"name": "demo", "namespace": "default"}})
        );
    }

    #[test]
    fn plan_should_build_events_about_the_primary() {
        let fx = Fixture::new();
        let event = DesiredEvent {
            regarding: None,
            event_type: EventType::Warning,
            reason: "Failed".into(),
            action: "Apply".into(),
            note: "x".repeat(2000),
        };
        let actions = fx
            .plan(vec![Desired::Event(event.clone())])
            .expect("granted");
        let request = actions[0].request();
        assert_eq!(
            request.path,
            "/apis/events.k8s.io/v1/namespaces/default/events"
        );
        assert_eq!(request.body["regarding"]["uid"], "u-1");
        assert_eq!(request.body["type"], "Warning");
        assert_eq!(request.body["note"].as_str().map(str::len), Some(1024));

        let bad = DesiredEvent {
            reason: String::new(),
            ..event
        };
        assert!(fx.plan(vec![Desired::Event(bad)]).is_err());
    }

    #[test]
    fn a_scheduled_call_should_own_nothing_and_say_what_its_events_are_about() {
        let fx = Fixture::new();
        let nobody = ObjectKey::cluster("");
        let plan = |desired: Desired| {
            plan_scheduled(
                PlanContext {
                    declaration: &fx.declaration,
                    grants: &fx.grants,
                    key: &nobody,
                    primary: None,
                    cache: &fx.cache,
                    now: jiff::Timestamp::UNIX_EPOCH,
                },
                vec![desired],
            )
        };
        let event = DesiredEvent {
            regarding: None,
            event_type: EventType::Normal,
            reason: "Reported".into(),
            action: "Report".into(),
            note: "done".into(),
        };
        for refused in [
            Desired::Apply {
                object: deployment(json!({"namespace": "default"})),
                owned: true,
                force: true,
            },
            Desired::Event(event.clone()),
        ] {
            let error = plan(refused).expect_err("no primary");
            assert!(error.to_string().contains("no primary"), "{error}");
        }
        // Unowned, its namespace named: planned as any apply.
        let unowned = plan(Desired::Apply {
            object: deployment(json!({"namespace": "default"})),
            owned: false,
            force: true,
        })
        .expect("granted");
        assert!(
            unowned[0].request().body["metadata"]
                .get("ownerReferences")
                .is_none()
        );
        // A namespaced object naming none has no primary's to fall back on.
        let error = plan(Desired::Apply {
            object: deployment(json!({})),
            owned: false,
            force: true,
        })
        .expect_err("no namespace");
        assert!(error.to_string().contains("needs a namespace"), "{error}");
        // An event saying what it is about is planned.
        let about = DesiredEvent {
            regarding: Some((
                fx.declaration.primary.clone(),
                ObjectKey::namespaced("default", "demo"),
            )),
            ..event
        };
        assert!(plan(Desired::Event(about)).is_ok());
    }

    #[test]
    fn resource_path_should_follow_api_conventions() {
        let ns = ty("v1", "Namespace", "namespaces", false);
        assert_eq!(
            resource_path(&ns, Some("ignored"), Some("a")),
            "/api/v1/namespaces/a"
        );
        let deploy = ty("apps/v1", "Deployment", "deployments", true);
        assert_eq!(
            resource_path(&deploy, Some("x"), None),
            "/apis/apps/v1/namespaces/x/deployments"
        );
    }

    #[test]
    fn plan_should_refuse_names_namespaces_and_labels_kubernetes_refuses() {
        let fx = Fixture::new();
        for (namespace, name) in [
            ("default", "a/b"),
            ("default", ".."),
            ("default", ""),
            ("x?y", "a"),
            ("default", "a?watch=1"),
        ] {
            let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": namespace}});
            let err = fx
                .plan(vec![Desired::Apply {
                    object: object.to_string(),
                    owned: false,
                    force: true,
                }])
                .expect_err("invalid key");
            assert!(matches!(err, ActionError::Invalid { .. }), "{err}");
        }
        let labelled = deployment(json!({"labels": {"bad key!": "v"}}));
        let err = fx
            .plan(vec![Desired::Apply {
                object: labelled,
                owned: false,
                force: true,
            }])
            .expect_err("bad label");
        assert!(
            err.to_string().contains("invalid label key `bad key!`"),
            "{err}"
        );
    }

    #[test]
    fn plan_should_keep_writes_out_of_system_and_ungranted_namespaces() {
        let fx = Fixture::new();
        let elsewhere = deployment(json!({"namespace": "kube-system"}));
        let err = fx
            .plan(vec![Desired::Apply {
                object: elsewhere,
                owned: false,
                force: true,
            }])
            .expect_err("system namespace");
        assert!(
            err.to_string()
                .contains("namespace `kube-system` is a system namespace"),
            "{err}"
        );

        let operator = OperatorGrants::parse("namespaces: [default]").expect("valid");
        let grants = Grants::new(&fx.declaration, &operator).expect("granted");
        let ctx = PlanContext {
            declaration: &fx.declaration,
            grants: &grants,
            key: &fx.key,
            primary: Some(&fx.primary),
            cache: &fx.cache,
            now: jiff::Timestamp::UNIX_EPOCH,
        };
        let err = plan(
            ctx,
            vec![Desired::Apply {
                object: deployment(json!({"namespace": "team-b"})),
                owned: false,
                force: true,
            }],
        )
        .expect_err("other tenant");
        assert!(
            err.to_string()
                .contains("namespace `team-b` is not granted"),
            "{err}"
        );
        assert!(
            plan(
                ctx,
                vec![Desired::Apply {
                    object: deployment(json!({})),
                    owned: true,
                    force: true,
                }]
            )
            .is_ok()
        );
    }

    #[test]
    fn an_event_about_a_namespace_should_land_in_it_and_others_in_default() {
        let mut declaration = sample();
        declaration.primary = ty("v1", "Namespace", "namespaces", false);
        declaration.secondaries.clear();
        let declaration = declaration.validate().expect("valid");
        let operator = OperatorGrants::parse("namespaces: [team-a]").expect("valid");
        let grants = Grants::new(&declaration, &operator).expect("granted");
        let key = ObjectKey::cluster("team-a");
        let primary = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "uid": "u-ns"}});
        let cache = crate::cache::MemoryCache::default();
        let ctx = PlanContext {
            declaration: &declaration,
            grants: &grants,
            key: &key,
            primary: Some(&primary),
            cache: &cache,
            now: jiff::Timestamp::UNIX_EPOCH,
        };
        let event = DesiredEvent {
            regarding: None,
            event_type: EventType::Normal,
            reason: "Bootstrapped".into(),
            action: "Apply".into(),
            note: String::new(),
        };
        // A plugin confined to `team-a` tells of the Namespace `team-a` in it
        // (it may write nowhere else; Kubernetes would use `default`).
        let planned = plan(ctx, vec![Desired::Event(event.clone())]).expect("allowed");
        let request = planned[0].request();
        assert_eq!(
            request.path,
            "/apis/events.k8s.io/v1/namespaces/team-a/events"
        );
        assert_eq!(request.body["regarding"]["uid"], "u-ns");
        // Another Namespace is not its to tell of: refused as an Event.
        let other = ObjectKey::cluster("team-b");
        let err = plan(
            PlanContext {
                key: &other,
                primary: None,
                ..ctx
            },
            vec![Desired::Event(event)],
        )
        .expect_err("not granted");
        assert!(
            err.to_string()
                .contains("namespace `team-b` is not granted"),
            "{err}"
        );
        // A cluster-scoped object other than a Namespace: `default`.
        let node = ty("v1", "Node", "nodes", false);
        assert_eq!(
            event::namespace_for(&node, &ObjectKey::cluster("n1")),
            "default"
        );
    }

    #[test]
    fn resource_path_should_encode_what_is_not_a_path_character() {
        let roles = ty(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
            false,
        );
        assert_eq!(
            resource_path(&roles, None, Some("system:a?b#c")),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:a%3Fb%23c"
        );
    }

    #[test]
    fn finalizer_patches_should_test_the_uid_and_keep_other_finalizers() {
        let fx = Fixture::new();
        let resource = &fx.declaration.primary;
        let f = "kubewasm.dev/myapp";
        let add = Action::add_finalizer(resource, &fx.key, &fx.primary, f).expect("absent");
        let request = add.request();
        assert_eq!(
            (request.action, request.method, request.content_type),
            ("addFinalizer", Method::Patch, "application/json-patch+json")
        );
        assert_eq!(
            request.path,
            "/apis/example.com/v1/namespaces/default/myapps/demo"
        );
        assert_eq!(
            request.body,
            json!([{"op": "test", "path": "/metadata/uid", "value": "u-1"},
                   {"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": [f]}])
        );

        let mut held = fx.primary.clone();
        held["metadata"]["finalizers"] = json!(["other.io/keep"]);
        let add = Action::add_finalizer(resource, &fx.key, &held, f).expect("absent");
        assert_eq!(
            add.request().body[1],
            json!({"op": "add", "path": "/metadata/finalizers/-", "value": f}),
            "appends, leaving others in place"
        );
        assert_eq!(Action::remove_finalizer(resource, &fx.key, &held, f), None);

        held["metadata"]["finalizers"] = json!(["other.io/keep", f]);
        assert_eq!(Action::add_finalizer(resource, &fx.key, &held, f), None);
        let remove = Action::remove_finalizer(resource, &fx.key, &held, f).expect("present");
        assert_eq!(
            remove.request().body,
            json!([{"op": "test", "path": "/metadata/uid", "value": "u-1"},
                   {"op": "test", "path": "/metadata/finalizers/1", "value": f},
                   {"op": "remove", "path": "/metadata/finalizers/1"}])
        );
    }

    #[test]
    fn a_delete_should_be_preconditioned_on_the_uid_the_plugin_saw() {
        let mut fx = Fixture::new();
        let mut declaration = sample();
        declaration.secondaries[0].verbs.insert(Verb::Delete);
        fx.declaration = declaration.validate().expect("valid");
        fx.grants = Grants::new(&fx.declaration, &OperatorGrants::unrestricted()).expect("granted");
        fx.cache = crate::cache::MemoryCache::from_objects([json!({"apiVersion": "apps/v1",
            "kind": "Deployment", "metadata": {"name": "demo", "namespace": "default", "uid": "u-d"}})])
        .expect("valid fixture");
        let deployments = fx.declaration.secondaries[0].resource.clone();
        let actions = fx
            .plan(vec![
                Desired::Delete(
                    deployments.clone(),
                    fx.key.clone(),
                    Preconditions::default(),
                ),
                Desired::Delete(
                    deployments,
                    ObjectKey::namespaced("default", "unseen"),
                    Preconditions::default(),
                ),
            ])
            .expect("granted");
        assert_eq!(
            actions[0].request().body["preconditions"],
            json!({"uid": "u-d"})
        );
        assert!(
            actions[1].request().body.get("preconditions").is_none(),
            "an object the plugin never saw is deleted by name"
        );

        // Contract 0.2.0: the plugin's own preconditions win over the
        // cached uid, and a resourceVersion joins them.
        let deployments = fx.declaration.secondaries[0].resource.clone();
        let actions = fx
            .plan(vec![Desired::Delete(
                deployments,
                fx.key.clone(),
                Preconditions {
                    uid: Some("u-named".into()),
                    resource_version: Some("7".into()),
                },
            )])
            .expect("granted");
        assert_eq!(
            actions[0].request().body["preconditions"],
            json!({"uid": "u-named", "resourceVersion": "7"})
        );
    }

    #[test]
    fn an_unforced_apply_should_not_ask_to_force() {
        let fx = Fixture::new();
        let actions = fx
            .plan(vec![Desired::Apply {
                object: deployment(json!({})),
                owned: false,
                force: false,
            }])
            .expect("granted");
        assert_eq!(
            actions[0].request().path,
            "/apis/apps/v1/namespaces/default/deployments/demo?fieldManager=kubewasm-myapp"
        );
    }
}
