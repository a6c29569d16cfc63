//! The MyApp operator of `plugins/myapp` as a kube-runtime user writes it:
//! the same logic (the `myapp` crate, compiled natively) in a `Controller`
//! of MyApps that owns their Deployments (through a reflector the reconcile
//! reads) and Services, applying both and the status by server-side apply
//! under its own field manager.
//!
//! It runs as kubewasm's host runs by default, so the engine bench compares
//! like with like: two reconciles at a time (kubewasm's per-plugin
//! concurrency), no client-side rate limit, no leader election. The
//! kubeconfig is `$KUBECONFIG` (or kube's usual search); it serves until
//! SIGTERM or Ctrl-C.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use myapp::MyApp;
use serde_json::json;

/// The field manager of every apply.
const FIELD_MANAGER: &str = "kube-runtime-myapp";

/// What every reconcile reads and writes with.
struct Context {
    client: Client,
    deployments: Store<Deployment>,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct Error(#[from] kube::Error);

/// Applies the MyApp's Deployment and Service and its status.
async fn reconcile(app: Arc<MyApp>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let owner = app.controller_owner_ref(&());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut deployment = myapp::desired_deployment(&app);
    deployment.metadata.owner_references = owner.clone().map(|o| vec![o]);
    Api::<Deployment>::namespaced(ctx.client.clone(), &namespace)
        .patch(&name, &params, &Patch::Apply(&deployment))
        .await?;
    let mut service = myapp::desired_service(&app);
    service.metadata.owner_references = owner.map(|o| vec![o]);
    Api::<Service>::namespaced(ctx.client.clone(), &namespace)
        .patch(&name, &params, &Patch::Apply(&service))
        .await?;
    let observed = ctx
        .deployments
        .get(&ObjectRef::new(&name).within(&namespace));
    let status = myapp::with_status(&app, observed.as_deref(), jiff::Timestamp::now());
    let body = json!({"apiVersion": "example.com/v1", "kind": "MyApp",
        "metadata": {"name": name, "namespace": namespace}, "status": status.status});
    Api::<MyApp>::namespaced(ctx.client.clone(), &namespace)
        .patch_status(&name, &params, &Patch::Apply(&body))
        .await?;
    Ok(Action::await_change())
}

/// A failed reconcile is retried after a short pause.
fn error_policy(_: Arc<MyApp>, error: &Error, _: Arc<Context>) -> Action {
    eprintln!("kube-runtime-myapp: {error}");
    Action::requeue(Duration::from_millis(100))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let client = Client::try_default().await?;
    let (deployments, writer) = reflector::store::<Deployment>();
    let deployment_events = reflector::reflector(
        writer,
        watcher(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects();
    let ctx = Arc::new(Context {
        client: client.clone(),
        deployments,
    });
    Controller::new(
        Api::<MyApp>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns_stream(deployment_events)
    .owns(Api::<Service>::all(client), watcher::Config::default())
    .with_config(Config::default().concurrency(2))
    // Ctrl-C or SIGTERM: reconciles in flight finish first.
    .shutdown_on_signal()
    .run(reconcile, error_policy, ctx)
    .for_each(|_| async {})
    .await;
    Ok(())
}
