//! One plugin, run as a controller: its informer subscriptions, its work
//! queue, its workers.
//!
//! # Expected flow
//! [`Controller::start`] subscribes to an informer for the primary and for
//! each secondary (shared with every other plugin reading the same type and
//! selector), turns every change into primary keys by the declared mapping,
//! and starts `concurrency` workers. A worker takes a key from the queue,
//! runs [`step::run`] on a blocking thread (a Wasm call never runs on an
//! async worker), sends the step's actions through the [`Applier`] and
//! reports the result to the queue: success forgets the key (or requeues it
//! after `requeue-after`), a failure of the plugin, of planning (a denied
//! action) or of the API server retries it with backoff. A plugin that
//! declares a schedule is also called on it ([`schedule`]); a primary that
//! left the selector holding the finalizer is finalized ([`departed`]).
//!
//! # Mapping secondaries to primary keys
//! - `owner-references`: each owner of the primary's kind and group;
//! - `label(key)`: the label's value, `name` (in the object's namespace) or
//!   `namespace.name`;
//! - `custom`: the plugin's `map-keys`, called on a blocking thread;
//! - `reads`: the keys whose last successful reconcile read the object
//!   ([`triggers`]);
//! - `none`: nothing.
//!
//! A change maps the object's state after it and, for a modified object,
//! its state before: an object that left a primary (a label or an owner
//! reference changed) maps to it too; a deleted one maps by its last state.
//! A type may be declared more than once with one selector (a child both
//! owned and mapped by `map-keys`; the primary's type, to map primaries to
//! other primaries): one informer, a handler per declaration.
//!
//! # Swaps
//! [`Controller::swap`] replaces the plugin (a new component, grants or
//! configuration) without stopping the controller: the queue and its keys
//! carry over, a step in flight finishes on the version it began on, every
//! step after the swap runs the new one, and the queue still never hands
//! out a key twice at once, whatever the version. The new version
//! subscribes to what it declares (it is shown every object, so every
//! primary is reconciled once by it); the old subscriptions go with its last
//! step. A version that reconciles another type (or another version of
//! it) is another controller ([`SwapError`]).
//!
//! # Fairness
//! Every plugin's workers take a permit of the host's [`Workers`] for each
//! step, handed out by weighted fair queueing over tenants, then their
//! plugins ([`crate::fair`]): two saturated tenants get worker time by
//! their shares, a newcomer's key is served at the next free permit, and a
//! plugin still runs at most its concurrency in steps at once. A worker
//! with another key ready when its step ends asks for its next turn then
//! and there ([`crate::fair::Permit::next_turn`]), so a busy plugin
//! competes for every permit by its share.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::applier::Applier;
use super::fair::{DEFAULT_SHARE, Flow};
use super::informer::{Change, Handler, InformerKey};
use super::listing::Key;
use super::queue::{Backoff, Priority, Settled, WorkQueue};
use kubewasm_core::shard::ShardField;
use kubewasm_runtime::Plugin;
use kubewasm_runtime::resource::ResourceType;

pub use super::plugin_cache::InformerCache;
use mapping::{Targets, enqueue, map_custom, mapping_handler};
use version::{Current, Version};
use worker::Worker;

pub use memo::{DEFAULT_REMEMBERED, Remembered};
pub use shared::Shared;

mod departed;
mod mapping;
mod memo;
mod schedule;
mod shared;
mod span;
mod triggers;
mod unchanged;
mod version;
mod worker;

/// How the engine runs a plugin.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Workers for this plugin (the plugin's wish, capped by the host).
    pub concurrency: usize,
    /// Backoff and retry rate.
    pub backoff: Backoff,
    /// The plugin's configuration, JSON text.
    pub config: String,
    /// Writes through this applier rather than the host's (a tenant's,
    /// impersonating its ServiceAccount).
    pub applier: Option<Applier>,
    /// Its tenant (a `Plugin`'s namespace) for the workers' fair shares;
    /// `None`: a tenant of its own.
    pub tenant: Option<String>,
    /// Its share of the host's workers ([`fair`](crate::fair)).
    pub share: u32,
}

impl Settings {
    /// Whose steps `plugin`'s are, for the workers' fair shares.
    fn flow(&self, plugin: &Plugin) -> Flow {
        Flow {
            tenant: self.tenant.clone(),
            plugin: plugin.declaration().name.clone(),
            share: self.share.max(1),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            concurrency: 2,
            backoff: Backoff::default(),
            config: "{}".to_owned(),
            applier: None,
            tenant: None,
            share: DEFAULT_SHARE,
        }
    }
}

/// The resync period when neither the host nor the plugin sets one.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(10 * 3600);

/// A plugin running as a controller. Dropping it stops its workers and
/// releases its informers.
pub struct Controller {
    name: String,
    primary: ResourceType,
    queue: Arc<WorkQueue>,
    current: Current,
    /// Where the mapping handlers of every version send what they map.
    targets: Targets,
    /// The workers: shutdown waits for them (their in-flight steps finish).
    workers: JoinSet<()>,
    /// Mapping, resync and following the leadership: shutdown aborts them.
    background: JoinSet<()>,
}

/// Why a plugin could not be swapped in place.
#[derive(Debug, thiserror::Error)]
pub enum SwapError {
    /// The new version reconciles another type (or another version of it):
    /// it is another controller.
    #[error("the new version reconciles {new}, not {old}")]
    PrimaryChanged {
        /// The running version's primary.
        old: Box<ResourceType>,
        /// The new version's.
        new: Box<ResourceType>,
    },
}

/// A version of `plugin` subscribed to the primary's informer and each
/// secondary's, their changes mapped to keys of the queue of `targets`;
/// told apart from every other version by its serial, or by `serial` (the
/// same plugin on its other tier's code answers as the version it replaces:
/// what its calls remembered still holds).
fn subscribe(
    plugin: Arc<Plugin>,
    settings: &Settings,
    shared: &Shared,
    targets: &Targets,
    serial: Option<u64>,
) -> Version {
    let declaration = plugin.declaration();
    let primary = declaration.primary.clone();
    let primary_handler: Handler = {
        let (queue, departed) = (Arc::clone(&targets.queue), Arc::clone(&targets.departed));
        let finalizer = declaration
            .managed_finalizer
            .then(|| declaration.finalizer());
        Arc::new(move |change: Change<'_>| {
            match (&change, &finalizer) {
                (Change::Deleted(key, last), Some(finalizer)) => {
                    departed.gone(key, last, finalizer);
                }
                (Change::Deleted(..), None) => {}
                (Change::Listed(key, ..) | Change::Applied(key, ..), _) => departed.back(key),
            }
            match change {
                // The primary's own store: walked, not held key by key.
                Change::Listed(key, _, store) => queue.add_listed_in(Arc::clone(key), store),
                _ => enqueue(&queue, &change, Arc::clone(change.key())),
            }
        })
    };
    let namespaces = plugin.grants().namespaces();
    let mut subscriptions = Vec::new();
    let mut types = Vec::new();
    // In a ring, the primary's store holds this replica's share; placed
    // by namespace, so do the stores of namespaced secondaries. The
    // primary's type declared again as a secondary (mapped to other
    // primaries) is the primary's informer, with another handler.
    let field = shared.shard.as_ref().map(|shard| shard.field());
    let mut subscribe = |resource: &ResourceType, selector: &str, handler: Handler| {
        let shard = field.filter(|field| {
            *resource == primary || (*field == ShardField::Namespace && resource.namespaced)
        });
        let stores: Vec<_> = scopes(resource, namespaces)
            .into_iter()
            .map(|namespace| {
                let key = InformerKey {
                    resource: resource.clone(),
                    namespace,
                    selector: selector.to_owned(),
                    shard,
                };
                let subscription = shared.informers.subscribe(&key, Arc::clone(&handler));
                let store = Arc::clone(subscription.store());
                subscriptions.push(subscription);
                store
            })
            .collect();
        types.push(stores);
    };
    subscribe(&primary, &declaration.primary_selector, primary_handler);
    for secondary in &declaration.secondaries {
        let handler = mapping_handler(&secondary.mapping, &secondary.resource, &primary, targets);
        subscribe(&secondary.resource, &secondary.label_selector, handler);
    }
    // A primary this plugin's field manager wrote last runs after the rest
    // of a listing (see the queue's documentation).
    if let Some(stores) = types.first().cloned() {
        let manager = declaration.field_manager();
        targets.queue.set_settled(Settled::new(move |key| {
            stores
                .iter()
                .any(|store| store.get(key).is_some_and(|o| o.last_applied_by(&manager)))
        }));
    }
    static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    Version {
        serial: serial
            .unwrap_or_else(|| SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        flow: settings.flow(&plugin),
        config: settings.config.clone(),
        plugin,
        cache: Arc::new(InformerCache::new(types)),
        _subscriptions: subscriptions,
    }
}

/// The scopes a plugin watches `resource` in: each namespace it is confined
/// to (none at all if it is granted none), else every namespace at once.
fn scopes(resource: &ResourceType, namespaces: Option<&BTreeSet<String>>) -> Vec<Option<String>> {
    match namespaces {
        Some(granted) if resource.namespaced => granted.iter().cloned().map(Some).collect(),
        _ => vec![None],
    }
}

impl Controller {
    /// Starts `plugin`. Must be called within a tokio runtime.
    pub fn start(plugin: Arc<Plugin>, settings: Settings, shared: &Shared) -> Self {
        let declaration = plugin.declaration();
        let (name, primary) = (declaration.name.clone(), declaration.primary.clone());
        let (max_concurrency, resync_seconds) =
            (declaration.max_concurrency, declaration.resync_seconds);
        let queue = Arc::new(WorkQueue::new(settings.backoff));
        let mut workers = JoinSet::new();
        let mut background = JoinSet::new();
        let (custom, custom_rx) = mpsc::unbounded_channel();
        let targets = Targets {
            queue: Arc::clone(&queue),
            custom,
            triggers: Arc::default(),
            departed: Arc::default(),
        };
        let version = subscribe(plugin, &settings, shared, &targets, None);
        let current = Current(Arc::new(RwLock::new(Arc::new(version))));

        let worker = Worker {
            current: current.clone(),
            queue: Arc::clone(&queue),
            memo: Arc::new(memo::Memo::new(Arc::clone(&shared.remembered))),
            unchanged: Arc::default(),
            triggers: Arc::clone(&targets.triggers),
            departed: Arc::clone(&targets.departed),
            shared: Shared {
                applier: settings.applier.unwrap_or_else(|| shared.applier.clone()),
                ..shared.clone()
            },
        };
        let concurrency = max_concurrency
            .map_or(settings.concurrency, |wish| {
                usize::try_from(wish)
                    .unwrap_or(usize::MAX)
                    .min(settings.concurrency)
            })
            .max(1);
        // Paused before any worker runs when this host does not lead: a
        // key taken before the task below had paused the queue would be
        // reconciled, its writes fenced, and dropped, not waiting for the
        // lead.
        queue.set_paused(!*shared.leading.borrow());
        for _ in 0..concurrency {
            workers.spawn(worker.clone().run());
        }
        background.spawn(schedule::run(worker.clone()));
        background.spawn(map_custom(current.clone(), Arc::clone(&queue), custom_rx));
        let resync = resync_seconds.map_or(shared.resync, |s| Duration::from_secs(u64::from(s)));
        background.spawn(resync_loop(current.clone(), Arc::clone(&queue), resync));
        shared.metrics.register_queue(&name, &queue, concurrency);
        background.spawn({
            let (queue, mut leading) = (Arc::clone(&queue), shared.leading.clone());
            async move {
                loop {
                    queue.set_paused(!*leading.borrow_and_update());
                    if leading.changed().await.is_err() {
                        break;
                    }
                }
            }
        });
        tracing::info!(plugin = %name, concurrency, "controller started");
        Self {
            name,
            primary,
            queue,
            current,
            targets,
            workers,
            background,
        }
    }

    /// Swaps in a new version of the plugin (and its configuration): the
    /// queue and its keys stay, steps in flight finish on the old version,
    /// every later step runs the new one, and every primary is listed once
    /// for it. Workers and resync stay as they were started.
    ///
    /// # Errors
    /// [`SwapError`] when the new version is another controller (another
    /// primary type); nothing changes then.
    pub fn swap(
        &self,
        plugin: Arc<Plugin>,
        settings: &Settings,
        shared: &Shared,
    ) -> Result<(), SwapError> {
        let new = &plugin.declaration().primary;
        // The same group, version and kind: the resync and the queue's keys
        // follow the primary's informer, which a new version would replace.
        if (&new.group, &new.version, &new.kind)
            != (
                &self.primary.group,
                &self.primary.version,
                &self.primary.kind,
            )
        {
            return Err(SwapError::PrimaryChanged {
                old: Box::new(self.primary.clone()),
                new: Box::new(new.clone()),
            });
        }
        let digest = plugin.digest().to_owned();
        let current = self.current.get();
        let serial = (current.plugin.same_plugin(&plugin) && current.config == settings.config)
            .then_some(current.serial);
        drop(current);
        self.current
            .replace(|| subscribe(plugin, settings, shared, &self.targets, serial));
        tracing::info!(plugin = %self.name, %digest, "plugin swapped");
        Ok(())
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plugin's current version.
    pub fn plugin(&self) -> Arc<Plugin> {
        Arc::clone(&self.current.get().plugin)
    }

    /// Whether every informer this plugin reads has listed once.
    pub fn synced(&self) -> bool {
        self.current.get().cache.stores().all(|s| s.synced())
    }

    /// Waits until every informer this plugin reads has listed once.
    pub async fn wait_synced(&self) {
        let version = self.current.get();
        for store in version.cache.stores() {
            store.wait_synced().await;
        }
    }

    /// Stops taking keys and waits for in-flight steps to finish.
    pub async fn shutdown(mut self) {
        self.queue.shutdown();
        self.background.abort_all();
        while self.workers.join_next().await.is_some() {}
        tracing::info!(plugin = %self.name, "controller stopped");
    }
}

/// Queues every primary key once a `period`, spread out; the primary's
/// stores are the current version's (a swap may change its namespaces).
async fn resync_loop(current: Current, queue: Arc<WorkQueue>, period: Duration) {
    loop {
        tokio::time::sleep(period).await;
        let keys: Vec<Key> = current
            .get()
            .cache
            .primary()
            .iter()
            .flat_map(|store| store.keys())
            .collect();
        let count = keys.len().max(1);
        for (i, key) in keys.into_iter().enumerate() {
            // Jitter: keys spread evenly over a tenth of the period.
            let spread = period / 10 * u32::try_from(i).unwrap_or(u32::MAX)
                / u32::try_from(count).unwrap_or(u32::MAX);
            queue.add_after(key, spread, Priority::Resync);
        }
    }
}
