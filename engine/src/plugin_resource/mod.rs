//! Plugins as resources: the host runs what `Plugin` and `ClusterPlugin`
//! objects (group `kubewasm.dev`) ask for, and reports how it went in their
//! status.
//!
//! # Expected flow: a controller on the engine's own queue
//! Plugin resources are reconciled as any controller's keys are: the
//! [`watch`]es queue a resource's key on the engine's [`WorkQueue`] when its
//! spec or identity changes, and [`PluginResources::next_event`] hands the
//! keys out (deduplicated, never one key twice at once, a key changed
//! while it is processed run once more after). [`PluginResources::handle`]
//! then compares, level-triggered, what the object asks for with what runs:
//! - a generation not acted on yet is loaded ([`Loads`]: pulled from its
//!   `source` with its pull secrets' credentials, compiled or taken from
//!   the precompiled cache, checked against its grants and its
//!   configuration's schema) or, when `suspend` is set, stopped;
//! - a resource gone stops its plugin (informers released unless shared);
//! - what a load gave is run: swapped in for the running version (queue
//!   and keys kept) or started; a refusal leaves the running version
//!   serving;
//! - the status is written (only while leading, only when it differs).
//!
//! A key stays processing until its load and its status write are done,
//! then tells the queue how it went: a refusal that may pass on its own (a
//! registry or a pull secret not reachable) or a status not written is a
//! failure, retried with the queue's per-key exponential backoff (from
//! [`RETRY_FIRST`] to [`RETRY_MAX`]); a running version is looked at again
//! after [`COUNTERS_EVERY`], its reconcile counters then written; anything
//! else is forgotten until it changes.
//!
//! # Phases ([`Phase`]), one state machine per resource
//! ```text
//!            load ok                  spec changed, load ok
//! Pending ───────────▶ Running ◀────────────────────────────┐
//!    │                  │  │  spec changed, refused          │
//!    │ refused          │  └──▶ Running + Degraded ──────────┘
//!    ▼                  │ suspend
//! Failed ◀─ ─ ─ ─ ─ ─ ─ ▼
//!  (load ok: Running)  Suspended (unset: Pending)
//! ```
//! `Ready` is true exactly while a version runs; `Degraded` is true while
//! the latest generation was refused, its reason and message saying why
//! (a declaration exceeding the grants names every excess verb and type).
//! `observedGeneration` is the generation the status speaks of.
//!
//! # Identity and tenancy
//! A `Plugin` `team-a/mover` runs as the plugin `team-a.mover` (field
//! manager `kubewasm-team-a.mover`, finalizer `kubewasm.dev/team-a.mover`),
//! confined to `team-a` whatever it declares: its informers watch only that
//! namespace, its reads and writes reach only it, and its pull secrets are
//! read only from it. With impersonation on, its writes are made as the
//! ServiceAccount `<account>` of its namespace. A `ClusterPlugin` runs as
//! its name, reaching the namespaces of its grants. A name is one source's
//! at a time ([`crate::lifecycle`]): a resource does not displace a directory
//! plugin of its name, nor a directory plugin a resource's, and neither's
//! going stops the other's (`NameTaken`, from either side).
//!
//! # Status and events
//! Written with server-side apply (field manager `kubewasm`) on the status
//! subresource, only by the leader and only when it differs from what the
//! object shows ([`status`]). A refusal is also a `Warning` event
//! (events.k8s.io, reason as in `Degraded`) regarding the resource, in its
//! namespace (a ClusterPlugin's in `default`), as `kubectl describe` shows
//! it.

mod spec;
mod status;
pub mod types;
mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::task::JoinSet;

use crate::Engine;
use crate::controller::Settings;
use crate::lifecycle::owner::Owner;
use crate::lifecycle::rules;
use crate::listing::Key;
use crate::loader::{Loaded, Loads, Prepared, Refused};
use crate::queue::{Backoff, Done, Priority, WorkQueue};
use crate::rights::{Reads, RightsError};
use spec::{Asked, load};
pub use spec::{Generation, ResourceId, ResourceOptions};
use status::{Refusal, Tracked};
pub use types::{
    ClusterPluginResource, CommonSpec, Phase, PluginLimits, PluginResource, PluginStatus,
};

/// How often a running plugin's status (its reconcile counters) is looked
/// at again.
pub const COUNTERS_EVERY: Duration = Duration::from_secs(10);

/// First wait before a refusal that may pass is tried again.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);

/// Longest wait between tries.
pub const RETRY_MAX: Duration = Duration::from_secs(300);

/// What [`PluginResources::next_event`] gives, for
/// [`PluginResources::handle`].
#[derive(Debug)]
pub enum Event {
    /// A resource's key is due.
    Due(Key),
    /// A load finished: the plugin's name and what it gave.
    Loaded(String, Box<Loaded<Generation>>),
    /// A status write ended: the resource, and why it failed if it did.
    Written(ResourceId, Option<String>),
    /// A review of a running tenant plugin's rights ended.
    Checked(Checked),
}

/// How a review of a running tenant plugin's rights ended.
#[derive(Debug)]
pub struct Checked {
    id: ResourceId,
    uid: String,
    result: Result<(), RightsError>,
}

/// The plugin resources of a cluster and what runs of them (see the module
/// documentation).
pub struct PluginResources {
    client: kube::Client,
    sources: crate::loader::Sources,
    options: ResourceOptions,
    plugins: Store<PluginResource>,
    cluster: Store<ClusterPluginResource>,
    queue: Arc<WorkQueue>,
    /// Whether each kind's watch has listed once.
    listed: [Arc<AtomicBool>; 2],
    /// The watches and the resync on leading: they stop when this goes.
    _watches: JoinSet<()>,
    tracked: BTreeMap<ResourceId, Tracked>,
    loads: Loads<Generation>,
    leading: tokio::sync::watch::Receiver<bool>,
    /// Status writes in flight: one per key at most (its key processing).
    writes: JoinSet<(ResourceId, Option<String>)>,
    /// Refusal events in flight.
    events: JoinSet<()>,
    /// How far RBAC has changed (with impersonation on; else never).
    rbac: tokio::sync::watch::Receiver<watch::RbacEpochs>,
    /// Reviews of running tenant plugins' rights in flight: one per key at
    /// most (its key processing).
    checks: JoinSet<Checked>,
}

impl PluginResources {
    /// Watches the plugin resources of the cluster `client` reaches. Must
    /// be called within a tokio runtime.
    pub fn start(
        client: kube::Client,
        sources: crate::loader::Sources,
        options: ResourceOptions,
        leading: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        let queue = Arc::new(WorkQueue::new(Backoff {
            base: RETRY_FIRST,
            max: RETRY_MAX,
            ..Backoff::default()
        }));
        let mut watches = JoinSet::new();
        let listed: [Arc<AtomicBool>; 2] = Default::default();
        let loads = Loads::default();
        let plugins = watch::reflect(
            Api::<PluginResource>::all(client.clone()),
            (&queue, &loads.interrupter()),
            &listed[0],
            &mut watches,
        );
        let cluster = watch::reflect(
            Api::<ClusterPluginResource>::all(client.clone()),
            (&queue, &loads.interrupter()),
            &listed[1],
            &mut watches,
        );
        let rbac = if options.impersonate.is_some() {
            watch::rbac(client.clone(), plugins.clone(), &queue, &mut watches)
        } else {
            tokio::sync::watch::channel(watch::RbacEpochs::default()).1
        };
        watch::resync_when_leading(
            leading.clone(),
            (plugins.clone(), cluster.clone()),
            &queue,
            &mut watches,
        );
        Self {
            client,
            options,
            plugins,
            cluster,
            queue,
            listed,
            _watches: watches,
            tracked: BTreeMap::new(),
            loads,
            leading,
            writes: JoinSet::new(),
            events: JoinSet::new(),
            rbac,
            checks: JoinSet::new(),
            sources,
        }
    }

    /// The next key due, load finished or status write ended.
    pub async fn next_event(&mut self) -> Event {
        loop {
            tokio::select! {
                Some((name, loaded)) = self.loads.next() => {
                    return Event::Loaded(name, Box::new(loaded));
                }
                Some(written) = self.writes.join_next() => match written {
                    Ok((id, error)) => return Event::Written(id, error),
                    Err(error) => tracing::error!(%error, "a status write task failed"),
                },
                Some(checked) = self.checks.join_next() => match checked {
                    Ok(checked) => return Event::Checked(checked),
                    Err(error) => tracing::error!(%error, "a rights review task failed"),
                },
                Some((key, _)) = self.queue.next() => return Event::Due(key),
            }
        }
    }

    /// Acts on what [`Self::next_event`] gave.
    pub async fn handle(&mut self, engine: &mut Engine, event: Event) {
        while self.events.try_join_next().is_some() {}
        match event {
            Event::Due(key) => self.reconcile(engine, &ResourceId::from(&*key)).await,
            Event::Loaded(name, loaded) => {
                let loaded = loaded.under(&self.sources.discovered);
                self.finish(engine, name, loaded).await;
            }
            Event::Written(id, error) => self.end(&id, error),
            Event::Checked(checked) => self.checked(engine, checked).await,
        }
    }

    /// Every resource looks again (the cluster's types changed): one
    /// refused for a type not served loads, one running a type gone stops.
    pub(crate) fn look_again(&self) {
        for id in self.tracked.keys() {
            self.queue.add(id.key(), Priority::Event);
        }
    }

    /// The name `name` was freed by its owner: a resource refused under it
    /// loads.
    pub(crate) fn name_freed(&self, name: &str) {
        for (id, tracked) in &self.tracked {
            if tracked.refused.as_ref().is_some_and(|r| r.name_taken) && id.plugin_name() == name {
                self.queue.add(id.key(), Priority::Event);
            }
        }
    }

    /// Whether both kinds have been listed once.
    pub fn synced(&self) -> bool {
        self.listed.iter().all(|l| l.load(Ordering::Relaxed))
    }

    /// Whether both kinds listed and nothing is due or under way: every
    /// resource listed has been acted on (its load ended, its status
    /// written).
    pub fn settled(&self) -> bool {
        self.synced() && self.queue.is_idle()
    }

    /// What the resource `id` asks for now, if it exists.
    fn asked(&self, id: &ResourceId) -> Option<Asked> {
        match &id.namespace {
            Some(namespace) => self
                .plugins
                .get(&ObjectRef::new(&id.name).within(namespace))
                .and_then(|p| Asked::of_plugin(&p)),
            None => self
                .cluster
                .get(&ObjectRef::new(&id.name))
                .and_then(|c| Asked::of_cluster_plugin(&c)),
        }
    }

    /// Compares what the resource asks for with what runs, and acts (see
    /// the module documentation).
    async fn reconcile(&mut self, engine: &mut Engine, id: &ResourceId) {
        let name = id.plugin_name();
        let Some(asked) = self.asked(id) else {
            self.loads.cancel(&name);
            if self.tracked.remove(id).is_some_and(|t| t.running.is_some()) {
                rules::stop(
                    engine,
                    Owner::Resource,
                    &name,
                    id,
                    "plugin resource deleted",
                )
                .await;
            }
            self.queue.done(&id.key(), Done::Forget);
            return;
        };
        let tracked = self.tracked.entry(id.clone()).or_default();
        if tracked.uid != asked.uid {
            // A new object (or one deleted and created again).
            *tracked = Tracked {
                uid: asked.uid.clone(),
                running: tracked.running.take(),
                ..Tracked::default()
            };
        }
        // A refusal that may pass is tried again each time its key comes
        // back: after its backoff, or at once on a change; one for want of
        // rights, once RBAC changed.
        let epoch = self.rbac.borrow().of(id.namespace.as_deref());
        let rights_changed = tracked.rights_epoch != Some(epoch);
        let types = self.sources.discovered.now();
        let name_free = engine.holder(&name).is_none();
        let retry = tracked.observed == Some(asked.generation)
            && tracked.refused.as_ref().is_some_and(|r| {
                r.may_pass
                    || (r.on_rbac && rights_changed)
                    || r.unserved_at.is_some_and(|at| at != types.epoch)
                    || (r.name_taken && name_free)
            });
        if tracked.running.is_some()
            && !retry
            && tracked.generation == Some(asked.generation)
            && let Some(refused) = rules::unserved(engine, Owner::Resource, &name, &types)
        {
            // A type it declares went (its CRD deleted): it stops, and
            // loads again once the type is served.
            tracked.running = None;
            tracked.reads = None;
            rules::stop_unserved(engine, Owner::Resource, &name, id, &refused).await;
            self.refuse(id, &refused);
            self.write_status(engine, id);
            return;
        }
        if tracked.generation != Some(asked.generation) || retry {
            tracked.generation = Some(asked.generation);
            if asked.common.suspend {
                self.loads.cancel(&name);
                tracked.suspended = true;
                tracked.refused = None;
                tracked.observed = Some(asked.generation);
                if tracked.running.take().is_some() {
                    rules::stop(engine, Owner::Resource, &name, id, "plugin suspended").await;
                }
            } else {
                tracked.suspended = false;
                tracked.observed = None;
                tracked.loading = true;
                // The load reviews the rights as they are from now on.
                tracked.rights_epoch = Some(epoch);
                self.spawn(&asked);
                // The key stays processing until the load is run or refused.
                return;
            }
        }
        if rights_changed
            && let (Some(reads), Some((namespace, account))) =
                (&tracked.reads, self.options.tenant_account(id))
        {
            // RBAC changed under a running tenant plugin: its rights are
            // reviewed again; the key stays processing until they are.
            tracked.rights_epoch = Some(epoch);
            let (client, reads) = (self.client.clone(), reads.clone());
            let (namespace, account) = (namespace.to_owned(), account.to_owned());
            let (id, uid) = (id.clone(), tracked.uid.clone());
            self.checks.spawn(async move {
                let result = reads.check(&client, &namespace, &account).await;
                Checked { id, uid, result }
            });
            return;
        }
        self.write_status(engine, id);
    }

    /// Acts on a review of a running tenant plugin's rights: one lost stops
    /// it (its reads would be the host's), refused until RBAC grants it
    /// again; a review that failed is tried again with backoff.
    async fn checked(&mut self, engine: &mut Engine, checked: Checked) {
        let Checked { id, uid, result } = checked;
        let name = id.plugin_name();
        let Some(tracked) = self.tracked.get_mut(&id).filter(|t| t.uid == uid) else {
            return; // the resource went: its key already ended
        };
        match result {
            Ok(()) => {}
            Err(RightsError::Review { .. }) if tracked.running.is_some() => {
                tracked.rights_epoch = None;
                let message = result.err().map(|e| e.to_string()).unwrap_or_default();
                tracing::warn!(resource = %id, plugin = %name, %message,
                    "rights not reviewed; tried again with backoff");
                self.queue.done(&id.key(), Done::Retry(message));
                return;
            }
            Err(error) => {
                let refused = Refused::Rights(error);
                tracing::error!(resource = %id, plugin = %name, error = %refused,
                    "the tenant's account lost a right its plugin reads with: stopped");
                tracked.reads = None;
                if tracked.running.take().is_some() {
                    rules::stop(engine, Owner::Resource, &name, &id, "rights lost").await;
                }
                self.refuse(&id, &refused);
            }
        }
        self.write_status(engine, &id);
    }

    /// Records that the latest generation of `id` was refused, and tells
    /// it in an event (only while leading).
    fn refuse(&mut self, id: &ResourceId, refused: &Refused) {
        let refusal = Refusal::of(refused);
        let Some(tracked) = self.tracked.get_mut(id) else {
            return;
        };
        if *self.leading.borrow()
            && let Some(generation) = tracked.observed.or(tracked.generation)
        {
            let origin = Generation {
                id: id.clone(),
                uid: tracked.uid.clone(),
                generation,
                concurrency: None,
                share: crate::fair::DEFAULT_SHARE,
            };
            self.events
                .spawn(status::report(self.client.clone(), origin, refusal.clone()));
        }
        tracked.refused = Some(refusal);
    }

    fn spawn(&mut self, asked: &Asked) {
        let name = asked.id.plugin_name();
        tracing::info!(resource = %asked.id, plugin = %name, generation = asked.generation,
            source = %asked.common.source, "loading plugin resource");
        let (sources, client, options) = (
            self.sources.clone(),
            self.client.clone(),
            self.options.clone(),
        );
        let owned = asked.clone();
        self.loads.spawn(&name, asked.generation(), move |slot| {
            load(&sources, &client, &options, owned, slot)
        });
    }

    /// Runs what a load gave (see the module documentation).
    async fn finish(&mut self, engine: &mut Engine, name: String, loaded: Loaded<Generation>) {
        let origin = match &loaded {
            Loaded::Ready { origin, .. } | Loaded::Refused { origin, .. } => origin.clone(),
        };
        // Still what the object asks for? (It may have changed or gone
        // meanwhile: its key then runs again once this one ends.)
        let current = self
            .asked(&origin.id)
            .is_some_and(|a| a.uid == origin.uid && a.generation == origin.generation);
        let Some(tracked) = self
            .tracked
            .get_mut(&origin.id)
            .filter(|t| t.uid == origin.uid && t.generation == Some(origin.generation))
        else {
            return; // the resource went: its key already ended
        };
        if !std::mem::take(&mut tracked.loading) {
            // The optimized code of the version running: no key waits on it.
            match loaded {
                Loaded::Ready { prepared, .. } => {
                    if let Err(error) = self.run(engine, &origin, prepared).await {
                        tracing::warn!(plugin = %name, %error, "optimized code refused");
                    }
                }
                Loaded::Refused { error, .. } => {
                    tracing::warn!(plugin = %name, %error,
                        "optimized code refused; the baseline code keeps serving");
                }
            }
            return;
        }
        // A load interrupted (its object changed or went, as its watch saw:
        // the key is queued again) is no outcome, even if the change came to
        // the store before this load started.
        let interrupted = matches!(
            loaded,
            Loaded::Refused {
                error: Refused::Cancelled,
                ..
            }
        );
        if !current || interrupted {
            tracked.generation = None; // looked at afresh when its key comes back
            self.queue.done(&origin.id.key(), Done::Forget);
            return;
        }
        tracked.observed = Some(origin.generation);
        match loaded {
            Loaded::Ready { prepared, .. } => {
                let reads = Reads::of(prepared.plugin.declaration());
                match self.run(engine, &origin, prepared).await {
                    Ok(running) => {
                        if let Some(tracked) = self.tracked.get_mut(&origin.id) {
                            tracked.running = Some(running);
                            tracked.reads = Some(reads);
                            tracked.refused = None;
                        }
                    }
                    Err(error) => {
                        rules::refused(engine, Owner::Resource, &name, &origin.id, &error);
                        self.refuse(&origin.id, &error);
                    }
                }
            }
            Loaded::Refused { error, .. } => {
                rules::refused(engine, Owner::Resource, &name, &origin.id, &error);
                self.refuse(&origin.id, &error);
            }
        }
        self.write_status(engine, &origin.id);
    }

    /// Runs a loaded version of a resource's plugin: swapped in for the
    /// running one, or started, its optimized code then loaded in the
    /// background. Its digest (empty when it came from no artifact).
    ///
    /// # Errors
    /// [`Refused::NameTaken`] when the plugin directory runs a plugin of
    /// its name.
    async fn run(
        &mut self,
        engine: &mut Engine,
        origin: &Generation,
        prepared: Prepared,
    ) -> Result<String, Refused> {
        let artifact = prepared.artifact.clone();
        let applier = match (&self.options.impersonate, &origin.id.namespace) {
            (Some(account), Some(namespace)) => engine
                .applier()
                .impersonating(&format!("system:serviceaccount:{namespace}:{account}")),
            _ => None,
        };
        let defaults = Settings::default();
        let settings = Settings {
            applier,
            tenant: origin.id.namespace.clone(),
            share: origin.share,
            // Within the host's, as every limit.
            concurrency: origin.concurrency.map_or(defaults.concurrency, |c| {
                usize::try_from(c)
                    .unwrap_or(defaults.concurrency)
                    .min(defaults.concurrency)
            }),
            ..defaults
        };
        let at = format!("{} generation {}", origin.id, origin.generation);
        rules::run(
            engine,
            Owner::Resource,
            &at,
            prepared,
            settings,
            (&mut self.loads, origin.clone()),
        )
        .await?;
        Ok(artifact.unwrap_or_default())
    }

    /// Writes the status of `id` if it differs from what its object shows
    /// (only while leading); its key ends when the write does.
    fn write_status(&mut self, engine: &Engine, id: &ResourceId) {
        let (Some(asked), Some(tracked)) = (self.asked(id), self.tracked.get(id)) else {
            return self.end(id, None);
        };
        if !*self.leading.borrow() {
            return self.end(id, None);
        }
        let name = id.plugin_name();
        let previous = asked.status.unwrap_or_default();
        let mut status = tracked.status(&name, &previous);
        if tracked.running.is_some() {
            let (succeeded, failed) = engine.reconcile_counts(&name);
            status.reconciles = Some(succeeded);
            status.failures = Some(failed);
        }
        if status == previous {
            return self.end(id, None);
        }
        let (client, id) = (self.client.clone(), id.clone());
        self.writes.spawn(async move {
            let error = status::write(client, &id, &status).await.err();
            (id, error.map(|e| e.to_string()))
        });
    }

    /// Ends the key of `id`: how it went tells the queue when to look again.
    fn end(&mut self, id: &ResourceId, write_error: Option<String>) {
        let done = match (write_error, self.tracked.get(id)) {
            (Some(error), _) => {
                tracing::debug!(resource = %id, %error, "status not written (tried again with backoff)");
                Done::Retry(format!("status not written: {error}"))
            }
            (None, Some(tracked)) => match &tracked.refused {
                Some(refusal) if refusal.may_pass => Done::Retry(refusal.message.clone()),
                _ if tracked.running.is_some() => Done::RequeueAfter(COUNTERS_EVERY),
                _ => Done::Forget,
            },
            (None, None) => Done::Forget,
        };
        self.queue.done(&id.key(), done);
    }
}

/// The CustomResourceDefinitions of `Plugin` and `ClusterPlugin`.
pub fn crds() -> [CustomResourceDefinition; 2] {
    [PluginResource::crd(), ClusterPluginResource::crd()]
}

/// [`crds`] as one multi-document YAML text (`deploy/crds.yaml`).
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|crd| format!("---\n{}", serde_yaml::to_string(crd).unwrap_or_default()))
        .collect()
}
