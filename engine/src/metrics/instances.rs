//! kubewasm's series of the instances: the host-wide budget's slots and
//! the warm instances' memory (mirrored from the runtime when scraped,
//! [`Instances::sample`]), and per plugin the time to instantiate, the
//! wait for a slot, the steps not run for want of one and the guest's
//! memory ([`super`]'s table lists them).

use std::sync::{Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::series::{PluginLabel, StateLabel, count, label, seconds};
use kubewasm_runtime::Runtime;
use kubewasm_runtime::step::{Call, Step};

type Seconds = Family<PluginLabel, Histogram, fn() -> Histogram>;

/// The instances' series (see the module documentation).
pub(super) struct Instances {
    instantiate_time: Seconds,
    wait: Seconds,
    wait_timeouts: Family<PluginLabel, Counter>,
    slots: Family<StateLabel, Gauge>,
    warm_bytes: Family<StateLabel, Gauge>,
    guest_memory: Family<PluginLabel, Gauge>,
    /// The runtime whose instance budget `slots` shows.
    runtime: Mutex<Option<Runtime>>,
}

impl Instances {
    /// The series, registered in `own` (kubewasm's prefix).
    pub(super) fn new(own: &mut Registry) -> Self {
        let instances = Self {
            instantiate_time: Family::new_with_constructor(seconds as fn() -> Histogram),
            wait: Family::new_with_constructor(seconds as fn() -> Histogram),
            wait_timeouts: Family::default(),
            slots: Family::default(),
            warm_bytes: Family::default(),
            guest_memory: Family::default(),
            runtime: Mutex::default(),
        };
        own.register(
            "instantiate_time_seconds",
            "Time creating an instance for a call",
            instances.instantiate_time.clone(),
        );
        own.register(
            "instance_wait_seconds",
            "Time a step waited for an instance slot, every one being in a call",
            instances.wait.clone(),
        );
        own.register(
            "instance_wait_timeouts",
            "Steps not run because no instance slot came free in time",
            instances.wait_timeouts.clone(),
        );
        own.register(
            "instances",
            "Instance slots of the host's budget by state",
            instances.slots.clone(),
        );
        own.register(
            "instance_warm_bytes",
            "Linear memory of the warm instances: held now, and the most they may hold",
            instances.warm_bytes.clone(),
        );
        own.register(
            "guest_memory_bytes",
            "Linear memory of the instance of the plugin's last call",
            instances.guest_memory.clone(),
        );
        instances
    }

    /// Shows `runtime`'s instance budget (the first runtime watched).
    pub(super) fn watch(&self, runtime: &Runtime) {
        let mut watched = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
        if watched.is_none() {
            *watched = Some(runtime.clone());
        }
    }

    /// Starts `plugin`'s counter at zero.
    pub(super) fn started(&self, plugin: &str) {
        self.wait_timeouts.get_or_create(&label(plugin)).inc_by(0);
    }

    /// Records what a step of `plugin` waited, took to instantiate and
    /// left in its guest's memory.
    pub(super) fn stepped(&self, plugin: &str, step: &Step) {
        let plugin = label(plugin);
        self.instantiate_time
            .get_or_create(&plugin)
            .observe(step.stats.instantiate.as_secs_f64());
        if step.call != Call::None {
            self.wait
                .get_or_create(&plugin)
                .observe(step.stats.wait.as_secs_f64());
            self.guest_memory
                .get_or_create(&plugin)
                .set(i64::try_from(step.stats.memory).unwrap_or(i64::MAX));
        }
    }

    /// Counts a step of `plugin` not run: no slot came free in time.
    pub(super) fn not_run(&self, plugin: &str) {
        self.wait_timeouts.get_or_create(&label(plugin)).inc();
    }

    /// Drops a stopped plugin's gauge.
    pub(super) fn forget(&self, plugin: &str) {
        self.guest_memory.remove(&label(plugin));
    }

    /// Mirrors the watched runtime's budget into its gauges.
    pub(super) fn sample(&self) {
        let runtime = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(counts) = runtime.as_ref().map(Runtime::instances) else {
            return;
        };
        for (state, n) in [
            ("busy", counts.busy),
            ("idle", counts.idle),
            ("capacity", counts.capacity),
            ("max_warm", counts.max_warm),
        ] {
            self.slots
                .get_or_create(&StateLabel { state })
                .set(count(n));
        }
        for (state, bytes) in [("idle", counts.idle_bytes), ("budget", counts.warm_bytes)] {
            self.warm_bytes
                .get_or_create(&StateLabel { state })
                .set(count(bytes));
        }
    }
}
