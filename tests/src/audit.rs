//! What a real API server's audit log says of the writes of a namespace's
//! ServiceAccounts (`tests/real-cluster/up` records them): which Pod wrote
//! what, when the server received it, and who held a leader Lease then.
//!
//! A bound ServiceAccount token names the Pod it was mounted in
//! (`user.extra["authentication.kubernetes.io/pod-name"]`), so the log tells
//! the replicas of one Deployment apart, whatever their addresses. A Lease's
//! tenure is read from the Lease's own successful writes, which the policy
//! records with their bodies: a Pod holds it from the write that made it the
//! holder until the next write that names another holder or none.

use std::path::Path;

use jiff::Timestamp;
use serde_json::Value;

/// One successful write, as the audit log recorded it.
#[derive(Clone, Debug)]
pub struct Write {
    /// The Pod whose token made it (empty for a token bound to none).
    pub pod: String,
    /// `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// `resource[/subresource]`.
    pub resource: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// When the server received the request.
    pub received: Timestamp,
    /// When the server answered it (the write committed).
    pub answered: Timestamp,
    /// The request's body (for the writes the policy records at `Request`).
    pub body: Value,
}

/// The successful writes of the ServiceAccounts of `namespace` in the audit
/// log at `log`, in the order the server answered them.
///
/// # Panics
/// When the log cannot be read: the test's cluster has none.
pub fn writes(log: &Path, namespace: &str) -> Vec<Write> {
    let text = std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("the audit log {}: {e}", log.display()));
    let prefix = format!("system:serviceaccount:{namespace}:");
    let time = |event: &Value, field: &str| {
        event[field]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok())
            .unwrap_or_else(|| panic!("an audit event without {field}: {event}"))
    };
    let mut writes: Vec<Write> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["user"]["username"]
                    .as_str()
                    .is_some_and(|u| u.starts_with(&prefix))
                && e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| (200..300).contains(&c))
        })
        .map(|e| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            let object = &e["objectRef"];
            let mut resource = text(&object["resource"]);
            if let Some(sub) = object["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            Write {
                pod: text(&e["user"]["extra"]["authentication.kubernetes.io/pod-name"][0]),
                verb: text(&e["verb"]),
                resource,
                namespace: text(&object["namespace"]),
                name: text(&object["name"]),
                received: time(&e, "requestReceivedTimestamp"),
                answered: time(&e, "stageTimestamp"),
                body: e["requestObject"].clone(),
            }
        })
        .collect();
    writes.sort_by_key(|w| w.answered);
    writes
}

/// The holder a write of the Lease made: the Pod that wrote it if the body
/// names a holder, none if it clears it.
fn made_holder(write: &Write) -> Option<String> {
    write.body["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(|_| write.pod.clone())
}

/// The writes in `namespace` (a controller's, not its Lease's) made by a Pod
/// that did not hold the Lease `lease` (in the same log) when the server
/// received them, each described; and how many writes were checked.
pub fn outside_tenure(writes: &[Write], lease: &str, namespace: &str) -> (usize, Vec<String>) {
    let tenures: Vec<(Timestamp, Option<String>)> = writes
        .iter()
        .filter(|w| w.resource == "leases" && w.name == lease && w.verb != "delete")
        .map(|w| (w.answered, made_holder(w)))
        .collect();
    let holder_at = |t: Timestamp| {
        tenures
            .iter()
            .take_while(|(from, _)| *from <= t)
            .last()
            .and_then(|(_, holder)| holder.clone())
    };
    let checked: Vec<&Write> = writes
        .iter()
        .filter(|w| w.namespace == namespace && w.resource != "leases")
        .collect();
    let outside = checked
        .iter()
        .filter_map(|w| {
            // A write whose token names no Pod is nobody's tenure.
            let holder = holder_at(w.received).filter(|h| !h.is_empty());
            (holder.as_deref() != Some(w.pod.as_str())).then(|| {
                format!(
                    "{} {} {}/{} by {} received {} while the Lease was {}'s",
                    w.verb,
                    w.resource,
                    w.namespace,
                    w.name,
                    w.pod,
                    w.received,
                    holder.as_deref().unwrap_or("nobody")
                )
            })
        })
        .collect();
    (checked.len(), outside)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(pod: &str, resource: &str, name: &str, at: &str, body: Value) -> Write {
        let at: Timestamp = at.parse().expect("a time");
        Write {
            pod: pod.into(),
            verb: "update".into(),
            resource: resource.into(),
            namespace: if resource == "leases" {
                "sys"
            } else {
                "default"
            }
            .into(),
            name: name.into(),
            received: at,
            answered: at,
            body,
        }
    }

    #[test]
    fn a_write_by_a_pod_that_no_longer_holds_the_lease_should_be_told() {
        let holds = serde_json::json!({"spec": {"holderIdentity": "x"}});
        let writes = [
            write("a", "leases", "l", "2026-01-01T00:00:00Z", holds.clone()),
            write("a", "deployments", "d", "2026-01-01T00:00:01Z", Value::Null),
            write(
                "a",
                "leases",
                "l",
                "2026-01-01T00:00:02Z",
                serde_json::json!({"spec": {}}),
            ),
            write("b", "leases", "l", "2026-01-01T00:00:03Z", holds),
            write("b", "deployments", "d", "2026-01-01T00:00:04Z", Value::Null),
            write("a", "deployments", "d", "2026-01-01T00:00:05Z", Value::Null),
        ];
        let (checked, outside) = outside_tenure(&writes, "l", "default");
        assert_eq!(checked, 3);
        assert_eq!(outside.len(), 1, "{outside:?}");
        assert!(outside[0].contains("by a received 2026-01-01T00:00:05Z while the Lease was b's"));
    }

    /// Tokens that name no Pod tell nothing of who wrote: each such write
    /// is told, never taken for the holder's.
    #[test]
    fn a_write_by_no_pod_should_be_told() {
        let holds = serde_json::json!({"spec": {"holderIdentity": "x"}});
        let writes = [
            write("", "leases", "l", "2026-01-01T00:00:00Z", holds),
            write("", "deployments", "d", "2026-01-01T00:00:01Z", Value::Null),
        ];
        let (checked, outside) = outside_tenure(&writes, "l", "default");
        assert_eq!((checked, outside.len()), (1, 1), "{outside:?}");
    }
}
