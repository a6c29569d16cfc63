//! Plugin lifecycle latencies, through the host's own loop (`daemon::run`,
//! its plugin directory watched) against the embedded API server in this
//! process:
//! - hot swap, from the rename of a changed file to the first event the
//!   new version's reconcile writes: with the component's precompiled code
//!   cached (a configuration change), and with a new component to compile
//!   (a Rust plugin);
//! - pull to first reconcile: from writing `NAME.oci` (a reference to an
//!   artifact in a real registry) to the new plugin's first event.
//!
//! Run with `make bench`; `cargo test --all-targets` runs it small.

use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm::daemon::HostOptions;
use kubewasm_engine::informer::InitialList;
use kubewasm_engine::oci::{Access, Artifacts};
use kubewasm_runtime::private_dir::PrivateDir;
use kubewasm_runtime::{Runtime, RuntimeConfig};
use kubewasm_tests::bench::{is_real_run, median, ms, out_path, write_section};
use kubewasm_tests::registry::Registry;
use kubewasm_tests::{in_process_cluster, test_plugin};
use serde_json::json;
use tokio::sync::mpsc;

/// `component` with a custom section holding `nonce` appended: the same
/// code under a new digest, so the host must compile it (a new version).
fn new_version(component: &[u8], nonce: u64) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = u8::try_from(n & 0x7f).unwrap_or(0);
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"kubewasm-bench";
    let payload = nonce.to_le_bytes();
    let mut content = Vec::new();
    leb128(name.len(), &mut content);
    content.extend_from_slice(name);
    content.extend_from_slice(&payload);
    let mut out = component.to_vec();
    out.push(0);
    leb128(content.len(), &mut out);
    out.extend_from_slice(&content);
    out
}

/// Writes `bytes` beside `path` and renames it over `path`, as an operator
/// should; the instant of the rename.
fn put(path: &Path, bytes: &[u8]) -> anyhow::Result<Instant> {
    let next = path.with_extension("next");
    std::fs::write(&next, bytes)?;
    let at = Instant::now();
    std::fs::rename(&next, path)?;
    Ok(at)
}

/// How long the optimized code of a new version is given to compile and be
/// swapped in before the next round.
const OPTIMIZE: Duration = Duration::from_secs(10);

/// Forgets the events seen so far.
fn drain(events: &mut mpsc::UnboundedReceiver<(String, String, Instant)>) {
    while events.try_recv().is_ok() {}
}

/// Waits for an event whose reason is `reason` and note `note`; the instant
/// it was seen.
async fn seen(
    events: &mut mpsc::UnboundedReceiver<(String, String, Instant)>,
    reason: &str,
    note: &str,
) -> anyhow::Result<Instant> {
    let deadline = tokio::time::sleep(Duration::from_secs(120));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            () = &mut deadline => anyhow::bail!("no {reason} event within 120 s"),
            got = events.recv() => {
                let (r, n, at) = got.ok_or_else(|| anyhow::anyhow!("event stream ended"))?;
                if r == reason && n == note {
                    return Ok(at);
                }
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let real = is_real_run();
    let (rounds, compiles) = if real { (10, 3) } else { (2, 1) };
    let (_server, client) =
        in_process_cluster(kubewasm_apiserver::store::Store::new(100_000)).await?;
    let work = tempfile::tempdir()?;
    let plugins = work.path().join("plugins");
    std::fs::create_dir_all(&plugins)?;
    let registry = Registry::start();
    let access = Access {
        plain_http: true,
        ..Access::default()
    };
    // A compiled cache of its own: every new version is compiled here,
    // first by the baseline compiler, as `kubewasm run` does.
    let runtime = Runtime::new(
        RuntimeConfig::default()
            .cache_dir(work.path().join("compiled"))
            .baseline(true),
    )?;
    let options = HostOptions {
        plugins: plugins.clone(),
        metrics_addr: "127.0.0.1:0".parse()?,
        metrics_tls: None,
        trust_declarations: true,
        workers: 8,
        shutdown_grace: Duration::from_secs(5),
        leader_election: None,
        sharding: None,
        initial_list: InitialList::Streaming,
        artifacts: Artifacts::new(PrivateDir::open(work.path())?, access.clone()),
        resources: kubewasm_engine::plugin_resource::ResourceOptions::default(),
        shares: Default::default(),
        required_signatures: Default::default(),
        resync: kubewasm_engine::controller::DEFAULT_RESYNC,
        remembered: kubewasm_engine::controller::DEFAULT_REMEMBERED,
        record: None,
    };

    // Every event the plugins write, with the instant it was seen.
    let (tx, mut events) = mpsc::unbounded_channel();
    let watched = watcher(
        Api::<Event>::namespaced(client.clone(), "default"),
        watcher::Config::default(),
    )
    .applied_objects();
    tokio::spawn(async move {
        let mut watched = std::pin::pin!(watched);
        while let Some(Ok(event)) = watched.next().await {
            let reason = event.reason.unwrap_or_default();
            let note = event.note.unwrap_or_default();
            if tx.send((reason, note, Instant::now())).is_err() {
                break;
            }
        }
    });
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "probe"}}))?,
        )
        .await?;

    let misbehave = std::fs::read(test_plugin("misbehave"))?;
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
    let component = plugins.join("hot.wasm");
    let config = plugins.join("hot.config.yaml");
    std::fs::write(&config, "mode: language\n")?;
    put(&component, &misbehave)?;
    seen(&mut events, "Language", "rust").await?;

    // A configuration change: a swap with the component's code cached.
    let mut cached = Vec::new();
    for round in 0..rounds {
        let (mode, reason) = if round % 2 == 0 {
            ("count", "Counted")
        } else {
            ("language", "Language")
        };
        let note = if mode == "count" { "1" } else { "rust" };
        drain(&mut events);
        let at = put(&config, format!("mode: {mode}\n").as_bytes())?;
        cached.push(seen(&mut events, reason, note).await? - at);
    }
    // A new version of the component, compiled on the swap. The
    // configuration stays `count`: after the rename only the new version
    // reconciles (the probe is not changing), its first call on a new
    // instance says 1.
    if rounds % 2 == 0 {
        put(&config, b"mode: count\n")?;
        seen(&mut events, "Counted", "1").await?;
    }
    let mut compiled = Vec::new();
    for round in 0..compiles {
        let bytes = new_version(&misbehave, round);
        drain(&mut events);
        let at = put(&component, &bytes)?;
        compiled.push(seen(&mut events, "Counted", "1").await? - at);
        // Its optimized code compiles in the background and is swapped in:
        // let it finish before the next round.
        if real {
            tokio::time::sleep(OPTIMIZE).await;
        }
    }

    // Pulled: a new artifact in the registry, named by `pulled.oci`.
    let bytes = new_version(&misbehave, u64::MAX);
    // `push` compiles with the optimizing compiler, as `kubewasm push` does.
    let pusher = Runtime::new(RuntimeConfig::default().cache_dir(work.path().join("compiled")))?;
    let interfaces = pusher.interfaces(&bytes)?;
    let reference = format!("oci://{}/bench/misbehave:pulled", registry.addr);
    let parsed = kubewasm_engine::oci::parse_reference(&reference)?;
    let component = kubewasm_engine::oci::Component {
        bytes: &bytes,
        interfaces: &interfaces,
    };
    kubewasm_engine::oci::push(&component, &parsed, &access).await?;
    // `interfaces` compiled it (as `push` does) into the cache the host
    // reads: the figure is the pull, a cached load and the first reconcile.
    // The pulled plugin says its language; `hot` counts.
    std::fs::write(plugins.join("pulled.config.yaml"), "mode: language\n")?;
    let text = format!("{reference}\n");
    drain(&mut events);
    let at = put(&plugins.join("pulled.oci"), text.as_bytes())?;
    let pulled = seen(&mut events, "Language", "rust").await? - at;

    let _ = stop.send(());
    host.await??;
    let (cached_median, compiled_median) = (median(cached.clone()), median(compiled.clone()));
    eprintln!(
        "hot swap: {} with the code cached ({rounds} rounds), {} with a compile ({compiles}); \
         pull to first reconcile {}",
        ms(cached_median),
        ms(compiled_median),
        ms(pulled)
    );
    if let Some(path) = out_path().filter(|_| real) {
        let body = format!(
            "The host's own loop (`daemon::run`, its plugin directory watched with inotify) \
             against the embedded API server in the same process; the `misbehave` test plugin \
             (Rust) over one ConfigMap. Each figure runs from the `rename` of the changed file \
             to the moment a watch on Events sees the event the new version's first reconcile \
             wrote (so it includes the apply and the watch's delivery).\n\n\
             | change | to first reconcile on the new version |\n|---|---|\n\
             | configuration changed, code precompiled and cached (median of {rounds}) | {} (goal: under 100 ms) |\n\
             | new component, compiled on the swap by the baseline compiler (median of {compiles}) | {} (goal: under 1 s) |\n\
             | `NAME.oci` written: pulled from a registry on loopback, verified, loaded (compiled code cached) | {} |\n\n\
             A component the precompiled cache does not hold runs at once on the baseline \
             compiler's code (Winch: about 0.2 s for this 1.1 MB component, where Cranelift \
             takes 4 to 5 s on two cores), and its optimized code, compiled in the background and \
             cached, is swapped in when ready (`kubewasm_plugin_loads_total{{result=\"optimized\"}}`); \
             `--no-baseline-compiler` waits for Cranelift instead.\n",
            ms(cached_median),
            ms(compiled_median),
            ms(pulled),
        );
        write_section(
            &path,
            "lifecycle",
            "Plugin lifecycle: hot swap and pull latencies",
            "make bench",
            &body,
        )?;
    }
    drop(registry);
    Ok(())
}
