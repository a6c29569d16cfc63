//! A planned action: checked, complete, ready to send. Only planning and
//! the host's own constructors here (finalizer patches, the refused
//! outcome's event) make one.

use serde_json::{Value, json};

use super::desired::EventType;
use super::event::{self, EventBody};
use crate::declaration::Declaration;
use kubewasm_core::resource::{ObjectKey, ResourceType};
use kubewasm_core::rules::ActionError;

/// A checked action, ready to send. Only [`plan`] and the finalizer
/// constructors make one (its variants are private), so the applier,
/// which takes nothing else, sends nothing that did not pass the rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Action(pub(super) Planned);

/// What a planned action does.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Planned {
    /// Server-side apply of `object`.
    Apply {
        /// Its type.
        resource: ResourceType,
        /// Its identity.
        key: ObjectKey,
        /// The field manager.
        field_manager: String,
        /// The complete apply body.
        object: Value,
        /// Whether fields other managers own are taken over (`force=true`).
        force: bool,
    },
    /// Server-side apply of the status subresource.
    ApplyStatus {
        /// Its type.
        resource: ResourceType,
        /// Its identity.
        key: ObjectKey,
        /// The field manager.
        field_manager: String,
        /// The apply body: identity and `status` only.
        object: Value,
    },
    /// Deletion with background propagation, preconditioned on the uid of
    /// the object the plugin saw (so a recreated object of the same name is
    /// never deleted by mistake) or the one it named, and on the
    /// resourceVersion it named.
    Delete {
        /// Its type.
        resource: ResourceType,
        /// Its identity.
        key: ObjectKey,
        /// The uid the plugin named, else the one it had in the cache.
        uid: Option<String>,
        /// The resourceVersion the plugin named.
        resource_version: Option<String>,
    },
    /// Creation of an `events.k8s.io/v1` Event.
    Event {
        /// The Event object.
        object: Value,
    },
    /// The host adds or removes its managed finalizer on the primary: a
    /// JSON patch that tests the primary's uid (and, to remove, the entry
    /// it takes out), so it never touches another object of the same name
    /// or another controller's finalizer.
    Finalizer {
        /// Added (`true`) or removed.
        add: bool,
        /// The primary's type.
        resource: ResourceType,
        /// The primary's identity.
        key: ObjectKey,
        /// The JSON patch.
        patch: Value,
    },
}

impl Action {
    /// Adds `finalizer` to `primary` (as cached), or `None` if it is there.
    pub fn add_finalizer(
        resource: &ResourceType,
        key: &ObjectKey,
        primary: &Value,
        finalizer: &str,
    ) -> Option<Self> {
        let finalizers = primary
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array);
        if finalizers.is_some_and(|f| f.iter().any(|v| v == finalizer)) {
            return None;
        }
        let uid = primary
            .pointer("/metadata/uid")
            .cloned()
            .unwrap_or(Value::Null);
        let add = match finalizers {
            // Appending leaves entries others add meanwhile in place.
            Some(_) => json!({"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}),
            // Absent tests equal to null (as the API server's JSON patch does).
            None => json!({"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}),
        };
        let mut patch = vec![json!({"op": "test", "path": "/metadata/uid", "value": uid})];
        if finalizers.is_none() {
            patch.push(json!({"op": "test", "path": "/metadata/finalizers", "value": null}));
        }
        patch.push(add);
        Some(Self(Planned::Finalizer {
            add: true,
            resource: resource.clone(),
            key: key.clone(),
            patch: Value::Array(patch),
        }))
    }

    /// Removes `finalizer` from `primary` (as cached), or `None` if it is
    /// not there.
    pub fn remove_finalizer(
        resource: &ResourceType,
        key: &ObjectKey,
        primary: &Value,
        finalizer: &str,
    ) -> Option<Self> {
        let index = primary
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)?
            .iter()
            .position(|v| v == finalizer)?;
        let uid = primary
            .pointer("/metadata/uid")
            .cloned()
            .unwrap_or(Value::Null);
        let path = format!("/metadata/finalizers/{index}");
        Some(Self(Planned::Finalizer {
            add: false,
            resource: resource.clone(),
            key: key.clone(),
            patch: json!([
                {"op": "test", "path": "/metadata/uid", "value": uid},
                {"op": "test", "path": path, "value": finalizer},
                {"op": "remove", "path": path},
            ]),
        }))
    }
}

impl Action {
    /// The host's Warning event (reason `OutcomeRefused`) on the primary
    /// `key` (as cached: `primary`) saying why the plugin's outcome was
    /// refused, naming the action and its object: made by the host, not
    /// the plugin, as the finalizer patches are, so a plugin that declares
    /// no events still has its refusals told.
    pub fn refused_outcome(
        declaration: &Declaration,
        key: &ObjectKey,
        primary: &Value,
        refused: &ActionError,
        now: jiff::Timestamp,
    ) -> Self {
        let object = EventBody {
            regarding: event::regarding(
                &declaration.primary,
                key,
                primary.pointer("/metadata/uid"),
            ),
            namespace: event::namespace_for(&declaration.primary, key),
            controller: &format!("kubewasm.dev/{}", declaration.name),
            event_type: EventType::Warning,
            reason: "OutcomeRefused",
            action: "Reconcile",
            note: format!("{refused}; nothing of this outcome was sent, retried with backoff"),
        }
        .object(now);
        Self(Planned::Event { object })
    }
}
