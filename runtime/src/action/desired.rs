//! What a plugin desires, as it said it: the actions it returned, not yet
//! checked ([`crate::action::plan`] checks them).

use kubewasm_core::resource::{ObjectKey, ResourceType};

/// Severity of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// An event a plugin wants recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredEvent {
    /// The object it is about; `None` for the primary.
    pub regarding: Option<(ResourceType, ObjectKey)>,
    /// Normal or Warning.
    pub event_type: EventType,
    /// CamelCase reason.
    pub reason: String,
    /// What was done.
    pub action: String,
    /// Human-readable note.
    pub note: String,
}

/// An action as a plugin returned it, unchecked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Desired {
    /// Server-side apply of an object (JSON text).
    Apply {
        /// The object.
        object: String,
        /// Whether the primary becomes its controller owner.
        owned: bool,
        /// Whether fields other managers own are taken over.
        force: bool,
    },
    /// Server-side apply of a status (JSON text of the object with `status`).
    ApplyStatus(String),
    /// Delete an object, if the preconditions hold.
    Delete(ResourceType, ObjectKey, Preconditions),
    /// Record an event.
    Event(DesiredEvent),
}

/// What a delete requires of the object, checked by the API server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// Its uid; `None`: the uid the cache holds for it, if any.
    pub uid: Option<String>,
    /// Its resourceVersion; `None`: any.
    pub resource_version: Option<String>,
}
