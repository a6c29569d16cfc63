//! What legitimately differs between two servers' answers to the same
//! request, made the same: identities and versions each server assigns
//! (`uid`, `resourceVersion`, continue tokens), clocks (every RFC 3339
//! time), generated names' suffixes, allocated addresses and ports, and
//! the status controllers write in their own time. What is left must be
//! equal.

use serde_json::Value;

/// Fields whose value each server assigns: kept present, value replaced.
const ASSIGNED: [&str; 12] = [
    "uid",
    "resourceVersion",
    "continue",
    "selfLink",
    "clusterIP",
    "clusterIPs",
    "podIP",
    "podIPs",
    "hostIP",
    "hostIPs",
    "nodePort",
    "remainingItemCount",
];

/// The message of a 410 Expired, versions after it.
const EXPIRED: &str = "too old resource version: ";

/// What a failed resourceVersion precondition says before the stored
/// object's version (each server's own), in parentheses.
const IN_RECORD: &str = "does not match the ResourceVersion in record (";

/// The prefix of a Pod's service account token volume, a generated
/// suffix after it.
const TOKEN_VOLUME: &str = "kube-api-access-";

/// Kinds whose `status` controllers write on their own clock (the real
/// kube-controller-manager and the embedded simulation alike): compared
/// without it.
const CONTROLLED: [&str; 12] = [
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "Pod",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "ResourceQuota",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
];

/// Whether `text` is an RFC 3339 time (`2026-12-04T01:02:03Z`, with or
/// without fractions and offset).
fn is_time(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[..4].iter().all(u8::is_ascii_digit)
}

/// `text` with every uid in it (`8-4-4-4-12` hex digits: a record's in a
/// precondition's message) masked, if it has one.
fn without_uids(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let shape = |at: usize| {
        bytes.len() >= at + 36
            && bytes[at..at + 36].iter().enumerate().all(|(i, b)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    *b == b'-'
                } else {
                    b.is_ascii_hexdigit()
                }
            })
    };
    let mut out = String::new();
    let mut at = 0;
    let mut found = false;
    while at < bytes.len() {
        if shape(at) {
            out.push_str("<uid>");
            at += 36;
            found = true;
        } else {
            let c = text[at..].chars().next()?;
            out.push(c);
            at += c.len_utf8();
        }
    }
    found.then_some(out)
}

/// The value made comparable, in place.
pub(crate) fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(prefix) = map
                .get("generateName")
                .and_then(Value::as_str)
                .map(str::to_owned)
                && let Some(name) = map.get_mut("name")
                && name.as_str().is_some_and(|n| n.starts_with(&prefix))
            {
                *name = format!("{prefix}<generated>").into();
            }
            let kind = map
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if CONTROLLED.contains(&kind.as_str()) && map.contains_key("metadata") {
                map.remove("status");
            }
            // A list's items carry no kind of their own.
            if kind
                .strip_suffix("List")
                .is_some_and(|k| CONTROLLED.contains(&k))
                && let Some(Value::Array(items)) = map.get_mut("items")
            {
                for item in items.iter_mut().filter_map(Value::as_object_mut) {
                    item.remove("status");
                }
            }
            // A key may hold a uid too (`k:{"uid":"…"}` in managedFields).
            if map.keys().any(|k| without_uids(k).is_some()) {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, v)| (without_uids(&k).unwrap_or(k), v))
                    .collect();
            }
            for (key, inner) in map.iter_mut() {
                if ASSIGNED.contains(&key.as_str()) && !inner.is_null() {
                    *inner = format!("<{key}>").into();
                } else {
                    normalise(inner);
                }
            }
            // A server orders `managedFields` by operation, then time (to
            // the second), manager and subresource: with the times masked,
            // entries written around a second's turn are put in the order
            // they would have had within one.
            if let Some(Value::Array(entries)) = map.get_mut("managedFields") {
                entries.sort_by_key(|e| {
                    ["operation", "manager", "subresource"].map(|f| {
                        e.get(f)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    })
                });
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        Value::String(text) if is_time(text) => *text = "<time>".to_owned(),
        // The ServiceAccount admission's token volume, named by each server.
        Value::String(text)
            if text.starts_with(TOKEN_VOLUME) && text.len() == TOKEN_VOLUME.len() + 5 =>
        {
            *text = format!("{TOKEN_VOLUME}<generated>");
        }
        // A 410's versions are each server's own.
        Value::String(text) if text.starts_with(EXPIRED) => {
            *text = format!("{EXPIRED}<resourceVersion>");
        }
        Value::String(text) => {
            if let Some(compared) = with_quoted_object_normalised(text) {
                *text = compared;
            }
            if let Some(masked) = without_uids(text) {
                *text = masked;
            }
            if let Some(at) = text.find(IN_RECORD).map(|at| at + IN_RECORD.len())
                && let Some(end) = text[at..].find(')').map(|end| at + end)
            {
                text.replace_range(at..end, "<resourceVersion>");
            }
        }
        _ => {}
    }
}

/// `text` with the object it quotes (`Invalid value: "{…}"`, a patch's
/// result a real server could not read back) normalised and its keys
/// sorted, if it quotes one: the order Go's encoder wrote the object's keys
/// in is not what the message says.
fn with_quoted_object_normalised(text: &str) -> Option<String> {
    const QUOTE: &str = "Invalid value: ";
    let at = text.find(QUOTE)? + QUOTE.len();
    let mut quoted = serde_json::Deserializer::from_str(&text[at..]).into_iter::<String>();
    let inner = quoted.next()?.ok()?;
    let end = at + quoted.byte_offset();
    let mut object: Value = serde_json::from_str(&inner).ok().filter(Value::is_object)?;
    normalise(&mut object);
    Some(format!(
        "{}{:?}{}",
        &text[..at],
        sorted(&object),
        &text[end..]
    ))
}

/// JSON text of `value` with every object's keys sorted.
fn sorted(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(k, _)| *k);
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), sorted(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(sorted).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

/// A body made comparable: JSON normalised, a watch's events each
/// normalised (one per line), anything else as text.
pub(crate) fn body(bytes: &[u8]) -> Value {
    if let Ok(mut value) = serde_json::from_slice::<Value>(bytes) {
        normalise(&mut value);
        return value;
    }
    let text = String::from_utf8_lossy(bytes);
    let lines: Option<Vec<Value>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    match lines {
        Some(mut events) if !events.is_empty() => {
            events.iter_mut().for_each(normalise);
            Value::Array(events)
        }
        _ => Value::String(text.into_owned()),
    }
}

/// `value` without the field at `pointer` (into an object): in an answer,
/// in each item of a list, in each event of a watch.
pub(crate) fn without(value: &mut Value, pointer: &str) {
    match value {
        Value::Array(events) => {
            for event in events {
                without(event, pointer);
            }
        }
        Value::Object(map) => {
            for nested in ["items", "object"] {
                if let Some(inner) = map.get_mut(nested) {
                    without(inner, pointer);
                }
            }
            let (parent, field) = pointer.rsplit_once('/').unwrap_or(("", pointer));
            let parent = if parent.is_empty() {
                Some(&mut *value)
            } else {
                value.pointer_mut(parent)
            };
            if let Some(Value::Object(parent)) = parent {
                parent.shift_remove(field);
            }
        }
        _ => {}
    }
}

/// The first place two normalised values differ: a JSON pointer and both
/// values there.
pub(crate) fn first_difference(a: &Value, b: &Value) -> Option<(String, Value, Value)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let (l, r) = (x.get(k), y.get(k));
                match (l, r) {
                    (Some(l), Some(r)) => first_difference(l, r).map(|(p, l, r)| {
                        (
                            format!("/{}{p}", k.replace('~', "~0").replace('/', "~1")),
                            l,
                            r,
                        )
                    }),
                    _ => Some((
                        format!("/{k}"),
                        l.cloned().unwrap_or(Value::Null),
                        r.cloned().unwrap_or(Value::Null),
                    )),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (l, r))| {
                first_difference(l, r).map(|(p, l, r)| (format!("/{i}{p}"), l, r))
            })
        }
        _ if a == b => None,
        _ => Some((String::new(), a.clone(), b.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn assigned_values_clocks_and_generated_names_should_compare_equal() {
        let one = json!({"kind": "ConfigMap", "metadata": {"name": "web-x7k2p", "generateName": "web-",
            "uid": "1", "resourceVersion": "10", "creationTimestamp": "2026-12-04T01:02:03Z",
            "managedFields": [{"manager": "m", "time": "2026-12-04T01:02:03Z"}]}});
        let two = json!({"kind": "ConfigMap", "metadata": {"name": "web-q9z8m", "generateName": "web-",
            "uid": "2", "resourceVersion": "77", "creationTimestamp": "2026-12-04T05:06:07.123456Z",
            "managedFields": [{"manager": "m", "time": "2026-12-04T05:06:07Z"}]}});
        let (mut a, mut b) = (one, two);
        normalise(&mut a);
        normalise(&mut b);
        assert_eq!(first_difference(&a, &b), None);
    }

    #[test]
    fn what_a_server_decides_should_still_differ() {
        let mut a = json!({"kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1"}}});
        let mut b = json!({"kind": "ConfigMap", "metadata": {"name": "a"}});
        normalise(&mut a);
        normalise(&mut b);
        assert_eq!(
            first_difference(&a, &b),
            Some((
                "/metadata/labels".to_owned(),
                json!({"x": "1"}),
                Value::Null
            ))
        );
        // A missing field is not an assigned one.
        let (mut c, mut d) = (json!({"uid": "1"}), json!({}));
        normalise(&mut c);
        normalise(&mut d);
        assert!(first_difference(&c, &d).is_some());
    }

    #[test]
    fn an_object_a_message_quotes_should_compare_as_an_object() {
        let said = |object: &str| {
            let mut message = Value::from(format!(
                "patch: Invalid value: {object:?}: json: cannot unmarshal number"
            ));
            normalise(&mut message);
            message
        };
        assert_eq!(
            said(r#"{"kind":"A","metadata":{"resourceVersion":"5","name":"a"}}"#),
            said(r#"{"metadata":{"name":"a","resourceVersion":"91"},"kind":"A"}"#)
        );
        assert_ne!(
            said(r#"{"kind":"A","metadata":{"name":"a"}}"#),
            said(r#"{"kind":"A","metadata":{"name":"b"}}"#)
        );
    }

    #[test]
    fn uids_in_messages_should_compare_equal() {
        let mut a =
            json!("does not match the UID in record (5273f554-bc7c-4440-b28e-3f3584fae380).");
        let mut b =
            json!("does not match the UID in record (2b521e80-da6a-4d7c-b800-a9af577951f8).");
        normalise(&mut a);
        normalise(&mut b);
        assert_eq!(a, b);
        assert_eq!(a, json!("does not match the UID in record (<uid>)."));
    }

    #[test]
    fn a_precondition_s_stored_version_should_compare_equal() {
        let said = |rv: &str| {
            let mut text = json!(format!(
                "the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
            ));
            normalise(&mut text);
            text
        };
        assert_eq!(said("130"), said("375"));
        assert_eq!(
            said("130"),
            json!(
                "the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (<resourceVersion>). The object might have been modified"
            )
        );
    }

    #[test]
    fn a_listed_field_should_be_left_out_wherever_an_object_is() {
        let mut list = json!({"items": [{"metadata": {"name": "a", "finalizers": ["x"]}}],
            "metadata": {"finalizers": ["y"]}});
        without(&mut list, "/metadata/finalizers");
        assert_eq!(
            list,
            json!({"items": [{"metadata": {"name": "a"}}], "metadata": {}})
        );
        let mut events = json!([{"type": "ADDED", "object": {"metadata": {"finalizers": []}}}]);
        without(&mut events, "/metadata/finalizers");
        assert_eq!(
            events,
            json!([{"type": "ADDED", "object": {"metadata": {}}}])
        );
    }

    #[test]
    fn a_watch_should_compare_event_by_event() {
        let events = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}\n{\"type\":\"DELETED\",\"object\":{}}\n";
        assert_eq!(
            body(events),
            json!([{"type": "ADDED", "object": {"metadata": {"resourceVersion": "<resourceVersion>"}}},
                   {"type": "DELETED", "object": {}}])
        );
    }
}
