//! A well-behaved plugin next to a hostile one: the `myapp` reconcile rate
//! alone, and while another plugin on the same runtime loops, sleeps,
//! allocates past its memory limit and floods its log, in turns. Measured
//! side by side in one run (alternating rounds, so drift hits both alike).
//!
//! Run with `make bench` (rewrites its section of BENCHMARKS.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kubewasm_runtime::cache::{Cache, MemoryCache};
use kubewasm_runtime::resource::ObjectKey;
use kubewasm_runtime::{
    CallError, InstanceReuse, Plugin, ReconcileError, Request, Runtime, RuntimeConfig,
};
use kubewasm_tests::bench::{is_real_run, median, out_path, write_section};
use kubewasm_tests::{example_plugin, load_options, myapp_cache, test_plugin};
use serde_json::json;

const HOSTILE_MODES: [&str; 4] = ["loop", "sleep", "oom", "flood-log"];

/// Reconciles `myapp` for `window` and returns the calls per second.
fn rate(plugin: &Plugin, cache: &Arc<dyn Cache>, window: Duration) -> f64 {
    let request = Request::new(ObjectKey::namespaced("default", "demo"));
    let started = Instant::now();
    let mut calls = 0u64;
    while started.elapsed() < window {
        let outcome = kubewasm_runtime::step::reconcile(plugin, Arc::clone(cache), &request)
            .expect("myapp reconciles");
        assert_eq!(outcome.actions.len(), 3);
        calls += 1;
    }
    calls as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let real = is_real_run();
    let (rounds, window) = if real {
        (6, Duration::from_secs(3))
    } else {
        (1, Duration::from_millis(100))
    };
    let deadline = Duration::from_millis(100);
    let runtime = Runtime::new(
        RuntimeConfig::default()
            .deadline(deadline)
            .memory_limit(64 << 20)
            .max_instances(32)
            .instance_reuse(InstanceReuse::Reuse),
    )
    .expect("engine");
    let myapp = runtime
        .load_file(example_plugin("myapp"), &load_options())
        .expect("myapp");
    let hostile = Arc::new(
        runtime
            .load_file(test_plugin("misbehave"), &load_options())
            .expect("misbehave"),
    );
    let cache = myapp_cache();
    let _ = rate(&myapp, &cache, window / 4); // warm up

    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    let mut hostile_calls = 0;
    for _ in 0..rounds {
        alone.push(rate(&myapp, &cache, window));
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicU64::new(0));
        let attacker = {
            let (stop, failed, hostile) =
                (Arc::clone(&stop), Arc::clone(&failed), Arc::clone(&hostile));
            std::thread::spawn(move || {
                let cm: Arc<dyn Cache> = Arc::new(
                    MemoryCache::from_objects([json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "cm", "namespace": "default", "uid": "u-cm"}})])
                    .expect("fixture"),
                );
                for mode in HOSTILE_MODES.iter().cycle() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let request = Request {
                        config: json!({"mode": mode}).to_string(),
                        ..Request::new(ObjectKey::namespaced("default", "cm"))
                    };
                    let stopped = match kubewasm_runtime::step::reconcile(
                        &hostile,
                        Arc::clone(&cm),
                        &request,
                    ) {
                        Err(ReconcileError::Call(error)) => matches!(
                            (*mode, error),
                            ("loop" | "sleep", CallError::DeadlineExceeded { .. })
                                | ("oom", CallError::MemoryExhausted { .. })
                                | ("flood-log", CallError::LimitExceeded(_))
                        ),
                        _ => false,
                    };
                    assert!(stopped, "{mode} was not stopped with its typed error");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        beside.push(rate(&myapp, &cache, window));
        stop.store(true, Ordering::Relaxed);
        attacker.join().expect("attacker thread");
        hostile_calls += failed.load(Ordering::Relaxed);
    }
    let per_second = |v: &[f64]| {
        median(v.iter().map(|r| Duration::from_secs_f64(1.0 / r)).collect()).as_secs_f64()
    };
    let (alone_rate, beside_rate) = (1.0 / per_second(&alone), 1.0 / per_second(&beside));
    let report = format!(
        "`myapp` reconciles (warm instances) on one thread for {window:?} at a time, alone and while a second \
         thread calls the `misbehave` test plugin on the same runtime in turns: an infinite loop, an hour's \
         sleep, allocation past its 64 MiB limit and a log flood (deadline {deadline:?}); {rounds} alternating \
         rounds, medians. {hostile_calls} hostile calls were stopped during the run, every one with its typed error.\n\n\
         | scenario | reconciles/s |\n|---|---|\n\
         | alone | {alone_rate:.0} |\n\
         | next to the hostile plugin | {beside_rate:.0} |\n\n\
         Slowdown next to the hostile plugin: {:.2}x (goal: within 1.5x).\n",
        alone_rate / beside_rate
    );
    println!("{report}");
    if let Some(path) = out_path() {
        write_section(
            &path,
            "hostile",
            "A well-behaved plugin next to a hostile one",
            "make bench",
            &report,
        )
        .expect("write report");
    }
}
