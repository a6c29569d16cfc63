//! The example plugins, compiled from source, loaded by the runtime and
//! reconciled against cache fixtures: assertions on the exact requests.

use std::sync::Arc;

use kubewasm_runtime::cache::MemoryCache;
use kubewasm_runtime::declaration::{Mapping, Verb};
use kubewasm_runtime::private_dir::PrivateDirError;
use kubewasm_runtime::replay::parse_objects;
use kubewasm_runtime::resource::ObjectKey;
use kubewasm_runtime::{
    CacheDirError, InstanceReuse, Request, Runtime, RuntimeConfig, RuntimeError,
};
use kubewasm_tests::{compiled_cache_dir, example_file, example_plugin, test_plugin};
use serde_json::{Value, json};

fn runtime(config: RuntimeConfig) -> Runtime {
    Runtime::new(config.max_instances(16).cache_dir(compiled_cache_dir())).expect("engine")
}

fn fixture(plugin: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(example_file(plugin, "example.yaml")).expect("fixture exists");
    parse_objects(&text).expect("fixture parses")
}

#[test]
fn a_component_should_run_under_the_instance_name_it_is_given() {
    let runtime = runtime(RuntimeConfig::default());
    let plugin = runtime
        .load_file(
            example_plugin("myapp"),
            &kubewasm_tests::load_options().name("team-a"),
        )
        .expect("loads");
    assert_eq!(plugin.declaration().name, "team-a");
    let outcome = kubewasm_runtime::step::reconcile(
        &plugin,
        kubewasm_tests::myapp_cache(),
        &Request::new(ObjectKey::namespaced("default", "demo")),
    )
    .expect("reconciles");
    assert!(
        outcome
            .actions
            .iter()
            .all(|a| a.request().path.contains("fieldManager=kubewasm-team-a")),
        "every write is the instance's"
    );
    let err = runtime
        .load_file(
            example_plugin("myapp"),
            &kubewasm_tests::load_options().name("Team_A"),
        )
        .expect_err("not a DNS label");
    assert!(
        err.to_string().contains("invalid plugin name `Team_A`"),
        "{err}"
    );
}

#[test]
fn myapp_should_declare_its_types() {
    let plugin = runtime(RuntimeConfig::default())
        .load_file(example_plugin("myapp"), &kubewasm_tests::load_options())
        .expect("loads");
    let decl = plugin.declaration();
    assert_eq!(
        (decl.name.as_str(), decl.primary.plural.as_str()),
        ("myapp", "myapps")
    );
    assert!(decl.primary_verbs.contains(&Verb::ApplyStatus));
    let kinds: Vec<_> = decl
        .secondaries
        .iter()
        .map(|s| s.resource.kind.as_str())
        .collect();
    assert_eq!(kinds, ["Deployment", "Service"]);
    assert!(
        decl.secondaries
            .iter()
            .all(|s| s.mapping == Mapping::OwnerReferences)
    );
}

#[test]
fn myapp_should_desire_owned_deployment_service_and_status() {
    for reuse in [InstanceReuse::Fresh, InstanceReuse::Reuse] {
        let plugin = runtime(RuntimeConfig::default().instance_reuse(reuse))
            .load_file(example_plugin("myapp"), &kubewasm_tests::load_options())
            .expect("loads");
        let cache = Arc::new(MemoryCache::from_objects(fixture("myapp")).expect("valid"));
        let outcome = kubewasm_runtime::step::reconcile(
            &plugin,
            cache,
            &Request::new(ObjectKey::namespaced("default", "demo")),
        )
        .expect("reconciles");
        let requests: Vec<_> = outcome.actions.iter().map(|a| a.request()).collect();
        let paths: Vec<_> = requests.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/apis/apps/v1/namespaces/default/deployments/demo?fieldManager=kubewasm-myapp&force=true",
                "/api/v1/namespaces/default/services/demo?fieldManager=kubewasm-myapp&force=true",
                "/apis/example.com/v1/namespaces/default/myapps/demo/status?fieldManager=kubewasm-myapp&force=true",
            ]
        );
        let owner = json!([{"apiVersion": "example.com/v1", "kind": "MyApp", "name": "demo",
            "uid": "5f1d8a52-3b51-4c1e-9c55-2a7f0f4b8e01", "controller": true, "blockOwnerDeletion": true}]);
        let (deploy, service, status) = (&requests[0].body, &requests[1].body, &requests[2].body);
        assert_eq!(deploy["metadata"]["ownerReferences"], owner);
        assert_eq!(service["metadata"]["ownerReferences"], owner);
        assert_eq!(deploy["spec"]["replicas"], 3);
        let container = &deploy["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            (&container["image"], &container["ports"][0]["containerPort"]),
            (&json!("nginx:1.27"), &json!(8080))
        );
        assert_eq!(service["spec"]["ports"][0]["port"], 8080);
        assert_eq!(status["status"]["availableReplicas"], 2);
        assert_eq!(
            status["status"]["conditions"][0]["reason"],
            "ReplicasUnavailable"
        );
        // Field order as the API server writes it.
        let keys: Vec<_> = deploy
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys[..3], ["apiVersion", "kind", "metadata"]);
        assert_eq!(outcome.requeue_after, None);
    }
}

#[test]
fn myapp_should_do_nothing_for_a_deleted_primary() {
    let plugin = runtime(RuntimeConfig::default())
        .load_file(example_plugin("myapp"), &kubewasm_tests::load_options())
        .expect("loads");
    let cache = Arc::new(MemoryCache::from_objects([]).expect("empty"));
    let outcome = kubewasm_runtime::step::reconcile(
        &plugin,
        cache,
        &Request::new(ObjectKey::namespaced("default", "gone")),
    )
    .expect("reconciles");
    assert!(outcome.actions.is_empty());
}

#[test]
fn config_rollout_should_annotate_by_label_mapping() {
    let plugin = runtime(RuntimeConfig::default())
        .load_file(
            example_plugin("config-rollout"),
            &kubewasm_tests::load_options(),
        )
        .expect("loads");
    let decl = plugin.declaration();
    assert_eq!(
        decl.secondaries[0].mapping,
        Mapping::Label("kubewasm.dev/rollout".into())
    );
    assert_eq!(decl.secondaries[0].label_selector, "kubewasm.dev/rollout");
    assert!(decl.config_schema.is_some());

    let key = ObjectKey::namespaced("default", "web");
    let cache: Arc<dyn kubewasm_runtime::cache::Cache> =
        Arc::new(MemoryCache::from_objects(fixture("config-rollout")).expect("valid"));
    let request = Request {
        config: json!({"annotation": "example.com/hash"}).to_string(),
        ..Request::new(key.clone())
    };
    let outcome = kubewasm_runtime::step::reconcile(&plugin, Arc::clone(&cache), &request)
        .expect("reconciles");
    let patch = outcome.actions[0].request();
    // Contract 0.2.0: the partial apply of a Deployment people edit does
    // not force.
    assert_eq!(
        patch.path,
        "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=kubewasm-config-rollout"
    );
    // Its 0.1.0 build, kept as a fixture, forced (0.1.0 knew no other
    // apply) and otherwise asks for the very same requests.
    let old = runtime(RuntimeConfig::default())
        .load_file(
            kubewasm_tests::contract_fixture("0.1.0", "config-rollout"),
            &kubewasm_tests::load_options(),
        )
        .expect("the 0.1.0 build loads");
    assert_eq!(old.contract(), kubewasm_runtime::Contract::V0_1);
    assert_eq!(plugin.contract(), kubewasm_runtime::Contract::V0_3);
    let old_outcome = kubewasm_runtime::step::reconcile(&old, cache, &request).expect("reconciles");
    let old_patch = old_outcome.actions[0].request();
    assert_eq!(old_patch.path, format!("{}&force=true", patch.path));
    assert_eq!(old_patch.body, patch.body);
    assert_eq!(
        old_outcome.actions[1].request().body["note"],
        outcome.actions[1].request().body["note"]
    );
    assert!(
        patch.body["metadata"].get("ownerReferences").is_none(),
        "unowned"
    );
    let hash =
        patch.body["spec"]["template"]["metadata"]["annotations"]["example.com/hash"].clone();
    assert_eq!(hash.as_str().map(str::len), Some(16), "{hash}");
    let event = outcome.actions[1].request();
    assert_eq!(
        (event.method, event.body["reason"].as_str()),
        (
            kubewasm_runtime::action::Method::Post,
            Some("ConfigChanged")
        )
    );
    assert_eq!(
        event.body["regarding"]["uid"],
        "8d3e4c1a-1111-4a2b-9c3d-000000000001"
    );

    // With the hash in place, the next reconcile settles.
    let mut objects = fixture("config-rollout");
    objects[0]["spec"]["template"]["metadata"]["annotations"] = json!({"example.com/hash": hash});
    let cache = Arc::new(MemoryCache::from_objects(objects).expect("valid"));
    let outcome = kubewasm_runtime::step::reconcile(&plugin, cache, &request).expect("reconciles");
    assert!(outcome.actions.is_empty());
}

#[test]
fn precompiled_cache_should_serve_the_second_load_and_refuse_planted_artifacts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let config = RuntimeConfig::default().max_instances(16).cache_dir(&cache);
    let runtime = |config: RuntimeConfig| Runtime::new(config).expect("engine");
    let load = |name: &str, test: bool| {
        let path = if test {
            test_plugin(name)
        } else {
            example_plugin(name)
        };
        runtime(config.clone())
            .load_file(path, &kubewasm_tests::load_options())
            .expect("loads")
    };
    // The host's own directory in the cache directory.
    let private = || {
        kubewasm_runtime::private_dir::PrivateDir::open(&cache)
            .expect("the host's directory")
            .path()
            .to_owned()
    };
    let artifacts = || -> Vec<std::path::PathBuf> {
        let mut found: Vec<_> = std::fs::read_dir(private())
            .expect("cache dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .collect();
        found.sort();
        found
    };
    let first = load("myapp", false);
    let [artifact] = artifacts().try_into().expect("one artifact");
    let name = artifact
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        name.starts_with(first.digest()) && name.ends_with(".cwasm"),
        "{name}"
    );
    let valid = std::fs::read(&artifact).expect("artifact");

    // A new engine with the same configuration loads the artifact.
    let second = load("myapp", false);
    assert_eq!(second.declaration(), first.declaration());

    // A corrupt, a tampered and a foreign artifact are each discarded and
    // the component compiled again, never trusted.
    let other = load("misbehave", true);
    let foreign = artifacts()
        .into_iter()
        .find(|p| p != &artifact)
        .expect("misbehave's artifact");
    let mut tampered = valid.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0x55;
    for planted in [
        b"garbage".to_vec(),
        tampered,
        std::fs::read(&foreign).expect("foreign"),
    ] {
        std::fs::write(&artifact, planted).expect("plant");
        let reloaded = load("myapp", false);
        assert_eq!(reloaded.declaration(), first.declaration());
        assert_eq!(reloaded.digest(), first.digest());
        assert_ne!(reloaded.digest(), other.digest());
        assert_eq!(
            std::fs::read(&artifact).expect("rewritten"),
            valid,
            "recompiled and stored again"
        );
    }

    // The cache directory may be shared (a Pod's emptyDir is 0777); the
    // host's own directory in it is private, and refused once opened to
    // others.
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).expect("dir").permissions().mode() & 0o777;
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_eq!(load("myapp", false).digest(), first.digest());
    assert_eq!(mode(&private()), 0o700);
    std::fs::set_permissions(private(), std::fs::Permissions::from_mode(0o757)).expect("chmod");
    let err = Runtime::new(config).expect_err("a private directory opened to others");
    assert!(
        matches!(
            err,
            RuntimeError::CacheDir(CacheDirError::Dir(PrivateDirError::Insecure { .. }))
        ),
        "{err}"
    );
}
