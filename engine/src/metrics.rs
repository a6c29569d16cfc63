//! The engine's Prometheus metrics, named after controller-runtime's.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `kubewasm_reconcile_total` | plugin, result | steps by result (`success`, `error`) |
//! | `kubewasm_reconcile_skipped_total` | plugin | keys not called: the inputs of their last successful reconcile unchanged (primary, what it read, version, configuration) |
//! | `kubewasm_writes_unchanged_total` | plugin | applies not sent: the cached object already held them, as the plugin's last apply left it (the server would change nothing) |
//! | `kubewasm_scheduled_total` | plugin, result | scheduled calls (`success`, `error`: the call failed, an action was refused or a write failed) |
//! | `kubewasm_read_triggers_overflowed_total` | plugin | reconciles that read more than the host keeps as triggers (`reads` mapping): their key is queued by every change of a `reads` type |
//! | `kubewasm_reconcile_errors_total` | plugin, kind | failures by kind: `plugin` (its own failure), `denied`, `config`, `deadline` (overruns), `memory`, `limit`, `trap`, `call`, `api` |
//! | `kubewasm_reads_denied_total` | plugin | cache reads its grants refused (another namespace, an undeclared type or verb) |
//! | `kubewasm_reconcile_time_seconds` | plugin | step duration, call and writes (histogram) |
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
//! | `kubewasm_plugin_loads_total` | plugin, result | loads of the plugin directory's plugins and of plugin resources: `loaded`, `swapped` (a new version in place), `optimized` (its optimized code in place of its baseline code), `refused` (the running version, if any, keeps serving), `removed`, `unserved` (refused or stopped because a type it declares is not served; it loads again once the type is) |
//! | `kubewasm_actions_total` | plugin, result | actions sent (`applied`, `failed`) |
//! | `kubewasm_workqueue_depth` | plugin | keys queued |
//! | `kubewasm_workqueue_queue_duration_seconds` | plugin | how long a ready key waited for a worker (histogram) |
//! | `kubewasm_workqueue_retries_total` | plugin | keys retried after a failure |
//! | `kubewasm_workqueue_retry_backoff_seconds` | plugin | the backoff each retry waits (histogram: per-key doubling shows as higher buckets filling) |
//! | `kubewasm_informer_objects` | resource, namespace, selector, shard | objects per informer store (`shard`: with `--sharding`, `uid` or `namespace` for a store holding this replica's share, else empty) |
//! | `kubewasm_informer_watch_restarts_total` | resource, namespace, selector, shard | watch errors an informer survived (a counter; it starts again with a new informer) |
//!
//! Gauges that mirror state (queue depth, informer objects) are read when
//! the metrics are scraped, never pushed, and only what runs then has
//! them; a stopped plugin's guest memory goes with it.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use kubewasm_core::shard::ShardField;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::informer::Informers;
use super::queue::WorkQueue;
use super::ring::Shard;
use kubewasm_runtime::step::{Call, Step, StepError};
use kubewasm_runtime::{CallError, ReconcileError, Runtime};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabel {
    plugin: String,
}

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
struct StateLabel {
    state: &'static str,
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

fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

/// Buckets from client-go's first backoff (5 ms) doubling to past its last
/// (1000 s).
fn backoffs() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 19))
}

/// The engine's metrics (see the module documentation).
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabel, Counter>,
    skipped: Family<PluginLabel, Counter>,
    unchanged: Family<PluginLabel, Counter>,
    read_triggers_overflowed: Family<PluginLabel, Counter>,
    scheduled: Family<ResultLabel, Counter>,
    errors: Family<KindLabel, Counter>,
    reads_denied: Family<PluginLabel, Counter>,
    reconcile_time: Family<PluginLabel, Histogram, fn() -> Histogram>,
    instantiate_time: Family<PluginLabel, Histogram, fn() -> Histogram>,
    instance_wait: Family<PluginLabel, Histogram, fn() -> Histogram>,
    instance_wait_timeouts: Family<PluginLabel, Counter>,
    instances: Family<StateLabel, Gauge>,
    warm_bytes: Family<StateLabel, Gauge>,
    /// The runtime whose instance budget `instances` shows.
    runtime: Mutex<Option<Runtime>>,
    shard_held: Gauge,
    shard_members: Gauge,
    shard_handovers: Counter,
    shard_handover_time: Histogram,
    shard: Mutex<Option<Arc<Shard>>>,
    guest_memory: Family<PluginLabel, Gauge>,
    plugin_loads: Family<ResultLabel, Counter>,
    plugin_info: Family<DigestLabel, Gauge>,
    /// The digest each plugin runs, so a swap drops the old series.
    running: Mutex<std::collections::HashMap<String, String>>,
    actions: Family<ResultLabel, Counter>,
    depth: Family<PluginLabel, Gauge>,
    queue_wait: Family<PluginLabel, Histogram, fn() -> Histogram>,
    retries: Family<PluginLabel, Counter>,
    backoff: Family<PluginLabel, Histogram, fn() -> Histogram>,
    informer_objects: Family<InformerLabel, Gauge>,
    watch_restarts: Family<InformerLabel, Counter>,
    queues: Mutex<Vec<(String, Weak<WorkQueue>)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("kubewasm");
        let reconciles = Family::default();
        let skipped = Family::default();
        let unchanged = Family::default();
        let read_triggers_overflowed = Family::default();
        let scheduled = Family::default();
        let errors = Family::default();
        let reads_denied = Family::default();
        let reconcile_time = Family::new_with_constructor(seconds as fn() -> Histogram);
        let instantiate_time = Family::new_with_constructor(seconds as fn() -> Histogram);
        let instance_wait = Family::new_with_constructor(seconds as fn() -> Histogram);
        let instance_wait_timeouts = Family::default();
        let instances = Family::default();
        let warm_bytes = Family::default();
        let guest_memory = Family::default();
        let plugin_loads = Family::default();
        let plugin_info = Family::default();
        let actions = Family::default();
        let depth = Family::default();
        let queue_wait = Family::new_with_constructor(seconds as fn() -> Histogram);
        let retries = Family::default();
        let backoff = Family::new_with_constructor(backoffs as fn() -> Histogram);
        let informer_objects = Family::default();
        let watch_restarts = Family::default();
        registry.register("reconcile", "Reconcile steps by result", reconciles.clone());
        registry.register("reconcile_errors", "Failed steps by kind", errors.clone());
        registry.register(
            "reconcile_skipped",
            "Keys not called: their inputs unchanged since their last successful reconcile",
            skipped.clone(),
        );
        registry.register(
            "writes_unchanged",
            "Applies not sent: the cached object already held them",
            unchanged.clone(),
        );
        registry.register(
            "read_triggers_overflowed",
            "Reconciles whose reads were too many to keep as triggers: their key is queued by every change of a `reads` type",
            read_triggers_overflowed.clone(),
        );
        registry.register("scheduled", "Scheduled calls by result", scheduled.clone());
        registry.register(
            "reads_denied",
            "Cache reads the grants refused",
            reads_denied.clone(),
        );
        registry.register(
            "reconcile_time_seconds",
            "Duration of a step, call and writes",
            reconcile_time.clone(),
        );
        registry.register(
            "instantiate_time_seconds",
            "Time creating an instance for a call",
            instantiate_time.clone(),
        );
        registry.register(
            "instance_wait_seconds",
            "Time a step waited for an instance slot, every one being in a call",
            instance_wait.clone(),
        );
        registry.register(
            "instance_wait_timeouts",
            "Steps not run because no instance slot came free in time",
            instance_wait_timeouts.clone(),
        );
        registry.register(
            "instances",
            "Instance slots of the host's budget by state",
            instances.clone(),
        );
        registry.register(
            "instance_warm_bytes",
            "Linear memory of the warm instances: held now, and the most they may hold",
            warm_bytes.clone(),
        );
        let (shard_held, shard_members, shard_handovers) =
            (Gauge::default(), Gauge::default(), Counter::default());
        let shard_handover_time = seconds();
        registry.register(
            "shard_slots_held",
            "Slots of the hash space this replica holds",
            shard_held.clone(),
        );
        registry.register(
            "shard_members",
            "Live members of the ring this replica sees",
            shard_members.clone(),
        );
        registry.register(
            "shard_handovers",
            "Slots this replica acquired",
            shard_handovers.clone(),
        );
        registry.register(
            "shard_handover_seconds",
            "From when this replica saw a slot should be its own to its acquisition",
            shard_handover_time.clone(),
        );
        registry.register(
            "guest_memory_bytes",
            "Linear memory of the instance of the plugin's last call",
            guest_memory.clone(),
        );
        registry.register(
            "plugin_loads",
            "Loads of plugins by result",
            plugin_loads.clone(),
        );
        registry.register(
            "plugin_info",
            "The component each plugin runs, by digest",
            plugin_info.clone(),
        );
        registry.register("actions", "Actions sent by result", actions.clone());
        registry.register("workqueue_depth", "Keys queued", depth.clone());
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long a ready key waited for a worker",
            queue_wait.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Keys retried after a failure",
            retries.clone(),
        );
        registry.register(
            "workqueue_retry_backoff_seconds",
            "Backoff a retry waits",
            backoff.clone(),
        );
        registry.register(
            "informer_objects",
            "Objects per informer store",
            informer_objects.clone(),
        );
        registry.register(
            "informer_watch_restarts",
            "Watch errors an informer survived",
            watch_restarts.clone(),
        );
        Self {
            registry,
            reconciles,
            skipped,
            unchanged,
            read_triggers_overflowed,
            scheduled,
            errors,
            reads_denied,
            reconcile_time,
            instantiate_time,
            instance_wait,
            instance_wait_timeouts,
            instances,
            warm_bytes,
            runtime: Mutex::default(),
            shard_held,
            shard_members,
            shard_handovers,
            shard_handover_time,
            shard: Mutex::default(),
            guest_memory,
            plugin_loads,
            plugin_info,
            running: Mutex::default(),
            actions,
            depth,
            queue_wait,
            retries,
            backoff,
            informer_objects,
            watch_restarts,
            queues: Mutex::default(),
        }
    }
}

impl Metrics {
    /// Reports `queue`'s depth as `plugin`'s, as long as the queue lives.
    pub fn register_queue(&self, plugin: &str, queue: Arc<WorkQueue>) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues.retain(|(_, q)| q.strong_count() > 0);
        queues.push((plugin.to_owned(), Arc::downgrade(&queue)));
    }

    /// Shows `runtime`'s instance budget in `kubewasm_instances`.
    pub(super) fn watch_runtime(&self, runtime: &Runtime) {
        let mut watched = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
        if watched.is_none() {
            *watched = Some(runtime.clone());
        }
    }

    /// Shows `shard`'s slots, members and handovers.
    pub(super) fn watch_shard(&self, shard: &Arc<Shard>) {
        shard.record_handovers(self.shard_handover_time.clone());
        *self.shard.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(shard));
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

    /// Counts a step of `plugin` that did not run: no instance slot came
    /// free in time.
    pub(super) fn not_run(&self, plugin: &str) {
        self.instance_wait_timeouts
            .get_or_create(&label(plugin))
            .inc();
    }

    pub(super) fn stepped(&self, plugin: &str, step: &Step) {
        if step.call != Call::None {
            self.instance_wait
                .get_or_create(&label(plugin))
                .observe(step.stats.wait.as_secs_f64());
        }
        self.instantiate_time
            .get_or_create(&label(plugin))
            .observe(step.stats.instantiate.as_secs_f64());
        if step.call != Call::None {
            self.guest_memory
                .get_or_create(&label(plugin))
                .set(i64::try_from(step.stats.memory).unwrap_or(i64::MAX));
        }
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
        self.guest_memory.remove(&label(plugin));
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

    pub(super) fn plugin_load(&self, plugin: &str, result: &str) {
        self.plugin_loads
            .get_or_create(&result_label(plugin, result))
            .inc();
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
        self.queue_wait
            .get_or_create(&label(plugin))
            .observe(waited.as_secs_f64());
    }

    pub(super) fn backed_off(&self, plugin: &str, backoff: Duration) {
        self.backoff
            .get_or_create(&label(plugin))
            .observe(backoff.as_secs_f64());
    }

    pub(super) fn reconciled(&self, plugin: &str, result: &str, took: Duration) {
        self.reconciles
            .get_or_create(&result_label(plugin, result))
            .inc();
        self.reconcile_time
            .get_or_create(&label(plugin))
            .observe(took.as_secs_f64());
        if result != "success" {
            self.retries.get_or_create(&label(plugin)).inc();
        }
    }

    /// Reconciles of `plugin` that succeeded and that failed.
    pub(super) fn reconcile_counts(&self, plugin: &str) -> (u64, u64) {
        let count = |result| {
            self.reconciles
                .get_or_create(&result_label(plugin, result))
                .get()
        };
        (count("success"), count("error"))
    }

    /// The metrics in Prometheus text format, gauges read from `informers`
    /// and the registered queues now.
    pub fn encode(&self, informers: &Informers) -> String {
        // Gauges mirror what runs now: a stopped plugin's queue or a freed
        // informer leaves no series behind.
        self.depth.clear();
        self.informer_objects.clear();
        self.watch_restarts.clear();
        for (plugin, queue) in self
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            if let Some(queue) = queue.upgrade() {
                self.depth
                    .get_or_create(&label(plugin))
                    .set(i64::try_from(queue.depth()).unwrap_or(i64::MAX));
            }
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
        let runtime = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(counts) = runtime.as_ref().map(Runtime::instances) {
            for (state, count) in [
                ("busy", counts.busy),
                ("idle", counts.idle),
                ("capacity", counts.capacity),
                ("max_warm", counts.max_warm),
            ] {
                self.instances
                    .get_or_create(&StateLabel { state })
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
            for (state, bytes) in [("idle", counts.idle_bytes), ("budget", counts.warm_bytes)] {
                self.warm_bytes
                    .get_or_create(&StateLabel { state })
                    .set(i64::try_from(bytes).unwrap_or(i64::MAX));
            }
        }
        drop(runtime);
        if let Some(shard) = self
            .shard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            self.shard_held
                .set(gauge(u64::from(shard.held().count_ones())));
            self.shard_members.set(gauge(shard.members() as u64));
            // A mirror of the ring's count, which only grows.
            self.shard_handovers
                .inc_by(shard.handovers().saturating_sub(self.shard_handovers.get()));
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

fn label(plugin: &str) -> PluginLabel {
    PluginLabel {
        plugin: plugin.to_owned(),
    }
}

fn result_label(plugin: &str, result: &str) -> ResultLabel {
    ResultLabel {
        plugin: plugin.to_owned(),
        result: result.to_owned(),
    }
}
