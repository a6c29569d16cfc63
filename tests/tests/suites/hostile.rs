//! Hostile plugins, one class of attack per test: each attempt is denied or
//! stopped with its specific typed error, and afterwards the same plugin and
//! the other plugins still reconcile correctly.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kubewasm_runtime::cache::{Cache, MemoryCache};
use kubewasm_runtime::grants::OperatorGrants;
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use kubewasm_runtime::{
    CallError, ConfigError, Contract, InstanceReuse, Limit, LimitExceeded, Limits, LoadError,
    MapChange, MapError, Plugin, ReconcileError, Request, Runtime, RuntimeConfig,
};
use kubewasm_tests::{compiled_cache_dir, load_options, test_plugin};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_millis(500);

/// Small limits, so each flood hits its own limit quickly.
fn limits() -> Limits {
    Limits {
        actions: 1_000,
        object_bytes: 1 << 20,
        log_records: 500,
        map_keys: 100,
        hostcalls: 5_000,
        ..Limits::default()
    }
}

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let config = RuntimeConfig::default()
            .deadline(DEADLINE)
            .memory_limit(64 << 20)
            .max_instances(32)
            .limits(limits())
            .cache_dir(compiled_cache_dir())
            .instance_reuse(InstanceReuse::Reuse);
        Runtime::new(config).expect("engine")
    })
}

fn plugin(name: &str) -> Plugin {
    runtime()
        .load_file(test_plugin(name), &load_options())
        .expect("loads")
}

fn cache() -> Arc<dyn Cache> {
    let pod = |name: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "default", "labels": labels}})
    };
    Arc::new(
        MemoryCache::from_objects([
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cm", "namespace": "default", "uid": "u-cm"},
                   "data": {"k": "v"}}),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "cm", "namespace": "default"}, "data": {"token": "c2VjcmV0"}}),
            pod("shown", json!({"misbehave": "visible"})),
            pod("hidden", json!({"misbehave": "no"})),
        ])
        .expect("valid fixtures"),
    )
}

fn request(mode: &str) -> Request {
    Request {
        config: json!({"mode": mode}).to_string(),
        ..Request::new(ObjectKey::namespaced("default", "cm"))
    }
}

fn call(plugin: &Plugin, mode: &str) -> Result<kubewasm_runtime::step::Outcome, ReconcileError> {
    kubewasm_runtime::step::reconcile(plugin, cache(), &request(mode))
}

/// The same plugin still serves a good call, with a fresh instance (the
/// per-instance call counter restarts), and so does another plugin.
fn assert_still_serving(plugin: &Plugin) {
    let outcome = call(plugin, "ok").expect("ok mode reconciles");
    let copy = outcome.actions[0].request().body;
    assert_eq!(copy["metadata"]["name"], "cm-copy");
    let other = runtime()
        .load_file(kubewasm_tests::example_plugin("myapp"), &load_options())
        .expect("myapp loads");
    assert_eq!(other.declaration().name, "myapp");
}

fn limit_of(err: &ReconcileError) -> Option<Limit> {
    match err {
        ReconcileError::Call(CallError::LimitExceeded(LimitExceeded { limit, .. })) => Some(*limit),
        _ => None,
    }
}

#[test]
fn a_lying_plural_should_be_refused_at_load_naming_the_type() {
    let err = runtime()
        .load_file(test_plugin("liar"), &load_options())
        .expect_err("lies");
    assert!(matches!(err, LoadError::Declaration(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "invalid declaration: declared type refused: v1 ConfigMap is declared as `secrets, namespaced` but the cluster serves it as `configmaps, namespaced`: the plural and scope come from discovery"
    );
}

#[test]
fn a_lying_python_declaration_should_be_refused_too() {
    let err = runtime()
        .load_file(test_plugin("liar-py"), &load_options())
        .expect_err("lies");
    assert!(
        err.to_string().contains(
            "v1 ConfigMap is declared as `secrets, namespaced` but the cluster serves it as `configmaps, namespaced`"
        ),
        "{err}"
    );
}

#[test]
fn interpreted_plugins_should_meet_the_same_rules() {
    for name in ["misbehave-py", "misbehave-js"] {
        let plugin = plugin(name);
        let applied = |mode: &str| {
            let outcome = call(&plugin, mode).unwrap_or_else(|e| panic!("{name} {mode}: {e}"));
            outcome.actions[0].request().body["metadata"]["name"].clone()
        };
        assert_eq!(applied("lie-plural"), "lied-true", "{name}");
        assert_eq!(applied("list-pods"), "listed-shown-hidden-false", "{name}");
        let err = call(&plugin, "system-namespace").expect_err("kube-system");
        assert!(
            err.to_string().contains("is a system namespace"),
            "{name}: {err}"
        );
        let bad = Request {
            config: r#"{"mode": 5}"#.into(),
            ..request("ok")
        };
        let err = kubewasm_runtime::step::reconcile(&plugin, cache(), &bad).expect_err("schema");
        assert!(matches!(err, ReconcileError::Config(_)), "{name}: {err}");
    }
}

#[test]
fn plurals_passed_at_run_time_should_be_ignored_for_the_host_ones() {
    let plugin = plugin("misbehave");
    let outcome = call(&plugin, "lie-plural").expect("reconciles");
    let requests: Vec<_> = outcome.actions.iter().map(|a| a.request()).collect();
    // The read found the ConfigMap, not the Secret of the same name.
    assert_eq!(requests[0].body["note"], "true");
    assert_eq!(requests[1].method, kubewasm_runtime::action::Method::Delete);
    assert_eq!(requests[1].path, "/api/v1/namespaces/default/configmaps/cm");
    assert_still_serving(&plugin);
}

#[test]
fn names_and_namespaces_should_be_validated_before_any_request() {
    let plugin = plugin("misbehave");
    let err = call(&plugin, "bad-name").expect_err("bad name");
    assert!(matches!(err, ReconcileError::Action(_)), "{err}");
    assert!(
        err.to_string()
            .contains("invalid name `a/b`: must be a DNS subdomain"),
        "{err}"
    );
    let err = call(&plugin, "system-namespace").expect_err("kube-system");
    assert!(
        err.to_string()
            .contains("namespace `kube-system` is a system namespace"),
        "{err}"
    );
    assert_still_serving(&plugin);
}

#[test]
fn operator_grants_should_narrow_reads_writes_and_refuse_excess() {
    let narrowed = |text: &str| {
        runtime().load_file(
            test_plugin("misbehave"),
            &load_options().grants(OperatorGrants::parse(text).expect("valid grants")),
        )
    };
    let err = narrowed(
        "rules:\n- {apiGroups: [''], kinds: [ConfigMap, Pod], verbs: [get, list, watch, apply]}\n",
    )
    .expect_err("delete not granted");
    assert!(matches!(err, LoadError::NotGranted(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "plugin `misbehave` declares more than the operator grants it: delete v1 ConfigMap"
    );

    let tenant = narrowed("namespaces: [team-a]\n").expect("loads");
    let err = call(&tenant, "ok").expect_err("default is not granted");
    let ReconcileError::Failed { message } = &err else {
        panic!("expected the plugin to see the denial, got {err}");
    };
    assert!(
        message.contains("may not get v1 ConfigMap: namespace `default` is not granted to it"),
        "{message}"
    );
    let listed = kubewasm_runtime::step::reconcile(
        &tenant,
        cache(),
        &Request {
            key: ObjectKey::namespaced("team-a", "cm"),
            ..request("list-pods")
        },
    )
    .expect("lists");
    assert_eq!(
        listed.actions[0].request().body["note"],
        "listed= hidden=denied"
    );
    assert_still_serving(&plugin("misbehave"));
}

#[test]
fn a_secondary_selector_should_restrict_reads() {
    let plugin = plugin("misbehave");
    let outcome = call(&plugin, "list-pods").expect("lists");
    assert_eq!(
        outcome.actions[0].request().body["note"],
        "listed=shown hidden=false"
    );
}

/// A sleeping guest is stopped within twice its deadline, on a plain
/// thread and on an async worker thread alike.
fn assert_sleep_stopped(plugin: &Plugin) {
    kubewasm_tests::assert_stopped_at_deadline(DEADLINE, || call(plugin, "sleep"));
}

#[test]
fn a_sleeping_plugin_should_be_stopped_at_its_deadline() {
    for name in ["misbehave", "misbehave-py"] {
        let plugin = plugin(name);
        assert_sleep_stopped(&plugin);
        if name == "misbehave" {
            assert_still_serving(&plugin);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_plugin_should_not_panic_an_async_worker() {
    // Blocking WASI calls never enter tokio, so even a call made (wrongly)
    // on a worker thread ends with the typed error, not a panic.
    let on_worker = tokio::spawn(async {
        let rust = plugin("misbehave");
        assert_sleep_stopped(&rust);
        // Writing to stderr (a panic message) opens, writes and drops WASI
        // streams: none of it may enter tokio either.
        let err = call(&rust, "panic").expect_err("panics");
        assert!(
            matches!(err, ReconcileError::Call(CallError::Panicked { .. })),
            "{err}"
        );
        assert_still_serving(&rust);
        let python = plugin("misbehave-py");
        assert_sleep_stopped(&python);
        let err = call(&python, "raise").expect_err("raises");
        assert!(
            err.to_string().contains("misbehave-py was asked to raise"),
            "{err}"
        );
    });
    on_worker.await.expect("no panic on the worker");
}

#[test]
fn floods_should_stop_at_their_limit_and_drop_the_instance() {
    let plugin = plugin("misbehave");
    for (mode, limit) in [
        ("flood-log", Limit::LogRecords),
        ("flood-reads", Limit::Hostcalls),
        ("flood-actions", Limit::Actions),
        ("big-object", Limit::ObjectBytes),
    ] {
        let before = runtime().limit_counts().get(limit);
        let started = Instant::now();
        let err = call(&plugin, mode).expect_err(mode);
        assert_eq!(limit_of(&err), Some(limit), "{mode}: {err}");
        assert!(
            err.to_string()
                .starts_with(&format!("limit {limit} exceeded")),
            "{err}"
        );
        assert!(
            started.elapsed() < DEADLINE,
            "{mode} stopped by the limit, not the deadline"
        );
        assert!(runtime().limit_counts().get(limit) > before);
        // The instance that overran was dropped: the next call gets a fresh
        // one, whose call counter starts at 1.
        let count = call(&plugin, "count").expect("counts");
        assert_eq!(count.actions[0].request().body["note"], "1", "{mode}");
        assert_still_serving(&plugin);
    }
}

#[test]
fn interpreted_floods_should_stop_at_their_limit() {
    for name in ["misbehave-py", "misbehave-js"] {
        let plugin = plugin(name);
        for (mode, limit) in [
            ("flood-log", Limit::LogRecords),
            ("flood-actions", Limit::Actions),
        ] {
            let err = call(&plugin, mode).expect_err(mode);
            assert_eq!(limit_of(&err), Some(limit), "{name} {mode}: {err}");
        }
        let err = call(&plugin, "bad-name").expect_err("bad name");
        assert!(
            err.to_string().contains("invalid name `a/b`"),
            "{name}: {err}"
        );
        let ok = call(&plugin, "ok").expect("still serves");
        assert_eq!(ok.actions[0].request().body["metadata"]["name"], "cm-copy");
    }
}

fn config_maps() -> ResourceType {
    ResourceType {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        plural: "configmaps".into(),
        namespaced: true,
    }
}

#[test]
fn map_keys_should_be_bounded_and_validated() {
    let plugin = plugin("misbehave");
    let configmap = config_maps();
    let object = |keys: u32, name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
               "data": {"keys": keys.to_string(), "name": name}})
        .to_string()
    };
    let keys = plugin
        .map(cache(), &configmap, MapChange::of(&object(3, "cm")), "{}")
        .expect("maps");
    assert_eq!(keys, vec![ObjectKey::namespaced("default", "cm"); 3]);
    let err = plugin
        .map(cache(), &configmap, MapChange::of(&object(101, "cm")), "{}")
        .expect_err("too many");
    assert!(
        matches!(
            err,
            MapError::Call(CallError::LimitExceeded(LimitExceeded {
                limit: Limit::MapKeys,
                ..
            }))
        ),
        "{err}"
    );
    let err = plugin
        .map(cache(), &configmap, MapChange::of(&object(1, "../x")), "{}")
        .expect_err("invalid key");
    assert!(matches!(err, MapError::InvalidKey(_)), "{err}");
    let err = plugin
        .map(cache(), &configmap, MapChange::of(&object(1, "fail")), "{}")
        .expect_err("a failure");
    assert!(
        matches!(&err, MapError::Failed { message } if message == "asked to fail"),
        "{err}"
    );
    // Contract 0.2.0: map-keys reads the cache, under the plugin's grants.
    let pointer = json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "pointer", "namespace": "default"},
                         "data": {"name": "followed"}});
    let followed = Arc::new(MemoryCache::from_objects([pointer]).expect("valid fixture"));
    let changed = json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "y", "namespace": "default"},
                         "data": {"keys": "1", "follow": "pointer"}});
    let keys = plugin
        .map(
            followed,
            &configmap,
            MapChange::of(&changed.to_string()),
            "{}",
        )
        .expect("a read inside map-keys");
    assert_eq!(keys, vec![ObjectKey::namespaced("default", "followed")]);
    assert_still_serving(&plugin);
}

/// Contract 0.3.0: `map-keys` sees a modified object's previous state and
/// a deletion; a 0.2.0 component (kept as built) is called for each state,
/// so it maps the primary an object left all the same.
#[test]
fn map_keys_should_see_the_previous_state_whatever_the_contract() {
    let configmap = config_maps();
    let state = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"},
               "data": {"keys": "1", "name": name}})
        .to_string()
    };
    let (now, before) = (state("joined"), state("left"));
    let moved = MapChange {
        object: &now,
        previous: Some(&before),
        deleted: false,
    };
    let deleted = MapChange {
        object: &now,
        previous: None,
        deleted: true,
    };
    let keys = |names: &[&str]| -> Vec<ObjectKey> {
        names
            .iter()
            .map(|n| ObjectKey::namespaced("default", *n))
            .collect()
    };
    let current = plugin("misbehave");
    assert_eq!(current.contract(), Contract::V0_3);
    let map = |plugin: &Plugin, change| plugin.map(cache(), &configmap, change, "{}");
    assert_eq!(
        map(&current, moved).expect("maps"),
        keys(&["joined", "left"])
    );
    assert_eq!(
        map(&current, deleted).expect("maps"),
        keys(&["joined", "gone"])
    );
    let old = runtime()
        .load_file(
            kubewasm_tests::contract_fixture("0.2.0", "misbehave"),
            &load_options(),
        )
        .expect("the 0.2.0 build loads");
    assert_eq!(old.contract(), Contract::V0_2);
    assert_eq!(map(&old, moved).expect("maps"), keys(&["joined", "left"]));
    assert_eq!(map(&old, deleted).expect("maps"), keys(&["joined"]));
}

#[test]
fn configuration_should_match_the_config_schema() {
    let plugin = plugin("misbehave");
    let err = plugin
        .check_config(r#"{"mode": "ok", "port": 70000}"#)
        .expect_err("port out of range");
    assert!(
        matches!(err, ConfigError::Schema { ref path, .. } if path == "/port"),
        "{err}"
    );
    let bad = Request {
        config: r#"{"mode": 5}"#.into(),
        ..request("ok")
    };
    let err = kubewasm_runtime::step::reconcile(&plugin, cache(), &bad).expect_err("refused");
    assert!(matches!(err, ReconcileError::Config(_)), "{err}");
    assert!(err.to_string().contains("config-schema"), "{err}");
    assert!(plugin.check_config(r#"{"mode": "ok", "port": 80}"#).is_ok());
    assert_still_serving(&plugin);
}
