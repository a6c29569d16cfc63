//! What every controller of the host shares.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::applier::Applier;
use crate::fair::Workers;
use crate::informer::Informers;
use crate::metrics::Metrics;
use crate::ring::Shard;

/// The informers, the writer, the workers, the metrics, and the leadership
/// and ring every controller follows.
#[derive(Clone)]
pub struct Shared {
    /// The informers.
    pub informers: Informers,
    /// The writer.
    pub applier: Applier,
    /// The host's workers: a permit per step, shared fairly.
    pub workers: Arc<Workers>,
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// Whether this process leads (always, without leader election): the
    /// queues hand out keys only then.
    pub leading: watch::Receiver<bool>,
    /// With sharding, the slots this replica may start steps for.
    pub shard: Option<Arc<Shard>>,
    /// How often every primary is queued again when a plugin declares no
    /// `resync-seconds`.
    pub resync: Duration,
    /// Where steps are recorded, if they are.
    pub recorder: Option<Arc<crate::recorder::Recorder>>,
    /// The host-wide bound on the keys whose inputs are remembered.
    pub remembered: Arc<super::memo::Remembered>,
    /// The guest calls under way, for `/healthz`.
    pub calls: Arc<crate::health::Calls>,
    /// The plugins whose calls run at the lowest CPU priority.
    pub demotion: Arc<crate::demotion::Demotion>,
}
