//! What every plugin of a runtime shares: the wasmtime engines and their
//! linkers (the optimizing compiler's, and the baseline compiler's when
//! on), the epoch ticker that enforces deadlines, the precompiled cache,
//! the components loaded now (a component loaded again shares its code),
//! the instance budget and the limit counters. A [`crate::Runtime`] is a
//! handle on it; every plugin holds it too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::bindings::{self, ControllerPre};
use crate::call::{EPOCH_TICK, Instance};
use crate::code::Code;
use crate::compiled::CompiledCache;
use crate::config::{InstanceReuse, RuntimeConfig};
use crate::declaration::Declaration;
use crate::error::{LoadError, RuntimeError};
use crate::limits::LimitCounts;
use crate::pool::{Owner, Pool};
use crate::state::{self, PluginState};

/// Bytes of each pooled linear memory reset with memset and kept resident.
const KEEP_RESIDENT: usize = 2 << 20;

/// The state every plugin of a runtime shares.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<PluginState>,
    /// The baseline compiler's engine and linker, when on.
    pub(crate) baseline: Option<(Engine, Linker<PluginState>)>,
    pub(crate) config: RuntimeConfig,
    pub(crate) compiled: Option<CompiledCache>,
    pub(crate) limit_counts: LimitCounts,
    /// The instance budget every plugin's instances share.
    pub(crate) pool: Arc<Pool<Instance>>,
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

impl Shared {
    /// Builds the engines and starts their epoch ticker.
    ///
    /// # Errors
    /// [`RuntimeError`] if wasmtime refuses the configuration.
    pub(crate) fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true);
        let (instances, warm, warm_bytes) = (
            config.instances(),
            config.warm_instances(),
            config.warm_bytes(),
        );
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
            engine,
            linker,
            baseline,
            config,
            compiled,
            limit_counts: LimitCounts::default(),
            pool: Pool::new(instances as usize, warm as usize, warm_bytes),
            plugins: AtomicU64::new(0),
            loaded: Mutex::default(),
            compiling: Mutex::default(),
        })
    }

    /// The components loaded now, those no plugin holds any more forgotten.
    pub(crate) fn loaded(&self) -> MutexGuard<'_, HashMap<String, (Weak<Code>, Declaration)>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        loaded.retain(|_, (code, _)| code.strong_count() > 0);
        loaded
    }

    /// The code and declaration of the component with this digest, if a
    /// plugin still holds it.
    pub(crate) fn find(&self, digest: &str) -> Option<(Arc<Code>, Declaration)> {
        let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let (code, declaration) = loaded.get(digest)?;
        Some((code.upgrade()?, declaration.clone()))
    }

    /// The gate of the component with this digest (see `compiling`).
    pub(crate) fn gate(&self, digest: &str) -> Arc<Mutex<()>> {
        let mut gates = self
            .compiling
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        gates.retain(|_, gate| gate.strong_count() > 0);
        if let Some(gate) = gates.get(digest).and_then(Weak::upgrade) {
            return gate;
        }
        let gate = Arc::new(Mutex::new(()));
        gates.insert(digest.to_owned(), Arc::downgrade(&gate));
        gate
    }

    /// Compiles a component with the optimizing compiler, through the
    /// precompiled cache when there is one.
    pub(crate) fn compile(&self, bytes: &[u8], digest: &str) -> Result<Component, LoadError> {
        match &self.compiled {
            Some(cache) => cache.compile(&self.engine, bytes, digest),
            None => Component::new(&self.engine, bytes),
        }
        .map_err(LoadError::Compile)
    }

    /// `code` compiled by the optimizing compiler: itself if it is, else
    /// the code another plugin of the component tiered up already, else
    /// compiled now (and cached), and then shared with the loads to come.
    pub(crate) fn optimized(&self, code: &Arc<Code>, plugin: &str) -> Result<Arc<Code>, LoadError> {
        let digest = &code.digest;
        let gate = self.gate(digest);
        let _compiling = gate.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = match (&code.baseline, self.find(digest)) {
            (None, _) => return Ok(Arc::clone(code)),
            (Some(_), Some((shared, _))) if shared.baseline.is_none() => return Ok(shared),
            (Some(bytes), _) => bytes,
        };
        let started = Instant::now();
        let component = self.compile(bytes, digest)?;
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(LoadError::Link)?;
        let optimized = Arc::new(Code {
            pre: ControllerPre::new(code.contract, instance_pre).map_err(LoadError::Link)?,
            contract: code.contract,
            digest: digest.clone(),
            baseline: None,
        });
        if let Some((shared, _)) = self.loaded().get_mut(digest) {
            *shared = Arc::downgrade(&optimized);
        }
        tracing::info!(plugin, digest = %digest,
            compile_time = ?started.elapsed(), "optimized code compiled");
        Ok(optimized)
    }

    /// Records `code` as loaded with its declaration, for later loads of
    /// the same component to share.
    pub(crate) fn remember(&self, code: &Arc<Code>, declaration: &Declaration) {
        self.loaded().insert(
            code.digest.clone(),
            (Arc::downgrade(code), declaration.clone()),
        );
    }

    /// A new plugin's id: its instances' owner in the pool.
    pub(crate) fn next_plugin(&self) -> Owner {
        self.plugins.fetch_add(1, Ordering::Relaxed)
    }
}

/// A linker of the host's imports for `engine`: WASI with no capability,
/// its waits bounded, and the contract's `cache` and `log`.
fn linker(engine: &Engine) -> Result<Linker<PluginState>, RuntimeError> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(RuntimeError::Engine)?;
    linker.allow_shadowing(true);
    crate::blocking::add_to_linker(&mut linker).map_err(RuntimeError::Engine)?;
    linker.allow_shadowing(false);
    bindings::add_to_linker(&mut linker).map_err(RuntimeError::Engine)?;
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
