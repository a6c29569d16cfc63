//! A tenant's reconcile latency with and without a hostile tenant beside
//! it, through the host's own loop (`daemon::run`) running two `Plugin`
//! resources against the embedded API server in this process.
//!
//! tenant-a's plugin (the Rust `misbehave` test plugin, mode `language`)
//! writes an event per ConfigMap; its latency runs from the create of a
//! ConfigMap to the moment a watch sees that event. It is measured alone,
//! then while tenant-b's plugin (the same component, mode `hostile`, under
//! the limits a tenant gets: 64 MiB, a 200 ms deadline, 100 actions) is
//! handed a new attack every 50 ms: loops to its deadline, allocations to
//! its memory limit, floods of actions, writes and reads outside its
//! namespace, every one failing and retried with backoff.
//!
//! Then the shares of the host's workers: on a host of two workers, two
//! saturated tenants of shares 1 and 3 (the same component, mode `busy`:
//! each call holds its worker 0.5 ms, and asks to be called again 1 ms
//! later; sixteen keys each, concurrency 2), their reconciles counted from
//! the host's metrics over a window; and a third tenant's single key at a
//! time, its latency measured as above, alone and while the two saturate
//! the workers.
//!
//! Run with `make bench`; `cargo test --all-targets` runs it small.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm::daemon::HostOptions;
use kubewasm_engine::informer::InitialList;
use kubewasm_engine::oci::{Access, Artifacts};
use kubewasm_engine::plugin_resource::{PluginResource, ResourceOptions};
use kubewasm_runtime::private_dir::PrivateDir;
use kubewasm_runtime::{Runtime, RuntimeConfig};
use kubewasm_tests::bench::{is_real_run, median, ms, out_path, write_section};
use kubewasm_tests::host::metric_total;
use kubewasm_tests::registry::Registry;
use kubewasm_tests::{compiled_cache_dir, in_process_cluster, test_plugin};
use serde_json::json;
use tokio::sync::mpsc;

/// The attacks the hostile tenant is handed, in turn.
const ATTACKS: [&str; 5] = [
    "loop",
    "oom",
    "flood-actions",
    "write-outside",
    "list-outside",
];

/// The `p`-th percentile of `v`.
fn percentile(mut v: Vec<Duration>, p: usize) -> Duration {
    v.sort();
    let index = (v.len() * p / 100).min(v.len().saturating_sub(1));
    v.get(index).copied().unwrap_or_default()
}

/// Applies the Plugin `namespace/name`.
async fn apply_plugin(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
) -> anyhow::Result<()> {
    let object = json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "Plugin",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec,
    });
    Api::<PluginResource>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&object),
        )
        .await?;
    Ok(())
}

/// Creates the ConfigMap `namespace/name` with `data`.
async fn config_map(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    data: serde_json::Value,
) -> anyhow::Result<()> {
    let object = serde_json::from_value(json!({"metadata": {"name": name}, "data": data}))?;
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(())
}

/// Every event written in `namespace`, by the object it regards, with
/// the instant a watch saw it.
fn watch_events(
    client: &kube::Client,
    namespace: &str,
) -> mpsc::UnboundedReceiver<(String, Instant)> {
    let (tx, events) = mpsc::unbounded_channel();
    let watched = watcher(
        Api::<Event>::namespaced(client.clone(), namespace),
        watcher::Config::default(),
    )
    .applied_objects();
    tokio::spawn(async move {
        let mut watched = std::pin::pin!(watched);
        while let Some(Ok(event)) = watched.next().await {
            let regarding = event.regarding.and_then(|r| r.name).unwrap_or_default();
            if tx.send((regarding, Instant::now())).is_err() {
                break;
            }
        }
    });
    events
}

/// Creates `rounds` ConfigMaps in `namespace` one after the other, each
/// once the previous one's event was seen: their latencies.
async fn measure(
    client: &kube::Client,
    namespace: &str,
    events: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    seen: &mut HashMap<String, Instant>,
    prefix: &str,
    rounds: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut latencies = Vec::new();
    for round in 0..rounds {
        let name = format!("{prefix}-{round}");
        let at = Instant::now();
        config_map(client, namespace, &name, json!({"a": "b"})).await?;
        let deadline = tokio::time::sleep(Duration::from_secs(120));
        tokio::pin!(deadline);
        let observed = loop {
            if let Some(observed) = seen.get(&name) {
                break *observed;
            }
            tokio::select! {
                () = &mut deadline => anyhow::bail!("no event for {name} within 120 s"),
                got = events.recv() => {
                    let (regarding, observed) =
                        got.ok_or_else(|| anyhow::anyhow!("event stream ended"))?;
                    seen.insert(regarding, observed);
                }
            }
        };
        latencies.push(observed - at);
    }
    Ok(latencies)
}

/// The host's options for these runs: plugins from resources only,
/// `workers` workers, metrics on `metrics`.
fn host_options(
    work: &std::path::Path,
    workers: usize,
    metrics: std::net::SocketAddr,
) -> anyhow::Result<HostOptions> {
    let access = Access {
        plain_http: true,
        ..Access::default()
    };
    let options = HostOptions {
        plugins: work.join("plugins"),
        metrics_addr: metrics,
        metrics_tls: None,
        trust_declarations: false,
        workers,
        shutdown_grace: Duration::from_secs(5),
        leader_election: None,
        sharding: None,
        initial_list: InitialList::Streaming,
        artifacts: Artifacts::new(PrivateDir::open(work)?, access),
        resources: ResourceOptions::default(),
        shares: std::collections::BTreeMap::new(),
        required_signatures: Default::default(),
        resync: kubewasm_engine::controller::DEFAULT_RESYNC,
        remembered: kubewasm_engine::controller::DEFAULT_REMEMBERED,
        record: None,
    };
    std::fs::create_dir_all(&options.plugins)?;
    Ok(options)
}

/// The host's metrics at `metrics`, as Prometheus text.
async fn scrape(metrics: std::net::SocketAddr) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(metrics).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    Ok(text)
}

/// The successful reconciles of share-a's and share-b's `busy` plugins,
/// from one scrape: those that asked to be called again (`requeue_after`,
/// as controller-runtime counts them) with the rest.
async fn reconciles(metrics: std::net::SocketAddr) -> anyhow::Result<(f64, f64)> {
    let text = scrape(metrics).await?;
    let of = |plugin: &str| -> f64 {
        ["success", "requeue_after"]
            .iter()
            .map(|result| {
                let having = format!(r#"controller="{plugin}",result="{result}""#);
                metric_total(&text, "controller_runtime_reconcile_total", &having)
            })
            .sum()
    };
    Ok((of("share-a.busy"), of("share-b.busy")))
}

/// The host's own loop on this runtime: the sender stops it.
fn start_host(
    client: &kube::Client,
    runtime: &Runtime,
    options: HostOptions,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), kubewasm::daemon::DaemonError>>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let cluster = kubewasm::daemon::Cluster {
        client: client.clone(),
        host: "127.0.0.1".to_owned(),
    };
    let host = tokio::spawn(kubewasm::daemon::run(
        cluster,
        runtime.clone(),
        options,
        async {
            let _ = stopped.await;
        },
    ));
    (stop, host)
}

/// The shares scenario (see the module documentation): written as its own
/// section.
async fn shares(
    client: &kube::Client,
    runtime: &Runtime,
    reference: &str,
    work: &std::path::Path,
    real: bool,
) -> anyhow::Result<()> {
    let (rounds, window) = if real {
        (40, Duration::from_secs(30))
    } else {
        (3, Duration::from_secs(2))
    };
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let options = host_options(&work.join("shares"), 2, metrics)?;
    let (stop, host) = start_host(client, runtime, options);
    let mut events = watch_events(client, "share-c");
    let probe = "share-c";
    apply_plugin(
        client,
        "share-c",
        "probe",
        json!({"source": reference, "config": {"mode": "language"}}),
    )
    .await?;
    let mut seen = HashMap::new();
    measure(client, probe, &mut events, &mut seen, "warm", 1).await?;
    let alone = measure(client, probe, &mut events, &mut seen, "alone", rounds).await?;

    for (namespace, share) in [("share-a", 1), ("share-b", 3)] {
        apply_plugin(
            client,
            namespace,
            "busy",
            json!({"source": reference, "share": share, "limits": {"concurrency": 2},
                   "config": {"mode": "busy", "micros": 500}}),
        )
        .await?;
        for key in 0..16 {
            config_map(client, namespace, &format!("k-{key}"), json!({"a": "b"})).await?;
        }
    }
    // Both saturate before the window opens: each has run, then a moment.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (a, b) = reconciles(metrics).await?;
        if a > 0.0 && b > 0.0 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the saturating tenants had not both run 60 s after their Plugins were applied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(if real { 2 } else { 1 })).await;
    let started = Instant::now();
    let before = reconciles(metrics).await?;
    let beside = measure(client, probe, &mut events, &mut seen, "beside", rounds).await?;
    if let Some(rest) = window.checked_sub(started.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    let after = reconciles(metrics).await?;
    let seconds = started.elapsed().as_secs_f64();
    let _ = stop.send(());
    host.await??;

    let (a, b) = (after.0 - before.0, after.1 - before.1);
    anyhow::ensure!(
        a > 0.0 && b > 0.0,
        "the saturating tenants ran {a} and {b} reconciles in {:.1} s: each should have run",
        started.elapsed().as_secs_f64()
    );
    let ratio = b / a.max(1.0);
    let (alone_median, beside_median) = (median(alone), median(beside));
    let wait = beside_median.as_secs_f64() / alone_median.as_secs_f64().max(1e-9);
    eprintln!(
        "shares 1:3 ran {a} and {b} reconciles in {seconds:.1} s: 1:{ratio:.2}; the third tenant's \
         latency alone {}, beside {}: {wait:.2}x",
        ms(alone_median),
        ms(beside_median)
    );
    if let Some(path) = out_path().filter(|_| real) {
        let body = format!(
            "The host's own loop (`daemon::run`) with two workers, against the embedded API server \
             in the same process, on this machine's two cores. Two tenants' `Plugin`s of shares 1 \
             and 3 (`misbehave`, mode `busy`: each call holds its worker 0.5 ms, then asks to be called again 1 ms later; \
             sixteen keys each, concurrency 2) saturate the two workers; their successful reconciles are \
             counted from the host's metrics over {seconds:.0} s. A third tenant's plugin (mode \
             `language`: an event per ConfigMap) gets one ConfigMap at a time, each once the last \
             one's event was seen, {rounds} in all; its latency runs from the create to a watch \
             seeing the event, alone and during the window (it waits for the next free worker, \
             which fair queueing gives it first). Alone, the host is otherwise idle and its \
             parked threads wake for each key: that figure varies most between runs.\n\n\
             | | share-a (share 1) | share-b (share 3) | ratio (goal: 1:3 within 15%) |\n\
             |---|---|---|---|\n\
             | reconciles | {a:.0} | {b:.0} | 1:{ratio:.2} |\n\n\
             | third tenant's latency | median |\n|---|---|\n\
             | alone | {} |\n\
             | beside the two saturating tenants | {} |\n\
             | ratio (goal: within 1.5x) | {wait:.2}x |\n",
            ms(alone_median),
            ms(beside_median),
        );
        write_section(
            &path,
            "shares",
            "Tenants: weighted shares of the host's workers",
            "make bench",
            &body,
        )?;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let real = is_real_run();
    // Enough rounds to span many turns of the five attacks (50 ms apart):
    // 60 spanned one or two, and the p90 moved with where they fell.
    let rounds = if real { 500 } else { 3 };
    let (_server, client) =
        in_process_cluster(kubewasm_apiserver::store::Store::new(100_000)).await?;
    kubewasm::cli::install_plugin_crds(&client).await?;
    for namespace in ["tenant-a", "tenant-b", "share-a", "share-b", "share-c"] {
        let object = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &object)
            .await?;
    }
    let registry = Registry::start();
    let access = Access {
        plain_http: true,
        ..Access::default()
    };
    let work = tempfile::tempdir()?;
    let runtime = Runtime::new(RuntimeConfig::default().cache_dir(compiled_cache_dir()))?;
    let bytes = std::fs::read(test_plugin("misbehave"))?;
    let interfaces = runtime.interfaces(&bytes)?;
    let reference = format!("oci://{}/tenants/misbehave:1", registry.addr);
    let component = kubewasm_engine::oci::Component {
        bytes: &bytes,
        interfaces: &interfaces,
    };
    kubewasm_engine::oci::push(
        &component,
        &kubewasm_engine::oci::parse_reference(&reference)?,
        &access,
    )
    .await?;
    let options = host_options(work.path(), 8, "127.0.0.1:0".parse()?)?;

    // Every event tenant-a's plugin writes, by the object it regards.
    let mut events = watch_events(&client, "tenant-a");
    let (stop, host) = start_host(&client, &runtime, options);
    apply_plugin(
        &client,
        "tenant-a",
        "good",
        json!({"source": reference, "config": {"mode": "language"}}),
    )
    .await?;
    let mut seen = HashMap::new();
    // The first reconcile loads the plugin: not measured.
    measure(&client, "tenant-a", &mut events, &mut seen, "warm", 1).await?;
    let alone = measure(&client, "tenant-a", &mut events, &mut seen, "alone", rounds).await?;

    apply_plugin(
        &client,
        "tenant-b",
        "hostile",
        json!({"source": reference,
               "limits": {"memory": "64Mi", "deadlineMilliseconds": 200, "maxActions": 100},
               "config": {"mode": "hostile", "victim": "tenant-a"}}),
    )
    .await?;
    let attacker = tokio::spawn({
        let client = client.clone();
        async move {
            for n in 0.. {
                let attack = ATTACKS[n % ATTACKS.len()];
                let name = format!("{attack}-{n}");
                if config_map(&client, "tenant-b", &name, json!({"attack": attack}))
                    .await
                    .is_err()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    // Let the attacks pile up before measuring.
    tokio::time::sleep(Duration::from_secs(if real { 5 } else { 1 })).await;
    let beside = measure(
        &client,
        "tenant-a",
        &mut events,
        &mut seen,
        "beside",
        rounds,
    )
    .await?;
    attacker.abort();

    let _ = stop.send(());
    host.await??;
    let (alone_median, beside_median) = (median(alone.clone()), median(beside.clone()));
    let (alone_p90, beside_p90) = (percentile(alone, 90), percentile(beside, 90));
    let ratio = beside_median.as_secs_f64() / alone_median.as_secs_f64().max(1e-9);
    let ratio_p90 = beside_p90.as_secs_f64() / alone_p90.as_secs_f64().max(1e-9);
    eprintln!(
        "tenant-a latency: alone {} (p90 {}), beside the hostile tenant {} (p90 {}): {ratio:.2}x",
        ms(alone_median),
        ms(alone_p90),
        ms(beside_median),
        ms(beside_p90)
    );
    if let Some(path) = out_path().filter(|_| real) {
        let body = format!(
            "The host's own loop (`daemon::run`) against the embedded API server in the same \
             process, two `Plugin` resources pulled from a registry on loopback, on this \
             machine's two cores. tenant-a's plugin (`misbehave`, Rust, mode `language`) writes \
             an event per ConfigMap; a figure runs from the create of a ConfigMap to the moment a \
             watch sees its event, {rounds} ConfigMaps one after the other. Beside it, tenant-b's \
             plugin (the same component, mode `hostile`, limits 64 MiB, 200 ms, 100 actions) is \
             handed a new attack every 50 ms, in turn: a loop to its deadline, an allocation to \
             its memory limit, 5,000 actions, a write and a list-and-get outside its namespace.\n\n\
             | tenant-a's reconcile latency | median | p90 |\n|---|---|---|\n\
             | alone | {} | {} |\n\
             | beside the hostile tenant | {} | {} |\n\
             | ratio (goal: within 1.5x) | {ratio:.2}x | {ratio_p90:.2}x |\n",
            ms(alone_median),
            ms(alone_p90),
            ms(beside_median),
            ms(beside_p90),
        );
        write_section(
            &path,
            "tenants",
            "Tenants: one tenant's latency beside a hostile one",
            "make bench",
            &body,
        )?;
    }
    shares(&client, &runtime, &reference, work.path(), real).await?;
    drop(registry);
    Ok(())
}
