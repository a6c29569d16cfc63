//! The one builder of events.k8s.io/v1 Events: a plugin's, planned from its
//! [`DesiredEvent`](super::desired::DesiredEvent), and the host's own (about
//! `Plugin` resources).

use serde_json::{Value, json};

use super::desired::EventType;
use kubewasm_core::resource::{ObjectKey, ResourceType};

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
                "name": event_name(name, now),
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

/// Most bytes of an object name (a DNS subdomain).
const MAX_NAME_BYTES: usize = 253;

/// An Event's name as client-go's recorders make it: what it regards, a
/// dot, the time in hexadecimal nanoseconds (`web.18a3f0c2d9e4b7a1`). Not a
/// `generateName`: a real server validates the prefix itself as a DNS
/// subdomain, so `web.` (a trailing dot) is refused. The prefix is cut so
/// the name fits, without a dot or dash at its end.
fn event_name(regarding: &str, now: jiff::Timestamp) -> String {
    let suffix = format!(".{:x}", now.as_nanosecond().max(0));
    let prefix = truncate(regarding.to_owned(), MAX_NAME_BYTES - suffix.len());
    let prefix = prefix.trim_end_matches(['.', '-']);
    let prefix = if prefix.is_empty() { "event" } else { prefix };
    format!("{prefix}{suffix}")
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

/// An event's `regarding`: the object of `resource` and `key`, with its
/// `uid` when known.
pub(super) fn regarding(resource: &ResourceType, key: &ObjectKey, uid: Option<&Value>) -> Value {
    let mut regarding = json!({
        "apiVersion": resource.api_version(),
        "kind": resource.kind,
        "name": key.name,
    });
    if let Some(namespace) = &key.namespace {
        regarding["namespace"] = namespace.clone().into();
    }
    if let Some(uid) = uid {
        regarding["uid"] = uid.clone();
    }
    regarding
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(nanos: i128) -> jiff::Timestamp {
        jiff::Timestamp::from_nanosecond(nanos).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn an_event_should_be_named_as_client_gos_and_be_a_valid_name() {
        let now = at(0x18a3_f0c2_d9e4_b7a1);
        // A dotted name (a real server refused the generateName `kube-root-ca.crt.`).
        assert_eq!(
            event_name("kube-root-ca.crt", now),
            "kube-root-ca.crt.18a3f0c2d9e4b7a1"
        );
        // Four labels of 58 and their dots: the cut falls just past the last dot.
        let long = format!("{}bbbb", format!("{}.", "a".repeat(58)).repeat(4));
        let name = event_name(&long, now);
        assert!(name.len() <= MAX_NAME_BYTES, "{}", name.len());
        assert!(name.ends_with(".18a3f0c2d9e4b7a1"), "{name}");
        assert!(!name.contains(".."), "{name}");
        assert!(kubewasm_core::validation::is_dns_subdomain(&name), "{name}");
        assert_eq!(event_name("", now), "event.18a3f0c2d9e4b7a1");
        let body = EventBody {
            regarding: json!({"kind": "ConfigMap", "name": "web"}),
            namespace: "default",
            controller: "kubewasm.dev/x",
            event_type: EventType::Normal,
            reason: "Synced",
            action: "Reconcile",
            note: String::new(),
        }
        .object(now);
        assert_eq!(body["metadata"]["name"], "web.18a3f0c2d9e4b7a1");
        assert!(body["metadata"].get("generateName").is_none());
    }
}
