//! One of a controller's workers: takes a key from the queue, passes the
//! ring's gate, runs the step on a blocking thread under a permit of the
//! host's workers (kept for the next step when one is ready and its turn
//! comes, [`crate::fair`]), sends its actions through the applier, and
//! tells the queue how it went.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::departed::{Departed, WithPrimary};
use super::memo::{Memo, primary_version};
use super::shared::Shared;
use super::span;
use super::triggers::Triggers;
use super::unchanged::Unchanged;
use super::version::{Current, Version};
use crate::applier::ApplyError;
use crate::fair::Permit;
use crate::listing::Key;
use crate::metrics::Reconciled;
use crate::queue::{Done, WorkQueue};
use crate::recorder::Recorder;
use crate::ring::InFlight;
use kubewasm_runtime::cache::Cache;
use kubewasm_runtime::fixture::{Fixture, RecordingCache};
use kubewasm_runtime::resource::ObjectKey;
use kubewasm_runtime::step;
use kubewasm_runtime::{Plugin, Request, ScheduledRequest};

/// One of a controller's workers.
#[derive(Clone)]
pub(super) struct Worker {
    pub(super) current: Current,
    pub(super) queue: Arc<WorkQueue>,
    /// The inputs of each key's last successful reconcile, shared by the
    /// plugin's workers.
    pub(super) memo: Arc<Memo>,
    /// The applies each key's last steps sent, shared by the plugin's
    /// workers: one the cached object holds is not sent again.
    pub(super) unchanged: Arc<Unchanged>,
    /// What each key last read of the plugin's `reads` types, shared by
    /// its workers and its mapping handlers.
    pub(super) triggers: Arc<Triggers>,
    /// The primaries that left the selector holding the finalizer.
    pub(super) departed: Arc<Departed>,
    pub(super) shared: Shared,
}

impl Worker {
    /// The next key: with a permit kept from the last step (`turn`), one
    /// ready now, else the permit goes and the worker waits for a key.
    async fn next_key(&self, turn: &mut Option<Permit>) -> Option<(Key, Duration)> {
        if turn.is_some() {
            if let Some(next) = self.queue.try_next() {
                return Some(next);
            }
            *turn = None;
        }
        self.queue.next().await
    }

    pub(super) async fn run(self) {
        let mut turn: Option<Permit> = None;
        while let Some((key, waited)) = self.next_key(&mut turn).await {
            let taken = std::time::Instant::now();
            // The step runs on the version current when it starts.
            let version = self.current.get();
            let name = &version.plugin.declaration().name;
            self.shared.metrics.waited(name, waited);
            // Its inputs unchanged since its last successful reconcile:
            // not called, nothing resent (nor sent: no slot is needed).
            if self.memo.unchanged(&key, self.queue.cause(&key), &version) {
                tracing::debug!(plugin = %name, key = %key, "reconcile skipped");
                self.shared.metrics.skipped(name);
                self.finish(name, &key, Done::Forget, taken);
                continue;
            }
            // With sharding, only a slot this replica holds starts a step,
            // and the step is in flight for the slot until it ends.
            let in_flight = match &self.shared.shard {
                Some(shard) => {
                    let Some(in_flight) = version
                        .cache
                        .hash_of(&key, shard)
                        .or_else(|| self.departed.hash_of(&key))
                        .and_then(|hash| shard.begin(hash))
                    else {
                        // Its slot's holder has it, or lists it on acquiring.
                        self.finish(name, &key, Done::Forget, taken);
                        turn = None;
                        continue;
                    };
                    Some(in_flight)
                }
                None => None,
            };
            // Logged at DEBUG with and without a ring: what the tests read
            // to see that no key is in two steps at once.
            let replica = self.shared.shard.as_ref().map(|shard| shard.identity());
            tracing::debug!(replica, plugin = %name, key = %key,
                slot = in_flight.as_ref().map(InFlight::slot), "reconcile started");
            let gate = in_flight.as_ref();
            let permit = match turn.take() {
                Some(permit) => Ok(permit),
                None => self.shared.workers.acquire(&version.flow).await,
            };
            let declaration = version.plugin.declaration();
            let span = span::reconcile(
                name,
                &declaration.primary,
                &version.plugin.digest(),
                &key,
                waited,
            );
            let (done, permit) = match permit {
                Ok(permit) => {
                    let done = self
                        .reconcile(&version, &key, gate)
                        .instrument(span.clone())
                        .await;
                    (done, Some(permit))
                }
                Err(closed) => (Done::Retry(closed.to_string()), None),
            };
            // Fenced: what it had not written when the slot went was never
            // sent.
            let fenced = in_flight.as_ref().is_some_and(|f| !f.valid());
            span::ended(&span, &done, fenced);
            tracing::debug!(replica, plugin = %name, key = %key, fenced, "reconcile ended");
            drop(in_flight);
            self.finish(name, &key, done, taken);
            // More ready: the next turn is asked for now, competing by the
            // plugin's share; else the permit goes.
            if let Some(permit) = permit
                && self.queue.has_ready()
            {
                turn = permit.next_turn(&version.flow).await.ok();
            }
            // Nothing left to do: an idle plugin holds no instance.
            if self.queue.is_idle() {
                version.plugin.release_idle();
            }
        }
    }

    /// Tells the queue `key`, handed out at `taken`, is `done`; the work's
    /// duration and a retry's backoff go to the metrics.
    fn finish(&self, plugin: &str, key: &Key, done: Done, taken: std::time::Instant) {
        self.shared.metrics.worked(plugin, taken.elapsed());
        if let Some(backoff) = self.queue.done(key, done) {
            self.shared.metrics.backed_off(plugin, backoff);
        }
    }

    /// One step of `key`, in its span ([`span`]).
    async fn reconcile(
        &self,
        version: &Version,
        key: &Key,
        in_flight: Option<&InFlight<'_>>,
    ) -> Done {
        let name = version.plugin.declaration().name.clone();
        let metrics = &self.shared.metrics;
        let failure = self.queue.failure(key);
        span::retries(failure.as_ref().map_or(0, |f| f.count));
        let primary = primary_version(version, key);
        // Not cached, but it left the selector holding the finalizer: its
        // last state stands in for it, and it is finalized.
        let departed = primary.is_none().then(|| self.departed.get(key)).flatten();
        let request = Request {
            config: version.config.clone(),
            retries: failure.as_ref().map_or(0, |f| f.count),
            last_failure: failure.map(|f| f.message),
            released: departed.is_some(),
            ..Request::new(ObjectKey::clone(key))
        };
        let started = std::time::Instant::now();
        let plugin = Arc::clone(&version.plugin);
        let cache: Arc<dyn Cache> = match departed {
            Some(object) => Arc::new(WithPrimary {
                inner: Arc::clone(&version.cache) as Arc<dyn Cache>,
                resource: plugin.declaration().primary.clone(),
                key: ObjectKey::clone(key),
                object,
            }),
            None => Arc::clone(&version.cache) as Arc<dyn Cache>,
        };
        let recorder = self.shared.recorder.clone().filter(|r| r.records(&name));
        let call = self
            .shared
            .calls
            .start(&name, key, plugin.limits().deadline);
        let stepped = self
            .shared
            .demotion
            .spawn_blocking(&name, move || {
                let stepped = match recorder {
                    Some(recorder) => recorded(&recorder, &plugin, cache, &request),
                    None => step::run(&plugin, cache, &request),
                };
                (stepped, plugin.take_reads_denied())
            })
            .await
            .map(|(stepped, denied)| {
                metrics.reads_denied(&name, denied);
                stepped
            });
        drop(call);
        // Each write is fenced: by the ring's slot, and by leadership (a
        // leader that stepped down mid-step writes nothing more).
        let may_write = || in_flight.is_none_or(InFlight::valid) && *self.shared.leading.borrow();
        let (message, retry_after) = match stepped {
            Err(error) => (format!("reconcile task failed: {error}"), None),
            Ok(Err(error)) if !error.ran() => {
                // Waiting for an instance is no failure: queued again.
                tracing::debug!(error = %error.source, "not run; queued again");
                metrics.not_run(&name);
                return Done::Again;
            }
            Ok(Err(error)) => {
                metrics.step_failed(&name, &error);
                self.shared.demotion.after(&name, &error.source);
                // A refused outcome is told on the primary (which child).
                if let Some(report) = &error.report
                    && let Err((_, failed)) = self
                        .shared
                        .applier
                        .apply_while(std::slice::from_ref(report), &[], may_write)
                        .await
                {
                    tracing::debug!(error = %failed, "refusal event not written");
                }
                (error.detail(), None)
            }
            Ok(Ok(step)) => {
                metrics.stepped(&name, &step);
                let unchanged = self
                    .unchanged
                    .check(key, &step.actions, version.cache.as_ref());
                let left_out = unchanged.iter().flatten().count();
                match self
                    .shared
                    .applier
                    .apply_while(&step.actions, &unchanged, may_write)
                    .await
                {
                    Ok(written) => {
                        if step.call == step::Call::Finalize && step.requeue_after.is_none() {
                            // Finalized, the finalizer gone: nothing to let go.
                            self.departed.back(key);
                        }
                        self.remember_reads(key, primary.is_some(), version, &step);
                        if primary.is_some() {
                            self.unchanged.sent(key, &step.actions, &written);
                        } else {
                            self.unchanged.forget(key);
                        }
                        self.memo.succeeded(key, primary, version, &step, &written);
                        tracing::debug!(call = step.call.name(), actions = step.actions.len(),
                            left_out, requeue_after = ?step.requeue_after, "reconciled");
                        metrics.applied(&name, step.actions.len() - left_out, 0);
                        metrics.unchanged(&name, left_out);
                        let result = if step.requeue_after.is_some() {
                            Reconciled::RequeueAfter
                        } else {
                            Reconciled::Success
                        };
                        metrics.reconciled(&name, result, started.elapsed());
                        return step.requeue_after.map_or(Done::Forget, Done::RequeueAfter);
                    }
                    Err((applied, error @ ApplyError::Fenced { .. })) => {
                        // The slot's next holder reconciles it.
                        tracing::debug!(%error, applied, "step abandoned");
                        return Done::Forget;
                    }
                    Err((done, error)) => {
                        let left_out = unchanged.iter().take(done).flatten().count();
                        metrics.applied(&name, done - left_out, 1);
                        (error.to_string(), error.retry_after())
                    }
                }
            }
        };
        self.memo.forget(key);
        self.unchanged.forget(key);
        metrics.reconciled(&name, Reconciled::Error, started.elapsed());
        tracing::warn!(error = %message, ?retry_after, "reconcile failed; retrying with backoff");
        match retry_after {
            Some(at_least) => Done::Throttled(message, at_least),
            None => Done::Retry(message),
        }
    }

    /// Makes the scheduled call for the time `at`, if this host is the one
    /// to ([`super::schedule`]): the leader, or in a ring the replica
    /// holding the slot of the plugin's name.
    pub(super) async fn scheduled(&self, at: jiff::Timestamp) {
        let version = self.current.get();
        let name = &version.plugin.declaration().name;
        if !*self.shared.leading.borrow() {
            return;
        }
        let in_flight = match &self.shared.shard {
            Some(shard) => match shard.begin(kubewasm_core::shard::place(Some(name))) {
                Some(in_flight) => Some(in_flight),
                None => return,
            },
            None => None,
        };
        let Ok(_permit) = self.shared.workers.acquire(&version.flow).await else {
            return;
        };
        let request = ScheduledRequest {
            at,
            config: version.config.clone(),
            now: jiff::Timestamp::now(),
        };
        let (plugin, cache) = (Arc::clone(&version.plugin), Arc::clone(&version.cache));
        let stepped = self
            .shared
            .demotion
            .spawn_blocking(name, move || step::scheduled(&plugin, cache, &request))
            .await;
        let may_write =
            || in_flight.as_ref().is_none_or(InFlight::valid) && *self.shared.leading.borrow();
        let failed = match stepped {
            Err(error) => Some(format!("scheduled task failed: {error}")),
            Ok(Err(error)) => {
                self.shared.demotion.after(name, &error);
                Some(error.to_string())
            }
            Ok(Ok(step)) => self
                .shared
                .applier
                .apply_while(&step.actions, &[], may_write)
                .await
                .err()
                .map(|(applied, error)| format!("{error} (after {applied} actions)")),
        };
        match failed {
            None => {
                tracing::info!(plugin = %name, %at, "scheduled call made");
                self.shared.metrics.scheduled(name, "success");
            }
            Some(error) => {
                tracing::warn!(plugin = %name, %at, %error, "scheduled call failed; the next is the schedule's");
                self.shared.metrics.scheduled(name, "error");
            }
        }
    }

    /// Keeps what a successful reconcile of `key` read, for reads as
    /// triggers; a key whose primary is gone reads nothing any more.
    fn remember_reads(&self, key: &Key, present: bool, version: &Version, step: &step::Step) {
        if !present || step.call != step::Call::Reconcile {
            self.triggers.forget(key);
        } else if self
            .triggers
            .record(key, &step.reads, version.plugin.declaration())
        {
            self.shared
                .metrics
                .read_triggers_overflowed(&version.plugin.declaration().name);
        }
    }
}

/// Runs a step against a recording of `cache`, and writes it as a fixture
/// when the plugin was called (a step that ran nothing, or found no
/// instance, is not one).
fn recorded(
    recorder: &Recorder,
    plugin: &Plugin,
    cache: Arc<dyn Cache>,
    request: &Request,
) -> Result<step::Step, step::StepError> {
    let recording = Arc::new(RecordingCache::new(cache));
    let stepped = step::run(plugin, Arc::clone(&recording) as Arc<dyn Cache>, request);
    let called = match &stepped {
        Ok(step) => step.call != step::Call::None,
        Err(error) => error.ran(),
    };
    if called {
        let fixture = Fixture::record(plugin, request, &recording, &stepped, recorder.secrets());
        match recorder.write(&fixture) {
            Ok(path) => tracing::debug!(path = %path.display(), "step recorded"),
            Err(error) => tracing::warn!(%error, "step not recorded"),
        }
    }
    stepped
}
