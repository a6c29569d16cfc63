//! Sharding across replicas: the replicas sharing a ring id split every
//! plugin's primaries between them, and no key is ever reconciled by two
//! replicas at once.
//!
//! # Objects
//! - **Member Leases** `<ring>-member-<identity>`, one per replica, labelled
//!   `kubewasm.dev/ring=<ring>`, renewed every `retry_period`. A member is
//!   live while this replica has seen its Lease change within
//!   `lease_duration` (observed time, as client-go's election: clocks need
//!   not agree).
//! - **Slot Leases** `<ring>-slot-<n>`, one per slot of the hash space (
//!   [`SLOTS`] equal ranges of the FNV-1a 64 hash of a primary's uid, or of
//!   its namespace): its holder is the only replica that may start steps for
//!   the slot's primaries. Every write of it is guarded by its
//!   resourceVersion, so two replicas racing for it get one winner.
//!
//! # Who should own a slot
//! Rendezvous hashing with bounded loads over the live members
//! ([`assignment`]): pairs of (slot, member) by the score of
//! `"<identity>/<slot>"`, highest first, each slot to the first member
//! with room below an equal share. Every replica computes it the same
//! way from what it sees; each member owns an equal share give or take one
//! slot, and a membership change moves the slots of the member that came
//! or went, and a few more (at most an eighth of the space in tests).
//!
//! # States of a slot, for this replica
//! ```text
//!             acquire (slot Lease free, or its holder not live; guarded write)
//!   not held ─────────────────────────────────────────────────────────▶ held
//!      ▲                                                                  │
//!      │ release: stop starting steps, wait for those in flight,          │
//!      │ then clear the holder (guarded write)                            │
//!      └──────────────────────────────────────────────────────────────────┘
//!   fenced (no renewal of the member Lease within renew_deadline): every
//!   slot not held at once, steps for none start; after a renewal a slot is
//!   held again only by a new guarded write of its Lease
//! ```
//! - A slot moves only after its previous holder released it, or after the
//!   previous holder's member Lease expired (`lease_duration` > its
//!   `renew_deadline`, after which it starts nothing).
//! - The slots held are told to the informers once per round
//!   ([`Shard::slots`]): the store of a sharded type holds the objects of
//!   those slots only ([`super::share`]), and its informer lists again when
//!   they change, so a replica that acquires a slot is shown every primary
//!   of it (a listing, as at start): level-triggered after a move.
//! - Keys of slots this replica does not hold are dropped from its queues:
//!   their holder has them, or will list them when it acquires the slot.
//!
//! The decision of one round is [`plan`], pure; [`run`] does the I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kubewasm_core::shard::{ShardField, ShardRange, fnv1a64};
use tokio::time::Instant;

/// Slots of the hash space (each `2^64 / SLOTS` wide). 48: one, two,
/// three, four, six or eight members hold equal shares (32 gave three
/// members 11, 11 and 10); it fits the `u64` masks of slots held.
pub const SLOTS: u32 = 48;

/// The label every Lease of a ring carries, valued with the ring's id.
pub const RING_LABEL: &str = "kubewasm.dev/ring";

/// How a replica joins its ring.
#[derive(Clone, Debug)]
pub struct RingConfig {
    /// The Leases' namespace.
    pub namespace: String,
    /// The ring's id (the replicas' shared `--leader-election-id`).
    pub ring: String,
    /// This replica's identity, unique in the ring.
    pub identity: String,
    /// What a primary is placed by.
    pub field: ShardField,
    /// How long a member Lease holds without renewal.
    pub lease_duration: Duration,
    /// How long a replica keeps starting steps without a renewal.
    pub renew_deadline: Duration,
    /// How often a replica renews and looks at the ring.
    pub retry_period: Duration,
}

impl RingConfig {
    /// client-go's timings scaled to `lease_duration` (2/3 and 2/15 of it).
    pub fn new(namespace: &str, ring: &str, identity: &str, lease_duration: Duration) -> Self {
        Self {
            namespace: namespace.to_owned(),
            ring: ring.to_owned(),
            identity: identity.to_owned(),
            field: ShardField::Uid,
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: (lease_duration * 2 / 15).max(Duration::from_millis(100)),
        }
    }

    fn member_lease(&self, identity: &str) -> String {
        format!("{}-member-{}", self.ring, dns_safe(identity))
    }

    fn slot_lease(&self, slot: u32) -> String {
        format!("{}-slot-{slot}", self.ring)
    }
}

/// `identity` as a DNS subdomain's label characters.
fn dns_safe(identity: &str) -> String {
    identity
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect()
}

/// The slot of a hash.
pub fn slot_of(hash: u64) -> u32 {
    // Slot `n` is `ShardRange::nth_of(n, SLOTS)`.
    ShardRange::index_of(hash, SLOTS)
}

/// The range of the hash space a slot covers.
pub fn range_of(slot: u32) -> ShardRange {
    ShardRange::nth_of(slot, SLOTS).unwrap_or(ShardRange::ALL)
}

/// The rendezvous score of `member` for `slot`: FNV-1a of
/// `<member>/<slot>` mixed by MurmurHash3's finalizer (FNV-1a's high bits
/// barely move with the last bytes, which would hand one member every
/// slot).
fn score(member: &str, slot: u32) -> u64 {
    let mut k = fnv1a64(format!("{member}/{slot}").as_bytes());
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// Which live member should own each slot: rendezvous hashing with bounded
/// loads. The (slot, member) pairs are taken by score, highest first, and a
/// slot goes to the first member of its pairs with room: fewer than
/// `floor(SLOTS / members)` slots, or that many while fewer than
/// `SLOTS % members` members hold one more. Every member so owns
/// `SLOTS / members` slots, or one more (pure rendezvous hashing leaves one of three
/// members up to half the space, and the ring as slow as that member); a
/// member that comes or goes moves its own share and the few slots the new
/// shares displace. Every replica computes the same table from
/// the same live set. Empty when no member is live.
pub fn assignment(live: &BTreeSet<String>) -> Vec<Option<&str>> {
    let mut owners: Vec<Option<&str>> = vec![None; SLOTS as usize];
    if live.is_empty() {
        return owners;
    }
    // `floor` slots each, and one more for `extra` of them: SLOTS in all,
    // so every slot finds a member with room.
    let members = u32::try_from(live.len()).unwrap_or(u32::MAX);
    let (floor, mut extra) = (SLOTS / members, SLOTS % members);
    let mut pairs: Vec<(u64, u32, &str)> = live
        .iter()
        .flat_map(|m| (0..SLOTS).map(move |slot| (score(m, slot), slot, m.as_str())))
        .collect();
    // Highest score first; ties by slot and member, so every replica agrees.
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut owned: BTreeMap<&str, u32> = BTreeMap::new();
    for (_, slot, member) in pairs {
        let count = owned.entry(member).or_insert(0);
        let Some(owner @ None) = owners.get_mut(slot as usize) else {
            continue;
        };
        if *count < floor || (*count == floor && extra > 0) {
            if *count == floor {
                extra -= 1;
            }
            *owner = Some(member);
            *count += 1;
        }
    }
    owners
}

/// What one round does to a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// Take it (guarded write naming this replica), then list its primaries.
    Acquire(u32),
    /// Stop starting its steps, wait for those in flight, clear the holder.
    Release(u32),
}

/// One round's decision, pure: given each slot's holder as its Lease says,
/// the live members (this one included) and the slots this replica holds
/// (may start steps for) now.
pub fn plan(
    me: &str,
    holders: &BTreeMap<u32, String>,
    live: &BTreeSet<String>,
    held: u64,
) -> Vec<Move> {
    let owners = assignment(live);
    (0..SLOTS)
        .filter_map(|slot| {
            let holder = holders.get(&slot).map(String::as_str).unwrap_or_default();
            let mine = owners.get(slot as usize).copied().flatten() == Some(me);
            let holding = held & (1 << slot) != 0;
            match (holder == me, mine) {
                // Held, or held by its Lease after a fence: give it up.
                (true, false) => Some(Move::Release(slot)),
                // Its Lease names this replica but it does not hold it (a
                // fence, a restart): take it again by a write.
                (true, true) if !holding => Some(Move::Acquire(slot)),
                // Free, or its holder is gone.
                (false, true) if holder.is_empty() || !live.contains(holder) => {
                    Some(Move::Acquire(slot))
                }
                _ => None,
            }
        })
        .collect()
}

/// What the workers of this replica read: which slots they may start steps
/// for, and the steps in flight per slot.
#[derive(Debug)]
pub struct Shard {
    field: ShardField,
    held: AtomicU64,
    in_flight: Vec<AtomicUsize>,
    /// Per slot, bumped each time it is acquired: a step begun under one
    /// holding never writes under the next.
    holdings: Vec<AtomicU64>,
    /// When the last renewal that succeeded was sent, in ms since `epoch`.
    renewed: AtomicU64,
    epoch: Instant,
    renew_deadline: Duration,
    identity: String,
    handovers: AtomicU64,
    members: AtomicUsize,
    /// The held slots as the informers last heard of them (see
    /// [`Shard::slots`]).
    slots: tokio::sync::watch::Sender<u64>,
    /// Where the durations of handovers go: from the first round this
    /// replica saw a slot should be its own to its acquisition.
    handover_time: std::sync::OnceLock<prometheus_client::metrics::histogram::Histogram>,
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
    fn new(config: &RingConfig) -> Self {
        Self {
            field: config.field,
            held: AtomicU64::new(0),
            in_flight: (0..SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            holdings: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            renewed: AtomicU64::new(0),
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
    fn publish(&self) {
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

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn fresh(&self) -> bool {
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
    fn holds(&self, slot: usize, holding: u64) -> bool {
        self.fresh()
            && self.held.load(Ordering::SeqCst) & (1 << slot) != 0
            && self
                .holdings
                .get(slot)
                .is_some_and(|h| h.load(Ordering::SeqCst) == holding)
    }

    /// Marks `slot` held, in a new holding.
    fn acquire(&self, slot: u32) {
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

    async fn drain(&self, slot: u32) {
        self.held.fetch_and(!(1 << slot), Ordering::SeqCst);
        if let Some(count) = self.in_flight.get(slot as usize) {
            while count.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// Starts the ring: the shard the workers and informers read, and the
/// ring's task.
pub fn start(
    client: kube::Client,
    config: RingConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> (Arc<Shard>, tokio::task::JoinHandle<()>) {
    let shard = Arc::new(Shard::new(&config));
    let task = tokio::spawn(run(client, config, Arc::clone(&shard), shutdown));
    (shard, task)
}

/// What this replica saw of the member Leases.
#[derive(Default)]
struct Seen {
    /// Per member: its Lease's resourceVersion and when it was seen to change.
    members: BTreeMap<String, (String, Instant)>,
    /// Per slot this replica should own and does not hold: since when.
    wanted: BTreeMap<u32, Instant>,
}

fn micro_now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn lease(name: &str, config: &RingConfig, role: &str, holder: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(config.namespace.clone()),
            labels: Some(
                [
                    (RING_LABEL.to_owned(), config.ring.clone()),
                    ("kubewasm.dev/ring-role".to_owned(), role.to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: (!holder.is_empty()).then(|| holder.to_owned()),
            lease_duration_seconds: Some(
                i32::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            renew_time: Some(micro_now()),
            ..LeaseSpec::default()
        }),
    }
}

/// Renews (or creates) this replica's member Lease.
async fn renew(api: &Api<Lease>, config: &RingConfig) -> Result<(), kube::Error> {
    let name = config.member_lease(&config.identity);
    match api.get_opt(&name).await? {
        Some(mut current) => {
            let spec = current.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some(config.identity.clone());
            spec.renew_time = Some(micro_now());
            api.replace(&name, &PostParams::default(), &current).await?;
        }
        None => {
            api.create(
                &PostParams::default(),
                &lease(&name, config, "member", &config.identity),
            )
            .await?;
        }
    }
    Ok(())
}

/// Sets the holder of `slot`'s Lease to `holder` ("" to release), guarded
/// by the resourceVersion it was read at; whether the write won.
async fn write_slot(
    api: &Api<Lease>,
    config: &RingConfig,
    slot: u32,
    current: Option<Lease>,
    holder: &str,
) -> Result<bool, kube::Error> {
    let name = config.slot_lease(slot);
    let result = match current {
        Some(mut current) => {
            let spec = current.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = (!holder.is_empty()).then(|| holder.to_owned());
            spec.renew_time = Some(micro_now());
            if !holder.is_empty() {
                spec.acquire_time = Some(micro_now());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            api.replace(&name, &PostParams::default(), &current)
                .await
                .map(|_| ())
        }
        None => api
            .create(
                &PostParams::default(),
                &lease(&name, config, "slot", holder),
            )
            .await
            .map(|_| ()),
    };
    match result {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

/// One round: renew, look, decide, move.
async fn round(
    api: &Api<Lease>,
    config: &RingConfig,
    shard: &Shard,
    seen: &mut Seen,
) -> Result<(), kube::Error> {
    let sent = shard.now_ms().max(1);
    renew(api, config).await?;
    shard.renewed.store(sent, Ordering::SeqCst);
    let leases = api
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={}", config.ring)))
        .await?;
    let now = Instant::now();
    let mut live = BTreeSet::from([config.identity.clone()]);
    let mut holders = BTreeMap::new();
    let mut slot_leases = BTreeMap::new();
    let role = |l: &Lease| {
        l.metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get("kubewasm.dev/ring-role"))
            .cloned()
            .unwrap_or_default()
    };
    for lease in leases {
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        let name = lease.metadata.name.clone().unwrap_or_default();
        match role(&lease).as_str() {
            "member" if !holder.is_empty() => {
                let version = lease.metadata.resource_version.clone().unwrap_or_default();
                let entry = seen
                    .members
                    .entry(holder.clone())
                    .or_insert_with(|| (version.clone(), now));
                if entry.0 != version {
                    *entry = (version, now);
                }
                if now.duration_since(entry.1) < config.lease_duration {
                    live.insert(holder);
                }
            }
            "slot" => {
                if let Some(slot) = name
                    .rsplit_once("-slot-")
                    .and_then(|(_, n)| n.parse::<u32>().ok())
                    .filter(|n| *n < SLOTS)
                {
                    holders.insert(slot, holder);
                    slot_leases.insert(slot, lease);
                }
            }
            _ => {}
        }
    }
    shard.members.store(live.len(), Ordering::Relaxed);
    let held = shard.held();
    let owners = assignment(&live);
    for slot in 0..SLOTS {
        let mine = owners.get(slot as usize).copied().flatten() == Some(config.identity.as_str());
        if !mine || held & (1 << slot) != 0 {
            seen.wanted.remove(&slot);
        } else {
            seen.wanted.entry(slot).or_insert(now);
        }
    }
    let moves = plan(&config.identity, &holders, &live, held);
    tracing::debug!(ring = %config.ring, members = live.len(), held = shard.held().count_ones(),
        moves = moves.len(), "ring round");
    for step in moves {
        match step {
            Move::Release(slot) => {
                shard.drain(slot).await;
                write_slot(api, config, slot, slot_leases.remove(&slot), "").await?;
                tracing::info!(ring = %config.ring, slot, "slot released");
            }
            Move::Acquire(slot) => {
                if write_slot(
                    api,
                    config,
                    slot,
                    slot_leases.remove(&slot),
                    &config.identity,
                )
                .await?
                    && shard.fresh()
                {
                    shard.acquire(slot);
                    shard.handovers.fetch_add(1, Ordering::Relaxed);
                    if let (Some(since), Some(histogram)) =
                        (seen.wanted.remove(&slot), shard.handover_time.get())
                    {
                        histogram.observe(since.elapsed().as_secs_f64());
                    }
                    tracing::info!(ring = %config.ring, slot, "slot acquired");
                }
            }
        }
    }
    Ok(())
}

/// Runs the ring until `shutdown` resolves, then releases every slot held
/// (after the steps in flight) and deletes this replica's member Lease.
pub async fn run(
    client: kube::Client,
    config: RingConfig,
    shard: Arc<Shard>,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut seen = Seen::default();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut fenced = false;
    loop {
        if !shard.fresh() && shard.held.load(Ordering::SeqCst) != 0 {
            // Not renewed within the deadline: nothing is held any more.
            shard.held.store(0, Ordering::SeqCst);
            if !fenced {
                tracing::warn!(ring = %config.ring, "could not renew within the deadline: fenced");
                fenced = true;
            }
        }
        match round(&api, &config, &shard, &mut seen).await {
            Ok(()) => fenced = false,
            Err(error) => tracing::warn!(ring = %config.ring, %error, "ring round failed"),
        }
        shard.publish();
        tokio::select! {
            () = tokio::time::sleep(config.retry_period) => {}
            () = shutdown.as_mut() => break,
        }
    }
    let held = shard.held();
    for slot in (0..SLOTS).filter(|s| held & (1 << s) != 0) {
        shard.drain(slot).await;
        let current = api.get_opt(&config.slot_lease(slot)).await.ok().flatten();
        if let Err(error) = write_slot(&api, &config, slot, current, "").await {
            tracing::warn!(ring = %config.ring, slot, %error, "failed to release a slot");
        }
    }
    shard.publish();
    let name = config.member_lease(&config.identity);
    if let Err(error) = api.delete(&name, &kube::api::DeleteParams::default()).await {
        tracing::warn!(ring = %config.ring, %error, "failed to delete the member lease");
    } else {
        tracing::info!(ring = %config.ring, "left the ring");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(members: &[&str]) -> BTreeSet<String> {
        members.iter().map(|m| (*m).to_owned()).collect()
    }

    fn holding(holders: &[(u32, &str)]) -> BTreeMap<u32, String> {
        holders.iter().map(|(s, h)| (*s, (*h).to_owned())).collect()
    }

    #[test]
    fn slots_should_cover_the_hash_space_in_equal_ranges() {
        assert_eq!(slot_of(0), 0);
        assert_eq!(slot_of(u64::MAX), SLOTS - 1);
        for slot in 0..SLOTS {
            let range = range_of(slot);
            assert_eq!(slot_of(range.start), slot);
            let last = u64::try_from(range.end - 1).expect("in the space");
            assert_eq!(slot_of(last), slot);
        }
    }

    #[test]
    fn the_assignment_should_balance_and_move_little_when_a_member_comes_or_goes() {
        let owner_of = |live: &BTreeSet<String>| -> Vec<String> {
            assignment(live)
                .into_iter()
                .map(|o| o.expect("an owner").to_owned())
                .collect()
        };
        for n in 1..=7 {
            let members: Vec<String> = (0..n).map(|i| format!("kubewasm-{i}-x")).collect();
            let all: BTreeSet<String> = members.iter().cloned().collect();
            let owners = owner_of(&all);
            // Balanced: every member floor or ceil of its share.
            for m in &members {
                let share = owners.iter().filter(|o| *o == m).count() as u32;
                assert!(
                    (SLOTS / n..=SLOTS.div_ceil(n)).contains(&share),
                    "{n} members: {m} owns {share}"
                );
            }
            // One leaves: its slots move, and few others (the shares grew).
            if n > 1 {
                let gone = &members[0];
                let rest: BTreeSet<String> = members[1..].iter().cloned().collect();
                let after = owner_of(&rest);
                let displaced = (0..SLOTS as usize)
                    .filter(|s| owners[*s] != *gone && owners[*s] != after[*s])
                    .count();
                // Balance costs a little movement: at most an eighth.
                assert!(
                    displaced <= SLOTS as usize / 8,
                    "{n} → {}: {displaced} slots moved without cause",
                    n - 1
                );
            }
        }
        // Every replica computes the same table whatever it saw first.
        let three = live(&["a", "b", "c"]);
        assert_eq!(assignment(&three), assignment(&three.clone()));
        assert!(assignment(&BTreeSet::new()).iter().all(Option::is_none));
    }

    #[test]
    fn a_slot_should_move_only_once_released_or_its_holder_gone() {
        let members = live(&["a", "b"]);
        let owners = assignment(&members);
        let for_b: Vec<u32> = (0..SLOTS)
            .filter(|s| owners[*s as usize] == Some("b"))
            .collect();
        let slot = for_b[0];
        // a holds a slot b should own: b waits while a is live...
        let held_by_a = holding(&[(slot, "a")]);
        assert!(!plan("b", &held_by_a, &members, 0).contains(&Move::Acquire(slot)));
        // ...and a releases it;
        assert!(plan("a", &held_by_a, &members, 1 << slot).contains(&Move::Release(slot)));
        // once free, b takes it.
        assert!(plan("b", &holding(&[(slot, "")]), &members, 0).contains(&Move::Acquire(slot)));
        // A holder no longer live loses it to the owner.
        let alone = live(&["b"]);
        assert!(plan("b", &held_by_a, &alone, 0).contains(&Move::Acquire(slot)));
    }

    #[test]
    fn after_a_fence_a_slot_should_be_taken_again_by_a_write_not_assumed() {
        let me = live(&["a"]);
        let mine = holding(&[(0, "a")]);
        // Its Lease names this replica, but it holds nothing (fenced, or
        // restarted): it takes the slot again by a guarded write.
        assert!(plan("a", &mine, &me, 0).contains(&Move::Acquire(0)));
        assert!(!plan("a", &mine, &me, 1).contains(&Move::Acquire(0)));
    }

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
}
