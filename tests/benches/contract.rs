//! The plugin contract's cost: the `myapp` reconcile through Wasm against
//! the same logic compiled natively into the host, side by side in one run.
//!
//! Run with `make bench` (builds the plugins, runs this, rewrites
//! BENCHMARKS.md). Every figure is the median of interleaved batches, so
//! the machine's drift hits every scenario alike; ratios are what to read.

use std::hint::black_box;
use std::sync::Arc;

use kubewasm_guest::testing::Harness;
use kubewasm_runtime::action::{
    self, Desired, DesiredEvent, EventType, PlanContext, Preconditions,
};
use kubewasm_runtime::cache::{Cache, MemoryCache};
use kubewasm_runtime::grants::{Grants, OperatorGrants};
use kubewasm_runtime::resource::{ObjectKey, ResourceType};
use kubewasm_runtime::{InstanceReuse, Plugin, Request, Runtime, RuntimeConfig};
use kubewasm_tests::bench::{
    Scenario, interleave, is_real_run, ms, out_path, time_once, us, write_section,
};
use kubewasm_tests::{example_plugin, test_plugin};
use myapp::MyAppOperator;
use serde_json::{Value, json};

/// Rounds and batch size of a real run; a smoke test runs one tiny round.
fn run_size() -> (usize, usize) {
    if is_real_run() { (25, 200) } else { (1, 2) }
}

fn myapp_object() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "MyApp",
        "metadata": {"name": "demo", "namespace": "default", "uid": "5f1d8a52-3b51-4c1e-9c55-2a7f0f4b8e01",
                     "generation": 3, "resourceVersion": "48121", "creationTimestamp": "2026-11-30T04:00:00Z",
                     "labels": {"team": "payments", "tier": "web"}},
        "spec": {"replicas": 3, "image": "registry.example.com/payments/web:1.27.3", "port": 8080},
        "status": {"availableReplicas": 3, "conditions": [{"type": "Available", "status": "True",
            "lastTransitionTime": "2026-11-30T04:01:00Z", "reason": "ReplicasAvailable",
            "message": "3 of 3 replicas available", "observedGeneration": 3}]}})
}

/// A Deployment of about 4 KB, as a cache holds a real one.
fn deployment_object() -> Value {
    let env: Vec<Value> = (0..40)
        .map(|i| json!({"name": format!("SETTING_{i:02}"), "value": format!("value-{i:02}-0123456789abcdef")}))
        .collect();
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "demo", "namespace": "default", "uid": "0b7a3c36-8f0f-4d7e-a3f2-6e2b3f5c9d10",
                     "generation": 3, "resourceVersion": "48190", "creationTimestamp": "2026-11-30T04:00:01Z",
                     "labels": {"app.kubernetes.io/instance": "demo", "app.kubernetes.io/name": "myapp"},
                     "annotations": {"deployment.kubernetes.io/revision": "3"},
                     "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "MyApp", "name": "demo",
                         "uid": "5f1d8a52-3b51-4c1e-9c55-2a7f0f4b8e01", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app.kubernetes.io/instance": "demo"}},
                 "template": {"metadata": {"labels": {"app.kubernetes.io/instance": "demo"}},
                              "spec": {"containers": [{"name": "app", "image": "registry.example.com/payments/web:1.27.3",
                                  "ports": [{"name": "http", "containerPort": 8080}], "env": env,
                                  "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}},
        "status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 3, "observedGeneration": 3,
                   "conditions": [
                       {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                        "message": "Deployment has minimum availability.", "lastUpdateTime": "2026-11-30T04:01:00Z",
                        "lastTransitionTime": "2026-11-30T04:01:00Z"},
                       {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                        "message": "ReplicaSet \"demo-6d4cf56db6\" has successfully progressed.",
                        "lastUpdateTime": "2026-11-30T04:01:00Z", "lastTransitionTime": "2026-11-30T04:00:01Z"}]}})
}

/// A ConfigMap of about 4 KB for the boundary probe.
fn configmap_object() -> Value {
    let data: serde_json::Map<String, Value> = (0..64)
        .map(|i| (format!("key-{i:02}"), Value::from("x".repeat(48))))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cm", "namespace": "default", "uid": "u-cm"}, "data": data})
}

fn size(v: &Value) -> usize {
    v.to_string().len()
}

/// The native reconcile: the same `myapp` code through the SDK's native
/// backend (reads return the cached JSON text, as the host does), then the
/// host's planning, as for Wasm.
fn native_reconcile(harness: &Harness, ctx: &NativeCtx) -> usize {
    let outcome = harness
        .reconcile::<MyAppOperator>(kubewasm_guest::ObjectKey::namespaced("default", "demo"))
        .expect("native reconcile");
    let desired = outcome
        .actions()
        .iter()
        .map(|a| match a {
            kubewasm_guest::Action::Apply {
                object,
                owned,
                force,
            } => Desired::Apply {
                object: object.to_string(),
                owned: *owned,
                force: *force,
            },
            kubewasm_guest::Action::ApplyStatus(object) => Desired::ApplyStatus(object.to_string()),
            kubewasm_guest::Action::Delete(r, k, p) => Desired::Delete(
                ResourceType {
                    group: r.group.clone(),
                    version: r.version.clone(),
                    kind: r.kind.clone(),
                    plural: r.plural.clone(),
                    namespaced: r.namespaced,
                },
                ObjectKey {
                    namespace: k.namespace.clone(),
                    name: k.name.clone(),
                },
                Preconditions {
                    uid: p.uid.clone(),
                    resource_version: p.resource_version.clone(),
                },
            ),
            kubewasm_guest::Action::Event(e) => Desired::Event(DesiredEvent {
                regarding: None,
                event_type: if e.event_type == kubewasm_guest::EventType::Normal {
                    EventType::Normal
                } else {
                    EventType::Warning
                },
                reason: e.reason.clone(),
                action: e.action.clone(),
                note: e.note.clone(),
            }),
        })
        .collect();
    let primary = ctx
        .cache
        .get(&ctx.plugin.declaration().primary, &ctx.key)
        .map(|p| p.value());
    let actions = action::plan(
        PlanContext {
            declaration: ctx.plugin.declaration(),
            grants: &ctx.grants,
            key: &ctx.key,
            primary: primary.as_ref(),
            cache: ctx.cache.as_ref(),
            now: jiff::Timestamp::now(),
        },
        desired,
    )
    .expect("plan");
    actions.len()
}

struct NativeCtx {
    plugin: Plugin,
    grants: Grants,
    cache: Arc<dyn Cache>,
    key: ObjectKey,
}

fn main() {
    let myapp_path = example_plugin("myapp");
    let misbehave_path = test_plugin("misbehave");
    let wasm_size = std::fs::metadata(&myapp_path).map(|m| m.len()).unwrap_or(0);

    // Compile and load costs.
    let cache_dir = std::env::temp_dir().join(format!("kubewasm-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache_dir);
    let config = RuntimeConfig::default()
        .max_instances(64)
        .cache_dir(&cache_dir);
    let (_, compile) = time_once(|| {
        Runtime::new(config.clone())
            .expect("engine")
            .load_file(&myapp_path, &kubewasm_tests::load_options())
            .expect("load")
    });
    let cached_runtime = Runtime::new(config).expect("engine");
    let (_, cached_load) = time_once(|| {
        cached_runtime
            .load_file(&myapp_path, &kubewasm_tests::load_options())
            .expect("load")
    });
    let _ = std::fs::remove_dir_all(&cache_dir);

    let runtime = |reuse| {
        Runtime::new(
            RuntimeConfig::default()
                .max_instances(64)
                .instance_reuse(reuse),
        )
        .expect("engine")
    };
    let fresh_rt = runtime(InstanceReuse::Fresh);
    let reuse_rt = runtime(InstanceReuse::Reuse);
    // The same, recording no reads: what recording costs a warm call.
    let unrecorded_rt = Runtime::new(
        RuntimeConfig::default()
            .max_instances(64)
            .record_reads(false),
    )
    .expect("engine");
    let unrecorded = unrecorded_rt
        .load_file(&myapp_path, &kubewasm_tests::load_options())
        .expect("myapp");
    let fresh = fresh_rt
        .load_file(&myapp_path, &kubewasm_tests::load_options())
        .expect("myapp");
    let reuse = reuse_rt
        .load_file(&myapp_path, &kubewasm_tests::load_options())
        .expect("myapp");
    let probe = reuse_rt
        .load_file(&misbehave_path, &kubewasm_tests::load_options())
        .expect("misbehave");

    let (myapp_obj, deploy_obj, cm_obj) = (myapp_object(), deployment_object(), configmap_object());
    let sizes = (size(&myapp_obj), size(&deploy_obj), size(&cm_obj));
    let cache: Arc<dyn Cache> = Arc::new(
        MemoryCache::from_objects([myapp_obj.clone(), deploy_obj.clone()]).expect("fixture"),
    );
    let cm_cache: Arc<dyn Cache> = Arc::new(MemoryCache::from_objects([cm_obj]).expect("fixture"));
    let key = ObjectKey::namespaced("default", "demo");
    let request = Request::new(key.clone());
    let probe_request = |mode: &str| Request {
        config: json!({"mode": mode}).to_string(),
        ..Request::new(ObjectKey::namespaced("default", "cm"))
    };
    let (noop_req, read_req, text_req) = (
        probe_request("noop"),
        probe_request("read"),
        probe_request("read-text"),
    );
    let harness = Harness::new().object(myapp_obj).object(deploy_obj);
    let native_ctx = NativeCtx {
        grants: Grants::new(fresh.declaration(), &OperatorGrants::unrestricted()).expect("granted"),
        plugin: runtime(InstanceReuse::Fresh)
            .load_file(&myapp_path, &kubewasm_tests::load_options())
            .expect("myapp"),
        cache: Arc::clone(&cache),
        key: key.clone(),
    };

    // Sanity: both paths plan the same requests (event times aside).
    let wasm_actions = kubewasm_runtime::step::reconcile(&reuse, Arc::clone(&cache), &request)
        .expect("wasm")
        .actions
        .len();
    assert_eq!(
        native_reconcile(&harness, &native_ctx),
        wasm_actions,
        "native and wasm disagree"
    );

    let mut scenarios = vec![
        Scenario::new("native", || {
            black_box(native_reconcile(&harness, &native_ctx));
            None
        }),
        Scenario::new("wasm, fresh instance", || {
            Some(
                kubewasm_runtime::step::reconcile(&fresh, Arc::clone(&cache), &request)
                    .expect("fresh")
                    .stats,
            )
        }),
        Scenario::new("wasm, warm instance", || {
            Some(
                kubewasm_runtime::step::reconcile(&reuse, Arc::clone(&cache), &request)
                    .expect("reuse")
                    .stats,
            )
        }),
        Scenario::new("wasm, warm instance, reads not recorded", || {
            Some(
                kubewasm_runtime::step::reconcile(&unrecorded, Arc::clone(&cache), &request)
                    .expect("unrecorded")
                    .stats,
            )
        }),
        Scenario::new("probe: empty call", || {
            Some(
                kubewasm_runtime::step::reconcile(&probe, Arc::clone(&cm_cache), &noop_req)
                    .expect("noop")
                    .stats,
            )
        }),
        Scenario::new("probe: one 4 KB read", || {
            Some(
                kubewasm_runtime::step::reconcile(&probe, Arc::clone(&cm_cache), &read_req)
                    .expect("read")
                    .stats,
            )
        }),
        Scenario::new("probe: one 4 KB read, unparsed", || {
            Some(
                kubewasm_runtime::step::reconcile(&probe, Arc::clone(&cm_cache), &text_req)
                    .expect("read-text")
                    .stats,
            )
        }),
    ];
    let (rounds, batch) = run_size();
    interleave(&mut scenarios, rounds, |_| batch);

    let [native, fresh_s, warm_s, unrecorded_s, noop, read, text] = &scenarios[..] else {
        unreachable!("seven scenarios")
    };
    let instantiate = fresh_s.median_stat(|s| s.instantiate);
    let (native_t, fresh_t, warm_t) = (native.median(), fresh_s.median(), warm_s.median());
    let extra_fresh = fresh_t.saturating_sub(native_t);
    let extra_warm = warm_t.saturating_sub(native_t);
    let crossing = text.median().saturating_sub(noop.median());
    let parse = read.median().saturating_sub(text.median());
    // myapp reads two objects (MyApp and Deployment) of 4.3 KB together:
    // about one probe read's worth of bytes.
    let compute_extra = extra_warm
        .saturating_sub(crossing)
        .saturating_sub(noop.median());
    let imports = warm_s.median_stat(|s| s.imports);
    let call = warm_s.median_stat(|s| s.call);
    let plan = warm_s.median_stat(|s| s.plan);

    let mut report = String::new();
    report.push_str(&format!(
        "Objects: MyApp {} B, Deployment {} B (read by the reconcile); probe ConfigMap {} B. \
         Component: {} KB. {rounds} interleaved rounds of {batch} calls; medians.\n\n",
        sizes.0,
        sizes.1,
        sizes.2,
        wasm_size / 1024
    ));
    report.push_str("| scenario | per reconcile | vs native |\n|---|---|---|\n");
    for s in &scenarios[..3] {
        report.push_str(&format!(
            "| {} | {} | {:.2}x |\n",
            s.name,
            us(s.median()),
            s.median().as_secs_f64() / native_t.as_secs_f64()
        ));
    }
    report.push_str(&format!(
        "\nWasm's extra cost per `myapp` reconcile: **{}** with a fresh instance, **{}** with a warm one \
         (goal: under 50 µs).\n\n",
        us(extra_fresh),
        us(extra_warm)
    ));
    let recording = warm_t.as_secs_f64() - unrecorded_s.median().as_secs_f64();
    report.push_str(&format!(
        "Recording the reads of a call (what skips unchanged calls are decided by): warm call {}          recorded, {} not recorded: **{:+.1}%** of myapp's warm call (goal: under 5%).\n\n",
        us(warm_t),
        us(unrecorded_s.median()),
        100.0 * recording / warm_t.as_secs_f64()
    ));
    let rows = [
        (
            "instantiate (pooling allocator, `InstancePre`)",
            us(instantiate),
            "`CallStats::instantiate` in the fresh scenario (goal: under 20 µs)".to_owned(),
        ),
        (
            "bare call: enter, read the config, return",
            us(noop.median()),
            "probe `noop`".to_owned(),
        ),
        (
            "data crossing: one 4 KB object into the guest",
            us(crossing),
            "probe `read-text` minus probe `noop` (myapp reads 4.3 KB in two objects)".to_owned(),
        ),
        (
            "host side of myapp's two cache reads",
            us(imports),
            "`CallStats::imports` in the warm scenario (part of the crossing)".to_owned(),
        ),
        (
            "compute: the rest of the warm extra cost",
            us(compute_extra),
            "warm extra minus crossing minus bare call".to_owned(),
        ),
        (
            "for scale: typed parse of the 4 KB object in the guest",
            us(parse),
            "probe `read` minus probe `read-text`; native parses too".to_owned(),
        ),
        (
            "for scale: the whole guest call of myapp (warm)",
            us(call),
            format!(
                "`CallStats::call`; native does the same work in {}",
                us(native_t.saturating_sub(plan))
            ),
        ),
        (
            "for scale: host planning of the 3 actions",
            us(plan),
            "`CallStats::plan`; native pays it too".to_owned(),
        ),
    ];
    report.push_str("| where the extra goes | time | how it is measured |\n|---|---|---|\n");
    for (what, time, how) in rows {
        report.push_str(&format!("| {what} | {time} | {how} |\n"));
    }
    report.push_str(&format!(
        "\nLoading `myapp`: compile {} (cold cache), load from the precompiled cache {} (both include the `declare` call).\n",
        ms(compile),
        ms(cached_load)
    ));
    println!("{report}");
    if let Some(path) = out_path() {
        write_section(
            &path,
            "contract",
            "Plugin contract: `myapp` through Wasm against native",
            "make bench",
            &report,
        )
        .expect("write report");
    }
}
