//! What real controllers need of the host, end to end (the real `kubewasm
//! run` with its defaults but the flags named, the embedded API server,
//! kubectl): calls skipped when their inputs are unchanged, and what a
//! skip must never cost (a child deleted by hand still comes back).

use kubewasm_tests::host::{Host, apply, apply_text, eventually, get_json};
use kubewasm_tests::resources::counted;
use kubewasm_tests::{Apiserver, example_file};

/// A MyApp `name` in `default` with `replicas`.
fn myapp(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  replicas: {replicas}\n  image: nginx:1.27\n  port: 8080\n"
    )
}

const SUCCEEDED: &str = r#"kubewasm_reconcile_total{plugin="myapp",result="success"}"#;
const SKIPPED: &str = r#"kubewasm_reconcile_skipped_total{plugin="myapp"}"#;

#[test]
fn a_resync_of_unchanged_keys_should_be_skipped_and_a_changed_key_run() {
    let server = Apiserver::start();
    apply(&server, &example_file("myapp", "crd.yaml"));
    let host = Host::run_with(&server, &["myapp"], &["--resync-seconds", "2"]);
    host.wait_ready();
    for name in ["a", "b", "c"] {
        apply_text(&server, &myapp(name, 1));
    }
    eventually("every MyApp has its Deployment and Service", &host, || {
        ["a", "b", "c"].iter().all(|name| {
            get_json(&server, &["deployment", name]).is_some()
                && get_json(&server, &["service", name]).is_some()
        })
    });
    // Settled: the next resyncs find every input unchanged.
    eventually("resyncs skip the three keys", &host, || {
        counted(&host, SKIPPED) >= 3.0
    });
    let (calls, skips) = (counted(&host, SUCCEEDED), counted(&host, SKIPPED));
    eventually("two more resyncs, skipped", &host, || {
        counted(&host, SKIPPED) >= skips + 6.0
    });
    assert_eq!(
        counted(&host, SUCCEEDED),
        calls,
        "no call while nothing changed:\n{}",
        host.get("/metrics").1
    );

    // A change runs its key (and only what it touches).
    server.ok(&[
        "patch",
        "myapp",
        "b",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    eventually("the changed MyApp is reconciled", &host, || {
        get_json(&server, &["deployment", "b"]).is_some_and(|d| d["spec"]["replicas"] == 3)
    });
    assert!(counted(&host, SUCCEEDED) > calls);

    // A child myapp applies without reading it, deleted by hand, comes
    // back: what the outcome wrote is an input too.
    let old = get_json(&server, &["service", "a"]).expect("service")["metadata"]["uid"].clone();
    server.ok(&["delete", "service", "a"]);
    eventually("the deleted Service came back", &host, || {
        get_json(&server, &["service", "a"]).is_some_and(|s| s["metadata"]["uid"] != old)
    });
    // Edited by hand: put back.
    server.ok(&[
        "patch",
        "deployment",
        "c",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":7}}"#,
    ]);
    eventually("the edited Deployment was put back", &host, || {
        get_json(&server, &["deployment", "c"]).is_some_and(|d| d["spec"]["replicas"] == 1)
    });
}
