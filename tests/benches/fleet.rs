//! A fleet through the binaries users run (their release builds under
//! `make bench`): `kubewasm apiserver` with `--request-latency-ms 20`
//! (round trips as to a remote cluster) and `kubewasm run --sharding
//! --workers 4` replicas of the `myapp` example.
//!
//! - **Scaling**: N MyApps created at once (by ten `kubectl create`s side by
//!   side) once the ring has settled, through 1, 2 and 3 replicas: the time
//!   until every MyApp has its Deployment and every replica's queue is
//!   empty, and its ratio to one replica's.
//! - **Shares**: the MyApps each of the 3 replicas caches.
//! - **Failover**: one of the 3 SIGKILLed, with the default Lease (15 s),
//!   and 30 MyApps created at that moment: the time until the survivors
//!   hold every slot, and until the 30 have their Deployments.
//! - **Memory**: the resident memory that 1 and 50 busy
//!   `configmap-replicator` plugins (the JavaScript example under 50 names)
//!   add over 10,000 ConfigMaps to a host running none, in the second half
//!   of their work (within a minute of the host being ready); and what 1
//!   and 50 idle ones (`misbehave`, `noop`) add once each reconciled every
//!   ConfigMap.
//!
//! Run with `make bench`; `cargo test --all-targets` runs it small.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kubewasm_tests::bench::{is_real_run, out_path, until, write_section};
use kubewasm_tests::chart::{Axis, Line, Panel};
use kubewasm_tests::host::{Host, apply, create_all, get_json, metric_total as total};
use kubewasm_tests::peers::rust_binary;
use kubewasm_tests::{Apiserver, example_file, example_plugin, kubewasm_bin, pss_kib, rss_kib};

/// Every slot of a ring.
const ALL_SLOTS: f64 = kubewasm_engine::ring::SLOTS as f64;

/// Creates `items` by ten `kubectl create`s at once.
fn create_side_by_side(server: &Apiserver, items: Vec<serde_json::Value>) {
    let chunk = items.len().div_ceil(10).max(1);
    std::thread::scope(|scope| {
        for part in items.chunks(chunk) {
            scope.spawn(|| create_all(server, part.to_vec()));
        }
    });
}

fn myapps(prefix: &str, count: usize) -> Vec<serde_json::Value> {
    (0..count)
        .map(|i| {
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default"},
                "spec": {"replicas": 1, "image": "nginx:1.27", "port": 8080}})
        })
        .collect()
}

fn deployments(server: &Apiserver) -> usize {
    get_json(server, &["deployments"])
        .and_then(|d| d["items"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// The `kubewasm` the ring runs: the release build under `make bench`.
fn binary() -> PathBuf {
    if is_real_run() {
        rust_binary("release", "kubewasm")
    } else {
        kubewasm_bin()
    }
}

fn replica(server: &Apiserver, lease_seconds: Option<&str>) -> Host {
    let plugins: Vec<(&str, PathBuf)> = vec![("myapp", example_plugin("myapp"))];
    let mut flags = vec![
        "--sharding",
        "--leader-election-id",
        "bench",
        "--leader-election-namespace",
        "default",
        "--workers",
        "4",
    ];
    if let Some(seconds) = lease_seconds {
        flags.extend(["--lease-duration-seconds", seconds]);
    }
    Host::start_from(&binary(), &server.kubeconfig, &plugins, &[], &flags)
}

fn slots(hosts: &[Host]) -> Vec<f64> {
    hosts
        .iter()
        .map(|h| h.metric("kubewasm_shard_slots_held").unwrap_or(0.0))
        .collect()
}

/// MyApps created just after a replica's SIGKILL.
const LATE: usize = 30;

/// What one ring of replicas did.
struct Run {
    replicas: usize,
    converged: Duration,
    shares: Vec<f64>,
    failover: Option<Failover>,
}

/// After one replica of a ring was SIGKILLed: how long until the
/// survivors held every slot, and until the [`LATE`] MyApps created at
/// that moment all had their Deployments.
#[derive(Clone, Copy, Debug, Default)]
struct Failover {
    taken: Duration,
    late: Duration,
}

/// `replicas` replicas converge `count` MyApps; with `kill`, one is then
/// SIGKILLed and the survivors' takeover timed.
fn ring(replicas: usize, count: usize, kill: bool) -> anyhow::Result<Run> {
    let server = Apiserver::start_embedded_from(&binary(), &["--request-latency-ms", "20"]);
    apply(&server, &example_file("myapp", "crd.yaml"));
    // Small (in `cargo test`), a short Lease: the failover waits less.
    let lease = (!is_real_run()).then_some("6");
    let mut hosts: Vec<Host> = (0..replicas).map(|_| replica(&server, lease)).collect();
    for host in &hosts {
        host.wait_ready();
    }
    until("the ring settles", Duration::from_secs(120), || {
        let held = slots(&hosts);
        held.iter().sum::<f64>() == ALL_SLOTS && held.iter().all(|n| *n > 0.0)
    })?;
    let started = Instant::now();
    create_side_by_side(&server, myapps("app", count));
    until("the MyApps converge", Duration::from_secs(1800), || {
        deployments(&server) == count
            && hosts
                .iter()
                .all(|h| total(&h.get("/metrics").1, "workqueue_depth", "name=\"myapp\"") == 0.0)
    })?;
    let converged = started.elapsed();
    let shares = hosts
        .iter()
        .map(|h| {
            total(
                &h.get("/metrics").1,
                "kubewasm_informer_objects",
                "shard=\"uid\"",
            )
        })
        .collect();
    let failover = if kill {
        let mut killed = hosts.remove(0);
        killed.kill();
        let killed_at = Instant::now();
        // MyApps created at once, some of them in the slots it held.
        create_side_by_side(&server, myapps("late", LATE));
        let (mut taken, mut late) = (None, None);
        until(
            "the survivors take every slot and the MyApps created after converge",
            Duration::from_secs(120),
            || {
                let now = killed_at.elapsed();
                if taken.is_none() && slots(&hosts).iter().sum::<f64>() == ALL_SLOTS {
                    taken = Some(now);
                }
                if late.is_none() && deployments(&server) == count + LATE {
                    late = Some(now);
                }
                taken.is_some() && late.is_some()
            },
        )?;
        Some(Failover {
            taken: taken.unwrap_or_default(),
            late: late.unwrap_or_default(),
        })
    } else {
        None
    };
    Ok(Run {
        replicas,
        converged,
        shares,
        failover,
    })
}

/// What a host running `plugins` replicators over the server's ConfigMaps
/// holds while they work, sampled every half second from the moment it is
/// ready until its queues drain (or `window` ends): the medians of the
/// second half of the samples (its first loads, lists and reconciles
/// behind it, busy still).
struct Held {
    /// Resident memory, KiB.
    rss: f64,
    /// Proportional set size, KiB.
    pss: f64,
    /// The most instances (busy and idle) seen in that half.
    instances: f64,
    /// Reconciles a second over that half, every plugin's together.
    rate: f64,
    /// Reconciles counted by the last sample.
    reconciles: f64,
}

fn held(server: &Apiserver, plugins: usize, window: Duration, flags: &[&str]) -> Held {
    let names: Vec<String> = (0..plugins).map(|p| format!("replicator-{p:02}")).collect();
    let plugins: Vec<(&str, PathBuf)> = names
        .iter()
        .map(|n| (n.as_str(), example_plugin("configmap-replicator")))
        .collect();
    let host = Host::start_from(&binary(), &server.kubeconfig, &plugins, &[], flags);
    host.wait_ready();
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < window {
        let metrics = host.get("/metrics").1;
        if !names.is_empty() && total(&metrics, "workqueue_depth", "") == 0.0 {
            break;
        }
        let instances = total(&metrics, "kubewasm_instances", "state=\"busy\"")
            + total(&metrics, "kubewasm_instances", "state=\"idle\"");
        samples.push((
            rss_kib(host.pid()) as f64,
            pss_kib(host.pid()) as f64,
            instances,
            total(&metrics, "controller_runtime_reconcile_total", ""),
            started.elapsed().as_secs_f64(),
        ));
        std::thread::sleep(Duration::from_millis(500));
    }
    let late = samples.split_off(samples.len() / 2);
    let rate = match (late.first(), late.last()) {
        (Some(first), Some(last)) if last.4 > first.4 => (last.3 - first.3) / (last.4 - first.4),
        _ => 0.0,
    };
    let median = |field: fn(&(f64, f64, f64, f64, f64)) -> f64| {
        let mut values: Vec<f64> = late.iter().map(field).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(0.0)
    };
    Held {
        rss: median(|s| s.0),
        pss: median(|s| s.1),
        instances: late.iter().map(|s| s.2).fold(0.0, f64::max),
        rate,
        reconciles: late.last().map_or(0.0, |s| s.3),
    }
}

/// The resident memory (KiB) of a host running `plugins` idle plugins
/// (`misbehave`, mode `noop`) over the server's `objects` ConfigMaps, once
/// each has reconciled every one and the host has been idle a while: the
/// median of five samples half a second apart.
fn idle(server: &Apiserver, plugins: usize, objects: usize) -> anyhow::Result<f64> {
    let names: Vec<String> = (0..plugins).map(|p| format!("idle-{p:02}")).collect();
    let component = kubewasm_tests::test_plugin("misbehave");
    let plugins: Vec<(&str, PathBuf)> = names
        .iter()
        .map(|n| (n.as_str(), component.clone()))
        .collect();
    let configs: Vec<String> = names.iter().map(|n| format!("{n}.config.yaml")).collect();
    let files: Vec<(&str, &str)> = configs
        .iter()
        .map(|c| (c.as_str(), "mode: noop\n"))
        .collect();
    let host = Host::start_from(&binary(), &server.kubeconfig, &plugins, &files, &[]);
    host.wait_ready();
    let all = (names.len() * objects) as f64;
    until(
        "every plugin reconciles every object",
        Duration::from_secs(1800),
        || {
            let metrics = host.get("/metrics").1;
            total(&metrics, "controller_runtime_reconcile_total", "") >= all
                && total(&metrics, "workqueue_depth", "") == 0.0
        },
    )?;
    std::thread::sleep(Duration::from_secs(3));
    let mut samples: Vec<f64> = (0..5)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(500));
            rss_kib(host.pid()) as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    Ok(samples[2])
}

/// The scaling runs over `count` MyApps: their table, and the failover.
/// The scaling part: its table, the failover, and the chart of time and
/// speed-up against replicas.
fn scaling(count: usize) -> anyhow::Result<(String, Failover, Vec<Panel>)> {
    let runs = [
        ring(1, count, false)?,
        ring(2, count, false)?,
        ring(3, count, true)?,
    ];
    let one = runs[0].converged.as_secs_f64();
    let mut table = String::from(
        "| replicas | converged | speed-up | MyApps cached per replica |\n|---|---|---|---|\n",
    );
    for run in &runs {
        let shares: Vec<String> = run.shares.iter().map(|s| format!("{s:.0}")).collect();
        table.push_str(&format!(
            "| {} | {:.1} s | {:.2}x | {} |\n",
            run.replicas,
            run.converged.as_secs_f64(),
            one / run.converged.as_secs_f64().max(1e-9),
            shares.join(" / ")
        ));
        eprintln!(
            "{} replicas: {:.1} s, shares {shares:?}",
            run.replicas,
            run.converged.as_secs_f64()
        );
    }
    let failover = runs[2].failover.unwrap_or_default();
    eprintln!(
        "failover after a SIGKILL: every slot held after {:.1} s, {LATE} MyApps created then \
         converged after {:.1} s",
        failover.taken.as_secs_f64(),
        failover.late.as_secs_f64()
    );
    let line = |name: &str, points: Vec<(f64, f64)>, dashed: bool, colour: usize| Line {
        name: name.to_owned(),
        points,
        dashed,
        colour,
    };
    let replicas = |value: &dyn Fn(&Run) -> f64| -> Vec<(f64, f64)> {
        runs.iter().map(|r| (r.replicas as f64, value(r))).collect()
    };
    let panels = vec![
        Panel {
            title: format!("Time to converge {count} MyApps"),
            x: Axis::linear("replicas"),
            y: Axis::linear("seconds"),
            lines: vec![line(
                "kubewasm run --sharding",
                replicas(&|r| r.converged.as_secs_f64()),
                false,
                0,
            )],
        },
        Panel {
            title: "Speed-up over one replica".to_owned(),
            x: Axis::linear("replicas"),
            y: Axis::linear("x one replica"),
            lines: vec![
                line(
                    "kubewasm run --sharding",
                    replicas(&|r| one / r.converged.as_secs_f64().max(1e-9)),
                    false,
                    0,
                ),
                line("ideal", replicas(&|r| r.replicas as f64), true, 4),
            ],
        },
    ];
    Ok((table, failover, panels))
}

/// The memory 1 and 50 busy replicators add over `configmaps` ConfigMaps:
/// its paragraph.
fn memory(configmaps: usize, window: Duration) -> anyhow::Result<String> {
    let server = Apiserver::start();
    let items = kubewasm_tests::host::namespaced_config_maps(configmaps);
    create_all(&server, items);
    // A first host compiles the component into the cache the others load.
    held(&server, 1, Duration::from_secs(2), &[]);
    let base = held(&server, 0, window, &[]);
    let (single, fifty) = (
        held(&server, 1, window, &[]),
        held(&server, 50, window, &[]),
    );
    // As before warm instances were sized by memory: eight kept, one for
    // each reconcile run at once.
    let counted = held(&server, 50, window, &["--max-warm-instances", "8"]);
    // The fifty again, each step's spans exported to a collector on
    // loopback.
    let collector = kubewasm_tests::otlp::Receiver::start()?;
    let traced = held(
        &server,
        50,
        window,
        &["--otlp-endpoint", &collector.endpoint()],
    );
    let spans = collector.spans();
    let traced_steps = spans.iter().filter(|s| s.name == "reconcile").count();
    let traced_ratio = traced.rate / fifty.rate.max(1e-9);
    let added = |h: &Held, f: fn(&Held) -> f64| (f(h) - f(&base)) / 1024.0;
    let (rss1, rss50) = (added(&single, |h| h.rss), added(&fifty, |h| h.rss));
    let (pss1, pss50) = (added(&single, |h| h.pss), added(&fifty, |h| h.pss));
    let per_plugin = (rss50 - rss1) / 49.0;
    // A single plugin that drained before a sample was taken has no rate.
    let of_single = |rate: f64| {
        if single.rate > 0.0 {
            rate / single.rate
        } else {
            f64::NAN
        }
    };
    let (rate_ratio, counted_ratio) = (of_single(fifty.rate), of_single(counted.rate));
    let rss_counted = added(&counted, |h| h.rss);
    let rss_traced = added(&traced, |h| h.rss);
    eprintln!(
        "memory added: 1 plugin {rss1:.0} MiB resident, {pss1:.0} MiB proportional ({} \
         instances, {:.0} reconciles/s); 50 plugins {rss50:.0} MiB, {pss50:.0} MiB ({} instances, \
         {:.0} reconciles/s): {per_plugin:.2} MiB a plugin past the first, {rate_ratio:.2}x the rate; \
         eight kept warm: {rss_counted:.0} MiB, {} instances, {:.0} reconciles/s ({counted_ratio:.2}x)",
        single.instances, single.rate, fifty.instances, fifty.rate, counted.instances, counted.rate
    );
    eprintln!(
        "traced: {rss_traced:.0} MiB, {} instances, {:.0} reconciles/s ({traced_ratio:.2}x \
         untraced); {} spans received, {traced_steps} of them reconciles, of {:.0} reconciles",
        traced.instances,
        traced.rate,
        spans.len(),
        traced.reconciles
    );
    Ok(format!(
        "Busy plugins: `kubewasm run` with the CLI's defaults over {configmaps} ConfigMaps, one \
         `configmap-replicator` and then 50 (the same component under 50 names), each reconciling \
         every ConfigMap once. Memory is what the host holds less a host running no plugin, the \
         rate is reconciles a second of all its plugins together (both over the second half of \
         the samples taken every half second while its queues are not empty, within a minute of it \
         being ready; the component's code from the compiled cache). Resident memory (RSS) counts \
         a page of a component's memory image once per instance mapping it; the proportional set \
         size (PSS) counts it once.\n\n\
         | plugins | instances (busy and idle, at most) | reconciles / s | resident added | proportional added |\n\
         |---|---|---|---|---|\n\
         | 1 | {} | {:.0} | {rss1:.0} MiB | {pss1:.0} MiB |\n\
         | 50 | {} | {:.0}: **{rate_ratio:.2}x** one (goal: at least 0.8x) | {rss50:.0} MiB: \
         **{per_plugin:.1} MiB** a plugin past the first (goal: at most 4) | {pss50:.0} MiB |\n\
         | 50, eight instances kept warm (`--max-warm-instances 8`, the default before) | {} | {:.0}: \
         {counted_ratio:.2}x one | {rss_counted:.0} MiB | |\n\
         | 50, traced (`--otlp-endpoint`: a collector on loopback) | {} | {:.0}: **{traced_ratio:.2}x** \
         the untraced fifty | {rss_traced:.0} MiB | |\n\n\
         Traced, the collector received {} spans, {traced_steps} of them `reconcile` spans, while the \
         host counted {:.0} reconciles: the exporter's queue (2,048 spans, the SDK's default) drops \
         what it cannot send in time rather than hold a reconcile up (`OTEL_BSP_*` size it; \
         `OTEL_TRACES_SAMPLER` thins the traces).\n\n\
         Warm instances are bounded by the memory they hold (`--warm-memory-mib`, a sixteenth of \
         the machine's by default), not by the reconciles run at once: each busy plugin keeps its \
         instance between calls, and one with no work left lets it go. A component loaded again \
         under another name is recognised by its digest, hashed from the file in pieces, and \
         shares the compiled code without its bytes being read again.\n\n",
        single.instances,
        single.rate,
        fifty.instances,
        fifty.rate,
        counted.instances,
        counted.rate,
        traced.instances,
        traced.rate,
        spans.len(),
        traced.reconciles,
    ))
}

/// Idle plugins over `configmaps` ConfigMaps: its paragraph.
fn idle_plugins(configmaps: usize) -> anyhow::Result<String> {
    let server = Apiserver::start();
    create_all(
        &server,
        kubewasm_tests::host::namespaced_config_maps(configmaps),
    );
    let idle_base = idle(&server, 0, configmaps)?;
    let (idle1, idle50) = (
        (idle(&server, 1, configmaps)? - idle_base) / 1024.0,
        (idle(&server, 50, configmaps)? - idle_base) / 1024.0,
    );
    let idle_ratio = idle50 / idle1.max(1e-9);
    eprintln!("idle: 1 plugin {idle1:.1} MiB, 50 plugins {idle50:.1} MiB: {idle_ratio:.2}x");
    Ok(format!(
        "Idle plugins: `kubewasm run` with the CLI's defaults over {configmaps} ConfigMaps, one `misbehave` \
         (mode `noop`) and then 50 (the same component under 50 names), once every plugin reconciled \
         every ConfigMap and the host has been idle 3 s (its warm instances let go), resident memory less \
         a host running no plugin (medians of five samples): 1 plugin {idle1:.1} MiB, 50 plugins \
         {idle50:.1} MiB: **{idle_ratio:.2}x** one (goal: at most 1.3x).\n\n"
    ))
}

/// `cargo bench --bench fleet -- --only scaling|memory|idle` runs one part
/// (and writes nothing).
fn main() -> anyhow::Result<()> {
    let real = is_real_run();
    let (count, configmaps, window) = if real {
        (3_000, 10_000, Duration::from_secs(60))
    } else {
        (30, 200, Duration::from_secs(3))
    };
    let args: Vec<String> = std::env::args().collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1));
    let part = |name: &str| only.is_none_or(|o| o == name);
    let scaled = part("scaling").then(|| scaling(count)).transpose()?;
    let memory = part("memory")
        .then(|| memory(configmaps, window))
        .transpose()?;
    let idle = part("idle").then(|| idle_plugins(configmaps)).transpose()?;
    if let (Some(path), Some((table, failover, panels)), Some(memory), Some(idle)) =
        (out_path().filter(|_| real), scaled, memory, idle)
    {
        let chart = "docs/bench/fleet.svg";
        kubewasm_tests::chart::write(chart, &panels, (480, 340))?;
        let body = format!(
            "Real processes on this machine (2 cores), release builds: `kubewasm apiserver --request-latency-ms 20` and \
             replicas of `kubewasm run --sharding --workers 4` running `myapp` (a Deployment and a Service \
             per MyApp, and its status: three writes a reconcile). {count} MyApps are created at once \
             (ten `kubectl create`s side by side) once the ring has settled; converged is when every \
             MyApp has its Deployment and every replica's queue is empty. Goal: at least 2.7x at 3 replicas; \
             the published figure to beat is about 2.25x (timebertt's controller sharding).\n\n{table}\n\
             ![time and speed-up against replicas]({chart})\n\n\
             Each replica's primary store holds its share only (`kubewasm_informer_objects{{shard=\"uid\"}}`). \
             Failover: one of the three SIGKILLed and {LATE} MyApps created at that moment (a third of \
             them in its slots): the survivors held every slot {:.1} s later, and the {LATE} MyApps all \
             had their Deployments {:.1} s after the kill (the default Lease of 15 s, renewed every 2 s; \
             goal: within the Lease and 2 s). The survivors see the Leases by a watch and take a silent \
             member's slots when its Lease runs out; of the keys they are then shown, those their own \
             field manager wrote last run after the rest.\n\n{idle}{memory}",
            failover.taken.as_secs_f64(),
            failover.late.as_secs_f64(),
        );
        write_section(
            &path,
            "fleet",
            "A fleet: replicas splitting one plugin's keys, many plugins on one host",
            "make bench (cargo bench -p kubewasm-tests --bench fleet -- --write BENCHMARKS.md)",
            &body,
        )?;
    }
    Ok(())
}
