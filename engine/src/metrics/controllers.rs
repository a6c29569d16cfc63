//! controller-runtime's series: each plugin a controller, its work queue
//! named after it ([`super`]'s table lists them), and the leader-election
//! gauge. The queues' state is mirrored into them when scraped
//! ([`Controllers::sample`]); the rest the engine counts as it goes.

use std::sync::Weak;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::series::{FloatGauge, count, seconds};
use crate::queue::WorkQueue;

/// controller-runtime's label of a controller's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ControllerLabel {
    pub(super) controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ControllerResultLabel {
    pub(super) controller: String,
    pub(super) result: &'static str,
}

/// client-go's work queue labels, as controller-runtime sets them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct QueueLabel {
    pub(super) name: String,
    pub(super) controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LeaseLabel {
    pub(super) name: String,
}

/// How a reconcile ended: controller-runtime's `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reconciled {
    /// It succeeded.
    Success,
    /// It succeeded and asked to be called again after a while.
    RequeueAfter,
    /// It failed: retried with backoff.
    Error,
}

impl Reconciled {
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::RequeueAfter => "requeue_after",
            Self::Error => "error",
        }
    }
}

/// A plugin's work queue, shown while it lives.
pub(super) struct Queue {
    pub(super) plugin: String,
    pub(super) queue: Weak<WorkQueue>,
    /// Its workers: the most keys reconciled at once.
    pub(super) concurrency: usize,
}

/// controller-runtime's series of its controllers and their queues.
pub(super) struct Controllers {
    pub(super) reconciles: Family<ControllerResultLabel, Counter>,
    pub(super) errors: Family<ControllerLabel, Counter>,
    pub(super) panics: Family<ControllerLabel, Counter>,
    pub(super) time: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    pub(super) active_workers: Family<ControllerLabel, Gauge>,
    pub(super) max_concurrent: Family<ControllerLabel, Gauge>,
    pub(super) depth: Family<QueueLabel, Gauge>,
    pub(super) adds: Family<QueueLabel, Counter>,
    pub(super) queue_wait: Family<QueueLabel, Histogram, fn() -> Histogram>,
    pub(super) work: Family<QueueLabel, Histogram, fn() -> Histogram>,
    pub(super) unfinished: Family<QueueLabel, FloatGauge>,
    pub(super) longest: Family<QueueLabel, FloatGauge>,
    pub(super) retries: Family<QueueLabel, Counter>,
    pub(super) leading: Family<LeaseLabel, Gauge>,
}

impl Controllers {
    pub(super) fn new() -> Self {
        Self {
            reconciles: Family::default(),
            errors: Family::default(),
            panics: Family::default(),
            time: Family::new_with_constructor(seconds as fn() -> Histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_wait: Family::new_with_constructor(seconds as fn() -> Histogram),
            work: Family::new_with_constructor(seconds as fn() -> Histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
            leading: Family::default(),
        }
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        let runtime = registry.sub_registry_with_prefix("controller_runtime");
        runtime.register(
            "reconcile",
            "Total number of reconciliations per controller",
            self.reconciles.clone(),
        );
        runtime.register(
            "reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.errors.clone(),
        );
        runtime.register(
            "reconcile_panics",
            "Total number of reconciliation panics per controller (guest traps and panics)",
            self.panics.clone(),
        );
        runtime.register(
            "reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.time.clone(),
        );
        runtime.register(
            "active_workers",
            "Number of currently used workers per controller",
            self.active_workers.clone(),
        );
        runtime.register(
            "max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
        let queue = registry.sub_registry_with_prefix("workqueue");
        queue.register("depth", "Current depth of workqueue", self.depth.clone());
        queue.register(
            "adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        queue.register(
            "queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            self.queue_wait.clone(),
        );
        queue.register(
            "work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            self.work.clone(),
        );
        queue.register(
            "unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            self.unfinished.clone(),
        );
        queue.register(
            "longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            self.longest.clone(),
        );
        queue.register(
            "retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
        registry.sub_registry_with_prefix("leader_election").register(
            "master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            self.leading.clone(),
        );
    }

    /// Mirrors the queues' state into their series.
    pub(super) fn sample(&self, queues: &[Queue]) {
        for family in [&self.active_workers, &self.max_concurrent] {
            family.clear();
        }
        self.depth.clear();
        self.adds.clear();
        self.unfinished.clear();
        self.longest.clear();
        for registered in queues {
            let Some(queue) = registered.queue.upgrade() else {
                continue;
            };
            let plugin = &registered.plugin;
            let working = queue.working();
            self.active_workers
                .get_or_create(&controller(plugin))
                .set(count(working.keys));
            self.max_concurrent
                .get_or_create(&controller(plugin))
                .set(count(registered.concurrency));
            let label = queue_label(plugin);
            self.depth.get_or_create(&label).set(count(queue.depth()));
            self.adds.get_or_create(&label).inc_by(queue.adds());
            self.unfinished
                .get_or_create(&label)
                .set(working.total.as_secs_f64());
            self.longest
                .get_or_create(&label)
                .set(working.longest.as_secs_f64());
        }
    }
}

pub(super) fn controller(plugin: &str) -> ControllerLabel {
    ControllerLabel {
        controller: plugin.to_owned(),
    }
}

pub(super) fn controller_result(plugin: &str, result: &'static str) -> ControllerResultLabel {
    ControllerResultLabel {
        controller: plugin.to_owned(),
        result,
    }
}

pub(super) fn queue_label(plugin: &str) -> QueueLabel {
    QueueLabel {
        name: plugin.to_owned(),
        controller: plugin.to_owned(),
    }
}
