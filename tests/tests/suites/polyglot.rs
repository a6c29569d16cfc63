//! Python, JavaScript and Go plugins, built from source by `make plugins
//! test-plugins go-plugins`, run by the same runtime and sandbox as Rust
//! ones.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kubewasm_runtime::action::ApiRequest;
use kubewasm_runtime::cache::{Cache, MemoryCache};
use kubewasm_runtime::replay;
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use kubewasm_runtime::{
    CallError, LoadError, Plugin, ReconcileError, Request, Runtime, RuntimeConfig,
};
use kubewasm_tests::{compiled_cache_dir, example_plugin, test_plugin};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_millis(500);
const MEMORY_LIMIT: usize = 128 << 20;

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| config_runtime(DEADLINE))
}

/// A runtime whose deadline no allocation races: memory exhaustion is
/// tested there, whatever the machine's load.
fn unhurried() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| config_runtime(Duration::from_secs(30)))
}

fn config_runtime(deadline: Duration) -> Runtime {
    let config = RuntimeConfig::default()
        .deadline(deadline)
        .memory_limit(MEMORY_LIMIT)
        .max_instances(32)
        .cache_dir(compiled_cache_dir());
    Runtime::new(config).expect("engine")
}

/// `guest` (a test guest) on the [`unhurried`] runtime.
fn unhurried_plugin(guest: &str) -> Plugin {
    unhurried()
        .load_file(test_plugin(guest), &kubewasm_tests::load_options())
        .expect(guest)
}

/// Each component is compiled once per test binary (and cached on disk),
/// never while a test is timed ([`timed`]).
macro_rules! plugin {
    ($name:ident, $path:expr) => {
        fn $name() -> &'static Plugin {
            static PLUGIN: OnceLock<Plugin> = OnceLock::new();
            PLUGIN.get_or_init(|| {
                let _untimed = TIMED
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                runtime()
                    .load_file($path, &kubewasm_tests::load_options())
                    .expect(stringify!($name))
            })
        }
    };
}

plugin!(tenant_bootstrap, example_plugin("tenant-bootstrap"));
plugin!(replicator, example_plugin("configmap-replicator"));
plugin!(misbehave_py, test_plugin("misbehave-py"));
plugin!(misbehave_js, test_plugin("misbehave-js"));
plugin!(misbehave_go, test_plugin("misbehave-go"));

/// Held by the tests timed against the deadline (loops to it, allocations
/// racing it) and by compiles: one at a time, so that none burns a core
/// another is timed on (the machine has two, and the test threads share
/// them).
static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Every component loaded, then [`TIMED`] held.
fn timed() -> std::sync::MutexGuard<'static, ()> {
    for load in [
        tenant_bootstrap,
        replicator,
        misbehave_py,
        misbehave_js,
        misbehave_go,
    ] {
        load();
    }
    TIMED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cache(objects: Vec<Value>) -> Arc<dyn Cache> {
    Arc::new(MemoryCache::from_objects(objects).expect("valid fixture"))
}

fn reconcile(plugin: &Plugin, objects: Vec<Value>, key: ObjectKey) -> Vec<ApiRequest> {
    kubewasm_runtime::step::reconcile(plugin, cache(objects), &Request::new(key))
        .expect("reconciles")
        .actions
        .iter()
        .map(|a| a.request())
        .collect()
}

fn summary(requests: &[ApiRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| format!("{} {}", r.method, r.path.split('?').next().unwrap_or("")))
        .collect()
}

// ---- tenant-bootstrap (Python) ----

fn namespace(tenant: Option<&str>) -> Value {
    let labels = tenant.map_or(json!({}), |t| json!({"kubewasm.dev/tenant": t}));
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns-uid", "labels": labels}})
}

fn tenant_child(api_version: &str, kind: &str, name: &str, owner: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "team-a",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "team-a", "uid": owner, "controller": true}]}})
}

fn tenant_children(owner: &str) -> Vec<Value> {
    vec![
        tenant_child("v1", "ServiceAccount", "tenant-admin", owner),
        tenant_child(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            "tenant-admin",
            owner,
        ),
        tenant_child("v1", "ConfigMap", "tenant-info", owner),
    ]
}

#[test]
fn tenant_bootstrap_should_create_children_with_an_event() {
    let requests = reconcile(
        tenant_bootstrap(),
        vec![namespace(Some("acme"))],
        ObjectKey::cluster("team-a"),
    );
    assert_eq!(
        summary(&requests),
        [
            "PATCH /api/v1/namespaces/team-a/serviceaccounts/tenant-admin",
            "PATCH /apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/tenant-admin",
            "PATCH /api/v1/namespaces/team-a/configmaps/tenant-info",
            // An event about a Namespace is written in it.
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
        ]
    );
    for child in &requests[..3] {
        assert_eq!(
            child.body["metadata"]["ownerReferences"][0]["kind"],
            "Namespace"
        );
        assert_eq!(
            child.body["metadata"]["ownerReferences"][0]["uid"],
            "ns-uid"
        );
        assert!(
            child
                .path
                .contains("fieldManager=kubewasm-tenant-bootstrap")
        );
    }
    assert_eq!(requests[1].body["roleRef"]["name"], "admin");
    assert_eq!(requests[2].body["data"], json!({"tenant": "acme"}));
    let event = &requests[3].body;
    assert_eq!(
        (
            event["reason"].as_str(),
            event["regarding"]["kind"].as_str()
        ),
        (Some("TenantBootstrapped"), Some("Namespace"))
    );
}

#[test]
fn tenant_bootstrap_should_update_without_an_event() {
    let mut objects = vec![namespace(Some("globex"))];
    objects.extend(tenant_children("ns-uid"));
    let requests = reconcile(tenant_bootstrap(), objects, ObjectKey::cluster("team-a"));
    assert_eq!(requests.len(), 3, "{:?}", summary(&requests));
    assert!(
        requests
            .iter()
            .all(|r| r.method == kubewasm_runtime::action::Method::Patch)
    );
    assert_eq!(requests[2].body["data"], json!({"tenant": "globex"}));
}

#[test]
fn tenant_bootstrap_should_put_back_a_child_edited_by_hand() {
    let mut objects = vec![namespace(Some("acme"))];
    objects.extend(tenant_children("ns-uid"));
    objects[3]["data"] = json!({"tenant": "edited-by-hand"});
    let requests = reconcile(tenant_bootstrap(), objects, ObjectKey::cluster("team-a"));
    let info = requests
        .iter()
        .find(|r| r.path.contains("/configmaps/tenant-info"))
        .expect("tenant-info applied");
    assert_eq!(
        info.body["data"],
        json!({"tenant": "acme"}),
        "forced apply restores our fields"
    );
    assert!(
        requests
            .iter()
            .all(|r| r.method == kubewasm_runtime::action::Method::Patch),
        "nothing was missing: no event"
    );
}

#[test]
fn tenant_bootstrap_should_delete_its_children_when_the_label_goes() {
    let mut objects = vec![namespace(None)];
    objects.extend(tenant_children("ns-uid").into_iter().take(2));
    objects.push(tenant_child("v1", "ConfigMap", "tenant-info", "not-ours"));
    let requests = reconcile(tenant_bootstrap(), objects, ObjectKey::cluster("team-a"));
    assert_eq!(
        summary(&requests),
        [
            "DELETE /api/v1/namespaces/team-a/serviceaccounts/tenant-admin",
            "DELETE /apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/tenant-admin",
        ]
    );
    let gone = reconcile(tenant_bootstrap(), vec![], ObjectKey::cluster("team-a"));
    assert!(gone.is_empty(), "a deleted namespace needs nothing");
}

// ---- configmap-replicator (JavaScript) ----

fn source(replicate_to: &str, data: Value, deleting: bool) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default", "uid": "src",
                     "annotations": {"kubewasm.dev/replicate-to": replicate_to}},
        "data": data});
    if deleting {
        cm["metadata"]["deletionTimestamp"] = json!("2026-11-30T05:00:00Z");
        cm["metadata"]["finalizers"] = json!(["kubewasm.dev/configmap-replicator"]);
    }
    cm
}

fn replica(namespace: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace, "labels": {"kubewasm.dev/replica-of": "default.settings"}},
        "data": data})
}

fn src_key() -> ObjectKey {
    ObjectKey::namespaced("default", "settings")
}

#[test]
fn replicator_should_copy_a_new_source_unowned_and_keep_its_finalizer() {
    let outcome = kubewasm_runtime::step::reconcile(
        replicator(),
        cache(vec![source("ns-a,ns-b", json!({"K": "1"}), false)]),
        &Request::new(src_key()),
    )
    .expect("reconciles");
    assert_eq!(outcome.finalizer, Some(true));
    let requests: Vec<_> = outcome.actions.iter().map(|a| a.request()).collect();
    assert_eq!(
        summary(&requests),
        [
            "PATCH /api/v1/namespaces/ns-a/configmaps/settings",
            "PATCH /api/v1/namespaces/ns-b/configmaps/settings"
        ]
    );
    for copy in &requests {
        assert_eq!(copy.body["data"], json!({"K": "1"}));
        assert_eq!(
            copy.body["metadata"]["labels"]["kubewasm.dev/replica-of"],
            "default.settings"
        );
        assert!(
            copy.body["metadata"].get("ownerReferences").is_none(),
            "copies cross namespaces: unowned"
        );
    }
}

#[test]
fn replicator_should_update_copies_and_drop_unlisted_namespaces() {
    let objects = vec![
        source("ns-a", json!({"K": "2"}), false),
        replica("ns-a", json!({"K": "1"})),
        replica("ns-b", json!({"K": "1"})),
    ];
    let requests = reconcile(replicator(), objects, src_key());
    assert_eq!(
        summary(&requests),
        [
            "PATCH /api/v1/namespaces/ns-a/configmaps/settings",
            "DELETE /api/v1/namespaces/ns-b/configmaps/settings"
        ]
    );
    assert_eq!(requests[0].body["data"], json!({"K": "2"}));
}

#[test]
fn replicator_should_put_back_a_copy_edited_by_hand() {
    let objects = vec![
        source("ns-a", json!({"K": "1"}), false),
        replica("ns-a", json!({"K": "hacked"})),
    ];
    let requests = reconcile(
        replicator(),
        objects,
        ObjectKey::namespaced("ns-a", "settings"),
    );
    assert_eq!(
        summary(&requests),
        ["PATCH /api/v1/namespaces/ns-a/configmaps/settings"]
    );
    assert_eq!(requests[0].body["data"], json!({"K": "1"}));
}

#[test]
fn replicator_should_remove_every_copy_when_the_source_is_deleted() {
    // As the host does: a primary being deleted gets `finalize`.
    let objects = vec![
        source("ns-a,ns-b", json!({"K": "1"}), true),
        replica("ns-a", json!({"K": "1"})),
        replica("ns-b", json!({"K": "1"})),
    ];
    let cache =
        kubewasm_runtime::cache::MemoryCache::from_objects(objects).expect("valid fixtures");
    let report = replay::replay(replicator(), cache, &Request::new(src_key())).expect("finalizes");
    assert_eq!(report.call, "finalize");
    assert_eq!(
        summary(&report.actions),
        [
            "DELETE /api/v1/namespaces/ns-a/configmaps/settings",
            "DELETE /api/v1/namespaces/ns-b/configmaps/settings",
            "PATCH /api/v1/namespaces/default/configmaps/settings",
        ],
        "the host removes its finalizer after a successful finalize"
    );
    assert_eq!(report.actions[2].action, "removeFinalizer");
    assert_eq!(
        report.actions[2].body,
        json!([{"op": "test", "path": "/metadata/uid", "value": "src"},
               {"op": "test", "path": "/metadata/finalizers/0", "value": "kubewasm.dev/configmap-replicator"},
               {"op": "remove", "path": "/metadata/finalizers/0"}])
    );
}

// ---- misbehaving interpreted plugins ----

fn probe_cache() -> Arc<dyn Cache> {
    cache(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default", "uid": "u-cm"}, "data": {"k": "v"}})])
}

fn probe(plugin: &Plugin, mode: &str) -> Result<kubewasm_runtime::step::Outcome, ReconcileError> {
    let request = Request {
        config: json!({"mode": mode}).to_string(),
        ..Request::new(ObjectKey::namespaced("default", "cm"))
    };
    kubewasm_runtime::step::reconcile(plugin, probe_cache(), &request)
}

fn assert_still_works(plugin: &Plugin) {
    let outcome = probe(plugin, "ok").expect("ok mode reconciles");
    let copy = outcome.actions[0].request().body;
    assert_eq!(
        (copy["metadata"]["name"].as_str(), &copy["data"]),
        (Some("cm-copy"), &json!({"k": "v"}))
    );
    let other = reconcile(
        tenant_bootstrap(),
        vec![namespace(Some("acme"))],
        ObjectKey::cluster("team-a"),
    );
    assert_eq!(other.len(), 4, "another plugin is unaffected");
}

#[test]
fn python_exception_should_be_a_failure_with_its_text() {
    let err = probe(misbehave_py(), "raise").expect_err("raises");
    assert!(matches!(err, ReconcileError::Failed { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("ValueError: misbehave-py was asked to raise"),
        "{err}"
    );
    assert_still_works(misbehave_py());
}

#[test]
fn javascript_exception_should_be_a_failure_with_its_text() {
    let err = probe(misbehave_js(), "throw").expect_err("throws");
    assert!(matches!(err, ReconcileError::Failed { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("RangeError: misbehave-js was asked to throw"),
        "{err}"
    );
    assert_still_works(misbehave_js());
}

#[test]
fn interpreted_infinite_loops_should_stop_at_the_deadline() {
    let _timed = timed();
    for plugin in [misbehave_py(), misbehave_js()] {
        kubewasm_tests::assert_stopped_at_deadline(DEADLINE, || probe(plugin, "loop"));
        assert_still_works(plugin);
    }
}

#[test]
fn interpreted_memory_exhaustion_should_trap() {
    for guest in ["misbehave-py", "misbehave-js"] {
        let plugin = &unhurried_plugin(guest);
        let err = probe(plugin, "oom").expect_err("exhausts memory");
        assert!(
            matches!(err, ReconcileError::Call(CallError::MemoryExhausted { .. })),
            "{err}"
        );
        assert_still_works(plugin);
    }
}

// ---- a misbehaving Go plugin ----

#[test]
fn go_errors_and_panics_should_be_failures_with_their_text() {
    let err = probe(misbehave_go(), "error").expect_err("fails");
    assert!(matches!(err, ReconcileError::Failed { .. }), "{err}");
    assert!(
        err.to_string().contains("misbehave-go was asked to fail"),
        "{err}"
    );
    // A panic is recovered by the SDK: a failure with its stack, the
    // instance fit to serve again.
    let err = probe(misbehave_go(), "panic").expect_err("panics");
    assert!(matches!(err, ReconcileError::Failed { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("panic: misbehave-go was asked to panic"),
        "{err}"
    );
    assert!(
        err.to_string().contains("main.misbehave.Reconcile"),
        "{err}"
    );
    assert_still_works(misbehave_go());
}

#[test]
fn go_loops_goroutines_and_sleeps_should_stop_at_the_deadline() {
    let _timed = timed();
    // Loaded (compiled) before the clock starts.
    let plugin = misbehave_go();
    for mode in ["loop", "goroutine", "sleep"] {
        kubewasm_tests::assert_stopped_at_deadline(DEADLINE, || probe(plugin, mode));
        assert_still_works(plugin);
    }
}

#[test]
fn go_memory_exhaustion_and_floods_should_stop_at_their_limit() {
    let plugin = &unhurried_plugin("misbehave-go");
    let err = probe(plugin, "oom").expect_err("exhausts memory");
    assert!(
        matches!(err, ReconcileError::Call(CallError::MemoryExhausted { .. })),
        "{err}"
    );
    assert_still_works(plugin);
    let err = probe(plugin, "flood-actions").expect_err("floods");
    assert!(
        err.to_string()
            .starts_with("limit actions-per-outcome exceeded"),
        "{err}"
    );
    let err = probe(plugin, "bad-name").expect_err("bad name");
    assert!(err.to_string().contains("invalid name `a/b`"), "{err}");
    assert_still_works(plugin);
}

#[test]
fn go_map_keys_finalize_and_scheduled_should_answer_through_the_component() {
    use kubewasm_runtime::MapChange;
    use kubewasm_runtime::action::Desired;
    let plugin = misbehave_go();
    let secret = |target: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default", "labels": {"target": target}}})
        .to_string()
    };
    let secrets = ResourceType {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        plural: "secrets".into(),
        namespaced: true,
    };
    let (now, before) = (secret("b"), secret("a"));
    let change = MapChange {
        object: &now,
        previous: Some(&before),
        deleted: false,
    };
    let keys = plugin
        .map(probe_cache(), &secrets, change, "{}")
        .expect("maps");
    assert_eq!(
        keys,
        [
            ObjectKey::namespaced("default", "b"),
            ObjectKey::namespaced("default", "a")
        ]
    );
    let unlabelled = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "u", "namespace": "default"}})
    .to_string();
    let err = plugin
        .map(probe_cache(), &secrets, MapChange::of(&unlabelled), "{}")
        .expect_err("no label");
    assert!(err.to_string().contains("has no label `target`"), "{err}");

    let note = |reply: kubewasm_runtime::Reply| match reply.desired.as_slice() {
        [Desired::Event(event)] => (event.reason.clone(), event.note.clone()),
        other => panic!("one event: {other:?}"),
    };
    let request = Request {
        config: json!({"mode": "ok"}).to_string(),
        ..Request::new(ObjectKey::namespaced("default", "cm"))
    };
    let finalized = plugin.finalize(probe_cache(), &request).expect("finalizes");
    assert_eq!(note(finalized), ("Finalized".into(), "cm".into()));
    let at: jiff::Timestamp = "2026-12-05T03:00:00Z".parse().expect("a time");
    let scheduled = plugin
        .scheduled(
            probe_cache(),
            &kubewasm_runtime::ScheduledRequest {
                at,
                config: json!({"mode": "ok"}).to_string(),
                now: at,
            },
        )
        .expect("runs");
    assert_eq!(
        note(scheduled),
        ("Scheduled".into(), "2026-12-05T03:00:00Z".into())
    );
}

#[test]
fn interpreted_plugins_should_reuse_warm_instances() {
    assert!(tenant_bootstrap().reuses_instances());
    // The second call finds a warm instance: no instantiation.
    probe(misbehave_py(), "ok").expect("warm-up");
    let outcome = probe(misbehave_py(), "ok").expect("reconciles");
    assert_eq!(outcome.stats.instantiate, Duration::ZERO);
}

#[test]
fn unknown_imports_should_be_refused_with_their_name() {
    let err = runtime()
        .load_file(test_plugin("evil-import"), &kubewasm_tests::load_options())
        .expect_err("refused");
    assert!(matches!(err, LoadError::UnsupportedImport { .. }), "{err}");
    assert!(
        err.to_string().contains("imports `example:evil/net@0.1.0`"),
        "{err}"
    );
}
