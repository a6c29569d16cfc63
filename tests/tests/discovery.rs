//! The REST mapper agrees with a cluster's discovery: built by the engine's
//! discovery from the embedded API server (as from any cluster), it maps
//! every served type of the documents kubectl reads exactly as the mapper
//! `replay` uses (built-in types plus the fixtures' CRDs), and refuses the
//! same lies.

use kubewasm_runtime::mapper::{MapperError, RestMapper};
use kubewasm_runtime::replay::parse_objects;
use kubewasm_runtime::resource::ResourceType;
use kubewasm_tests::{Apiserver, example_file};
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
            assert_eq!(
                fixtures.resolve(&declared),
                discovered.resolve(&declared),
                "{declared}"
            );
            assert_eq!(discovered.resolve(&declared), Ok(declared.clone()));
            compared += 1;
        }
    }
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
