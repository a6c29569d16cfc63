//! The engine's Prometheus metrics: controller-runtime's standard series
//! under its own names and labels (so its dashboards and alerts show each
//! plugin as a controller), the process's, and kubewasm's own.
//!
//! # controller-runtime's series
//! Each plugin is a controller: `controller` (and a work queue's `name`)
//! is the plugin's name.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `controller_runtime_reconcile_total` | controller, result | reconciles by result: `success`, `error`, `requeue_after` (succeeded, asked to be called again), `requeue` (not run: no instance slot came free in time; queued again at once) |
//! | `controller_runtime_reconcile_errors_total` | controller | failed reconciles (their kinds: `kubewasm_reconcile_errors_total`) |
//! | `controller_runtime_reconcile_panics_total` | controller | reconciles whose guest trapped or panicked |
//! | `controller_runtime_reconcile_time_seconds` | controller | a reconcile's duration, call and writes (histogram) |
//! | `controller_runtime_active_workers` | controller | keys being reconciled now |
//! | `controller_runtime_max_concurrent_reconciles` | controller | the most keys reconciled at once (the plugin's concurrency) |
//! | `workqueue_depth` | name, controller | keys queued, not counting those processing |
//! | `workqueue_adds_total` | name, controller | keys that entered the queue (one already queued is merged, not added) |
//! | `workqueue_queue_duration_seconds` | name, controller | how long a ready key waited for a worker (histogram) |
//! | `workqueue_work_duration_seconds` | name, controller | from a key handed out to its end, skipped keys too (histogram) |
//! | `workqueue_unfinished_work_seconds` | name, controller | how long the keys processing now have been, added up (stuck workers show as a steady rise) |
//! | `workqueue_longest_running_processor_seconds` | name, controller | how long the key processing longest has been |
//! | `workqueue_retries_total` | name, controller | keys retried after a failure |
//! | `rest_client_requests_total` | code, host, method | the host's requests to the API server by answer ([`requests`]: `<error>` when none came) |
//! | `leader_election_master_status` | name | with `--leader-elect`: 1 while this process leads (`name`: the Lease's) |
//! | `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_start_time_seconds`, `process_open_fds`, `process_max_fds` | | the process's ([`process`]) |
//!
//! # kubewasm's own
//! | metric | labels | what |
//! |---|---|---|
//! | `kubewasm_reconcile_errors_total` | plugin, kind | failures by kind: `plugin` (its own failure), `denied`, `config`, `deadline` (overruns), `memory`, `limit`, `trap`, `call`, `api` |
//! | `kubewasm_reconcile_skipped_total` | plugin | keys not called: the inputs of their last successful reconcile unchanged (primary, what it read, version, configuration) |
//! | `kubewasm_writes_unchanged_total` | plugin | applies not sent: the cached object already held them, as the plugin's last apply left it (the server would change nothing) |
//! | `kubewasm_scheduled_total` | plugin, result | scheduled calls (`success`, `error`: the call failed, an action was refused or a write failed) |
//! | `kubewasm_read_triggers_overflowed_total` | plugin | reconciles that read more than the host keeps as triggers (`reads` mapping): their key is queued by every change of a `reads` type |
//! | `kubewasm_reads_denied_total` | plugin | cache reads its grants refused (another namespace, an undeclared type or verb) |
//! | `kubewasm_instantiate_time_seconds` | plugin | instance creation (histogram; warm calls count zero) |
//! | `kubewasm_instance_wait_seconds` | plugin | how long a step waited for a slot of the host's instance budget, every one being in a call (histogram; zero when one was free or idle) |
//! | `kubewasm_instance_wait_timeouts_total` | plugin | steps not run because no slot came free in time (queued again without backoff; not a reconcile error) |
//! | `kubewasm_instances` | state | the instance budget now: `busy` (in a call), `idle` (warm), `capacity` (the slots), `max_warm` (the most kept warm) |
//! | `kubewasm_instance_warm_bytes` | state | linear memory of the warm instances: `idle` (what they hold now), `budget` (the most they may hold) |
//! | `kubewasm_shard_slots_held` | | with `--sharding`: slots of the hash space this replica holds now |
//! | `kubewasm_shard_members` | | with `--sharding`: live members of the ring this replica sees |
//! | `kubewasm_shard_handovers_total` | | with `--sharding`: slots this replica acquired |
//! | `kubewasm_shard_handover_seconds` | | with `--sharding`: per slot acquired, from the first round this replica saw it should be its own (the previous holder released it, or its Lease expired, meanwhile) to its acquisition (histogram) |
//! | `kubewasm_guest_memory_bytes` | plugin | linear memory of the instance that ran the plugin's last call (a high-water mark: Wasm memory never shrinks) |
//! | `kubewasm_plugin_info` | plugin, digest | 1 for the component each plugin runs now (`sha256:` of its bytes) |
//! | `kubewasm_plugin_refused` | plugin | 1 while the plugin's last load was refused or unserved (a running version, if any, keeps serving); gone once a version loads or the plugin is removed |
//! | `kubewasm_plugin_loads_total` | plugin, result | loads of the plugin directory's plugins and of plugin resources: `loaded`, `swapped` (a new version in place), `optimized` (its optimized code in place of its baseline code), `refused` (the running version, if any, keeps serving), `removed`, `unserved` (refused or stopped because a type it declares is not served; it loads again once the type is) |
//! | `kubewasm_actions_total` | plugin, result | actions sent (`applied`, `failed`) |
//! | `kubewasm_workqueue_retry_backoff_seconds` | plugin | the backoff each retry waits (histogram: per-key doubling shows as higher buckets filling) |
//! | `kubewasm_informer_objects` | resource, namespace, selector, shard | objects per informer store (`shard`: with `--sharding`, `uid` or `namespace` for a store holding this replica's share, else empty) |
//! | `kubewasm_informer_watch_restarts_total` | resource, namespace, selector, shard | watch errors an informer survived (a counter; it starts again with a new informer) |
//!
//! Series that mirror state (a queue's depth, adds and work in progress,
//! informer objects, the process) are read when the metrics are scraped,
//! one scrape at a time, never pushed, and only what runs then has them;
//! a stopped plugin's queue and guest memory go with it.

mod controllers;
mod instances;
mod process;
mod requests;
mod series;
mod shard;

pub(crate) use controllers::Reconciled;
use controllers::{Controllers, LeaseLabel, Queue, controller, controller_result, queue_label};
use instances::Instances;
use requests::Requests;
use series::{PluginLabel, label};
use shard::ShardSeries;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kubewasm_core::shard::ShardField;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use super::informer::Informers;
use super::lifecycle::owner::LoadResult;
use super::queue::WorkQueue;
use super::ring::Shard;
use kubewasm_runtime::step::{Step, StepError};
use kubewasm_runtime::{CallError, ReconcileError, Runtime};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    plugin: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DigestLabel {
    plugin: String,
    digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    plugin: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InformerLabel {
    resource: String,
    /// The one namespace watched; empty: every namespace.
    namespace: String,
    selector: String,
    /// In a ring, what a store of this replica's share is placed by
    /// (`uid`, `namespace`); empty: every object.
    shard: String,
}

/// Buckets from client-go's first backoff (5 ms) doubling to past its last
/// (1000 s).
fn backoffs() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 19))
}

/// The engine's metrics (see the module documentation).
pub struct Metrics {
    registry: Registry,
    controllers: Controllers,
    process: process::Process,
    requests: Requests,
    /// One scrape at a time: mirrored counters are cleared and set again.
    scraping: Mutex<()>,
    skipped: Family<PluginLabel, Counter>,
    unchanged: Family<PluginLabel, Counter>,
    read_triggers_overflowed: Family<PluginLabel, Counter>,
    scheduled: Family<ResultLabel, Counter>,
    errors: Family<KindLabel, Counter>,
    reads_denied: Family<PluginLabel, Counter>,
    instances: Instances,
    shard: ShardSeries,
    /// The Lease's name and whether this process leads, with leader
    /// election.
    leader: Mutex<Option<(String, watch::Receiver<bool>)>>,
    plugin_loads: Family<ResultLabel, Counter>,
    plugin_info: Family<DigestLabel, Gauge>,
    /// 1 for each plugin whose last load was refused.
    refused: Family<PluginLabel, Gauge>,
    /// The digest each plugin runs, so a swap drops the old series.
    running: Mutex<std::collections::HashMap<String, String>>,
    actions: Family<ResultLabel, Counter>,
    backoff: Family<PluginLabel, Histogram, fn() -> Histogram>,
    informer_objects: Family<InformerLabel, Gauge>,
    watch_restarts: Family<InformerLabel, Counter>,
    queues: Mutex<Vec<Queue>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let controllers = Controllers::new();
        controllers.register(&mut registry);
        let process = process::Process::default();
        process.register(&mut registry);
        let requests = Requests::new(&mut registry);
        let own = registry.sub_registry_with_prefix("kubewasm");
        let instances = Instances::new(own);
        let shard = ShardSeries::new(own);
        let skipped = Family::default();
        let unchanged = Family::default();
        let read_triggers_overflowed = Family::default();
        let scheduled = Family::default();
        let errors = Family::default();
        let reads_denied = Family::default();
        let plugin_loads = Family::default();
        let plugin_info = Family::default();
        let refused = Family::default();
        let actions = Family::default();
        let backoff = Family::new_with_constructor(backoffs as fn() -> Histogram);
        let informer_objects = Family::default();
        let watch_restarts = Family::default();
        own.register("reconcile_errors", "Failed steps by kind", errors.clone());
        own.register(
            "reconcile_skipped",
            "Keys not called: their inputs unchanged since their last successful reconcile",
            skipped.clone(),
        );
        own.register(
            "writes_unchanged",
            "Applies not sent: the cached object already held them",
            unchanged.clone(),
        );
        own.register(
            "read_triggers_overflowed",
            "Reconciles whose reads were too many to keep as triggers: their key is queued by every change of a `reads` type",
            read_triggers_overflowed.clone(),
        );
        own.register("scheduled", "Scheduled calls by result", scheduled.clone());
        own.register(
            "reads_denied",
            "Cache reads the grants refused",
            reads_denied.clone(),
        );
        own.register(
            "plugin_loads",
            "Loads of plugins by result",
            plugin_loads.clone(),
        );
        own.register(
            "plugin_info",
            "The component each plugin runs, by digest",
            plugin_info.clone(),
        );
        own.register(
            "plugin_refused",
            "1 for each plugin whose last load was refused (a running version keeps serving)",
            refused.clone(),
        );
        own.register("actions", "Actions sent by result", actions.clone());
        own.register(
            "workqueue_retry_backoff_seconds",
            "Backoff a retry waits",
            backoff.clone(),
        );
        own.register(
            "informer_objects",
            "Objects per informer store",
            informer_objects.clone(),
        );
        own.register(
            "informer_watch_restarts",
            "Watch errors an informer survived",
            watch_restarts.clone(),
        );
        Self {
            registry,
            controllers,
            process,
            requests,
            scraping: Mutex::default(),
            skipped,
            unchanged,
            read_triggers_overflowed,
            scheduled,
            errors,
            reads_denied,
            instances,
            shard,
            leader: Mutex::default(),
            plugin_loads,
            plugin_info,
            refused,
            running: Mutex::default(),
            actions,
            backoff,
            informer_objects,
            watch_restarts,
            queues: Mutex::default(),
        }
    }
}

impl Metrics {
    /// `client`, each of its requests counted in `rest_client_requests_total`
    /// with `host` (the API server's `host:port`, as client-go labels it).
    pub fn counting(&self, client: kube::Client, host: &str) -> kube::Client {
        self.requests.counting(client, host)
    }

    /// Shows `queue` as `plugin`'s, worked by `concurrency` workers, as
    /// long as the queue lives. Its counters start at zero, as controller-runtime starts a
    /// controller's (a rate or an increase then counts the first event).
    pub fn register_queue(&self, plugin: &str, queue: &Arc<WorkQueue>, concurrency: usize) {
        let controllers = &self.controllers;
        for result in ["success", "error", "requeue", "requeue_after"] {
            controllers
                .reconciles
                .get_or_create(&controller_result(plugin, result))
                .inc_by(0);
        }
        for family in [&controllers.errors, &controllers.panics] {
            family.get_or_create(&controller(plugin)).inc_by(0);
        }
        controllers
            .retries
            .get_or_create(&queue_label(plugin))
            .inc_by(0);
        for family in [&self.skipped, &self.unchanged, &self.reads_denied] {
            family.get_or_create(&label(plugin)).inc_by(0);
        }
        self.instances.started(plugin);
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues.retain(|q| q.queue.strong_count() > 0);
        queues.push(Queue {
            plugin: plugin.to_owned(),
            queue: Arc::downgrade(queue),
            concurrency,
        });
    }

    /// Shows whether this process leads, by the Lease `name`, in
    /// `leader_election_master_status`.
    pub(super) fn watch_leader(&self, name: &str, leading: watch::Receiver<bool>) {
        *self.leader.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((name.to_owned(), leading));
    }

    /// Shows `runtime`'s instance budget in `kubewasm_instances`.
    pub(super) fn watch_runtime(&self, runtime: &Runtime) {
        self.instances.watch(runtime);
    }

    /// Shows `shard`'s slots, members and handovers.
    pub(super) fn watch_shard(&self, shard: &Arc<Shard>) {
        self.shard.watch(shard);
    }

    /// Counts a key of `plugin` not called: its inputs were unchanged.
    pub(super) fn skipped(&self, plugin: &str) {
        self.skipped.get_or_create(&label(plugin)).inc();
    }

    /// Counts `count` applies of `plugin` not sent: the object held them.
    pub(super) fn unchanged(&self, plugin: &str, count: usize) {
        if count > 0 {
            self.unchanged
                .get_or_create(&label(plugin))
                .inc_by(count as u64);
        }
    }

    /// Counts a scheduled call of `plugin` by its result (`success`,
    /// `error`).
    pub(super) fn scheduled(&self, plugin: &str, result: &str) {
        self.scheduled
            .get_or_create(&result_label(plugin, result))
            .inc();
    }

    /// Counts a reconcile of `plugin` whose reads were too many to keep as
    /// triggers.
    pub(super) fn read_triggers_overflowed(&self, plugin: &str) {
        self.read_triggers_overflowed
            .get_or_create(&label(plugin))
            .inc();
    }

    pub(super) fn stepped(&self, plugin: &str, step: &Step) {
        self.instances.stepped(plugin, step);
    }

    /// Records that `plugin` runs the component of `digest` (hex sha256).
    pub(super) fn runs(&self, plugin: &str, digest: &str) {
        let digest = format!("sha256:{digest}");
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = running.insert(plugin.to_owned(), digest.clone()) {
            self.plugin_info.remove(&DigestLabel {
                plugin: plugin.to_owned(),
                digest: old,
            });
        }
        self.plugin_info
            .get_or_create(&DigestLabel {
                plugin: plugin.to_owned(),
                digest,
            })
            .set(1);
    }

    /// Drops the gauges of a stopped plugin (its counters stay, as
    /// counters do).
    pub(super) fn forget(&self, plugin: &str) {
        self.instances.forget(plugin);
        let old = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(plugin);
        if let Some(digest) = old {
            self.plugin_info.remove(&DigestLabel {
                plugin: plugin.to_owned(),
                digest,
            });
        }
    }

    /// Counts a load of `plugin` by its result, and keeps whether its
    /// last one was refused.
    pub(super) fn plugin_load(&self, plugin: &str, result: LoadResult) {
        self.plugin_loads
            .get_or_create(&result_label(plugin, result.as_str()))
            .inc();
        match result {
            LoadResult::Refused | LoadResult::Unserved => {
                self.refused.get_or_create(&label(plugin)).set(1);
            }
            LoadResult::Loaded | LoadResult::Swapped | LoadResult::Removed => {
                self.refused.remove(&label(plugin));
            }
            // Its running code, made faster: the last load stands.
            LoadResult::Optimized => {}
        }
    }

    pub(super) fn step_failed(&self, plugin: &str, error: &StepError) {
        let kind = match &*error.source {
            ReconcileError::Failed { .. } => "plugin",
            ReconcileError::Action(_) => "denied",
            ReconcileError::Config(_) => "config",
            ReconcileError::Call(CallError::LimitExceeded(_)) => "limit",
            ReconcileError::Call(CallError::DeadlineExceeded { .. }) => "deadline",
            ReconcileError::Call(CallError::MemoryExhausted { .. }) => "memory",
            ReconcileError::Call(CallError::Panicked { .. } | CallError::Trapped { .. }) => "trap",
            ReconcileError::Call(_) => "call",
        };
        self.errors
            .get_or_create(&KindLabel {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
            })
            .inc();
        if kind == "trap" {
            self.controllers
                .panics
                .get_or_create(&controller(plugin))
                .inc();
        }
    }

    pub(super) fn reads_denied(&self, plugin: &str, denied: u64) {
        if denied > 0 {
            self.reads_denied
                .get_or_create(&label(plugin))
                .inc_by(denied);
        }
    }

    pub(super) fn applied(&self, plugin: &str, applied: usize, failed: usize) {
        for (result, count) in [("applied", applied), ("failed", failed)] {
            if count > 0 {
                self.actions
                    .get_or_create(&result_label(plugin, result))
                    .inc_by(count as u64);
            }
        }
        if failed > 0 {
            self.errors
                .get_or_create(&KindLabel {
                    plugin: plugin.to_owned(),
                    kind: "api".to_owned(),
                })
                .inc();
        }
    }

    pub(super) fn waited(&self, plugin: &str, waited: Duration) {
        self.controllers
            .queue_wait
            .get_or_create(&queue_label(plugin))
            .observe(waited.as_secs_f64());
    }

    /// A key of `plugin`, handed out `worked` ago, is done.
    pub(super) fn worked(&self, plugin: &str, worked: Duration) {
        self.controllers
            .work
            .get_or_create(&queue_label(plugin))
            .observe(worked.as_secs_f64());
    }

    pub(super) fn backed_off(&self, plugin: &str, backoff: Duration) {
        self.backoff
            .get_or_create(&label(plugin))
            .observe(backoff.as_secs_f64());
    }

    /// A reconcile of `plugin` ended as `result` after `took`.
    pub(super) fn reconciled(&self, plugin: &str, result: Reconciled, took: Duration) {
        let controllers = &self.controllers;
        controllers
            .reconciles
            .get_or_create(&controller_result(plugin, result.label()))
            .inc();
        controllers
            .time
            .get_or_create(&controller(plugin))
            .observe(took.as_secs_f64());
        if result == Reconciled::Error {
            controllers.errors.get_or_create(&controller(plugin)).inc();
            controllers
                .retries
                .get_or_create(&queue_label(plugin))
                .inc();
        }
    }

    /// A step of `plugin` did not run (no instance slot came free in
    /// time) and its key is queued again at once: a `requeue`.
    pub(super) fn not_run(&self, plugin: &str) {
        self.instances.not_run(plugin);
        self.controllers
            .reconciles
            .get_or_create(&controller_result(plugin, "requeue"))
            .inc();
    }

    /// Reconciles of `plugin` that succeeded and that failed.
    pub(super) fn reconcile_counts(&self, plugin: &str) -> (u64, u64) {
        let count = |result| {
            self.controllers
                .reconciles
                .get_or_create(&controller_result(plugin, result))
                .get()
        };
        (
            count(Reconciled::Success.label()) + count(Reconciled::RequeueAfter.label()),
            count(Reconciled::Error.label()),
        )
    }

    /// The metrics in Prometheus text format, the series that mirror state
    /// read from `informers`, the registered queues and `/proc` now.
    pub fn encode(&self, informers: &Informers) -> String {
        let _one_at_a_time = self.scraping.lock().unwrap_or_else(PoisonError::into_inner);
        // Mirrors of what runs now: a stopped plugin's queue or a freed
        // informer leaves no series behind.
        self.informer_objects.clear();
        self.watch_restarts.clear();
        self.controllers
            .sample(&self.queues.lock().unwrap_or_else(PoisonError::into_inner));
        self.process.sample();
        if let Some((name, leading)) = &*self.leader.lock().unwrap_or_else(PoisonError::into_inner)
        {
            self.controllers
                .leading
                .get_or_create(&LeaseLabel { name: name.clone() })
                .set(i64::from(*leading.borrow()));
        }
        for (key, store) in informers.running() {
            let label = InformerLabel {
                resource: key.resource.to_string(),
                namespace: key.namespace.clone().unwrap_or_default(),
                selector: key.selector.clone(),
                shard: match key.shard {
                    None => String::new(),
                    Some(ShardField::Uid) => "uid".to_owned(),
                    Some(ShardField::Namespace) => "namespace".to_owned(),
                },
            };
            self.informer_objects
                .get_or_create(&label)
                .set(i64::try_from(store.len()).unwrap_or(i64::MAX));
            self.watch_restarts
                .get_or_create(&label)
                .inc_by(store.restarts());
        }
        self.instances.sample();
        self.shard.sample();
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

fn result_label(plugin: &str, result: &str) -> ResultLabel {
    ResultLabel {
        plugin: plugin.to_owned(),
        result: result.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::{Backoff, Done, Priority};
    use kubewasm_runtime::resource::ObjectKey;

    fn informers() -> Informers {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("url"));
        Informers::new(kube::Client::try_from(config).expect("client"))
    }

    /// The value of the series `name{labels}` in `text`.
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
    }

    #[tokio::test(start_paused = true)]
    async fn a_plugin_should_show_as_a_controller_runtime_controller_and_work_queue() {
        let metrics = Metrics::default();
        let queue = Arc::new(WorkQueue::new(Backoff::default()));
        metrics.register_queue("myapp", &queue, 3);
        let (_leads, leading) = watch::channel(true);
        metrics.watch_leader("kubewasm", leading);
        for name in ["a", "b", "c"] {
            queue.add(ObjectKey::namespaced("default", name), Priority::Event);
        }
        let (a, _) = queue.next().await.expect("a");
        tokio::time::advance(Duration::from_secs(2)).await;
        let (b, _) = queue.next().await.expect("b");
        tokio::time::advance(Duration::from_secs(1)).await;
        metrics.reconciled("myapp", Reconciled::Success, Duration::from_millis(3));
        metrics.reconciled("myapp", Reconciled::RequeueAfter, Duration::from_millis(3));
        metrics.reconciled("myapp", Reconciled::Error, Duration::from_millis(3));
        metrics.not_run("myapp");
        metrics.worked("myapp", Duration::from_millis(5));
        let text = metrics.encode(&informers());
        let at = |series: &str| value(&text, series).unwrap_or_else(|| panic!("{series}\n{text}"));
        for (series, expected) in [
            (
                r#"controller_runtime_reconcile_total{controller="myapp",result="success"}"#,
                1.0,
            ),
            (
                r#"controller_runtime_reconcile_total{controller="myapp",result="requeue_after"}"#,
                1.0,
            ),
            (
                r#"controller_runtime_reconcile_total{controller="myapp",result="error"}"#,
                1.0,
            ),
            (
                r#"controller_runtime_reconcile_total{controller="myapp",result="requeue"}"#,
                1.0,
            ),
            (
                r#"controller_runtime_reconcile_errors_total{controller="myapp"}"#,
                1.0,
            ),
            (
                r#"controller_runtime_reconcile_time_seconds_count{controller="myapp"}"#,
                3.0,
            ),
            (
                r#"controller_runtime_active_workers{controller="myapp"}"#,
                2.0,
            ),
            (
                r#"controller_runtime_max_concurrent_reconciles{controller="myapp"}"#,
                3.0,
            ),
            (r#"workqueue_depth{name="myapp",controller="myapp"}"#, 1.0),
            (
                r#"workqueue_adds_total{name="myapp",controller="myapp"}"#,
                3.0,
            ),
            (
                r#"workqueue_unfinished_work_seconds{name="myapp",controller="myapp"}"#,
                4.0,
            ),
            (
                r#"workqueue_longest_running_processor_seconds{name="myapp",controller="myapp"}"#,
                3.0,
            ),
            (
                r#"workqueue_retries_total{name="myapp",controller="myapp"}"#,
                1.0,
            ),
            (
                r#"workqueue_work_duration_seconds_count{name="myapp",controller="myapp"}"#,
                1.0,
            ),
            (r#"leader_election_master_status{name="kubewasm"}"#, 1.0),
        ] {
            assert_eq!(at(series), expected, "{series}\n{text}");
        }
        assert!(at("process_resident_memory_bytes") > 0.0, "{text}");
        assert!(at("process_cpu_seconds_total") >= 0.0, "{text}");
        // A second scrape mirrors the same counts, not twice them.
        queue.done(&a, Done::Forget);
        queue.done(&b, Done::Forget);
        let text = metrics.encode(&informers());
        assert_eq!(
            value(
                &text,
                r#"workqueue_adds_total{name="myapp",controller="myapp"}"#
            ),
            Some(3.0),
            "{text}"
        );
        assert_eq!(
            value(
                &text,
                r#"controller_runtime_active_workers{controller="myapp"}"#
            ),
            Some(0.0),
            "{text}"
        );
        // A refused load shows until a version loads.
        metrics.plugin_load("broken", LoadResult::Refused);
        metrics.plugin_load("broken", LoadResult::Optimized);
        let text = metrics.encode(&informers());
        assert_eq!(
            value(&text, r#"kubewasm_plugin_refused{plugin="broken"}"#),
            Some(1.0)
        );
        metrics.plugin_load("broken", LoadResult::Loaded);
        let text = metrics.encode(&informers());
        assert_eq!(
            value(&text, r#"kubewasm_plugin_refused{plugin="broken"}"#),
            None
        );
        // A queue that is gone leaves no series.
        drop(queue);
        let text = metrics.encode(&informers());
        assert!(!text.contains(r#"workqueue_depth{"#), "{text}");
    }
}
