//! The dev cluster's workload simulation at an operator's scale: 1,000
//! Deployments of 3 replicas created through kube-rs against the binary
//! users run (`kubewasm apiserver --simulate-workloads`), timed until every
//! Deployment reports its 3 replicas available (3,000 Pods Running and
//! Ready, 1,000 ReplicaSets); the server's resident memory beside a server
//! without the simulation holding the same Deployments (the objects'
//! cost, measured in the same run).
//!
//! Goal (issue `devcluster`): the simulation costs little: 1,000
//! Deployments converged well within a minute, and memory that of the
//! objects and of the store's history of changes (the controllers keep no
//! copy of their own).

use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{ListParams, PostParams};
use kubewasm_tests::Apiserver;
use kubewasm_tests::bench::{is_real_run, ms, out_path, write_section};
use serde_json::json;

/// Creates `count` Deployments of 3 replicas, 32 requests in flight.
async fn create(server: &Apiserver, count: usize) -> anyhow::Result<Duration> {
    let deployments: Api<Deployment> = Api::default_namespaced(server.client().await?);
    let started = Instant::now();
    futures_util::stream::iter(0..count)
        .map(|i| {
            let deployments = deployments.clone();
            async move {
                let name = format!("web-{i:04}");
                let deployment: Deployment = serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                             "template": {"metadata": {"labels": {"app": name}},
                                          "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}))?;
                deployments.create(&PostParams::default(), &deployment).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(started.elapsed())
}

/// Waits until every Deployment has 3 replicas available.
async fn converged(server: &Apiserver, count: usize, within: Duration) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::default_namespaced(server.client().await?);
    let deadline = Instant::now() + within;
    loop {
        let list = deployments.list(&ListParams::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|d| d.status.as_ref().and_then(|s| s.available_replicas) == Some(3))
            .count();
        if done == count {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{done} of {count} converged after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The store's resourceVersion: how many changes it has made.
async fn changes(server: &Apiserver) -> anyhow::Result<u64> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(server.client().await?);
    let list = namespaces
        .list_metadata(&ListParams::default().limit(1))
        .await?;
    Ok(list
        .metadata
        .resource_version
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0))
}

/// Every object of `plural`, as JSON.
fn list(server: &Apiserver, plural: &str) -> Vec<serde_json::Value> {
    let text = server.ok(&["get", plural, "-o", "json"]);
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default()
}

/// Creates copies of `items` of `kind` (without what the server assigns,
/// and without owners, so that no collector removes them), then writes
/// their status.
async fn copy(
    client: &kube::Client,
    kind: &str,
    items: &[serde_json::Value],
) -> anyhow::Result<()> {
    let (group, version, plural) = match kind {
        "Deployment" => ("apps", "v1", "deployments"),
        "ReplicaSet" => ("apps", "v1", "replicasets"),
        _ => ("", "v1", "pods"),
    };
    let resource = kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource);
    futures_util::stream::iter(items)
        .map(|item| {
            let api = api.clone();
            async move {
                let mut object = item.clone();
                if let Some(meta) = object["metadata"].as_object_mut() {
                    for assigned in [
                        "uid",
                        "resourceVersion",
                        "managedFields",
                        "ownerReferences",
                        "creationTimestamp",
                    ] {
                        meta.remove(assigned);
                    }
                }
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                api.create(&PostParams::default(), &serde_json::from_value(object)?)
                    .await?;
                let status = kube::api::Patch::Merge(json!({"status": item["status"]}));
                api.patch_status(&name, &kube::api::PatchParams::default(), &status)
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let count = if is_real_run() { 1_000 } else { 20 };
    let mib = |server: &Apiserver| server.rss_kib() as f64 / 1024.0;

    let simulated = Apiserver::start_with(&["--simulate-workloads", "--nodes", "10"]);
    let idle = mib(&simulated);
    let started = Instant::now();
    let created = create(&simulated, count).await?;
    converged(&simulated, count, Duration::from_secs(600)).await?;
    let convergence = started.elapsed();
    let simulated_mib = mib(&simulated);
    let simulated_changes = changes(&simulated).await?;
    let objects = ["Deployment", "ReplicaSet", "Pod"].map(|kind| {
        let plural = format!("{}s", kind.to_lowercase());
        (kind, list(&simulated, &plural))
    });
    let pods = objects[2]
        .1
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .count();
    drop(simulated);

    // The same objects, statuses included, written by a client into a
    // server without the simulation: what they cost there.
    let plain = Apiserver::start();
    let client = plain.client().await?;
    for (kind, items) in &objects {
        copy(&client, kind, items).await?;
    }
    let plain_mib = mib(&plain);
    let plain_changes = changes(&plain).await?;
    drop(plain);

    let report = format!(
        "`kubewasm apiserver --simulate-workloads --nodes 10` (the debug build `make test` makes), kube-rs \
         creating {count} Deployments of 3 replicas (32 requests in flight), polled until each reports 3 \
         available. Beside it in the same run, `kubewasm apiserver` without the simulation, into which a client \
         copies the converged Deployments, ReplicaSets and Pods, statuses included: the objects' own cost \
         (both stores keep the history of their last 10,000 changes, the watch cache).\n\n\
         | measure | result |\n|---|---|\n\
         | create {count} Deployments | {} |\n\
         | all converged (every Pod Running and Ready: {pods} Pods) | {} from the first create ({:.0} Pods/s) |\n\
         | server memory, simulated: idle, converged | {idle:.0} MiB, {simulated_mib:.0} MiB |\n\
         | server memory, the same objects copied in, no simulation | {plain_mib:.0} MiB |\n\
         | changes made (resourceVersion): simulated, copied | {simulated_changes}, {plain_changes} |\n\
         | simulated / copied | {:.2}x |\n\n\
         Goal: 1,000 Deployments converged well within a minute on 2 cores (each Pod takes two of the \
         kubelet's one-second steps; the rest is the controllers' and the debug build's throughput), and no \
         memory beyond the objects' and their history's: the simulated store made more changes than \
         the copy (a Pod is created, bound, started; a status follows each step), and each change kept in the \
         history holds the version before it.\n",
        ms(created),
        ms(convergence),
        pods as f64 / convergence.as_secs_f64(),
        simulated_mib / plain_mib,
    );
    println!("{report}");
    if let Some(path) = out_path() {
        write_section(
            &path,
            "devcluster",
            "Dev cluster: 1,000 Deployments converging",
            "make bench",
            &report,
        )?;
    }
    Ok(())
}
