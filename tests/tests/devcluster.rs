//! The dev cluster as an operator author uses it: what the embedded API
//! server's built-in controllers and simulated kubelet do, read through
//! kubectl, and the API rules a real server applies (CRD metadata schemas,
//! one Event resource with two views).

use std::time::{Duration, Instant};

use kubewasm_tests::Apiserver;
use serde_json::Value;

/// kubectl's JSON output of `args`.
fn json_of(server: &Apiserver, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&server.ok(&all)).expect("kubectl prints JSON")
}

/// Waits until `check` holds, with what kubectl shows of `show` if it never does.
fn until(
    server: &Apiserver,
    what: &str,
    within: Duration,
    show: &[&str],
    mut check: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + within;
    while !check() {
        if Instant::now() > deadline {
            let (_, out, err) = server.kubectl(show);
            panic!("never: {what}\n{out}{err}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn apply(server: &Apiserver, text: &str) -> (bool, String, String) {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), text).expect("written");
    let path = file.path().to_string_lossy().into_owned();
    server.kubectl(&["apply", "-f", &path])
}

/// A CRD as controller-gen (so kubebuilder) writes it: `metadata: {type: object}`.
const CONTROLLER_GEN_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: guestbooks.webapp.example.com
spec:
  group: webapp.example.com
  names: {kind: Guestbook, listKind: GuestbookList, plural: guestbooks, singular: guestbook}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        description: Guestbook is the Schema for the guestbooks API.
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              foo: {type: string}
          status: {type: object}
"#;

#[test]
fn a_controller_gen_crd_should_be_used_as_written() {
    let server = Apiserver::start();
    let (ok, out, err) = apply(&server, CONTROLLER_GEN_CRD);
    assert!(ok, "{out}{err}");
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/guestbooks.webapp.example.com",
    ]);
    let guestbook = "apiVersion: webapp.example.com/v1\nkind: Guestbook\nmetadata:\n  name: gb\n  \
                     labels: {app: web}\n  annotations: {note: kept}\nspec: {foo: bar}\n";
    for extra in [&[][..], &["--validate=false"][..]] {
        let (ok, out, err) = apply(&server, guestbook);
        assert!(ok, "{extra:?}: {out}{err}");
        let stored = json_of(&server, &["get", "guestbook", "gb"]);
        assert_eq!(stored["metadata"]["labels"]["app"], "web", "{stored}");
        assert_eq!(
            stored["metadata"]["annotations"]["note"], "kept",
            "{stored}"
        );
        assert!(
            stored["metadata"]["uid"]
                .as_str()
                .is_some_and(|u| !u.is_empty()),
            "{stored}"
        );
        assert_eq!(stored["spec"]["foo"], "bar");
        server.ok(&["delete", "guestbook", "gb"]);
    }
    // A schema saying more of metadata than its name is refused, in the
    // server's words.
    let refused = CONTROLLER_GEN_CRD
        .replace("guestbooks", "notebooks")
        .replace("Guestbook", "Notebook")
        .replace("guestbook", "notebook")
        .replace(
            "metadata: {type: object}",
            "metadata: {type: object, properties: {labels: {type: object}}}",
        );
    let (ok, out, err) = apply(&server, &refused);
    assert!(!ok, "{out}");
    assert!(
        err.contains("properties[metadata]: Forbidden: must not specify anything other than name and generateName"),
        "{err}"
    );
}

#[test]
fn an_event_written_through_one_api_should_read_through_the_other() {
    let server = Apiserver::start();
    server.ok(&["create", "configmap", "settings", "--from-literal=a=1"]);
    let uid = json_of(&server, &["get", "configmap", "settings"])["metadata"]["uid"]
        .as_str()
        .map(str::to_owned)
        .expect("a uid");
    // What the host's applier writes: events.k8s.io/v1.
    let (ok, out, err) = apply(
        &server,
        &format!(
            "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {{name: settings.1, namespace: default}}\n\
             eventTime: \"2026-12-02T20:00:00.000000Z\"\nreportingController: kubewasm/replicator\n\
             reportingInstance: host-1\naction: Reconcile\nreason: Replicated\ntype: Normal\n\
             note: copied to 3 namespaces\nregarding: {{apiVersion: v1, kind: ConfigMap, name: settings, \
             namespace: default, uid: {uid}}}\n"
        ),
    );
    assert!(ok, "{out}{err}");
    let core = json_of(&server, &["get", "events.v1.", "settings.1"]);
    assert_eq!(core["message"], "copied to 3 namespaces", "{core}");
    assert_eq!(core["involvedObject"]["name"], "settings", "{core}");
    assert_eq!(core["reportingComponent"], "kubewasm/replicator", "{core}");
    assert!(core.get("note").is_none(), "{core}");
    let listed = server.ok(&["get", "events"]);
    assert!(
        listed.contains("Replicated")
            && listed.contains("configmap/settings")
            && listed.contains("copied to 3 namespaces"),
        "{listed}"
    );
    let described = server.ok(&["describe", "configmap", "settings"]);
    assert!(
        described.contains("Replicated") && described.contains("copied to 3 namespaces"),
        "{described}"
    );
    let events = server.ok(&["events", "--for", "configmap/settings"]);
    assert!(events.contains("copied to 3 namespaces"), "{events}");
    // And back: a core Event read through events.k8s.io, selected by a
    // field of that view.
    let (ok, out, err) = apply(
        &server,
        "apiVersion: v1\nkind: Event\nmetadata: {name: settings.2, namespace: default}\n\
         involvedObject: {kind: ConfigMap, name: settings, namespace: default}\n\
         reason: Edited\ntype: Warning\nmessage: edited by hand\nsource: {component: kubectl}\n",
    );
    assert!(ok, "{out}{err}");
    let view = json_of(
        &server,
        &[
            "get",
            "events.v1.events.k8s.io",
            "--field-selector",
            "regarding.name=settings,type=Warning",
        ],
    );
    let items = view["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{view}");
    assert_eq!(items[0]["note"], "edited by hand");
    assert_eq!(items[0]["deprecatedSource"]["component"], "kubectl");
    assert!(items[0].get("message").is_none(), "{view}");
}
