//! kubewasm's series of a ring (`--sharding`): the slots this replica
//! holds, the members it sees and the handovers it made, mirrored from its
//! [`Shard`] when scraped ([`ShardSeries::sample`]), and the time each
//! handover took, which the shard records as it goes.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::series::{count, seconds};
use crate::ring::Shard;

/// A ring's series (see the module documentation).
pub(super) struct ShardSeries {
    held: Gauge,
    members: Gauge,
    handovers: Counter,
    handover_time: Histogram,
    shard: Mutex<Option<Arc<Shard>>>,
}

impl ShardSeries {
    /// The series, registered in `own` (kubewasm's prefix).
    pub(super) fn new(own: &mut Registry) -> Self {
        let series = Self {
            held: Gauge::default(),
            members: Gauge::default(),
            handovers: Counter::default(),
            handover_time: seconds(),
            shard: Mutex::default(),
        };
        own.register(
            "shard_slots_held",
            "Slots of the hash space this replica holds",
            series.held.clone(),
        );
        own.register(
            "shard_members",
            "Live members of the ring this replica sees",
            series.members.clone(),
        );
        own.register(
            "shard_handovers",
            "Slots this replica acquired",
            series.handovers.clone(),
        );
        own.register(
            "shard_handover_seconds",
            "From when this replica saw a slot should be its own to its acquisition",
            series.handover_time.clone(),
        );
        series
    }

    /// Shows `shard`'s slots, members and handovers.
    pub(super) fn watch(&self, shard: &Arc<Shard>) {
        shard.record_handovers(self.handover_time.clone());
        *self.shard.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(shard));
    }

    /// Mirrors the watched shard into the series.
    pub(super) fn sample(&self) {
        let shard = self.shard.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(shard) = shard.as_ref() else {
            return;
        };
        self.held.set(count(shard.held().count_ones() as usize));
        self.members.set(count(shard.members()));
        // A mirror of the ring's count, which only grows.
        self.handovers
            .inc_by(shard.handovers().saturating_sub(self.handovers.get()));
    }
}
