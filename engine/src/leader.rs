//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` does it.
//!
//! # States
//! ```text
//!   candidate ──acquired──▶ leader ──renewal failed past renew_deadline──▶ candidate
//!       ▲                     │ shutdown: release (holder cleared)
//!       └── lease held by another and renewed within lease_duration
//! ```
//!
//! # Rules
//! - A candidate takes the Lease only when it is free (no holder) or its
//!   holder has not renewed it for `lease_duration`, measured on this
//!   process's own clock from when it last *saw the record change* (so
//!   clocks of the two processes need not agree).
//! - Every write is an update with the Lease's resourceVersion: of two
//!   candidates racing, one gets a conflict and stays a candidate. A
//!   leader's conflict (someone changed the Lease since it was read: a
//!   label, an annotation) is a failed renewal like any other, not a
//!   takeover: only a Lease another holds says that.
//! - A leader renews every `retry_period`; if it cannot renew for
//!   `renew_deadline` it steps down before another can take the Lease
//!   (`renew_deadline` < `lease_duration`), counted from when its last
//!   renewal was sent and whatever the request in flight is doing: an
//!   attempt that hangs is abandoned at the deadline.
//! - The engine's informers run whatever the state (a standby's caches are
//!   warm, so a handover does not wait for lists); only the workers wait for
//!   leadership.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// How the Lease is held.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This process's identity, unique among candidates.
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often candidates try and leaders renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// client-go's defaults (15 s, 10 s, 2 s) for the Lease `namespace/name`.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// The same, with a lease duration of `duration` and the renew deadline
    /// and retry period scaled as client-go's defaults are (2/3, 2/15).
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self.renew_deadline = duration * 2 / 3;
        self.retry_period = (duration * 2 / 15).max(Duration::from_millis(100));
        self
    }
}

/// What one round found.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    /// This process holds the Lease: acquired or renewed.
    Held,
    /// Another holds it, renewed within its duration.
    Other,
    /// The write lost a race (409): the Lease changed since it was read.
    Conflict,
}

/// What the elector last saw of the Lease.
struct Observed {
    record: Option<(String, Option<MicroTime>)>,
    at: Instant,
}

/// Runs the election until `shutdown` resolves, publishing whether this
/// process leads on `leading`; releases the Lease on the way out if it
/// holds it.
pub async fn run(
    client: kube::Client,
    config: LeaseConfig,
    leading: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut observed = Observed {
        record: None,
        at: Instant::now(),
    };
    let mut last_renewal = Instant::now();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let is_leader = *leading.borrow();
        let sent = Instant::now();
        // Every attempt is bounded: a leader's by its renew deadline, at
        // which it steps down whatever the request is doing (a request
        // that hangs must not keep it leading past the point where
        // another may take the Lease), a candidate's by as long.
        let bound = if is_leader {
            last_renewal + config.renew_deadline
        } else {
            sent + config.renew_deadline
        };
        let attempt = try_acquire_or_renew(&api, &config, &mut observed);
        let failed = match tokio::time::timeout_at(bound, attempt).await {
            Ok(Ok(Round::Held)) => {
                last_renewal = sent;
                if !is_leader {
                    tracing::info!(lease = %config.name, identity = %config.identity, "became the leader");
                    leading.send_replace(true);
                }
                false
            }
            Ok(Ok(Round::Other)) => {
                if is_leader {
                    tracing::warn!(lease = %config.name, "the lease was taken over; standing by");
                    leading.send_replace(false);
                }
                false
            }
            Ok(Ok(Round::Conflict)) => {
                tracing::debug!(lease = %config.name, "the lease changed since it was read");
                true
            }
            Ok(Err(error)) => {
                tracing::warn!(lease = %config.name, %error, "lease update failed");
                true
            }
            Err(_) => {
                tracing::warn!(lease = %config.name, "lease update timed out");
                true
            }
        };
        if failed && is_leader && last_renewal.elapsed() >= config.renew_deadline {
            tracing::warn!(lease = %config.name, "could not renew within the deadline; standing by");
            leading.send_replace(false);
        }
        tokio::select! {
            () = tokio::time::sleep(config.retry_period) => {}
            () = shutdown.as_mut() => break,
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        if let Err(error) = release(&api, &config).await {
            tracing::warn!(lease = %config.name, %error, "failed to release the lease");
        } else {
            tracing::info!(lease = %config.name, "released the lease");
        }
    }
}

/// Now, as a Lease's times hold it (also the ring's slot Leases').
pub(crate) fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// One round: what it found of the Lease, taken or renewed if it could be.
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observed: &mut Observed,
) -> Result<Round, kube::Error> {
    let seconds = i32::try_from(config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Round::Held),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Round::Conflict),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let record = Some((holder.clone(), spec.renew_time.clone()));
    if record != observed.record {
        observed.record = record;
        observed.at = Instant::now();
    }
    let mine = holder == config.identity;
    // Held for as long as its holder said (client-go reads the record's
    // duration too): a holder with a longer Lease is not cut short.
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(config.lease_duration, Duration::from_secs);
    let held = !holder.is_empty() && observed.at.elapsed() < duration;
    if held && !mine {
        return Ok(Round::Other);
    }
    if !mine {
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(now());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(now());
    spec.lease_duration_seconds = Some(seconds);
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(Round::Held),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Round::Conflict),
        Err(e) => Err(e),
    }
}

/// Clears the holder so a standby takes over at once.
async fn release(api: &Api<Lease>, config: &LeaseConfig) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = Some(now());
    spec.lease_duration_seconds = Some(1);
    api.replace(&config.name, &PostParams::default(), &lease)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::testing::{Partition, cluster, until};

    fn config(identity: &str) -> LeaseConfig {
        LeaseConfig::new("default", "leader", identity).with_lease_duration(Duration::from_secs(3))
    }

    /// `client`, its next `conflicts` updates of the Lease losing a race:
    /// before each is sent, someone annotates the Lease (a real 409 from
    /// the server follows).
    fn annotating(client: kube::Client, conflicts: Arc<AtomicUsize>) -> kube::Client {
        crate::around::around(client, move |client, request| {
            let conflicts = Arc::clone(&conflicts);
            async move {
                if request.method() == http::Method::PUT
                    && conflicts
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                {
                    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
                    let patch = serde_json::json!({"metadata": {"annotations": {"touched": now().0.to_string()}}});
                    leases
                        .patch(
                            "leader",
                            &kube::api::PatchParams::default(),
                            &kube::api::Patch::Merge(patch),
                        )
                        .await?;
                }
                client.send(request).await
            }
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_whose_renewal_meets_a_conflict_should_keep_leading_and_renew() {
        let (_server, client) = cluster().await;
        let conflicts = Arc::new(AtomicUsize::new(0));
        let annotating = annotating(client.clone(), Arc::clone(&conflicts));
        let (a, mut a_leading) = watch::channel(false);
        tokio::spawn(run(annotating, config("a"), a, std::future::pending()));
        until("a leads", || *a_leading.borrow()).await;
        a_leading.mark_unchanged();
        let leases: Api<Lease> = Api::namespaced(client, "default");
        let renewed = |lease: &Lease| lease.spec.as_ref().and_then(|s| s.renew_time.clone());
        let before = renewed(&leases.get("leader").await.expect("the Lease"));
        // Two renewals in a row meet a conflict (0.8 s of a 2 s deadline).
        conflicts.store(2, Ordering::SeqCst);
        until("two conflicts met", || {
            conflicts.load(Ordering::SeqCst) == 0
        })
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let lease = leases.get("leader").await.expect("the Lease");
        assert!(
            !a_leading.has_changed().expect("the elector runs"),
            "a stepped down (and back) on a conflict"
        );
        assert!(*a_leading.borrow());
        assert_eq!(
            lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref()),
            Some("a")
        );
        assert_ne!(renewed(&lease), before, "renewed after the conflicts");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_should_be_held_for_the_duration_its_holder_wrote() {
        let (_server, client) = cluster().await;
        let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
        let held = Lease {
            metadata: ObjectMeta {
                name: Some("leader".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                holder_identity: Some("another".to_owned()),
                lease_duration_seconds: Some(3600),
                renew_time: Some(now()),
                ..Default::default()
            }),
        };
        leases
            .create(&PostParams::default(), &held)
            .await
            .expect("created");
        let (a, a_leading) = watch::channel(false);
        tokio::spawn(run(client, config("a"), a, std::future::pending()));
        // Twice a's own Lease duration, with no renewal from the holder.
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(
            !*a_leading.borrow(),
            "took a Lease its holder holds for an hour"
        );
        let lease = leases.get("leader").await.expect("the Lease");
        let holder = lease.spec.and_then(|s| s.holder_identity);
        assert_eq!(holder.as_deref(), Some("another"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_whose_renewals_hang_should_step_down_before_its_lease_can_be_taken() {
        let (server, client) = cluster().await;
        let partition = Partition::start(server.addr()).await;
        let (a, a_leading) = watch::channel(false);
        tokio::spawn(run(
            partition.client(),
            config("a"),
            a,
            std::future::pending(),
        ));
        until("a leads", || *a_leading.borrow()).await;
        let (b, b_leading) = watch::channel(false);
        tokio::spawn(run(client, config("b"), b, std::future::pending()));
        // The partition: a's requests hang, they do not fail.
        partition.hold();
        let cut = Instant::now();
        until("a steps down", || !*a_leading.borrow()).await;
        let stepped_down = cut.elapsed();
        until("b leads", || *b_leading.borrow()).await;
        let taken_over = cut.elapsed();
        // Its renew deadline is 2 s after its last renewal; the Lease can
        // be taken 3 s after the other saw it last change.
        assert!(
            stepped_down < Duration::from_secs(3),
            "a stepped down {stepped_down:?} after the cut, once its Lease could be taken"
        );
        assert!(
            stepped_down < taken_over,
            "a leads until {stepped_down:?}, b from {taken_over:?}"
        );
        // Healed: a stays a candidate while b renews.
        partition.release();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!*a_leading.borrow() && *b_leading.borrow());
    }
}
