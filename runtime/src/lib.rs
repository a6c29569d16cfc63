#![doc = include_str!("../README.md")]
//!
//! # Expected flow
//! [`Runtime::new`] builds the one [`wasmtime::Engine`] (component model,
//! epoch interruption, pooling allocator) and starts the epoch ticker.
//! [`Runtime::load`] checks that the bytes are a component of the
//! `kubewasm:controller` world, compiles it (or loads the precompiled
//! artifact from the on-disk cache), links it into an `InstancePre`, calls
//! `declare` and validates the declaration. A component loaded again while
//! a plugin of it is loaded (under another name, for another tenant) shares
//! that plugin's compiled code and declaration; each plugin keeps its own
//! instances, grants and configuration. [`Plugin::reconcile`],
//! [`Plugin::finalize`] and [`Plugin::map`] then run calls against it.
//!
//! # Guarantees
//! - A trap, a panic, a deadline overrun or a memory limit hit becomes a
//!   [`CallError`] for that call; the host and every other plugin go on.
//! - An instance that trapped is dropped, never entered again.
//! - A plugin reads only through the [`Cache`] it is handed, only the types
//!   it declared, and its actions pass [`action::plan`] before they leave.
//!
//! # Instances: warm by default, fresh on request, one budget for all
//! Measured side by side (BENCHMARKS.md, "Per language"): a fresh instance
//! per call costs about 1.8 times a warm call for a small Rust plugin, 5 to
//! 6 times for JavaScript (StarlingMonkey initialises lazily on the first
//! call) and 25 to 30 times for Python (half a millisecond to instantiate,
//! a millisecond more on the first call). So [`InstanceReuse::Reuse`] is the
//! default: a plugin's instances stay warm after a call, a call takes one,
//! and it goes back only if the call succeeded. A trapped instance is
//! dropped, and an instance is retired after [`MAX_CALLS_PER_INSTANCE`]
//! calls, which bounds what a leaky plugin accumulates. A plugin with no
//! work left lets its warm instances go ([`Plugin::release_idle`]), so an
//! idle plugin holds no linear memory: what a plugin adds to the host at
//! rest is its queue and declaration, not an instance (the code is shared).
//! Plugins must not rely on state kept between calls (there are several
//! warm instances, and any may be replaced).
//! [`InstanceReuse::Fresh`] gives every call a new instance, for operators
//! who want no state at all to survive a call.
//!
//! Every instance of every plugin, in a call or warm, holds a slot of one
//! host-wide budget ([`RuntimeConfig::max_instances`], by default as many
//! instances at the memory limit as the machine's memory holds): warm
//! instances are a cache, the least recently used idle one of any plugin
//! dropped when another plugin needs its slot, and a call that finds every
//! slot in a call waits its turn, first come first served, for at most
//! [`RuntimeConfig::instance_wait`] ([`CallError::NoInstance`] past it,
//! which the engine retries without backoff). When a call ends, at most
//! [`RuntimeConfig::max_warm_instances`] are kept, those in calls counted
//! (the least recently used idle one goes first): the host keeps as many as
//! steps it runs at once, so fifty busy plugins hold about the memory one
//! does (an instance of the JavaScript example holds some 3.5 MiB). The rules are
//! `pool`'s.

pub mod action;
mod bindings;
mod blocking;
pub mod cache;
mod call;
mod code;
mod compiled;
mod config;
mod contract;
pub mod declaration;
mod error;
pub mod fixture;
pub mod grants;
mod host;
mod limits;
pub mod mapper;
mod pool;
pub mod read_set;
pub mod reads;
pub mod replay;
mod state;
pub mod step;

pub use kubewasm_core::{resource, schedule, selector};

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::action::Desired;
use crate::cache::Cache;
use crate::declaration::Declaration;
use crate::grants::Grants;
use crate::resource::{ObjectKey, ResourceType};

pub use call::MAX_CALLS_PER_INSTANCE;
pub use code::Interfaces;
pub use compiled::CacheDirError;
pub use config::{
    InstanceReuse, LoadOptions, MAX_INSTANCES, MIN_INSTANCES, RuntimeConfig, default_max_instances,
    is_plugin_name,
};
pub use contract::Contract;
pub use error::{CallError, ConfigError, LoadError, MapError, ReconcileError, RuntimeError};
pub use limits::{CallLimits, Limit, LimitCounts, LimitExceeded, Limits};
pub use pool::{Exhausted, PoolCounts};

use bindings::{Call, exports};
use call::Instance;
use code::Code;
use compiled::CompiledCache;
use pool::{Owner, Pool};
use state::PluginState;

/// Bytes of each pooled linear memory reset with memset and kept resident.
const KEEP_RESIDENT: usize = 2 << 20;

/// How often the epoch ticks; deadlines are rounded up to it.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// One reconcile or finalize request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The primary's key.
    pub key: ObjectKey,
    /// The plugin's configuration, JSON text.
    pub config: String,
    /// Consecutive failures of this key before this call.
    pub retries: u32,
    /// Why the previous attempt failed.
    pub last_failure: Option<String>,
    /// The time of the call, as the host's clock gives it (events carry it).
    pub now: jiff::Timestamp,
    /// The primary left the plugin's `primary-selector` holding its managed
    /// finalizer: it is finalized as if deleted ([`step::run`]).
    pub released: bool,
}

impl Request {
    /// A first attempt with no configuration, now.
    pub fn new(key: ObjectKey) -> Self {
        Self {
            key,
            config: "{}".into(),
            retries: 0,
            last_failure: None,
            now: jiff::Timestamp::now(),
            released: false,
        }
    }
}

/// One `scheduled` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledRequest {
    /// The time the schedule named.
    pub at: jiff::Timestamp,
    /// The plugin's configuration, JSON text.
    pub config: String,
    /// The time of the call, as the host's clock gives it (the plugin's
    /// clock during the call; events carry it).
    pub now: jiff::Timestamp,
}

/// A secondary's change, as `map-keys` sees it.
#[derive(Clone, Copy, Debug)]
pub struct MapChange<'a> {
    /// The object as it is now (a deleted one: as it was last), JSON text.
    pub object: &'a str,
    /// A modified object's state before the change, JSON text.
    pub previous: Option<&'a str>,
    /// Whether the object was deleted.
    pub deleted: bool,
}

impl<'a> MapChange<'a> {
    /// `object` as it is now, with no previous state known.
    pub fn of(object: &'a str) -> Self {
        Self {
            object,
            previous: None,
            deleted: false,
        }
    }
}

/// What a successful `reconcile` or `finalize` call returned, as the plugin
/// said it: its desired actions, not yet checked or completed (only
/// [`crate::step`] plans them into the actions the host sends), and when to
/// call again.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The desired actions, in order.
    pub desired: Vec<Desired>,
    /// Reconcile again after this long.
    pub requeue_after: Option<Duration>,
    /// Whether this primary needs the managed finalizer (`None`: the default,
    /// yes). Meaningful only when the plugin declared one.
    pub finalizer: Option<bool>,
    /// Where the call's time went (planning is the step's).
    pub stats: CallStats,
    /// What the call read through the cache.
    pub reads: read_set::ReadSet,
}

/// Where the time of one reconcile went: the figures behind the plugin
/// latency metrics and BENCHMARKS.md.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Waiting for an instance slot, every one being in a call.
    pub wait: Duration,
    /// Creating the instance; zero when a warm one was reused.
    pub instantiate: Duration,
    /// The guest call, host imports included.
    pub call: Duration,
    /// Time inside host imports (cache reads, logging) during the call.
    pub imports: Duration,
    /// Checking and completing the returned actions.
    pub plan: Duration,
    /// Bytes of linear memory the instance held after the call: its
    /// high-water mark (a Wasm memory never shrinks).
    pub memory: u64,
}

/// The wasm runtime shared by every plugin.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

struct Inner {
    engine: Engine,
    linker: Linker<PluginState>,
    /// The baseline compiler's engine and linker, when on.
    baseline: Option<(Engine, Linker<PluginState>)>,
    config: RuntimeConfig,
    compiled: Option<CompiledCache>,
    limit_counts: LimitCounts,
    /// The instance budget every plugin's instances share.
    pool: Arc<Pool<Instance>>,
    /// The id of the next plugin (its instances' owner in the pool).
    plugins: AtomicU64,
    /// Components loaded now, by digest, with what they declared: a
    /// component loaded again (under another name, or as another tenant's
    /// plugin) shares its compiled code instead of holding a copy.
    loaded: Mutex<HashMap<String, (Weak<Code>, Declaration)>>,
    /// One gate per component being compiled: a second load of the same
    /// bytes waits for the first and shares its code instead of compiling
    /// it again beside it.
    compiling: Mutex<HashMap<String, Weak<Mutex<()>>>>,
}

impl Runtime {
    /// Builds the engine and starts its epoch ticker.
    ///
    /// # Errors
    /// [`RuntimeError`] if wasmtime refuses the configuration.
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true);
        let (instances, warm) = (config.instances(), config.warm_instances());
        if config.pooling {
            let n = instances;
            let keep_resident = match config.instance_reuse {
                InstanceReuse::Fresh => KEEP_RESIDENT,
                InstanceReuse::Reuse => 0,
            };
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(n)
                .total_core_instances(n.saturating_mul(8))
                .total_memories(n.saturating_mul(2))
                .total_tables(n.saturating_mul(4))
                .total_stacks(n)
                .max_core_instances_per_component(state::MAX_CORE_INSTANCES as u32)
                .max_memories_per_component(state::MAX_MEMORIES as u32)
                .max_tables_per_component(state::MAX_TABLES as u32)
                .max_memory_size(config.memory_limit)
                // With a fresh instance per call, reset reused slots with
                // memset rather than madvise: the next instance then takes
                // no page faults on the memory the previous one touched
                // (see BENCHMARKS.md). With warm instances a slot is freed
                // when its plugin goes idle (or an instance retires): its
                // memory goes back to the system.
                .linear_memory_keep_resident(keep_resident)
                .table_keep_resident(keep_resident / 16)
                .pagemap_scan(wasmtime::Enabled::Auto);
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&wasm).map_err(RuntimeError::Engine)?;
        let linker = linker(&engine)?;
        let baseline = if config.baseline {
            let mut wasm = wasmtime::Config::new();
            wasm.wasm_component_model(true)
                .epoch_interruption(true)
                .strategy(wasmtime::Strategy::Winch);
            let engine = Engine::new(&wasm).map_err(RuntimeError::Engine)?;
            let baseline_linker = self::linker(&engine)?;
            Some((engine, baseline_linker))
        } else {
            None
        };
        start_epoch_ticker(
            std::iter::once(&engine)
                .chain(baseline.as_ref().map(|(e, _)| e))
                .collect(),
        );
        let compiled = config
            .cache_dir
            .as_ref()
            .map(CompiledCache::open)
            .transpose()?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                linker,
                baseline,
                config,
                compiled,
                limit_counts: LimitCounts::default(),
                pool: Pool::new(instances as usize, warm as usize),
                plugins: AtomicU64::new(0),
                loaded: Mutex::default(),
                compiling: Mutex::default(),
            }),
        })
    }

    /// What a call may spend and return unless a plugin is held tighter.
    pub fn call_limits(&self) -> CallLimits {
        self.inner.config.call_limits()
    }

    /// How many times each output limit was hit.
    pub fn limit_counts(&self) -> &LimitCounts {
        &self.inner.limit_counts
    }

    /// The instance budget's slots in each state, now.
    pub fn instances(&self) -> PoolCounts {
        self.inner.pool.counts()
    }
}

impl Runtime {}

/// A linker of the host's imports for `engine`: WASI with no capability,
/// its waits bounded, and the contract's `cache` and `log`.
fn linker(engine: &Engine) -> Result<Linker<PluginState>, RuntimeError> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(RuntimeError::Engine)?;
    linker.allow_shadowing(true);
    blocking::add_to_linker(&mut linker).map_err(RuntimeError::Engine)?;
    linker.allow_shadowing(false);
    host::add_to_linker(&mut linker).map_err(RuntimeError::Engine)?;
    Ok(linker)
}

/// Increments the engines' epochs every [`EPOCH_TICK`] until they are
/// dropped.
fn start_epoch_ticker(engines: Vec<&Engine>) {
    let weak: Vec<_> = engines.into_iter().map(Engine::weak).collect();
    let spawned = std::thread::Builder::new()
        .name("kubewasm-epoch".into())
        .spawn(move || {
            loop {
                let live: Vec<Engine> = weak.iter().filter_map(|w| w.upgrade()).collect();
                if live.is_empty() {
                    break;
                }
                live.iter().for_each(Engine::increment_epoch);
                drop(live);
                std::thread::sleep(EPOCH_TICK);
            }
        });
    if let Err(error) = spawned {
        // Without a ticker no deadline fires; refuse to pretend otherwise.
        tracing::error!(%error, "failed to start the epoch ticker: plugin deadlines are not enforced");
    }
}

/// A loaded plugin. Cheap to share behind an `Arc`; calls may run
/// concurrently from several threads.
pub struct Plugin {
    runtime: Runtime,
    code: Arc<Code>,
    /// Its instances' owner in the runtime's pool.
    id: Owner,
    declaration: Arc<Declaration>,
    name: Arc<str>,
    grants: Arc<Grants>,
    limits: CallLimits,
    reads_denied: Arc<std::sync::atomic::AtomicU64>,
    reuse: bool,
    config_validator: Option<Arc<jsonschema::Validator>>,
    /// The last configuration found valid, so an unchanged one is not
    /// validated again on every call.
    valid_config: Mutex<Option<String>>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("digest", &self.code.digest)
            .field("reuse", &self.reuse)
            .finish_non_exhaustive()
    }
}

impl Drop for Plugin {
    /// An unloaded plugin's warm instances give their slots back at once.
    fn drop(&mut self) {
        self.release_idle();
    }
}

impl Plugin {
    /// The validated declaration.
    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// The runtime it runs in.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The contract version the component targets.
    pub fn contract(&self) -> Contract {
        self.code.contract
    }

    /// The component's sha256, hex.
    pub fn digest(&self) -> &str {
        &self.code.digest
    }

    /// What the plugin holds: its declaration under the operator's grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// What each call may spend and return.
    pub fn limits(&self) -> CallLimits {
        self.limits
    }

    /// Whether this runs the baseline compiler's code ([`Self::optimized`]
    /// has the optimizing compiler's).
    pub fn is_baseline(&self) -> bool {
        self.code.baseline.is_some()
    }

    /// Reads its grants refused since the last time this was asked (the
    /// engine counts them in `kubewasm_reads_denied_total`).
    pub fn take_reads_denied(&self) -> u64 {
        self.reads_denied
            .swap(0, std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether calls reuse warm instances.
    pub fn reuses_instances(&self) -> bool {
        self.reuse
    }

    /// Drops the warm instances no call is using (the host does when the
    /// plugin has no work left): their memory goes back to the system, their
    /// slots to the budget, and the next call instantiates afresh. Returns
    /// how many were dropped.
    pub fn release_idle(&self) -> usize {
        self.runtime.inner.pool.drop_idle(self.id)
    }

    /// Checks a configuration (JSON text) against the plugin's
    /// `config-schema`; any JSON passes when it declared none. Every call
    /// checks its configuration this way; the host also calls this when a
    /// configuration is set, to refuse it before any reconcile.
    ///
    /// # Errors
    /// [`ConfigError`] with the validator's message.
    pub fn check_config(&self, config: &str) -> Result<(), ConfigError> {
        let valid = || {
            self.valid_config
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if valid().as_deref() == Some(config) {
            return Ok(());
        }
        // Validated outside the lock: a new configuration never stalls the
        // calls running with the current one.
        let value: serde_json::Value = serde_json::from_str(config).map_err(ConfigError::Json)?;
        if let Some(validator) = &self.config_validator
            && let Err(error) = validator.validate(&value)
        {
            return Err(ConfigError::Schema {
                message: error.to_string(),
                path: error.instance_path().to_string(),
            });
        }
        *valid() = Some(config.to_owned());
        Ok(())
    }

    /// Calls the plugin's `reconcile` for one key against `cache`: its
    /// reply, unplanned ([`crate::step::run`] plans it).
    ///
    /// # Errors
    /// [`ReconcileError`]: the configuration was refused, the call failed,
    /// or the plugin reported a failure.
    #[tracing::instrument(name = "kubewasm.plugin.reconcile", skip_all, fields(plugin = %self.name, key = %request.key))]
    pub fn reconcile(
        &self,
        cache: Arc<dyn Cache>,
        request: &Request,
    ) -> Result<Reply, ReconcileError> {
        self.run(cache, request, Call::Reconcile)
    }

    /// Runs the plugin's cleanup for a primary being deleted.
    ///
    /// # Errors
    /// As [`Plugin::reconcile`].
    #[tracing::instrument(name = "kubewasm.plugin.finalize", skip_all, fields(plugin = %self.name, key = %request.key))]
    pub fn finalize(
        &self,
        cache: Arc<dyn Cache>,
        request: &Request,
    ) -> Result<Reply, ReconcileError> {
        self.run(cache, request, Call::Finalize)
    }

    /// Maps a changed secondary object to primary keys (the `custom` mapping):
    /// the keys of its new state and of its previous one (a component of a
    /// contract before 0.3.0 is called once for each). The call reads
    /// `cache` under the plugin's grants, as a reconcile does.
    ///
    /// # Errors
    /// [`MapError`] if the call fails, the plugin reports a failure or
    /// returns an invalid key.
    pub fn map(
        &self,
        cache: Arc<dyn Cache>,
        resource: &ResourceType,
        change: MapChange<'_>,
        config: &str,
    ) -> Result<Vec<ObjectKey>, MapError> {
        let limits = self.limits.output;
        let request = exports::MapRequest {
            type_: resource.into(),
            object: change.object.to_owned(),
            previous: change.previous.map(str::to_owned),
            deleted: change.deleted,
            config: config.to_owned(),
        };
        let busy = self.checkout(cache, None)?;
        let (keys, _) = self.with_instance(busy, |c, store| {
            let keys = c.map_keys(store, &request)?;
            if let Ok(keys) = &keys {
                limits.check(Limit::MapKeys, keys.len() as u64)?;
            }
            Ok(keys)
        })?;
        let keys = keys.map_err(|failure| MapError::Failed {
            message: action::truncate(failure.message, MAX_FAILURE_BYTES),
        })?;
        let primary = &self.declaration.primary;
        keys.into_iter()
            .map(ObjectKey::from)
            .map(|key| {
                kubewasm_core::validation::name(primary, &key.name)
                    .and_then(|()| {
                        key.namespace
                            .as_deref()
                            .map_or(Ok(()), kubewasm_core::validation::namespace)
                    })
                    .map(|()| key)
                    .map_err(MapError::InvalidKey)
            })
            .collect()
    }

    fn run(
        &self,
        cache: Arc<dyn Cache>,
        request: &Request,
        call: Call,
    ) -> Result<Reply, ReconcileError> {
        let wit_request = exports::Request {
            key: (&request.key).into(),
            type_: (&self.declaration.primary).into(),
            config: request.config.clone(),
            retries: request.retries,
            last_failure: request.last_failure.clone(),
        };
        self.invoke(
            cache,
            &request.config,
            request.now,
            Some(&request.key),
            |c, store| c.call(store, &wit_request, call),
        )
    }

    /// Runs the plugin's `scheduled` export for the time `request` was
    /// scheduled for (the plugin declared a schedule). The reply's
    /// requeue and finalizer wish mean nothing for it and are dropped.
    ///
    /// # Errors
    /// As [`Plugin::reconcile`].
    #[tracing::instrument(name = "kubewasm.plugin.scheduled", skip_all, fields(plugin = %self.name, at = %request.at))]
    pub fn scheduled(
        &self,
        cache: Arc<dyn Cache>,
        request: &ScheduledRequest,
    ) -> Result<Reply, ReconcileError> {
        let wit_request = exports::ScheduledRequest {
            scheduled_at: request.at.to_string(),
            config: request.config.clone(),
        };
        let reply = self.invoke(cache, &request.config, request.now, None, |c, store| {
            c.scheduled(store, &wit_request)
        })?;
        Ok(Reply {
            requeue_after: None,
            finalizer: None,
            ..reply
        })
    }

    /// Checks the configuration, then makes one call (`invoke`) on an
    /// instance under the call's clock and limits, recording its reads.
    fn invoke(
        &self,
        cache: Arc<dyn Cache>,
        config: &str,
        now: jiff::Timestamp,
        key: Option<&ObjectKey>,
        invoke: impl FnOnce(
            &bindings::Controller,
            &mut wasmtime::Store<state::PluginState>,
        ) -> wasmtime::Result<bindings::Answer>,
    ) -> Result<Reply, ReconcileError> {
        self.check_config(config)?;
        let limits = self.limits.output;
        let busy = self.checkout(Arc::clone(&cache), key)?;
        let record = self.runtime.inner.config.record_reads;
        let (outcome, spent) = self.with_instance(busy, |c, store| {
            store.data_mut().reads = record.then(read_set::ReadSet::default);
            store.data().clock.set(Some(now));
            let outcome = invoke(c, store);
            store.data().clock.set(None);
            let reads = store
                .data_mut()
                .reads
                .take()
                .unwrap_or_else(read_set::ReadSet::not_recorded);
            let outcome = outcome?;
            if let Ok(outcome) = &outcome {
                limits.check_outcome(outcome)?;
            }
            Ok((outcome, reads))
        })?;
        let (outcome, reads) = outcome;
        let outcome = outcome.map_err(|failure| ReconcileError::Failed {
            message: action::truncate(failure.message, MAX_FAILURE_BYTES),
        })?;
        Ok(Reply {
            desired: outcome.actions.into_iter().map(Desired::from).collect(),
            requeue_after: outcome.requeue_after_ms.map(Duration::from_millis),
            finalizer: outcome
                .finalizer
                .filter(|_| self.declaration.managed_finalizer),
            stats: CallStats {
                wait: spent.wait,
                instantiate: spent.instantiate,
                call: spent.call,
                imports: spent.imports,
                plan: Duration::ZERO,
                memory: spent.memory,
            },
            reads,
        })
    }
}

/// Most bytes of a plugin's failure message kept.
const MAX_FAILURE_BYTES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapper::RestMapper;

    #[test]
    fn load_should_refuse_garbage_and_core_modules() {
        let runtime = Runtime::new(RuntimeConfig::default().pooling(false)).expect("engine");
        let options = LoadOptions::new(Arc::new(RestMapper::builtin()));
        let err = runtime.load(b"not wasm", &options).expect_err("garbage");
        assert!(err.to_string().contains("not a WebAssembly file"), "{err}");
        // The smallest core module: header only.
        let err = runtime
            .load(b"\0asm\x01\0\0\0", &options)
            .expect_err("core module");
        assert!(err.to_string().contains("not a component"), "{err}");
    }
}
