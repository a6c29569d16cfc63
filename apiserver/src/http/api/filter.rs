//! Label, field and shard selectors of lists and watches.

use std::collections::HashMap;

use kubewasm_core::{Selector, ShardField, ShardSelector};
use serde_json::Value;

use crate::http::error::ApiError;
use crate::schema::conversion;
use kubewasm_types::info::ResourceInfo;

/// A field selector: the fields a resource type allows (see
/// `selectable_fields`), with `=`, `==` and `!=`.
#[derive(Debug, Default)]
struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

/// Fields a type can be selected by beyond `metadata.name` and
/// `metadata.namespace`, as the API server registers them per type.
fn selectable_fields(plural: &str) -> &'static [&'static str] {
    match plural {
        "events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "reportingController",
            "source",
            "type",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
        ],
        "pods" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "secrets" => &["type"],
        "namespaces" => &["status.phase"],
        "nodes" => &["spec.unschedulable"],
        "replicationcontrollers" => &["status.replicas"],
        "services" => &["spec.clusterIP", "spec.type"],
        "jobs" => &["status.successful"],
        "certificatesigningrequests" => &["spec.signerName"],
        _ => &[],
    }
}

impl FieldSelector {
    /// A field selector on the type `plural` (a custom resource's when
    /// `custom`), refused as a real server refuses a field it does not
    /// select by: in its own words for a type that selects by more than
    /// name and namespace (a Job's its own), or a custom resource, in
    /// apimachinery's default words for any other.
    pub(super) fn parse_for(s: &str, plural: &str, custom: bool) -> Result<Self, ApiError> {
        let selector = Self::parse(s)?;
        let more = selectable_fields(plural);
        if let Some((field, _, _)) = selector.terms.iter().find(|(f, _, _)| {
            !matches!(f.as_str(), "metadata.name" | "metadata.namespace")
                && !more.contains(&f.as_str())
        }) {
            let why = if plural == "jobs" && !custom {
                // The Job's own conversion function words it.
                format!("field label {field:?} not supported for Job")
            } else if custom || !more.is_empty() {
                format!("field label not supported: {field}")
            } else {
                format!(
                    "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )
            };
            return Err(ApiError::bad_request(why));
        }
        Ok(selector)
    }

    pub(super) fn parse(s: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term}"
                )));
            };
            let field = field.trim();
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self { terms })
    }

    pub(super) fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, value)| {
            let pointer = format!("/{}", stored_field(field).replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => absent_value(field).to_owned(),
                Some(other) => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

/// Where a selectable field is stored, when its label differs (Jobs select
/// `status.successful` from `status.succeeded`).
fn stored_field(field: &str) -> &str {
    match field {
        "status.successful" => "status.succeeded",
        other => other,
    }
}

/// What an absent field selects as: Go formats the zero value of a typed
/// field (`spec.unschedulable` of a schedulable Node is `false`).
fn absent_value(field: &str) -> &'static str {
    match field {
        "spec.unschedulable" | "spec.hostNetwork" => "false",
        "status.replicas" | "status.successful" => "0",
        _ => "",
    }
}

/// Label, field and shard selectors together.
pub(super) struct Filter {
    labels: Selector,
    fields: FieldSelector,
    /// KEP-5866's `shardSelector`: ranges of the FNV-1a hash of the uid or
    /// the namespace.
    shard: Option<ShardSelector>,
}

impl Filter {
    /// The selectors of a request's query; `shard_selectors` off, its
    /// `shardSelector` is ignored (as a server without KEP-5866 ignores it).
    pub(super) fn from_query(
        query: &HashMap<String, String>,
        info: &ResourceInfo,
        shard_selectors: bool,
    ) -> Result<Self, ApiError> {
        let labels = Selector::parse(query.get("labelSelector").map_or("", String::as_str))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let mut fields = FieldSelector::parse_for(
            query.get("fieldSelector").map_or("", String::as_str),
            &info.plural,
            info.custom,
        )?;
        // Selectors match stored objects: a view's field names are mapped.
        for (field, _, _) in &mut fields.terms {
            *field = conversion::stored_field(info, field).into_owned();
        }
        let shard = query
            .get("shardSelector")
            .filter(|s| shard_selectors && !s.is_empty())
            .map(|s| {
                // A real server's answer to a selector it cannot read: a
                // 500 of no reason.
                s.parse::<ShardSelector>()
                    .map_err(|e| ApiError::unreasoned(format!("invalid shard selector: {e}")))
            })
            .transpose()?;
        Ok(Self {
            labels,
            fields,
            shard,
        })
    }

    pub(super) fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object)
            && self.fields.matches(object)
            && self.shard.as_ref().is_none_or(|shard| {
                shard.matches(|field| {
                    let pointer = match field {
                        ShardField::Uid => "/metadata/uid",
                        ShardField::Namespace => "/metadata/namespace",
                    };
                    object.pointer(pointer).and_then(Value::as_str)
                })
            })
    }

    /// Whether it selects every object (no label or field selector): only
    /// then does a page say how many items remain, as etcd's store says.
    pub(super) fn selects_all(&self) -> bool {
        self.labels.is_empty() && self.fields.terms.is_empty() && self.shard.is_none()
    }

    /// What a list's `metadata.shardInfo` says: the shard selector it
    /// honoured, in canonical form.
    pub(super) fn shard_info(&self) -> Option<Value> {
        self.shard
            .as_ref()
            .map(|shard| serde_json::json!({"selector": shard.to_string()}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn builtin(group: &str, plural: &str) -> ResourceInfo {
        kubewasm_types::registry::Registry::builtin()
            .all()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
            .expect("served")
    }

    fn configmaps() -> ResourceInfo {
        builtin("", "configmaps")
    }

    #[test]
    fn a_views_field_selector_should_select_the_stored_field() {
        let query = HashMap::from([(
            "fieldSelector".to_owned(),
            "regarding.name=web,reportingController=kubewasm/x".to_owned(),
        )]);
        let stored = json!({"involvedObject": {"name": "web"}, "reportingComponent": "kubewasm/x"});
        let view = Filter::from_query(&query, &builtin("events.k8s.io", "events"), true);
        assert!(view.expect("valid").matches(&stored));
    }

    #[test]
    fn field_selectors_should_support_name_and_namespace_only() {
        let f =
            FieldSelector::parse_for("metadata.name=a,metadata.namespace!=b", "configmaps", false)
                .expect("valid");
        assert!(f.matches(&json!({"metadata": {"name": "a", "namespace": "c"}})));
        assert!(!f.matches(&json!({"metadata": {"name": "a", "namespace": "b"}})));
        let refused = FieldSelector::parse_for("spec.nodeName=x", "configmaps", false)
            .err()
            .map(|e| e.to_string());
        assert!(
            refused.as_deref().is_some_and(|e| e.contains(
                r#""spec.nodeName" is not a known field selector: only "metadata.name", "metadata.namespace""#
            )),
            "{refused:?}"
        );
        let refused = FieldSelector::parse_for("spec.nonsense=x", "pods", false)
            .err()
            .map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("field label not supported: spec.nonsense")),
            "{refused:?}"
        );
        let events =
            FieldSelector::parse_for("involvedObject.name=web,type!=Normal", "events", false)
                .expect("valid");
        assert!(events.matches(&json!({"involvedObject": {"name": "web"}, "type": "Warning"})));
        assert!(!events.matches(&json!({"involvedObject": {"name": "web"}, "type": "Normal"})));
    }

    #[test]
    fn shard_selectors_should_split_objects_by_the_hash_of_their_uid() {
        let half = |range: &str| {
            let query = HashMap::from([(
                "shardSelector".to_owned(),
                format!("shardRange(object.metadata.uid,{range})"),
            )]);
            Filter::from_query(&query, &configmaps(), true).expect("valid")
        };
        let (low, high) = (
            half("'0x0000000000000000','0x8000000000000000'"),
            half("'0x8000000000000000','0x10000000000000000'"),
        );
        let objects: Vec<Value> = (0..64)
            .map(|i| json!({"metadata": {"name": "x", "uid": format!("{i:02x}6b1f3e-9d2c-4a1b")}}))
            .collect();
        let in_low = objects.iter().filter(|o| low.matches(o)).count();
        let in_high = objects.iter().filter(|o| high.matches(o)).count();
        assert_eq!(
            in_low + in_high,
            objects.len(),
            "each object in exactly one half"
        );
        assert!(objects.iter().all(|o| low.matches(o) != high.matches(o)));
        assert!(in_low > 0 && in_high > 0, "{in_low} / {in_high}");
        assert_eq!(
            low.shard_info(),
            Some(
                json!({"selector": "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"})
            )
        );
        let bad = HashMap::from([(
            "shardSelector".to_owned(),
            "shardRange(spec.x,'0x0000000000000000','0x0000000000000001')".to_owned(),
        )]);
        let error = Filter::from_query(&bad, &configmaps(), true)
            .err()
            .expect("refused");
        assert!(format!("{error:?}").contains("spec.x"), "{error:?}");
        // Served off, the parameter is ignored, malformed or not.
        let off = Filter::from_query(&bad, &configmaps(), false).expect("ignored");
        assert!(off.shard_info().is_none());
        assert!(objects.iter().all(|o| off.matches(o)));
    }

    #[test]
    fn absent_typed_fields_should_select_as_their_zero_value() {
        let schedulable =
            FieldSelector::parse_for("spec.unschedulable==false", "nodes", false).expect("valid");
        assert!(schedulable.matches(&json!({"metadata": {"name": "n"}})));
        assert!(!schedulable.matches(&json!({"spec": {"unschedulable": true}})));
        let done = FieldSelector::parse_for("status.successful=1", "jobs", false).expect("valid");
        assert!(done.matches(&json!({"status": {"succeeded": 1}})));
        let none = FieldSelector::parse_for("status.successful=0", "jobs", false).expect("valid");
        assert!(none.matches(&json!({"status": {}})));
    }
}
