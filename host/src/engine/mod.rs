//! The controller engine: the loop around the plugins.
//!
//! ```text
//! watch ─▶ informer store ─▶ handlers ─▶ work queue (per plugin) ─▶ worker
//!              ▲                                                     │ step::run (blocking thread)
//!              └───────────── cache reads ◀──────── plugin ◀─────────┤
//!                                                   applier ◀────────┘ ─▶ API server
//! ```
//!
//! Data flows one way: a plugin reads only the informer stores it
//! subscribed to (through the runtime's read rules) and writes only through
//! the [`applier::Applier`], after planning checked every action against
//! its grants.
//!
//! - [`informer`]: shared, reference-counted informers and their stores;
//! - [`queue`]: a plugin's work queue (deduplication, per-key backoff,
//!   priorities, requeue-after);
//! - [`controller`]: one plugin as a controller (mapping, workers, resync);
//! - [`applier`]: the writes;
//! - [`discovery`]: the cluster's types, for the REST mapper;
//! - [`leader`]: leader election with a Lease (workers wait for it, caches
//!   do not);
//! - [`metrics`] and [`serve`]: `/metrics`, `/healthz`, `/readyz`.

pub mod applier;
pub mod controller;
pub mod discovery;
pub mod informer;
pub mod leader;
pub mod metrics;
pub mod queue;
pub mod serve;

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::runtime::Plugin;
use controller::{Controller, Settings, Shared};

/// Every plugin of the host, run as controllers over shared informers.
pub struct Engine {
    shared: Shared,
    controllers: Vec<Controller>,
}

impl Engine {
    /// An engine with no plugin yet, talking to the cluster through
    /// `client`, running at most `workers` steps at once host-wide, and
    /// reconciling only while `leading` says so (informers run regardless).
    pub fn new(
        client: kube::Client,
        workers: usize,
        leading: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            shared: Shared {
                informers: informer::Informers::new(client.clone()),
                applier: applier::Applier::new(client),
                permits: Arc::new(Semaphore::new(workers.max(1))),
                metrics: Arc::default(),
                leading,
            },
            controllers: Vec::new(),
        }
    }

    /// An engine whose informers get their lists as `initial_list` says;
    /// set before the first plugin starts.
    #[must_use]
    pub fn with_initial_list(mut self, initial_list: informer::InitialList) -> Self {
        self.shared.informers = self.shared.informers.with_initial_list(initial_list);
        self
    }

    /// Starts `plugin` as a controller. Must be called within a tokio
    /// runtime.
    pub fn start(&mut self, plugin: Arc<Plugin>, settings: Settings) {
        self.controllers
            .push(Controller::start(plugin, settings, &self.shared));
    }

    /// Stops and removes the plugin called `name`, waiting for its
    /// in-flight steps; its informers are released unless another plugin
    /// reads them. Whether it was running.
    pub async fn stop(&mut self, name: &str) -> bool {
        let Some(index) = self.controllers.iter().position(|c| c.name() == name) else {
            return false;
        };
        self.controllers.swap_remove(index).shutdown().await;
        true
    }

    /// Whether every plugin's informers have listed once.
    pub fn ready(&self) -> bool {
        self.controllers.iter().all(Controller::synced)
    }

    /// Waits until every plugin's informers have listed once.
    pub async fn wait_synced(&self) {
        for controller in &self.controllers {
            controller.wait_synced().await;
        }
    }

    /// The metrics, in Prometheus text format.
    pub fn metrics(&self) -> String {
        self.shared.metrics.encode(&self.shared.informers)
    }

    /// The informers running now.
    pub fn informers(&self) -> &informer::Informers {
        &self.shared.informers
    }

    /// What `/metrics` and `/readyz` read; `ready` is the caller's to set.
    pub fn probe(&self, ready: Arc<std::sync::atomic::AtomicBool>) -> serve::Probe {
        serve::Probe {
            metrics: Arc::clone(&self.shared.metrics),
            informers: self.shared.informers.clone(),
            ready,
        }
    }

    /// Stops taking keys and waits for every in-flight step.
    pub async fn shutdown(self) {
        for controller in self.controllers {
            controller.shutdown().await;
        }
    }
}
