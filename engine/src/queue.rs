//! A plugin's work queue: which key to reconcile next, and when.
//!
//! Each plugin has one. Keys come in from watch events (a primary changed, or
//! a secondary mapped to it), from the outcome of a reconcile (an error, a
//! `requeue-after`) and from the periodic resync. The queue decides the order
//! and the timing; the engine's workers [`WorkQueue::next`] a key, reconcile
//! it and report back with [`WorkQueue::done`].
//!
//! # States of a key
//! ```text
//!            add / add_after / retry            next
//!   absent ──────────────────────────▶ queued ───────▶ processing ──done──▶ absent
//!     │                                  ▲                 │ add while processing
//!     │ add_listed                       └──── done ─── processing + pending
//!     ▼                                                    ▲
//!   listed ─────────────── next (nothing else ready) ──────┘
//!     └── add ──▶ queued (leaves the listed set)
//! ```
//!
//! # Guarantees
//! - **Deduplication.** A key queued twice is reconciled once; the second
//!   add keeps the earlier of the two times and the higher of the two
//!   priorities.
//! - **Never concurrently with itself.** A key added while it is processing
//!   is kept pending and queued when [`WorkQueue::done`] is called, so a
//!   change seen during a reconcile is always followed by one more.
//! - **Per-key exponential backoff.** Each failure of a key doubles its
//!   delay, from [`Backoff::base`] (client-go's 5 ms) to [`Backoff::max`]
//!   (1000 s); a success forgets the count. The queue keeps the last
//!   failure's message too ([`WorkQueue::failure`]), for the next attempt.
//! - **Overall rate limit on retries.** Retries also take a token from a
//!   bucket (client-go's 10 per second, burst 100), so a storm of failures
//!   cannot flood the API server; fresh events are not limited.
//! - **Fresh events first.** Among ready keys, [`Priority::Event`] goes
//!   before [`Priority::Requeue`], before [`Priority::Retry`] and
//!   [`Priority::Resync`] (as controller-runtime's priority queue orders
//!   them); within a priority, first come first served. Listed keys
//!   ([`WorkQueue::add_listed`]: an informer's first list, the objects a
//!   new plugin is shown) are events too: the listing takes its place in
//!   that order when its first key comes, and its keys are served there in
//!   key order. (Serving a first list after every fresh event, as
//!   controller-runtime's priority queue can, re-runs each new primary at
//!   once for the children its own reconcile just made: 10,000 MyApps took
//!   1.5 to 2 times as long to converge, BENCHMARKS.md's engine scenario.)
//! - **Settled keys last.** A listed key whose object the plugin's own
//!   field manager wrote last, no other manager since
//!   ([`WorkQueue::set_settled`]: read from its `managedFields` when the
//!   listing reaches it), most likely needs nothing: it is put aside and
//!   handed out only when no other key is ready. After a restart, or in a
//!   ring when a replica takes over another's slots, the objects created
//!   or changed meanwhile then run before the thousands already converged
//!   (whose calls and writes, with nothing remembered of them, all run).
//! - **Listed keys in bulk.** A listing of a whole store
//!   ([`WorkQueue::add_listed_in`]: the primary's) is held as a walk over
//!   the store, not key by key, and other listed keys in one ordered set (a
//!   pointer each) until handed out ([`super::listing`]); a key listed
//!   while queued is not listed again, and a listed key that is added
//!   leaves the listing, so neither runs twice for one cause. A key listed while processing runs once more
//!   after, as for any add (after a swap, the run in flight is the old
//!   version's).
//! - **Paused.** While [`WorkQueue::set_paused`] holds it (a standby that
//!   does not lead), keys are queued and deduplicated but none is handed
//!   out.
//! - **Shut down.** After [`WorkQueue::shutdown`] no new key is handed out
//!   and [`WorkQueue::next`] returns `None`.
//!
//! - **Memory follows the backlog.** Each key is held once ([`Key`], shared
//!   with the informer store it came from when it came from one), and the
//!   indexes give memory back once most of it is empty: the initial list
//!   queues every key at once, and that peak must not stay.
//!
//! Time is read from the tokio clock, so tests run with paused time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::listing::{Key, Keys, Listed};
pub use crate::backoff::Backoff;
use crate::backoff::Bucket;
use kubewasm_runtime::resource::ObjectKey;

/// A key's consecutive failures and what the last one said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Failures in a row (1 after the first).
    pub count: u32,
    /// The last failure's message.
    pub message: String,
}

/// Why a key is queued, in the order ready keys are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Periodic resync: nothing changed, reconcile anyway.
    Resync,
    /// A retry after an error.
    Retry,
    /// The plugin asked to be called again.
    Requeue,
    /// An object the plugin watches changed.
    Event,
}

/// Where a queued key sits: the time it is ready and its place among ready
/// keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Slot {
    ready_at: Instant,
    priority: Priority,
}

impl Slot {
    /// Ready at `now`, as a fresh event.
    fn event(now: Instant) -> Self {
        Self {
            ready_at: now,
            priority: Priority::Event,
        }
    }
}

/// The key's state, as in the module's diagram.
#[derive(Debug)]
enum State {
    Queued {
        slot: Slot,
        seq: u64,
    },
    /// Handed out; `cause`: the priority it was queued with.
    Processing {
        pending: Option<Slot>,
        cause: Priority,
    },
}

/// Ready keys ordered by priority (highest first), then arrival.
type ReadyOrder = (Reverse<Priority>, u64);

#[derive(Debug, Default)]
struct Inner {
    states: HashMap<Key, State>,
    /// Queued keys not yet ready, by time.
    waiting: BTreeMap<(Instant, u64), Key>,
    /// Queued keys that are ready.
    ready: BTreeMap<ReadyOrder, Key>,
    /// Listed keys not handed out yet; since when the oldest waits, and
    /// the listing's place among ready events.
    listed: Listed,
    listed_since: Option<Instant>,
    listed_seq: u64,
    /// Whether a key's object is settled (see the module documentation).
    settled: Option<Settled>,
    /// Listed keys found settled, handed out when nothing else is ready;
    /// since when the oldest waits.
    deferred: BTreeSet<Key>,
    deferred_since: Option<Instant>,
    failures: HashMap<Key, Failure>,
    seq: u64,
    /// The overall retry rate's token bucket.
    retries: Bucket,
    /// Keys handed out and not done yet, with when each was.
    working: Vec<(Key, Instant)>,
    /// Keys that entered the queue (see [`WorkQueue::adds`]).
    adds: u64,
    paused: bool,
    shut_down: bool,
}

/// Whether a listed key's object is settled: written last by the plugin's
/// own field manager.
#[derive(Clone)]
pub struct Settled(Arc<dyn Fn(&ObjectKey) -> bool + Send + Sync>);

impl Settled {
    /// Settled when `is` says so.
    pub fn new(is: impl Fn(&ObjectKey) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(is))
    }
}

impl std::fmt::Debug for Settled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Settled")
    }
}

/// A plugin's work queue (see the module documentation).
#[derive(Debug)]
pub struct WorkQueue {
    inner: Mutex<Inner>,
    notify: Notify,
    backoff: Backoff,
}

/// The keys processing now ([`WorkQueue::working`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Working {
    /// How many.
    pub keys: usize,
    /// How long they have been processing, added up.
    pub total: Duration,
    /// How long the one processing longest has been.
    pub longest: Duration,
}

/// What a finished reconcile asks of the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// Success: forget the key's failures.
    Forget,
    /// Success, and call again after this long.
    RequeueAfter(Duration),
    /// Failure, with its message: retry with backoff.
    Retry(String),
    /// Failure the server asked to retry no sooner than this (a 429's
    /// `retryAfterSeconds`): as [`Done::Retry`], waiting at least that long.
    Throttled(String, Duration),
    /// Not run (no instance slot came free in time): hand the key out
    /// again at once, as a requeue, its failures as they were. Never a
    /// failure, never a backoff.
    Again,
}

impl WorkQueue {
    /// An empty queue.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            inner: Mutex::new(Inner {
                retries: Bucket::full(&backoff),
                ..Inner::default()
            }),
            notify: Notify::new(),
            backoff,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `key` now.
    pub fn add(&self, key: impl Into<Key>, priority: Priority) {
        self.add_after(key, Duration::ZERO, priority);
    }

    /// Queues `key` to be ready after `delay`.
    pub fn add_after(&self, key: impl Into<Key>, delay: Duration, priority: Priority) {
        let ready_at = Instant::now() + delay;
        let mut inner = self.lock();
        if inner.shut_down {
            return;
        }
        inner.add(key.into(), Slot { ready_at, priority });
        drop(inner);
        self.notify.notify_waiters();
    }

    /// Lists `key` (see the module documentation): it runs in the
    /// listing's place, unless it is queued already; if it is processing,
    /// it runs once more after (the run in flight may be of a plugin's
    /// version that is being replaced).
    pub fn add_listed(&self, key: impl Into<Key>) {
        self.list(key.into(), None);
    }

    /// Lists `key`, one of the keys `source` holds, as
    /// [`Self::add_listed`] does; a listing of a whole store is then held
    /// as a walk over it, not key by key (see [`super::listing`]).
    pub fn add_listed_in(&self, key: Key, source: &Arc<dyn Keys>) {
        self.list(key, Some(source));
    }

    fn list(&self, key: Key, source: Option<&Arc<dyn Keys>>) {
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.shut_down {
            return;
        }
        let was_empty = inner.listed.is_empty();
        let state = inner.states.get(&key);
        let (queued, processing) = (
            state.is_some(),
            matches!(state, Some(State::Processing { .. })),
        );
        if !queued {
            inner.adds += 1;
        }
        match source {
            // A listing of a whole store: walked, passing over this key if
            // it is queued or processing.
            Some(source) => {
                inner.listed.list_in(Arc::clone(&key), source);
                if queued {
                    inner.listed.remove(&key);
                }
            }
            None if !queued => inner.listed.list(Arc::clone(&key)),
            None => {}
        }
        // Processing: once more after (after a swap the run in flight is
        // the old version's); queued: it runs as queued.
        if processing {
            inner.add(key, Slot::event(now));
        }
        if was_empty && !inner.listed.is_empty() {
            inner.seq += 1;
            inner.listed_seq = inner.seq;
            inner.listed_since = Some(now);
        }
        drop(inner);
        self.notify.notify_waiters();
    }

    /// Reports the end of a reconcile of `key` handed out by [`Self::next`];
    /// after a failure, the backoff the retry waits.
    pub fn done(&self, key: &ObjectKey, done: Done) -> Option<Duration> {
        let now = Instant::now();
        let mut inner = self.lock();
        let (key, pending) = match inner.states.remove_entry(key) {
            Some((key, State::Processing { pending, .. })) => {
                inner.working.retain(|(working, _)| *working != key);
                (key, pending)
            }
            Some((key, queued @ State::Queued { .. })) => {
                // Not handed out: nothing to finish.
                inner.states.insert(key, queued);
                return None;
            }
            None => return None,
        };
        shrink(&mut inner.states);
        let then = match done {
            Done::Forget => {
                inner.forget(&key);
                None
            }
            Done::RequeueAfter(after) => {
                inner.forget(&key);
                Some(Slot {
                    ready_at: now + after,
                    priority: Priority::Requeue,
                })
            }
            Done::Again => Some(Slot {
                ready_at: now,
                priority: Priority::Requeue,
            }),
            Done::Retry(message) => {
                Some(inner.failed(&key, message, Duration::ZERO, now, &self.backoff))
            }
            Done::Throttled(message, at_least) => {
                Some(inner.failed(&key, message, at_least, now, &self.backoff))
            }
        };
        let backoff = then
            .filter(|s| s.priority == Priority::Retry)
            .map(|s| s.ready_at.saturating_duration_since(now));
        if !inner.shut_down {
            if let Some(pending) = pending {
                // Counted as an add when it came.
                inner.insert(Arc::clone(&key), pending);
            }
            if let Some(then) = then {
                inner.add(key, then);
            }
        }
        drop(inner);
        self.notify.notify_waiters();
        backoff
    }

    /// The next ready key and how long it waited ready for a worker,
    /// waiting until there is one; `None` once shut down. The key is then
    /// processing until [`Self::done`].
    pub async fn next(&self) -> Option<(Key, Duration)> {
        loop {
            let notified = self.notify.notified();
            let wake_at = {
                let mut inner = self.lock();
                if inner.shut_down {
                    return None;
                }
                if inner.paused {
                    None
                } else if let Some(next) = inner.pop(Instant::now()) {
                    return Some(next);
                } else {
                    inner.waiting.keys().next().map(|(at, _)| *at)
                }
            };
            match wake_at {
                Some(at) => {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// The next ready key, if one is ready now (as [`Self::next`], without
    /// waiting).
    pub fn try_next(&self) -> Option<(Key, Duration)> {
        let mut inner = self.lock();
        if inner.shut_down || inner.paused {
            return None;
        }
        inner.pop(Instant::now())
    }

    /// Why `key`, handed out and not done yet, was queued: the priority it
    /// had (the highest of its causes); `None` when it is not processing.
    pub fn cause(&self, key: &ObjectKey) -> Option<Priority> {
        match self.lock().states.get(key) {
            Some(State::Processing { cause, .. }) => Some(*cause),
            _ => None,
        }
    }

    /// Whether a key is ready to be handed out now.
    pub fn has_ready(&self) -> bool {
        let mut inner = self.lock();
        let now = Instant::now();
        !inner.shut_down
            && !inner.paused
            && (!inner.ready.is_empty()
                || inner
                    .waiting
                    .keys()
                    .next()
                    .is_some_and(|(at, _)| *at <= now)
                || !inner.listed.is_empty()
                || !inner.deferred.is_empty())
    }

    /// How to tell a settled key (see the module documentation); keys
    /// listed from now on are put aside when settled.
    pub fn set_settled(&self, settled: Settled) {
        self.lock().settled = Some(settled);
    }

    /// Pauses (or resumes) handing out keys; queued keys stay queued.
    pub fn set_paused(&self, paused: bool) {
        self.lock().paused = paused;
        self.notify.notify_waiters();
    }

    /// Stops handing out keys; waiting [`Self::next`] calls return `None`.
    pub fn shutdown(&self) {
        self.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    /// Whether no key is processing and none is ready now (some may wait
    /// for later: a backoff, a requeue, a resync). A worker that finds its
    /// queue idle lets the plugin's warm instances go.
    pub fn is_idle(&self) -> bool {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.working.is_empty()
            && inner.ready.is_empty()
            && inner.waiting.keys().next().is_none_or(|(at, _)| *at > now)
            && inner.listed.is_empty()
            && inner.deferred.is_empty()
    }

    /// Keys queued (ready or not, listed included), not counting those
    /// processing.
    pub fn depth(&self) -> usize {
        let inner = self.lock();
        inner.waiting.len() + inner.ready.len() + inner.listed.remaining() + inner.deferred.len()
    }

    /// Keys that entered the queue so far: an add, a listing, a requeue or
    /// a retry of a key neither queued nor pending (one already queued is
    /// merged, not added), as client-go's `workqueue_adds_total` counts.
    pub fn adds(&self) -> u64 {
        self.lock().adds
    }

    /// The keys handed out and not done yet: how many, how long they have
    /// been processing together and the longest of them (client-go's
    /// unfinished work and longest running processor).
    pub fn working(&self) -> Working {
        let now = Instant::now();
        let inner = self.lock();
        let times = inner
            .working
            .iter()
            .map(|(_, since)| now.saturating_duration_since(*since));
        Working {
            keys: inner.working.len(),
            total: times.clone().sum(),
            longest: times.max().unwrap_or_default(),
        }
    }

    /// The consecutive failures of `key`, if its last reconcile failed.
    pub fn failure(&self, key: &ObjectKey) -> Option<Failure> {
        self.lock().failures.get(key).cloned()
    }
}

impl Inner {
    /// Queues `key` at `slot` as [`Self::insert`] does, counting an add
    /// when the key was neither queued nor pending.
    fn add(&mut self, key: Key, slot: Slot) {
        if self.insert(key, slot) {
            self.adds += 1;
        }
    }

    /// Queues `key` at `slot`, or marks it pending if it is processing;
    /// whether it was neither queued nor pending before.
    fn insert(&mut self, key: Key, slot: Slot) -> bool {
        match self.states.get_mut(&key) {
            Some(State::Processing { pending, .. }) => {
                let new = pending.is_none();
                *pending = Some(pending.map_or(slot, |p| merge(p, slot)));
                new
            }
            Some(State::Queued { slot: old, seq }) => {
                let merged = merge(*old, slot);
                if merged != *old {
                    let (old, seq) = (*old, *seq);
                    self.unlink(old, seq);
                    self.link(key, merged);
                }
                false
            }
            None => {
                self.listed.remove(&key);
                self.deferred.remove(&key);
                self.link(key, slot);
                true
            }
        }
    }

    fn link(&mut self, key: Key, slot: Slot) {
        self.seq += 1;
        let seq = self.seq;
        // A key ready now skips the time index: a burst of fresh events
        // (a first list) is held in one index, not two.
        if slot.ready_at <= Instant::now() {
            self.ready
                .insert((Reverse(slot.priority), seq), Arc::clone(&key));
        } else {
            self.waiting.insert((slot.ready_at, seq), Arc::clone(&key));
        }
        self.states.insert(key, State::Queued { slot, seq });
    }

    fn unlink(&mut self, slot: Slot, seq: u64) {
        if self.waiting.remove(&(slot.ready_at, seq)).is_none() {
            self.ready.remove(&(Reverse(slot.priority), seq));
        }
    }

    /// Hands out the best ready key, if any, with how long it was ready.
    fn pop(&mut self, now: Instant) -> Option<(Key, Duration)> {
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, seq), key) = entry.remove_entry();
            if let Some(State::Queued { slot, .. }) = self.states.get(&key) {
                let priority = slot.priority;
                self.ready.insert((Reverse(priority), seq), key);
            }
        }
        let listing = (Reverse(Priority::Event), self.listed_seq);
        if self
            .ready
            .first_key_value()
            .is_none_or(|(o, _)| listing < *o)
            && let Some(next) = self.pop_listed(now)
        {
            return Some(next);
        }
        let Some((_, key)) = self.ready.pop_first() else {
            return self.pop_deferred(now);
        };
        let (waited, cause) = match self.states.get(&key) {
            Some(State::Queued { slot, .. }) => {
                (now.saturating_duration_since(slot.ready_at), slot.priority)
            }
            _ => (Duration::ZERO, Priority::Event),
        };
        self.states.insert(
            Arc::clone(&key),
            State::Processing {
                pending: None,
                cause,
            },
        );
        self.working.push((Arc::clone(&key), now));
        Some((key, waited))
    }

    /// Hands out the first listed key, with how long the listed keys have
    /// waited.
    /// A walked key queued since is passed over (it runs as queued), one
    /// processing runs once more after.
    fn pop_listed(&mut self, now: Instant) -> Option<(Key, Duration)> {
        let waited = self
            .listed_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let key = loop {
            let Some(key) = self.listed.pop() else {
                self.listed_since = None;
                return None;
            };
            match self.states.get(&key) {
                None if self
                    .settled
                    .as_ref()
                    .is_some_and(|settled| (settled.0)(&key)) =>
                {
                    if self.deferred.is_empty() {
                        self.deferred_since = Some(now);
                    }
                    self.deferred.insert(key);
                }
                None => break key,
                Some(State::Queued { .. }) => {}
                Some(State::Processing { .. }) => {
                    // Counted as an add when it was listed.
                    self.insert(key, Slot::event(now));
                }
            }
        };
        if self.listed.is_empty() {
            self.listed_since = None;
        }
        Some(self.hand_out_listed(key, waited))
    }

    /// Hands out the first settled listed key, with how long the settled
    /// keys have waited.
    fn pop_deferred(&mut self, now: Instant) -> Option<(Key, Duration)> {
        let key = self.deferred.pop_first()?;
        let waited = self
            .deferred_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        if self.deferred.is_empty() {
            self.deferred_since = None;
        }
        Some(self.hand_out_listed(key, waited))
    }

    fn hand_out_listed(&mut self, key: Key, waited: Duration) -> (Key, Duration) {
        self.states.insert(
            Arc::clone(&key),
            State::Processing {
                pending: None,
                cause: Priority::Event,
            },
        );
        self.working.push((Arc::clone(&key), Instant::now()));
        (key, waited)
    }

    /// Counts a failure of `key`: its retry's slot, after the key's backoff,
    /// a retry token and `at_least`, whichever is last.
    fn failed(
        &mut self,
        key: &Key,
        message: String,
        at_least: Duration,
        now: Instant,
        backoff: &Backoff,
    ) -> Slot {
        let failure = self
            .failures
            .entry(Arc::clone(key))
            .and_modify(|f| f.count = f.count.saturating_add(1))
            .or_insert(Failure {
                count: 1,
                message: String::new(),
            });
        failure.message = message;
        let per_key = backoff.delay(failure.count);
        let overall = self.retries.take(now, backoff);
        Slot {
            ready_at: now + per_key.max(overall).max(at_least),
            priority: Priority::Retry,
        }
    }

    /// Forgets the failures of `key` (it succeeded).
    fn forget(&mut self, key: &ObjectKey) {
        self.failures.remove(key);
        shrink(&mut self.failures);
    }
}

/// Gives a map's memory back once three quarters of it is empty (keeping
/// room to double), so a burst of keys does not hold its peak for good.
fn shrink<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

/// The earlier time and the higher priority of two slots.
fn merge(a: Slot, b: Slot) -> Slot {
    Slot {
        ready_at: a.ready_at.min(b.ready_at),
        priority: a.priority.max(b.priority),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::namespaced("default", name)
    }

    fn no_rate_limit() -> Backoff {
        Backoff {
            rate: 0.0,
            ..Backoff::default()
        }
    }

    async fn next_now(queue: &WorkQueue) -> Option<ObjectKey> {
        tokio::time::timeout(Duration::ZERO, take(queue))
            .await
            .ok()
            .flatten()
    }

    async fn take(queue: &WorkQueue) -> Option<ObjectKey> {
        queue.next().await.map(|(key, _)| ObjectKey::clone(&key))
    }

    fn failure_count(queue: &WorkQueue, key: &ObjectKey) -> u32 {
        queue.failure(key).map_or(0, |f| f.count)
    }

    fn retry() -> Done {
        Done::Retry("failed".to_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_queued_twice_should_run_once() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        q.add(key("a"), Priority::Event);
        assert_eq!(q.depth(), 1);
        assert_eq!(next_now(&q).await, Some(key("a")));
        assert_eq!(next_now(&q).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_added_while_processing_should_run_once_more_after() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        let a = next_now(&q).await.expect("ready");
        q.add(key("a"), Priority::Event);
        assert_eq!(next_now(&q).await, None, "never concurrently with itself");
        q.done(&a, Done::Forget);
        assert_eq!(next_now(&q).await, Some(key("a")));
        q.done(&a, Done::Forget);
        assert_eq!(next_now(&q).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_should_back_off_per_key_and_reset_on_success() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        let mut a = take(&q).await.expect("key");
        for failures in 1..=4u32 {
            let failed_at = Instant::now();
            assert_eq!(
                q.done(&a, retry()),
                Some(Backoff::default().delay(failures))
            );
            assert_eq!(failure_count(&q, &a), failures);
            assert_eq!(next_now(&q).await, None, "not before its backoff");
            a = take(&q).await.expect("retried");
            assert_eq!(failed_at.elapsed(), Backoff::default().delay(failures));
        }
        q.done(&a, Done::Forget);
        assert_eq!(failure_count(&q, &a), 0);
        q.add(key("a"), Priority::Event);
        let a = take(&q).await.expect("key");
        let failed_at = Instant::now();
        q.done(&a, retry());
        let _ = take(&q).await.expect("retried");
        assert_eq!(failed_at.elapsed(), Duration::from_millis(5), "reset");
    }

    #[tokio::test(start_paused = true)]
    async fn a_listing_should_be_served_as_events_in_its_place_in_key_order() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("event-1"), Priority::Event);
        q.add_listed(key("listed-b"));
        q.add_listed(key("listed-a"));
        q.add_listed(key("listed-a"));
        q.add(key("resync"), Priority::Resync);
        q.add(key("event-2"), Priority::Event);
        assert_eq!(q.depth(), 5);
        let mut order = Vec::new();
        while let Some(k) = next_now(&q).await {
            order.push(k.name);
        }
        assert_eq!(
            order,
            ["event-1", "listed-a", "listed-b", "event-2", "resync"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn settled_listed_keys_should_run_after_every_other_key() {
        let q = WorkQueue::new(no_rate_limit());
        q.set_settled(Settled::new(|k: &ObjectKey| k.name.starts_with("old")));
        for name in ["old-c", "new-d", "old-a", "new-b"] {
            q.add_listed(key(name));
        }
        q.add(key("event"), Priority::Event);
        q.add(key("resync"), Priority::Resync);
        assert_eq!(q.depth(), 6);
        let mut order = vec![next_now(&q).await.expect("ready").name];
        // A settled key that changes before its turn runs as the change,
        // once.
        q.add(key("old-c"), Priority::Event);
        while let Some(k) = next_now(&q).await {
            order.push(k.name);
        }
        assert_eq!(
            order,
            ["new-b", "new-d", "event", "old-c", "resync", "old-a"]
        );
        assert_eq!(q.depth(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_listed_key_should_run_once_for_one_cause() {
        let q = WorkQueue::new(no_rate_limit());
        // Listed, then changed: it runs once, as the change.
        q.add_listed(key("a"));
        q.add(key("a"), Priority::Event);
        assert_eq!(q.depth(), 1);
        let a = next_now(&q).await.expect("ready");
        q.done(&a, Done::Forget);
        assert_eq!(next_now(&q).await, None);
        // Listed while processing (a new version shown what the old one
        // is reconciling): once more after, not at once.
        q.add(key("a"), Priority::Event);
        let a = next_now(&q).await.expect("ready");
        q.add_listed(key("a"));
        assert_eq!(next_now(&q).await, None, "never concurrently with itself");
        q.done(&a, Done::Forget);
        assert_eq!(next_now(&q).await, Some(key("a")));
        q.done(&a, Done::Forget);
        assert_eq!(q.depth(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn listed_keys_should_hold_no_per_key_state_until_handed_out() {
        let q = WorkQueue::new(no_rate_limit());
        for i in 0..10_000 {
            q.add_listed(key(&format!("k{i:05}")));
        }
        assert_eq!(q.depth(), 10_000);
        assert_eq!(q.lock().states.capacity(), 0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (first, waited) = q.next().await.expect("listed");
        assert_eq!(
            (first.name.as_str(), waited),
            ("k00000", Duration::from_secs(2))
        );
        assert_eq!(q.lock().states.len(), 1, "only the one processing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_walked_listing_should_hold_no_key_and_pass_over_keys_queued_since() {
        let names = ["a", "b", "c", "d"];
        let store: Arc<dyn Keys> = Arc::new(super::super::listing::KeySet(std::sync::Mutex::new(
            names.iter().map(|n| Arc::new(key(n))).collect(),
        )));
        let q = WorkQueue::new(no_rate_limit());
        // "b" is processing when the listing comes; "c" is queued.
        q.add(key("b"), Priority::Event);
        let b = take(&q).await.expect("b");
        q.add_after(key("c"), Duration::from_secs(60), Priority::Retry);
        for name in names {
            q.add_listed_in(Arc::new(key(name)), &store);
        }
        assert_eq!(
            q.depth(),
            3,
            "a and d listed, c waiting (b pending: processing)"
        );
        // "d" changes meanwhile: it runs as that event, not twice.
        q.add(key("d"), Priority::Event);
        assert_eq!(next_now(&q).await, Some(key("a")));
        assert_eq!(next_now(&q).await, Some(key("d")));
        assert_eq!(next_now(&q).await, None, "b still processing, c waiting");
        q.done(&b, Done::Forget);
        assert_eq!(next_now(&q).await, Some(key("b")), "once more after");
        assert_eq!(next_now(&q).await, None);
        assert!(q.lock().listed.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_queue_should_be_idle_with_nothing_processing_or_ready() {
        let q = WorkQueue::new(no_rate_limit());
        assert!(q.is_idle());
        q.add(key("a"), Priority::Event);
        assert!(!q.is_idle(), "ready");
        let a = take(&q).await.expect("a");
        assert!(!q.is_idle(), "processing");
        q.done(&a, Done::RequeueAfter(Duration::from_secs(5)));
        assert!(q.is_idle(), "only waiting for later");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!q.is_idle(), "ready again");
    }

    #[tokio::test(start_paused = true)]
    async fn adds_should_count_keys_entering_the_queue_and_working_the_keys_handed_out() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        q.add(key("a"), Priority::Event);
        q.add_listed(key("b"));
        assert_eq!(q.adds(), 2, "a queued twice is one add; b listed is one");
        let a = take(&q).await.expect("a");
        tokio::time::advance(Duration::from_secs(3)).await;
        let b = take(&q).await.expect("b");
        tokio::time::advance(Duration::from_secs(1)).await;
        let working = q.working();
        assert_eq!(
            working,
            Working {
                keys: 2,
                total: Duration::from_secs(5),
                longest: Duration::from_secs(4),
            }
        );
        q.add(key("a"), Priority::Event);
        q.add(key("a"), Priority::Event);
        assert_eq!(q.adds(), 3, "pending while processing: one add");
        q.done(&a, Done::Retry("failed".to_owned()));
        assert_eq!(q.adds(), 3, "the retry merges with the pending add");
        q.done(&b, Done::RequeueAfter(Duration::from_secs(1)));
        assert_eq!(q.adds(), 4, "a requeue is an add");
        assert_eq!(q.working(), Working::default(), "nothing processing");
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_failure_should_be_kept_until_a_success() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        let a = take(&q).await.expect("key");
        q.done(&a, Done::Retry("first".to_owned()));
        let a = take(&q).await.expect("retried");
        q.done(&a, Done::Retry("second".to_owned()));
        let second = Failure {
            count: 2,
            message: "second".to_owned(),
        };
        assert_eq!(q.failure(&a), Some(second));
        let a = take(&q).await.expect("retried");
        q.done(&a, Done::Forget);
        assert_eq!(q.failure(&a), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drained_backlog_should_give_its_memory_back() {
        let q = WorkQueue::new(no_rate_limit());
        for i in 0..10_000 {
            q.add(key(&format!("k{i}")), Priority::Event);
        }
        let mut done = 0;
        while let Some(k) = next_now(&q).await {
            q.done(&k, Done::Forget);
            done += 1;
        }
        assert_eq!(done, 10_000);
        let inner = q.lock();
        assert!(inner.states.is_empty());
        assert!(inner.states.capacity() <= 64, "{}", inner.states.capacity());
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_should_not_wait_for_a_retry_backoff() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        let a = take(&q).await.expect("key");
        for _ in 0..10 {
            q.done(&a, retry());
            let _ = take(&q).await.expect("retried");
        }
        q.done(&a, retry());
        q.add(key("a"), Priority::Event);
        assert_eq!(next_now(&q).await, Some(key("a")), "a change runs now");
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_should_wait_and_forget_failures() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        let a = take(&q).await.expect("key");
        q.done(&a, retry());
        let a = take(&q).await.expect("retry");
        let started = Instant::now();
        q.done(&a, Done::RequeueAfter(Duration::from_secs(30)));
        assert_eq!(failure_count(&q, &a), 0);
        assert_eq!(take(&q).await, Some(key("a")));
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_not_run_should_come_back_at_once_with_its_failures_untouched() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("a"), Priority::Event);
        let a = take(&q).await.expect("key");
        assert!(q.done(&a, retry()).is_some());
        let a = take(&q).await.expect("retry");
        let started = Instant::now();
        assert_eq!(q.done(&a, Done::Again), None, "no backoff");
        assert_eq!(failure_count(&q, &a), 1, "not a failure, not a success");
        assert_eq!(next_now(&q).await, Some(key("a")));
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn fresh_events_should_go_before_resyncs_and_retries() {
        let q = WorkQueue::new(no_rate_limit());
        q.add(key("resync"), Priority::Resync);
        q.add(key("requeue"), Priority::Requeue);
        q.add(key("event-1"), Priority::Event);
        q.add(key("event-2"), Priority::Event);
        let mut order = Vec::new();
        while let Some(k) = next_now(&q).await {
            order.push(k.name);
        }
        assert_eq!(order, ["event-1", "event-2", "requeue", "resync"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_add_should_keep_the_earlier_time_and_higher_priority() {
        let q = WorkQueue::new(no_rate_limit());
        q.add_after(key("a"), Duration::from_secs(60), Priority::Resync);
        q.add_after(key("a"), Duration::from_secs(5), Priority::Resync);
        q.add_after(key("a"), Duration::from_secs(90), Priority::Event);
        let started = Instant::now();
        assert_eq!(take(&q).await, Some(key("a")));
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(q.depth(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_should_share_an_overall_rate() {
        let q = WorkQueue::new(Backoff {
            base: Duration::from_millis(1),
            max: Duration::from_millis(1),
            rate: 10.0,
            burst: 2,
        });
        for i in 0..4 {
            q.add(key(&format!("k{i}")), Priority::Event);
        }
        let mut keys = Vec::new();
        while let Some(k) = next_now(&q).await {
            keys.push(k);
        }
        let started = Instant::now();
        for k in &keys {
            q.done(k, retry());
        }
        let mut at = Vec::new();
        for _ in 0..4 {
            let _ = take(&q).await.expect("retried");
            at.push(started.elapsed().as_millis());
        }
        // Two from the burst, then one each 100 ms.
        assert_eq!(at, [1, 1, 100, 200]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_queue_should_keep_keys_and_hand_them_out_once_resumed() {
        let q = std::sync::Arc::new(WorkQueue::new(no_rate_limit()));
        q.set_paused(true);
        q.add(key("a"), Priority::Event);
        q.add(key("a"), Priority::Event);
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { take(&q).await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiter.is_finished(), "nothing handed out while paused");
        assert_eq!(q.depth(), 1);
        q.set_paused(false);
        assert_eq!(waiter.await.expect("joined"), Some(key("a")));
    }

    #[tokio::test(start_paused = true)]
    async fn next_should_say_how_long_a_ready_key_waited_for_a_worker() {
        let q = WorkQueue::new(no_rate_limit());
        q.add_after(key("a"), Duration::from_secs(1), Priority::Event);
        tokio::time::sleep(Duration::from_secs(4)).await;
        let (a, waited) = q.next().await.expect("ready");
        assert_eq!((&*a, waited), (&key("a"), Duration::from_secs(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_should_end_waiting_workers() {
        let q = std::sync::Arc::new(WorkQueue::new(Backoff::default()));
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { take(&q).await }
        });
        tokio::task::yield_now().await;
        q.shutdown();
        assert_eq!(waiter.await.expect("joined"), None);
        q.add(key("a"), Priority::Event);
        assert_eq!(q.depth(), 0);
    }

    /// The queue against a model of the module's state diagram, over random
    /// sequences of adds, listings, hand-outs, ends and time passing.
    mod properties {
        use std::collections::BTreeMap;

        use proptest::prelude::*;

        use super::*;

        #[derive(Clone, Debug)]
        enum Op {
            Add(u8, Priority, u16),
            List(u8),
            Next,
            Done(usize, Outcome),
            Advance(u16),
        }

        #[derive(Clone, Debug)]
        enum Outcome {
            Forget,
            RequeueAfter(u16),
            Retry,
            Throttled(u16),
            Again,
        }

        /// A key's state as the module's diagram draws it; times in
        /// milliseconds since the start.
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Model {
            Queued(u64, Priority),
            Listed,
            Processing(Option<(u64, Priority)>),
        }

        fn merged(a: Option<(u64, Priority)>, b: (u64, Priority)) -> (u64, Priority) {
            a.map_or(b, |a| (a.0.min(b.0), a.1.max(b.1)))
        }

        fn priority() -> impl Strategy<Value = Priority> {
            prop_oneof![
                Just(Priority::Resync),
                Just(Priority::Retry),
                Just(Priority::Requeue),
                Just(Priority::Event),
            ]
        }

        fn op() -> impl Strategy<Value = Op> {
            let outcome = prop_oneof![
                Just(Outcome::Forget),
                (0..2_000u16).prop_map(Outcome::RequeueAfter),
                Just(Outcome::Retry),
                (0..5_000u16).prop_map(Outcome::Throttled),
                Just(Outcome::Again),
            ];
            prop_oneof![
                3 => (0..6u8, priority(), prop_oneof![Just(0u16), 0..500u16])
                    .prop_map(|(k, p, after)| Op::Add(k, p, after)),
                1 => (0..6u8).prop_map(Op::List),
                3 => Just(Op::Next),
                3 => (any::<usize>(), outcome).prop_map(|(i, o)| Op::Done(i, o)),
                1 => (1..3_000u16).prop_map(Op::Advance),
            ]
        }

        fn name(k: u8) -> ObjectKey {
            key(&format!("k{k}"))
        }

        /// Runs `ops`, checking each step against the model: a key handed
        /// out only when owed a run (queued and due, or listed), never while
        /// processing, the highest priority among those due; `None` only
        /// when none is due; a retry's delay the documented backoff of the
        /// key's failures in a row; then, time running on, every key owed
        /// a run gets it.
        fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            runtime.block_on(async move {
                let backoff = no_rate_limit();
                let q = WorkQueue::new(backoff);
                let start = Instant::now();
                let now = || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                let mut model: BTreeMap<ObjectKey, Model> = BTreeMap::new();
                let mut failures: BTreeMap<ObjectKey, u32> = BTreeMap::new();
                let handed = |q: &WorkQueue, model: &mut BTreeMap<ObjectKey, Model>, t: u64| {
                    let due = |m: &Model| match m {
                        Model::Queued(at, p) if *at <= t => Some(*p),
                        Model::Listed => Some(Priority::Event),
                        _ => None,
                    };
                    let highest = model.values().filter_map(due).max();
                    match q.try_next() {
                        None => {
                            prop_assert_eq!(highest, None, "a due key was not handed out");
                            Ok(None)
                        }
                        Some((k, _)) => {
                            let k = ObjectKey::clone(&k);
                            let state = model.get(&k).copied();
                            let Some(priority) = state.as_ref().and_then(due) else {
                                return Err(TestCaseError::fail(format!(
                                    "{k:?} handed out in state {state:?}"
                                )));
                            };
                            prop_assert_eq!(q.cause(&k), Some(priority));
                            prop_assert_eq!(
                                Some(priority),
                                highest,
                                "not the highest priority due"
                            );
                            model.insert(k.clone(), Model::Processing(None));
                            Ok(Some(k))
                        }
                    }
                };
                for op in ops {
                    let t = now();
                    match op {
                        Op::Add(k, priority, after) => {
                            q.add_after(name(k), Duration::from_millis(after.into()), priority);
                            let slot = (t + u64::from(after), priority);
                            let next = match model.get(&name(k)).copied() {
                                Some(Model::Processing(pending)) => {
                                    Model::Processing(Some(merged(pending, slot)))
                                }
                                Some(Model::Queued(at, p)) => {
                                    let (at, p) = merged(Some((at, p)), slot);
                                    Model::Queued(at, p)
                                }
                                Some(Model::Listed) | None => Model::Queued(slot.0, slot.1),
                            };
                            model.insert(name(k), next);
                        }
                        Op::List(k) => {
                            q.add_listed(name(k));
                            let next = match model.get(&name(k)).copied() {
                                Some(Model::Processing(pending)) => Some(Model::Processing(Some(
                                    merged(pending, (t, Priority::Event)),
                                ))),
                                None => Some(Model::Listed),
                                Some(_) => None,
                            };
                            if let Some(next) = next {
                                model.insert(name(k), next);
                            }
                        }
                        Op::Next => {
                            handed(&q, &mut model, t)?;
                        }
                        Op::Done(i, outcome) => {
                            let processing: Vec<ObjectKey> = model
                                .iter()
                                .filter(|(_, m)| matches!(m, Model::Processing(_)))
                                .map(|(k, _)| k.clone())
                                .collect();
                            if processing.is_empty() {
                                continue;
                            }
                            let k = processing[i % processing.len()].clone();
                            let Some(Model::Processing(pending)) = model.get(&k).copied() else {
                                continue;
                            };
                            let (done, then, delay) = match outcome {
                                Outcome::Forget => {
                                    failures.remove(&k);
                                    (Done::Forget, None, None)
                                }
                                Outcome::RequeueAfter(ms) => {
                                    failures.remove(&k);
                                    let after = Duration::from_millis(ms.into());
                                    let slot = (t + u64::from(ms), Priority::Requeue);
                                    (Done::RequeueAfter(after), Some(slot), None)
                                }
                                Outcome::Again => (Done::Again, Some((t, Priority::Requeue)), None),
                                Outcome::Retry | Outcome::Throttled(_) => {
                                    let count = failures.entry(k.clone()).or_insert(0);
                                    *count += 1;
                                    let (done, at_least) = match outcome {
                                        Outcome::Throttled(ms) => {
                                            let at_least = Duration::from_millis(ms.into());
                                            (Done::Throttled("429".into(), at_least), at_least)
                                        }
                                        _ => (retry(), Duration::ZERO),
                                    };
                                    let delay = backoff.delay(*count).max(at_least);
                                    let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                                    (done, Some((t + ms, Priority::Retry)), Some(delay))
                                }
                            };
                            prop_assert_eq!(q.done(&k, done), delay, "the retry's backoff");
                            prop_assert_eq!(
                                failure_count(&q, &k),
                                failures.get(&k).copied().unwrap_or(0),
                                "failures in a row"
                            );
                            let next = match (pending, then) {
                                (None, None) => None,
                                (pending, Some(then)) => Some(merged(pending, then)),
                                (Some(pending), None) => Some(pending),
                            };
                            match next {
                                Some((at, p)) => model.insert(k, Model::Queued(at, p)),
                                None => model.remove(&k),
                            };
                        }
                        Op::Advance(ms) => {
                            tokio::time::advance(Duration::from_millis(ms.into())).await;
                        }
                    }
                }
                // Time runs on and every run succeeds: every key owed a run
                // gets exactly the runs the model owes it, then nothing.
                for k in model.clone().keys() {
                    if let Some(Model::Processing(pending)) = model.get(k).copied() {
                        q.done(k, Done::Forget);
                        match pending {
                            Some((at, p)) => model.insert(k.clone(), Model::Queued(at, p)),
                            None => model.remove(k),
                        };
                    }
                }
                tokio::time::advance(Duration::from_secs(2_000)).await;
                while let Some(k) = handed(&q, &mut model, now())? {
                    q.done(&k, Done::Forget);
                    model.remove(&k);
                }
                prop_assert!(model.is_empty(), "keys owed a run: {model:?}");
                prop_assert!(q.is_idle());
                prop_assert_eq!(q.depth(), 0);
                Ok(())
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn the_queue_should_follow_its_state_diagram(ops in proptest::collection::vec(op(), 1..80)) {
                check(ops)?;
            }
        }
    }
}
