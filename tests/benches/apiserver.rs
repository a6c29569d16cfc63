//! The embedded API server under load, through the kube-rs client over real
//! loopback sockets: write throughput, list times, watch fan-out and memory
//! for 10,000 ConfigMaps and 10,000 custom resources.
//!
//! Goal (issue `apiserver`): never the bottleneck of the controller
//! benchmarks: at least 5,000 writes/s, and 50 watchers fed every event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{
    ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kubewasm_apiserver::store::Store;
use kubewasm_tests::bench::{is_real_run, ms, out_path, write_section};
use kubewasm_tests::in_process_cluster;
use serde_json::json;

/// Resident memory of this process, from /proc.
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

/// Creates `n` objects with `concurrency` requests in flight; returns the rate.
async fn create_many<F, Fut>(n: usize, concurrency: usize, create: F) -> anyhow::Result<f64>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    futures_util::stream::iter(0..n)
        .map(create)
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

async fn timed<T>(
    f: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(T, Duration)> {
    let started = Instant::now();
    let value = f.await?;
    Ok((value, started.elapsed()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let real = is_real_run();
    let (objects, watchers, updates) = if real {
        (10_000, 50, 2_000)
    } else {
        (50, 3, 20)
    };
    // Durable: every acknowledged write is fsynced (group commit).
    let data = tempfile::tempdir()?;
    let (server, client) = in_process_cluster(Store::open(data.path(), 100_000)?).await?;
    let rss_start = rss_mib();

    // ConfigMaps.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm_rate = create_many(objects, 32, |i| {
        let cms = cms.clone();
        async move {
            let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:05}"), "labels": {"shard": (i % 10).to_string()}},
                "data": {"key": "x".repeat(200)}}))?;
            cms.create(&PostParams::default(), &cm).await?;
            Ok(())
        }
    })
    .await?;
    let rss_cms = rss_mib();
    let (all, list_full) =
        timed(async { Ok(cms.list(&ListParams::default()).await?.items.len()) }).await?;
    assert_eq!(all, objects);
    let (paged, list_paged) = timed(async {
        let mut count = 0;
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(500);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = cms.list(&params).await?;
            count += page.items.len();
            token = page.metadata.continue_;
            if token.is_none() {
                break;
            }
        }
        Ok(count)
    })
    .await?;
    assert_eq!(paged, objects);
    let (selected, list_selected) = timed(async {
        Ok(cms
            .list(&ListParams::default().labels("shard=3"))
            .await?
            .items
            .len())
    })
    .await?;
    assert_eq!(selected, objects / 10);

    // Custom resources.
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "myapps.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "myapps", "kind": "MyApp"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    )?;
    crds.create(&PostParams::default(), &crd).await?;
    let myapp = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("example.com", "v1", "MyApp"),
        "myapps",
    );
    let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &myapp);
    let cr_rate = create_many(objects, 32, |i| {
        let apps = apps.clone();
        let myapp = myapp.clone();
        async move {
            let mut app = DynamicObject::new(&format!("app-{i:05}"), &myapp);
            app.data = json!({"spec": {"replicas": 2, "image": "nginx", "port": 80}});
            apps.create(&PostParams::default(), &app).await?;
            Ok(())
        }
    })
    .await?;
    let rss_crs = rss_mib();
    let (cr_count, list_crs) =
        timed(async { Ok(apps.list(&ListParams::default()).await?.items.len()) }).await?;
    assert_eq!(cr_count, objects);

    // Watch fan-out: every watcher must see every update, in order, once.
    let rv = cms
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut streams = Vec::new();
    for _ in 0..watchers {
        streams.push(
            cms.watch(&WatchParams::default().timeout(290), &rv)
                .await?
                .boxed(),
        );
    }
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|mut stream| {
            let received = Arc::clone(&received);
            tokio::spawn(async move {
                let mut count = 0usize;
                let mut last = 0u64;
                while count < updates {
                    match stream.try_next().await? {
                        Some(WatchEvent::Modified(cm)) => {
                            let rv: u64 =
                                cm.metadata.resource_version.unwrap_or_default().parse()?;
                            anyhow::ensure!(rv > last, "out of order: {rv} after {last}");
                            last = rv;
                            count += 1;
                        }
                        Some(WatchEvent::Bookmark(_)) => {}
                        other => anyhow::bail!("unexpected watch event {other:?}"),
                    }
                }
                received.fetch_add(count, std::sync::atomic::Ordering::Relaxed);
                anyhow::Ok(())
            })
        })
        .collect();
    let patch_rate = create_many(updates, 32, |i| {
        let cms = cms.clone();
        async move {
            let name = format!("cm-{:05}", i % objects);
            cms.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"n": i.to_string()}})),
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    for reader in readers {
        reader.await??;
    }
    let fan_out = started.elapsed();
    let delivered = received.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        delivered,
        watchers * updates,
        "every watcher saw every event"
    );

    let report = format!(
        "In-process server with a `--data-dir` store (every write acknowledged once fsynced, commits grouped), kube-rs \
         client over loopback HTTP, 32 requests in flight, 2 worker threads shared by client and server. {objects} \
         ConfigMaps (~300 B each) and {objects} custom resources.\n\n\
         | measure | result |\n|---|---|\n\
         | create ConfigMaps | {cm_rate:.0} writes/s |\n\
         | create custom resources | {cr_rate:.0} writes/s |\n\
         | merge-patch updates while {watchers} watchers stream | {patch_rate:.0} writes/s |\n\
         | list {objects} ConfigMaps, one request | {} |\n\
         | list {objects} ConfigMaps, pages of 500 | {} ({:.2}x one request) |\n\
         | list with a label selector ({selected} of {objects}) | {} |\n\
         | list {objects} custom resources | {} |\n\
         | watch fan-out: {updates} updates to {watchers} watchers | {delivered} events delivered, none lost or out of order, in {} ({:.0} events/s) |\n\
         | resident memory: start, +ConfigMaps, +custom resources | {rss_start:.0} MiB, {rss_cms:.0} MiB, {rss_crs:.0} MiB (whole process, client included) |\n\n\
         Goals: at least 5,000 durable writes/s, fan-out to 50 watchers without loss, a paged list within 2x \
         of one request.\n",
        ms(list_full),
        ms(list_paged),
        list_paged.as_secs_f64() / list_full.as_secs_f64(),
        ms(list_selected),
        ms(list_crs),
        ms(fan_out),
        delivered as f64 / fan_out.as_secs_f64(),
    );
    println!("{report}");
    if let Some(path) = out_path() {
        write_section(
            &path,
            "apiserver",
            "Embedded API server: throughput, fan-out, memory",
            "make bench",
            &report,
        )?;
    }
    drop(server);
    Ok(())
}
