//! The **simulated cluster**: the built-in controllers a controller
//! author relies on and a kubelet on simulated Nodes, in the manner of
//! kwok, so that `kubewasm dev` runs what operators manage. No container
//! runs anywhere; every object goes through the states a real cluster
//! reports.
//!
//! | Controller | What it does |
//! |---|---|
//! | [`kubelet`] | schedules Pods to Nodes, runs them (Pending → Running → Ready; Jobs' Pods → Succeeded), failure on demand, graceful deletion |
//! | [`replicaset`] | ReplicaSet → Pods |
//! | [`deployment`] | Deployment → ReplicaSets: rolling update, revisions, rollback, status |
//! | [`statefulset`] | StatefulSet → ordered Pods `<sts>-N` and their PersistentVolumeClaims |
//! | [`daemonset`] | DaemonSet → one Pod per schedulable Node |
//! | [`job`] | Job → Pods to `completions` at `parallelism`, `Indexed`, `backoffLimit`, `Complete`/`Failed` |
//! | [`cronjob`] | CronJob → Jobs on schedule, concurrency policy, history limits |
//! | [`endpointslice`] | Service → EndpointSlice of its selected Pods, following their readiness |
//! | [`volume`] | PersistentVolumeClaim → a bound PersistentVolume of the default StorageClass |
//! | [`disruption`] | PodDisruptionBudget → its status (healthy, expected and allowed counts, `DisruptionAllowed`) |
//! | [`quota`] | ResourceQuota → its status (`hard`, and `used` of what is counted in objects); not enforced |
//! | [`autoscaler`] | HorizontalPodAutoscaler → its conditions with no metrics API served; a target outside its bounds scaled to them |
//! | [`aggregation`] | aggregated ClusterRoles (`admin`, `edit`, `view`) → their rules |
//!
//! (Services get their ClusterIP from the API itself, at creation, as on a
//! real server.)
//!
//! Each is a [`reconcile::Reconciler`] run by [`reconcile::run`]: a watch
//! of the store, a deduplicating queue, one reconcile at a time. They read
//! the store and write through the API as clients ([`client`]): what they
//! write passes every rule a user's write does.

use std::time::Duration;

use tokio::task::JoinHandle;

use crate::http::api::Api;

pub mod aggregation;
pub mod autoscaler;
pub mod client;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpointslice;
pub mod job;
pub mod kubelet;
pub mod pods;
pub mod quota;
pub mod reconcile;
pub mod replicaset;
pub mod statefulset;
pub mod volume;

pub use reconcile::controller_of;

/// The running simulation; dropping it stops every controller.
#[derive(Debug)]
pub struct Simulation {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Simulation {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The field manager of every simulated controller: a real
/// kube-controller-manager's controllers send no `fieldManager`, so each
/// write is recorded under their User-Agent's first word.
const CONTROLLER_MANAGER: &str = "kube-controller-manager";

/// The workload simulation's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workloads {
    /// How many Nodes Pods are scheduled to (1 to 100).
    pub nodes: usize,
    /// How long each step of a Pod's life takes.
    pub delay: Duration,
}

impl Simulation {
    /// Starts, over `api`'s store, the ClusterRole aggregation (always: it
    /// touches no workload) and, when asked, the workload controllers and
    /// the kubelet of `workloads.nodes` Nodes.
    pub fn start(api: &Api, workloads: Option<Workloads>) -> Self {
        let client = |manager| client::Client::new(api.clone(), manager);
        let store = api.store().clone();
        let mut tasks = Vec::new();
        macro_rules! run {
            ($controller:expr) => {
                tasks.push(tokio::spawn(reconcile::run($controller, store.clone())))
            };
        }
        run!(aggregation::Aggregation::new(client(CONTROLLER_MANAGER)));
        let Some(Workloads { nodes, delay }) = workloads else {
            return Self { tasks };
        };
        let registrar = client("kubelet");
        tasks.push(tokio::spawn(async move {
            for node in kubelet::nodes(nodes).into_iter().skip(1) {
                register(&registrar, node).await;
            }
            let class = volume::default_class();
            match registrar
                .create(client::kinds::STORAGECLASS, None, class)
                .await
            {
                Err(error) if error.code != 409 => {
                    tracing::warn!(%error, "could not create the default StorageClass");
                }
                _ => {}
            }
        }));
        run!(kubelet::Kubelet::new(client("kubelet"), delay));
        run!(replicaset::ReplicaSets::new(client(CONTROLLER_MANAGER)));
        run!(deployment::Deployments::new(client(CONTROLLER_MANAGER)));
        run!(statefulset::StatefulSets::new(client(CONTROLLER_MANAGER)));
        run!(daemonset::DaemonSets::new(client(CONTROLLER_MANAGER)));
        run!(job::Jobs::new(client(CONTROLLER_MANAGER)));
        run!(cronjob::CronJobs::new(client(CONTROLLER_MANAGER)));
        run!(endpointslice::EndpointSlices::new(client(
            CONTROLLER_MANAGER
        )));
        run!(volume::Volumes::new(client(CONTROLLER_MANAGER)));
        run!(volume::Unclaimed::new(client(CONTROLLER_MANAGER)));
        run!(volume::ClaimProtection::new(client(CONTROLLER_MANAGER)));
        run!(volume::VolumeProtection::new(client(CONTROLLER_MANAGER)));
        run!(disruption::Disruption::new(client(CONTROLLER_MANAGER)));
        run!(quota::Quotas::new(client(CONTROLLER_MANAGER)));
        run!(autoscaler::Autoscalers::new(client(CONTROLLER_MANAGER)));
        Self { tasks }
    }
}

/// Registers a simulated Node (kept if it exists) and reports it Ready.
async fn register(client: &client::Client, mut node: serde_json::Value) {
    let name = crate::objects::text_at(&node, "/metadata/name").to_owned();
    let status = serde_json::json!({"status": node["status"].take()});
    match client.create(client::kinds::NODE, None, node).await {
        Err(error) if error.code != 409 => {
            tracing::warn!(%error, "could not register a simulated node");
            return;
        }
        _ => {}
    }
    if let Err(error) = client
        .patch(client::kinds::NODE, None, &name, Some("status"), &status)
        .await
    {
        tracing::warn!(%error, "could not report a simulated node ready");
    }
}
