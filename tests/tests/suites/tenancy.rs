//! Tenants bounded by their own rights, end to end: the real `kubewasm run`
//! with `--impersonate-tenants`, the embedded API server, plugins pulled
//! from a real registry. A tenant's plugin runs only while the tenant's
//! own account may read what the plugin reads; RBAC granted or taken away
//! counts within 30 s; a confined plugin sees its own Namespace only.

use std::time::Duration;

use kubewasm_tests::host::{Host, apply, apply_text, event_notes, wait_for};
use kubewasm_tests::registry::Registry;
use kubewasm_tests::resources::{
    condition, counted, plugin, server_with_crds, status, tenant_rights, tenant_role,
};
use kubewasm_tests::{Apiserver, example_file, example_plugin, test_plugin};

/// How soon an RBAC change must count.
const WITHIN: Duration = Duration::from_secs(30);

/// Whether the Plugin `namespace/name` is refused for its reads, its
/// message naming each of `named`.
fn refused_for_reads(server: &Apiserver, namespace: &str, name: &str, named: &[&str]) -> bool {
    let status = status(server, namespace, name);
    let degraded = condition(&status, "Degraded");
    let message = degraded["message"].as_str().unwrap_or_default();
    status["phase"] == "Failed"
        && degraded["reason"] == "ReadsForbidden"
        && condition(&status, "Ready")["status"] == "False"
        && named.iter().all(|n| message.contains(n))
}

fn running(server: &Apiserver, namespace: &str, name: &str) -> bool {
    status(server, namespace, name)["phase"] == "Running"
}

#[test]
fn a_tenant_plugin_should_run_only_while_its_account_may_read_what_it_reads() {
    let server = server_with_crds(&[]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    let registry = Registry::start();
    let (myapp, _) = registry.push(&example_plugin("myapp"), "tenants/myapp:1");
    let (snoop, _) = registry.push(&test_plugin("snoop"), "tenants/snoop:1");
    for ns in ["weak", "no-secrets", "confined"] {
        server.ok(&["create", "namespace", ns]);
    }
    // weak: its account reads MyApps only, though it may write what myapp
    // writes.
    tenant_rights(&server, "weak", "get,list,watch", "myapps.example.com");
    tenant_role(
        &server,
        "weak",
        "writes",
        "create,patch,update",
        "myapps.example.com/status,deployments.apps,services,events.events.k8s.io",
    );
    // no-secrets: reads ConfigMaps and its Namespace, not Secrets.
    tenant_rights(
        &server,
        "no-secrets",
        "get,list,watch",
        "configmaps,namespaces",
    );
    tenant_role(
        &server,
        "no-secrets",
        "events",
        "create,patch",
        "events.events.k8s.io",
    );
    // confined: may read all snoop reads.
    tenant_rights(
        &server,
        "confined",
        "get,list,watch",
        "configmaps,secrets,namespaces",
    );
    tenant_role(
        &server,
        "confined",
        "events",
        "create,patch",
        "events.events.k8s.io",
    );
    server.ok(&[
        "-n",
        "confined",
        "create",
        "secret",
        "generic",
        "mine",
        "--from-literal=a=b",
    ]);
    server.ok(&[
        "-n",
        "no-secrets",
        "create",
        "secret",
        "generic",
        "theirs",
        "--from-literal=a=b",
    ]);
    let host = Host::start(
        &server,
        &[],
        &[],
        &["--plain-http", "--impersonate-tenants"],
    );
    host.wait_ready();

    apply_text(&server, &plugin("weak", "myapp", &myapp, ""));
    apply_text(&server, &plugin("no-secrets", "snoop", &snoop, ""));
    apply_text(&server, &plugin("confined", "snoop", &snoop, ""));
    let statuses = || {
        ["weak/myapp", "no-secrets/snoop", "confined/snoop"]
            .iter()
            .filter_map(|id| id.split_once('/'))
            .map(|(ns, name)| format!("{ns}/{name}: {:#}", status(&server, ns, name)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    wait_for(
        "the weak tenant is refused, naming each type and verb it lacks",
        &host,
        Duration::from_secs(60),
        statuses,
        || {
            refused_for_reads(
                &server,
                "weak",
                "myapp",
                &[
                    "weak/kubewasm-tenant",
                    "get, list, watch deployments.apps",
                    "services",
                ],
            )
        },
    );

    // Granted: it runs, the Plugin untouched.
    tenant_role(
        &server,
        "weak",
        "reads",
        "get,list,watch",
        "deployments.apps,services",
    );
    wait_for(
        "a right granted lets it run",
        &host,
        WITHIN,
        statuses,
        || running(&server, "weak", "myapp"),
    );
    apply_text(
        &server,
        "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: web\n  namespace: weak\n\
         spec:\n  replicas: 1\n  image: nginx:1.27\n  port: 8080\n",
    );
    wait_for(
        "it reconciles",
        &host,
        Duration::from_secs(60),
        statuses,
        || {
            server
                .kubectl(&["-n", "weak", "get", "deployment", "web"])
                .0
        },
    );

    // Taken away: stopped, refused again.
    server.ok(&["-n", "weak", "delete", "rolebinding", "reads"]);
    wait_for(
        "a right taken away stops it",
        &host,
        WITHIN,
        statuses,
        || refused_for_reads(&server, "weak", "myapp", &["deployments.apps", "services"]),
    );
    assert!(
        host.metric(r#"kubewasm_plugin_loads_total{plugin="weak.myapp",result="removed"}"#)
            .is_some_and(|n| n >= 1.0),
        "the stop is counted"
    );

    // A plugin reading Secrets where the account may not never runs; the
    // confined one sees its own Namespace and Secrets only.
    for ns in ["no-secrets", "confined"] {
        server.ok(&[
            "-n",
            ns,
            "create",
            "configmap",
            "probe",
            "--from-literal=a=b",
        ]);
    }
    wait_for(
        "the confined plugin lists its own Namespace only",
        &host,
        Duration::from_secs(60),
        || {
            format!(
                "{statuses}\n{:?}",
                event_notes(&server, "confined", "Saw"),
                statuses = statuses()
            )
        },
        || {
            event_notes(&server, "confined", "Saw")
                .get("probe")
                .is_some_and(|notes| {
                    notes
                        .iter()
                        .any(|n| n == "namespaces=confined secrets=mine")
                })
        },
    );
    assert!(
        refused_for_reads(&server, "no-secrets", "snoop", &["get, list secrets"]),
        "{}",
        statuses()
    );
    assert!(
        event_notes(&server, "no-secrets", "Saw").is_empty(),
        "it never ran"
    );
    assert!(
        host.metric(r#"kubewasm_plugin_loads_total{plugin="no-secrets.snoop",result="loaded"}"#)
            .is_none(),
        "it never loaded"
    );
}

/// A `kubernetes.io/dockerconfigjson` Secret `regcred` in `namespace`
/// holding `config` (a docker config's text).
fn pull_secret(server: &Apiserver, namespace: &str, config: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.json");
    std::fs::write(&file, config).expect("written");
    server.ok(&[
        "-n",
        namespace,
        "create",
        "secret",
        "generic",
        "regcred",
        "--type=kubernetes.io/dockerconfigjson",
        &format!("--from-file=.dockerconfigjson={}", file.display()),
    ]);
}

#[test]
fn a_tenant_should_pull_with_its_own_credentials_and_never_run_another_tenants_artifact() {
    let server = server_with_crds(&[]);
    let registry = Registry::start_with_user("alice", "s3cret");
    let (_, digest) = registry.push(&test_plugin("misbehave"), "private/lang:1");
    let pinned = format!("oci://{}/private/lang@{digest}", registry.addr);
    for ns in ["owner", "thief"] {
        server.ok(&["create", "namespace", ns]);
    }
    pull_secret(
        &server,
        "owner",
        &registry.docker_config_json("alice", "s3cret"),
    );
    // The host itself may pull from the registry.
    let dir = tempfile::tempdir().expect("tempdir");
    let host_config = dir.path().join("config.json");
    std::fs::write(&host_config, registry.docker_config_json("alice", "s3cret")).expect("written");
    let host_config = host_config.display().to_string();
    let flags = ["--plain-http", "--docker-config", host_config.as_str()];
    let host = Host::start(&server, &[], &[], &flags);
    host.wait_ready();
    let config = "  config:\n    mode: language\n";
    apply_text(
        &server,
        &plugin(
            "owner",
            "lang",
            &pinned,
            &format!("  imagePullSecrets:\n  - name: regcred\n{config}"),
        ),
    );
    let statuses = || {
        format!(
            "owner: {:#}\nthief: {:#}",
            status(&server, "owner", "lang"),
            status(&server, "thief", "lang")
        )
    };
    wait_for(
        "the owner pulls with its secret",
        &host,
        Duration::from_secs(60),
        statuses,
        || {
            let owner = status(&server, "owner", "lang");
            owner["phase"] == "Running" && owner["digest"] == digest.as_str()
        },
    );
    // The host now holds the artifact; the thief names its digest, with no
    // secret of its own: the host's credentials and its cache are not its.
    apply_text(&server, &plugin("thief", "lang", &pinned, config));
    wait_for(
        "the thief is refused",
        &host,
        Duration::from_secs(60),
        statuses,
        || {
            let thief = status(&server, "thief", "lang");
            thief["phase"] == "Failed"
                && condition(&thief, "Degraded")["reason"] == "PullFailed"
                && thief["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("401") || e.contains("authoriz"))
        },
    );
    assert_ne!(status(&server, "thief", "lang")["phase"], "Running");
    drop(host);

    // The operator shares the host's credentials: now the thief may pull.
    let shared = [
        "--plain-http",
        "--docker-config",
        host_config.as_str(),
        "--share-registry-credentials",
    ];
    let host = Host::start(&server, &[], &[], &shared);
    host.wait_ready();
    wait_for(
        "shared credentials open the registry to tenants",
        &host,
        Duration::from_secs(60),
        statuses,
        || status(&server, "thief", "lang")["phase"] == "Running",
    );
    drop(host);

    // The registry gone, a restarted host runs from its cache what each
    // tenant's credentials resolved before; nothing more.
    drop(registry);
    server.ok(&["-n", "thief", "delete", "plugin", "lang"]);
    apply_text(&server, &plugin("thief", "lang", &pinned, config));
    // A status claiming the digest ran proves nothing: it is writable.
    server.ok(&[
        "-n",
        "thief",
        "patch",
        "plugin",
        "lang",
        "--subresource=status",
        "--type=merge",
        "-p",
        &format!(r#"{{"status": {{"digest": "{digest}"}}}}"#),
    ]);
    let host = Host::start(&server, &[], &[], &flags);
    host.wait_ready();
    wait_for(
        "the owner keeps its digest with the registry down",
        &host,
        Duration::from_secs(60),
        statuses,
        || {
            let owner = status(&server, "owner", "lang");
            let thief = status(&server, "thief", "lang");
            // Loaded by this host (a status alone may be the last host's).
            host.metric(r#"kubewasm_plugin_loads_total{plugin="owner.lang",result="loaded"}"#)
                .is_some_and(|n| n >= 1.0)
                && owner["phase"] == "Running"
                && owner["digest"] == digest.as_str()
                && thief["phase"] == "Failed"
                && condition(&thief, "Degraded")["reason"] == "PullFailed"
        },
    );
}

#[test]
fn a_tenants_stalled_registry_should_hold_up_no_other_tenant_and_say_why() {
    use kubewasm_tests::registry::Silent;

    let server = server_with_crds(&[]);
    let registry = Registry::start();
    let (myapp, _) = registry.push(&example_plugin("myapp"), "tenants/myapp:1");
    let silent = Silent::start();
    server.ok(&[
        "apply",
        "-f",
        &example_file("myapp", "crd.yaml").to_string_lossy(),
    ]);
    for ns in ["team-a", "team-b"] {
        server.ok(&["create", "namespace", ns]);
    }
    // Registries may take 30 s to say anything (the default).
    let timeout = Duration::from_secs(30);
    let mut host = Host::start(&server, &[], &[], &["--plain-http"]);
    host.wait_ready();
    let stalled = format!("oci://{}/team-a/stalls:1", silent.addr);
    for name in ["one", "two", "three"] {
        apply_text(&server, &plugin("team-a", name, &stalled, ""));
    }
    let statuses = || {
        ["one", "two", "three"]
            .iter()
            .map(|n| format!("team-a/{n}: {:#}", status(&server, "team-a", n)))
            .chain([format!(
                "team-b/mover: {:#}",
                status(&server, "team-b", "mover")
            )])
            .collect::<Vec<_>>()
            .join("\n")
            + &format!(
                "\nthe silent registry's connections: {:?}",
                silent.accepted()
            )
    };
    wait_for(
        "team-a's first two pulls stall",
        &host,
        WITHIN,
        statuses,
        || silent.accepted().len() == 2,
    );
    // Another tenant's Plugin loads while they stall: before either is
    // given up on, and team-a's third still waits behind its own two.
    apply_text(&server, &plugin("team-b", "mover", &myapp, ""));
    let first = silent.accepted()[0];
    wait_for("team-b's Plugin runs", &host, WITHIN, statuses, || {
        running(&server, "team-b", "mover")
    });
    assert!(first.elapsed() < timeout, "{}", statuses());
    assert_eq!(silent.accepted().len(), 2, "{}", statuses());

    // Deleting a stalled Plugin frees its tenant's turn at once: the third
    // pulls before either stalled pull could be given up on.
    server.ok(&["delete", "plugin", "one", "-n", "team-a", "--wait=false"]);
    wait_for(
        "team-a's third pull starts",
        &host,
        WITHIN,
        statuses,
        || silent.accepted().len() >= 3,
    );
    let accepted = silent.accepted();
    assert!(accepted[2] < accepted[0] + timeout, "{}", statuses());

    // The stalled ones say why: the registry, and that it did not answer.
    wait_for(
        "the stalled Plugins say why",
        &host,
        WITHIN * 2,
        statuses,
        || {
            ["two", "three"].iter().all(|n| {
                let degraded = condition(&status(&server, "team-a", n), "Degraded");
                degraded["reason"] == "PullFailed"
                    && degraded["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&silent.addr) && m.contains("timed out"))
            })
        },
    );
    assert!(running(&server, "team-b", "mover"), "{}", statuses());
    for plugin in ["team-a.two", "team-a.three"] {
        let series = format!("kubewasm_plugin_refused{{plugin=\"{plugin}\"}}");
        assert_eq!(counted(&host, &series), 1.0, "{series}");
    }
    // Nor do they hold the host up when it stops.
    let stopping = std::time::Instant::now();
    assert!(host.terminate().success(), "{}", host.log());
    assert!(
        stopping.elapsed() < timeout,
        "the host waited for a stalled pull to stop"
    );
}
