//! What real controllers need of the host, end to end (the real `kubewasm
//! run` with its defaults but the flags named, the embedded API server,
//! kubectl): calls skipped when their inputs are unchanged, and what a
//! skip must never cost (a child deleted by hand still comes back); calls
//! recorded by the host and replayed byte for byte; a cluster-scoped
//! primary granted namespaces, system ones among them, and a refused child
//! told on its primary.

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

const SUCCEEDED: &str =
    r#"controller_runtime_reconcile_total{controller="myapp",result="success"}"#;
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
    // Settled: a whole resync of the three keys skipped, no call meanwhile
    // (a reconcile's own status write runs its key once more, at its own
    // pace: the test waits for that, not for a count that may come first).
    eventually(
        "a resync skips the three keys, nothing called",
        &host,
        || {
            let (calls, skips) = (counted(&host, SUCCEEDED), counted(&host, SKIPPED));
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while counted(&host, SKIPPED) < skips + 3.0 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            counted(&host, SKIPPED) >= skips + 3.0 && counted(&host, SUCCEEDED) == calls
        },
    );
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
    // Complete ones: a fixture being written is a `.json.partial`.
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(plugin))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
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
                "{}: {}\nreplayed:\n{}recorded:\n{}",
                fixture.display(),
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout),
                serde_json::to_string_pretty(&recorded).expect("json"),
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

const PROPAGATION_CRD: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: propagations.example.com
spec:
  group: example.com
  scope: Cluster
  names:
    kind: Propagation
    plural: propagations
    singular: propagation
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

/// A Propagation `everywhere` of `namespaces`.
fn propagation(namespaces: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Propagation\nmetadata:\n  name: everywhere\n\
         spec:\n  namespaces: [{namespaces}]\n  data:\n    greeting: hello\n"
    )
}

#[test]
fn a_cluster_scoped_primary_should_reach_the_namespaces_granted_and_a_refused_child_be_told() {
    let server = Apiserver::start();
    apply_text(&server, PROPAGATION_CRD);
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/propagations.example.com",
    ]);
    server.ok(&["create", "namespace", "team-b"]);
    // The grants file beside it is what it may do (trusting declarations
    // only stands in for a missing one).
    let host = Host::start(
        &server,
        &[("propagate", test_plugin("propagate"))],
        &[(
            "propagate.grants.yaml",
            "namespaces: [default, kube-system]\n",
        )],
        &[],
    );
    host.wait_ready();
    eventually("the plugin loaded under its grants", &host, || {
        counted(
            &host,
            r#"kubewasm_plugin_loads_total{plugin="propagate",result="loaded"}"#,
        ) >= 1.0
    });
    apply_text(&server, &propagation("default, kube-system"));
    eventually("copied into default and kube-system (named)", &host, || {
        get_json(&server, &["configmap", "propagated", "-n", "default"]).is_some()
            && get_json(&server, &["configmap", "propagated", "-n", "kube-system"]).is_some()
    });
    apply_text(&server, &propagation("default, kube-system, team-b"));
    eventually(
        "the refusal is told on the Propagation, naming the copy",
        &host,
        || {
            event_notes(&server, "default", "OutcomeRefused")
                .get("everywhere")
                .is_some_and(|notes| {
                    notes
                        .iter()
                        .any(|n| n.contains("v1 ConfigMap `team-b/propagated`"))
                })
        },
    );
    assert!(
        counted(
            &host,
            r#"kubewasm_reconcile_errors_total{plugin="propagate",kind="denied"}"#
        ) >= 1.0,
        "{}",
        host.get("/metrics").1
    );
    assert!(get_json(&server, &["configmap", "propagated", "-n", "team-b"]).is_none());
}

/// Whether `kind` `name` exists in `default`.
fn exists(server: &Apiserver, kind: &str, name: &str) -> bool {
    get_json(server, &[kind, name]).is_some()
}

#[test]
fn children_declared_as_a_set_should_be_pruned_when_dropped_and_others_kept_and_replay_print_it() {
    let server = Apiserver::start();
    let record = tempfile::tempdir().expect("dir");
    let record_dir = record.path().to_str().expect("utf-8");
    let host = Host::start(
        &server,
        &[("composite", test_plugin("composite"))],
        &[],
        &["--record", record_dir, "--record-plugin", "composite"],
    );
    host.wait_ready();
    server.ok(&[
        "create",
        "configmap",
        "parent",
        "--from-literal=children=a,b",
    ]);
    server.ok(&["label", "configmap", "parent", "composite=yes"]);
    eventually("both children made", &host, || {
        ["parent-a", "parent-b"]
            .iter()
            .all(|name| exists(&server, "serviceaccount", name) && exists(&server, "secret", name))
    });
    // A ServiceAccount of the same name pattern that the plugin did not
    // apply, controlled by nothing: never pruned.
    server.ok(&["create", "serviceaccount", "parent-c"]);

    // Dropping `b`: its ServiceAccount (a set) goes, its Secret (not one)
    // stays, and `a` is untouched.
    server.ok(&[
        "patch",
        "configmap",
        "parent",
        "--type=merge",
        "-p",
        r#"{"data":{"children":"a"}}"#,
    ]);
    eventually("the dropped ServiceAccount is pruned", &host, || {
        !exists(&server, "serviceaccount", "parent-b")
    });
    assert!(exists(&server, "secret", "parent-b"), "not a set: kept");
    assert!(
        exists(&server, "serviceaccount", "parent-a"),
        "still returned"
    );
    assert!(
        exists(&server, "serviceaccount", "parent-c"),
        "not the plugin's"
    );

    // The recorded step that pruned replays byte for byte, the delete
    // printed.
    let prunes = |fixture: &PathBuf| {
        let recorded: Value = std::fs::read(fixture)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        recorded["report"]["actions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| {
                a["method"] == "DELETE"
                    && a["path"] == "/api/v1/namespaces/default/serviceaccounts/parent-b"
            })
    };
    eventually("the pruning step recorded", &host, || {
        fixtures(record.path(), "composite").iter().any(prunes)
    });
    let fixture = fixtures(record.path(), "composite")
        .into_iter()
        .find(prunes)
        .expect("the pruning fixture");
    let out = Command::new(kubewasm_bin())
        .arg("replay")
        .arg(test_plugin("composite"))
        .arg("--fixture")
        .arg(&fixture)
        .env("KUBEWASM_CACHE_DIR", kubewasm_tests::compiled_cache_dir())
        .output()
        .expect("replay runs");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains(
            "method: DELETE\n  path: /api/v1/namespaces/default/serviceaccounts/parent-b\n"
        ),
        "{printed}"
    );
}

/// The summary `reader` wrote for the Secret `watch`: what it read.
fn summary(server: &Apiserver) -> Option<(String, String)> {
    let data = get_json(server, &["configmap", "watch-summary"])?["data"].clone();
    Some((
        data["named"].as_str()?.to_owned(),
        data["listed"].as_str()?.to_owned(),
    ))
}

#[test]
fn reads_as_triggers_should_rerun_a_key_when_what_it_read_changes_or_enters_its_list() {
    let server = Apiserver::start();
    let host = Host::start(&server, &[("reader", test_plugin("reader"))], &[], &[]);
    host.wait_ready();
    server.ok(&["create", "configmap", "source", "--from-literal=value=1"]);
    server.ok(&["create", "secret", "generic", "watch"]);
    server.ok(&["annotate", "secret", "watch", "kubewasm.dev/reads=source"]);
    server.ok(&["label", "secret", "watch", "summary=yes"]);
    let read =
        |named: &str, listed: &str| summary(&server) == Some((named.to_owned(), listed.to_owned()));
    eventually("the first summary", &host, || read("1", ""));

    // The ConfigMap it got by name changes: the Secret runs again.
    server.ok(&[
        "patch",
        "configmap",
        "source",
        "--type=merge",
        "-p",
        r#"{"data":{"value":"2"}}"#,
    ]);
    eventually("the named ConfigMap's change re-ran it", &host, || {
        read("2", "")
    });
    // One enters the selector it listed, then leaves it.
    server.ok(&["create", "configmap", "web-a"]);
    server.ok(&["label", "configmap", "web-a", "tier=web"]);
    eventually("a ConfigMap entering its list re-ran it", &host, || {
        read("2", "web-a")
    });
    server.ok(&["label", "--overwrite", "configmap", "web-a", "tier=db"]);
    eventually("a ConfigMap leaving its list re-ran it", &host, || {
        read("2", "")
    });
    // The one it named goes.
    server.ok(&["delete", "configmap", "source"]);
    eventually("the named ConfigMap's deletion re-ran it", &host, || {
        read("absent", "")
    });
    // A ConfigMap it never read triggers nothing (its summary is one).
    let runs = || {
        counted(
            &host,
            r#"controller_runtime_reconcile_total{controller="reader",result="success"}"#,
        )
    };
    let before = runs();
    server.ok(&["create", "configmap", "unrelated"]);
    server.ok(&["create", "configmap", "sentinel", "--from-literal=value=3"]);
    server.ok(&[
        "annotate",
        "--overwrite",
        "secret",
        "watch",
        "kubewasm.dev/reads=sentinel",
    ]);
    eventually("the Secret's own change re-ran it", &host, || read("3", ""));
    assert_eq!(runs(), before + 1.0, "only the Secret's change ran it");
}

/// The report `reporter` applied: its count and the time it was for.
fn report(server: &Apiserver) -> Option<(String, jiff::Timestamp)> {
    let data = get_json(server, &["configmap", "report"])?["data"].clone();
    Some((
        data["count"].as_str()?.to_owned(),
        data["at"].as_str()?.parse().ok()?,
    ))
}

#[test]
fn a_scheduled_plugin_should_be_called_on_its_schedule_with_its_reads() {
    let server = Apiserver::start();
    let host = Host::start(&server, &[("reporter", test_plugin("reporter"))], &[], &[]);
    host.wait_ready();
    eventually("the first report", &host, || {
        report(&server).is_some_and(|(count, _)| count == "0")
    });
    for name in ["one", "two"] {
        server.ok(&["create", "configmap", name]);
        server.ok(&["label", "configmap", name, "tally=yes"]);
    }
    eventually("a later call read them", &host, || {
        report(&server).is_some_and(|(count, _)| count == "2")
    });
    // On the schedule: every two seconds, on even seconds.
    let (_, first) = report(&server).expect("a report");
    eventually("another call, later", &host, || {
        report(&server).is_some_and(|(_, at)| at > first)
    });
    let (_, second) = report(&server).expect("a report");
    for at in [first, second] {
        assert_eq!(at.as_second() % 2, 0, "{at} is on the schedule");
        assert_eq!(at.subsec_nanosecond(), 0, "{at} is on the schedule");
    }
    let calls = counted(
        &host,
        r#"kubewasm_scheduled_total{plugin="reporter",result="success"}"#,
    );
    assert!(calls >= 3.0, "{calls} calls");
}

#[test]
fn a_primary_leaving_the_selector_with_the_finalizer_should_be_finalized_and_let_go() {
    let server = Apiserver::start();
    let host = Host::start(
        &server,
        &[("composite", test_plugin("composite"))],
        &[],
        &[],
    );
    host.wait_ready();
    server.ok(&["create", "configmap", "parent", "--from-literal=children=a"]);
    server.ok(&["label", "configmap", "parent", "composite=yes"]);
    let finalizers = || {
        get_json(&server, &["configmap", "parent"]).map(|cm| cm["metadata"]["finalizers"].clone())
    };
    eventually("the child made and the finalizer added", &host, || {
        exists(&server, "serviceaccount", "parent-a")
            && finalizers() == Some(serde_json::json!(["kubewasm.dev/composite"]))
    });
    // The label goes: the plugin no longer sees it, but it still holds the
    // finalizer. `finalize` cleans up and the host lets it go.
    server.ok(&["label", "configmap", "parent", "composite-"]);
    eventually(
        "finalized: children deleted, finalizer removed",
        &host,
        || {
            !exists(&server, "serviceaccount", "parent-a")
                && !exists(&server, "secret", "parent-a")
                && finalizers().is_some_and(|f| f.as_array().is_none_or(Vec::is_empty))
        },
    );
    // Deleting it now is not held up by the plugin.
    server.ok(&["delete", "configmap", "parent", "--timeout=10s"]);
}
