//! A reconcile's outcome as a plugin returns it: objects to apply (JSON
//! text the plugin wrote), statuses, deletes and events, planned against a
//! declaration and its grants. Planned or refused; what is planned stays
//! within the declaration and becomes a request without panicking.
//!
//! The input is a JSON array of actions, so that seeds read as outcomes
//! and mutations stay near them: `{"apply": OBJECT, "owned": B, "force":
//! B}` (an OBJECT that is a string is sent as the plugin's text, any
//! bytes), `{"status": OBJECT}`, `{"delete": [TYPE, NAMESPACE, NAME], "uid":
//! S, "resourceVersion": S}`, `{"event": {"regarding": [TYPE, NAMESPACE,
//! NAME], "type": "Warning", "reason": S, "action": S, "note": S}}`, where
//! TYPE indexes the declared types (one more: a type not declared). A
//! leading `{"scheduled": true}` plans it as a scheduled call's.
#![no_main]

use kubewasm_runtime::action::{
    self, Desired, DesiredEvent, EventType, PlanContext, Preconditions,
};
use kubewasm_runtime::cache::MemoryCache;
use kubewasm_runtime::declaration::Declaration;
use kubewasm_runtime::grants::{Grants, OperatorGrants};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// An object as the plugin's text: a string as it is, else its JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn target(value: &Value, types: &[ResourceType]) -> Option<(ResourceType, ObjectKey)> {
    let index = usize::try_from(value.get(0)?.as_u64()?).ok()?;
    let resource = types.get(index % types.len())?.clone();
    let name = value.get(2)?.as_str()?;
    let key = match value.get(1).and_then(Value::as_str) {
        Some(namespace) => ObjectKey::namespaced(namespace, name),
        None => ObjectKey::cluster(name),
    };
    Some((resource, key))
}

fn desired(entry: &Value, types: &[ResourceType]) -> Option<Desired> {
    let flag = |name: &str| entry.get(name).and_then(Value::as_bool).unwrap_or(false);
    let string = |name: &str| entry.get(name).and_then(Value::as_str).map(str::to_owned);
    if let Some(object) = entry.get("apply") {
        return Some(Desired::Apply {
            object: text(object),
            owned: flag("owned"),
            force: flag("force"),
        });
    }
    if let Some(object) = entry.get("status") {
        return Some(Desired::ApplyStatus(text(object)));
    }
    if let Some(what) = entry.get("delete") {
        let (resource, key) = target(what, types)?;
        return Some(Desired::Delete(
            resource,
            key,
            Preconditions {
                uid: string("uid"),
                resource_version: string("resourceVersion"),
            },
        ));
    }
    let event = entry.get("event")?;
    let field = |name: &str| {
        event
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(Desired::Event(DesiredEvent {
        regarding: event.get("regarding").and_then(|r| target(r, types)),
        event_type: if field("type") == "Warning" {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: field("reason"),
        action: field("action"),
        note: field("note"),
    }))
}

fuzz_target!(|input: &[u8]| {
    let Ok(Value::Array(entries)) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    let declaration: Declaration = serde_json::from_str(include_str!("../declaration.json"))
        .expect("the sample declaration parses");
    let declaration = declaration
        .validate()
        .expect("the sample declaration is valid");
    let grants = Grants::new(&declaration, &OperatorGrants::unrestricted()).expect("granted");
    let declared: Vec<ResourceType> = declaration.resource_types().cloned().collect();
    let mut types = declared.clone();
    types.push(ResourceType {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        plural: "secrets".into(),
        namespaced: true,
    });
    let primary = json!({"apiVersion": "example.com/v1", "kind": "MyApp",
        "metadata": {"name": "demo", "namespace": "default", "uid": "u-1"}});
    let cache = MemoryCache::from_objects([primary.clone()]).expect("a valid object");
    let scheduled = entries
        .first()
        .and_then(|e| e.get("scheduled"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let outcome: Vec<Desired> = entries
        .iter()
        .take(16)
        .filter_map(|e| desired(e, &types))
        .collect();
    let key = ObjectKey::namespaced("default", "demo");
    let ctx = PlanContext {
        declaration: &declaration,
        grants: &grants,
        key: &key,
        primary: Some(&primary),
        cache: &cache,
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let planned = if scheduled {
        action::plan_scheduled(ctx, outcome)
    } else {
        action::plan(ctx, outcome)
    };
    for action in planned.into_iter().flatten() {
        if let Some((resource, _, _)) = action.object() {
            assert!(
                declared.iter().any(|t| t.same_kind(resource)),
                "an undeclared type planned: {resource:?}"
            );
        }
        let _ = action.request();
    }
});
