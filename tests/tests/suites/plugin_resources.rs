//! `Plugin` and `ClusterPlugin` resources end to end: the CRDs of
//! `deploy/crds.yaml` applied with kubectl to the embedded API server,
//! plugins pushed to a real registry, the real `kubewasm run` binary running
//! what the resources ask for, and tenants that attack each other.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use kubewasm_tests::host::{
    ConfigMapWriter, Host, apply, apply_text, event_notes, eventually, eventually_showing,
    get_json, wait_for,
};
use kubewasm_tests::pod::Pod;
use kubewasm_tests::registry::Registry;
use kubewasm_tests::resources::{
    condition, counted, plugin, server_with_crds, status, tenant_rights, tenant_role,
};
use kubewasm_tests::{example_file, example_plugin, test_plugin, workspace_root};
use serde_json::Value;

#[test]
fn a_plugin_resource_should_load_swap_keep_its_last_good_version_suspend_and_stop() {
    let server = server_with_crds(&[]);
    let registry = Registry::start();
    let (rust, rust_digest) = registry.push(&test_plugin("misbehave"), "plugins/lang:rust");
    let (python, python_digest) =
        registry.push(&test_plugin("misbehave-py"), "plugins/lang:python");
    let (broken, _) = registry.push(&test_plugin("liar"), "plugins/lang:broken");
    server.ok(&["create", "namespace", "team-a"]);
    server.ok(&["create", "configmap", "outside", "--from-literal=a=b"]);
    let host = Host::start(&server, &[], &[], &["--plain-http"]);
    host.wait_ready();
    let config = "  config:\n    mode: language\n";
    apply_text(&server, &plugin("team-a", "lang", &rust, config));
    eventually_showing(
        "the Plugin runs the digest pushed",
        &host,
        || format!("{:#}", status(&server, "team-a", "lang")),
        || {
            let status = status(&server, "team-a", "lang");
            status["phase"] == "Running"
                && status["digest"] == rust_digest.as_str()
                && status["observedGeneration"] == 1
                && status["pluginName"] == "team-a.lang"
                && condition(&status, "Ready")["status"] == "True"
                && condition(&status, "Degraded")["status"] == "False"
        },
    );
    // A ClusterPlugin cannot pose as the tenant's plugin by its name.
    apply_text(
        &server,
        &format!(
            "apiVersion: kubewasm.dev/v1alpha1\nkind: ClusterPlugin\nmetadata:\n  name: team-a.lang\n\
             spec:\n  source: {rust}\n{config}"
        ),
    );
    eventually(
        "the posing ClusterPlugin is refused by its name",
        &host,
        || {
            let status = get_json(&server, &["clusterplugin", "team-a.lang"])
                .map(|p| p["status"].clone())
                .unwrap_or(Value::Null);
            status["phase"] == "Failed" && condition(&status, "Degraded")["reason"] == "InvalidSpec"
        },
    );
    let (ok, table, _) = server.kubectl(&["get", "plugins", "-n", "team-a"]);
    assert!(ok);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "PHASE",
            "READY",
            "SOURCE",
            "RECONCILES",
            "FAILURES",
            "AGE"
        ],
        "{table}"
    );
    assert!(
        table.contains("Running") && table.contains(&rust),
        "{table}"
    );
    let loads = |result: &str| {
        counted(
            &host,
            &format!(r#"kubewasm_plugin_loads_total{{plugin="team-a.lang",result="{result}"}}"#),
        )
    };
    assert_eq!(loads("loaded"), 1.0);

    // ConfigMaps keep coming in team-a while the source changes.
    let writer = ConfigMapWriter::start(&server, "team-a");
    eventually("the first ConfigMaps are reconciled in Rust", &host, || {
        event_notes(&server, "team-a", "Language")
            .get("t-002")
            .is_some_and(|n| n.contains(&"rust".to_owned()))
    });
    apply_text(&server, &plugin("team-a", "lang", &python, config));
    // A first load compiles the interpreter: minutes on a loaded machine.
    wait_for(
        "the Python version is swapped in and reported",
        &host,
        Duration::from_secs(300),
        String::new,
        || {
            let status = status(&server, "team-a", "lang");
            status["digest"] == python_digest.as_str() && status["observedGeneration"] == 2
        },
    );
    assert_eq!(loads("swapped"), 1.0);
    writer.assert_swapped(&server, &host, "python", || {
        event_notes(&server, "team-a", "Language")
    });
    assert!(
        !event_notes(&server, "default", "Language").contains_key("outside"),
        "a Plugin reaches only its namespace"
    );

    // A broken source is refused: Degraded says why, the old version serves.
    apply_text(&server, &plugin("team-a", "lang", &broken, config));
    eventually_showing(
        "the broken version is refused and reported",
        &host,
        || format!("{:#}", status(&server, "team-a", "lang")),
        || {
            let status = status(&server, "team-a", "lang");
            let degraded = condition(&status, "Degraded");
            status["observedGeneration"] == 3
                && status["phase"] == "Running"
                && status["digest"] == python_digest.as_str()
                && condition(&status, "Ready")["status"] == "True"
                && degraded["status"] == "True"
                && degraded["reason"] == "ComponentRefused"
                && status["lastError"].as_str().is_some_and(|e| !e.is_empty())
        },
    );
    eventually("the refusal is an event on the Plugin", &host, || {
        event_notes(&server, "team-a", "ComponentRefused").contains_key("lang")
    });
    server.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "after-broken",
        "--from-literal=a=b",
    ]);
    eventually("the Python version still serves", &host, || {
        event_notes(&server, "team-a", "Language")
            .get("after-broken")
            .is_some_and(|n| n == &["python"])
    });

    // A declaration past the grants is refused, every excess named.
    let narrow = format!(
        "{config}  grants:\n    rules:\n    - apiGroups: [\"\"]\n      kinds: [ConfigMap]\n      \
         verbs: [get, list, watch]\n"
    );
    apply_text(&server, &plugin("team-a", "lang", &rust, &narrow));
    eventually_showing(
        "the excess is named in Degraded",
        &host,
        || format!("{:#}", status(&server, "team-a", "lang")),
        || {
            let degraded = condition(&status(&server, "team-a", "lang"), "Degraded");
            let message = degraded["message"].as_str().unwrap_or_default().to_owned();
            degraded["reason"] == "ExceedsGrants"
                && [
                    "apply v1 ConfigMap",
                    "delete v1 ConfigMap",
                    "get v1 Pod",
                    "list v1 Pod",
                ]
                .iter()
                .all(|e| message.contains(e))
        },
    );
    assert_eq!(
        status(&server, "team-a", "lang")["digest"],
        python_digest.as_str(),
        "still the last good version"
    );

    // Suspended: stopped, and said so; resumed; deleted: stopped.
    apply_text(
        &server,
        &plugin(
            "team-a",
            "lang",
            &rust,
            &format!("{config}  suspend: true\n"),
        ),
    );
    eventually("suspended", &host, || {
        let status = status(&server, "team-a", "lang");
        status["phase"] == "Suspended" && condition(&status, "Ready")["status"] == "False"
    });
    assert_eq!(loads("removed"), 1.0);
    server.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "while-suspended",
        "--from-literal=a=b",
    ]);
    apply_text(&server, &plugin("team-a", "lang", &rust, config));
    eventually("resumed on the Rust version", &host, || {
        event_notes(&server, "team-a", "Language")
            .get("while-suspended")
            .is_some_and(|n| n == &["rust"])
    });
    server.ok(&["-n", "team-a", "delete", "plugin", "lang"]);
    eventually("the deleted Plugin's plugin stops", &host, || {
        loads("removed") == 2.0
    });
    server.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "after-delete",
        "--from-literal=a=b",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !event_notes(&server, "team-a", "Language").contains_key("after-delete"),
        "nothing reconciles it"
    );
}

/// A name is one source's at a time, whichever came first: a ClusterPlugin
/// named as a directory plugin is refused (`NameTaken`), a directory
/// plugin named as a ClusterPlugin is too, neither's going stops the
/// other's plugin, and a name its owner frees lets the other's load.
#[test]
fn a_name_should_be_refused_the_same_way_from_either_source() {
    let server = server_with_crds(&[]);
    let registry = Registry::start();
    let (source, digest) = registry.push(&test_plugin("misbehave"), "plugins/names:1");
    let config = "mode: language\n";
    let host = Host::start(
        &server,
        &[("first", test_plugin("misbehave"))],
        &[("first.config.yaml", config)],
        &["--plain-http"],
    );
    host.wait_ready();
    let cluster_plugin = |name: &str| {
        format!(
            "apiVersion: kubewasm.dev/v1alpha1\nkind: ClusterPlugin\nmetadata:\n  name: {name}\n\
             spec:\n  source: {source}\n  config:\n    {config}"
        )
    };
    let cluster_status = |name: &str| {
        get_json(&server, &["clusterplugin", name])
            .map(|p| p["status"].clone())
            .unwrap_or(Value::Null)
    };
    let loads = |name: &str, result: &str| {
        counted(
            &host,
            &format!(r#"kubewasm_plugin_loads_total{{plugin="{name}",result="{result}"}}"#),
        )
    };

    // The directory came first: the resource is refused by the name.
    apply_text(&server, &cluster_plugin("first"));
    eventually_showing(
        "the ClusterPlugin named as the directory's plugin is refused",
        &host,
        || format!("{:#}", cluster_status("first")),
        || {
            let status = cluster_status("first");
            let degraded = condition(&status, "Degraded");
            status["phase"] == "Failed"
                && degraded["reason"] == "NameTaken"
                && degraded["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("the plugin directory"))
        },
    );
    assert_eq!(loads("first", "loaded"), 1.0, "the directory's, once");

    // The resource came first: the file is refused by the name ...
    apply_text(&server, &cluster_plugin("second"));
    eventually("the ClusterPlugin runs", &host, || {
        let status = cluster_status("second");
        status["phase"] == "Running" && status["digest"] == digest.as_str()
    });
    std::fs::write(host.dir().join("second.config.yaml"), config).expect("config written");
    host.put_plugin("second", &test_plugin("misbehave"));
    eventually(
        "the file named as the ClusterPlugin is refused",
        &host,
        || {
            loads("second", "refused") >= 1.0
                && host
                    .log()
                    .contains("a Plugin or ClusterPlugin resource runs a plugin named `second`")
        },
    );
    // ... and its going stops nothing of the resource's.
    host.remove_plugin("second");
    let rescans = Duration::from_secs(3);
    std::thread::sleep(rescans);
    assert_eq!(loads("second", "removed"), 0.0, "{}", host.log());
    let status = cluster_status("second");
    assert_eq!(status["phase"], "Running", "{status:#}");
    assert_eq!(loads("second", "loaded"), 1.0);
    // The directory's plugin is still the directory's.
    assert_eq!(loads("first", "removed"), 0.0);

    // A name freed by its owner lets the other source's plugin load: the
    // directory's `first` goes, and the ClusterPlugin refused under it runs
    // (without a change of its own) ...
    host.remove_plugin("first");
    eventually_showing(
        "the ClusterPlugin refused under the name freed runs",
        &host,
        || format!("{:#}", cluster_status("first")),
        || {
            let status = cluster_status("first");
            status["phase"] == "Running" && condition(&status, "Degraded")["status"] == "False"
        },
    );
    assert_eq!(loads("first", "removed"), 1.0, "the directory's");
    assert_eq!(
        loads("first", "loaded"),
        2.0,
        "the directory's, then the resource's"
    );
    // ... and the ClusterPlugin `second` deleted, the file refused under
    // its name loads.
    host.put_plugin("second", &test_plugin("misbehave"));
    eventually(
        "the file named as the ClusterPlugin is refused again",
        &host,
        || loads("second", "refused") >= 2.0,
    );
    server.ok(&["delete", "clusterplugin", "second"]);
    eventually("the file refused under the name freed loads", &host, || {
        loads("second", "removed") == 1.0 && loads("second", "loaded") == 2.0
    });
}

#[test]
fn pull_secrets_should_open_a_private_registry_to_their_own_namespace_only() {
    let server = server_with_crds(&[]);
    let registry = Registry::start_with_user("alice", "s3cret");
    let (source, digest) = registry.push(&test_plugin("misbehave"), "private/lang:1");
    for ns in ["team-a", "team-b"] {
        server.ok(&["create", "namespace", ns]);
    }
    let host = Host::start(&server, &[], &[], &["--plain-http"]);
    host.wait_ready();
    let config = "  config:\n    mode: language\n";
    let with_secret = |namespace: Option<&str>| match namespace {
        Some(ns) => {
            format!("  imagePullSecrets:\n  - name: regcred\n    namespace: {ns}\n{config}")
        }
        None => format!("  imagePullSecrets:\n  - name: regcred\n{config}"),
    };
    // No secret yet: the registry refuses, and the host says so.
    apply_text(
        &server,
        &plugin("team-a", "lang", &source, &with_secret(None)),
    );
    eventually_showing(
        "a missing secret is reported",
        &host,
        || format!("{:#}", status(&server, "team-a", "lang")),
        || {
            let status = status(&server, "team-a", "lang");
            status["phase"] == "Failed"
                && condition(&status, "Degraded")["reason"] == "PullSecretUnreadable"
        },
    );
    // The secret appears: the host tries again on its own and pulls.
    let dir = tempfile::tempdir().expect("tempdir");
    let config_json = dir.path().join("config.json");
    std::fs::write(&config_json, registry.docker_config_json("alice", "s3cret")).expect("written");
    let from_file = format!("--from-file=.dockerconfigjson={}", config_json.display());
    server.ok(&[
        "-n",
        "team-a",
        "create",
        "secret",
        "generic",
        "regcred",
        "--type=kubernetes.io/dockerconfigjson",
        &from_file,
    ]);
    eventually_showing(
        "pulled with the secret's credentials",
        &host,
        || format!("{:#}", status(&server, "team-a", "lang")),
        || {
            let status = status(&server, "team-a", "lang");
            status["phase"] == "Running" && status["digest"] == digest.as_str()
        },
    );
    // Another tenant may not name team-a's secret, nor pull without one.
    apply_text(
        &server,
        &plugin("team-b", "thief", &source, &with_secret(Some("team-a"))),
    );
    apply_text(&server, &plugin("team-b", "bare", &source, config));
    eventually_showing(
        "team-b gets nothing of team-a's credentials",
        &host,
        || {
            format!(
                "{:#}\n{:#}",
                status(&server, "team-b", "thief"),
                status(&server, "team-b", "bare")
            )
        },
        || {
            let thief = status(&server, "team-b", "thief");
            let bare = status(&server, "team-b", "bare");
            thief["phase"] == "Failed"
                && condition(&thief, "Degraded")["reason"] == "InvalidSpec"
                && thief["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("own namespace"))
                && bare["phase"] == "Failed"
                && condition(&bare, "Degraded")["reason"] == "PullFailed"
        },
    );
}

#[test]
fn a_hostile_tenant_should_be_stopped_at_every_turn_while_another_converges() {
    let server = server_with_crds(&["--simulate-workloads"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let registry = Registry::start();
    let (myapp, _) = registry.push(&example_plugin("myapp"), "tenants/myapp:1");
    let (misbehave, _) = registry.push(&test_plugin("misbehave"), "tenants/misbehave:1");
    for ns in ["tenant-a", "tenant-b"] {
        server.ok(&["create", "namespace", ns]);
    }
    // tenant-a's account may write what myapp writes; tenant-b's account
    // may write events (its reports) and nothing else.
    tenant_rights(
        &server,
        "tenant-a",
        "get,list,watch,create,patch,update,delete",
        "myapps.example.com,myapps.example.com/status,deployments.apps,services,events.events.k8s.io",
    );
    tenant_rights(&server, "tenant-b", "create,patch", "events.events.k8s.io");
    // What misbehave reads, its account may read (else it never runs).
    tenant_role(
        &server,
        "tenant-b",
        "reads",
        "get,list,watch",
        "configmaps,pods",
    );
    server.ok(&[
        "-n",
        "tenant-a",
        "create",
        "configmap",
        "target",
        "--from-literal=secret=plans",
    ]);
    let host = Host::start(
        &server,
        &[],
        &[],
        &["--plain-http", "--impersonate-tenants"],
    );
    host.wait_ready();
    apply_text(&server, &plugin("tenant-a", "myapp", &myapp, ""));
    let hostile_spec = "  limits:\n    memory: 64Mi\n    deadlineMilliseconds: 200\n    maxActions: 100\n    \
                        concurrency: 1\n  \
                        config:\n    mode: hostile\n    victim: tenant-a\n";
    apply_text(
        &server,
        &plugin("tenant-b", "hostile", &misbehave, hostile_spec),
    );
    for attack in [
        "list-outside",
        "write-outside",
        "write-inside",
        "loop",
        "oom",
        "flood-actions",
    ] {
        server.ok(&[
            "-n",
            "tenant-b",
            "create",
            "configmap",
            attack,
            &format!("--from-literal=attack={attack}"),
        ]);
    }
    let apps: Vec<String> = (0..10).map(|i| format!("app-{i}")).collect();
    for app in &apps {
        apply_text(
            &server,
            &format!(
                "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: {app}\n  namespace: tenant-a\n\
                 spec:\n  replicas: 1\n  image: nginx:1.27\n  port: 8080\n"
            ),
        );
    }
    // Two cores shared with the other tests of this file: time enough.
    wait_for(
        "every MyApp of tenant-a converges beside the hostile tenant",
        &host,
        Duration::from_secs(180),
        || format!("{:#}", status(&server, "tenant-a", "myapp")),
        || {
            apps.iter().all(|app| {
                get_json(&server, &["myapp", app, "-n", "tenant-a"])
                    .is_some_and(|a| a["status"]["availableReplicas"] == 1)
            })
        },
    );
    let errors = |kind: &str| {
        counted(
            &host,
            &format!(
                r#"kubewasm_reconcile_errors_total{{plugin="tenant-b.hostile",kind="{kind}"}}"#
            ),
        )
    };
    eventually_showing(
        "every attack is stopped and counted",
        &host,
        || host.get("/metrics").1,
        || {
            // The write outside is refused by its grants, the write inside
            // by the cluster (made as tenant-b's account), the loop at its
            // deadline, the hoard at its memory, the flood at its limit,
            // the read outside by its grants.
            ["denied", "api", "deadline", "memory", "limit"]
                .iter()
                .all(|kind| errors(kind) >= 1.0)
                && counted(
                    &host,
                    r#"kubewasm_reads_denied_total{plugin="tenant-b.hostile"}"#,
                ) >= 1.0
        },
    );
    let seen = event_notes(&server, "tenant-b", "Listed");
    let listed = seen
        .get("list-outside")
        .and_then(|n| n.first())
        .cloned()
        .unwrap_or_default();
    assert!(listed.ends_with("victim=denied"), "{listed}");
    assert!(
        !listed.contains("tenant-a/"),
        "a list of every namespace shows only its own: {listed}"
    );
    for (namespace, name) in [
        ("tenant-a", "planted"),
        ("tenant-b", "write-inside-planted"),
    ] {
        let (found, _, _) = server.kubectl(&["-n", namespace, "get", "configmap", name]);
        assert!(!found, "{namespace}/{name} was never written");
    }
    let log = host.log();
    assert!(
        log.contains("system:serviceaccount:tenant-b:kubewasm-tenant"),
        "the cluster refused tenant-b's write as tenant-b's account: {log}"
    );
    // The hostile plugin's own status reports its failures; tenant-a's
    // plugin failed never.
    eventually("the counters reach the statuses", &host, || {
        status(&server, "tenant-b", "hostile")["failures"]
            .as_u64()
            .is_some_and(|f| f >= 5)
            && status(&server, "tenant-a", "myapp")["reconciles"]
                .as_u64()
                .is_some_and(|r| r >= 10)
    });
    assert_eq!(status(&server, "tenant-a", "myapp")["failures"], 0);
}

/// The Deployment in `deploy/FILE`, which runs `replicas`.
fn deployment(file: &str, replicas: u64) -> serde_json::Value {
    let text = std::fs::read_to_string(workspace_root().join("deploy").join(file)).expect("deploy");
    let deployment = kubewasm_runtime::replay::parse_objects(&text)
        .expect("YAML")
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    assert_eq!(deployment["spec"]["replicas"], replicas);
    deployment
}

/// The Deployment's container arguments.
fn deployment_args(deployment: &serde_json::Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_deploy_manifests_should_run_the_host_with_no_right_beyond_its_needs() {
    runs_the_host_with_no_right_beyond_its_needs("host.yaml", 2, &[]);
}

#[test]
fn the_sharded_manifests_should_run_a_ring_with_no_right_beyond_its_needs() {
    runs_the_host_with_no_right_beyond_its_needs(
        "sharded.yaml",
        3,
        &[
            &["list", "leases", "-n", "kubewasm-system"],
            &["watch", "leases", "-n", "kubewasm-system"],
            &["delete", "leases", "-n", "kubewasm-system"],
        ],
    );
}

/// `deploy/FILE` applied, the host's account may do what it needs (and
/// `more`) and nothing beyond, and the host runs as the Deployment runs it.
fn runs_the_host_with_no_right_beyond_its_needs(file: &str, replicas: u64, more: &[&[&str]]) {
    let server = server_with_crds(&[]);
    apply(&server, &workspace_root().join("deploy").join(file));
    // The operator extends kubewasm-plugins to what its plugins read.
    server.ok(&[
        "create",
        "clusterrole",
        "kubewasm-plugins-pods",
        "--verb=get,list,watch",
        "--resource=pods",
    ]);
    server.ok(&[
        "create",
        "clusterrolebinding",
        "kubewasm-plugins-pods",
        "--clusterrole=kubewasm-plugins-pods",
        "--serviceaccount=kubewasm-system:kubewasm",
    ]);
    server.ok(&["create", "namespace", "team-a"]);
    tenant_rights(&server, "team-a", "create,patch", "events.events.k8s.io");
    tenant_role(
        &server,
        "team-a",
        "reads",
        "get,list,watch",
        "configmaps,pods",
    );
    let registry = Registry::start();
    let (source, _) = registry.push(&test_plugin("misbehave"), "tenants/lang:1");

    let account = "system:serviceaccount:kubewasm-system:kubewasm";
    let as_account = format!("--as={account}");
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.push(&as_account);
        server.kubectl(&all).0
    };
    for allowed in [
        &["list", "plugins.kubewasm.dev", "-A"][..],
        &["list", "clusterplugins.kubewasm.dev"],
        &[
            "patch",
            "plugins.kubewasm.dev",
            "--subresource=status",
            "-n",
            "team-a",
        ],
        &["get", "secrets", "-n", "team-a"],
        &["get", "configmaps", "-n", "team-a"],
        &[
            "impersonate",
            "serviceaccounts/kubewasm-tenant",
            "-n",
            "team-a",
        ],
        &["update", "leases", "-n", "kubewasm-system"],
        &["watch", "configmaps", "-A"],
        &["create", "events.events.k8s.io", "-n", "team-a"],
        // Tenants' rights watched for changes (and reviewed: the tenant's
        // plugin below runs only once its SubjectAccessReviews answered).
        &["watch", "rolebindings.rbac.authorization.k8s.io", "-A"],
        &["list", "clusterroles.rbac.authorization.k8s.io"],
    ]
    .into_iter()
    .chain(more.iter().copied())
    {
        assert!(can(allowed), "{account} needs to {allowed:?}");
    }
    // Secure metrics: the scrapers' tokens reviewed, and their rights. Asked
    // by a SubjectAccessReview of its own (`kubectl auth can-i` finds the
    // review types by discovery, where the embedded server lists none).
    for (group, resource) in [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ] {
        let review = serde_json::json!({"apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview", "spec": {"user": account,
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kubewasm-system"],
                "resourceAttributes": {"group": group, "resource": resource, "verb": "create"}}});
        let file = tempfile::NamedTempFile::new().expect("tempfile");
        std::fs::write(file.path(), review.to_string()).expect("written");
        let path = file.path().to_str().expect("a UTF-8 path");
        let answer: serde_json::Value = serde_json::from_str(&server.ok(&[
            "create",
            "--raw",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "-f",
            path,
        ]))
        .expect("a review");
        assert_eq!(
            answer["status"]["allowed"], true,
            "{account} needs to create {resource}: {answer}"
        );
    }
    for denied in [
        &["list", "secrets", "-n", "team-a"][..],
        &["create", "configmaps", "-n", "team-a"],
        &["create", "pods", "-n", "team-a"],
        &["patch", "plugins.kubewasm.dev", "-n", "team-a"],
        &["impersonate", "serviceaccounts/default", "-n", "team-a"],
        &["impersonate", "users/admin"],
        &["update", "leases", "-n", "default"],
        &["delete", "namespaces"],
        &["create", "clusterrolebindings"],
        &["*", "*"],
    ] {
        assert!(!can(denied), "{account} may not {denied:?}");
    }

    // The Deployment's Pods, as a kubelet runs them (its arguments
    // unchanged, user 65532, a read-only root, emptyDirs of mode 0777, the
    // account's token projected, its own network): every replica Ready
    // by its readiness probe, the cache kept in a private directory of its
    // volume, `/metrics` refused without a token.
    let token = server.ok(&["-n", "kubewasm-system", "create", "token", "kubewasm"]);
    let deployment = deployment(file, replicas);
    let mut pods: Vec<Pod> = (0..replicas)
        .map(|i| {
            Pod::start(
                &server,
                &deployment,
                &format!("kubewasm-7d9f-{i}"),
                token.trim(),
            )
        })
        .collect();
    for pod in &mut pods {
        pod.wait_ready(&deployment, Duration::from_secs(120));
        let cache = pod.volume("cache");
        let private = std::fs::metadata(cache.join("uid-65532")).expect("the host's directory");
        assert_eq!(
            (private.uid(), private.permissions().mode() & 0o777),
            (65532, 0o700),
            "{}",
            pod.log()
        );
        assert_eq!(pod.probe(8080, "/metrics", None), "401", "{}", pod.log());
    }
    if more.is_empty() {
        // One leader; SIGTERM releases its Lease and the standby leads.
        let holder = || {
            server
                .kubectl(&[
                    "-n",
                    "kubewasm-system",
                    "get",
                    "lease",
                    "kubewasm",
                    "-o",
                    "jsonpath={.spec.holderIdentity}",
                ])
                .1
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let leader = loop {
            if let Some(i) = pods.iter().position(|p| holder().starts_with(&p.name)) {
                break i;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no leader: {}",
                holder()
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        let leaders: Vec<&str> = pods
            .iter()
            .filter(|p| p.log().contains("became the leader"))
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(leaders, [pods[leader].name.as_str()]);
        let mut stopped = pods.remove(leader);
        assert!(stopped.stop("TERM").success(), "{}", stopped.log());
        assert!(
            stopped.log().contains("released the lease"),
            "{}",
            stopped.log()
        );
        // Within the Lease's duration and 2 s (the Pod deleted, as a
        // kubelet stops it); released, the next round of the standby's
        // takes it.
        let lease: u64 = deployment_args(&deployment)
            .iter()
            .find_map(|a| a.strip_prefix("--lease-duration-seconds=")?.parse().ok())
            .expect("the Lease's duration");
        let deadline = std::time::Instant::now() + Duration::from_secs(lease + 2);
        while !pods[0].log().contains("became the leader") {
            assert!(
                std::time::Instant::now() < deadline,
                "the standby did not lead within {lease} + 2 s of the release: {}",
                pods[0].log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for pod in &pods {
        assert!(!pod.log().contains("forbidden"), "{}", pod.log());
    }
    drop(pods);

    // A tenant's Plugin from a registry, loaded by the host with that
    // account's token: the test's registry is plain HTTP on loopback (a
    // TLS registry in the cluster is the real node's), so this host is run
    // by hand with the Deployment's arguments but its endpoints' and the
    // registry's.
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig =
        server.kubeconfig_with_token(token.trim(), &dir.path().join("host.kubeconfig"));
    let mut flags: Vec<String> = deployment_args(&deployment)
        .into_iter()
        .skip(1) // `run`
        .filter(|a| {
            // The endpoints served plainly, as the tests read them
            // (--metrics-secure has a test of its own, dashboards.rs).
            ![
                "--plugins=",
                "--metrics-addr=",
                "--cache-dir=",
                "--metrics-secure",
            ]
            .iter()
            .any(|f| a.starts_with(f))
        })
        .collect();
    flags.push("--plain-http".to_owned());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = Host::start_as(&kubeconfig, &[], &[], &flags);
    host.wait_ready();
    apply_text(
        &server,
        &plugin("team-a", "lang", &source, "  config:\n    mode: language\n"),
    );
    server.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "c",
        "--from-literal=a=b",
    ]);
    eventually_showing(
        "the tenant's plugin runs, its status written, its events made as the tenant",
        &host,
        || format!("{:#}", status(&server, "team-a", "lang")),
        || {
            status(&server, "team-a", "lang")["phase"] == "Running"
                && event_notes(&server, "team-a", "Language").contains_key("c")
        },
    );
    let log = host.log();
    if more.is_empty() {
        assert!(log.contains("became the leader"), "{log}");
    }
    assert!(!log.contains("forbidden"), "{log}");
}
