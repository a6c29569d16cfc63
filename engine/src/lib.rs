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
//!   priorities, requeue-after), and [`listing`], the listed keys it holds
//!   as a walk over the store;
//! - [`controller`]: one plugin as a controller (mapping, workers, resync);
//! - [`applier`]: the writes;
//! - [`recorder`]: steps recorded as fixtures `replay` runs again;
//! - [`discovery`]: the cluster's types, for the REST mapper, kept up as
//!   CRDs and APIServices change;
//! - [`leader`]: leader election with a Lease (workers wait for it, caches
//!   do not);
//! - [`metrics`] and [`serve`]: `/metrics`, `/healthz`, `/readyz`; [`health`]:
//!   whether the engine is wedged;
//! - [`ring`] and [`share`]: a plugin's keys spread over replicas;
//! - where plugins come from: [`plugin_dir`] (a watched directory),
//!   [`oci`] (OCI artifacts: push, pull, verify), [`plugin_resource`]
//!   (`Plugin` and `ClusterPlugin` resources) and [`loader`], which loads
//!   and replaces them on a running engine.
//!
//! The sandbox and the step it runs are `kubewasm-runtime`'s; this crate is
//! the one that holds a Kubernetes client.

pub mod applier;
mod around;
pub mod backoff;
pub mod controller;
pub mod demotion;
pub mod discovery;
pub mod fair;
pub mod health;
pub mod informer;
pub mod leader;
pub mod lifecycle;
pub mod listing;
pub mod loader;
pub mod metrics;
pub mod oci;
mod plugin_cache;
pub mod plugin_dir;
pub mod plugin_resource;
pub mod queue;
pub mod recorder;
pub mod rights;
pub mod ring;
pub mod serve;
pub mod share;
pub mod signature;
mod store;
#[cfg(test)]
mod testing;

use std::sync::Arc;

use controller::{Controller, Settings, Shared};
use kubewasm_runtime::Plugin;
use kubewasm_runtime::mapper::{MapperError, RestMapper};
pub use lifecycle::owner::LoadResult;

/// Every plugin of the host, run as controllers over shared informers.
pub struct Engine {
    shared: Shared,
    controllers: Vec<Controller>,
    /// Who runs each plugin a load gave ([`Self::run_loaded`]).
    owners: std::collections::HashMap<String, lifecycle::owner::Owner>,
    /// Names whose plugin stopped since [`Self::take_freed`] was last
    /// called: the other source may run its plugin under them now.
    freed: Vec<String>,
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
        Self::measured(client, workers, leading, Arc::default())
    }

    /// The same, its series in `metrics` (whose
    /// [`counting`](metrics::Metrics::counting) client the host may have
    /// made first, so that every request it sends is counted).
    pub fn measured(
        client: kube::Client,
        workers: usize,
        leading: tokio::sync::watch::Receiver<bool>,
        metrics: Arc<metrics::Metrics>,
    ) -> Self {
        Self {
            shared: Shared {
                informers: informer::Informers::new(client.clone()),
                applier: applier::Applier::new(client),
                workers: fair::Workers::new(workers),
                metrics,
                leading,
                shard: None,
                resync: controller::DEFAULT_RESYNC,
                recorder: None,
                remembered: Arc::default(),
                calls: Arc::default(),
                demotion: Arc::new(demotion::Demotion::new(workers)),
            },
            controllers: Vec::new(),
            owners: std::collections::HashMap::new(),
            freed: Vec::new(),
        }
    }

    /// An engine that starts steps only for the primaries of the slots
    /// `shard` holds (a replica of a ring, [`ring`]); set before the first
    /// plugin starts.
    #[must_use]
    pub fn with_shard(mut self, shard: Arc<ring::Shard>) -> Self {
        self.shared.metrics.watch_shard(&shard);
        self.shared.informers = self.shared.informers.with_shard(Arc::clone(&shard));
        self.shared.shard = Some(shard);
        self
    }

    /// An engine showing whether it leads by the Lease `name` (leader
    /// election) in `leader_election_master_status`.
    #[must_use]
    pub fn with_lease_name(self, name: &str) -> Self {
        self.shared
            .metrics
            .watch_leader(name, self.shared.leading.clone());
        self
    }

    /// An engine whose informers get their lists as `initial_list` says;
    /// set before the first plugin starts.
    #[must_use]
    pub fn with_initial_list(mut self, initial_list: informer::InitialList) -> Self {
        self.shared.informers = self.shared.informers.with_initial_list(initial_list);
        self
    }

    /// An engine remembering the inputs of at most `keys` keys across its
    /// plugins (default [`controller::DEFAULT_REMEMBERED`]), each plugin
    /// its share; set before the first plugin starts.
    #[must_use]
    pub fn with_remembered(mut self, keys: usize) -> Self {
        self.shared.remembered = controller::Remembered::new(keys);
        self
    }

    /// An engine queuing every primary again each `period`, for the
    /// plugins that declare no `resync-seconds`; set before the first
    /// plugin starts.
    #[must_use]
    pub fn with_resync(mut self, period: std::time::Duration) -> Self {
        self.shared.resync = period;
        self
    }

    /// An engine showing `runtime`'s instance budget in its metrics
    /// (`kubewasm_instances`); set before the first plugin starts.
    #[must_use]
    pub fn with_runtime(self, runtime: &kubewasm_runtime::Runtime) -> Self {
        self.shared.metrics.watch_runtime(runtime);
        self
    }

    /// An engine recording the steps of the plugins `recorder` records
    /// (`kubewasm run --record`); set before the first plugin starts.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Arc<recorder::Recorder>) -> Self {
        self.shared.recorder = Some(recorder);
        self
    }

    /// Starts `plugin` as a controller. Must be called within a tokio
    /// runtime.
    pub fn start(&mut self, plugin: Arc<Plugin>, settings: Settings) {
        self.shared
            .metrics
            .runs(&plugin.declaration().name, plugin.digest());
        self.controllers
            .push(Controller::start(plugin, settings, &self.shared));
    }

    /// Runs `plugin` in place of the running plugin of its name, swapping it
    /// in ([`Controller::swap`]: queue kept, no key lost) or, for another
    /// primary type, stopping the old one first; starts it if none runs.
    pub async fn replace(&mut self, plugin: Arc<Plugin>, settings: Settings) {
        let name = plugin.declaration().name.clone();
        let Some(index) = self.controllers.iter().position(|c| c.name() == name) else {
            self.start(plugin, settings);
            return;
        };
        let swapped = self.controllers[index].swap(Arc::clone(&plugin), &settings, &self.shared);
        match swapped {
            Ok(()) => self.shared.metrics.runs(&name, plugin.digest()),
            Err(error) => {
                tracing::info!(plugin = %name, %error, "restarting the controller");
                self.controllers.swap_remove(index).shutdown().await;
                self.start(plugin, settings);
            }
        }
    }

    /// Runs a plugin a load of `owner` gave ([`Self::replace`]) and counts
    /// the load: `loaded`, `swapped`, or `optimized` for a `tier_up` (a
    /// running version's optimized code). Returns what it counted.
    ///
    /// # Errors
    /// [`loader::Refused::NameTaken`] when the other owner runs a plugin
    /// of its name: nothing changes (the caller counts the refusal).
    pub async fn run_loaded(
        &mut self,
        plugin: Arc<Plugin>,
        settings: Settings,
        tier_up: bool,
        owner: lifecycle::owner::Owner,
    ) -> Result<LoadResult, loader::Refused> {
        let name = plugin.declaration().name.clone();
        if let Some(holder) = self.owners.get(&name).filter(|holder| **holder != owner) {
            return Err(loader::Refused::NameTaken {
                name,
                holder: *holder,
            });
        }
        let result = match (tier_up, self.running(&name)) {
            (true, _) => LoadResult::Optimized,
            (false, true) => LoadResult::Swapped,
            (false, false) => LoadResult::Loaded,
        };
        self.replace(plugin, settings).await;
        self.owners.insert(name.clone(), owner);
        self.record_load(&name, result);
        Ok(result)
    }

    /// Who runs the plugin `name`, if a load gave it.
    pub fn holder(&self, name: &str) -> Option<lifecycle::owner::Owner> {
        self.owners.get(name).copied()
    }

    /// The names whose plugin stopped since the last call, in the order
    /// they stopped.
    pub fn take_freed(&mut self) -> Vec<String> {
        std::mem::take(&mut self.freed)
    }

    /// [`Self::stop`], if `owner` runs the plugin `name`: a source stops
    /// only its own plugins. Whether it was running.
    pub async fn stop_owned(&mut self, name: &str, owner: lifecycle::owner::Owner) -> bool {
        if self.owners.get(name) != Some(&owner) {
            return false;
        }
        self.stop(name).await
    }

    /// Whether a plugin called `name` runs.
    pub fn running(&self, name: &str) -> bool {
        self.controllers.iter().any(|c| c.name() == name)
    }

    /// The plugins running, by name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.controllers.iter().map(Controller::name)
    }

    /// Why the running plugin `name` declares a type `mapper` does not
    /// serve as it was resolved, if it does.
    pub fn unserved(&self, name: &str, mapper: &RestMapper) -> Option<MapperError> {
        self.controllers
            .iter()
            .find(|c| c.name() == name)
            .and_then(|c| c.plugin().declaration().unserved(mapper))
    }

    /// Counts a load of the plugin `name` by its result.
    pub fn record_load(&self, name: &str, result: LoadResult) {
        self.shared.metrics.plugin_load(name, result);
    }

    /// Stops and removes the plugin called `name`, waiting for its
    /// in-flight steps; its informers are released unless another plugin
    /// reads them. Whether it was running.
    pub async fn stop(&mut self, name: &str) -> bool {
        let Some(index) = self.controllers.iter().position(|c| c.name() == name) else {
            return false;
        };
        self.controllers.swap_remove(index).shutdown().await;
        self.owners.remove(name);
        self.freed.push(name.to_owned());
        self.shared.metrics.forget(name);
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

    /// The host's applier.
    pub fn applier(&self) -> &applier::Applier {
        &self.shared.applier
    }

    /// Reconciles of the plugin `name` that succeeded and that failed.
    pub fn reconcile_counts(&self, name: &str) -> (u64, u64) {
        self.shared.metrics.reconcile_counts(name)
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
            calls: Arc::clone(&self.shared.calls),
            ready,
        }
    }

    /// Stops taking keys and waits for every in-flight step (a step still
    /// waiting for a worker does not start: its key is left for the next
    /// leader).
    pub async fn shutdown(self) {
        self.shared.workers.close();
        for controller in self.controllers {
            controller.shutdown().await;
        }
    }
}
