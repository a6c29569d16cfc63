//! Watches that lose nothing. Many watchers of one custom resource, each
//! listing again on `410 Gone` as its client library does (kube-runtime's
//! watcher with its paged, cached-page and streaming initial lists, a slow
//! one, one whose watches the server ends every second, and client-go's
//! reflector loop written out: a consistent list, then a watch from its
//! resourceVersion, resumed from the last one seen), through a burst of
//! creates, status writes and deletes longer than the embedded server's
//! history. Each ends holding exactly what the server holds: every name at
//! its resourceVersion. On both servers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt, stream};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::{Apiserver, TestCluster, example_file, scale};
use serde_json::json;
use tokio::sync::Notify;

/// Name → resourceVersion: what a watcher holds, and what the server does.
type Contents = BTreeMap<String, String>;

fn contents<'a>(objects: impl IntoIterator<Item = &'a DynamicObject>) -> Contents {
    objects
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// One watcher under test: what it holds now, and how often it listed.
struct Watching {
    name: &'static str,
    holds: Box<dyn Fn() -> Contents + Send>,
    lists: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

/// A kube-runtime watcher feeding a reflector store, as a controller's, with
/// `delay` after each event (a consumer slower than the writers).
fn runtime_watcher(
    name: &'static str,
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    config: watcher::Config,
    delay: Duration,
) -> Watching {
    let writer = Writer::new(resource.clone());
    let reader = writer.as_reader();
    let lists = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&lists);
    let events = watcher(api.clone(), config)
        .default_backoff()
        .inspect_ok(move |event| {
            if matches!(event, watcher::Event::Init) {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        })
        .then(move |event| async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            event
        });
    let task = tokio::spawn(reflector::reflector(writer, events).for_each(|_| async {}));
    Watching {
        name,
        holds: Box::new(move || contents(reader.state().iter().map(AsRef::as_ref))),
        lists,
        task,
    }
}

/// client-go's reflector, written out: a consistent list, then (once
/// `resume` fires, after the burst: a client that was away) a watch from the
/// list's resourceVersion, resumed from the last one seen when it ends, and
/// a new list on `410 Gone`.
fn reflector_loop(api: &Api<DynamicObject>, resume: Arc<Notify>) -> Watching {
    let held = Arc::new(Mutex::new(Contents::new()));
    let lists = Arc::new(AtomicUsize::new(0));
    let (api, into, counted) = (api.clone(), Arc::clone(&held), Arc::clone(&lists));
    let task = tokio::spawn(async move {
        let list = |api: Api<DynamicObject>| async move {
            loop {
                match api.list(&ListParams::default()).await {
                    Ok(list) => return list,
                    Err(e) => eprintln!("reflector: list failed, again in 1 s: {e}"),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        };
        let first = list(api.clone()).await;
        counted.fetch_add(1, Ordering::Relaxed);
        let mut rv = first.metadata.resource_version.clone().unwrap_or_default();
        *into.lock().expect("held") = contents(&first.items);
        resume.notified().await;
        loop {
            let params = WatchParams::default().timeout(30);
            let gone = match api.watch(&params, &rv).await {
                Ok(events) => follow(events.boxed(), &into, &mut rv).await,
                Err(kube::Error::Api(status)) if status.code == 410 => true,
                Err(e) => {
                    eprintln!("reflector: watch from {rv} failed, again in 1 s: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    false
                }
            };
            if gone {
                let again = list(api.clone()).await;
                counted.fetch_add(1, Ordering::Relaxed);
                rv = again.metadata.resource_version.clone().unwrap_or_default();
                *into.lock().expect("held") = contents(&again.items);
            }
        }
    });
    Watching {
        name: "client-go reflector, away during the burst",
        holds: Box::new(move || held.lock().expect("held").clone()),
        lists,
        task,
    }
}

/// Applies a watch's events to `held` until it ends: whether it ended on
/// `410 Gone` (the reflector lists again) rather than by its timeout or a
/// broken connection (the reflector watches again from `rv`).
async fn follow(
    mut events: futures_util::stream::BoxStream<'_, kube::Result<WatchEvent<DynamicObject>>>,
    held: &Mutex<Contents>,
    rv: &mut String,
) -> bool {
    while let Some(event) = events.next().await {
        let mut held = held.lock().expect("held");
        match event {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                if let Some(at) = o.metadata.resource_version.clone() {
                    *rv = at;
                }
                held.insert(o.metadata.name.unwrap_or_default(), rv.clone());
            }
            Ok(WatchEvent::Deleted(o)) => {
                if let Some(at) = o.metadata.resource_version.clone() {
                    *rv = at;
                }
                held.remove(&o.metadata.name.unwrap_or_default());
            }
            Ok(WatchEvent::Bookmark(b)) => *rv = b.metadata.resource_version,
            Ok(WatchEvent::Error(status)) if status.code == 410 => return true,
            Ok(WatchEvent::Error(status)) => eprintln!("reflector: {status:?}"),
            Err(e) => {
                eprintln!("reflector: the watch broke, resumed from {rv}: {e}");
                return false;
            }
        }
    }
    false
}

/// What `held` lacks, holds extra, or holds at another resourceVersion.
fn difference(held: &Contents, server: &Contents) -> String {
    let missing: Vec<_> = server.keys().filter(|k| !held.contains_key(*k)).collect();
    let extra: Vec<_> = held.keys().filter(|k| !server.contains_key(*k)).collect();
    let stale: Vec<_> = server
        .iter()
        .filter_map(|(k, rv)| held.get(k).filter(|h| *h != rv).map(|h| (k, h, rv)))
        .collect();
    format!(
        "{} missing (first {:?}), {} extra (first {:?}), {} at an older resourceVersion (first \
         {:?})",
        missing.len(),
        missing.iter().take(5).collect::<Vec<_>>(),
        extra.len(),
        extra.iter().take(5).collect::<Vec<_>>(),
        stale.len(),
        stale.iter().take(5).collect::<Vec<_>>()
    )
}

/// A fresh server started with `flags`, serving the example's MyApps: it, a
/// client, the MyApps of `default` and their type.
async fn serving_myapps(
    flags: &[&str],
) -> anyhow::Result<(Apiserver, kube::Client, Api<DynamicObject>, ApiResource)> {
    let server = Apiserver::start_with(flags);
    let crd = example_file("myapp", "crd.yaml");
    server.ok(&["apply", "-f", &crd.to_string_lossy()]);
    server.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/myapps.example.com",
    ]);
    let client = server.client().await?;
    let (apps, resource) = kubewasm_tests::peers::myapps(&client);
    Ok((server, client, apps, resource))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watcher_should_end_with_exactly_the_servers_contents() -> anyhow::Result<()> {
    let (_server, _, api, resource) = serving_myapps(&[]).await?;

    // Writes: each MyApp created, its status written `writes` times, one in
    // four deleted; more events than the embedded server keeps, so that a
    // watch resumed from before the burst is refused there (410).
    let (apps, writes) = (scale(2_400, 2_000), 4);
    let events = apps * (1 + writes) + apps / 4;
    assert!(
        events > kubewasm_apiserver::store::DEFAULT_HISTORY,
        "{events} events: no more than the embedded server's history"
    );

    let resume = Arc::new(Notify::new());
    let fast = Duration::ZERO;
    let watchers = [
        runtime_watcher(
            "kube-runtime, defaults",
            &api,
            &resource,
            watcher::Config::default(),
            fast,
        ),
        runtime_watcher(
            "kube-runtime, cached pages of 50",
            &api,
            &resource,
            watcher::Config::default().any_semantic().page_size(50),
            fast,
        ),
        runtime_watcher(
            "kube-runtime, streaming list",
            &api,
            &resource,
            watcher::Config::default().streaming_lists(),
            fast,
        ),
        runtime_watcher(
            "kube-runtime, a watch ended every second",
            &api,
            &resource,
            watcher::Config::default().timeout(1),
            fast,
        ),
        runtime_watcher(
            "kube-runtime, slow (1 ms an event)",
            &api,
            &resource,
            watcher::Config::default(),
            Duration::from_millis(1),
        ),
        reflector_loop(&api, Arc::clone(&resume)),
    ];

    // The away reflector listed before the burst: its watch, resumed after
    // it, starts below the embedded server's history.
    let away = &watchers[watchers.len() - 1];
    while away.lists.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let app = |i: usize| -> anyhow::Result<DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "MyApp",
            "metadata": {"name": format!("app-{i:05}")},
            "spec": {"image": "nginx", "port": 80}
        }))?)
    };
    let apps_of = |i: usize| (i, api.clone());
    stream::iter((0..apps).map(apps_of))
        .map(|(i, api)| async move {
            api.create(&PostParams::default(), &app(i)?).await?;
            for available in 1..=writes {
                let status = json!({"status": {"availableReplicas": available}});
                api.patch_status(
                    &format!("app-{i:05}"),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await?;
            }
            if i % 4 == 0 {
                api.delete(&format!("app-{i:05}"), &DeleteParams::default())
                    .await?;
            }
            anyhow::Ok(())
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    eprintln!("{events} writes in {:?}", started.elapsed());
    resume.notify_one();

    let server_holds = contents(&api.list(&ListParams::default()).await?.items);
    assert_eq!(server_holds.len(), apps - apps.div_ceil(4));
    let deadline = Instant::now() + Duration::from_secs(scale(120, 60) as u64);
    loop {
        let behind: Vec<String> = watchers
            .iter()
            .filter_map(|w| {
                let held = (w.holds)();
                (held != server_holds)
                    .then(|| format!("{}: {}", w.name, difference(&held, &server_holds)))
            })
            .collect();
        if behind.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "watchers still apart from the server's {} objects {:?} after the burst:\n{}",
            server_holds.len(),
            started.elapsed(),
            behind.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for w in &watchers {
        eprintln!(
            "{}: listed {} times",
            w.name,
            w.lists.load(Ordering::Relaxed)
        );
        w.task.abort();
    }
    if TestCluster::chosen() == TestCluster::Embedded {
        // The resumed watch started below the server's history: refused,
        // listed again, and still nothing lost.
        assert!(
            away.lists.load(Ordering::Relaxed) >= 2,
            "{} never listed again",
            away.name
        );
    }
    Ok(())
}

/// The names of the MyApps whose first condition is not `Available` at
/// their generation: those a controller has yet to converge.
fn unconverged(apps: &[DynamicObject]) -> Vec<String> {
    apps.iter()
        .filter(|app| {
            let condition = app.data.pointer("/status/conditions/0");
            !condition.is_some_and(|c| {
                c["type"] == "Available"
                    && c["status"] == "True"
                    && c["observedGeneration"].as_i64() == app.metadata.generation
            })
        })
        .filter_map(|app| app.metadata.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_runtime_controller_should_converge_a_burst_it_stalled_in() -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    use kubewasm_tests::peers::{Driver, create_myapps};

    // The MyApp operator as a kube-runtime user writes it (its MyApp watch
    // and two owned ones, defaults), over workloads that run: every MyApp's
    // Deployment, ReplicaSet and Pods write as a cluster's would.
    let (server, client, apps, _) = serving_myapps(&["--simulate-workloads"]).await?;
    let scratch = tempfile::tempdir()?;
    let log = scratch.path().join("kube-runtime.log");
    let peer = Driver::KubeRuntime.spawn(&server.kubeconfig, "debug", scratch.path(), &log)?;

    // The burst, and the controller stalled for a while in the middle of it
    // (a pause of its process: its watches stop reading while the server
    // goes on writing).
    // A real cluster's kwok Pods take eight minutes for 2,000 MyApps.
    let n = match TestCluster::chosen() {
        TestCluster::Embedded => scale(2_000, 500),
        TestCluster::Real => scale(1_000, 500),
    };
    let started = Instant::now();
    create_myapps(&client, n, 2).await?;
    eprintln!("{n} MyApps created in {:?}", started.elapsed());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let stall_at = n / 2;
    while deployments.list(&ListParams::default()).await?.items.len() < stall_at {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "fewer than {stall_at} Deployments after 300 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pid = peer.pid().to_string();
    kubewasm_tests::run_ok("kill", &["-STOP", &pid]);
    tokio::time::sleep(Duration::from_secs(15)).await;
    kubewasm_tests::run_ok("kill", &["-CONT", &pid]);

    // The operator requeues nothing (`Action::await_change()`): a MyApp
    // whose event was lost stays unconverged for ever, while a busy machine
    // only converges them slower. So the wait ends on the state (all
    // converged) or on a loss: no MyApp converging for `STALLED` while
    // some are left.
    const STALLED: Duration = Duration::from_secs(120);
    let (mut fewest, mut since) = (usize::MAX, Instant::now());
    loop {
        let left = unconverged(&apps.list(&ListParams::default()).await?.items);
        if left.is_empty() {
            break;
        }
        if left.len() < fewest {
            (fewest, since) = (left.len(), Instant::now());
        }
        assert!(
            since.elapsed() < STALLED,
            "{} of {n} MyApps not converged, none for {STALLED:?} ({:?} after the burst; first \
             {:?}); the controller's log:\n{}",
            left.len(),
            started.elapsed(),
            &left[..left.len().min(10)],
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("{n} MyApps converged in {:?}", started.elapsed());
    Ok(())
}
