//! Conversion between a resource's stored form and the view a request
//! names, where they differ: `events.k8s.io/v1` Events are stored as core
//! Events, with the field mapping of the real server
//! (`pkg/apis/events/v1/conversion.go`), so that what a controller records
//! through one API is read through the other (`kubectl get events`,
//! `describe`, `events`).
//!
//! | `events.k8s.io/v1`          | core `v1`              |
//! |-----------------------------|------------------------|
//! | `note`                      | `message`              |
//! | `regarding`                 | `involvedObject`       |
//! | `deprecatedSource`          | `source`               |
//! | `reportingController`       | `reportingComponent`   |
//! | `deprecatedFirstTimestamp`  | `firstTimestamp`       |
//! | `deprecatedLastTimestamp`   | `lastTimestamp`        |
//! | `deprecatedCount`           | `count`                |
//!
//! The other fields (`eventTime`, `series`, `action`, `reason`, `related`,
//! `type`, `reportingInstance`, `metadata`) are the same in both.

use std::borrow::Cow;

use serde_json::Value;

use kubewasm_types::info::ResourceInfo;

/// The renamed fields: the view's name, the stored name.
const EVENT_FIELDS: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("deprecatedSource", "source"),
    ("reportingController", "reportingComponent"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(object: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let moved: Vec<(&str, Option<Value>)> = pairs
        .map(|(from, to)| (to, map.shift_remove(from)))
        .collect();
    for (to, value) in moved {
        map.shift_remove(to);
        if let Some(value) = value {
            map.insert(to.to_owned(), value);
        }
    }
}

/// `object`, written through `info`'s view, as it is stored.
pub fn to_storage(info: &ResourceInfo, mut object: Value) -> Value {
    if info.is_events_view() {
        rename(&mut object, EVENT_FIELDS.into_iter());
    }
    object
}

/// A stored object as `info`'s view shows it (borrowed where the two are
/// the same).
pub fn from_storage<'a>(info: &ResourceInfo, stored: &'a Value) -> Cow<'a, Value> {
    if !info.is_events_view() {
        return Cow::Borrowed(stored);
    }
    let mut object = stored.clone();
    rename(&mut object, EVENT_FIELDS.into_iter().map(|(v, s)| (s, v)));
    Cow::Owned(object)
}

/// Where a field a selector of `info`'s view names is stored.
pub fn stored_field<'a>(info: &ResourceInfo, field: &'a str) -> Cow<'a, str> {
    if info.is_events_view() {
        for (view, stored) in EVENT_FIELDS {
            if field == view {
                return stored.into();
            }
            if let Some(rest) = field.strip_prefix(view).and_then(|r| r.strip_prefix('.')) {
                return format!("{stored}.{rest}").into();
            }
        }
    }
    field.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_types::registry::Registry;
    use serde_json::json;

    fn events(group: &str) -> ResourceInfo {
        Registry::builtin()
            .all()
            .find(|t| t.group == group && t.plural == "events")
            .cloned()
            .expect("served")
    }

    #[test]
    fn an_event_should_read_the_same_through_either_view() {
        let view = events("events.k8s.io");
        let written = json!({"metadata": {"name": "e", "namespace": "a"}, "note": "scaled",
            "regarding": {"kind": "Deployment", "name": "web"}, "reportingController": "kubewasm/x",
            "reportingInstance": "host-1", "reason": "Scaled", "type": "Normal",
            "eventTime": "2026-12-02T20:00:00.000000Z", "deprecatedCount": 2});
        let stored = to_storage(&view, written.clone());
        assert_eq!(stored["message"], "scaled");
        assert_eq!(stored["involvedObject"]["name"], "web");
        assert_eq!(stored["reportingComponent"], "kubewasm/x");
        assert_eq!(stored["count"], 2);
        assert!(stored.get("note").is_none() && stored.get("regarding").is_none());
        assert_eq!(*from_storage(&view, &stored), written);
        let core = events("");
        assert!(
            matches!(from_storage(&core, &stored), Cow::Borrowed(_)),
            "core is the stored form"
        );
    }

    #[test]
    fn selectors_of_the_view_should_select_stored_fields() {
        let view = events("events.k8s.io");
        assert_eq!(stored_field(&view, "regarding.name"), "involvedObject.name");
        assert_eq!(
            stored_field(&view, "reportingController"),
            "reportingComponent"
        );
        assert_eq!(stored_field(&view, "type"), "type");
        assert_eq!(
            stored_field(&events(""), "regarding.name"),
            "regarding.name"
        );
    }
}
