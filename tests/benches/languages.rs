//! The same small reconcile in Rust, Python, JavaScript and Go: component size,
//! compile and cached-load times, instantiation, and the reconcile on a
//! fresh and on a warm instance, measured in one run.
//!
//! The reconcile is the test guests' `ok` mode: read the primary ConfigMap
//! from the cache, apply a copy of it.

use std::sync::Arc;
use std::time::Duration;

use kubewasm_runtime::cache::{Cache, MemoryCache};
use kubewasm_runtime::resource::ObjectKey;
use kubewasm_runtime::{InstanceReuse, Plugin, Request, Runtime, RuntimeConfig};
use kubewasm_tests::bench::{
    Scenario, interleave, is_real_run, ms, out_path, time_once, us, write_section,
};
use kubewasm_tests::test_plugin;
use serde_json::json;

struct Language {
    name: &'static str,
    guest: &'static str,
    size: u64,
    compile: Duration,
    cached_load: Duration,
    fresh: Plugin,
    warm: Plugin,
}

fn main() {
    let real = is_real_run();
    let cache_dir =
        std::env::temp_dir().join(format!("kubewasm-bench-languages-{}", std::process::id()));
    let config = |reuse| {
        RuntimeConfig::default()
            .max_instances(64)
            .cache_dir(&cache_dir)
            .instance_reuse(reuse)
    };
    let fresh_rt = Runtime::new(config(InstanceReuse::Fresh)).expect("engine");
    let warm_rt = Runtime::new(config(InstanceReuse::Reuse)).expect("engine");
    let languages: Vec<Language> = [
        ("Rust", "misbehave"),
        ("Python", "misbehave-py"),
        ("JavaScript", "misbehave-js"),
        ("Go", "misbehave-go"),
    ]
    .into_iter()
    .map(|(name, guest)| {
        let path = test_plugin(guest);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        // Cold: compiled and written to the cache. Then loaded from it.
        let (fresh, compile) = time_once(|| {
            fresh_rt
                .load_file(&path, &kubewasm_tests::load_options())
                .expect("compiles")
        });
        let (warm, cached_load) = time_once(|| {
            warm_rt
                .load_file(&path, &kubewasm_tests::load_options())
                .expect("loads cached")
        });
        Language {
            name,
            guest,
            size,
            compile,
            cached_load,
            fresh,
            warm,
        }
    })
    .collect();
    let _ = std::fs::remove_dir_all(&cache_dir);

    let cache: Arc<dyn Cache> = Arc::new(
        MemoryCache::from_objects([json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "uid": "u-cm"},
            "data": {"LOG_LEVEL": "info", "REPLICAS": "3"}})])
        .expect("fixture"),
    );
    let request = Request {
        config: json!({"mode": "ok"}).to_string(),
        ..Request::new(ObjectKey::namespaced("default", "cm"))
    };
    let call = |plugin: &Plugin| {
        let outcome = kubewasm_runtime::step::reconcile(plugin, Arc::clone(&cache), &request)
            .expect("reconciles");
        assert_eq!(outcome.actions.len(), 1, "one apply");
        Some(outcome.stats)
    };

    const NAMES: [&str; 8] = [
        "Rust fresh",
        "Rust warm",
        "Python fresh",
        "Python warm",
        "JavaScript fresh",
        "JavaScript warm",
        "Go fresh",
        "Go warm",
    ];
    let mut scenarios: Vec<Scenario<'_>> = languages
        .iter()
        .zip(NAMES.chunks(2))
        .flat_map(|(l, names)| {
            [
                Scenario::new(names[0], move || call(&l.fresh)),
                Scenario::new(names[1], move || call(&l.warm)),
            ]
        })
        .collect();
    // Interpreters instantiate in milliseconds: fewer calls per batch.
    let rounds = if real { 10 } else { 1 };
    interleave(&mut scenarios, rounds, |s| match (real, s.name) {
        (false, _) => 1,
        (true, "Rust fresh" | "Rust warm") => 200,
        (true, name) if name.ends_with("warm") => 100,
        (true, _) => 10,
    });

    let mut report = format!(
        "The same reconcile (read a ConfigMap from the cache, apply a copy) in each language; {rounds} \
         interleaved rounds; medians. Compile is a cold load (compile, write the cache, `declare`); cached load \
         reads the precompiled artifact.\n\n\
         | language | component | compile | cached load | instantiate | reconcile, fresh instance | reconcile, warm instance |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for (l, pair) in languages.iter().zip(scenarios.chunks(2)) {
        report.push_str(&format!(
            "| {} (`{}`) | {:.1} MB | {} | {} | {} | {} | {} |\n",
            l.name,
            l.guest,
            l.size as f64 / 1e6,
            ms(l.compile),
            ms(l.cached_load),
            us(pair[0].median_stat(|s| s.instantiate)),
            us(pair[0].median()),
            us(pair[1].median()),
        ));
    }
    let ratios: Vec<String> = languages
        .iter()
        .zip(scenarios.chunks(2))
        .map(|(l, pair)| {
            format!(
                "{} {:.1}x",
                l.name,
                pair[0].median().as_secs_f64() / pair[1].median().as_secs_f64().max(1e-9)
            )
        })
        .collect();
    report.push_str(&format!(
        "\nA fresh instance per call costs, against a warm one: {}. Hence the default: warm instances, reused \
         for every language (a trapped one is dropped); `InstanceReuse::Fresh` remains for operators who want no \
         state to survive a call.\n",
        ratios.join(", ")
    ));
    println!("{report}");
    if let Some(path) = out_path() {
        write_section(
            &path,
            "languages",
            "Per language: Rust, Python, JavaScript, Go",
            "make bench",
            &report,
        )
        .expect("write report");
    }
}
