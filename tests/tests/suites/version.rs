//! One Kubernetes release, pinned once: the real control plane's module
//! (`tests/real-cluster/go.mod`, `k8s.io/kubernetes`) names it, and every
//! other place that speaks a release derives from it (`make
//! kubernetes-version` rewrites what is recorded or generated) or is
//! checked against it here: the recorded discovery and bootstrap policy the
//! embedded server and `replay` serve, the release the embedded server
//! reports, k8s-openapi's feature for the host and the Rust SDK's default,
//! the Go modules that use Kubernetes' types, and the protobuf schemas.
//! The server serves what the release serves: every group version's
//! discovery is the recorded one (on the embedded server, but for the core
//! group's streaming subresources it cannot serve). And a plugin is free of
//! it: one built against an older release's types (the guest SDK's
//! `v1_33`) runs on this host unchanged.

use kubewasm_tests::host::{Host, eventually, get_json};
use kubewasm_tests::{Apiserver, TestCluster, test_plugin, workspace_root};
use serde_json::Value;

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The pin: `v1.37.2`.
fn pinned() -> String {
    let module = read("tests/real-cluster/go.mod");
    module
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("k8s.io/kubernetes"))
                .then(|| words.next().map(str::to_owned))
                .flatten()
        })
        .expect("tests/real-cluster/go.mod requires k8s.io/kubernetes")
}

/// `v1.37.2` → (`37`, `2`).
fn minor_patch(release: &str) -> (String, String) {
    let mut numbers = release.trim_start_matches('v').split('.').skip(1);
    let minor = numbers.next().expect("a minor version").to_owned();
    let patch = numbers.next().expect("a patch version").to_owned();
    (minor, patch)
}

#[test]
fn every_place_should_speak_the_pinned_kubernetes_release() {
    let pin = pinned();
    let (minor, patch) = minor_patch(&pin);
    let mut disagreeing = Vec::new();
    let mut expect = |place: &str, found: &str, wanted: &str| {
        if found != wanted {
            disagreeing.push(format!(
                "{place}: {found:?}, the pin {pin} wants {wanted:?}"
            ));
        }
    };

    // Recorded from the real server of the pinned release.
    for recorded in [
        "types/src/release.json",
        "apiserver/src/store/bootstrap-rbac.json",
    ] {
        let value: Value = serde_json::from_str(&read(recorded)).expect("JSON");
        expect(
            recorded,
            value["version"].as_str().unwrap_or_default(),
            &pin,
        );
    }
    // Generated from that discovery: what the embedded server reports.
    expect(
        "kubewasm_types::KUBERNETES_RELEASE",
        kubewasm_types::KUBERNETES_RELEASE,
        &pin,
    );
    let served = read("types/src/served.rs");
    let feature = format!("v1_{minor}");
    expect(
        "types/src/served.rs (generated from k8s-openapi's feature)",
        if served.contains(&format!("k8s-openapi's `{feature}`")) {
            &feature
        } else {
            "another"
        },
        &feature,
    );

    // k8s-openapi's feature: the host's, and the Rust SDK's default.
    let wanted = format!("[\"{feature}\"]");
    let line = |path: &str, start: &str| {
        read(path)
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("{path} has no line `{start}`"))
            .to_owned()
    };
    let host = line("Cargo.toml", "k8s-openapi = ");
    let features = host.split("features = ").nth(1).unwrap_or_default();
    expect(
        "Cargo.toml's k8s-openapi",
        features.trim_end_matches(" }"),
        &wanted,
    );
    let sdk = line("guest-sdk/Cargo.toml", "default = ");
    expect(
        "guest-sdk/Cargo.toml's default feature",
        sdk.trim_start_matches("default = "),
        &wanted,
    );

    // Go modules that use Kubernetes' types directly.
    let go_version = format!("v0.{minor}.{patch}");
    let modules = [
        "guest-sdk/go/go.mod",
        "plugins/myapp-go/go.mod",
        "plugins/cronjob-go/go.mod",
        "tests/guests/misbehave-go/go.mod",
        "tests/difference/client-go/go.mod",
        "bench/peers/controller-runtime/go.mod",
    ];
    for module in modules {
        let text = read(module);
        let mut required = 0;
        for line in text.lines().filter(|l| !l.contains("// indirect")) {
            let mut words = line.split_whitespace();
            let (Some(path), Some(version)) = (words.next(), words.next()) else {
                continue;
            };
            if ["k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"].contains(&path) {
                required += 1;
                expect(&format!("{module} {path}"), version, &go_version);
            }
        }
        assert!(
            required > 0,
            "{module} requires none of Kubernetes' modules"
        );
    }

    // The protobuf schemas the embedded server decodes kubectl's bodies with.
    let protos = read("apiserver/protos/README.md");
    let release = format!("Kubernetes 1.{minor}");
    expect(
        "apiserver/protos/README.md",
        if protos.contains(&format!("{release}.{patch}")) {
            &release
        } else {
            "another"
        },
        &release,
    );

    assert!(disagreeing.is_empty(), "{disagreeing:#?}");
}

/// The Deployment `kubernetes-1-33` wrote for `name`: its replicas, and
/// those it had read of it before.
fn deployment(server: &Apiserver, name: &str) -> Option<(i64, String)> {
    let written = get_json(server, &["deployment", name])?;
    let seen = written["metadata"]["annotations"]["kubewasm.dev/seen"].as_str()?;
    Some((written["spec"]["replicas"].as_i64()?, seen.to_owned()))
}

#[test]
fn a_plugin_built_against_an_older_releases_types_should_run_unchanged() {
    let server = Apiserver::start();
    let host = Host::start(
        &server,
        &[("kubernetes-1-33", test_plugin("kubernetes-1-33"))],
        &[],
        &[],
    );
    host.wait_ready();
    server.ok(&["create", "configmap", "web", "--from-literal=replicas=2"]);
    server.ok(&["label", "configmap", "web", "deploy=yes"]);
    // Written in 1.33's shape, read back through 1.33's types.
    eventually(
        "its Deployment, read back through its own types",
        &host,
        || deployment(&server, "web") == Some((2, "2".to_owned())),
    );
    server.ok(&[
        "patch",
        "configmap",
        "web",
        "--type=merge",
        "-p",
        r#"{"data":{"replicas":"3"}}"#,
    ]);
    eventually("a change reconciled the same way", &host, || {
        deployment(&server, "web") == Some((3, "3".to_owned()))
    });
}

/// The core group's subresources the embedded server does not serve: it
/// has no containers and no kubelet to stream from, no eviction and no
/// in-place resize.
const NOT_SERVED_HERE: [&str; 8] = [
    "nodes/proxy",
    "pods/attach",
    "pods/eviction",
    "pods/exec",
    "pods/portforward",
    "pods/proxy",
    "pods/resize",
    "services/proxy",
];

#[test]
fn every_group_versions_discovery_should_be_the_releases() {
    let server = Apiserver::start();
    let embedded = TestCluster::chosen() == TestCluster::Embedded;
    let release = kubewasm_types::release::release();
    let mut disagreeing = Vec::new();
    for (group, version, recorded) in release.lists() {
        let path = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let served: Value =
            serde_json::from_str(&server.ok(&["get", "--raw", &path])).expect("a resource list");
        let expected: Vec<&Value> = recorded
            .iter()
            .filter(|entry| {
                let name = entry["name"].as_str().unwrap_or_default();
                !(embedded && group.is_empty() && NOT_SERVED_HERE.contains(&name))
            })
            .collect();
        let served: Vec<&Value> = served["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        if served != expected {
            disagreeing.push(format!(
                "{path}: served {}\n  recorded {}",
                serde_json::to_string(&served).unwrap_or_default(),
                serde_json::to_string(&expected).unwrap_or_default()
            ));
        }
    }
    assert!(disagreeing.is_empty(), "{}", disagreeing.join("\n"));
}
