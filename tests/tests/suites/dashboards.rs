//! The dashboard and the alerts an operator imports, tested for real: a real
//! Prometheus (Debian's) scrapes two `kubewasm run` hosts running the
//! examples against the API server (one a ring of one, one a standby whose
//! Lease another holds), with a plugin misbehaving on purpose and one that
//! is refused. Every query of `deploy/grafana/kubewasm.json`, every query
//! of controller-runtime's stock dashboards (kubebuilder's Grafana plugin),
//! what kubernetes-mixin's `KubeClientErrors` alert divides by (client-go's
//! `rest_client_requests_total`), and every alert of
//! `deploy/prometheus/alerts.yaml` must come back with data; `promtool` checks the rules, and the dashboard is checked against
//! Grafana's schema.

use std::path::Path;
use std::time::{Duration, Instant};

use kubewasm_tests::host::{Host, apply, apply_text, create_all};
use kubewasm_tests::prometheus::{Prometheus, Target};
use kubewasm_tests::{
    Apiserver, example_file, example_plugin, go_built, test_plugin, workspace_root,
};
use serde_json::Value;

const DEMO: &str = "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: demo\n  namespace: default\n\
                    spec:\n  replicas: 2\n  image: nginx:1.27\n  port: 8080\n";

/// The labels a Kubernetes service discovery would give each host.
const JOB: &str = "kubewasm";
const NAMESPACE: &str = "kubewasm-system";

/// What kubebuilder's Grafana plugin (`grafana/v1-alpha`) queries in the
/// two dashboards it scaffolds for a controller-runtime project,
/// `controller-runtime-metrics.json` and `controller-resources-metrics.json`
/// (their `$job`, `$namespace` and `$pod` variables as given).
const CONTROLLER_RUNTIME_DASHBOARDS: &[&str] = &[
    r#"controller_runtime_active_workers{job="$job", namespace="$namespace"}"#,
    r#"sum(rate(controller_runtime_reconcile_total{job="$job", namespace="$namespace"}[5m])) by (instance, pod)"#,
    r#"sum(rate(controller_runtime_reconcile_errors_total{job="$job", namespace="$namespace"}[5m])) by (instance, pod)"#,
    r#"workqueue_depth{job="$job", namespace="$namespace"}"#,
    r#"histogram_quantile(0.50, sum(rate(workqueue_queue_duration_seconds_bucket{job="$job", namespace="$namespace"}[5m])) by (instance, name, le))"#,
    r#"histogram_quantile(0.99, sum(rate(workqueue_queue_duration_seconds_bucket{job="$job", namespace="$namespace"}[5m])) by (instance, name, le))"#,
    r#"sum(rate(workqueue_adds_total{job="$job", namespace="$namespace"}[5m])) by (instance, name)"#,
    r#"rate(workqueue_unfinished_work_seconds{job="$job", namespace="$namespace"}[5m])"#,
    r#"histogram_quantile(0.90, sum(rate(workqueue_work_duration_seconds_bucket{job="$job", namespace="$namespace"}[5m])) by (instance, name, le))"#,
    r#"sum(rate(workqueue_retries_total{job="$job", namespace="$namespace"}[5m])) by (instance, name)"#,
    r#"rate(process_cpu_seconds_total{job="$job", namespace="$namespace", pod="$pod"}[5m]) * 100"#,
    r#"process_resident_memory_bytes{job="$job", namespace="$namespace", pod="$pod"}"#,
    r#"label_values(controller_runtime_reconcile_total, namespace)"#,
    r#"label_values(controller_runtime_reconcile_total{namespace=~"$namespace"}, job)"#,
    r#"label_values(controller_runtime_reconcile_total{namespace=~"$namespace", job=~"$job"}, pod)"#,
];

/// What kubernetes-mixin's `KubeClientErrors` alert (kube-prometheus'
/// stock rules) divides by: every client's request rate, by instance and
/// job. Its numerator (5xx answers) has series only while a server fails.
const KUBE_CLIENT_ERRORS_DENOMINATOR: &str =
    "sum(rate(rest_client_requests_total[5m])) by (instance, job)";

/// The alerts `deploy/prometheus/alerts.yaml` defines, each provoked here.
const ALERTS: [&str; 4] = [
    "KubewasmReconcileErrors",
    "KubewasmWorkQueueGrowing",
    "KubewasmNoLeader",
    "KubewasmPluginRefused",
];

fn dashboard() -> Value {
    let path = workspace_root().join("deploy/grafana/kubewasm.json");
    let text = std::fs::read_to_string(&path).expect("the dashboard");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every query of a Grafana dashboard: each panel's targets and each
/// query variable's.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let panels = dashboard["panels"].as_array().into_iter().flatten();
    for panel in panels.filter(|p| p["type"] != "row") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            found.push((format!("panel {}", panel["title"]), expr.to_owned()));
        }
    }
    let variables = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten();
    for variable in variables.filter(|v| v["type"] == "query") {
        let query = variable["query"]["query"].as_str().unwrap_or_default();
        found.push((format!("variable {}", variable["name"]), query.to_owned()));
    }
    found
}

/// A dashboard's query as Grafana would send it: variables replaced by
/// what was chosen (every plugin), and `label_values(SELECTOR, LABEL)` as
/// the series it reads.
fn promql(query: &str) -> String {
    let query = query
        .replace("$__rate_interval", "30s")
        .replace("$job", JOB)
        .replace("$namespace", NAMESPACE)
        .replace("$pod", "ring-0")
        .replace("$plugin", ".*");
    match query
        .strip_prefix("label_values(")
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|args| args.rsplit_once(','))
    {
        Some((selector, label)) => format!("count by ({}) ({selector})", label.trim()),
        None => query,
    }
}

fn rules_file() -> std::path::PathBuf {
    workspace_root().join("deploy/prometheus/alerts.yaml")
}

/// A Lease another process holds for an hour.
fn held_lease(name: &str) -> String {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ");
    format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  holderIdentity: another-host\n  leaseDurationSeconds: 3600\n  acquireTime: {now}\n  renewTime: {now}\n"
    )
}

/// A MyApp of no replicas, `prefix-i`.
fn myapps(prefix: &str, i: usize) -> Vec<Value> {
    vec![
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "MyApp",
        "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default"},
        "spec": {"replicas": 0, "image": "nginx:1.27", "port": 8080}}),
    ]
}

/// ConfigMaps the misbehaving plugin sees (`misbehave=visible`), each
/// asking it for `attack`.
fn attacks(prefix: &str, attack: &str, from: usize, count: usize) -> Vec<Value> {
    (from..from + count)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default",
                    "labels": {"misbehave": "visible"}},
                "data": {"attack": attack}})
        })
        .collect()
}

#[test]
fn every_panel_and_alert_should_show_data_from_hosts_running_the_examples() {
    let checked = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(rules_file())
        .output()
        .expect("promtool runs (.ci/setup installs Debian's prometheus)");
    assert!(
        checked.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let server = Apiserver::start_with(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    apply_text(&server, &held_lease("held-elsewhere"));
    let plugins = [
        ("myapp", example_plugin("myapp")),
        ("misbehave", test_plugin("misbehave")),
        ("broken", test_plugin("not-a-plugin")),
    ];
    let files = [("misbehave.config.yaml", "mode: hostile\n")];
    // A ring of two; the second is killed while Prometheus scrapes, so the
    // first takes its slots (handovers) in sight.
    let ring_flags = [
        "--sharding",
        "--leader-election-namespace",
        "default",
        "--leader-election-id",
        "dashboards",
        "--lease-duration-seconds",
        "4",
        "--deadline-ms",
        "1000",
    ];
    let ring = Host::start(&server, &plugins, &files, &ring_flags);
    let mut leaving = Host::start(&server, &plugins, &files, &ring_flags);
    let standby = Host::start(
        &server,
        &plugins[..1],
        &[],
        &[
            "--leader-elect",
            "--leader-election-namespace",
            "default",
            "--leader-election-id",
            "held-elsewhere",
        ],
    );
    for host in [&ring, &leaving, &standby] {
        host.wait_ready();
    }
    let addrs = [&ring, &leaving, &standby].map(Host::metrics_addr);
    let labels = |pod| [("job", JOB), ("namespace", NAMESPACE), ("pod", pod)];
    let (ring_labels, leaving_labels, standby_labels) =
        (labels("ring-0"), labels("ring-1"), labels("standby-0"));
    let prometheus = Prometheus::start(
        &[
            Target {
                addr: &addrs[0],
                labels: &ring_labels,
                token: None,
            },
            Target {
                addr: &addrs[1],
                labels: &leaving_labels,
                token: None,
            },
            Target {
                addr: &addrs[2],
                labels: &standby_labels,
                token: None,
            },
        ],
        &[&rules_file()],
    );

    apply_text(&server, DEMO);
    // Reconciles that panic (errors), then more and more that loop to
    // their deadline (a queue that grows while Prometheus watches).
    create_all(&server, attacks("panic", "panic", 0, 3));
    let mut unanswered: Vec<(String, String)> = queries(&dashboard())
        .into_iter()
        .chain(CONTROLLER_RUNTIME_DASHBOARDS.iter().map(|q| {
            (
                "controller-runtime's dashboards".to_owned(),
                (*q).to_owned(),
            )
        }))
        .chain([(
            "kubernetes-mixin's KubeClientErrors".to_owned(),
            KUBE_CLIENT_ERRORS_DENOMINATOR.to_owned(),
        )])
        .map(|(whose, query)| (whose, promql(&query)))
        .collect();
    // What must be more than there: reconciles of both kinds, the refusal.
    let positive = [
        r#"sum(controller_runtime_reconcile_total{controller="myapp", result="success"})"#,
        r#"sum(controller_runtime_reconcile_errors_total{controller="misbehave"})"#,
        r#"sum(controller_runtime_reconcile_panics_total{controller="misbehave"})"#,
        r#"kubewasm_plugin_refused{plugin="broken"}"#,
        r#"sum(rest_client_requests_total{code="200", method="GET"})"#,
    ];
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut loops = 0;
    let mut rounds = 0;
    let missing = loop {
        if loops < 60 {
            create_all(&server, attacks("loop", "loop", loops, 5));
            loops += 5;
        }
        // Work throughout, for the rates and the waits.
        create_all(&server, myapps("busy", rounds));
        rounds += 1;
        if rounds == 5 {
            leaving.kill();
        }
        let rules_bad: Vec<String> = prometheus
            .rules()
            .into_iter()
            .filter(|(_, health, _)| health == "err")
            .map(|(name, _, error)| format!("rule {name}: {error}"))
            .collect();
        assert!(rules_bad.is_empty(), "{rules_bad:?}");
        unanswered.retain(|(_, query)| {
            !prometheus
                .query(query)
                .iter()
                .any(|(_, value)| value.is_finite())
        });
        let alerts = prometheus.alerts();
        let mut missing: Vec<String> = unanswered
            .iter()
            .map(|(whose, query)| format!("{whose}: no data for {query}"))
            .chain(
                ALERTS
                    .iter()
                    .filter(|name| !alerts.iter().any(|(alert, _)| alert == *name))
                    .map(|name| format!("alert {name} neither pending nor firing")),
            )
            .chain(
                positive
                    .iter()
                    .filter(|query| {
                        !prometheus
                            .query(query)
                            .iter()
                            .any(|(_, value)| *value > 0.0)
                    })
                    .map(|query| format!("not above zero: {query}")),
            )
            .collect();
        if missing.is_empty() || Instant::now() > deadline {
            missing.sort();
            break missing;
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    assert!(
        missing.is_empty(),
        "after 180 s:\n{}\n\nleaders: {:?}\nalerts: {:?}\nPrometheus' log:\n{}\nthe ring's metrics:\n{}",
        missing.join("\n"),
        prometheus.query("leader_election_master_status"),
        prometheus.alerts(),
        prometheus.log(),
        ring.get("/metrics").1
    );
}

/// The dashboard imports into Grafana: it decodes strictly into Grafana's
/// dashboard schema (the Grafana Foundation SDK's model) and validates, by
/// `deploy/grafana/check`; a dashboard with a field the schema does not
/// know is refused.
#[test]
fn the_dashboard_should_import_into_grafanas_schema() {
    let check = go_built("deploy/grafana/check", "grafana-check").expect("go build of the check");
    let dashboard_path = workspace_root().join("deploy/grafana/kubewasm.json");
    let run = |path: &Path| {
        let out = std::process::Command::new(&check)
            .arg(path)
            .output()
            .expect("the check runs");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (valid, said) = run(&dashboard_path);
    assert!(valid, "{said}");

    let scratch = tempfile::tempdir().expect("tempdir");
    let mut broken = dashboard();
    broken["panels"][1]["legendFormat"] = Value::from("{{plugin}}");
    let broken_path = scratch.path().join("broken.json");
    std::fs::write(&broken_path, broken.to_string()).expect("written");
    let (valid, said) = run(&broken_path);
    assert!(!valid, "a panel field the schema lacks: {said}");
    assert!(said.contains("legendFormat"), "{said}");
}

/// `curl`'s status code for `GET url` (HTTPS, the certificate not
/// verified) with `token`, if any.
fn curl(url: &str, token: Option<&str>) -> String {
    let mut command = std::process::Command::new("curl");
    command.args([
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "10",
    ]);
    if let Some(token) = token {
        command
            .arg("-H")
            .arg(format!("Authorization: Bearer {token}"));
    }
    let out = command.arg(url).output().expect("curl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--metrics-secure`: the endpoints over TLS, `/metrics` only for a
/// client whose token the cluster authenticates and whose user may `get
/// /metrics` (by the cluster's RBAC), the probes open; a real Prometheus
/// scrapes it with an allowed account's token, and not with another's.
#[test]
fn secure_metrics_should_answer_only_the_clients_the_cluster_allows() {
    let server = Apiserver::start();
    apply(&server, &example_file("myapp", "crd.yaml"));
    server.ok(&[
        "create",
        "clusterrole",
        "metrics-reader",
        "--verb=get",
        "--non-resource-url=/metrics",
    ]);
    for account in ["prometheus", "nobody"] {
        server.ok(&["create", "serviceaccount", account]);
    }
    server.ok(&[
        "create",
        "clusterrolebinding",
        "metrics-reader",
        "--clusterrole=metrics-reader",
        "--serviceaccount=default:prometheus",
    ]);
    let token = |account: &str| server.ok(&["create", "token", account]).trim().to_owned();
    let (allowed, refused) = (token("prometheus"), token("nobody"));
    let host = Host::start(
        &server,
        &[("myapp", example_plugin("myapp"))],
        &[],
        &["--metrics-secure"],
    );
    let addr = host.metrics_addr();
    let url = |path: &str| format!("https://{addr}{path}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while curl(&url("/readyz"), None) != "200" {
        assert!(Instant::now() < deadline, "not ready: {}", host.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(curl(&url("/healthz"), None), "200", "the probes stay open");
    assert_eq!(curl(&url("/metrics"), None), "401", "no token");
    assert_eq!(
        curl(&url("/metrics"), Some("not-a-token")),
        "401",
        "a token the cluster does not know"
    );
    assert_eq!(
        curl(&url("/metrics"), Some(&refused)),
        "403",
        "a user RBAC does not allow"
    );
    assert_eq!(curl(&url("/metrics"), Some(&allowed)), "200");
    assert_ne!(
        curl(&format!("http://{addr}/metrics"), Some(&allowed)),
        "200",
        "plain HTTP is not served"
    );

    let prometheus = Prometheus::start(
        &[
            Target {
                addr: &addr,
                labels: &[("job", "allowed")],
                token: Some(&allowed),
            },
            Target {
                addr: &addr,
                labels: &[("job", "refused")],
                token: Some(&refused),
            },
        ],
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let up = |job: &str| {
            prometheus
                .query(&format!("up{{job=\"{job}\"}}"))
                .first()
                .map(|(_, value)| *value)
        };
        let reconciles = prometheus.query(r#"controller_runtime_reconcile_total{job="allowed"}"#);
        if up("allowed") == Some(1.0) && up("refused") == Some(0.0) && !reconciles.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "allowed up {:?}, refused up {:?}, series {reconciles:?}\n{}",
            up("allowed"),
            up("refused"),
            prometheus.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
