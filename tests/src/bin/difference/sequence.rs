//! Request sequences: what the tool sends, in the text form the
//! `apiserver_request` fuzz target reads (requests separated by a line
//! `---`, each `METHOD PATH?QUERY`, a line with the content type, then the
//! body), so that a generated sequence, a fuzz seed and a hand-written file
//! are one thing and any of them can be printed and replayed.
//!
//! The content type's line may end with the `Accept` the request sends
//! (`application/json Accept: application/vnd.kubernetes.protobuf,
//! application/json`, or the `Accept: …` alone); a protobuf body
//! (`application/vnd.kubernetes.protobuf`) is written in base64.
//!
//! Placeholders are filled from earlier answers when a request is sent:
//! `{ns}` the sequence's namespace, `{rv}` and `{uid}` the
//! `metadata.resourceVersion` and `metadata.uid` of the last answer that
//! had one, `{rv:N}` and `{uid:N}` those of request `N`'s answer (from 0).

use base64::Engine;
use serde_json::{Value, json};

/// One request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) method: String,
    /// Path and query, placeholders unfilled.
    pub(crate) target: String,
    /// Empty for none.
    pub(crate) content_type: String,
    /// The `Accept` header; empty for none.
    pub(crate) accept: String,
    pub(crate) body: Vec<u8>,
}

/// Kubernetes' protobuf media type.
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Written before a request's `Accept` on its content type's line.
const ACCEPT: &str = "Accept: ";

impl Step {
    /// Whether the body is protobuf (binary: sent as it is, written in
    /// base64, no placeholder filled in it).
    pub(crate) fn protobuf(&self) -> bool {
        self.content_type.starts_with(PROTOBUF)
    }
}

/// Requests run in order against one server, in their own namespace.
#[derive(Clone, Debug)]
pub(crate) struct Sequence {
    /// `resource/verb` (`configmaps/patch`), or `file/<name>`.
    pub(crate) name: String,
    pub(crate) steps: Vec<Step>,
}

impl Sequence {
    /// The resource part of the name (the table's row).
    pub(crate) fn resource(&self) -> &str {
        self.name.split_once('/').map_or(&self.name, |(r, _)| r)
    }

    /// The verb part of the name (the table's column).
    pub(crate) fn verb(&self) -> &str {
        self.name.split_once('/').map_or("", |(_, v)| v)
    }

    /// Whether it was generated for a resource (not a seed or a file).
    pub(crate) fn generated(&self) -> bool {
        !matches!(self.resource(), "fuzz-seed" | "file")
    }

    /// The sequence in its text form.
    pub(crate) fn text(&self) -> String {
        self.steps
            .iter()
            .map(|s| {
                let headers = if s.accept.is_empty() {
                    s.content_type.clone()
                } else {
                    format!("{} {ACCEPT}{}", s.content_type, s.accept)
                        .trim_start()
                        .to_owned()
                };
                let body = if s.protobuf() {
                    base64::engine::general_purpose::STANDARD.encode(&s.body)
                } else {
                    String::from_utf8_lossy(&s.body).into_owned()
                };
                format!("{} {}\n{headers}\n{body}", s.method, s.target)
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    }

    /// A sequence from its text form.
    pub(crate) fn parse(name: &str, text: &str) -> Self {
        let steps = text
            .split("\n---\n")
            .filter_map(|request| {
                let mut lines = request.splitn(3, '\n');
                let (method, target) = lines.next()?.split_once(' ')?;
                let headers = lines.next().unwrap_or_default();
                let (content_type, accept) = headers.split_once(ACCEPT).unwrap_or((headers, ""));
                let mut step = Step {
                    method: method.to_owned(),
                    target: target.to_owned(),
                    content_type: content_type.trim().to_owned(),
                    accept: accept.trim().to_owned(),
                    body: lines.next().unwrap_or_default().as_bytes().to_vec(),
                };
                if step.protobuf() {
                    // A body that is not base64 is sent as written.
                    if let Ok(bytes) =
                        base64::engine::general_purpose::STANDARD.decode(step.body.trim_ascii())
                    {
                        step.body = bytes;
                    }
                }
                Some(step)
            })
            .collect();
        Self {
            name: name.to_owned(),
            steps,
        }
    }
}

/// A resource of `tests/difference/resources.json`.
#[derive(Clone, Debug, serde::Deserialize)]
pub(crate) struct Resource {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    #[serde(default)]
    status: bool,
    #[serde(default)]
    scale: bool,
    /// Created once before the sequences, not sequenced.
    #[serde(default)]
    pub(crate) setup: bool,
    object: Value,
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn step(method: &str, target: String, content_type: &str, body: &Value) -> Step {
    Step {
        method: method.to_owned(),
        target,
        content_type: content_type.to_owned(),
        accept: String::new(),
        body: if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        },
    }
}

/// `value` with every string `{name}` in it made `short`.
fn named(value: &Value, short: &str) -> Value {
    match value {
        Value::String(text) if text == "{name}" => short.into(),
        Value::Array(items) => items.iter().map(|v| named(v, short)).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), named(v, short)))
            .collect(),
        other => other.clone(),
    }
}

fn get(target: String) -> Step {
    step("GET", target, "", &Value::Null)
}

fn delete(target: String) -> Step {
    step("DELETE", target, "", &Value::Null)
}

impl Resource {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection's path, in the sequence's namespace when namespaced.
    fn collection(&self) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{root}/namespaces/{{ns}}/{}", self.plural)
        } else {
            format!("{root}/{}", self.plural)
        }
    }

    /// An object's name: cluster-scoped ones carry the sequence's
    /// namespace, so that sequences do not meet.
    fn name(&self, short: &str) -> String {
        if self.namespaced {
            short.to_owned()
        } else {
            format!("{{ns}}-{short}")
        }
    }

    fn path(&self, short: &str) -> String {
        format!("{}/{}", self.collection(), self.name(short))
    }

    /// A valid object named `short`, labelled `difference: {ns}-<label>`;
    /// `{name}` in the resource's object is `short` (a workload's selector
    /// of its own, so that no two of a sequence's Deployments race to
    /// adopt an orphan, as a real controller manager's workers do).
    fn object(&self, short: &str, label: &str) -> Value {
        let mut object = named(&self.object, short);
        object["apiVersion"] = self.api_version().into();
        object["kind"] = self.kind.clone().into();
        object["metadata"] = json!({
            "name": self.name(short),
            "labels": {"difference": format!("{{ns}}-{label}")},
        });
        object
    }

    fn create(&self, short: &str, label: &str) -> Step {
        step("POST", self.collection(), JSON, &self.object(short, label))
    }

    /// The object the resource's setup creates.
    pub(crate) fn setup_step(&self) -> Step {
        let mut object = self.object.clone();
        object["apiVersion"] = self.api_version().into();
        object["kind"] = self.kind.clone().into();
        let group = object
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let plural = object
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        object["metadata"] = json!({"name": format!("{plural}.{group}")});
        step("POST", self.collection(), JSON, &object)
    }

    /// The sequences of this resource: every verb it serves, with valid
    /// and invalid bodies.
    pub(crate) fn sequences(&self) -> Vec<Sequence> {
        let p = |short: &str| self.path(short);
        let c = self.collection();
        let selector = |label: &str| format!("labelSelector=difference%3D{{ns}}-{label}");
        // Server-side apply of object `a` labelled `label`, with `query`.
        let apply = |query: &str, label: &str| {
            step(
                "PATCH",
                format!("{}?{query}", p("a")),
                APPLY,
                &self.object("a", label),
            )
        };
        let mut all = vec![
            (
                "create",
                vec![
                    self.create("a", "one"),
                    get(p("a")),
                    get(p("missing")),
                    self.create("a", "one"),
                    step(
                        "POST",
                        c.clone(),
                        JSON,
                        &json!({"apiVersion": self.api_version(), "kind": self.kind,
                                "metadata": {"name": "Not_Valid"}}),
                    ),
                    Step {
                        body: b"{\"kind\": ".to_vec(),
                        ..self.create("b", "one")
                    },
                    step(
                        "POST",
                        c.clone(),
                        JSON,
                        &json!({"apiVersion": self.api_version(), "kind": "Wrong",
                                "metadata": {"name": self.name("c")}}),
                    ),
                ],
            ),
            (
                "list",
                vec![
                    self.create("a", "one"),
                    self.create("b", "two"),
                    get(format!("{c}?{}", selector("one"))),
                    get(format!(
                        "{c}?labelSelector=difference%20in%20({{ns}}-one,{{ns}}-two)&limit=1"
                    )),
                    get(format!(
                        "{c}?fieldSelector=metadata.name%3D{}",
                        self.name("b")
                    )),
                    get(format!("{c}?labelSelector=difference%3D%3D")),
                    get(format!("{c}?fieldSelector=spec.nonsense%3Dx")),
                ],
            ),
            (
                "update",
                vec![
                    self.create("a", "one"),
                    {
                        let mut object = self.object("a", "updated");
                        object["metadata"]["resourceVersion"] = "{rv}".into();
                        step("PUT", p("a"), JSON, &object)
                    },
                    {
                        let mut object = self.object("a", "stale");
                        object["metadata"]["resourceVersion"] = "{rv:0}".into();
                        step("PUT", p("a"), JSON, &object)
                    },
                    step("PUT", p("missing"), JSON, &self.object("missing", "one")),
                    step("PUT", p("a"), JSON, &self.object("b", "one")),
                ],
            ),
            (
                "patch",
                vec![
                    self.create("a", "one"),
                    step(
                        "PATCH",
                        p("a"),
                        MERGE,
                        &json!({"metadata": {"labels": {"patched": "merge"}}}),
                    ),
                    step(
                        "PATCH",
                        p("a"),
                        JSON_PATCH,
                        &json!([{"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}]),
                    ),
                    step(
                        "PATCH",
                        p("a"),
                        STRATEGIC,
                        &json!({"metadata": {"labels": {"patched": "strategic"}}}),
                    ),
                    step(
                        "PATCH",
                        p("a"),
                        JSON_PATCH,
                        &json!([{"op": "test", "path": "/metadata/name", "value": "other"}]),
                    ),
                    step(
                        "PATCH",
                        p("a"),
                        MERGE,
                        &json!({"metadata": {"name": "renamed"}}),
                    ),
                    step("PATCH", p("missing"), MERGE, &json!({"metadata": {}})),
                    get(p("a")),
                ],
            ),
            (
                // Bodies of the right JSON but the wrong types, as each reader
                // of a real server refuses them (and nothing stored).
                "decode",
                {
                    let mut wrong = self.object("a", "one");
                    wrong["metadata"]["labels"]["difference"] = 5.into();
                    let mut wrong_kind = self.object("b", "one");
                    wrong_kind["kind"] = 5.into();
                    let mut wrong_update = wrong.clone();
                    wrong_update["metadata"]["resourceVersion"] = "{rv}".into();
                    let labels = json!({"metadata": {"labels": {"difference": 5}}});
                    vec![
                        step("POST", c.clone(), JSON, &wrong),
                        step("POST", c.clone(), JSON, &wrong_kind),
                        self.create("a", "one"),
                        step("PUT", p("a"), JSON, &wrong_update),
                        step("PATCH", p("a"), MERGE, &labels),
                        step("PATCH", p("a"), STRATEGIC, &labels),
                        step(
                            "PATCH",
                            p("a"),
                            JSON_PATCH,
                            &json!([{"op": "add", "path": "/metadata/labels/x", "value": 5}]),
                        ),
                        get(p("a")),
                    ]
                },
            ),
            (
                "apply",
                vec![
                    apply("fieldManager=difference", "one"),
                    apply("fieldManager=difference", "two"),
                    apply("fieldManager=other", "three"),
                    apply("fieldManager=other&force=true", "three"),
                    step("PATCH", p("a"), APPLY, &self.object("a", "four")),
                    get(p("a")),
                ],
            ),
            (
                "delete",
                vec![
                    self.create("a", "one"),
                    self.create("b", "one"),
                    self.create("c", "one"),
                    self.create("d", "one"),
                    delete(p("a")),
                    step(
                        "DELETE",
                        p("b"),
                        JSON,
                        &json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}),
                    ),
                    delete(format!("{}?propagationPolicy=Foreground", p("c"))),
                    delete(p("a")),
                    step(
                        "DELETE",
                        p("d"),
                        JSON,
                        &json!({"kind": "DeleteOptions", "apiVersion": "v1",
                                "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}),
                    ),
                    delete(format!("{}?dryRun=All", p("d"))),
                    get(p("d")),
                ],
            ),
            (
                "deletecollection",
                vec![
                    self.create("a", "gone"),
                    self.create("b", "gone"),
                    self.create("c", "kept"),
                    delete(format!("{c}?{}", selector("gone"))),
                    get(format!("{c}?{}", selector("gone"))),
                    get(format!("{c}?{}", selector("kept"))),
                ],
            ),
            (
                "watch",
                vec![
                    get(format!("{c}?{}", selector("w"))),
                    self.create("a", "w"),
                    step(
                        "PATCH",
                        p("a"),
                        MERGE,
                        &json!({"metadata": {"annotations": {"seen": "yes"}}}),
                    ),
                    delete(p("a")),
                    get(format!(
                        "{c}?watch=true&{}&resourceVersion={{rv:0}}&timeoutSeconds=1",
                        selector("w")
                    )),
                ],
            ),
        ];
        if self.status {
            all.push((
                "status",
                vec![
                    self.create("a", "one"),
                    get(format!("{}/status", p("a"))),
                    step(
                        "PATCH",
                        format!("{}/status", p("a")),
                        MERGE,
                        &json!({"metadata": {"labels": {"via": "status"}}}),
                    ),
                    get(p("a")),
                ],
            ));
        }
        if self.scale {
            all.push((
                "scale",
                vec![
                    self.create("a", "one"),
                    get(format!("{}/scale", p("a"))),
                    step(
                        "PATCH",
                        format!("{}/scale", p("a")),
                        MERGE,
                        &json!({"spec": {"replicas": 0}}),
                    ),
                    step(
                        "PATCH",
                        format!("{}/scale", p("a")),
                        MERGE,
                        &json!({"spec": {"replicas": -1}}),
                    ),
                    get(format!("{}/scale", p("missing"))),
                ],
            ));
        }
        all.into_iter()
            .map(|(verb, steps)| Sequence {
                name: format!("{}/{verb}", self.plural),
                steps,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_should_read_back_from_its_text() {
        let resource: Resource = serde_json::from_value(json!({
            "group": "apps", "version": "v1", "kind": "Deployment", "plural": "deployments",
            "namespaced": true, "object": {"spec": {}}}))
        .expect("resource");
        for sequence in resource.sequences() {
            let again = Sequence::parse(&sequence.name, &sequence.text());
            assert_eq!(again.steps, sequence.steps, "{}", sequence.name);
        }
    }

    #[test]
    fn cluster_scoped_names_should_carry_the_namespace() {
        let resource: Resource = serde_json::from_value(json!({
            "group": "", "version": "v1", "kind": "Namespace", "plural": "namespaces",
            "namespaced": false, "object": {}}))
        .expect("resource");
        let create = &resource.sequences()[0].steps[0];
        assert_eq!(create.target, "/api/v1/namespaces");
        assert!(String::from_utf8_lossy(&create.body).contains("\"name\":\"{ns}-a\""));
    }
}
