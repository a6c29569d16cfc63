//! What real controllers need of the host, end to end (the real `kubewasm
//! run` with its defaults but the flags named, the embedded API server,
//! kubectl): calls skipped when their inputs are unchanged, and what a
//! skip must never cost (a child deleted by hand still comes back); calls
//! recorded by the host and replayed byte for byte.

use std::path::{Path, PathBuf};
use std::process::Command;

use kubewasm_tests::host::{Host, apply, apply_text, event_notes, eventually, get_json};
use kubewasm_tests::resources::counted;
use kubewasm_tests::{Apiserver, example_file, example_plugin, kubewasm_bin, test_plugin};
use serde_json::Value;

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

/// The fixtures recorded of `plugin` under `dir`.
fn fixtures(dir: &Path, plugin: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(plugin))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

#[test]
fn recorded_calls_should_replay_byte_for_byte_with_secrets_redacted() {
    let server = Apiserver::start();
    apply(&server, &example_file("myapp", "crd.yaml"));
    let record = tempfile::tempdir().expect("dir");
    let record_dir = record.path().to_str().expect("utf-8");
    let host = Host::start(
        &server,
        &[
            ("myapp", example_plugin("myapp")),
            ("snoop", test_plugin("snoop")),
        ],
        &[],
        &["--record", record_dir, "--record-max-files", "50"],
    );
    host.wait_ready();
    server.ok(&[
        "create",
        "secret",
        "generic",
        "token",
        "--from-literal=password=hunter2",
    ]);
    server.ok(&["create", "configmap", "watched", "--from-literal=a=b"]);
    apply_text(&server, &myapp("recorded", 2));
    eventually("myapp made its Deployment", &host, || {
        get_json(&server, &["deployment", "recorded"]).is_some()
    });
    eventually("snoop told what it saw", &host, || {
        event_notes(&server, "default", "Saw").contains_key("watched")
    });
    eventually("both recorded", &host, || {
        !fixtures(record.path(), "myapp").is_empty() && !fixtures(record.path(), "snoop").is_empty()
    });
    let mut replayed = 0;
    for (plugin, component) in [
        ("myapp", example_plugin("myapp")),
        ("snoop", test_plugin("snoop")),
    ] {
        for fixture in fixtures(record.path(), plugin) {
            let recorded: Value =
                serde_json::from_slice(&std::fs::read(&fixture).expect("fixture")).expect("json");
            let Some(report) = recorded.get("report") else {
                continue;
            };
            let out = Command::new(kubewasm_bin())
                .args(["replay"])
                .arg(&component)
                .arg("--fixture")
                .arg(&fixture)
                .args(["-o", "json"])
                .env("KUBEWASM_CACHE_DIR", kubewasm_tests::compiled_cache_dir())
                .output()
                .expect("replay runs");
            assert!(
                out.status.success(),
                "{}: {}",
                fixture.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let expected = serde_json::to_string_pretty(report).expect("json") + "\n";
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                expected,
                "{} replays byte for byte",
                fixture.display()
            );
            replayed += 1;
        }
    }
    assert!(replayed >= 2, "{replayed} fixtures replayed");
    // Secrets' values never reach a fixture.
    let snooped: Vec<String> = fixtures(record.path(), "snoop")
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("fixture"))
        .collect();
    assert!(
        snooped.iter().any(|text| text.contains("\"token\"")),
        "the Secret was read"
    );
    assert!(
        snooped.iter().all(|text| !text.contains("aHVudGVyMg==")),
        "its value is redacted"
    );
    // A fixture edited (what the step read changed) no longer replays as
    // recorded, and replay says so.
    let fixture = fixtures(record.path(), "myapp")
        .into_iter()
        .rev()
        .find(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("\"report\"")))
        .expect("a myapp fixture");
    let mut edited: Value =
        serde_json::from_slice(&std::fs::read(&fixture).expect("fixture")).expect("json");
    for object in edited["objects"].as_array_mut().expect("objects") {
        if object["kind"] == "MyApp" {
            object["spec"]["replicas"] = 9.into();
        }
    }
    let edited_path = record.path().join("edited.json");
    std::fs::write(&edited_path, edited.to_string()).expect("written");
    let out = Command::new(kubewasm_bin())
        .arg("replay")
        .arg(example_plugin("myapp"))
        .arg("--fixture")
        .arg(&edited_path)
        .env("KUBEWASM_CACHE_DIR", kubewasm_tests::compiled_cache_dir())
        .output()
        .expect("replay runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("differs from the recording"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
