//! The sandbox holds: misbehaving plugins are stopped, typed errors come
//! back, and the same plugin and others keep reconciling correctly.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kubewasm_runtime::action::Action;
use kubewasm_runtime::cache::{Cache, MemoryCache};
use kubewasm_runtime::resource::ObjectKey;
use kubewasm_runtime::{
    CallError, InstanceReuse, LoadError, Plugin, ReconcileError, Request, Runtime, RuntimeConfig,
};
use kubewasm_tests::{compiled_cache_dir, example_plugin, myapp_cache, test_plugin};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_millis(200);
const MEMORY_LIMIT: usize = 32 << 20;

fn runtime(reuse: InstanceReuse) -> Runtime {
    runtime_with(reuse, DEADLINE)
}

fn runtime_with(reuse: InstanceReuse, deadline: Duration) -> Runtime {
    let config = RuntimeConfig::default()
        .deadline(deadline)
        .memory_limit(MEMORY_LIMIT)
        .max_instances(32)
        .cache_dir(compiled_cache_dir())
        .instance_reuse(reuse);
    Runtime::new(config).expect("engine")
}

/// One runtime per reuse policy, shared by the tests of this file.
fn shared(reuse: InstanceReuse) -> &'static Runtime {
    static FRESH: OnceLock<Runtime> = OnceLock::new();
    static REUSE: OnceLock<Runtime> = OnceLock::new();
    let cell = if reuse == InstanceReuse::Reuse {
        &REUSE
    } else {
        &FRESH
    };
    cell.get_or_init(|| runtime(reuse))
}

fn misbehave(reuse: InstanceReuse) -> Plugin {
    shared(reuse)
        .load_file(test_plugin("misbehave"), &kubewasm_tests::load_options())
        .expect("misbehave loads")
}

fn myapp() -> Plugin {
    shared(InstanceReuse::Fresh)
        .load_file(example_plugin("myapp"), &kubewasm_tests::load_options())
        .expect("myapp loads")
}

fn configmap_cache() -> Arc<dyn Cache> {
    Arc::new(
        MemoryCache::from_objects([json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "uid": "u-cm"},
            "data": {"k": "v"}
        })])
        .expect("valid fixture"),
    )
}

fn request(mode: &str) -> Request {
    Request {
        config: json!({"mode": mode}).to_string(),
        ..Request::new(ObjectKey::namespaced("default", "cm"))
    }
}

fn body(action: &Action) -> Value {
    action.request().body
}

/// The misbehaving plugin still works in `ok` mode, and so does myapp.
fn assert_everything_still_reconciles(plugin: &Plugin) {
    let outcome = kubewasm_runtime::step::reconcile(plugin, configmap_cache(), &request("ok"))
        .expect("ok mode reconciles");
    let copy = body(&outcome.actions[0]);
    assert_eq!(copy["metadata"]["name"], "cm-copy");
    assert_eq!(copy["data"], json!({"k": "v"}));
    assert_eq!(copy["metadata"]["ownerReferences"][0]["uid"], "u-cm");

    let outcome = kubewasm_runtime::step::reconcile(
        &myapp(),
        myapp_cache(),
        &Request::new(ObjectKey::namespaced("default", "demo")),
    )
    .expect("myapp reconciles");
    let status = body(&outcome.actions[2]);
    assert_eq!(status["status"]["availableReplicas"], 2);
}

#[test]
fn infinite_loop_should_be_stopped_at_the_deadline() {
    for reuse in [InstanceReuse::Fresh, InstanceReuse::Reuse] {
        let plugin = misbehave(reuse);
        kubewasm_tests::assert_stopped_at_deadline(DEADLINE, || {
            kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("loop"))
        });
        assert_everything_still_reconciles(&plugin);
    }
}

/// `oom` mode stops at the memory limit, saying so.
fn assert_memory_exhausted(plugin: &Plugin) {
    let err = kubewasm_runtime::step::reconcile(plugin, configmap_cache(), &request("oom"))
        .expect_err("exhausts memory");
    assert!(
        matches!(err, ReconcileError::Call(CallError::MemoryExhausted { .. })),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(&format!("memory limit of {MEMORY_LIMIT} bytes exceeded")),
        "{err}"
    );
}

#[test]
fn allocation_past_the_memory_limit_should_trap() {
    for reuse in [InstanceReuse::Fresh, InstanceReuse::Reuse] {
        // A deadline no loaded machine reaches before the memory limit.
        let plugin = runtime_with(reuse, Duration::from_secs(10))
            .load_file(test_plugin("misbehave"), &kubewasm_tests::load_options())
            .expect("loads");
        assert_memory_exhausted(&plugin);
        assert_everything_still_reconciles(&plugin);
    }
}

#[test]
fn panic_should_return_an_error_with_its_message() {
    for reuse in [InstanceReuse::Fresh, InstanceReuse::Reuse] {
        let plugin = misbehave(reuse);
        let err = kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("panic"))
            .expect_err("panics");
        assert!(
            matches!(err, ReconcileError::Call(CallError::Panicked { .. })),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("boom: misbehave was asked to panic"),
            "{err}"
        );
        assert_everything_still_reconciles(&plugin);
    }
}

#[test]
fn undeclared_read_should_be_denied_to_the_plugin() {
    let plugin = misbehave(InstanceReuse::Fresh);
    let err =
        kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("read-undeclared"))
            .expect_err("denied");
    // The plugin failed with the error its read returned: it saw the denial.
    let ReconcileError::Failed { message } = &err else {
        panic!("expected the plugin's own failure, got {err}");
    };
    assert!(
        message.contains(
            "read denied: plugin `misbehave` may not get v1 Secret: the type was not declared"
        ),
        "{message}"
    );
    assert_everything_still_reconciles(&plugin);
}

#[test]
fn undeclared_write_should_be_denied_and_reported_to_the_plugin() {
    let plugin = misbehave(InstanceReuse::Fresh);
    let err =
        kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("write-undeclared"))
            .expect_err("denied");
    assert!(matches!(err, ReconcileError::Action(_)), "{err}");
    assert!(err.to_string().contains("may not apply v1 Secret"), "{err}");

    // The host's retry carries the denial; the plugin sees it.
    let retry = Request {
        retries: 1,
        last_failure: Some(err.to_string()),
        ..request("write-undeclared")
    };
    let outcome = kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &retry)
        .expect("reports the denial");
    let event = body(&outcome.actions[0]);
    assert_eq!(event["reason"], "Denied");
    assert!(
        event["note"]
            .as_str()
            .is_some_and(|n| n.contains("may not apply v1 Secret")),
        "{event}"
    );
    assert_everything_still_reconciles(&plugin);
}

#[test]
fn plugins_should_get_no_files_environment_arguments_or_network() {
    // A listener of the test's own: the probe would reach it if the
    // sandbox let any connection out.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let plugin = misbehave(InstanceReuse::Fresh);
    let probe = Request {
        config: json!({"mode": "escape", "port": port}).to_string(),
        ..request("escape")
    };
    let outcome =
        kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &probe).expect("probes");
    let note = body(&outcome.actions[0])["note"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // One argument: the fixed program name every process has (Go's
    // libraries read `os.Args[0]` at start), the same for every plugin.
    assert_eq!(note, "file=false dir=false env=0 args=plugin net=false");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the plugin reached the listener"
    );
}

fn count(plugin: &Plugin) -> String {
    let outcome = kubewasm_runtime::step::reconcile(plugin, configmap_cache(), &request("count"))
        .expect("counts");
    body(&outcome.actions[0])["note"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn fresh_instances_should_share_no_state() {
    let plugin = misbehave(InstanceReuse::Fresh);
    assert!(!plugin.reuses_instances());
    assert_eq!(
        [count(&plugin), count(&plugin), count(&plugin)],
        ["1", "1", "1"]
    );
}

#[test]
fn reused_instances_should_be_dropped_after_a_trap() {
    // A runtime of its own: the warm pool must hold this test's instances only.
    let plugin = runtime(InstanceReuse::Reuse)
        .load_file(test_plugin("misbehave"), &kubewasm_tests::load_options())
        .expect("loads");
    assert!(plugin.reuses_instances());
    assert_eq!(
        [count(&plugin), count(&plugin)],
        ["1", "2"],
        "the warm instance is reused"
    );
    kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("panic"))
        .expect_err("panics");
    // The warm instance was checked out for the panic and dropped with it.
    assert_eq!(
        count(&plugin),
        "1",
        "a trapped instance is never entered again"
    );
}

#[test]
fn plugins_of_one_component_should_share_its_code_and_nothing_else() {
    let runtime = runtime(InstanceReuse::Reuse);
    let load = |name: &str| {
        runtime
            .load_file(
                test_plugin("misbehave"),
                &kubewasm_tests::load_options().name(name),
            )
            .expect("loads")
    };
    let (a, b) = (load("tenant-a"), load("tenant-b"));
    assert_eq!(runtime.components(), 1, "one compiled copy for both");
    assert_eq!(a.digest(), b.digest());
    assert_eq!(
        (a.declaration().name.as_str(), b.declaration().name.as_str()),
        ("tenant-a", "tenant-b")
    );
    // Each keeps its own warm instances: b's first call sees no state of a's.
    assert_eq!([count(&a), count(&a)], ["1", "2"]);
    assert_eq!(count(&b), "1");
    // A trap in one leaves the other's warm instance serving.
    kubewasm_runtime::step::reconcile(&a, configmap_cache(), &request("panic"))
        .expect_err("panics");
    assert_eq!(count(&b), "2");
    drop((a, b));
    assert_eq!(runtime.components(), 0, "freed with its last plugin");
    let again = load("tenant-c");
    assert_eq!(runtime.components(), 1);
    assert_eq!(count(&again), "1");
}

#[test]
fn concurrent_loads_of_one_component_should_end_with_one_copy() {
    let runtime = runtime(InstanceReuse::Reuse);
    let plugins: Vec<Plugin> = std::thread::scope(|scope| {
        let loads: Vec<_> = (0..4)
            .map(|i| {
                let runtime = &runtime;
                scope.spawn(move || {
                    runtime
                        .load_file(
                            test_plugin("misbehave"),
                            &kubewasm_tests::load_options().name(format!("p-{i}")),
                        )
                        .expect("loads")
                })
            })
            .collect();
        loads
            .into_iter()
            .map(|l| l.join().expect("joined"))
            .collect()
    });
    for plugin in &plugins {
        assert_eq!(count(plugin), "1", "each its own instances");
    }
    // One copy, shared by all: it stays while any of them does (copies
    // compiled side by side would go with whichever was recorded).
    let mut plugins = plugins;
    while let Some(plugin) = plugins.pop() {
        assert_eq!(
            runtime.components(),
            1,
            "{} plugins left",
            plugins.len() + 1
        );
        drop(plugin);
    }
    assert_eq!(runtime.components(), 0);
}

#[test]
fn non_components_and_other_worlds_should_be_refused_at_load() {
    let runtime = shared(InstanceReuse::Fresh);
    let err = runtime
        .load(b"{\"not\": \"wasm\"}", &kubewasm_tests::load_options())
        .expect_err("not wasm");
    assert!(matches!(err, LoadError::NotWasm), "{err}");

    // A core module: the smallest valid one.
    let err = runtime
        .load(b"\0asm\x01\0\0\0", &kubewasm_tests::load_options())
        .expect_err("core module");
    assert!(
        err.to_string()
            .contains("a core WebAssembly module, not a component"),
        "{err}"
    );

    let err = runtime
        .load_file(test_plugin("not-a-plugin"), &kubewasm_tests::load_options())
        .expect_err("another world");
    let message = err.to_string();
    assert!(matches!(err, LoadError::WrongWorld { .. }), "{message}");
    assert!(message.contains("wasi:cli/run@"), "{message}");
    assert!(
        message.contains(
            "not `kubewasm:controller/plugin@0.3.0` or `kubewasm:controller/plugin@0.2.0` or `kubewasm:controller/plugin@0.1.0`"
        ),
        "{message}"
    );

    let err = runtime
        .load_file("/nonexistent/plugin.wasm", &kubewasm_tests::load_options())
        .expect_err("missing file");
    assert!(
        err.to_string().contains("/nonexistent/plugin.wasm"),
        "{err}"
    );

    // After all that, plugins load and reconcile.
    assert_everything_still_reconciles(&misbehave(InstanceReuse::Fresh));
}

#[test]
fn concurrent_reconciles_should_not_interfere() {
    let plugin = Arc::new(misbehave(InstanceReuse::Reuse));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let plugin = Arc::clone(&plugin);
            std::thread::spawn(move || {
                let mode = if i % 2 == 0 { "ok" } else { "panic" };
                (
                    mode,
                    kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request(mode))
                        .is_ok(),
                )
            })
        })
        .collect();
    for thread in threads {
        let (mode, ok) = thread.join().expect("no host panic");
        assert_eq!(ok, mode == "ok", "{mode}");
    }
}

#[test]
fn baseline_code_should_hold_the_same_sandbox_until_its_optimized_code_takes_over() {
    // No precompiled cache: a first load runs the baseline compiler's code.
    let config = RuntimeConfig::default()
        .deadline(DEADLINE)
        .memory_limit(MEMORY_LIMIT)
        .max_instances(32)
        .baseline(true);
    let runtime = Runtime::new(config).expect("engine");
    let plugin = runtime
        .load_file(test_plugin("misbehave"), &kubewasm_tests::load_options())
        .expect("loads on baseline code");
    assert!(plugin.is_baseline());
    kubewasm_tests::assert_stopped_at_deadline(DEADLINE, || {
        kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("loop"))
    });
    assert_memory_exhausted(&plugin);
    let err =
        kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("read-undeclared"))
            .expect_err("denied");
    assert!(err.to_string().contains("may not get v1 Secret"), "{err}");
    assert_everything_still_reconciles(&plugin);

    let optimized = plugin
        .optimized()
        .expect("the optimizing compiler takes it");
    assert!(!optimized.is_baseline());
    assert_eq!(optimized.digest(), plugin.digest());
    // The same plugin on other code: what its calls remembered still holds.
    assert!(optimized.same_plugin(&plugin));
    assert_everything_still_reconciles(&optimized);
    kubewasm_tests::assert_stopped_at_deadline(DEADLINE, || {
        kubewasm_runtime::step::reconcile(&optimized, configmap_cache(), &request("loop"))
    });
    // A later load of the component shares the optimized code.
    let again = runtime
        .load_file(test_plugin("misbehave"), &kubewasm_tests::load_options())
        .expect("loads");
    assert!(!again.is_baseline());
    assert_eq!(runtime.components(), 1);
    // Another load is another plugin (its grants may differ).
    assert!(!again.same_plugin(&plugin));
}

#[test]
fn every_language_should_run_on_baseline_code() {
    let runtime = Runtime::new(RuntimeConfig::default().baseline(true)).expect("engine");
    for (guest, language) in [
        ("misbehave", "rust"),
        ("misbehave-py", "python"),
        ("misbehave-js", "javascript"),
    ] {
        let plugin = runtime
            .load_file(test_plugin(guest), &kubewasm_tests::load_options())
            .unwrap_or_else(|e| panic!("{guest} loads on baseline code: {e}"));
        assert!(plugin.is_baseline(), "{guest}");
        let outcome =
            kubewasm_runtime::step::reconcile(&plugin, configmap_cache(), &request("language"))
                .unwrap_or_else(|e| panic!("{guest} reconciles: {e}"));
        assert_eq!(body(&outcome.actions[0])["note"], language, "{guest}");
    }
}
