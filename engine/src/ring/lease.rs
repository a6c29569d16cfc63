//! The ring's I/O, in three tasks: one renews this replica's member Lease
//! every `retry_period` and fences the replica when a renewal is late; one
//! watches the ring's Leases, noting when each member's was seen to change;
//! the third runs a round after each renewal, each change seen and at the
//! moment a member's Lease runs out, in which it acquires or releases slot
//! Leases as [`super::slots::plan`] decides (resourceVersion-guarded
//! writes). Renewing never waits for a round: a release waits for the steps
//! in flight of its slots, which under load outlast a Lease, and a member
//! that stopped renewing meanwhile would be seen gone and its slots taken.
//! Seeing the Leases by a watch, not a list each round, a member's silence
//! is timed from its last renewal and its slots taken when its Lease runs
//! out, not up to two retry periods later.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use super::shard::Shard;
use super::slots::{Move, RING_LABEL, RingConfig, SLOTS, assignment, plan};

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

/// The ring's Leases as this replica's watch shows them, and when each
/// member's was seen to change (by this replica's clock: no other's is
/// trusted, as client-go's leader election trusts none).
#[derive(Default)]
struct Seen {
    /// By name.
    leases: BTreeMap<String, Lease>,
    /// The Leases a relist (the watch begun again) has shown so far.
    relisted: Option<BTreeMap<String, Lease>>,
    /// Per member: its Lease's resourceVersion and when it was seen to change.
    members: BTreeMap<String, (String, Instant)>,
    /// Per slot this replica should own and does not hold: since when.
    wanted: BTreeMap<u32, Instant>,
    /// Whether the watch has listed since it last failed.
    synced: bool,
}

impl Seen {
    /// Whether what the watch shows can time the others' silence: it has
    /// listed since it last failed, and it showed this replica's own
    /// renewal within the renew deadline (a watch that stalled without an
    /// error shows no renewal of anyone's, its own included). Otherwise a
    /// member seen is taken as live: a silence the watch cannot see is
    /// not the member's.
    fn timely(&self, config: &RingConfig, now: Instant) -> bool {
        self.synced
            && self
                .members
                .get(&config.identity)
                .is_some_and(|(_, at)| now.duration_since(*at) < config.renew_deadline)
    }

    /// The members live at `now` (this replica's own aside), and when the
    /// first of the others' Leases runs out unless it renews (`None`: no
    /// other, or the watch is not [`timely`](Self::timely), when every
    /// member seen counts as live).
    fn live(&self, config: &RingConfig, now: Instant) -> (BTreeSet<String>, Option<Instant>) {
        let timely = self.timely(config, now);
        let mut live = BTreeSet::new();
        let mut expiry: Option<Instant> = None;
        for (holder, (_, at)) in &self.members {
            let ends = *at + config.lease_duration;
            if (ends > now || !timely) && self.leases.values().any(|l| self::holder(l) == *holder) {
                live.insert(holder.clone());
                if *holder != config.identity && timely {
                    expiry = Some(expiry.map_or(ends, |e| e.min(ends)));
                }
            }
        }
        (live, expiry)
    }

    /// Takes in what the watch saw at `now`.
    fn saw(&mut self, event: watcher::Event<Lease>, now: Instant) {
        match event {
            watcher::Event::Init => self.relisted = Some(BTreeMap::new()),
            watcher::Event::InitApply(lease) => {
                self.observe(&lease, now);
                if let Some(relisted) = &mut self.relisted {
                    relisted.insert(lease.metadata.name.clone().unwrap_or_default(), lease);
                }
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = self.relisted.take() {
                    self.leases = relisted;
                }
                self.synced = true;
            }
            watcher::Event::Apply(lease) => {
                self.observe(&lease, now);
                self.leases
                    .insert(lease.metadata.name.clone().unwrap_or_default(), lease);
            }
            watcher::Event::Delete(lease) => {
                self.leases
                    .remove(lease.metadata.name.as_deref().unwrap_or_default());
                if role(&lease) == "member" {
                    self.members.remove(&holder(&lease));
                }
            }
        }
    }

    /// Notes when a member's Lease was seen to change.
    fn observe(&mut self, lease: &Lease, now: Instant) {
        let holder = holder(lease);
        if role(lease) != "member" || holder.is_empty() {
            return;
        }
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let entry = self
            .members
            .entry(holder)
            .or_insert_with(|| (version.clone(), now));
        if entry.0 != version {
            *entry = (version, now);
        }
    }
}

/// A Lease's role in the ring (`member` or `slot`).
fn role(lease: &Lease) -> &str {
    lease
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get("kubewasm.dev/ring-role"))
        .map_or("", String::as_str)
}

/// A Lease's holder ("" for none).
fn holder(lease: &Lease) -> String {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

/// Watches the ring's Leases into `seen` until aborted, notifying `changed`
/// after each event.
async fn watch(
    api: Api<Lease>,
    config: RingConfig,
    seen: Arc<std::sync::Mutex<Seen>>,
    changed: Arc<Notify>,
) {
    let selector = format!("{RING_LABEL}={}", config.ring);
    let events = watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                seen.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .saw(event, Instant::now());
                changed.notify_one();
            }
            Err(error) => {
                seen.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .synced = false;
                tracing::warn!(ring = %config.ring, %error, "ring watch failed");
            }
        }
    }
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
            renew_time: Some(crate::leader::now()),
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
            spec.renew_time = Some(crate::leader::now());
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
/// by the resourceVersion it was read at; whether the write won. A write
/// unanswered within the renew deadline is given up as lost (it may have
/// landed: the next round sees the Lease as the watch shows it, and moves
/// the slot again if need be); a round never waits on a hung request.
async fn write_slot(
    api: &Api<Lease>,
    config: &RingConfig,
    slot: u32,
    current: Option<Lease>,
    holder: &str,
) -> Result<bool, kube::Error> {
    let write = write_slot_unbounded(api, config, slot, current, holder);
    match tokio::time::timeout(config.renew_deadline, write).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!(ring = %config.ring, slot, "slot write timed out");
            Ok(false)
        }
    }
}

async fn write_slot_unbounded(
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
            spec.renew_time = Some(crate::leader::now());
            if !holder.is_empty() {
                spec.acquire_time = Some(crate::leader::now());
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

/// Renews this replica's member Lease every `retry_period` until aborted,
/// each attempt bounded by `renew_deadline`; notifies `renewed` after each
/// renewal, and fences the replica (nothing held, told to the informers)
/// once the last renewal is older than `renew_deadline`, or on a renewal
/// after such a lapse (see [`Shard::renewed_at`]).
async fn keep_renewed(
    api: Api<Lease>,
    config: RingConfig,
    shard: Arc<Shard>,
    renewed: Arc<Notify>,
) {
    let mut ticks = tokio::time::interval(config.retry_period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let sent = shard.now_ms().max(1);
        match tokio::time::timeout(config.renew_deadline, renew(&api, &config)).await {
            Ok(Ok(())) => {
                if shard.renewed_at(sent) {
                    tracing::warn!(ring = %config.ring, "renewed after a lapse: fenced");
                }
                renewed.notify_one();
            }
            Ok(Err(error)) => tracing::warn!(ring = %config.ring, %error, "renewal failed"),
            Err(_) => tracing::warn!(ring = %config.ring, "renewal timed out"),
        }
        if !shard.fresh() && shard.fence() {
            tracing::warn!(ring = %config.ring, "could not renew within the deadline: fenced");
        }
    }
}

/// One round: look, decide, move. Slots given up are released each once
/// its steps are done; slots taken are acquired after, side by side. What
/// it returns: when the next member's Lease runs out, unless it renews.
async fn round(
    api: &Api<Lease>,
    config: &RingConfig,
    shard: &Shard,
    seen: &std::sync::Mutex<Seen>,
) -> Result<Option<Instant>, kube::Error> {
    let now = Instant::now();
    let mut live = BTreeSet::from([config.identity.clone()]);
    let expiry;
    let mut holders = BTreeMap::new();
    let mut slot_leases = BTreeMap::new();
    let held = shard.held();
    {
        let mut seen = seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (members, ends) = seen.live(config, now);
        live.extend(members);
        expiry = ends;
        for (name, lease) in &seen.leases {
            if role(lease) != "slot" {
                continue;
            }
            if let Some(slot) = name
                .rsplit_once("-slot-")
                .and_then(|(_, n)| n.parse::<u32>().ok())
                .filter(|n| *n < SLOTS)
            {
                holders.insert(slot, self::holder(lease));
                slot_leases.insert(slot, lease.clone());
            }
        }
        let owners = assignment(&live);
        for slot in 0..SLOTS {
            let mine =
                owners.get(slot as usize).copied().flatten() == Some(config.identity.as_str());
            if !mine || held & (1 << slot) != 0 {
                seen.wanted.remove(&slot);
            } else {
                seen.wanted.entry(slot).or_insert(now);
            }
        }
    }
    shard.members.store(live.len(), Ordering::Relaxed);
    let moves = plan(&config.identity, &holders, &live, held);
    tracing::debug!(ring = %config.ring, members = live.len(), held = held.count_ones(),
        moves = moves.len(), "ring round");
    // Each slot given up is released once its own steps are done: one
    // long step holds back its slot only.
    let releases = moves.iter().filter_map(|m| match m {
        Move::Release(slot) => Some((*slot, slot_leases.remove(slot))),
        Move::Acquire(_) => None,
    });
    let releases = releases.map(|(slot, current)| async move {
        shard.drain(slot).await;
        if write_slot(api, config, slot, current, "").await? {
            tracing::info!(ring = %config.ring, slot, "slot released");
        }
        Ok::<(), kube::Error>(())
    });
    futures_util::future::try_join_all(releases).await?;
    let acquisitions = moves.iter().filter_map(|m| match m {
        Move::Acquire(slot) => Some((*slot, slot_leases.remove(slot))),
        Move::Release(_) => None,
    });
    let acquisitions = acquisitions.map(|(slot, current)| async move {
        // A fence while the write is in flight (a stop, a hung request)
        // voids it: the others may have taken the slot since.
        let fences = shard.fences();
        let won = write_slot(api, config, slot, current, &config.identity).await?
            && shard.fresh()
            && shard.fences() == fences;
        if won {
            shard.acquire(slot);
            shard.handovers.fetch_add(1, Ordering::Relaxed);
            tracing::info!(ring = %config.ring, slot, "slot acquired");
        }
        Ok::<_, kube::Error>(won.then_some(slot))
    });
    let acquired = futures_util::future::try_join_all(acquisitions).await?;
    let mut seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for slot in acquired.into_iter().flatten() {
        if let (Some(since), Some(histogram)) =
            (seen.wanted.remove(&slot), shard.handover_time.get())
        {
            histogram.observe(since.elapsed().as_secs_f64());
        }
    }
    Ok(expiry)
}

/// Runs the ring until `shutdown` resolves, then releases every slot held
/// (after the steps in flight; still renewing meanwhile) and deletes this
/// replica's member Lease.
pub async fn run(
    client: kube::Client,
    config: RingConfig,
    shard: Arc<Shard>,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let renewed = Arc::new(Notify::new());
    let renewing = tokio::spawn(keep_renewed(
        api.clone(),
        config.clone(),
        Arc::clone(&shard),
        Arc::clone(&renewed),
    ));
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    let changed = Arc::new(Notify::new());
    let watching = tokio::spawn(watch(
        api.clone(),
        config.clone(),
        Arc::clone(&seen),
        Arc::clone(&changed),
    ));
    let mut expiry = None;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let runs_out = async {
            match expiry {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = renewed.notified() => {}
            () = changed.notified() => {}
            () = runs_out => {}
            () = shutdown.as_mut() => break,
        }
        match round(&api, &config, &shard, &seen).await {
            Ok(next) => expiry = next,
            Err(error) => tracing::warn!(ring = %config.ring, %error, "ring round failed"),
        }
        shard.publish();
    }
    watching.abort();
    let held = shard.held();
    let (api, config, shard) = (&api, &config, &*shard);
    let releases = (0..SLOTS)
        .filter(|s| held & (1 << s) != 0)
        .map(|slot| async move {
            shard.drain(slot).await;
            let name = config.slot_lease(slot);
            let current = tokio::time::timeout(config.renew_deadline, api.get_opt(&name))
                .await
                .ok()
                .and_then(Result::ok)
                .flatten();
            if let Err(error) = write_slot(api, config, slot, current, "").await {
                tracing::warn!(ring = %config.ring, slot, %error, "failed to release a slot");
            }
        });
    futures_util::future::join_all(releases).await;
    shard.publish();
    renewing.abort();
    let name = config.member_lease(&config.identity);
    let params = kube::api::DeleteParams::default();
    match tokio::time::timeout(config.renew_deadline, api.delete(&name, &params)).await {
        Ok(Ok(_)) => tracing::info!(ring = %config.ring, "left the ring"),
        Ok(Err(error)) => {
            tracing::warn!(ring = %config.ring, %error, "failed to delete the member lease");
        }
        Err(_) => tracing::warn!(ring = %config.ring, "deleting the member lease timed out"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ring::range_of;
    use crate::testing::{until, until_showing};

    fn config(identity: &str) -> RingConfig {
        RingConfig::new("default", "ring", identity, Duration::from_secs(3))
    }

    /// The slots a and b hold (one bit a slot): what a wait on the ring
    /// prints when it gives up.
    fn ring_state(a: &Shard, b: &Shard) -> (u64, u64) {
        (a.held(), b.held())
    }

    /// A watch that stalled without an error shows no one's renewals, this
    /// replica's own included: the others' silence is then not theirs, and
    /// every member seen stays live until the watch shows a renewal again.
    #[test]
    fn silences_should_be_timed_only_while_the_watch_shows_this_replicas_own_renewals() {
        let config = config("a");
        let member = |holder: &str, version: &str| {
            let mut lease = lease(&config.member_lease(holder), &config, "member", holder);
            lease.metadata.resource_version = Some(version.to_owned());
            lease
        };
        let names = |(live, _): (BTreeSet<String>, Option<Instant>)| -> Vec<String> {
            live.into_iter().collect()
        };
        let t0 = Instant::now();
        let mut seen = Seen::default();
        seen.saw(watcher::Event::Init, t0);
        seen.saw(watcher::Event::InitApply(member("a", "1")), t0);
        seen.saw(watcher::Event::InitApply(member("b", "1")), t0);
        assert!(!seen.timely(&config, t0), "not listed yet");
        seen.saw(watcher::Event::InitDone, t0);
        assert_eq!(
            seen.live(&config, t0).1,
            Some(t0 + config.lease_duration),
            "b's Lease runs out a Lease after it was seen"
        );

        // a renews, and the watch shows it; b is silent past its Lease.
        let mut now = t0;
        let mut version = 1;
        while now < t0 + config.lease_duration {
            now += config.retry_period;
            version += 1;
            seen.saw(
                watcher::Event::Apply(member("a", &version.to_string())),
                now,
            );
        }
        assert_eq!(names(seen.live(&config, now)), ["a"], "b's silence timed");

        // The watch stalls: nothing more is shown, a's own renewals neither.
        let stalled = now;
        let later = stalled + config.renew_deadline;
        seen.saw(watcher::Event::Apply(member("b", "2")), stalled);
        assert_eq!(names(seen.live(&config, stalled)), ["a", "b"]);
        let after = later + config.lease_duration;
        assert!(!seen.timely(&config, after));
        assert_eq!(
            names(seen.live(&config, after)),
            ["a", "b"],
            "b's silence is the watch's: b stays live"
        );
        assert_eq!(
            seen.live(&config, after).1,
            None,
            "and no expiry is planned"
        );

        // The watch shows a's renewal again: b's silence is b's.
        seen.saw(watcher::Event::Apply(member("a", "99")), after);
        assert_eq!(names(seen.live(&config, after)), ["a"]);

        // A watch that failed is not timely until it lists again.
        seen.synced = false;
        assert_eq!(names(seen.live(&config, after)), ["a", "b"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_members_slots_should_be_taken_when_its_lease_runs_out() {
        // A retry period of 1 s: a look every period would see the silence
        // up to 1 s late and act on it up to 1 s later still.
        let lease = Duration::from_millis(7500);
        let config = |identity| RingConfig::new("default", "ring", identity, lease);
        let (server, client) = crate::testing::cluster().await;
        let partition = crate::testing::Partition::start(server.addr()).await;
        let (a, _a) = start(client.clone(), config("a"), std::future::pending());
        let (b, _b) = start(partition.client(), config("b"), std::future::pending());
        until_showing(
            "a and b share the ring",
            || ring_state(&a, &b),
            |(a, b)| a.count_ones() == SLOTS / 2 && b.count_ones() == SLOTS / 2,
        )
        .await;
        // Cut just after one of b's renewals: its requests hang from then.
        let leases: Api<Lease> = Api::namespaced(client, "default");
        let name = config("b").member_lease("b");
        let version = || async {
            let lease = leases.get(&name).await.expect("b's member Lease");
            lease.metadata.resource_version
        };
        let renewed = version().await;
        while version().await == renewed {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        partition.hold();
        let cut = Instant::now();
        until("a holds every slot", || a.held().count_ones() == SLOTS).await;
        let taken = cut.elapsed();
        assert!(
            taken < lease + Duration::from_millis(300),
            "b's slots taken {taken:?} after its last renewal (Lease {lease:?})"
        );
        assert!(!b.fresh(), "b fenced itself");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_release_waiting_for_a_step_should_neither_stop_renewals_nor_hand_the_slot_over() {
        let (_server, client) = crate::testing::cluster().await;
        let (a, _a) = start(client.clone(), config("a"), std::future::pending());
        until("a holds every slot", || a.held().count_ones() == SLOTS).await;
        // A step of a slot that is b's once b joins, in flight for twice a
        // Lease's duration: a's release of it waits that long.
        let joined = BTreeSet::from(["a".to_owned(), "b".to_owned()]);
        let slot = assignment(&joined)
            .iter()
            .position(|owner| *owner == Some("b"))
            .and_then(|s| u32::try_from(s).ok())
            .expect("b owns slots");
        let step = a.begin(range_of(slot).start).expect("a holds the slot");
        let (b, _b) = start(client, config("b"), std::future::pending());
        until_showing(
            "a gives b's slots up",
            || ring_state(&a, &b),
            |(a, _)| a.count_ones() == SLOTS / 2,
        )
        .await;
        until_showing(
            "b takes those without a step in flight",
            || ring_state(&a, &b),
            |(_, b)| b.count_ones() == SLOTS / 2 - 1,
        )
        .await;
        let waiting = Instant::now() + Duration::from_secs(6);
        while Instant::now() < waiting {
            assert!(a.fresh(), "a renews while its release waits");
            assert!(!step.valid(), "a starts nothing of a slot it gives up");
            assert_eq!(
                b.held() & (1 << slot),
                0,
                "b takes no slot with a step in flight"
            );
            assert_eq!(b.held().count_ones(), SLOTS / 2 - 1, "b takes no slot of a");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(step);
        until("b takes the slot once the step is done", || {
            b.held() & (1 << slot) != 0
        })
        .await;
        assert_eq!(a.held().count_ones(), SLOTS / 2);
    }
}
