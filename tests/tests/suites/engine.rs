//! The controller engine end to end: the real `kubewasm run` binary against
//! the embedded API server over HTTPS, plugins compiled from source, objects
//! written with the real kubectl.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kubewasm_tests::host::{
    ConfigMapWriter, Host, apply, apply_text, event_notes, eventually, eventually_showing,
    get_json, wait_for,
};
use kubewasm_tests::{
    Apiserver, TestCluster, contract_fixture, example_file, example_plugin, kubewasm_bin,
    test_plugin,
};
use serde_json::Value;

const DEMO: &str = "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: demo\n  namespace: default\n\
                    spec:\n  replicas: 2\n  image: nginx:1.27\n  port: 8080\n";

#[test]
fn myapp_should_converge_rescale_heal_and_clean_up() {
    converges_rescales_heals_and_cleans_up(example_plugin("myapp"));
}

/// The same operator written in Go (plugins/myapp-go), under the same name.
#[test]
fn myapp_in_go_should_converge_rescale_heal_and_clean_up() {
    converges_rescales_heals_and_cleans_up(test_plugin("myapp-go"));
}

/// `component`, a MyApp operator, run as `myapp` through `kubewasm run` with
/// its defaults.
fn converges_rescales_heals_and_cleans_up(component: std::path::PathBuf) {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let host = Host::start(&server, &[("myapp", component)], &[], &[]);
    host.wait_ready();

    apply_text(&server, DEMO);
    eventually("the Deployment and Service exist", &host, || {
        get_json(&server, &["deployment", "demo"]).is_some()
            && get_json(&server, &["service", "demo"]).is_some()
    });
    let deployment =
        get_json(&server, &["deployment", "demo", "--show-managed-fields"]).expect("deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["metadata"]["ownerReferences"][0]["kind"], "MyApp",
        "owned by the MyApp"
    );
    let managers: Vec<_> = deployment["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubewasm-myapp"), "{managers:?}");
    eventually("status.availableReplicas is 2", &host, || {
        get_json(&server, &["myapp", "demo"]).is_some_and(|a| a["status"]["availableReplicas"] == 2)
    });

    // A steady state writes nothing: a change of the MyApp that changes
    // none of its outcome runs the reconcile, whose three applies (the
    // Deployment, the Service, the status) the cluster already holds.
    let count = |series: &str| host.metric(series).unwrap_or(0.0);
    let (sent, held, reconciled) = (
        r#"kubewasm_actions_total{plugin="myapp",result="applied"}"#,
        r#"kubewasm_writes_unchanged_total{plugin="myapp"}"#,
        r#"controller_runtime_reconcile_total{controller="myapp",result="success"}"#,
    );
    let before = (count(sent), count(held), count(reconciled));
    server.ok(&["label", "myapp", "demo", "touched=yes"]);
    eventually(
        "the labelled MyApp reconciled, its applies left out",
        &host,
        || count(reconciled) > before.2 && count(held) >= before.1 + 3.0,
    );
    assert_eq!(count(sent), before.0, "a steady state wrote");

    // Scaling rescales.
    server.ok(&[
        "patch",
        "myapp",
        "demo",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":4}}"#,
    ]);
    eventually(
        "the Deployment rescaled and the status followed",
        &host,
        || {
            get_json(&server, &["deployment", "demo"]).is_some_and(|d| d["spec"]["replicas"] == 4)
                && get_json(&server, &["myapp", "demo"])
                    .is_some_and(|a| a["status"]["availableReplicas"] == 4)
        },
    );

    // A child deleted by hand comes back.
    let old_uid =
        get_json(&server, &["service", "demo"]).expect("service")["metadata"]["uid"].clone();
    server.ok(&["delete", "service", "demo"]);
    eventually("the Service came back", &host, || {
        get_json(&server, &["service", "demo"]).is_some_and(|s| s["metadata"]["uid"] != old_uid)
    });

    // Deleting the MyApp removes its children (they are owned).
    server.ok(&["delete", "myapp", "demo"]);
    eventually("the children are gone", &host, || {
        get_json(&server, &["deployment", "demo"]).is_none()
            && get_json(&server, &["service", "demo"]).is_none()
    });

    let (status, metrics) = host.get("/metrics");
    assert!(status.contains("200"), "{status}");
    assert!(
        metrics
            .contains(r#"controller_runtime_reconcile_total{controller="myapp",result="success"}"#),
        "{metrics}"
    );
    assert!(metrics.contains("workqueue_depth"), "{metrics}");
    // A guest's linear memory: more than its first 64 KiB page, far less
    // than the runtime's limit.
    let memory = host
        .metric(r#"kubewasm_guest_memory_bytes{plugin="myapp"}"#)
        .expect("guest memory reported");
    assert!(
        (65_536.0..256.0 * 1024.0 * 1024.0).contains(&memory),
        "{memory}"
    );
    assert!(
        metrics.contains(
            r#"kubewasm_informer_objects{resource="apps/v1 Deployment",namespace="",selector="",shard=""}"#
        ) || metrics.contains("kubewasm_informer_objects{"),
        "{metrics}"
    );
}

#[test]
fn a_plugin_without_grants_should_be_refused_unless_trusted() {
    let server = Apiserver::start();
    apply(&server, &example_file("myapp", "crd.yaml"));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(example_plugin("myapp"), dir.path().join("myapp.wasm")).expect("built");
    let mut child = Command::new(kubewasm_bin())
        .arg("run")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .arg("--plugins")
        .arg(dir.path())
        .args(["--metrics-addr", "127.0.0.1:0"])
        .arg("--cache-dir")
        .arg(kubewasm_tests::compiled_cache_dir())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stderr = child.stderr.take().expect("stderr");
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("caches synced") && Instant::now() < deadline {
        let n = std::io::Read::read(&mut stderr, &mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("plugin refused"), "{text}");
    assert!(text.contains("myapp.grants.yaml"), "names the file: {text}");
    assert!(
        text.contains("--trust-declarations"),
        "names the way out: {text}"
    );
}

fn data(server: &Apiserver, args: &[&str]) -> Option<Value> {
    get_json(server, args).map(|o| o["data"].clone())
}

#[test]
fn tenant_bootstrap_in_python_should_reach_and_keep_its_desired_state() {
    let server = Apiserver::start();
    let host = Host::run(&server, &["tenant-bootstrap"]);
    host.wait_ready();
    server.ok(&["create", "namespace", "acme"]);
    server.ok(&["label", "namespace", "acme", "kubewasm.dev/tenant=acme"]);
    let children = [
        ["serviceaccount", "tenant-admin"],
        ["rolebinding", "tenant-admin"],
        ["configmap", "tenant-info"],
    ];
    eventually("the tenant's three objects exist", &host, || {
        children
            .iter()
            .all(|[kind, name]| get_json(&server, &[kind, name, "-n", "acme"]).is_some())
    });
    assert_eq!(
        data(&server, &["configmap", "tenant-info", "-n", "acme"]),
        Some(serde_json::json!({"tenant": "acme"}))
    );

    // A hand edit is put back.
    server.ok(&[
        "patch",
        "configmap",
        "tenant-info",
        "-n",
        "acme",
        "--type=merge",
        "-p",
        r#"{"data":{"tenant":"mallory"}}"#,
    ]);
    eventually("the edit is undone", &host, || {
        data(&server, &["configmap", "tenant-info", "-n", "acme"])
            == Some(serde_json::json!({"tenant": "acme"}))
    });

    // Removing the label removes what the plugin made.
    server.ok(&["label", "namespace", "acme", "kubewasm.dev/tenant-"]);
    eventually("the tenant's objects are gone", &host, || {
        children
            .iter()
            .all(|[kind, name]| get_json(&server, &[kind, name, "-n", "acme"]).is_none())
    });
}

#[test]
fn configmap_replicator_in_javascript_should_copy_sync_heal_and_clean_up_through_its_finalizer() {
    let server = Apiserver::start();
    for ns in ["ns-a", "ns-b"] {
        server.ok(&["create", "namespace", ns]);
    }
    let host = Host::run(&server, &["configmap-replicator"]);
    host.wait_ready();
    server.ok(&["create", "configmap", "settings", "--from-literal=K=1"]);
    server.ok(&[
        "annotate",
        "configmap",
        "settings",
        "kubewasm.dev/replicate-to=ns-a,ns-b",
    ]);
    let copied = |ns: &str, value: &str| {
        data(&server, &["configmap", "settings", "-n", ns]) == Some(serde_json::json!({"K": value}))
    };
    eventually("copies in ns-a and ns-b", &host, || {
        copied("ns-a", "1") && copied("ns-b", "1")
    });
    let source = get_json(&server, &["configmap", "settings"]).expect("source");
    assert_eq!(
        source["metadata"]["finalizers"],
        serde_json::json!(["kubewasm.dev/configmap-replicator"]),
        "the host added its finalizer to the source"
    );

    // An update of the source reaches the copies; a hand edit is undone.
    server.ok(&[
        "patch",
        "configmap",
        "settings",
        "--type=merge",
        "-p",
        r#"{"data":{"K":"2"}}"#,
    ]);
    eventually("copies updated", &host, || {
        copied("ns-a", "2") && copied("ns-b", "2")
    });
    server.ok(&[
        "patch",
        "configmap",
        "settings",
        "-n",
        "ns-a",
        "--type=merge",
        "-p",
        r#"{"data":{"K":"hacked"}}"#,
    ]);
    eventually("the hand edit is undone", &host, || copied("ns-a", "2"));
    // A copy deleted by hand comes back: its last state's label maps it to
    // its source.
    let uid = |ns: &str| {
        get_json(&server, &["configmap", "settings", "-n", ns])
            .and_then(|c| c["metadata"]["uid"].as_str().map(str::to_owned))
    };
    let deleted = uid("ns-b").expect("ns-b's copy");
    server.ok(&["delete", "configmap", "settings", "-n", "ns-b"]);
    eventually("the copy deleted by hand is back", &host, || {
        copied("ns-b", "2") && uid("ns-b").is_some_and(|now| now != deleted)
    });

    // A namespace no longer listed loses its copy.
    server.ok(&[
        "annotate",
        "--overwrite",
        "configmap",
        "settings",
        "kubewasm.dev/replicate-to=ns-a",
    ]);
    eventually("ns-b's copy is gone", &host, || {
        get_json(&server, &["configmap", "settings", "-n", "ns-b"]).is_none()
    });

    // Deleting the source runs finalize: the copies go, then the source.
    server.ok(&["delete", "configmap", "settings", "--wait=false"]);
    eventually("every copy and the source are gone", &host, || {
        get_json(&server, &["configmap", "settings", "-n", "ns-a"]).is_none()
            && get_json(&server, &["configmap", "settings"]).is_none()
    });
}

fn myapp(name: &str) -> String {
    DEMO.replace("name: demo", &format!("name: {name}"))
}

#[test]
fn with_leader_election_exactly_one_host_should_reconcile_and_a_standby_take_over() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let flags = ["--leader-elect", "--lease-duration-seconds", "3"];
    let mut first = Host::run_with(&server, &["myapp"], &flags);
    first.wait_ready();
    eventually("the first host leads", &first, || {
        get_json(&server, &["lease", "kubewasm", "-n", "default"]).is_some()
    });
    let second = Host::run_with(&server, &["myapp"], &flags);
    second.wait_ready();

    apply_text(&server, &myapp("one"));
    eventually("one's Deployment", &first, || {
        get_json(&server, &["deployment", "one"]).is_some()
    });
    let success = r#"controller_runtime_reconcile_total{controller="myapp",result="success"}"#;
    assert!(first.metric(success).is_some_and(|n| n > 0.0));
    assert_eq!(
        second.metric(success),
        Some(0.0),
        "the standby reconciles nothing (its counters start at zero)"
    );
    let lease = get_json(&server, &["lease", "kubewasm", "-n", "default"]).expect("lease");
    let leader = lease["spec"]["holderIdentity"].clone();

    // The leader dies without releasing: the standby takes over once the
    // Lease expires, and reconciles what changed meanwhile.
    first.kill();
    let killed = Instant::now();
    apply_text(&server, &myapp("two"));
    eventually("two's Deployment, made by the standby", &second, || {
        get_json(&server, &["deployment", "two"]).is_some()
    });
    let handover = killed.elapsed();
    assert!(handover < Duration::from_secs(12), "took {handover:?}");
    let lease = get_json(&server, &["lease", "kubewasm", "-n", "default"]).expect("lease");
    assert_ne!(lease["spec"]["holderIdentity"], leader);
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    assert!(second.metric(success).is_some_and(|n| n > 0.0));
}

fn replicas(server: &Apiserver, name: &str) -> Option<Value> {
    get_json(server, &["deployment", name]).map(|d| d["spec"]["replicas"].clone())
}

#[test]
fn changes_made_while_the_host_is_stopped_should_converge_once_it_starts() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let mut host = Host::run(&server, &["myapp"]);
    host.wait_ready();
    apply_text(&server, &myapp("kept"));
    apply_text(&server, &myapp("removed"));
    eventually("both converge", &host, || {
        replicas(&server, "kept").is_some() && replicas(&server, "removed").is_some()
    });
    host.kill();

    // With no host running: a new MyApp, a changed one, a deleted one.
    apply_text(&server, &myapp("added"));
    server.ok(&[
        "patch",
        "myapp",
        "kept",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":5}}"#,
    ]);
    server.ok(&["delete", "myapp", "removed"]);

    // The cluster quiet (the removed MyApp's children collected), every
    // change the host could be told of from now on is counted, each
    // watcher's first listing included: each reconcile needs one.
    eventually("the removed MyApp's children collected", &host, || {
        replicas(&server, "removed").is_none()
            && get_json(&server, &["service", "removed"]).is_none()
    });
    let changes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut watchers = Vec::new();
    for kind in ["myapps", "deployments", "services"] {
        let mut watcher = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&server.kubeconfig)
            .args([
                "get",
                kind,
                "--watch",
                "--output-watch-events",
                "-o",
                "name",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl watches");
        let out = watcher.stdout.take().expect("its output");
        let changes = std::sync::Arc::clone(&changes);
        std::thread::spawn(move || {
            for _ in std::io::BufRead::lines(std::io::BufReader::new(out)) {
                changes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        watchers.push(watcher);
    }
    // Listed: two MyApps, kept's Deployment, its Service and `kubernetes`.
    eventually("the watchers listed", &host, || {
        changes.load(std::sync::atomic::Ordering::SeqCst) >= 5
    });
    let host = Host::run(&server, &["myapp"]);
    host.wait_ready();
    let state = || {
        server
            .kubectl(&["get", "myapps,deployments", "-o", "yaml"])
            .1
    };
    eventually_showing("everything converges", &host, state, || {
        replicas(&server, "added") == Some(2.into())
            && replicas(&server, "kept") == Some(5.into())
            && replicas(&server, "removed").is_none()
            && get_json(&server, &["myapp", "kept"])
                .is_some_and(|a| a["status"]["availableReplicas"] == 5)
    });

    // Settled: with nothing changing, nothing is reconciled again (no-op
    // applies do not bump resourceVersions, so no write causes another).
    let success = r#"controller_runtime_reconcile_total{controller="myapp",result="success"}"#;
    let mut settled = host.metric(success);
    eventually("reconciles stop", &host, || {
        std::thread::sleep(Duration::from_millis(1500));
        let now = host.metric(success);
        std::mem::replace(&mut settled, now) == now
    });
    // Each reconcile has a cause: a primary's own change, its Deployment and
    // Service created, its status written, the rollout's status writes (a
    // real controller-manager writes one as each Pod becomes ready), its
    // status written again; deduplicated when they meet.
    let total = settled.unwrap_or_default();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(host.metric(success), settled, "a settled host stays idle");
    for mut watcher in watchers {
        let _ = watcher.kill();
        let _ = watcher.wait();
    }
    let changes = changes.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        total <= changes as f64,
        "two primaries converged in {total} reconciles: more than the {changes} changes that could cause them"
    );
}

#[test]
fn dropped_watches_and_expired_history_should_still_converge() {
    if !TestCluster::embedded_only("restarting the server over its --data-dir") {
        return;
    }
    let data = tempfile::tempdir().expect("tempdir");
    let data_dir = data.path().to_str().unwrap_or_default().to_owned();
    let flags = ["--simulate-workloads", "--data-dir", &data_dir];
    let server = Apiserver::start_with(&flags);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let host = Host::run(&server, &["myapp"]);
    host.wait_ready();
    apply_text(&server, &myapp("before"));
    eventually("before converges", &host, || {
        replicas(&server, "before").is_some()
    });

    // The server goes away (every watch drops) and comes back at the same
    // address with its history gone: resuming watches get 410 and relist.
    let listen = server.listen();
    let kubeconfig = server.kubeconfig.clone();
    let copy = data.path().join("host.kubeconfig");
    std::fs::copy(&kubeconfig, &copy).expect("kubeconfig kept");
    assert!(server.terminate().success());
    let server = Apiserver::start_at(&listen, &flags);
    apply_text(&server, &myapp("after"));
    server.ok(&[
        "patch",
        "myapp",
        "before",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    eventually("both converge after the restart", &host, || {
        replicas(&server, "after") == Some(2.into())
            && replicas(&server, "before") == Some(3.into())
    });
    let (_, metrics) = host.get("/metrics");
    let restarts = metrics
        .lines()
        .filter(|l| l.starts_with("kubewasm_informer_watch_restarts_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(restarts > 0.0, "the watch errors were counted: {metrics}");
}

/// Contract versioning: components built against 0.1.0 and 0.2.0 (Rust),
/// kept as they were built, and one of 0.3.0 (JavaScript) in one host, on
/// the same objects.
#[test]
fn plugins_of_contracts_0_1_0_2_and_0_3_should_run_side_by_side_in_one_host() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let host = Host::start(
        &server,
        &[
            ("myapp", contract_fixture("0.2.0", "myapp")),
            (
                "config-rollout",
                contract_fixture("0.1.0", "config-rollout"),
            ),
            (
                "configmap-replicator",
                example_plugin("configmap-replicator"),
            ),
        ],
        &[],
        &[],
    );
    host.wait_ready();
    let log = host.log();
    for (plugin, contract) in [
        ("myapp", "0.2.0"),
        ("config-rollout", "0.1.0"),
        ("configmap-replicator", "0.3.0"),
    ] {
        assert!(
            log.lines().any(|l| l.contains(&format!("plugin={plugin} "))
                && l.contains(&format!("contract=\"{contract}\""))),
            "{plugin} on {contract}: {log}"
        );
    }

    // The 0.2.0 plugin creates the Deployment; the 0.1.0 one annotates it
    // for the ConfigMap labelled for it; the JavaScript 0.3.0 one copies
    // that ConfigMap into another namespace.
    apply_text(&server, DEMO);
    server.ok(&["create", "namespace", "copies"]);
    server.ok(&[
        "create",
        "configmap",
        "demo-settings",
        "--from-literal=LOG_LEVEL=debug",
    ]);
    server.ok(&[
        "label",
        "configmap",
        "demo-settings",
        "kubewasm.dev/rollout=demo",
    ]);
    server.ok(&[
        "annotate",
        "configmap",
        "demo-settings",
        "kubewasm.dev/replicate-to=copies",
    ]);
    eventually(
        "myapp converged, config-rollout annotated, the replicator copied",
        &host,
        || {
            let deployment = get_json(&server, &["deployment", "demo"]);
            get_json(&server, &["myapp", "demo"])
                .is_some_and(|a| a["status"]["availableReplicas"] == 2)
                && deployment.is_some_and(|d| {
                    d["spec"]["template"]["metadata"]["annotations"]["kubewasm.dev/config-hash"]
                        .is_string()
                })
                && get_json(&server, &["configmap", "demo-settings", "-n", "copies"]).is_some()
        },
    );
    let deployment =
        get_json(&server, &["deployment", "demo", "--show-managed-fields"]).expect("deployment");
    let managers: Vec<_> = deployment["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        managers.contains(&"kubewasm-myapp") && managers.contains(&"kubewasm-config-rollout"),
        "{managers:?}"
    );
    for plugin in ["myapp", "config-rollout", "configmap-replicator"] {
        assert_eq!(
            host.metric(&format!(
                r#"controller_runtime_reconcile_total{{controller="{plugin}",result="error"}}"#
            )),
            Some(0.0),
            "{plugin} never failed: {}",
            host.log()
        );
    }
}

/// Contract 0.2.0's primary selector and unforced apply, against the real
/// server: only the selected ConfigMaps are watched, cached and reconciled,
/// and a field a person set is never overwritten by the plugin's apply.
#[test]
fn a_primary_selector_should_limit_the_watch_and_an_unforced_apply_should_yield_to_a_person() {
    let server = Apiserver::start();
    let host = Host::start(
        &server,
        &[("selective", test_plugin("selective"))],
        &[],
        &[],
    );
    host.wait_ready();
    server.ok(&["create", "configmap", "ignored", "--from-literal=a=b"]);
    // A person owns `mine-shared`'s `owner` entry, with another value.
    let person = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine-shared\n  namespace: default\n\
                  data:\n  owner: person\n";
    let file = host.dir().join("person.yaml");
    std::fs::write(&file, person).expect("write");
    server.ok(&[
        "apply",
        "--server-side",
        "--field-manager=person",
        "-f",
        file.to_str().unwrap_or_default(),
    ]);
    for name in ["picked", "mine"] {
        server.ok(&["create", "configmap", name, "--from-literal=a=b"]);
        server.ok(&["label", "configmap", name, "kubewasm.dev/selected=yes"]);
    }
    eventually("the selected ConfigMap's share is applied", &host, || {
        get_json(&server, &["configmap", "picked-shared"])
            .is_some_and(|cm| cm["data"]["owner"] == "selective")
    });
    eventually(
        "the apply that would overwrite a person's entry fails",
        &host,
        || {
            host.metric(r#"kubewasm_reconcile_errors_total{plugin="selective",kind="api"}"#)
                .is_some_and(|n| n > 0.0)
        },
    );
    assert_eq!(
        get_json(&server, &["configmap", "mine-shared"]).expect("kept")["data"]["owner"],
        "person",
        "the person's value stands"
    );
    assert!(
        host.log().contains("conflict"),
        "the failure names the conflict: {}",
        host.log()
    );
    assert!(
        get_json(&server, &["configmap", "ignored-shared"]).is_none(),
        "an unselected ConfigMap is not reconciled"
    );
    // The plugin's informer holds the selected ConfigMaps only.
    let (_, metrics) = host.get("/metrics");
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("kubewasm_informer_objects{")
                && l.contains(r#"selector="kubewasm.dev/selected=yes""#)
        })
        .unwrap_or_default();
    assert!(line.ends_with(" 2"), "{line}\n{metrics}");
}

#[test]
fn a_failing_plugin_should_back_off_and_never_slow_another() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    // misbehave reconciles every ConfigMap and loops until its deadline.
    let host = Host::start(
        &server,
        &[
            ("myapp", example_plugin("myapp")),
            ("misbehave", test_plugin("misbehave")),
        ],
        &[("misbehave.config.yaml", "mode: loop\n")],
        &["--deadline-ms", "200"],
    );
    host.wait_ready();
    server.ok(&["create", "configmap", "victim", "--from-literal=a=b"]);
    apply_text(&server, DEMO);
    eventually("myapp converges beside the looping plugin", &host, || {
        get_json(&server, &["myapp", "demo"]).is_some_and(|a| a["status"]["availableReplicas"] == 2)
    });

    // Its failures are counted, and each key's retries wait longer and
    // longer: the backoff histogram fills ever higher buckets.
    // Retries that waited longer than `seconds`, from the histogram's
    // cumulative buckets (`le` is printed first).
    let longer_than = |seconds: f64| {
        let (_, text) = host.get("/metrics");
        let series = |l: &str| {
            let rest = l.strip_prefix("kubewasm_workqueue_retry_backoff_seconds_bucket{le=\"")?;
            let (le, rest) = rest.split_once('"')?;
            let count = rest.strip_prefix(",plugin=\"misbehave\"} ")?;
            Some((le.parse::<f64>().ok()?, count.parse::<f64>().ok()?))
        };
        let buckets: Vec<(f64, f64)> = text.lines().filter_map(series).collect();
        let all = buckets.iter().map(|b| b.1).fold(0.0, f64::max);
        let within = buckets
            .iter()
            .filter(|(le, _)| *le >= seconds)
            .map(|b| b.1)
            .fold(all, f64::min);
        all - within
    };
    eventually("retries back off past 40 ms", &host, || {
        longer_than(0.04) > 0.0
    });
    assert!(
        longer_than(0.0) > longer_than(0.04),
        "and shorter ones first"
    );
    assert!(
        host.metric(r#"kubewasm_reconcile_errors_total{plugin="misbehave",kind="deadline"}"#)
            .is_some_and(|n| n > 0.0),
        "{}",
        host.get("/metrics").1
    );
    assert_eq!(
        host.metric(r#"controller_runtime_reconcile_total{controller="myapp",result="error"}"#),
        Some(0.0),
        "myapp never failed"
    );
}

#[test]
fn sigterm_should_stop_cleanly_and_release_the_lease() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let mut host = Host::run_with(&server, &["myapp"], &["--leader-elect"]);
    host.wait_ready();
    let holder = || {
        get_json(&server, &["lease", "kubewasm", "-n", "default"])
            .map(|l| l["spec"]["holderIdentity"].clone())
    };
    eventually("it holds the Lease", &host, || {
        holder().is_some_and(|h| h.is_string())
    });
    apply_text(&server, DEMO);
    eventually("demo converges", &host, || {
        replicas(&server, "demo").is_some()
    });
    let status = host.terminate();
    assert!(status.success(), "{status}: {}", host.log());
    assert_eq!(
        holder(),
        Some(Value::Null),
        "released for a standby to take at once"
    );
    assert!(host.log().contains("released the lease"), "{}", host.log());
}

#[test]
fn sigterm_should_not_wait_for_a_plugin_still_compiling() {
    let server = Apiserver::start();
    // The JavaScript example made a component no cache has seen (a custom
    // section of its own): it starts on baseline code while the optimizing
    // compiler works on it for tens of seconds in a debug build.
    let dir = tempfile::tempdir().expect("tempdir");
    let unseen = dir.path().join("unseen.wasm");
    let mut bytes = std::fs::read(example_plugin("configmap-replicator")).expect("built");
    let nonce = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    );
    let name = b"kubewasm-test";
    let payload = [&[name.len() as u8][..], name, nonce.as_bytes()].concat();
    bytes.push(0);
    // A one-byte LEB128 length.
    let length = u8::try_from(payload.len()).ok().filter(|n| *n < 0x80);
    bytes.push(length.expect("a short section"));
    bytes.extend(payload);
    std::fs::write(&unseen, bytes).expect("written");
    let mut host = Host::start(&server, &[("replicator", unseen)], &[], &[]);
    host.wait_ready();
    assert!(
        !host.log().contains("optimized code compiled"),
        "compiled before SIGTERM, so this run shows nothing: {}",
        host.log()
    );
    let asked = Instant::now();
    let status = host.terminate();
    let took = asked.elapsed();
    assert!(status.success(), "{status}: {}", host.log());
    assert!(
        !host.log().contains("optimized code compiled"),
        "the exit waited for the compile: {}",
        host.log()
    );
    assert!(
        took < Duration::from_secs(10),
        "{took:?} from SIGTERM to exit: {}",
        host.log()
    );
}

/// The notes of the `Language` events about each ConfigMap, by its name.
fn languages(server: &Apiserver) -> std::collections::BTreeMap<String, Vec<String>> {
    event_notes(server, "default", "Language")
}

#[test]
fn a_plugin_replaced_on_disk_should_be_swapped_in_place_kept_when_broken_and_stopped_when_gone() {
    let server = Apiserver::start();
    // `hot` says its language in an event on every reconcile of a ConfigMap.
    let host = Host::start(
        &server,
        &[("hot", test_plugin("misbehave"))],
        &[("hot.config.yaml", "mode: language\n")],
        &[],
    );
    host.wait_ready();
    let loads = |result: &str| {
        host.metric(&format!(
            r#"kubewasm_plugin_loads_total{{plugin="hot",result="{result}"}}"#
        ))
        .unwrap_or(0.0)
    };
    assert_eq!(loads("loaded"), 1.0);

    // ConfigMaps keep coming while the component is replaced.
    let writer = ConfigMapWriter::start(&server, "default");
    eventually("the first ConfigMaps are reconciled in Rust", &host, || {
        languages(&server)
            .get("t-002")
            .is_some_and(|notes| notes.contains(&"rust".to_owned()))
    });
    host.put_plugin("hot", &test_plugin("misbehave-py"));
    // A first load compiles the interpreter: minutes on a loaded machine.
    wait_for(
        "the Python version is swapped in",
        &host,
        Duration::from_secs(300),
        String::new,
        || loads("swapped") == 1.0,
    );
    writer.assert_swapped(&server, &host, "python", || languages(&server));

    // A broken new version is refused; the running one keeps serving.
    host.put_plugin("hot", &test_plugin("not-a-plugin"));
    eventually("the broken version is refused", &host, || {
        loads("refused") == 1.0
    });
    assert!(
        host.log()
            .contains("new version refused; the running version keeps serving"),
        "{}",
        host.log()
    );
    server.ok(&["create", "configmap", "after-broken", "--from-literal=a=b"]);
    eventually("the Python version still serves", &host, || {
        languages(&server)
            .get("after-broken")
            .is_some_and(|n| n == &["python"])
    });

    // A version of another primary type is another controller: the old one
    // stops, the new one starts under the same name.
    std::fs::remove_file(host.dir().join("hot.config.yaml")).expect("removed");
    host.put_plugin("hot", &example_plugin("config-rollout"));
    eventually("restarted as a Deployment controller", &host, || {
        host.log().contains("restarting the controller")
            && host
                .get("/metrics")
                .1
                .contains(r#"kubewasm_informer_objects{resource="apps/v1 Deployment",namespace="",selector="",shard=""}"#)
    });
    assert_eq!(loads("swapped"), 2.0);

    // Gone from the directory: stopped.
    host.remove_plugin("hot");
    eventually("the plugin is stopped", &host, || loads("removed") == 1.0);
    server.ok(&["create", "configmap", "after-removal", "--from-literal=a=b"]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !languages(&server).contains_key("after-removal"),
        "nothing reconciles it"
    );
    assert!(
        !host
            .get("/metrics")
            .1
            .contains(r#"workqueue_depth{name="hot",controller="hot"}"#),
        "its queue is gone"
    );
}

#[test]
fn a_plugin_confined_to_a_namespace_should_watch_only_it_and_need_no_more_rights() {
    let server = Apiserver::start();
    // The host's account may read and write ConfigMaps, read Pods and
    // write events in team-a, and nothing in any other namespace.
    for args in [
        &["create", "namespace", "team-a"][..],
        &["-n", "team-a", "create", "serviceaccount", "host"],
        &[
            "-n",
            "team-a",
            "create",
            "role",
            "host",
            "--verb=get,list,watch,patch,delete",
            "--resource=configmaps,pods",
        ],
        &[
            "-n",
            "team-a",
            "create",
            "role",
            "host-events",
            "--verb=create,patch",
            "--resource=events.events.k8s.io",
        ],
        &[
            "-n",
            "team-a",
            "create",
            "rolebinding",
            "host",
            "--role=host",
            "--serviceaccount=team-a:host",
        ],
        &[
            "-n",
            "team-a",
            "create",
            "rolebinding",
            "host-events",
            "--role=host-events",
            "--serviceaccount=team-a:host",
        ],
        &[
            "-n",
            "team-a",
            "create",
            "configmap",
            "inside",
            "--from-literal=a=b",
        ],
        &["create", "configmap", "outside", "--from-literal=a=b"],
    ] {
        server.ok(args);
    }
    let (allowed, _, _) = server.kubectl(&[
        "auth",
        "can-i",
        "list",
        "configmaps",
        "-A",
        "--as=system:serviceaccount:team-a:host",
    ]);
    assert!(!allowed, "no cluster-wide list for the host's account");
    let token = server.ok(&["-n", "team-a", "create", "token", "host"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig =
        server.kubeconfig_with_token(token.trim(), &dir.path().join("host.kubeconfig"));
    let host = Host::start_as(
        &kubeconfig,
        &[("confined", test_plugin("misbehave"))],
        &[
            ("confined.config.yaml", "mode: language\n"),
            ("confined.grants.yaml", "namespaces: [team-a]\n"),
        ],
        &[],
    );
    // Ready means every informer listed: a cluster-wide one would be
    // refused (403) and never list.
    host.wait_ready();
    let noted = |namespace: &str, name: &str| {
        get_json(&server, &["events.v1.events.k8s.io", "-n", namespace]).is_some_and(|e| {
            e["items"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["reason"] == "Language" && e["regarding"]["name"] == name)
        })
    };
    eventually("the ConfigMap in team-a is reconciled", &host, || {
        noted("team-a", "inside")
    });
    assert!(
        !noted("default", "outside"),
        "nothing outside team-a reconciled"
    );
    let (_, metrics) = host.get("/metrics");
    for resource in ["v1 ConfigMap", "v1 Pod"] {
        assert!(
            metrics.contains(&format!(
                r#"kubewasm_informer_objects{{resource="{resource}",namespace="team-a","#
            )),
            "a {resource} informer scoped to team-a: {metrics}"
        );
        assert!(
            !metrics.contains(&format!(
                r#"kubewasm_informer_objects{{resource="{resource}",namespace="","#
            )),
            "no cluster-wide {resource} informer: {metrics}"
        );
    }
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("kubewasm_informer_watch_restarts_total{") && !l.ends_with(" 0")),
        "no watch refused: {metrics}"
    );
    let log = host.log();
    assert!(
        !log.contains("outside"),
        "never told of another namespace: {log}"
    );
    assert!(!log.contains("forbidden"), "{log}");
}

/// Scales the `demo` MyApp to `replicas` and waits for its Deployment to
/// follow.
fn scale_demo(server: &Apiserver, host: &Host, replicas: u32, what: &str) {
    let patch = format!(r#"{{"spec":{{"replicas":{replicas}}}}}"#);
    server.ok(&["patch", "myapp", "demo", "--type=merge", "-p", &patch]);
    eventually(what, host, || {
        get_json(server, &["deployment", "demo"]).is_some_and(|d| d["spec"]["replicas"] == replicas)
    });
}

#[test]
fn a_plugin_named_by_an_oci_reference_should_run_retry_and_outlive_its_registry() {
    use kubewasm_tests::registry::Registry;
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let registry = Registry::start();
    let reference = format!("oci://{}/plugins/myapp:1.0", registry.addr);
    let pushed = Command::new(kubewasm_bin())
        .args([
            "push",
            example_plugin("myapp").to_str().unwrap_or_default(),
            &reference,
        ])
        .arg("--plain-http")
        .arg("--cache-dir")
        .arg(kubewasm_tests::compiled_cache_dir())
        .output()
        .expect("push runs");
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let digest = String::from_utf8_lossy(&pushed.stdout).trim().to_owned();
    // The host caches artifacts beside its compiled code: this one must be
    // cached by this test's first host, not found from an earlier run.
    let cached =
        kubewasm_runtime::private_dir::PrivateDir::open(kubewasm_tests::compiled_cache_dir())
            .expect("the host's directory")
            .path()
            .join("artifacts")
            .join(format!("{}.wasm", digest.replace(':', "-")));
    let _ = std::fs::remove_file(&cached);
    let flags = ["--plain-http"];
    let text = format!("{reference}\n");
    let host = Host::start(&server, &[], &[("myapp.oci", &text)], &flags);
    host.wait_ready();
    eventually("the tag resolved to the digest pushed", &host, || {
        host.log().contains(&format!("digest={digest}"))
    });
    // The component it runs, by its own digest, in `/metrics`.
    let component = std::fs::read(example_plugin("myapp")).expect("built");
    let runs = format!(
        r#"kubewasm_plugin_info{{plugin="myapp",digest="{}"}}"#,
        kubewasm_engine::oci::digest_of(&component)
    );
    assert_eq!(host.metric(&runs), Some(1.0), "{runs}");
    apply_text(&server, DEMO);
    eventually(
        "the MyApp pulled from the registry converges",
        &host,
        || {
            get_json(&server, &["myapp", "demo"])
                .is_some_and(|a| a["status"]["availableReplicas"] == 2)
        },
    );

    // A plugin whose registry cannot be reached is refused, saying so; the
    // other keeps running, and keeps running once its own registry is gone.
    std::fs::write(
        host.dir().join("other.oci"),
        "127.0.0.1:1/plugins/other:1\n",
    )
    .expect("written");
    eventually("the unreachable registry is reported", &host, || {
        let log = host.log();
        log.contains("plugin refused") && log.contains("registry 127.0.0.1:1")
    });
    // A tag not pushed yet is refused too, and tried again with backoff:
    // pushed later, it loads, its file unchanged.
    let loads = |result: &str| {
        host.metric(&format!(
            r#"kubewasm_plugin_loads_total{{plugin="late",result="{result}"}}"#
        ))
    };
    std::fs::write(host.dir().join("late.config.yaml"), "mode: language\n").expect("written");
    std::fs::write(
        host.dir().join("late.oci"),
        format!("{}/plugins/late:1\n", registry.addr),
    )
    .expect("written");
    eventually("the tag not pushed is refused", &host, || {
        loads("refused").is_some()
    });
    registry.push(&test_plugin("misbehave"), "plugins/late:1");
    eventually("the tag pushed later loads", &host, || {
        loads("loaded") == Some(1.0)
    });
    drop(registry);
    scale_demo(&server, &host, 3, "still reconciled with the registry gone");
    drop(host);
    assert!(cached.is_file(), "{} cached", cached.display());

    // Pinned by digest, it loads from the artifact cache: no registry.
    let pinned = format!("{}\n", reference.replace(":1.0", &format!("@{digest}")));
    let host = Host::start(&server, &[], &[("myapp.oci", &pinned)], &flags);
    host.wait_ready();
    scale_demo(
        &server,
        &host,
        1,
        "a restarted host loads the cached artifact",
    );
}

/// A CronJob of the kubebuilder book's tutorial, `schedule` its schedule,
/// `policy` its concurrency policy; its Jobs end when their Pods have run
/// (`finishing`), or never: their Pods ask for a Node label no Node has,
/// so they stay Pending on either server (kwok, as the embedded
/// simulation, completes a Job's Pod once it runs).
fn book_cronjob(name: &str, schedule: &str, policy: &str, finishing: bool) -> String {
    let pods = if finishing {
        "\x20       metadata:\n          annotations: {kubewasm.dev/simulate: succeed}\n        spec:\n"
    } else {
        "\x20       spec:\n          nodeSelector: {kubewasm.dev/no-such-node: \"true\"}\n"
    };
    format!(
        "apiVersion: batch.tutorial.kubebuilder.io/v1\nkind: CronJob\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  schedule: '{schedule}'\n  concurrencyPolicy: {policy}\n  successfulJobsHistoryLimit: 1\n  jobTemplate:\n    spec:\n      template:\n\
         {pods}\x20         restartPolicy: Never\n\
         \x20         containers: [{{name: hello, image: busybox}}]\n"
    )
}

/// The names of the Jobs of CronJob `name` now.
fn jobs_of(server: &Apiserver, name: &str) -> Vec<String> {
    get_json(server, &["jobs"])
        .and_then(|list| list["items"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|job| job["metadata"]["ownerReferences"][0]["name"] == name)
        .filter_map(|job| job["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The kubebuilder book's CronJob controller, written in Go
/// (plugins/cronjob-go), on the dev cluster (whose simulated kubelet runs
/// Jobs' Pods): a Job for each run of the schedule, the history limit kept,
/// and the concurrency policies honoured.
#[test]
fn cronjob_in_go_should_run_jobs_on_schedule_keep_history_and_honour_concurrency() {
    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("cronjob-go", "crd.yaml"));
    let host = Host::run(&server, &["cronjob"]);
    host.wait_ready();
    apply_text(&server, &book_cronjob("every", "@every 2s", "Allow", true));
    apply_text(
        &server,
        &book_cronjob("forbid", "@every 2s", "Forbid", false),
    );
    apply_text(
        &server,
        &book_cronjob("replace", "@every 2s", "Replace", false),
    );

    // Allow: a Job per run, the finished ones beyond the limit deleted.
    let mut seen = std::collections::BTreeSet::new();
    eventually("four runs of `every`", &host, || {
        seen.extend(jobs_of(&server, "every"));
        seen.len() >= 4
    });
    eventually(
        "one finished Job of `every` kept (and one at most running)",
        &host,
        || jobs_of(&server, "every").len() <= 2,
    );
    let cronjob = get_json(
        &server,
        &["cronjobs.batch.tutorial.kubebuilder.io", "every"],
    )
    .expect("the CronJob");
    assert!(
        cronjob["status"]["lastScheduleTime"].is_string(),
        "{cronjob}"
    );

    // Forbid: its first Job never ends, so no other runs.
    let forbidden = jobs_of(&server, "forbid");
    assert_eq!(forbidden.len(), 1, "{forbidden:?}");
    let status = get_json(
        &server,
        &["cronjobs.batch.tutorial.kubebuilder.io", "forbid"],
    )
    .expect("the CronJob")["status"]
        .clone();
    assert_eq!(
        status["active"][0]["name"],
        forbidden[0].as_str(),
        "{status}"
    );

    // Replace: each run deletes the running Job and starts its own.
    let mut replaced = std::collections::BTreeSet::new();
    eventually("`replace` replaced its Job twice", &host, || {
        let now = jobs_of(&server, "replace");
        replaced.extend(now);
        replaced.len() >= 3
    });
    assert!(jobs_of(&server, "forbid").len() == 1, "Forbid held");
}
