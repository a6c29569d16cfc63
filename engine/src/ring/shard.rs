//! [`Shard`]: what the workers and informers of this replica read of the
//! ring: the slots held, the gate every step passes, the steps in flight
//! per slot (a slot is released only once they are done).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use kubewasm_core::shard::ShardField;
use tokio::time::Instant;

use super::slots::{RingConfig, SLOTS, slot_of};

/// What the workers of this replica read: which slots they may start steps
/// for, and the steps in flight per slot.
#[derive(Debug)]
pub struct Shard {
    pub(super) field: ShardField,
    pub(super) held: AtomicU64,
    pub(super) in_flight: Vec<AtomicUsize>,
    /// Per slot, bumped each time it is acquired: a step begun under one
    /// holding never writes under the next.
    pub(super) holdings: Vec<AtomicU64>,
    /// When the last renewal that succeeded was sent, in ms since `epoch`.
    pub(super) renewed: AtomicU64,
    /// Bumped by each fence: a slot Lease written before one is not held
    /// after it.
    pub(super) fences: AtomicU64,
    pub(super) epoch: Instant,
    pub(super) renew_deadline: Duration,
    pub(super) identity: String,
    pub(super) handovers: AtomicU64,
    pub(super) members: AtomicUsize,
    /// The held slots as the informers last heard of them (see
    /// [`Shard::slots`]).
    pub(super) slots: tokio::sync::watch::Sender<u64>,
    /// Where the durations of handovers go: from the first round this
    /// replica saw a slot should be its own to its acquisition.
    pub(super) handover_time: std::sync::OnceLock<prometheus_client::metrics::histogram::Histogram>,
}

/// A step started for a slot: in flight until dropped.
#[derive(Debug)]
pub struct InFlight<'a> {
    shard: &'a Shard,
    slot: usize,
    holding: u64,
}

impl InFlight<'_> {
    /// The slot of its primary.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Whether the step may still write: its replica holds the slot and is
    /// not fenced.
    pub fn valid(&self) -> bool {
        self.shard.holds(self.slot, self.holding)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(count) = self.shard.in_flight.get(self.slot) {
            count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Shard {
    pub(super) fn new(config: &RingConfig) -> Self {
        Self {
            field: config.field,
            held: AtomicU64::new(0),
            in_flight: (0..SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            holdings: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            renewed: AtomicU64::new(0),
            fences: AtomicU64::new(0),
            epoch: Instant::now(),
            renew_deadline: config.renew_deadline,
            identity: config.identity.clone(),
            handovers: AtomicU64::new(0),
            members: AtomicUsize::new(0),
            slots: tokio::sync::watch::Sender::new(0),
            handover_time: std::sync::OnceLock::new(),
        }
    }

    /// Records the duration of each handover to this replica in
    /// `histogram` (from the first call on).
    pub fn record_handovers(&self, histogram: prometheus_client::metrics::histogram::Histogram) {
        let _ = self.handover_time.set(histogram);
    }

    /// The slots held, told once per ring round that changed them: what
    /// the informers of sharded types hold ([`super::share`]). A fence
    /// empties it; caching, unlike starting steps, needs no renewal.
    pub fn slots(&self) -> tokio::sync::watch::Receiver<u64> {
        self.slots.subscribe()
    }

    /// Tells the informers the slots held now.
    pub(super) fn publish(&self) {
        let held = self.held.load(Ordering::SeqCst);
        self.slots
            .send_if_modified(|told| std::mem::replace(told, held) != held);
    }

    /// What a primary is placed by.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub(super) fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Holds nothing any more (told to the informers), and bumps the
    /// fences; whether anything was held.
    pub(super) fn fence(&self) -> bool {
        self.fences.fetch_add(1, Ordering::SeqCst);
        let held = self.held.swap(0, Ordering::SeqCst);
        self.publish();
        held != 0
    }

    /// Fences so far.
    pub(super) fn fences(&self) -> u64 {
        self.fences.load(Ordering::SeqCst)
    }

    /// Records a renewal that succeeded, sent at `sent` (ms since `epoch`).
    /// One sent after a lapse (the previous renewal older than the renew
    /// deadline: the process stopped, or its requests hung) fences first:
    /// the others may have seen this replica gone and taken its slots
    /// meanwhile, so nothing held before is held after. Whether it fenced
    /// anything held.
    pub(super) fn renewed_at(&self, sent: u64) -> bool {
        let previous = self.renewed.load(Ordering::SeqCst);
        let deadline = u64::try_from(self.renew_deadline.as_millis()).unwrap_or(u64::MAX);
        let fenced = sent.saturating_sub(previous) >= deadline && self.fence();
        self.renewed.store(sent, Ordering::SeqCst);
        fenced
    }

    pub(super) fn fresh(&self) -> bool {
        let renewed = self.renewed.load(Ordering::SeqCst);
        renewed > 0
            && self.now_ms().saturating_sub(renewed)
                < u64::try_from(self.renew_deadline.as_millis()).unwrap_or(u64::MAX)
    }

    /// Starts a step for a primary of hash `hash` if this replica holds its
    /// slot and is not fenced: the step is in flight until the guard drops.
    pub fn begin(&self, hash: u64) -> Option<InFlight<'_>> {
        let slot = slot_of(hash) as usize;
        let count = self.in_flight.get(slot)?;
        // Counted first, checked second: a release that clears the slot
        // and then sees no step in flight has seen this one, or this one
        // sees the slot cleared.
        count.fetch_add(1, Ordering::SeqCst);
        let holding = self.holdings.get(slot)?.load(Ordering::SeqCst);
        let guard = InFlight {
            shard: self,
            slot,
            holding,
        };
        self.holds(slot, holding).then_some(guard)
    }

    /// Whether this replica, not fenced, holds `slot` in the same holding.
    pub(super) fn holds(&self, slot: usize, holding: u64) -> bool {
        self.fresh()
            && self.held.load(Ordering::SeqCst) & (1 << slot) != 0
            && self
                .holdings
                .get(slot)
                .is_some_and(|h| h.load(Ordering::SeqCst) == holding)
    }

    /// Marks `slot` held, in a new holding.
    pub(super) fn acquire(&self, slot: u32) {
        if let Some(holding) = self.holdings.get(slot as usize) {
            holding.fetch_add(1, Ordering::SeqCst);
        }
        self.held.fetch_or(1 << slot, Ordering::SeqCst);
    }

    /// Slots held now.
    pub fn held(&self) -> u64 {
        if self.fresh() {
            self.held.load(Ordering::SeqCst)
        } else {
            0
        }
    }

    /// Members seen live in the last round (this one included).
    pub fn members(&self) -> usize {
        self.members.load(Ordering::Relaxed)
    }

    /// Slots acquired so far.
    pub fn handovers(&self) -> u64 {
        self.handovers.load(Ordering::Relaxed)
    }

    /// Stops starting steps for `slot`, then waits for its steps in
    /// flight.
    pub(super) async fn drain(&self, slot: u32) {
        self.held.fetch_and(!(1 << slot), Ordering::SeqCst);
        if let Some(count) = self.in_flight.get(slot as usize) {
            while count.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_should_count_steps_and_refuse_slots_not_held_or_when_fenced() {
        let config = RingConfig::new("ns", "ring", "a", Duration::from_secs(15));
        let shard = Shard::new(&config);
        assert!(shard.begin(0).is_none(), "nothing held yet");
        shard.held.store(1, Ordering::SeqCst);
        assert!(shard.begin(0).is_none(), "never renewed: fenced");
        shard.renewed.store(shard.now_ms().max(1), Ordering::SeqCst);
        let step = shard.begin(0).expect("held and fresh");
        assert_eq!(shard.in_flight[0].load(Ordering::SeqCst), 1);
        assert!(shard.begin(u64::MAX).is_none(), "another slot");
        drop(step);
        assert_eq!(shard.in_flight[0].load(Ordering::SeqCst), 0);
        // A step begun under one holding of its slot never writes under the
        // next (the slot lost and taken again meanwhile).
        let step = shard.begin(0).expect("held");
        assert!(step.valid());
        shard.held.store(0, Ordering::SeqCst);
        shard.acquire(0);
        assert!(!step.valid());
        assert!(shard.begin(0).is_some_and(|s| s.valid()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_after_a_lapse_should_fence_before_it_refreshes() {
        // Renew deadline 10 s.
        let config = RingConfig::new("ns", "ring", "a", Duration::from_secs(15));
        let shard = Shard::new(&config);
        assert!(!shard.renewed_at(shard.now_ms().max(1)));
        shard.acquire(0);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!shard.renewed_at(shard.now_ms()), "in time");
        assert_eq!((shard.held(), shard.fences()), (1, 0));
        // Stopped past the deadline, then resumed: the first renewal that
        // succeeds drops what was held before it makes the replica fresh.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(shard.held(), 0, "not fresh");
        assert!(shard.renewed_at(shard.now_ms()));
        assert!(shard.fresh());
        assert_eq!((shard.held(), shard.fences()), (0, 1));
        assert_eq!(*shard.slots().borrow(), 0, "told to the informers");
    }
}
