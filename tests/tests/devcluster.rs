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
