//! The controller engine in process: the fairness figure (one plugin's key
//! behind another plugin's backlog of 10,000 keys, against the same key with
//! no backlog), the memory of many plugins over shared caches against as
//! many kube-runtime reflectors, and the skips of a resync of unchanged
//! MyApps. (MyApps converging through the `kubewasm` binary beside
//! kube-runtime and controller-runtime processes: the `peers` bench.)
//!
//! Run with `make bench`; `cargo test --all-targets` runs it small.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use kubewasm_apiserver::http::server::ApiServer;
use kubewasm_engine::Engine;
use kubewasm_engine::controller::Settings;
use kubewasm_runtime::{LoadOptions, Runtime, RuntimeConfig};
use kubewasm_tests::bench::{is_real_run, median, ms, out_path, write_section};
use kubewasm_tests::chart::{Axis, Line, Panel};
use kubewasm_tests::peers::{Usage, converged, create_myapps};
use kubewasm_tests::{
    compiled_cache_dir, example_plugin, in_process_cluster, test_plugin, workspace_root,
};
use myapp::MyApp;
use serde_json::json;

/// A fresh embedded API server (in memory, no authentication) and a client.
async fn cluster() -> anyhow::Result<(ApiServer, Client)> {
    let (server, client) =
        in_process_cluster(kubewasm_apiserver::store::Store::new(1_000_000)).await?;
    // The example's CRD, installed as `kubewasm dev` installs it.
    kubewasm::cli::install_crds(&client, &workspace_root().join("plugins").join("myapp")).await?;
    Ok((server, client))
}

/// kubewasm's engine running the `myapp` component, every primary queued
/// again each `resync`.
async fn wasm_engine(
    client: &Client,
    runtime: &Runtime,
    resync: Duration,
) -> anyhow::Result<Engine> {
    let mapper = Arc::new(kubewasm_engine::discovery::mapper(client).await?);
    let plugin = runtime.load(
        &std::fs::read(example_plugin("myapp"))?,
        &LoadOptions::new(mapper),
    )?;
    let (_, leading) = tokio::sync::watch::channel(true);
    let mut engine = Engine::new(client.clone(), 8, leading).with_resync(resync);
    engine.start(Arc::new(plugin), Settings::default());
    Ok(engine)
}

/// Median time for a MyApp to get its Deployment (five, one after the
/// other, after a warm-up one) while another plugin (misbehave, each
/// reconcile a copy of its ConfigMap) works through a backlog of `backlog`
/// ConfigMaps created before the host started.
async fn fairness(backlog: usize, runtime: &Runtime) -> anyhow::Result<(Duration, usize)> {
    let (_server, client) = cluster().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    futures_util::stream::iter(0..backlog)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(
                    json!({"metadata": {"name": format!("cm-{i:05}")}, "data": {"k": "v"}}),
                )?;
                cms.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let mapper = Arc::new(kubewasm_engine::discovery::mapper(&client).await?);
    let options = LoadOptions::new(mapper);
    let busy = runtime.load(&std::fs::read(test_plugin("misbehave"))?, &options)?;
    let myapp = runtime.load(&std::fs::read(example_plugin("myapp"))?, &options)?;
    let (_, leading) = tokio::sync::watch::channel(true);
    let mut engine = Engine::new(client.clone(), 8, leading);
    engine.start(
        Arc::new(busy),
        Settings {
            config: r#"{"mode": "ok"}"#.into(),
            ..Settings::default()
        },
    );
    engine.start(Arc::new(myapp), Settings::default());
    engine.wait_synced().await;
    // One warm-up key (first instance, first connections), then five keys one
    // after the other, each timed from its creation to its Deployment.
    let apps: Api<MyApp> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let mut times = Vec::new();
    for i in 0..6 {
        let name = format!("probe-{i}");
        let app: MyApp = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"replicas": 1, "image": "nginx:1.27", "port": 8080}}))?;
        let started = Instant::now();
        apps.create(&PostParams::default(), &app).await?;
        while deployments.get_opt(&name).await?.is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if i > 0 {
            times.push(started.elapsed());
        }
    }
    let took = median(times);
    // How much of the backlog was still waiting then.
    let copies = Api::<ConfigMap>::namespaced(client, "default")
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .iter()
        .filter(|c| c.name_any().ends_with("-copy"))
        .count();
    engine.shutdown().await;
    Ok((took, backlog.saturating_sub(copies)))
}

/// The resync period of the skips scenario: longer than 10,000 MyApps
/// take to converge (the embedded server's Service allocation makes that
/// over a minute).
const RESYNC: Duration = Duration::from_secs(180);

/// CPU time this process has used (the engine and the in-process API
/// server).
fn cpu_time() -> Duration {
    Usage::of(std::process::id()).cpu
}

/// What a resync of `n` MyApps, converged and unchanged, costs: calls made,
/// keys skipped, API writes, and the process's CPU time from the resync to
/// the last key handled; with reads recorded (the default: unchanged keys
/// skipped) or not (every key called).
struct Resync {
    calls: f64,
    skipped: f64,
    writes: f64,
    cpu: Duration,
}

async fn resync(n: usize, record: bool) -> anyhow::Result<Resync> {
    let (_server, client) = cluster().await?;
    create_myapps(&client, n, 2).await?;
    let runtime = Runtime::new(
        RuntimeConfig::default()
            .cache_dir(compiled_cache_dir())
            .record_reads(record),
    )?;
    let started = Instant::now();
    let engine = wasm_engine(&client, &runtime, RESYNC).await?;
    converged(&client, n, "ReplicasUnavailable").await?;
    eprintln!(
        "skips: {n} MyApps converged in {} (reads recorded: {record})",
        ms(started.elapsed())
    );
    anyhow::ensure!(
        started.elapsed() + Duration::from_secs(5) < RESYNC,
        "converged too late for the resync"
    );
    let count = |engine: &Engine| {
        let metrics = engine.metrics();
        let total = |metric: &str, having: &str| {
            kubewasm_tests::host::metric_total(&metrics, metric, having)
        };
        (
            total("controller_runtime_reconcile_total", "result=\"success\""),
            total("kubewasm_reconcile_skipped_total", "myapp"),
            total("kubewasm_actions_total", "result=\"applied\""),
        )
    };
    tokio::time::sleep_until((started + RESYNC - Duration::from_secs(2)).into()).await;
    let (calls, skipped, writes) = count(&engine);
    let cpu = cpu_time();
    loop {
        let now = count(&engine);
        if (now.0 - calls) + (now.1 - skipped) >= n as f64 {
            let cpu = cpu_time().saturating_sub(cpu);
            engine.shutdown().await;
            return Ok(Resync {
                calls: now.0 - calls,
                skipped: now.1 - skipped,
                writes: now.2 - writes,
                cpu,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Resident memory of this process, in MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// What the memory of controllers over `n` ConfigMaps is measured with.
#[derive(Clone, Copy, Debug)]
enum Readers {
    /// This many instances of one Wasm plugin (misbehave, `noop`) in one
    /// kubewasm engine, each its own plugin (own name, queue and workers).
    Wasm(usize),
    /// This many kube-runtime reflectors, each with its own watch and
    /// store, as that many native controllers would hold (in one process:
    /// the runtime and binary each process would add are left out, which
    /// only flatters them).
    Native(usize),
}

/// The memory `readers` add over `n` ConfigMaps once they have listed them
/// (and, for the plugins, reconciled every key): run in a process of its
/// own (see `main`), so what one scenario allocated never counts in another.
async fn memory(readers: Readers, n: usize, runtime: &Runtime) -> anyhow::Result<f64> {
    let (_server, client) =
        in_process_cluster(kubewasm_apiserver::store::Store::new(1_000_000)).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    futures_util::stream::iter(0..n)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:05}"),
                    "labels": {"app": "bench"}}, "data": {"key": "x".repeat(200)}}))?;
                cms.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let mapper = Arc::new(kubewasm_engine::discovery::mapper(&client).await?);
    let bytes = std::fs::read(test_plugin("misbehave"))?;
    // Every ConfigMap a plugin reconciles (the server seeds some too),
    // counted before measuring: a list of them all is no reader's memory.
    let keys = Api::<ConfigMap>::all(client.clone())
        .list_metadata(&kube::api::ListParams::default())
        .await?
        .items
        .len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_mib();
    let mut hold = Vec::new();
    let engine = match readers {
        Readers::Wasm(count) => {
            let (_, leading) = tokio::sync::watch::channel(true);
            let mut engine = Engine::new(client.clone(), 8, leading);
            for i in 0..count {
                let options = LoadOptions::new(Arc::clone(&mapper)).name(format!("reader-{i}"));
                engine.start(
                    Arc::new(runtime.load(&bytes, &options)?),
                    Settings {
                        config: r#"{"mode": "noop"}"#.into(),
                        ..Settings::default()
                    },
                );
            }
            engine.wait_synced().await;
            let wanted = (count * keys) as f64;
            loop {
                let done: f64 = engine
                    .metrics()
                    .lines()
                    .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum();
                if done >= wanted {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(engine)
        }
        Readers::Native(count) => {
            for _ in 0..count {
                let (reader, writer) = reflector::store::<ConfigMap>();
                let stream = reflector::reflector(
                    writer,
                    watcher(
                        Api::<ConfigMap>::all(client.clone()),
                        watcher::Config::default(),
                    ),
                )
                .default_backoff()
                .touched_objects()
                .for_each(|_| async {});
                hold.push((reader, tokio::spawn(stream)));
            }
            for (reader, _) in &hold {
                while reader.state().len() < n {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            None
        }
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown = rss_mib() - before;
    drop((engine, hold));
    Ok(grown)
}

/// How many malloc arenas a memory scenario's process runs with.
#[derive(Clone, Copy, Debug)]
enum Arenas {
    /// glibc's default: up to eight per core, one per thread as they
    /// contend. What a host run as is gets; the figures vary by several
    /// MiB from run to run (which arena a thread's allocations land in).
    Default,
    /// `MALLOC_ARENA_MAX=1`: one arena, figures stable to a tenth of a MiB.
    One,
}

/// Runs one memory scenario in a child process (this binary again, with
/// `KUBEWASM_BENCH_MEMORY` set) and reads the MiB it printed.
fn memory_in_child(readers: Readers, n: usize, arenas: Arenas) -> anyhow::Result<f64> {
    let spec = match readers {
        Readers::Wasm(count) => format!("wasm:{count}:{n}"),
        Readers::Native(count) => format!("native:{count}:{n}"),
    };
    let mut child = std::process::Command::new(std::env::current_exe()?);
    if let Arenas::One = arenas {
        child.env("MALLOC_ARENA_MAX", "1");
    }
    let out = child
        .env("KUBEWASM_BENCH_MEMORY", &spec)
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(out.status.success(), "memory scenario {spec} failed");
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("KUBEWASM_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = Runtime::new(RuntimeConfig::default().cache_dir(compiled_cache_dir()))?;
    // A memory scenario, in its own process: print the MiB and stop.
    if let Ok(spec) = std::env::var("KUBEWASM_BENCH_MEMORY") {
        let mut parts = spec.split(':');
        let (kind, count, n) = (parts.next(), parts.next(), parts.next());
        let count: usize = count.unwrap_or_default().parse()?;
        let n: usize = n.unwrap_or_default().parse()?;
        let readers = match kind {
            Some("wasm") => Readers::Wasm(count),
            _ => Readers::Native(count),
        };
        println!("{}", memory(readers, n, &runtime).await?);
        return Ok(());
    }
    let real = is_real_run();
    let only = std::env::var("KUBEWASM_BENCH_SECTION").ok();
    if (real && only.is_none()) || only.as_deref() == Some("skips") {
        skips(if real { 10_000 } else { 50 }).await?;
    }
    if only.is_none() {
        fairness_section(real, &runtime).await?;
    }
    if only.is_none() || only.as_deref() == Some("memory") {
        memory_section(real)?;
    }
    Ok(())
}

/// The fairness section: a key of one plugin behind another's backlog.
async fn fairness_section(real: bool, runtime: &Runtime) -> anyhow::Result<()> {
    let backlog = if real { 10_000 } else { 200 };
    let (alone, _) = fairness(0, runtime).await?;
    let (behind, waiting) = fairness(backlog, runtime).await?;
    let slowdown = behind.as_secs_f64() / alone.as_secs_f64();
    eprintln!(
        "fairness: one key {} alone, {} behind a {backlog}-key backlog ({waiting} still queued): {slowdown:.2}x",
        ms(alone),
        ms(behind)
    );
    if let Some(path) = out_path().filter(|_| real) {
        let body = format!(
            "The convergence of MyApps against kube-runtime and controller-runtime is the peers \
             section's; the memory of many plugins, the next section's.\n\n\
             Fairness: a new MyApp's Deployment appears {} after its creation (median of five, \
             after a warm-up) with no other work, {} while another plugin of the same host works \
             through a backlog of {backlog} keys ({waiting} of them still queued when the last was \
             timed): **{slowdown:.2}x**. The backlog waits behind its own plugin's two workers; \
             the other plugin's key takes a free permit at once.\n",
            ms(alone),
            ms(behind),
        );
        write_section(
            &path,
            "engine",
            "Controller engine: fairness",
            "make bench",
            &body,
        )?;
    }
    Ok(())
}

/// The memory section: what plugins in one host add over 10,000
/// ConfigMaps, against as many native caches, at growing counts (a table
/// and a chart).
fn memory_section(real: bool) -> anyhow::Result<()> {
    let (counts, objects): (&[usize], usize) = if real {
        (&[1, 10, 25, 50], 10_000)
    } else {
        (&[1, 3], 200)
    };
    let (first, most) = (counts[0], counts[counts.len() - 1]);
    // Resident memory moves by a few MiB from run to run with glibc's
    // default arenas: the plugins' figures are medians of three, with one
    // arena at every count and with the default arenas at the ends.
    let median_of_three = |readers, arenas| -> anyhow::Result<f64> {
        let mut runs = (0..3)
            .map(|_| memory_in_child(readers, objects, arenas))
            .collect::<anyhow::Result<Vec<f64>>>()?;
        runs.sort_by(f64::total_cmp);
        Ok(runs[1])
    };
    let mut one_arena = Vec::new();
    let mut native = Vec::new();
    for &count in counts {
        let plugins = median_of_three(Readers::Wasm(count), Arenas::One)?;
        let caches = memory_in_child(Readers::Native(count), objects, Arenas::Default)?;
        eprintln!(
            "memory over {objects} ConfigMaps: {count} plugins {plugins:.1} MiB (one arena), \
             {count} native caches {caches:.1} MiB"
        );
        one_arena.push((count as f64, plugins));
        native.push((count as f64, caches));
    }
    let mut default_arenas = Vec::new();
    for count in [first, most] {
        default_arenas.push((
            count as f64,
            median_of_three(Readers::Wasm(count), Arenas::Default)?,
        ));
    }
    let at = |line: &[(f64, f64)], count: usize| {
        line.iter()
            .find(|(c, _)| *c == count as f64)
            .map_or(0.0, |(_, mib)| *mib)
    };
    let Some(path) = out_path().filter(|_| real) else {
        return Ok(());
    };
    let chart = "docs/bench/memory.svg";
    kubewasm_tests::chart::write(
        chart,
        &[Panel {
            title: format!("Memory added over {objects} ConfigMaps"),
            x: Axis::log("readers (plugins or native controllers)"),
            y: Axis::log("MiB"),
            lines: vec![
                Line {
                    name: "kubewasm plugins, one arena".into(),
                    points: one_arena.clone(),
                    dashed: false,
                    colour: 0,
                },
                Line {
                    name: "kubewasm plugins, default arenas".into(),
                    points: default_arenas.clone(),
                    dashed: true,
                    colour: 0,
                },
                Line {
                    name: "kube-runtime reflectors".into(),
                    points: native.clone(),
                    dashed: false,
                    colour: 1,
                },
            ],
        }],
        (720, 420),
    )?;
    let mut table = String::from(
        "| readers | kubewasm plugins (one arena) | (default arenas) | kube-runtime reflectors | plugins / reflectors |\n|---|---|---|---|---|\n",
    );
    for &count in counts {
        let (plugins, caches) = (at(&one_arena, count), at(&native, count));
        let default = if count == first || count == most {
            format!("{:.1} MiB", at(&default_arenas, count))
        } else {
            String::new()
        };
        table += &format!(
            "| {count} | {plugins:.1} MiB ({:.2}x one) | {default} | {caches:.1} MiB | {:.3} |\n",
            plugins / at(&one_arena, first),
            plugins / caches,
        );
    }
    let body = format!(
        "What the readers add to the process over {objects} ConfigMaps (each 200 bytes of data) \
         once listed (and, for plugins, every key reconciled once), each scenario in a process \
         of its own: kubewasm plugins (the `misbehave` test plugin, `noop`, under as many \
         names, each its own queue and workers, in one engine; medians of three), with one \
         malloc arena (`MALLOC_ARENA_MAX=1`, where the figures are stable to a tenth of a MiB) \
         and, at {first} and {most}, glibc's default arenas (as the host runs unless told \
         otherwise); against as many kube-runtime reflectors, a watch and a store each, as \
         that many native controllers hold (in one process: the runtime and binary each \
         would add are left out, which only flatters them).\n\n{table}\n\
         ![memory against readers]({chart})\n\n\
         Goals: {most} plugins at most 1.3x one (the caches are shared: **{:.2}x** with one \
         arena, **{:.2}x** with the default ones), and at most 1/20 of the native \
         controllers (**{:.3}**). The plugins share one informer and one compiled copy of the \
         component (by digest); a queue holds the listing of its primary as a walk over the \
         shared store, not a key each, and a plugin with no work left lets its warm instance \
         go. What each plugin past the first adds, {:.2} MiB with one arena, is its queue, its \
         metrics, its share of the remembered keys and the heap its instance used while all \
         worked at once, freed but not given back to the system.\n",
        at(&one_arena, most) / at(&one_arena, first),
        at(&default_arenas, most) / at(&default_arenas, first),
        at(&default_arenas, most) / at(&native, most),
        (at(&one_arena, most) - at(&one_arena, first)) / (most - first) as f64,
    );
    write_section(
        &path,
        "memory",
        "Controller engine: the memory of many plugins",
        "make bench (this section alone: KUBEWASM_BENCH_SECTION=memory cargo bench -p kubewasm-tests --bench engine -- --write BENCHMARKS.md)",
        &body,
    )?;
    Ok(())
}

/// The skips section: a resync of `n` unchanged MyApps, skipped and not.
async fn skips(n: usize) -> anyhow::Result<()> {
    let calling = resync(n, false).await?;
    let skipping = resync(n, true).await?;
    eprintln!(
        "resync of {n} unchanged MyApps: skipping {} calls, {} skipped, {} CPU; \
         calling {} calls, {} CPU",
        skipping.calls,
        skipping.skipped,
        ms(skipping.cpu),
        calling.calls,
        ms(calling.cpu)
    );
    if let Some(path) = out_path().filter(|_| is_real_run()) {
        let row = |what: &str, r: &Resync| {
            format!(
                "| {what} | {} | {} | {} | {} |\n",
                r.calls,
                r.skipped,
                r.writes,
                ms(r.cpu)
            )
        };
        let body = format!(
            "{n} MyApps created, the engine started with a resync every {} s, the MyApps \
             converged (as in the engine section), then the first resync queued every one of \
             them, nothing having changed. Counted from just before the resync to the last key \
             handled; CPU time is the whole process's (the engine and the in-process API \
             server).\n\n\
             | reads recorded | calls | skipped | API writes | CPU time |\n|---|---|---|---|---|\n{}{}\n\
             Skipping saves **{:.0}** of {n} calls and **{:.0}%** of the CPU time of the resync.\n",
            RESYNC.as_secs(),
            row("yes (the default: unchanged keys skipped)", &skipping),
            row(
                "no (`RuntimeConfig::record_reads(false)`: every key called)",
                &calling
            ),
            calling.calls - skipping.calls,
            100.0 * (1.0 - skipping.cpu.as_secs_f64() / calling.cpu.as_secs_f64().max(1e-9)),
        );
        write_section(
            &path,
            "skips",
            "Skipped calls: a resync of 10,000 unchanged MyApps",
            "KUBEWASM_BENCH_SECTION=skips cargo bench -p kubewasm-tests --bench engine -- --write BENCHMARKS.md",
            &body,
        )?;
    }
    Ok(())
}
