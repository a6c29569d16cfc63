//! Object metadata the server owns: names, uids, timestamps, generations.

use serde_json::{Map, Value, json};

pub use kubewasm_types::value::strings_at;

use kubewasm_core::validation::{Rule, kind_name_rule};

/// The finalizer that keeps a PersistentVolumeClaim a running Pod mounts
/// (`StorageObjectInUseProtection`).
pub const CLAIM_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer that keeps a PersistentVolume bound to a claim.
pub const VOLUME_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The rule of an RFC 1123 subdomain, as apimachinery words it.
const SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
     '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
     validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The rule of an RFC 1123 label, as apimachinery words it (its two spaces
/// included).
const LABEL_RULE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
     and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
     validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Whether `s` has a DNS label's shape, whatever its length.
fn label_shaped(s: &str) -> bool {
    let edge = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    s.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && edge(s.bytes().next())
        && edge(s.bytes().last())
}

/// What `value` breaks of `rule`, each problem a message of its own as
/// apimachinery's `IsDNS1123Label`/`IsDNS1123Subdomain`/path-segment
/// checks give them (the length first).
fn rule_problems(rule: Rule, value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    match rule {
        Rule::DnsLabel => {
            if value.len() > 63 {
                problems.push("must be no more than 63 characters".to_owned());
            }
            if !label_shaped(value) {
                problems.push(LABEL_RULE.to_owned());
            }
        }
        Rule::PathSegment => {
            if value == "." || value == ".." {
                problems.push(format!("may not be '{value}'"));
            }
            if let Some(bad) = ["/", "%"].into_iter().find(|bad| value.contains(bad)) {
                problems.push(format!("may not contain '{bad}'"));
            }
        }
        _ => {
            if value.len() > 253 {
                problems.push("must be no more than 253 characters".to_owned());
            }
            if !value.split('.').all(label_shaped) {
                problems.push(SUBDOMAIN_RULE.to_owned());
            }
        }
    }
    problems
}

/// The rule of a label key's name part, as apimachinery words it (its two
/// spaces included).
const KEY_NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
     with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
     '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// What `value` breaks of a label key's rule (a quota's resource names
/// follow it too), each problem a message of its own, as apimachinery's
/// `IsLabelKey` gives them.
pub fn label_key_problems(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut problems = Vec::new();
    let name = match parts[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                problems.extend(
                    rule_problems(Rule::DnsSubdomain, prefix)
                        .into_iter()
                        // apimachinery's newer content checks count bytes.
                        .map(|why| {
                            format!(
                                "prefix part {}",
                                why.replace(
                                    "no more than 253 characters",
                                    "no more than 253 bytes"
                                )
                            )
                        }),
                );
            }
            name
        }
        _ => {
            return vec![format!(
                "a valid label key {KEY_NAME_RULE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 bytes".to_owned());
    }
    let edge = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    let shaped = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && edge(name.bytes().next())
        && edge(name.bytes().last());
    if !shaped {
        problems.push(format!("name part {KEY_NAME_RULE}"));
    }
    problems
}

/// What the name of an object of `info`'s type breaks, as a real server's
/// validation words it (`metadata.name: ...`, one problem each): the rule
/// is its type's ([`kind_name_rule`]).
pub fn name_problems(info: &kubewasm_types::info::ResourceInfo, name: &str) -> Vec<String> {
    if name.is_empty() {
        return vec!["metadata.name: Required value: name or generateName is required".into()];
    }
    let rule = if info.custom {
        Rule::DnsSubdomain
    } else {
        kind_name_rule(&info.group, &info.kind)
    };
    rule_problems(rule, name)
        .into_iter()
        .map(|why| format!("metadata.name: Invalid value: \"{name}\": {why}"))
        .collect()
}

/// Checks a `generateName` as a real server does: the prefix itself must be
/// a name once a trailing dash is masked (`web-` passes, `web.` does not).
pub fn validate_generate_name(prefix: &str) -> Result<(), String> {
    let masked = match prefix.strip_suffix('-') {
        Some(head) => format!("{head}a"),
        None => prefix.to_owned(),
    };
    if rule_problems(Rule::DnsSubdomain, &masked).is_empty() {
        Ok(())
    } else {
        Err(format!(
            "metadata.generateName: Invalid value: \"{prefix}\": {SUBDOMAIN_RULE}"
        ))
    }
}

/// The string at `pointer`, or `""`.
pub fn text_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Whether `labels` satisfy a `LabelSelector` object (`matchLabels`,
/// `matchExpressions`); an empty selector matches everything.
pub fn selects(selector: &Value, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let match_expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let key = text_at(e, "/key");
            let values = strings_at(e, "/values");
            match (text_at(e, "/operator"), label(key)) {
                ("In", Some(v)) => values.iter().any(|x| x == v),
                ("NotIn", v) => v.is_none_or(|v| !values.iter().any(|x| x == v)),
                ("Exists", v) => v.is_some(),
                ("DoesNotExist", v) => v.is_none(),
                _ => false,
            }
        });
    match_labels && match_expressions
}

/// `conditions` (`metav1.Condition`s, and the conditions shaped like them:
/// a namespace's, an autoscaler's) with `next` set as apimachinery's
/// `SetStatusCondition` sets it: in place of the one of its type, its
/// transition time kept unless its status changed; appended otherwise.
pub fn set_status_condition(conditions: &Value, mut next: Value) -> Value {
    let mut all: Vec<Value> = conditions.as_array().cloned().unwrap_or_default();
    match all.iter_mut().find(|c| c["type"] == next["type"]) {
        Some(existing) => {
            next["lastTransitionTime"] = if existing["status"] == next["status"] {
                existing["lastTransitionTime"].clone()
            } else {
                now().into()
            };
            *existing = next;
        }
        None => {
            next["lastTransitionTime"] = now().into();
            all.push(next);
        }
    }
    Value::Array(all)
}

/// `prefix` plus five random characters, as `generateName` asks.
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String = random
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect();
    format!("{prefix}{suffix}")
}

/// A fresh uid.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Now, as the API writes timestamps (RFC 3339, seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The object's metadata map, created if absent.
pub fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = object.as_object_mut()?;
    map.entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

/// Marks an object's metadata deleted, as a graceful delete does, unless it
/// is already: its `deletionTimestamp` and grace period, and one more
/// `generation` where it keeps one (a real server's `BeforeDelete`).
pub fn begin_deletion(metadata: &mut Map<String, Value>, grace: i64) {
    if metadata.contains_key("deletionTimestamp") {
        return;
    }
    metadata.insert("deletionTimestamp".into(), now().into());
    metadata.insert("deletionGracePeriodSeconds".into(), grace.into());
    if let Some(generation) = metadata
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|g| *g > 0)
    {
        metadata.insert("generation".into(), (generation + 1).into());
    }
}

/// Whether anything but `metadata` and `status` differs: what bumps
/// `metadata.generation`.
pub fn spec_changed(old: &Value, new: &Value) -> bool {
    let content = |v: &Value| -> Vec<(String, Value)> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (mut a, mut b) = (content(old), content(new));
    a.sort_by(|x, y| x.0.cmp(&y.0));
    b.sort_by(|x, y| x.0.cmp(&y.0));
    a != b
}

/// Puts `apiVersion` and `kind` first, then `metadata`, as the API server
/// writes objects.
pub fn canonical_order(object: Value) -> Value {
    let Value::Object(mut map) = object else {
        return object;
    };
    let mut ordered = Map::new();
    for key in ["kind", "apiVersion", "metadata"] {
        if let Some(v) = map.shift_remove(key) {
            ordered.insert(key.to_owned(), v);
        }
    }
    ordered.extend(map);
    Value::Object(ordered)
}

/// A Secret's `stringData` merged into `data` (base64) and dropped, as
/// its conversion from the versioned type does.
fn merge_string_data(object: &mut Value) {
    use base64::Engine as _;
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(Value::Object(plain)) = map.shift_remove("stringData") else {
        return;
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !data.is_object() {
        *data = Value::Object(serde_json::Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in plain {
            if let Value::String(text) = value {
                let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                data.insert(key, Value::String(encoded));
            }
        }
    }
}

/// The defaults a real server sets on a built-in object before a write's
/// fields are recorded, so that the writer owns them: what its decoding
/// sets ([`crate::schema::defaults`]: a Container's `imagePullPolicy`, a
/// Deployment's `progressDeadlineSeconds`, a Namespace's
/// `kubernetes.io/metadata.name` label), and a DaemonSet's
/// `deprecated.daemonset.template.generation` annotation, a Secret's
/// `stringData` merged into its `data`.
pub fn decoded_defaults(info: &kubewasm_types::info::ResourceInfo, object: &mut Value) {
    if info.custom {
        return;
    }
    if (info.group.as_str(), info.kind.as_str()) == ("", "Secret") {
        merge_string_data(object);
    }
    crate::schema::defaults::apply(&info.api_version(), &info.kind, object);
    if (info.group.as_str(), info.kind.as_str()) == ("apps", "DaemonSet")
        && let Some(metadata) = metadata_mut(object)
        && let Value::Object(map) = metadata.entry("annotations").or_insert_with(|| json!({}))
    {
        // It follows the DaemonSet's generation once there.
        map.entry("deprecated.daemonset.template.generation")
            .or_insert_with(|| "1".into());
    }
}

/// Takes out the metadata Go's encoder leaves out when empty (`omitempty`
/// on `ObjectMeta`'s labels, annotations, finalizers and owner references):
/// a real server never stores `finalizers: []`, a custom resource's
/// metadata included (it is coerced through `ObjectMeta`).
pub fn omit_empty_metadata(object: &mut Value) {
    if let Some(metadata) = metadata_mut(object) {
        metadata.retain(|field, value| {
            let listed = matches!(
                field.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences"
            );
            let empty = match value {
                Value::Null => true,
                Value::Array(items) => items.is_empty(),
                Value::Object(entries) => entries.is_empty(),
                _ => false,
            };
            !(listed && empty)
        });
    }
}

/// What a real server does to a built-in object on every write: its
/// decoded defaults ([`decoded_defaults`]; set again, as a patch or an
/// apply is decoded again), then its registry strategy's part: a Pod
/// without a phase is `Pending`.
pub fn normalize_builtin(info: &kubewasm_types::info::ResourceInfo, object: &mut Value) {
    if info.custom {
        return;
    }
    decoded_defaults(info, object);
    // Created Pending, as the registry writes it, for a kubelet to move.
    if (info.group.as_str(), info.kind.as_str()) == ("", "Pod")
        && object.pointer("/status/phase").is_none_or(|p| p == "")
        && let Some(map) = object.as_object_mut()
    {
        let status = map.entry("status").or_insert_with(|| json!({}));
        if let Some(status) = status.as_object_mut() {
            status.insert("phase".into(), "Pending".into());
            status
                .entry("qosClass")
                .or_insert_with(|| "BestEffort".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_metadata_lists_and_maps_should_go_as_go_leaves_them_out() {
        let mut object = json!({"metadata": {"name": "a", "finalizers": [], "labels": {},
            "annotations": {"kept": "yes"}, "ownerReferences": null, "managedFields": []}});
        omit_empty_metadata(&mut object);
        assert_eq!(
            object,
            json!({"metadata": {"name": "a", "annotations": {"kept": "yes"}, "managedFields": []}})
        );
    }
    use serde_json::json;

    fn info(plural: &str) -> kubewasm_types::info::ResourceInfo {
        kubewasm_types::registry::Registry::builtin()
            .all()
            .find(|t| t.plural == plural)
            .cloned()
            .expect("served")
    }

    #[test]
    fn names_should_follow_their_types_rule_in_the_real_servers_words() {
        let configmaps = info("configmaps");
        for good in ["a", "web-1", "a.b.c", "0abc"] {
            assert_eq!(
                name_problems(&configmaps, good),
                Vec::<String>::new(),
                "{good}"
            );
        }
        for bad in ["", "A", "-a", "a-", "a_b", "a..b", &"a".repeat(254)] {
            assert!(!name_problems(&configmaps, bad).is_empty(), "{bad}");
        }
        // A label's rule (Services, Namespaces, StatefulSets), worded as
        // kube-apiserver v1.37.2 words it: the length and the shape apart.
        let long = format!("{}.", "a".repeat(63));
        assert_eq!(
            name_problems(&info("services"), &long),
            vec![
                format!(
                    "metadata.name: Invalid value: \"{long}\": must be no more than 63 characters"
                ),
                format!("metadata.name: Invalid value: \"{long}\": {LABEL_RULE}"),
            ]
        );
        assert!(name_problems(&info("statefulsets"), "a.b").len() == 1);
        assert!(name_problems(&info("poddisruptionbudgets"), "Not_Valid").is_empty());
    }

    #[test]
    fn rbac_names_should_be_path_segments() {
        let rbac = info("clusterroles");
        for good in ["system:controller:foo", "Admins_2", "a..b"] {
            assert!(name_problems(&rbac, good).is_empty(), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "50%"] {
            assert!(!name_problems(&rbac, bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn a_generate_name_should_be_checked_as_a_real_server_checks_it() {
        for good in ["web-", "web", "kube-root-ca.crt-"] {
            assert!(validate_generate_name(good).is_ok(), "{good}");
        }
        // kube-apiserver v1.37.2 refuses an Event generated from `kube-root-ca.crt.`.
        let refused = validate_generate_name("kube-root-ca.crt.").expect_err("a trailing dot");
        assert!(
            refused.starts_with("metadata.generateName: Invalid value: \"kube-root-ca.crt.\""),
            "{refused}"
        );
        assert!(validate_generate_name("Web-").is_err());
    }

    #[test]
    fn generated_names_should_be_valid_and_differ() {
        let (a, b) = (generate_name("web-"), generate_name("web-"));
        assert!(
            a.starts_with("web-")
                && a.len() == 9
                && name_problems(&info("configmaps"), &a).is_empty()
        );
        assert_ne!(a, b);
    }

    #[test]
    fn generation_should_follow_spec_not_metadata_or_status() {
        let old = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}, "status": {"y": 1}});
        let relabelled =
            json!({"metadata": {"labels": {"a": "2"}}, "spec": {"x": 1}, "status": {"y": 2}});
        let respec = json!({"metadata": {}, "spec": {"x": 2}});
        assert!(!spec_changed(&old, &relabelled));
        assert!(spec_changed(&old, &respec));
    }

    #[test]
    fn canonical_order_should_put_identity_first() {
        let v = canonical_order(
            json!({"data": {}, "metadata": {}, "apiVersion": "v1", "kind": "ConfigMap"}),
        );
        let keys: Vec<_> = v
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["kind", "apiVersion", "metadata", "data"]);
    }
}
