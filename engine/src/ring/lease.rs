//! The ring's I/O: each round renews this replica's member Lease, reads the
//! others', and acquires or releases slot Leases as [`super::slots::plan`] decides
//! (resourceVersion-guarded writes).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use tokio::time::Instant;

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

/// What this replica saw of the member Leases.
#[derive(Default)]
struct Seen {
    /// Per member: its Lease's resourceVersion and when it was seen to change.
    members: BTreeMap<String, (String, Instant)>,
    /// Per slot this replica should own and does not hold: since when.
    wanted: BTreeMap<u32, Instant>,
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
