//! The host-wide instance budget: every live instance, in a call or idle and
//! warm, holds one of the runtime's `capacity` slots, whichever plugin it
//! belongs to.
//!
//! # States of a slot
//! ```text
//!            checkout (a free slot)              checkin (warm, reusable)
//!   free ─────────────────────────────▶ busy ─────────────────────────────▶ idle
//!    ▲                                   │ ▲   checkout by its own plugin     │
//!    │ instance dropped, nobody waits    │ └──────────────────────────────────┤
//!    └───────────────────────────────────┘     checkout by another plugin:    │
//!                                        ▲     the least recently used idle   │
//!                                        └──── instance is dropped for it ────┘
//! ```
//!
//! # Rules
//! 1. A checkout takes, in this order: its own plugin's most recently used
//!    idle instance; a free slot; the slot of the least recently used idle
//!    instance of any plugin, which is dropped (by the taker, outside the
//!    lock, before it instantiates in the slot). Otherwise it waits.
//! 2. Waiters are served first come, first served. A slot coming back (a
//!    busy instance checked in, or dropped after a trap or its last call)
//!    goes straight to the first waiter: the instance itself if the waiter
//!    is of the same plugin, else the slot, with the instance for the
//!    waiter to drop. So while anyone waits, no slot is free and no
//!    instance idle, and a plugin that keeps calling cannot starve another.
//! 3. A wait is bounded by the caller's deadline: past it the checkout
//!    fails with [`Exhausted`], which the engine treats as "not run", never
//!    as a reconcile failure.
//! 4. When a call ends, the idle instances may hold at most `warm_bytes`
//!    of linear memory between them (each weighed by its memories' size
//!    when checked in), and at most `max_warm` instances are kept, counting
//!    those still in calls: checking one in past either drops the least
//!    recently used idle instance (of any plugin; the one checked in if
//!    there is no other) and frees its slot, until both hold. The slots
//!    bound what may live at once; the bytes bound what waiting instances
//!    cost, so a busy plugin keeps its instance warm whenever memory allows,
//!    however many plugins there are. (A budget counted in instances
//!    instead, set to the calls run at once, drops nearly every instance
//!    of fifty plugins called in turn: an LRU cache smaller than a cycle
//!    hits never.)
//! 5. A plugin's idle instances other than its most recently used one, its
//!    spares, go once unused for [`SPARE_IDLE`] (looked at when the plugin
//!    checks an instance in): a second instance is worth its memory while
//!    the plugin runs two calls at once, and a busy plugin among many, its
//!    calls run one at a time, keeps one. Fifty busy plugins each kept the
//!    second instance a first burst made, at some 2.9 MiB resident each.
//! 6. A plugin that goes idle or is unloaded gives its idle instances back
//!    ([`Pool::drop_idle`]); a slot is freed only once its instance is
//!    dropped, so the allocator under the pool never holds more than
//!    `capacity` instances.
//!
//! The pool is generic over what an instance is, so its rules are tested
//! here without a Wasm engine.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a plugin's spare idle instance is kept unused (rule 5).
pub(crate) const SPARE_IDLE: Duration = Duration::from_secs(1);

/// Who an instance belongs to: one loaded plugin (each has its own id).
pub(crate) type Owner = u64;

/// No slot came free before the checkout's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no instance slot came free within {waited:?}: all {capacity} are in calls")]
pub struct Exhausted {
    /// How long the checkout waited.
    pub waited: Duration,
    /// The pool's size.
    pub capacity: usize,
}

/// Instances in each state, now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Slots of the budget.
    pub capacity: usize,
    /// Most instances kept after a call, those in calls counted.
    pub max_warm: usize,
    /// Most bytes of linear memory the idle instances hold between them.
    pub warm_bytes: usize,
    /// Bytes of linear memory the idle instances hold now.
    pub idle_bytes: usize,
    /// Instances in a call (or being created for one).
    pub busy: usize,
    /// Warm instances waiting for their plugin's next call.
    pub idle: usize,
    /// Checkouts waiting for a slot.
    pub waiting: usize,
}

/// What a waiter is handed when a slot comes back to it.
enum Grant<T> {
    /// Its own plugin's instance, warm.
    Warm(T),
    /// A slot, with the instance that held it for the waiter to drop.
    Slot(Option<T>),
}

struct State<T> {
    free: usize,
    busy: usize,
    /// Idle instances by last use (oldest first), with their bytes and
    /// since when they are idle.
    idle: BTreeMap<u64, (Owner, T, usize, Instant)>,
    /// The bytes of every idle instance.
    idle_bytes: usize,
    /// Each owner's idle instances' places in `idle`, oldest first.
    idle_of: HashMap<Owner, VecDeque<u64>>,
    used: u64,
    /// Waiting checkouts, first come first.
    waiting: VecDeque<(u64, Owner)>,
    granted: HashMap<u64, Grant<T>>,
    tickets: u64,
}

impl<T> State<T> {
    fn take_own(&mut self, owner: Owner) -> Option<T> {
        let places = self.idle_of.get_mut(&owner)?;
        let place = places.pop_back()?;
        if places.is_empty() {
            self.idle_of.remove(&owner);
        }
        let (_, instance, bytes, _) = self.idle.remove(&place)?;
        self.idle_bytes -= bytes;
        Some(instance)
    }

    /// Takes out `owner`'s spare idle instances idle since before `cutoff`
    /// (rule 5), freeing their slots.
    fn take_spares(&mut self, owner: Owner, cutoff: Instant) -> Vec<T> {
        let mut spares = Vec::new();
        let Some(places) = self.idle_of.get_mut(&owner) else {
            return spares;
        };
        while places.len() > 1
            && let Some(place) = places.front().copied()
            && self.idle.get(&place).is_some_and(|entry| entry.3 < cutoff)
        {
            places.pop_front();
            if let Some((_, instance, bytes, _)) = self.idle.remove(&place) {
                self.idle_bytes -= bytes;
                self.free += 1;
                spares.push(instance);
            }
        }
        spares
    }

    fn take_oldest(&mut self) -> Option<T> {
        let (_, (owner, instance, bytes, _)) = self.idle.pop_first()?;
        self.idle_bytes -= bytes;
        if let Some(places) = self.idle_of.get_mut(&owner) {
            places.pop_front();
            if places.is_empty() {
                self.idle_of.remove(&owner);
            }
        }
        Some(instance)
    }

    /// What a checkout by `owner` can take now, without waiting.
    fn take(&mut self, owner: Owner) -> Option<Grant<T>> {
        if let Some(instance) = self.take_own(owner) {
            return Some(Grant::Warm(instance));
        }
        if self.free > 0 {
            self.free -= 1;
            return Some(Grant::Slot(None));
        }
        self.take_oldest().map(|victim| Grant::Slot(Some(victim)))
    }

    /// Hands a slot coming back (with its instance, if it is reusable) to
    /// the first waiter; whether one took it.
    fn hand_over(&mut self, owner: Owner, instance: &mut Option<T>) -> bool {
        let Some((ticket, waiter)) = self.waiting.pop_front() else {
            return false;
        };
        let grant = match instance.take() {
            Some(instance) if waiter == owner => Grant::Warm(instance),
            other => Grant::Slot(other),
        };
        self.granted.insert(ticket, grant);
        true
    }
}

/// The budget (see the module documentation).
pub(crate) struct Pool<T> {
    state: Mutex<State<T>>,
    changed: Condvar,
    capacity: usize,
    max_warm: usize,
    warm_bytes: usize,
    /// [`SPARE_IDLE`], but in tests.
    spare_idle: Duration,
}

impl<T> Pool<T> {
    /// A pool of `capacity` slots, all free, keeping at most `max_warm`
    /// instances after a call (those in calls counted) and idle instances
    /// of at most `warm_bytes` between them.
    pub(crate) fn new(capacity: usize, max_warm: usize, warm_bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                free: capacity,
                busy: 0,
                idle: BTreeMap::new(),
                idle_bytes: 0,
                idle_of: HashMap::new(),
                used: 0,
                waiting: VecDeque::new(),
                granted: HashMap::new(),
                tickets: 0,
            }),
            changed: Condvar::new(),
            capacity,
            max_warm,
            warm_bytes,
            spare_idle: SPARE_IDLE,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a call of `owner`, waiting for one until `deadline`:
    /// holding its warm instance, or empty for the caller to fill.
    ///
    /// # Errors
    /// [`Exhausted`] if no slot came free in time.
    pub(crate) fn checkout(
        self: &Arc<Self>,
        owner: Owner,
        deadline: Instant,
    ) -> Result<Busy<T>, Exhausted> {
        let started = Instant::now();
        let mut state = self.lock();
        let grant = match state
            .waiting
            .is_empty()
            .then(|| state.take(owner))
            .flatten()
        {
            Some(grant) => grant,
            None => {
                state.tickets += 1;
                let ticket = state.tickets;
                state.waiting.push_back((ticket, owner));
                loop {
                    if let Some(grant) = state.granted.remove(&ticket) {
                        break grant;
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        state.waiting.retain(|(t, _)| *t != ticket);
                        return Err(Exhausted {
                            waited: now - started,
                            capacity: self.capacity,
                        });
                    }
                    state = self
                        .changed
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        };
        state.busy += 1;
        drop(state);
        // The wait is for the slot; dropping its last instance is not.
        let waited = started.elapsed();
        let instance = match grant {
            Grant::Warm(instance) => Some(instance),
            // The slot's last instance goes before a new one comes.
            Grant::Slot(victim) => {
                drop(victim);
                None
            }
        };
        Ok(Busy {
            instance,
            owner,
            waited,
            pool: Arc::clone(self),
            released: false,
        })
    }

    /// Returns a busy instance whose plugin may call it again, its
    /// memories holding `bytes`: to the first waiter, or idle and warm.
    pub(crate) fn checkin(&self, mut busy: Busy<T>, bytes: usize) {
        let mut instance = busy.instance.take();
        let mut state = self.lock();
        state.busy -= 1;
        busy.released = true;
        if state.hand_over(busy.owner, &mut instance) {
            drop(state);
            self.changed.notify_all();
            return;
        }
        let Some(instance) = instance else {
            state.free += 1;
            return;
        };
        state.used += 1;
        let used = state.used;
        let now = Instant::now();
        state.idle.insert(used, (busy.owner, instance, bytes, now));
        state.idle_bytes += bytes;
        state.idle_of.entry(busy.owner).or_default().push_back(used);
        // Spares unused a while (rule 5), then past the warm caps (rule
        // 4): the oldest go, outside the lock.
        let mut surplus = now
            .checked_sub(self.spare_idle)
            .map(|cutoff| state.take_spares(busy.owner, cutoff))
            .unwrap_or_default();
        while (state.busy + state.idle.len() > self.max_warm || state.idle_bytes > self.warm_bytes)
            && let Some(victim) = state.take_oldest()
        {
            surplus.push(victim);
            state.free += 1;
        }
        drop(state);
        drop(surplus);
    }

    /// Frees the slot of an instance already dropped (or never made).
    fn release(&self, owner: Owner) {
        let mut state = self.lock();
        state.busy -= 1;
        if state.hand_over(owner, &mut None) {
            drop(state);
            self.changed.notify_all();
        } else {
            state.free += 1;
        }
    }

    /// Drops `owner`'s idle instances, freeing their slots; how many.
    pub(crate) fn drop_idle(&self, owner: Owner) -> usize {
        let mut state = self.lock();
        let Some(places) = state.idle_of.remove(&owner) else {
            return 0;
        };
        let mut dropped = Vec::new();
        for place in places {
            if let Some((_, instance, bytes, _)) = state.idle.remove(&place) {
                state.idle_bytes -= bytes;
                dropped.push(instance);
            }
        }
        // No one waits while instances are idle (rule 2): the slots are free.
        state.free += dropped.len();
        drop(state);
        let count = dropped.len();
        drop(dropped);
        count
    }

    /// Drops the least recently used idle instance of any plugin and frees
    /// its slot; whether there was one. For an allocator that ran out of
    /// something other than instances (memories, tables) first.
    pub(crate) fn drop_oldest(&self) -> bool {
        let mut state = self.lock();
        let victim = state.take_oldest();
        if victim.is_some() {
            state.free += 1;
        }
        drop(state);
        victim.is_some()
    }

    /// Instances in each state, now.
    pub(crate) fn counts(&self) -> PoolCounts {
        let state = self.lock();
        PoolCounts {
            capacity: self.capacity,
            max_warm: self.max_warm,
            warm_bytes: self.warm_bytes,
            idle_bytes: state.idle_bytes,
            busy: state.busy,
            idle: state.idle.len(),
            waiting: state.waiting.len(),
        }
    }
}

/// A slot in a call: its instance (none until the caller makes one). Given
/// back with [`Pool::checkin`] to keep the instance warm; dropped, it drops
/// the instance first, then frees the slot.
pub(crate) struct Busy<T> {
    instance: Option<T>,
    owner: Owner,
    waited: Duration,
    pool: Arc<Pool<T>>,
    released: bool,
}

impl<T> Busy<T> {
    /// The instance, if there is one yet.
    pub(crate) fn instance(&mut self) -> Option<&mut T> {
        self.instance.as_mut()
    }

    /// Takes the instance out of the slot (the slot stays checked out).
    pub(crate) fn take(&mut self) -> Option<T> {
        self.instance.take()
    }

    /// Puts a new instance in the slot.
    pub(crate) fn fill(&mut self, instance: T) -> &mut T {
        self.instance.insert(instance)
    }

    /// How long the checkout waited for the slot.
    pub(crate) fn waited(&self) -> Duration {
        self.waited
    }
}

impl<T> Drop for Busy<T> {
    fn drop(&mut self) {
        if !self.released {
            drop(self.instance.take());
            self.pool.release(self.owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An instance that counts how many of its kind are alive.
    struct Live(Arc<AtomicUsize>, &'static str);

    impl Live {
        fn new(alive: &Arc<AtomicUsize>, name: &'static str) -> Self {
            alive.fetch_add(1, Ordering::SeqCst);
            Self(Arc::clone(alive), name)
        }
    }

    impl Drop for Live {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// Checks out a slot for `owner` and fills it if empty.
    fn call(pool: &Arc<Pool<Live>>, alive: &Arc<AtomicUsize>, owner: Owner) -> Busy<Live> {
        let mut busy = pool.checkout(owner, soon()).expect("a slot");
        if busy.instance().is_none() {
            busy.fill(Live::new(alive, "fresh"));
        }
        busy
    }

    #[test]
    fn a_plugin_should_get_its_own_warm_instance_back() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(2, 2, usize::MAX);
        let mut busy = pool.checkout(1, soon()).expect("slot");
        assert!(busy.instance().is_none());
        busy.fill(Live::new(&alive, "first"));
        pool.checkin(busy, 1);
        let mut again = pool.checkout(1, soon()).expect("slot");
        assert_eq!(again.instance().map(|i| i.1), Some("first"));
        let counts = pool.counts();
        assert_eq!((counts.busy, counts.idle), (1, 0));
    }

    #[test]
    fn idle_instances_of_other_plugins_should_make_room_least_recently_used_first() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(2, 2, usize::MAX);
        pool.checkin(call(&pool, &alive, 1), 1);
        pool.checkin(call(&pool, &alive, 2), 1);
        assert_eq!(alive.load(Ordering::SeqCst), 2);
        // Plugin 3 takes plugin 1's slot (used longest ago), not plugin 2's.
        let third = call(&pool, &alive, 3);
        assert_eq!(alive.load(Ordering::SeqCst), 2);
        let mut second = pool.checkout(2, soon()).expect("warm");
        assert!(
            second.instance().is_some(),
            "plugin 2 keeps its warm instance"
        );
        drop((third, second));
        assert_eq!(alive.load(Ordering::SeqCst), 0);
        assert_eq!(pool.counts().busy, 0);
    }

    #[test]
    fn a_checkout_should_wait_its_turn_when_every_slot_is_busy() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(1, 1, usize::MAX);
        let first = call(&pool, &alive, 1);
        let (pool2, alive2) = (Arc::clone(&pool), Arc::clone(&alive));
        let waiter = std::thread::spawn(move || {
            let busy = call(&pool2, &alive2, 2);
            (busy.waited(), alive2.load(Ordering::SeqCst))
        });
        while pool.counts().waiting == 0 {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        // Checked in while plugin 2 waits: the slot goes to it, the
        // instance is dropped by it before it makes its own.
        pool.checkin(first, 1);
        let (waited, alive_then) = waiter.join().expect("waiter");
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
        assert_eq!(alive_then, 1, "never two instances in one slot");
        assert_eq!(
            pool.counts(),
            PoolCounts {
                capacity: 1,
                max_warm: 1,
                warm_bytes: usize::MAX,
                ..PoolCounts::default()
            }
        );
    }

    #[test]
    fn waiters_should_be_served_first_come_first_served() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(1, 1, usize::MAX);
        let held = call(&pool, &alive, 1);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for owner in 2..6 {
            let (shared, alive, order) =
                (Arc::clone(&pool), Arc::clone(&alive), Arc::clone(&order));
            waiters.push(std::thread::spawn(move || {
                let busy = call(&shared, &alive, owner);
                order.lock().expect("order").push(owner);
                drop(busy);
            }));
            while pool.counts().waiting < usize::try_from(owner - 1).expect("small") {
                std::thread::yield_now();
            }
        }
        drop(held);
        for waiter in waiters {
            waiter.join().expect("waiter");
        }
        assert_eq!(*order.lock().expect("order"), [2, 3, 4, 5]);
    }

    #[test]
    fn a_waiter_of_the_same_plugin_should_be_handed_the_warm_instance() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(1, 1, usize::MAX);
        let held = call(&pool, &alive, 7);
        let pool2 = Arc::clone(&pool);
        let waiter = std::thread::spawn(move || {
            let mut busy = pool2.checkout(7, soon()).expect("slot");
            busy.instance().map(|i| i.1)
        });
        while pool.counts().waiting == 0 {
            std::thread::yield_now();
        }
        pool.checkin(held, 1);
        assert_eq!(waiter.join().expect("waiter"), Some("fresh"));
    }

    #[test]
    fn a_wait_should_end_at_its_deadline_and_leave_the_queue() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(1, 1, usize::MAX);
        let _held = call(&pool, &alive, 1);
        let deadline = Instant::now() + Duration::from_millis(30);
        let error = pool.checkout(2, deadline).err().expect("no slot");
        assert!(error.waited >= Duration::from_millis(30), "{error}");
        assert_eq!(error.capacity, 1);
        assert_eq!(pool.counts().waiting, 0);
    }

    #[test]
    fn a_dropped_busy_slot_should_free_it_and_drop_idle_should_empty_a_plugin() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(3, 3, usize::MAX);
        let trapped = call(&pool, &alive, 1);
        let (a, b) = (call(&pool, &alive, 2), call(&pool, &alive, 2));
        pool.checkin(a, 1);
        pool.checkin(b, 1);
        drop(trapped);
        assert_eq!(alive.load(Ordering::SeqCst), 2);
        assert_eq!(pool.drop_idle(2), 2);
        assert_eq!(alive.load(Ordering::SeqCst), 0);
        let counts = pool.counts();
        assert_eq!((counts.busy, counts.idle), (0, 0));
        // Every slot is free again: three fresh checkouts need no wait.
        let all: Vec<_> = (10..13).map(|o| call(&pool, &alive, o)).collect();
        assert_eq!(alive.load(Ordering::SeqCst), 3);
        drop(all);
        pool.checkin(call(&pool, &alive, 4), 1);
        assert!(pool.drop_oldest());
        assert!(!pool.drop_oldest());
        assert_eq!(alive.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn instances_past_the_warm_cap_should_be_dropped_least_recently_used_first() {
        let alive = Arc::new(AtomicUsize::new(0));
        let pool = Pool::new(4, 2, usize::MAX);
        let calls: Vec<_> = (1..=4).map(|o| call(&pool, &alive, o)).collect();
        for busy in calls {
            pool.checkin(busy, 1);
        }
        // Four checked in, two kept: those of plugins 3 and 4, the newest.
        assert_eq!(alive.load(Ordering::SeqCst), 2);
        let counts = pool.counts();
        assert_eq!((counts.busy, counts.idle), (0, 2));
        for (owner, warm) in [(1, false), (2, false), (3, true), (4, true)] {
            let mut busy = pool.checkout(owner, soon()).expect("slot");
            assert_eq!(busy.instance().is_some(), warm, "plugin {owner}");
            drop(busy);
        }
        // The freed slots are free: four at once need no wait.
        let mut all: Vec<_> = (5..9).map(|o| call(&pool, &alive, o)).collect();
        assert_eq!(alive.load(Ordering::SeqCst), 4);
        // Instances in calls count: with three still in calls, the one
        // checked in goes (nothing older is idle).
        pool.checkin(all.remove(0), 1);
        assert_eq!(alive.load(Ordering::SeqCst), 3);
        assert_eq!(pool.counts().idle, 0);
        pool.checkin(all.remove(0), 1);
        assert_eq!(alive.load(Ordering::SeqCst), 2, "two in calls");
        pool.checkin(all.remove(0), 1);
        assert_eq!(pool.counts().idle, 1, "one in a call, one kept");
        assert_eq!(alive.load(Ordering::SeqCst), 2);
        drop(all);
        // With none kept, a checkin drops its own.
        let none = Pool::new(1, 0, usize::MAX);
        none.checkin(call(&none, &alive, 1), 1);
        assert_eq!(none.counts().idle, 0);
        let again = call(&none, &alive, 1);
        assert_eq!(alive.load(Ordering::SeqCst), 2, "plugin 7's, and this one");
        drop(again);
    }

    #[test]
    fn a_spare_idle_instance_should_go_once_unused_a_while_and_stay_while_used() {
        let alive = Arc::new(AtomicUsize::new(0));
        let mut pool = Pool::new(4, 4, usize::MAX);
        Arc::get_mut(&mut pool).expect("not shared").spare_idle = Duration::from_millis(50);
        // Two calls at once, again and again: both instances stay warm.
        for _ in 0..3 {
            let (a, b) = (call(&pool, &alive, 1), call(&pool, &alive, 1));
            pool.checkin(a, 1);
            pool.checkin(b, 1);
            assert_eq!((pool.counts().idle, alive.load(Ordering::SeqCst)), (2, 2));
        }
        // Then one at a time: the spare goes once unused past the bound,
        // the instance in use stays; another plugin's is not touched.
        pool.checkin(call(&pool, &alive, 2), 1);
        std::thread::sleep(Duration::from_millis(80));
        pool.checkin(call(&pool, &alive, 1), 1);
        assert_eq!(alive.load(Ordering::SeqCst), 2, "plugin 1's spare dropped");
        let counts = pool.counts();
        assert_eq!((counts.idle, counts.idle_bytes, counts.busy), (2, 2, 0));
        for owner in [1, 2] {
            let mut busy = pool.checkout(owner, soon()).expect("slot");
            assert!(busy.instance().is_some(), "plugin {owner} warm");
            drop(busy);
        }
        assert_eq!(alive.load(Ordering::SeqCst), 0);
        assert_eq!(pool.counts().busy, 0);
        // Every slot free again.
        let all: Vec<_> = (0..4).map(|_| call(&pool, &alive, 3)).collect();
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn idle_instances_past_the_warm_bytes_should_be_dropped_least_recently_used_first() {
        let alive = Arc::new(AtomicUsize::new(0));
        // Room for ten instances warm by count, for 100 bytes by memory.
        let pool = Pool::new(10, 10, 100);
        for (owner, bytes) in [(1, 40), (2, 40), (3, 10)] {
            pool.checkin(call(&pool, &alive, owner), bytes);
        }
        assert_eq!(alive.load(Ordering::SeqCst), 3);
        assert_eq!(pool.counts().idle_bytes, 90);
        // 40 more bytes: plugin 1's, the least recently used, goes.
        pool.checkin(call(&pool, &alive, 4), 40);
        assert_eq!(alive.load(Ordering::SeqCst), 3);
        assert_eq!((pool.counts().idle, pool.counts().idle_bytes), (3, 90));
        for (owner, warm) in [(1, false), (2, true), (3, true), (4, true)] {
            let mut busy = pool.checkout(owner, soon()).expect("slot");
            assert_eq!(busy.instance().is_some(), warm, "plugin {owner}");
            drop(busy);
        }
        assert_eq!((pool.counts().idle, pool.counts().idle_bytes), (0, 0));
        // One instance larger than the whole budget is not kept.
        pool.checkin(call(&pool, &alive, 5), 101);
        assert_eq!(pool.counts().idle, 0);
        assert_eq!(alive.load(Ordering::SeqCst), 0);
        // Fifty plugins called in turn, 2 bytes each, all stay warm: the
        // cap is memory, not the calls run at once.
        let many = Pool::new(64, 64, 100);
        for owner in 10..60 {
            many.checkin(call(&many, &alive, owner), 2);
        }
        assert_eq!((many.counts().idle, many.counts().idle_bytes), (50, 100));
        for owner in 10..60 {
            let mut busy = many.checkout(owner, soon()).expect("slot");
            assert!(busy.instance().is_some(), "plugin {owner} warm");
            many.checkin(busy, 2);
        }
        assert_eq!(alive.load(Ordering::SeqCst), 50);
    }
}
