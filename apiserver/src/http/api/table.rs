//! The columns `kubectl get` prints: the real server's for the common
//! built-in kinds, a CRD's `additionalPrinterColumns`, and name and age for
//! the rest.
//!
//! Cells are what the real printers put there: ages as the human durations
//! kubectl shows (`5s`, `3m20s`, `4d`), counts as numbers, absent values as
//! `<none>` or empty as the real column does.

use jiff::Timestamp;
use serde_json::{Value, json};

use kubewasm_types::info::ResourceInfo;

/// How a cell is computed.
#[derive(Clone, Debug)]
enum Cell {
    /// `metadata.name`.
    Name,
    /// Time since `metadata.creationTimestamp`.
    Age,
    /// The value at a JSON path (a CRD column, `.spec.x[0].y`,
    /// `[?(@.type=="Ready")]`).
    Path(String),
    /// A string at a pointer, or a default.
    Text(&'static str, &'static str),
    /// A number at a pointer, 0 when absent.
    Number(&'static str),
    /// `ready/total`: the pointers of the two counts.
    Ratio(&'static str, &'static str),
    /// The number of entries of the maps at these pointers.
    Count(&'static [&'static str]),
    /// A Pod's containers ready, out of all.
    PodReady,
    /// A Pod's restarts, summed over its containers.
    PodRestarts,
    /// A Service's ports, `80/TCP,443/TCP`.
    ServicePorts,
    /// A Node's `Ready` condition as `Ready` or `NotReady`.
    NodeStatus,
    /// A Node's `node-role.kubernetes.io/*` labels, or `<none>`.
    NodeRoles,
    /// Time since an Event was last seen: its `series`, its
    /// `lastTimestamp`, its `eventTime`, its creation.
    EventLastSeen,
    /// What an Event regards, `kind/name` (the kind in lower case).
    EventObject,
}

/// One column: its definition and how its cells are computed.
#[derive(Clone, Debug)]
pub(super) struct Column {
    name: String,
    kind: &'static str,
    format: &'static str,
    priority: i64,
    cell: Cell,
}

impl Column {
    fn new(name: &str, kind: &'static str, cell: Cell) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            format: if matches!(cell, Cell::Name) {
                "name"
            } else {
                ""
            },
            priority: 0,
            cell,
        }
    }

    /// The `columnDefinitions` entry.
    pub(super) fn definition(&self) -> Value {
        json!({"name": self.name, "type": self.kind, "format": self.format,
               "description": "", "priority": self.priority})
    }
}

/// The columns of `info`'s table.
pub(super) fn columns(info: &ResourceInfo) -> Vec<Column> {
    use Cell::{Age, Count, Name, Number, PodReady, PodRestarts, Ratio, ServicePorts, Text};
    let c = Column::new;
    if info.custom {
        return custom_columns(info);
    }
    let mut tail = Vec::new();
    let middle: Vec<Column> = match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => vec![c("Status", "string", Text("/status/phase", ""))],
        ("", "configmaps") => vec![c("Data", "integer", Count(&["/data", "/binaryData"]))],
        ("", "secrets") => vec![
            c("Type", "string", Text("/type", "")),
            c("Data", "integer", Count(&["/data"])),
        ],
        ("", "events") => {
            return vec![
                c("Last Seen", "string", Cell::EventLastSeen),
                c("Type", "string", Text("/type", "")),
                c("Reason", "string", Text("/reason", "")),
                c("Object", "string", Cell::EventObject),
                c("Message", "string", Text("/message", "")),
            ];
        }
        ("", "pods") => vec![
            c("Ready", "string", PodReady),
            c("Status", "string", Text("/status/phase", "Pending")),
            c("Restarts", "string", PodRestarts),
        ],
        ("", "services") => vec![
            c("Type", "string", Text("/spec/type", "ClusterIP")),
            c("Cluster-IP", "string", Text("/spec/clusterIP", "<none>")),
            c(
                "External-IP",
                "string",
                Text("/spec/externalIPs/0", "<none>"),
            ),
            c("Port(s)", "string", ServicePorts),
        ],
        ("", "nodes") => {
            tail.push(c(
                "Version",
                "string",
                Text("/status/nodeInfo/kubeletVersion", ""),
            ));
            vec![
                c("Status", "string", Cell::NodeStatus),
                c("Roles", "string", Cell::NodeRoles),
            ]
        }
        ("apps", "deployments") => vec![
            c(
                "Ready",
                "string",
                Ratio("/status/readyReplicas", "/spec/replicas"),
            ),
            c("Up-to-date", "integer", Number("/status/updatedReplicas")),
            c("Available", "integer", Number("/status/availableReplicas")),
        ],
        ("apps", "replicasets") => vec![
            c("Desired", "integer", Number("/spec/replicas")),
            c("Current", "integer", Number("/status/replicas")),
            c("Ready", "integer", Number("/status/readyReplicas")),
        ],
        ("apps", "statefulsets") => vec![c(
            "Ready",
            "string",
            Ratio("/status/readyReplicas", "/spec/replicas"),
        )],
        _ => Vec::new(),
    };
    let mut all = vec![c("Name", "string", Name)];
    all.extend(middle);
    all.push(c("Age", "string", Age));
    all.extend(tail);
    all
}

/// A CRD's columns: name, its `additionalPrinterColumns` (or age).
fn custom_columns(info: &ResourceInfo) -> Vec<Column> {
    let mut all = vec![Column::new("Name", "string", Cell::Name)];
    let declared: Vec<Column> = info
        .printer_columns
        .iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?;
            let path = p.get("jsonPath")?.as_str()?;
            let kind = match p.get("type").and_then(Value::as_str) {
                Some("integer") => "integer",
                Some("number") => "number",
                Some("boolean") => "boolean",
                Some("date") => "date",
                _ => "string",
            };
            let mut column = Column::new(name, kind, Cell::Path(path.to_owned()));
            column.priority = p.get("priority").and_then(Value::as_i64).unwrap_or(0);
            Some(column)
        })
        .collect();
    if declared.is_empty() {
        all.push(Column::new("Age", "string", Cell::Age));
    } else {
        all.extend(declared);
    }
    all
}

/// A row's cells.
pub(super) fn cells(columns: &[Column], object: &Value) -> Vec<Value> {
    columns
        .iter()
        .map(|column| cell(&column.cell, column.kind, object))
        .collect()
}

fn cell(cell: &Cell, kind: &str, object: &Value) -> Value {
    let text = |p: &str| object.pointer(p).and_then(Value::as_str);
    let number = |p: &str| object.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    match cell {
        Cell::Name => text("/metadata/name").unwrap_or("").into(),
        Cell::Age => age(text("/metadata/creationTimestamp")).into(),
        Cell::Path(path) => match (json_path(object, path), kind) {
            (Some(Value::String(t)), "date") => age(Some(&t)).into(),
            (Some(v), _) => v,
            (None, _) => Value::Null,
        },
        Cell::Text(p, default) => text(p).unwrap_or(default).into(),
        Cell::Number(p) => number(p).into(),
        Cell::Ratio(ready, total) => {
            let total = object.pointer(total).and_then(Value::as_i64).unwrap_or(1);
            format!("{}/{total}", number(ready)).into()
        }
        Cell::Count(pointers) => pointers
            .iter()
            .filter_map(|p| object.pointer(p).and_then(Value::as_object))
            .map(serde_json::Map::len)
            .sum::<usize>()
            .into(),
        Cell::PodReady => {
            let statuses = object
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array);
            let ready = statuses.map_or(0, |s| {
                s.iter()
                    .filter(|c| c.get("ready") == Some(&Value::Bool(true)))
                    .count()
            });
            let total = object
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            format!("{ready}/{total}").into()
        }
        Cell::PodRestarts => object
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .map_or(0, |s| {
                s.iter()
                    .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                    .sum::<i64>()
            })
            .to_string()
            .into(),
        Cell::ServicePorts => {
            let ports: Vec<String> = object
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.get("port").and_then(Value::as_i64).unwrap_or(0),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect();
            if ports.is_empty() {
                "<none>".into()
            } else {
                ports.join(",").into()
            }
        }
        Cell::EventLastSeen => age([
            "/series/lastObservedTime",
            "/lastTimestamp",
            "/eventTime",
            "/metadata/creationTimestamp",
        ]
        .into_iter()
        .find_map(text))
        .into(),
        Cell::EventObject => format!(
            "{}/{}",
            text("/involvedObject/kind").unwrap_or("").to_lowercase(),
            text("/involvedObject/name").unwrap_or("")
        )
        .into(),
        Cell::NodeStatus => {
            let ready = object
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| {
                    c.get("type") == Some(&json!("Ready"))
                        && c.get("status") == Some(&json!("True"))
                });
            if ready { "Ready" } else { "NotReady" }.into()
        }
        Cell::NodeRoles => {
            let roles: Vec<&str> = object
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .collect();
            if roles.is_empty() {
                "<none>".into()
            } else {
                roles.join(",").into()
            }
        }
    }
}

/// Time since an RFC 3339 timestamp, as kubectl shows it; `<unknown>`
/// when absent or unreadable.
fn age(timestamp: Option<&str>) -> String {
    let Some(Ok(then)) = timestamp.map(str::parse::<Timestamp>) else {
        return "<unknown>".into();
    };
    let seconds = Timestamp::now()
        .as_second()
        .saturating_sub(then.as_second())
        .max(0);
    human_duration(seconds)
}

/// Kubernetes' `HumanDuration`: `45s`, `3m20s`, `25m`, `5h10m`, `30h`,
/// `3d4h`, `40d`, `2y100d`.
fn human_duration(seconds: i64) -> String {
    const MINUTE: i64 = 60;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;
    const YEAR: i64 = 365 * DAY;
    match seconds {
        s if s < 2 * MINUTE => format!("{s}s"),
        s if s < 10 * MINUTE => match s % MINUTE {
            0 => format!("{}m", s / MINUTE),
            r => format!("{}m{r}s", s / MINUTE),
        },
        s if s < 3 * HOUR => format!("{}m", s / MINUTE),
        s if s < 8 * HOUR => match (s % HOUR) / MINUTE {
            0 => format!("{}h", s / HOUR),
            m => format!("{}h{m}m", s / HOUR),
        },
        s if s < 2 * DAY => format!("{}h", s / HOUR),
        s if s < 8 * DAY => match (s % DAY) / HOUR {
            0 => format!("{}d", s / DAY),
            h => format!("{}d{h}h", s / DAY),
        },
        s if s < 2 * YEAR => format!("{}d", s / DAY),
        s if s < 8 * YEAR => match (s % YEAR) / DAY {
            0 => format!("{}y", s / YEAR),
            d => format!("{}y{d}d", s / YEAR),
        },
        s => format!("{}y", s / YEAR),
    }
}

/// The value at a printer column's JSON path: `.a.b`, `.a[0].b`, and
/// filters `[?(@.k=="v")]` (the subset CRD columns use).
fn json_path(object: &Value, path: &str) -> Option<Value> {
    let mut current = object;
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    rest = rest.strip_prefix('.').unwrap_or(rest);
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inside = &after[..end];
            current = match inside
                .strip_prefix("?(@.")
                .and_then(|f| f.strip_suffix(')'))
            {
                Some(filter) => {
                    let (field, wanted) = filter.split_once("==")?;
                    let wanted = wanted.trim().trim_matches(['"', '\'']);
                    current.as_array()?.iter().find(|item| {
                        item.get(field.trim()).and_then(Value::as_str) == Some(wanted)
                    })?
                }
                None => current.get(inside.parse::<usize>().ok()?)?,
            };
            rest = &after[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            current = current.get(&rest[..end])?;
            rest = &rest[end..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    Some(current.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_should_read_as_kubectl_prints_them() {
        for (seconds, text) in [
            (45, "45s"),
            (200, "3m20s"),
            (1500, "25m"),
            (5 * 3600 + 600, "5h10m"),
            (30 * 3600, "30h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (40 * 86_400, "40d"),
        ] {
            assert_eq!(human_duration(seconds), text);
        }
    }

    #[test]
    fn json_paths_should_follow_fields_indexes_and_filters() {
        let object = json!({"spec": {"replicas": 3, "ports": [{"port": 80}]},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(json_path(&object, ".spec.replicas"), Some(json!(3)));
        assert_eq!(json_path(&object, ".spec.ports[0].port"), Some(json!(80)));
        assert_eq!(
            json_path(&object, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(json_path(&object, ".spec.missing"), None);
        assert_eq!(json_path(&object, ".spec.ports[9]"), None);
    }
}
