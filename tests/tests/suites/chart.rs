//! The Helm chart (`deploy/chart/kubewasm`), checked with the real `helm`
//! (v4, built from the Go module proxy by `.ci/setup`): `helm lint` passes
//! in both modes; everything it renders, every option on, passes the policy
//! checks operators run on workloads (kube-linter's default checks, written
//! out here: kube-linter is not served by the Go module proxy); the plain
//! manifests `deploy/host.yaml` and `deploy/sharded.yaml` are its
//! rendering (`make manifests`); and its output applies to the API server
//! (the host running as its account: `plugin_resources.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use kubewasm_tests::{Apiserver, helm, workspace_root};
use serde_json::Value;

fn chart() -> PathBuf {
    workspace_root().join("deploy/chart/kubewasm")
}

/// `helm template` of the chart with `values` (`--set` pairs), its
/// objects.
fn render(values: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec![
        "template",
        "kubewasm",
        chart.to_str().expect("a UTF-8 path"),
        "--namespace",
        "kubewasm-system",
    ];
    for value in values {
        args.extend(["--set", value]);
    }
    let (ok, text, said) = helm(&args);
    assert!(ok, "helm template {values:?}: {said}");
    kubewasm_runtime::replay::parse_objects(&text).expect("helm renders YAML")
}

/// Every option on: the sharded form, a ServiceMonitor, the alerts, the
/// dashboard, a tenant, the image by digest and a pull secret, a
/// registry's CA, signers.
const EVERYTHING: &[&str] = &[
    "mode=sharded",
    "imagePullSecrets[0].name=registry-pull",
    "registryCA.configMap=registry-ca",
    "requireSignatures.configMap=signers",
    "replicas=3",
    "namespace.create=true",
    "metrics.serviceMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "metrics.dashboard.enabled=true",
    "tracing.otlpEndpoint=http://otel-collector.observability:4318",
    "image.digest=sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "tenants[0].namespace=team-a",
    "tenants[0].create=true",
    "tenants[0].rules[0].apiGroups[0]=apps",
    "tenants[0].rules[0].resources[0]=deployments",
    "tenants[0].rules[0].verbs[0]=get",
];

/// What the policy finds wrong in `objects`: kube-linter's default checks
/// that apply to what the chart makes, and the chart's own promises
/// (probes, a PodDisruptionBudget and topology spread for replicas).
fn policy(objects: &[Value]) -> Vec<String> {
    let mut found = Vec::new();
    let by_kind = |kind: &'static str| objects.iter().filter(move |o| o["kind"] == kind);
    let name = |o: &Value| {
        format!(
            "{} {}",
            o["kind"].as_str().unwrap_or("?"),
            o["metadata"]["name"]
        )
    };
    let matches = |selector: &Value, labels: &Value| {
        selector
            .as_object()
            .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels.get(k) == Some(v)))
    };
    let accounts: Vec<Value> = by_kind("ServiceAccount")
        .map(|a| a["metadata"]["name"].clone())
        .collect();
    let deployments: Vec<&Value> = by_kind("Deployment").collect();
    if deployments.is_empty() {
        found.push("no Deployment".to_owned());
    }
    for deployment in &deployments {
        let spec = &deployment["spec"];
        let pod = &spec["template"]["spec"];
        let labels = &spec["template"]["metadata"]["labels"];
        let at = name(deployment);
        if !matches(&spec["selector"]["matchLabels"], labels) {
            found.push(format!("{at}: mismatching-selector"));
        }
        if !accounts.contains(&pod["serviceAccountName"]) {
            found.push(format!("{at}: non-existent-service-account"));
        }
        for field in ["hostNetwork", "hostPID", "hostIPC"] {
            if pod[field] == true {
                found.push(format!("{at}: {field}"));
            }
        }
        if pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| !v["hostPath"].is_null())
        {
            found.push(format!("{at}: sensitive-host-mounts"));
        }
        let replicas = spec["replicas"].as_u64().unwrap_or(1);
        if replicas > 1
            && pod["topologySpreadConstraints"].is_null()
            && pod["affinity"]["podAntiAffinity"].is_null()
        {
            found.push(format!("{at}: no-anti-affinity"));
        }
        if replicas > 1
            && !by_kind("PodDisruptionBudget")
                .any(|b| matches(&b["spec"]["selector"]["matchLabels"], labels))
        {
            found.push(format!("{at}: no PodDisruptionBudget"));
        }
        for container in pod["containers"].as_array().into_iter().flatten() {
            let at = format!("{at} container {}", container["name"]);
            let image = container["image"].as_str().unwrap_or_default();
            let tag = image.rsplit_once('/').map_or(image, |(_, last)| last);
            if !image.contains("@sha256:") && (!tag.contains(':') || tag.ends_with(":latest")) {
                found.push(format!("{at}: latest-tag ({image})"));
            }
            let context = &container["securityContext"];
            if context["privileged"] == true {
                found.push(format!("{at}: privileged-container"));
            }
            if context["allowPrivilegeEscalation"] != false {
                found.push(format!("{at}: privilege-escalation-container"));
            }
            if context["readOnlyRootFilesystem"] != true {
                found.push(format!("{at}: no-read-only-root-fs"));
            }
            let drops = context["capabilities"]["drop"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !drops.iter().any(|c| c == "ALL" || c == "NET_RAW") {
                found.push(format!("{at}: drop-net-raw-capability"));
            }
            if context["runAsNonRoot"] != true && pod["securityContext"]["runAsNonRoot"] != true {
                found.push(format!("{at}: run-as-non-root"));
            }
            let resources = &container["resources"];
            if resources["requests"]["cpu"].is_null() {
                found.push(format!("{at}: unset-cpu-requirements"));
            }
            if resources["requests"]["memory"].is_null() || resources["limits"]["memory"].is_null()
            {
                found.push(format!("{at}: unset-memory-requirements"));
            }
            let ports: Vec<&Value> = container["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| &p["name"])
                .collect();
            for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
                let port = &container[probe]["httpGet"]["port"];
                if container[probe].is_null() {
                    found.push(format!("{at}: no {probe}"));
                } else if port.is_string() && !ports.contains(&port) {
                    found.push(format!("{at}: {probe} on a port it does not name"));
                }
            }
        }
    }
    for service in by_kind("Service") {
        let selector = &service["spec"]["selector"];
        if !deployments
            .iter()
            .any(|d| matches(selector, &d["spec"]["template"]["metadata"]["labels"]))
        {
            found.push(format!("{}: dangling-service", name(service)));
        }
    }
    for policy in by_kind("NetworkPolicy") {
        let selector = &policy["spec"]["podSelector"]["matchLabels"];
        if !deployments
            .iter()
            .any(|d| matches(selector, &d["spec"]["template"]["metadata"]["labels"]))
        {
            found.push(format!("{}: dangling-networkpolicy", name(policy)));
        }
    }
    for monitor in by_kind("ServiceMonitor") {
        let selector = &monitor["spec"]["selector"]["matchLabels"];
        let services: Vec<&Value> = by_kind("Service")
            .filter(|s| matches(selector, &s["metadata"]["labels"]))
            .collect();
        let ports: Vec<Value> = services
            .iter()
            .flat_map(|s| s["spec"]["ports"].as_array().cloned().unwrap_or_default())
            .map(|p| p["name"].clone())
            .collect();
        if services.is_empty() {
            found.push(format!("{}: dangling-servicemonitor", name(monitor)));
        }
        for endpoint in monitor["spec"]["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !ports.contains(&endpoint["port"]) {
                found.push(format!(
                    "{}: an endpoint on a port no Service names",
                    name(monitor)
                ));
            }
        }
    }
    let roles: BTreeMap<(String, String), &Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
        .map(|o| {
            (
                (
                    o["kind"].as_str().unwrap_or_default().to_owned(),
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ),
                o,
            )
        })
        .collect();
    for role in roles.values() {
        for rule in role["rules"].as_array().into_iter().flatten() {
            for field in ["verbs", "resources", "apiGroups"] {
                if rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v == "*")
                {
                    found.push(format!("{}: wildcard-in-rules ({field})", name(role)));
                }
            }
            let secrets = rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r == "secrets");
            let lists = rule["verbs"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v == "list" || v == "watch");
            if secrets && lists {
                found.push(format!("{}: access-to-secrets (list or watch)", name(role)));
            }
        }
    }
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let reference = &binding["roleRef"];
        let key = (
            reference["kind"].as_str().unwrap_or_default().to_owned(),
            reference["name"].as_str().unwrap_or_default().to_owned(),
        );
        if reference["name"] == "cluster-admin" {
            found.push(format!("{}: cluster-admin-role-binding", name(binding)));
        } else if !roles.contains_key(&key) {
            found.push(format!(
                "{}: binds a role the chart does not make",
                name(binding)
            ));
        }
    }
    found
}

#[test]
fn the_chart_should_lint_and_render_only_what_the_policy_allows() {
    let chart = chart();
    let chart = chart.to_str().expect("a UTF-8 path");
    for values in [&[][..], &["mode=sharded", "replicas=3"], EVERYTHING] {
        let mut args = vec!["lint", "--strict", chart];
        for value in values {
            args.extend(["--set", value]);
        }
        let (ok, out, said) = helm(&args);
        assert!(ok, "helm lint {values:?}: {out}{said}");
        let objects = render(values);
        let found = policy(&objects);
        assert!(found.is_empty(), "{values:?}: {found:#?}");
    }
    let (ok, _, said) = helm(&["template", "kubewasm", chart, "--set", "mode=active-active"]);
    assert!(
        !ok && said.contains("mode must be leader or sharded"),
        "{said}"
    );
    // The policy is no formality: what it is there for, it finds.
    let careless = render(&[
        "image.tag=latest",
        "resources=null",
        "topologySpread.enabled=false",
        "podDisruptionBudget.enabled=false",
        "pluginRules[0].apiGroups[0]=*",
        "pluginRules[0].resources[0]=secrets",
        "pluginRules[0].verbs[0]=list",
    ]);
    let found = policy(&careless).join("\n");
    for finding in [
        "latest-tag",
        "unset-cpu-requirements",
        "unset-memory-requirements",
        "no-anti-affinity",
        "no PodDisruptionBudget",
        "wildcard-in-rules",
        "access-to-secrets",
    ] {
        assert!(found.contains(finding), "{finding} not found in:\n{found}");
    }
}

/// `deploy/host.yaml` and `deploy/sharded.yaml` are the chart rendered
/// (`make manifests`), and each applies to the API server.
#[test]
fn the_plain_manifests_should_be_the_chart_rendered_and_apply() {
    let server = Apiserver::start();
    kubewasm_tests::host::apply(&server, &workspace_root().join("deploy/crds.yaml"));
    for (file, values) in [
        ("host.yaml", &["namespace.create=true"][..]),
        (
            "sharded.yaml",
            &["namespace.create=true", "mode=sharded", "replicas=3"],
        ),
    ] {
        let path = workspace_root().join("deploy").join(file);
        let committed = std::fs::read_to_string(&path).expect("the manifest");
        let rendered = kubewasm_runtime::replay::parse_objects(&committed).expect("YAML");
        assert!(
            rendered == render(values),
            "deploy/{file} is not the chart rendered: make manifests"
        );
        kubewasm_tests::host::apply(&server, &path);
    }
}
