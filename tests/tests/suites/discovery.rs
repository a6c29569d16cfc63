//! The REST mapper agrees with a cluster's discovery: built by the engine's
//! discovery from the embedded API server (as from any cluster), it maps
//! every served type of the documents kubectl reads exactly as the mapper
//! `replay` uses (built-in types plus the fixtures' CRDs), and refuses the
//! same lies. And the host keeps up with it: a plugin whose CRD comes after
//! it loads within seconds of the CRD, and one whose CRD goes stops and
//! comes back with it (the real `kubewasm run`, its defaults, kubectl).

use std::time::{Duration, Instant};

use kubewasm_runtime::mapper::{MapperError, RestMapper};
use kubewasm_runtime::replay::parse_objects;
use kubewasm_runtime::resource::ResourceType;
use kubewasm_tests::host::{Host, apply, apply_text, eventually, get_json, wait_for};
use kubewasm_tests::registry::Registry;
use kubewasm_tests::resources::{condition, counted, server_with_crds};
use kubewasm_tests::{Apiserver, example_file, example_plugin};
use serde_json::Value;

fn raw(server: &Apiserver, path: &str) -> Value {
    serde_json::from_str(&server.ok(&["get", "--raw", path])).expect("discovery is JSON")
}

#[test]
fn a_mapper_from_discovery_should_agree_with_the_replay_mapper() {
    let server = Apiserver::start();
    let crd_path = example_file("myapp", "crd.yaml");
    server.ok(&["apply", "-f", crd_path.to_str().unwrap_or_default()]);

    // Every group version the server serves, as kube-rs's discovery walks them.
    let mut documents = vec![raw(&server, "/api/v1")];
    let groups = raw(&server, "/apis");
    for group in groups["groups"].as_array().expect("groups") {
        for version in group["versions"].as_array().expect("versions") {
            let gv = version["groupVersion"].as_str().expect("groupVersion");
            documents.push(raw(&server, &format!("/apis/{gv}")));
        }
    }
    // The engine's own discovery, over kube-rs.
    let discovered = tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let client = server.client().await.expect("client");
            kubewasm_engine::discovery::mapper(&client).await
        })
        .expect("discovered");
    let crd = parse_objects(&std::fs::read_to_string(&crd_path).expect("crd")).expect("yaml");
    let fixtures = RestMapper::for_fixtures(&crd).expect("crd valid");
    assert!(discovered.len() > 50, "{} types", discovered.len());

    let mut compared = 0;
    let mut disagreeing = Vec::new();
    for document in &documents {
        let (group, version) = kubewasm_runtime::resource::split_api_version(
            document["groupVersion"].as_str().unwrap_or_default(),
        );
        for resource in document["resources"].as_array().into_iter().flatten() {
            let plural = resource["name"].as_str().unwrap_or_default();
            if plural.contains('/') {
                continue;
            }
            let declared = ResourceType {
                group: group.into(),
                version: version.into(),
                kind: resource["kind"].as_str().unwrap_or_default().into(),
                plural: plural.into(),
                namespaced: resource["namespaced"].as_bool().unwrap_or_default(),
            };
            let (offline, online) = (fixtures.resolve(&declared), discovered.resolve(&declared));
            if offline != online || online.as_ref() != Ok(&declared) {
                disagreeing.push(format!(
                    "{declared}: replay {offline:?}, discovery {online:?}"
                ));
            }
            compared += 1;
        }
    }
    assert!(disagreeing.is_empty(), "{disagreeing:#?}");
    assert!(
        compared == discovered.len(),
        "{compared} of {}",
        discovered.len()
    );

    let lying = ResourceType {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "secrets".into(),
        namespaced: true,
    };
    assert!(matches!(
        discovered.resolve(&lying),
        Err(MapperError::Disagrees { .. })
    ));
}

/// A MyApp `name` in `default`.
fn myapp(name: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: MyApp\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  replicas: 1\n  image: nginx:1.27\n  port: 8080\n"
    )
}

/// Whether the Deployment `default/name` exists.
fn deployed(server: &Apiserver, name: &str) -> bool {
    get_json(server, &["deployment", name, "-n", "default"]).is_some()
}

/// Applies the MyApp CRD, and waits until the cluster serves it (as
/// kubectl sees it): what a Helm chart's next step waits for.
fn apply_myapp_crd(server: &Apiserver) {
    apply(server, &example_file("myapp", "crd.yaml"));
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/myapps.example.com",
        "--timeout=30s",
    ]);
}

#[test]
fn a_directory_plugin_should_wait_for_its_crd_and_follow_it_as_it_goes_and_comes_back() {
    let server = Apiserver::start();
    let host = Host::run(&server, &["myapp"]);
    host.wait_ready();
    let series = |result: &str| {
        format!(r#"kubewasm_plugin_loads_total{{plugin="myapp",result="{result}"}}"#)
    };
    eventually("myapp waits for its type", &host, || {
        counted(&host, &series("unserved")) >= 1.0
    });
    assert!(
        host.log()
            .contains("example.com/v1 MyApp is not served by the cluster"),
        "the log says which type it waits for:\n{}",
        host.log()
    );
    assert_eq!(counted(&host, &series("loaded")), 0.0);

    let applied = Instant::now();
    apply_myapp_crd(&server);
    wait_for(
        "myapp loads once its CRD is served",
        &host,
        Duration::from_secs(10),
        String::new,
        || counted(&host, &series("loaded")) >= 1.0,
    );
    let waited = applied.elapsed();
    apply_text(&server, &myapp("first"));
    eventually("the first MyApp is reconciled", &host, || {
        deployed(&server, "first")
    });

    // The CRD deleted under the running plugin: it stops, and says so.
    server.ok(&["delete", "crd", "myapps.example.com", "--wait=true"]);
    eventually("myapp stops with its type gone", &host, || {
        counted(&host, &series("unserved")) >= 2.0
    });
    assert!(
        host.log().contains("no longer served: stopped"),
        "{}",
        host.log()
    );
    // Served again: it resumes, and reconciles what is created then.
    let again = Instant::now();
    apply_myapp_crd(&server);
    wait_for(
        "myapp resumes once its CRD is served again",
        &host,
        Duration::from_secs(10),
        String::new,
        || counted(&host, &series("loaded")) >= 2.0,
    );
    let resumed = again.elapsed();
    apply_text(&server, &myapp("second"));
    eventually("a MyApp created afterwards is reconciled", &host, || {
        deployed(&server, "second")
    });
    eprintln!(
        "loaded {waited:?} after its CRD was applied; resumed {resumed:?} after it came back"
    );
}

#[test]
fn a_plugin_resource_should_say_it_waits_for_its_type_and_run_once_served() {
    let server = server_with_crds(&[]);
    let registry = Registry::start();
    let (source, _) = registry.push(&example_plugin("myapp"), "plugins/myapp:1");
    let host = Host::start(&server, &[], &[], &["--plain-http"]);
    host.wait_ready();
    apply_text(
        &server,
        &format!(
            "apiVersion: kubewasm.dev/v1alpha1\nkind: ClusterPlugin\nmetadata:\n  name: myapp\n\
             spec:\n  source: {source}\n"
        ),
    );
    let cluster_status = || {
        get_json(&server, &["clusterplugin", "myapp"])
            .map(|p| p["status"].clone())
            .unwrap_or(Value::Null)
    };
    eventually(
        "the ClusterPlugin says it waits for its type",
        &host,
        || {
            let status = cluster_status();
            let degraded = condition(&status, "Degraded");
            status["phase"] == "Failed"
                && degraded["reason"] == "TypeNotServed"
                && degraded["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("example.com/v1 MyApp is not served"))
        },
    );
    let applied = Instant::now();
    apply_myapp_crd(&server);
    wait_for(
        "the ClusterPlugin runs once its type is served",
        &host,
        Duration::from_secs(10),
        || format!("{:#}", cluster_status()),
        || cluster_status()["phase"] == "Running",
    );
    eprintln!("running {:?} after its CRD was applied", applied.elapsed());
    apply_text(&server, &myapp("served"));
    eventually("its MyApp is reconciled", &host, || {
        deployed(&server, "served")
    });
    server.ok(&["delete", "crd", "myapps.example.com", "--wait=true"]);
    eventually("its type gone, it stops and says why", &host, || {
        let status = cluster_status();
        status["phase"] == "Failed"
            && condition(&status, "Degraded")["reason"] == "TypeNotServed"
            && condition(&status, "Ready")["status"] == "False"
    });
    apply_myapp_crd(&server);
    eventually("served again, it runs again", &host, || {
        cluster_status()["phase"] == "Running"
    });
}
