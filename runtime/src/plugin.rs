//! A loaded plugin: its code, declaration, grants and limits, and every
//! call the host makes into it (`reconcile`, `finalize`, `scheduled`,
//! `map-keys`, `declare`), each on an instance checked out of the
//! runtime's budget for the call ([`crate::call`]'s pieces).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kubewasm_core::resource::{ObjectKey, ResourceType};
use wasmtime::{Store, Trap};

use crate::action;
use crate::bindings::{Call, Controller, Instantiation};
use crate::blocking;
use crate::cache::{Cache, MemoryCache};
use crate::call::{
    Checkout, Instance, MAX_CALLS_PER_INSTANCE, Spent, classify, deadline_ticks, forward_output,
};
use crate::code::{Code, placeholder_declaration};
use crate::contract::Contract;
use crate::declaration::Declaration;
use crate::error::{CallError, ConfigError, LoadError, MapError, ReconcileError};
use crate::grants::Grants;
use crate::limits::{CallLimits, Limit};
use crate::pool::Owner;
use crate::read_set::ReadSet;
use crate::request::{Answer, CallStats, MapChange, Reply, Request, ScheduledRequest};
use crate::shared::Shared;
use crate::state::{Limiter, PluginState};

/// Most bytes of a plugin's failure message kept.
const MAX_FAILURE_BYTES: usize = 4096;

/// What a plugin is beyond its code: what it declared, what it holds and
/// what each call may spend.
pub(crate) struct Parts {
    pub(crate) declaration: Declaration,
    pub(crate) grants: Grants,
    pub(crate) limits: CallLimits,
    /// Whether calls reuse warm instances.
    pub(crate) reuse: bool,
    pub(crate) config_validator: Option<Arc<jsonschema::Validator>>,
}

/// A loaded plugin. Cheap to share behind an `Arc`; calls may run
/// concurrently from several threads.
pub struct Plugin {
    shared: Arc<Shared>,
    code: Arc<Code>,
    /// Its instances' owner in the runtime's pool.
    id: Owner,
    declaration: Arc<Declaration>,
    name: Arc<str>,
    grants: Arc<Grants>,
    limits: CallLimits,
    reads_denied: Arc<AtomicU64>,
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

    /// Whether `other` is this plugin on its other tier's code
    /// ([`Self::optimized`]): the same component, declaration, grants and
    /// limits, so its calls answer as this one's do.
    pub fn same_plugin(&self, other: &Self) -> bool {
        self.code.digest == other.code.digest
            && Arc::ptr_eq(&self.declaration, &other.declaration)
            && Arc::ptr_eq(&self.grants, &other.grants)
            && self.limits == other.limits
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
        self.shared.pool.drop_idle(self.id)
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
    #[tracing::instrument(name = "kubewasm.plugin.reconcile", skip_all, fields(kubewasm.plugin = %self.name, kubewasm.key = %request.key))]
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
    #[tracing::instrument(name = "kubewasm.plugin.finalize", skip_all, fields(kubewasm.plugin = %self.name, kubewasm.key = %request.key))]
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
        let busy = self.checkout(cache, None)?;
        let (keys, _) = self.with_instance(busy, |c, store| {
            let keys = c.map_keys(store, resource, change, config)?;
            if let Ok(keys) = &keys {
                limits.check(Limit::MapKeys, keys.len() as u64)?;
            }
            Ok(keys)
        })?;
        let keys = keys.map_err(|failure| MapError::Failed {
            message: action::truncate(failure, MAX_FAILURE_BYTES),
        })?;
        let primary = &self.declaration.primary;
        keys.into_iter()
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
        let primary = &self.declaration.primary;
        self.invoke(
            cache,
            &request.config,
            request.now,
            Some(&request.key),
            |c, store| c.call(store, request, primary, call),
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
        let reply = self.invoke(cache, &request.config, request.now, None, |c, store| {
            c.scheduled(store, request)
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
        invoke: impl FnOnce(&Controller, &mut Store<PluginState>) -> wasmtime::Result<Answer>,
    ) -> Result<Reply, ReconcileError> {
        self.check_config(config)?;
        let limits = self.limits.output;
        let busy = self.checkout(Arc::clone(&cache), key)?;
        let record = self.shared.config.record_reads;
        let (outcome, spent) = self.with_instance(busy, |c, store| {
            store.data_mut().reads = record.then(ReadSet::default);
            store.data().clock.set(Some(now));
            let outcome = invoke(c, store);
            store.data().clock.set(None);
            let reads = store
                .data_mut()
                .reads
                .take()
                .unwrap_or_else(ReadSet::not_recorded);
            let outcome = outcome?;
            if let Ok(outcome) = &outcome {
                limits.check_desired(&outcome.desired)?;
            }
            Ok((outcome, reads))
        })?;
        let (outcome, reads) = outcome;
        let outcome = outcome.map_err(|failure| ReconcileError::Failed {
            message: action::truncate(failure, MAX_FAILURE_BYTES),
        })?;
        Ok(Reply {
            desired: outcome.desired,
            requeue_after: outcome.requeue_after,
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

    fn instantiate(&self) -> Result<Instance, CallError> {
        let limits = self.limits;
        let state = PluginState::new(
            Arc::clone(&self.name),
            Arc::clone(&self.grants),
            Limiter::new(limits.memory, 100_000),
            limits.output,
            Arc::clone(&self.reads_denied),
        );
        let mut store = Store::new(self.code.pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(deadline_ticks(limits.deadline));
        store.data_mut().call_deadline = Instant::now() + limits.deadline;
        let controller = self.code.pre.instantiate(&mut store).map_err(|failed| {
            let error = match failed {
                Instantiation::Failed(error) => error,
                Instantiation::Exports(error) => return CallError::Exports(error),
            };
            if error.downcast_ref::<Trap>().is_some()
                || error
                    .downcast_ref::<blocking::BlockedPastDeadline>()
                    .is_some()
                || store.data().limiter.exhausted
            {
                let stderr = forward_output(store.data());
                classify(store.data(), error, limits.deadline, &stderr)
            } else {
                CallError::Instantiate(error)
            }
        })?;
        Ok(Instance {
            store,
            controller,
            calls: 0,
        })
    }

    /// A slot of the budget holding a warm instance when reusing (its own,
    /// else a fresh one), primed for one call, with the time waiting for it
    /// and instantiating took.
    pub(crate) fn checkout(
        &self,
        cache: Arc<dyn Cache>,
        key: Option<&ObjectKey>,
    ) -> Result<Checkout, CallError> {
        let pool = &self.shared.pool;
        let deadline = Instant::now() + self.shared.config.instance_wait;
        let mut busy = pool.checkout(self.id, deadline)?;
        let waited = busy.waited();
        if !self.reuse {
            // Someone else's slot, or a warm instance of this plugin kept
            // from before: either way a fresh instance is wanted.
            drop(busy.take());
        }
        let started = Instant::now();
        let instantiate = if busy.instance().is_none() {
            let instance = loop {
                match self.instantiate() {
                    // The allocator ran out of memories or tables before
                    // instances: make room as for an instance.
                    Err(CallError::Instantiate(error))
                        if error
                            .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                            .is_some()
                            && pool.drop_oldest() => {}
                    other => break other?,
                }
            };
            busy.fill(instance);
            started.elapsed()
        } else {
            Duration::ZERO
        };
        if let Some(instance) = busy.instance() {
            let data = instance.store.data_mut();
            data.cache = cache;
            data.key = key.cloned();
        }
        Ok(Checkout {
            busy,
            wait: waited,
            instantiate,
        })
    }

    /// Runs one call on `instance`, then forwards its output to the log and
    /// either returns the instance to the warm pool or drops it. Returns the
    /// result with what the call spent.
    pub(crate) fn with_instance<R>(
        &self,
        checkout: Checkout,
        call: impl FnOnce(&Controller, &mut Store<PluginState>) -> wasmtime::Result<R>,
    ) -> Result<(R, Spent), CallError> {
        let Checkout {
            mut busy,
            wait,
            instantiate,
        } = checkout;
        let Some(instance) = busy.instance() else {
            return Err(CallError::Instantiate(wasmtime::Error::msg(
                "no instance in the slot",
            )));
        };
        let deadline = self.limits.deadline;
        instance.store.set_epoch_deadline(deadline_ticks(deadline));
        let data = instance.store.data_mut();
        data.limiter.exhausted = false;
        data.imports = Duration::ZERO;
        data.usage = Default::default();
        let started = Instant::now();
        data.call_deadline = started + deadline;
        let result = call(&instance.controller, &mut instance.store);
        let spent = Spent {
            wait,
            instantiate,
            call: started.elapsed(),
            imports: instance.store.data().imports,
            memory: instance.store.data().limiter.memory_used() as u64,
        };
        let stderr = forward_output(instance.store.data());
        instance.calls += 1;
        match result {
            Ok(value) => {
                let data = instance.store.data_mut();
                data.cache = Arc::new(MemoryCache::default());
                data.key = None;
                if self.reuse && instance.calls < MAX_CALLS_PER_INSTANCE {
                    let bytes = instance.store.data().limiter.memory_used();
                    self.shared.pool.checkin(busy, bytes);
                }
                Ok((value, spent))
            }
            Err(error) => {
                // The instance is dropped with its slot, never entered again.
                let error = classify(instance.store.data(), error, deadline, &stderr);
                if let CallError::LimitExceeded(exceeded) = &error {
                    self.shared.limit_counts.record(exceeded.limit);
                }
                Err(error)
            }
        }
    }

    /// Runs the component's `declare` on a fresh instance: its checked
    /// declaration, and how long instantiating took.
    pub(crate) fn declare(&self) -> Result<(Declaration, Duration), LoadError> {
        let contract = self.code.contract;
        let started = Instant::now();
        let checkout = self
            .checkout(Arc::new(MemoryCache::default()), None)
            .map_err(|error| match error {
                // Exports are type-checked once instantiated: a mismatch
                // means another revision of the contract.
                CallError::Exports(error) => LoadError::Incompatible {
                    contract,
                    source: error,
                },
                other => LoadError::Declare(other),
            })?;
        let instantiate_time = started.elapsed();
        let (declaration, _) = self
            .with_instance(checkout, |controller, store| controller.declare(store))
            .map_err(LoadError::Declare)?;
        let declaration = declaration.map_err(LoadError::Declaration)?;
        Ok((declaration, instantiate_time))
    }

    /// This plugin on optimized code: the optimizing compiler's (and
    /// cached) if it runs baseline code, shared with another plugin of the
    /// component that has it already, or its own if it has. Same name,
    /// declaration, grants, limits; its own instances.
    ///
    /// # Errors
    /// [`LoadError`] if the optimizing compiler refuses what the baseline
    /// one took.
    pub fn optimized(&self) -> Result<Self, LoadError> {
        let code = self.shared.optimized(&self.code, &self.name)?;
        Ok(Self {
            shared: Arc::clone(&self.shared),
            code,
            id: self.shared.next_plugin(),
            declaration: Arc::clone(&self.declaration),
            name: Arc::clone(&self.name),
            grants: Arc::clone(&self.grants),
            limits: self.limits,
            reads_denied: Arc::clone(&self.reads_denied),
            reuse: self.reuse,
            config_validator: self.config_validator.clone(),
            valid_config: Mutex::new(None),
        })
    }
}

impl Plugin {
    /// A plugin of `code` as `declaration` says, under `grants`.
    pub(crate) fn new(shared: Arc<Shared>, code: Arc<Code>, parts: Parts) -> Self {
        Self {
            id: shared.next_plugin(),
            name: Arc::from(parts.declaration.name.as_str()),
            code,
            declaration: Arc::new(parts.declaration),
            grants: Arc::new(parts.grants),
            limits: parts.limits,
            reads_denied: Arc::default(),
            reuse: parts.reuse,
            config_validator: parts.config_validator,
            valid_config: Mutex::new(None),
            shared,
        }
    }

    /// A plugin of `code` granting nothing, for `declare` to run in.
    pub(crate) fn bootstrap(shared: Arc<Shared>, code: Arc<Code>) -> Self {
        let limits = shared.config.call_limits();
        let mut plugin = Self::new(
            shared,
            code,
            Parts {
                declaration: placeholder_declaration(),
                grants: Grants::none("(loading)"),
                limits,
                reuse: false,
                config_validator: None,
            },
        );
        plugin.name = Arc::from("(loading)");
        plugin
    }
}
