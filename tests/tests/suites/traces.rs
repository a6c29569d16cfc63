//! Traces as an operator collects them: `kubewasm run --otlp-endpoint`
//! exporting to an OTLP receiver on loopback (tests/src/otlp.rs), each
//! reconcile a span with the guest call, its cache reads, the planning and
//! each API write under it, attributes and outcome as the engine's
//! `controller::span` module names them.

use kubewasm_tests::host::{Host, apply, apply_text, eventually_showing, get_json};
use kubewasm_tests::otlp::{Received, Receiver};
use kubewasm_tests::{Apiserver, example_file, example_plugin, test_plugin};

const DEMO: &str = "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: demo\n  namespace: default\n\
                    spec:\n  replicas: 2\n  image: nginx:1.27\n  port: 8080\n";

/// A person's entry the `selective` plugin's unforced apply would take:
/// the server refuses that apply (409).
const PERSON: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine-shared\n  namespace: default\n\
                      data:\n  owner: person\n";

/// The children of `parent` named `name`.
fn children<'a>(spans: &'a [Received], parent: &Received, name: &str) -> Vec<&'a Received> {
    spans
        .iter()
        .filter(|s| s.name == name && s.is_child_of(parent))
        .collect()
}

/// The reconcile spans of `key` by `plugin` that ended with `outcome`.
fn reconciles<'a>(
    spans: &'a [Received],
    plugin: &str,
    key: &str,
    outcome: &str,
) -> Vec<&'a Received> {
    spans
        .iter()
        .filter(|s| {
            s.name == "reconcile"
                && s.attribute("kubewasm.plugin") == plugin
                && s.attribute("kubewasm.key") == key
                && s.attribute("kubewasm.outcome") == outcome
        })
        .collect()
}

/// The writes under `reconcile`.
fn writes<'a>(spans: &'a [Received], reconcile: &Received) -> Vec<&'a Received> {
    spans
        .iter()
        .filter(|s| s.is_child_of(reconcile) && !s.attribute("kubewasm.action").is_empty())
        .collect()
}

/// What the MyApp's first reconcile writes, besides its status.
const CHILDREN: [&str; 2] = [
    "/apis/apps/v1/namespaces/default/deployments/demo",
    "/api/v1/namespaces/default/services/demo",
];

/// A reconcile span with its guest call, and each write, under it: the
/// Deployment's and the Service's applies among them.
fn complete(spans: &[Received], reconcile: &Received) -> bool {
    let paths: Vec<_> = writes(spans, reconcile)
        .iter()
        .map(|w| w.attribute("url.path"))
        .collect();
    children(spans, reconcile, "kubewasm.plugin.reconcile").len() == 1
        && CHILDREN.iter().all(|p| paths.contains(p))
}

#[test]
fn a_span_per_reconcile_should_reach_the_collector_with_the_guest_call_and_each_write_under_it() {
    let receiver = Receiver::start().expect("the OTLP receiver");
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let endpoint = receiver.endpoint();
    let host = Host::start(
        &server,
        &[
            ("myapp", example_plugin("myapp")),
            ("selective", test_plugin("selective")),
        ],
        &[],
        &["--otlp-endpoint", &endpoint],
    );
    host.wait_ready();
    apply_text(&server, DEMO);
    apply_text(&server, PERSON);
    server.ok(&["create", "configmap", "mine", "--from-literal=a=b"]);
    server.ok(&["label", "configmap", "mine", "kubewasm.dev/selected=yes"]);

    let shown = || {
        let spans = receiver.spans();
        let names: std::collections::BTreeSet<_> = spans.iter().map(|s| s.name.as_str()).collect();
        format!(
            "{} spans received: {names:?}; refused: {:?}",
            spans.len(),
            receiver.refused()
        )
    };
    // The MyApp converges: a successful reconcile, its guest call and its
    // writes (the Deployment's and Service's applies, the status) under it.
    eventually_showing(
        "a successful reconcile of the MyApp, traced whole",
        &host,
        shown,
        || {
            get_json(&server, &["myapp", "demo"])
                .is_some_and(|a| a["status"]["availableReplicas"] == 2)
                && {
                    let spans = receiver.spans();
                    reconciles(&spans, "myapp", "default/demo", "success")
                        .iter()
                        .any(|r| complete(&spans, r))
                }
        },
    );
    // The refused apply: its reconcile failed, its write says 409.
    eventually_showing(
        "a failed reconcile with its refused write",
        &host,
        shown,
        || {
            let spans = receiver.spans();
            reconciles(&spans, "selective", "default/mine", "error")
                .iter()
                .any(|r| {
                    children(&spans, r, "apply")
                        .iter()
                        .any(|w| w.attribute("http.response.status_code") == "409" && w.status == 2)
                })
        },
    );

    let spans = receiver.spans();
    assert!(receiver.refused().is_empty(), "{:?}", receiver.refused());
    let reconcile = reconciles(&spans, "myapp", "default/demo", "success")
        .into_iter()
        .find(|r| complete(&spans, r))
        .expect("found above");
    // A root span, its attributes in OpenTelemetry's and Kubernetes' names.
    assert!(reconcile.parent_span_id.is_empty(), "a root: {reconcile:?}");
    assert_eq!(reconcile.attribute("k8s.namespace.name"), "default");
    assert_eq!(reconcile.attribute("kubewasm.object.name"), "demo");
    assert_eq!(
        reconcile.attribute("kubewasm.resource"),
        "example.com/v1 MyApp"
    );
    let digest = reconcile.attribute("kubewasm.digest");
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{reconcile:?}"
    );
    assert!(
        reconcile
            .attribute("kubewasm.queue.wait")
            .parse::<f64>()
            .is_ok(),
        "{reconcile:?}"
    );
    assert_eq!(
        reconcile.resource.get("service.name").map(String::as_str),
        Some("kubewasm")
    );
    assert_ne!(reconcile.status, 2, "not an error: {reconcile:?}");
    // The guest call, its cache reads under it (the primary, the children).
    let call = children(&spans, reconcile, "kubewasm.plugin.reconcile")[0];
    assert!(
        !children(&spans, call, "kubewasm.cache.get").is_empty(),
        "cache reads under the guest call: {:?}",
        spans
            .iter()
            .filter(|s| s.is_child_of(call))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        children(&spans, reconcile, "kubewasm.plan").len(),
        1,
        "planned once"
    );
    // Each write: a client span with its method, path and status.
    let writes = writes(&spans, reconcile);
    for write in &writes {
        assert_eq!(write.kind, 3, "a client span: {write:?}");
        assert_eq!(write.attribute("http.request.method"), "PATCH", "{write:?}");
        assert!(write.attribute("url.path").starts_with("/ap"), "{write:?}");
        assert!(
            matches!(write.attribute("http.response.status_code"), "200" | "201"),
            "{write:?}"
        );
    }
    assert!(writes.len() >= CHILDREN.len(), "{writes:?}");
    // The failed one: an error, its message given.
    let failed = reconciles(&spans, "selective", "default/mine", "error")[0];
    assert_eq!(failed.status, 2, "{failed:?}");
}
