//! The one builder of events.k8s.io/v1 Events: a plugin's, planned from its
//! [`DesiredEvent`](super::DesiredEvent), and the host's own (about
//! `Plugin` resources).

use serde_json::{Value, json};

use super::EventType;
use crate::resource::{ObjectKey, ResourceType};

/// Most bytes of an Event's note (the API server's limit).
const MAX_NOTE_BYTES: usize = 1024;

/// An events.k8s.io/v1 Event: the one builder of a plugin's events and the
/// host's own.
pub struct EventBody<'a> {
    /// What it regards (`apiVersion`, `kind`, `name`, and `namespace` and
    /// `uid` when known); its name prefixes the Event's.
    pub regarding: Value,
    /// Where the Event is written.
    pub namespace: &'a str,
    /// Who reports it (`kubewasm.dev/<plugin>`, or `kubewasm.dev/host`).
    pub controller: &'a str,
    /// Normal or Warning.
    pub event_type: EventType,
    /// Why (CamelCase).
    pub reason: &'a str,
    /// What was done or failed.
    pub action: &'a str,
    /// Details, cut to [`MAX_NOTE_BYTES`].
    pub note: String,
}

/// Where an Event about the object of `resource` and `key` is written: the
/// namespace it counts as being in (a Namespace's: itself), else `default`,
/// as Kubernetes records events about cluster-scoped objects.
pub(super) fn namespace_for<'a>(resource: &ResourceType, key: &'a ObjectKey) -> &'a str {
    key.placed_in(resource).unwrap_or("default")
}

/// The type of what an event writes (for refusals).
pub(super) fn event_type() -> ResourceType {
    ResourceType {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
        namespaced: true,
    }
}

impl EventBody<'_> {
    /// The Event's body, timed `now`.
    pub fn object(self, now: jiff::Timestamp) -> Value {
        let name = self
            .regarding
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("event");
        json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "generateName": format!("{name}."),
                "namespace": self.namespace,
            },
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
            "reportingController": self.controller,
            "reportingInstance": "kubewasm",
            "type": match self.event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            },
            "reason": self.reason,
            "action": self.action,
            "note": truncate(self.note, MAX_NOTE_BYTES),
            "regarding": self.regarding,
        })
    }
}

/// Cuts `text` to at most `max` bytes, on a character boundary.
pub(crate) fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
