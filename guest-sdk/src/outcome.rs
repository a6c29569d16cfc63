//! What a reconcile returns: desired actions and an optional requeue.

use std::time::Duration;

use k8s_openapi::Resource;
use serde::Serialize;
use serde_json::Value;

use crate::error::Error;
use crate::types::{ObjectKey, ResourceType};

/// Severity of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// A Kubernetes event to record, about the primary unless
/// [`Event::regarding`] says otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The object it is about; `None` for the primary.
    pub regarding: Option<(ResourceType, ObjectKey)>,
    /// Normal or Warning.
    pub event_type: EventType,
    /// CamelCase reason, e.g. `Created`.
    pub reason: String,
    /// What was done, e.g. `Apply`.
    pub action: String,
    /// Human-readable note.
    pub note: String,
}

impl Event {
    /// A Normal event about the primary.
    pub fn normal(
        reason: impl Into<String>,
        action: impl Into<String>,
        note: impl Into<String>,
    ) -> Self {
        Self {
            regarding: None,
            event_type: EventType::Normal,
            reason: reason.into(),
            action: action.into(),
            note: note.into(),
        }
    }

    /// A Warning event about the primary.
    pub fn warning(
        reason: impl Into<String>,
        action: impl Into<String>,
        note: impl Into<String>,
    ) -> Self {
        Self {
            event_type: EventType::Warning,
            ..Self::normal(reason, action, note)
        }
    }

    /// About another object.
    #[must_use]
    pub fn regarding(mut self, resource: ResourceType, key: ObjectKey) -> Self {
        self.regarding = Some((resource, key));
        self
    }
}

/// A desired action.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Server-side apply of an object.
    Apply {
        /// The object.
        object: Value,
        /// Whether the primary becomes its controller owner.
        owned: bool,
        /// Whether fields another field manager owns are taken over.
        force: bool,
    },
    /// Server-side apply of an object's status.
    ApplyStatus(Value),
    /// Delete an object, if the preconditions hold.
    Delete(ResourceType, ObjectKey, Preconditions),
    /// Record an event.
    Event(Event),
}

/// What a delete requires of the object, checked by the API server: when
/// one no longer holds, the delete fails with a conflict and the key is
/// retried. By default the uid the plugin's cache held is required, so a
/// recreated object of the same name is never deleted by mistake.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object's `metadata.uid`.
    pub uid: Option<String>,
    /// The object's `metadata.resourceVersion`: only the version read.
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// The preconditions of the object as it was read: its uid and
    /// resourceVersion (those it has).
    pub fn of(object: &Value) -> Self {
        let field = |name: &str| {
            object
                .pointer(&format!("/metadata/{name}"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Self {
            uid: field("uid"),
            resource_version: field("resourceVersion"),
        }
    }
}

/// A successful reconcile. Build it with the chained methods; a value that
/// cannot be serialized turns the whole outcome into an error.
///
/// Children are never pruned implicitly: an object you stop returning stays.
/// Return [`Outcome::delete`] to remove it. Owned children are removed by
/// the garbage collector with their primary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub(crate) actions: Vec<Action>,
    pub(crate) requeue_after: Option<Duration>,
    pub(crate) finalizer: Option<bool>,
    pub(crate) error: Option<String>,
}

/// `value` as JSON with `apiVersion` and `kind` set from `K`.
fn to_object<K: Resource + Serialize>(value: &K) -> Result<Value, Error> {
    let mut object = serde_json::to_value(value)?;
    let map = object
        .as_object_mut()
        .ok_or_else(|| Error::msg(format!("{} did not serialize to an object", K::KIND)))?;
    map.entry("apiVersion")
        .or_insert_with(|| K::API_VERSION.into());
    map.entry("kind").or_insert_with(|| K::KIND.into());
    Ok(object)
}

impl Outcome {
    /// An outcome with no action.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(mut self, action: Result<Action, Error>) -> Self {
        match action {
            Ok(action) => self.actions.push(action),
            Err(error) => {
                self.error.get_or_insert(error.to_string());
            }
        }
        self
    }

    /// Applies `object`, owned by the primary (the usual child).
    #[must_use]
    pub fn apply<K: Resource + Serialize>(self, object: &K) -> Self {
        self.push(to_object(object).map(|object| Action::Apply {
            object,
            owned: true,
            force: true,
        }))
    }

    /// Applies `object` without making the primary its owner.
    #[must_use]
    pub fn apply_unowned<K: Resource + Serialize>(self, object: &K) -> Self {
        self.push(to_object(object).map(|object| Action::Apply {
            object,
            owned: false,
            force: true,
        }))
    }

    /// Applies the fields of `object` without owning it and without
    /// forcing: if another field manager (a person's `kubectl apply`, say)
    /// set one of them to another value, the apply fails with a conflict
    /// naming it and the key is retried, instead of overwriting it. For
    /// partial applies of objects people also edit.
    #[must_use]
    pub fn apply_unforced<K: Resource + Serialize>(self, object: &K) -> Self {
        self.push(to_object(object).map(|object| Action::Apply {
            object,
            owned: false,
            force: false,
        }))
    }

    /// Applies an untyped object (with `apiVersion`, `kind`, `metadata.name`),
    /// forcing.
    #[must_use]
    pub fn apply_json(self, object: Value, owned: bool) -> Self {
        self.push(Ok(Action::Apply {
            object,
            owned,
            force: true,
        }))
    }

    /// Applies an untyped object without owning it and without forcing
    /// (see [`Outcome::apply_unforced`]).
    #[must_use]
    pub fn apply_json_unforced(self, object: Value) -> Self {
        self.push(Ok(Action::Apply {
            object,
            owned: false,
            force: false,
        }))
    }

    /// Applies the status of `object` (its identity and `status` are sent).
    #[must_use]
    pub fn apply_status<K: Resource + Serialize>(self, object: &K) -> Self {
        self.push(to_object(object).map(Action::ApplyStatus))
    }

    /// Applies the status of an untyped object (`apiVersion`, `kind`,
    /// `metadata.name`, `status`).
    #[must_use]
    pub fn apply_status_json(self, object: Value) -> Self {
        self.push(Ok(Action::ApplyStatus(object)))
    }

    /// Deletes the object of type `K` with this key.
    #[must_use]
    pub fn delete<K: Resource>(self, key: ObjectKey) -> Self
    where
        K::Scope: 'static,
    {
        self.delete_of(ResourceType::of::<K>(), key, Preconditions::default())
    }

    /// Deletes the object of type `K` with this key only while
    /// `preconditions` hold (e.g. [`Preconditions::of`] the object read).
    #[must_use]
    pub fn delete_if<K: Resource>(self, key: ObjectKey, preconditions: Preconditions) -> Self
    where
        K::Scope: 'static,
    {
        self.delete_of(ResourceType::of::<K>(), key, preconditions)
    }

    /// Deletes an object of an untyped resource type.
    #[must_use]
    pub fn delete_of(
        self,
        resource: ResourceType,
        key: ObjectKey,
        preconditions: Preconditions,
    ) -> Self {
        self.push(Ok(Action::Delete(resource, key, preconditions)))
    }

    /// Records an event.
    #[must_use]
    pub fn event(self, event: Event) -> Self {
        self.push(Ok(Action::Event(event)))
    }

    /// Reconcile again after `after`, even with no change.
    #[must_use]
    pub fn requeue_after(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
        self
    }

    /// Says whether this primary needs the managed finalizer (see
    /// [`Declaration::managed_finalizer`](crate::Declaration::managed_finalizer)):
    /// `false` when there is nothing to clean up for it. By default every
    /// primary gets it.
    #[must_use]
    pub fn finalizer(mut self, needed: bool) -> Self {
        self.finalizer = Some(needed);
        self
    }

    /// The finalizer wish, if set.
    pub fn finalizer_wish(&self) -> Option<bool> {
        self.finalizer
    }

    /// The actions, in order.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// The requeue asked for.
    pub fn requeue(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// The objects applied, in order.
    pub fn applied(&self) -> impl Iterator<Item = &Value> {
        self.actions.iter().filter_map(|a| match a {
            Action::Apply { object, .. } => Some(object),
            _ => None,
        })
    }

    /// The statuses applied, in order.
    pub fn statuses(&self) -> impl Iterator<Item = &Value> {
        self.actions.iter().filter_map(|a| match a {
            Action::ApplyStatus(object) => Some(object),
            _ => None,
        })
    }

    /// The deletes asked for, in order: type and key.
    pub fn deleted(&self) -> impl Iterator<Item = (&ResourceType, &ObjectKey)> {
        self.actions.iter().filter_map(|a| match a {
            Action::Delete(resource, key, _) => Some((resource, key)),
            _ => None,
        })
    }

    /// The events recorded, in order.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.actions.iter().filter_map(|a| match a {
            Action::Event(event) => Some(event),
            _ => None,
        })
    }

    /// Turns a recorded serialization failure into an error.
    pub(crate) fn into_result(self) -> Result<Self, Error> {
        match self.error {
            Some(message) => Err(Error::msg(message)),
            None => Ok(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::{Action, Event, Outcome, Preconditions};
    use crate::types::{ObjectKey, ResourceType};

    #[test]
    fn unforced_applies_and_delete_preconditions_should_reach_the_actions() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let read = json!({"metadata": {"name": "old", "uid": "u-1", "resourceVersion": "7"}});
        let outcome = Outcome::new()
            .apply_unforced(&ConfigMap::default())
            .delete_if::<ConfigMap>(
                ObjectKey::namespaced("default", "old"),
                Preconditions::of(&read),
            );
        assert!(matches!(
            &outcome.actions()[0],
            Action::Apply {
                owned: false,
                force: false,
                ..
            }
        ));
        assert_eq!(
            outcome.actions()[1],
            Action::Delete(
                ResourceType::of::<ConfigMap>(),
                ObjectKey::namespaced("default", "old"),
                Preconditions {
                    uid: Some("u-1".into()),
                    resource_version: Some("7".into()),
                },
            )
        );
    }

    #[test]
    fn the_test_helpers_should_show_each_kind_of_action_in_order() {
        let config_maps = ResourceType {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespaced: true,
        };
        let outcome = Outcome::new()
            .apply_json(
                json!({"kind": "ConfigMap", "metadata": {"name": "a"}}),
                true,
            )
            .apply_status_json(json!({"kind": "ConfigMap", "status": {"ok": true}}))
            .delete_of(
                config_maps.clone(),
                ObjectKey::namespaced("default", "old"),
                Preconditions::default(),
            )
            .event(Event::normal("Seen", "Reconcile", "hello"))
            .requeue_after(Duration::from_secs(30));
        let applied: Vec<_> = outcome.applied().collect();
        assert_eq!(applied[0]["metadata"]["name"], "a");
        assert_eq!(
            outcome.statuses().next().map(|s| &s["status"]),
            Some(&json!({"ok": true}))
        );
        let deleted: Vec<_> = outcome.deleted().collect();
        assert_eq!(
            deleted,
            [(&config_maps, &ObjectKey::namespaced("default", "old"))]
        );
        assert_eq!(
            outcome
                .events()
                .map(|e| e.note.as_str())
                .collect::<Vec<_>>(),
            ["hello"]
        );
        assert_eq!(outcome.requeue(), Some(Duration::from_secs(30)));
        assert_eq!(outcome.actions().len(), 4);
    }
}
