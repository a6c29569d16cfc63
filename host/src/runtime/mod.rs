//! The sandboxed Wasm runtime: one engine, plugins loaded once, every call
//! under a CPU deadline and a memory limit.
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
//! which the engine retries without backoff). The rules are `pool`'s.

mod bindings;
mod blocking;
mod compiled;
mod host;
mod limits;
mod pool;
mod state;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};

use crate::action::{self, Action, ActionError, Desired, PlanContext};
use crate::cache::{Cache, MemoryCache};
use crate::declaration::{Declaration, DeclarationError};
use crate::grants::{Excess, Grants, OperatorGrants};
use crate::mapper::RestMapper;
use crate::resource::{ObjectKey, ResourceType};

pub use limits::{CallLimits, Limit, LimitCounts, LimitExceeded, Limits};

use bindings::{Call, Controller, ControllerPre, exports};
pub use compiled::CacheDirError;
use compiled::CompiledCache;
use pool::{Busy, Owner, Pool};
pub use pool::{Exhausted, PoolCounts};
use state::{Limiter, PluginState};

/// A version of the `kubewasm:controller` contract the host speaks. A
/// component targets exactly one, read from its exports; the host links
/// them all, so a plugin built against an older version keeps loading and
/// behaving as it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Contract {
    /// `kubewasm:controller@0.1.0` (`wit/0.1.0/`), frozen.
    V0_1,
    /// `kubewasm:controller@0.2.0` (`wit/`): primary selectors, cache reads
    /// and failures in `map-keys`, unforced applies, delete preconditions.
    V0_2,
}

impl Contract {
    /// Every version the host links, newest first.
    pub const ALL: [Self; 2] = [Self::V0_2, Self::V0_1];

    /// The version new plugins target.
    pub const CURRENT: Self = Self::V0_2;

    /// The package version, e.g. `0.2.0`.
    pub fn version(self) -> &'static str {
        match self {
            Self::V0_1 => "0.1.0",
            Self::V0_2 => "0.2.0",
        }
    }

    /// The export a component of this version provides.
    pub fn plugin_export(self) -> &'static str {
        match self {
            Self::V0_1 => "kubewasm:controller/plugin@0.1.0",
            Self::V0_2 => "kubewasm:controller/plugin@0.2.0",
        }
    }

    /// The version whose plugin export is among `exports`.
    fn of_exports(exports: &[String]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|contract| exports.iter().any(|e| e == contract.plugin_export()))
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kubewasm:controller@{}", self.version())
    }
}

/// The plugin exports the host accepts, for messages.
fn accepted_exports() -> String {
    Contract::ALL
        .map(|c| format!("`{}`", c.plugin_export()))
        .join(" or ")
}

/// Interfaces a plugin may import: the contract's own, and the WASI ones
/// toolchains link by default (all given no capability). Anything else,
/// `wasi:http` for one, is refused at load.
const PROVIDED_IMPORTS: [&str; 7] = [
    "kubewasm:controller/",
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// A warm instance is retired after this many calls, bounding what a leaky
/// plugin can accumulate.
pub const MAX_CALLS_PER_INSTANCE: u32 = 10_000;

/// Bytes of each pooled linear memory reset with memset and kept resident.
const KEEP_RESIDENT: usize = 2 << 20;

/// How often the epoch ticks; deadlines are rounded up to it.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Whether calls reuse warm instances or get a fresh one each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InstanceReuse {
    /// Reuse warm instances; a trapped one is dropped.
    #[default]
    Reuse,
    /// A fresh instance per call.
    Fresh,
}

/// Settings of the [`Runtime`].
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    deadline: Duration,
    memory_limit: usize,
    cache_dir: Option<PathBuf>,
    instance_reuse: InstanceReuse,
    max_instances: Option<u32>,
    instance_wait: Duration,
    pooling: bool,
    limits: Limits,
    baseline: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(1),
            memory_limit: 256 << 20,
            cache_dir: None,
            instance_reuse: InstanceReuse::Reuse,
            max_instances: None,
            instance_wait: Duration::from_secs(30),
            pooling: true,
            limits: Limits::default(),
            baseline: false,
        }
    }
}

impl RuntimeConfig {
    /// What a call may spend and return unless a plugin is held tighter.
    fn call_limits(&self) -> CallLimits {
        CallLimits {
            deadline: self.deadline,
            memory: self.memory_limit,
            output: self.limits,
        }
    }

    /// CPU deadline of one call (default 1 s).
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Largest linear memory a plugin instance may grow to (default 256 MiB).
    #[must_use]
    pub fn memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Directory of precompiled components (default: none, compile at load).
    #[must_use]
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Instance reuse policy (default [`InstanceReuse::Reuse`]).
    #[must_use]
    pub fn instance_reuse(mut self, reuse: InstanceReuse) -> Self {
        self.instance_reuse = reuse;
        self
    }

    /// Most component instances alive at once across plugins, warm or in a
    /// call (default: [`default_max_instances`] of the memory limit).
    #[must_use]
    pub fn max_instances(mut self, count: u32) -> Self {
        self.max_instances = Some(count.max(1));
        self
    }

    /// The instance budget this configuration gives.
    pub fn instances(&self) -> u32 {
        self.max_instances
            .unwrap_or_else(|| default_max_instances(self.memory_limit))
    }

    /// Longest a call waits for an instance slot when every one is in a
    /// call (default 30 s).
    #[must_use]
    pub fn instance_wait(mut self, wait: Duration) -> Self {
        self.instance_wait = wait;
        self
    }

    /// Output limits of every call (default [`Limits::default`]).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether a component not precompiled yet first runs compiled by the
    /// baseline compiler (Winch: some 25 times faster to compile, slower to
    /// run) until [`Plugin::optimized`] has its optimized code (default
    /// false: what the host runs, `kubewasm run` and `dev`, turns it on).
    #[must_use]
    pub fn baseline(mut self, enabled: bool) -> Self {
        self.baseline = enabled;
        self
    }

    /// Whether to use the pooling allocator (default true).
    #[must_use]
    pub fn pooling(mut self, enabled: bool) -> Self {
        self.pooling = enabled;
        self
    }
}

/// What a plugin is loaded against: the cluster's types and the operator's
/// grants.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    mapper: Arc<RestMapper>,
    grants: OperatorGrants,
    name: Option<String>,
    limits: Option<CallLimits>,
}

impl LoadOptions {
    /// Loads against the types `mapper` knows, with every declared verb
    /// granted (writes to system namespaces excepted).
    pub fn new(mapper: Arc<RestMapper>) -> Self {
        Self {
            mapper,
            grants: OperatorGrants::unrestricted(),
            name: None,
            limits: None,
        }
    }

    /// Runs the plugin as `name`, its instance name, instead of the name it
    /// declares: the field manager (`kubewasm-<name>`), the managed finalizer
    /// (`kubewasm.dev/<name>`), logs, metrics and denials all use it, so one
    /// component can run as several plugins. It must be a DNS label, or a
    /// tenant's `NAMESPACE.NAME` (two DNS labels, 63 characters at most):
    /// see [`is_plugin_name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Narrows plugins to the operator's grants.
    #[must_use]
    pub fn grants(mut self, grants: OperatorGrants) -> Self {
        self.grants = grants;
        self
    }

    /// Holds the plugin's calls to `limits`, within the runtime's own
    /// ([`CallLimits::within`]).
    #[must_use]
    pub fn limits(mut self, limits: CallLimits) -> Self {
        self.limits = Some(limits);
        self
    }
}

/// Whether `name` may name a plugin: a DNS label (a plugin of the
/// directory, a `ClusterPlugin`), or `NAMESPACE.NAME`, two DNS labels (a
/// tenant's `Plugin`; no other plugin's name has a dot, so none collides
/// with it), 63 characters at most either way: the managed finalizer
/// `kubewasm.dev/<name>` is a qualified name.
pub fn is_plugin_name(name: &str) -> bool {
    use kubewasm_core::validation::is_dns_label;
    name.len() <= 63
        && match name.split_once('.') {
            None => is_dns_label(name),
            Some((namespace, rest)) => is_dns_label(namespace) && is_dns_label(rest),
        }
}

/// The default instance budget: as many instances grown to `memory_limit`
/// as the memory this process may use holds (the machine's, or its cgroup's
/// limit if lower), at least [`MIN_INSTANCES`], at most [`MAX_INSTANCES`].
pub fn default_max_instances(memory_limit: usize) -> u32 {
    let memory = machine_memory().unwrap_or(4 << 30);
    let fit = memory / (memory_limit.max(1 << 20) as u64);
    u32::try_from(fit)
        .unwrap_or(MAX_INSTANCES)
        .clamp(MIN_INSTANCES, MAX_INSTANCES)
}

/// The smallest default budget.
pub const MIN_INSTANCES: u32 = 16;

/// The largest default budget (the pooling allocator reserves address
/// space for each).
pub const MAX_INSTANCES: u32 = 1024;

/// Bytes of memory this process may use: the machine's (`MemTotal`), or its
/// cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) when lower.
fn machine_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?
        .saturating_mul(1024);
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| std::fs::read_to_string(path).ok())
    .find_map(|text| text.trim().parse::<u64>().ok());
    Some(cgroup.map_or(total, |limit| limit.min(total)))
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime refused the configuration.
    #[error("failed to configure the wasm engine: {0}")]
    Engine(#[source] wasmtime::Error),
    /// The precompiled cache directory cannot be used safely.
    #[error(transparent)]
    CacheDir(#[from] CacheDirError),
}

/// Why a plugin was refused at load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly file (no `\\0asm` header)")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component: build for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// Compilation failed.
    #[error("failed to compile the component: {0:#}")]
    Compile(#[source] wasmtime::Error),
    /// The component targets another world.
    #[error("the component targets another world: it exports [{}], not {}", exports.join(", "), accepted_exports())]
    WrongWorld {
        /// What it exports.
        exports: Vec<String>,
    },
    /// The component imports an interface the host does not provide.
    #[error("the component imports `{import}`, which kubewasm does not provide to plugins")]
    UnsupportedImport {
        /// The import.
        import: String,
    },
    /// Linking failed for another reason (e.g. a type mismatch).
    #[error("failed to link the component: {0:#}")]
    Link(#[source] wasmtime::Error),
    /// The component links but does not match the world the host speaks
    /// (built against another revision of the WIT package).
    #[error("the component does not match the `{contract}` world this host speaks: {source:#}")]
    Incompatible {
        /// The version it claims.
        contract: Contract,
        /// Where its types differ.
        #[source]
        source: wasmtime::Error,
    },
    /// The `declare` call failed.
    #[error("the plugin's declare call failed: {0}")]
    Declare(#[source] CallError),
    /// The declaration is invalid.
    #[error("invalid declaration: {0}")]
    Declaration(#[source] DeclarationError),
    /// The declaration asks for more than the operator grants.
    #[error(transparent)]
    NotGranted(#[from] Excess),
}

/// Why one call into a plugin failed. The instance is dropped in every case.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Instantiation failed.
    #[error("failed to instantiate: {0:#}")]
    Instantiate(#[source] wasmtime::Error),
    /// Every instance slot stayed in a call for as long as the call could
    /// wait: nothing ran (the engine queues the key again, without backoff).
    #[error(transparent)]
    NoInstance(#[from] Exhausted),
    /// The call ran past its CPU deadline and was interrupted.
    #[error("deadline of {deadline:?} exceeded")]
    DeadlineExceeded {
        /// The deadline.
        deadline: Duration,
    },
    /// The plugin grew its memory past the limit.
    #[error("memory limit exceeded: {detail}")]
    MemoryExhausted {
        /// What was asked for.
        detail: String,
    },
    /// The plugin panicked.
    #[error("plugin panicked: {message}")]
    Panicked {
        /// The panic message, from the plugin's stderr.
        message: String,
    },
    /// The plugin went past an output limit.
    #[error(transparent)]
    LimitExceeded(#[from] LimitExceeded),
    /// Any other trap (including an uncaught exception in an interpreter).
    #[error("plugin trapped: {trap}{}", if stderr.is_empty() { String::new() } else { format!("\nplugin stderr:\n{stderr}") })]
    Trapped {
        /// The trap.
        trap: String,
        /// What the plugin wrote to stderr during the call.
        stderr: String,
    },
}

/// Why a reconcile or finalize failed; the host retries the key with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The call itself failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The plugin returned a failure.
    #[error("plugin reported failure: {message}")]
    Failed {
        /// The plugin's message.
        message: String,
    },
    /// An action was denied or malformed; nothing was performed.
    #[error(transparent)]
    Action(#[from] ActionError),
    /// The configuration does not match the plugin's `config-schema`.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// A configuration the plugin's `config-schema` refuses.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not JSON.
    #[error("the configuration is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// Not valid against the schema.
    #[error("the configuration does not match the plugin's config-schema: {message} (at `{path}`)")]
    Schema {
        /// The validator's message.
        message: String,
        /// Where in the configuration (a JSON pointer).
        path: String,
    },
}

/// Why a `map-keys` call failed.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The plugin returned a key no object can have.
    #[error("map-keys returned an invalid key: {0}")]
    InvalidKey(#[source] kubewasm_core::validation::Invalid),
    /// The plugin reported a failure (contract 0.2.0 on).
    #[error("the plugin failed: {message}")]
    Failed {
        /// Its message, truncated.
        message: String,
    },
}

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
        }
    }
}

/// A successful reconcile: checked actions and an optional requeue.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The actions, in order.
    pub actions: Vec<Action>,
    /// Reconcile again after this long.
    pub requeue_after: Option<Duration>,
    /// Whether this primary needs the managed finalizer (`None`: the default,
    /// yes). Meaningful only when the plugin declared one.
    pub finalizer: Option<bool>,
    /// Where the time went.
    pub stats: CallStats,
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

/// What one call on an instance spent.
#[derive(Clone, Copy, Debug)]
struct Spent {
    wait: Duration,
    instantiate: Duration,
    call: Duration,
    imports: Duration,
    memory: u64,
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

/// A component compiled and linked: its code, shared by every plugin
/// loaded from the same bytes (each keeps its own instances).
struct Code {
    pre: ControllerPre,
    /// The contract version the component targets.
    contract: Contract,
    digest: String,
    /// The component's bytes while this is the baseline compiler's code,
    /// for [`Plugin::optimized`] to compile.
    baseline: Option<Arc<[u8]>>,
}

/// A component's declaration and the interfaces it imports and exports.
#[derive(Clone, Debug)]
pub struct Interfaces {
    /// Its validated declaration.
    pub declaration: Declaration,
    /// Imported interfaces, by name (`wasi:io/streams@0.2.6`, ...).
    pub imports: Vec<String>,
    /// Exported ones.
    pub exports: Vec<String>,
}

impl Runtime {
    /// Builds the engine and starts its epoch ticker.
    ///
    /// # Errors
    /// [`RuntimeError`] if wasmtime refuses the configuration.
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true);
        let instances = config.instances();
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
                pool: Pool::new(instances as usize),
                plugins: AtomicU64::new(0),
                loaded: Mutex::default(),
                compiling: Mutex::default(),
            }),
        })
    }

    /// Distinct components loaded now (a component loaded as several
    /// plugins counts once: they share its compiled code).
    pub fn components(&self) -> usize {
        self.loaded().len()
    }

    /// The components loaded now, those no plugin holds any more forgotten.
    fn loaded(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Weak<Code>, Declaration)>> {
        let mut loaded = self
            .inner
            .loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loaded.retain(|_, (code, _)| code.strong_count() > 0);
        loaded
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

    /// Loads a plugin from a file.
    ///
    /// # Errors
    /// [`LoadError`] says why the file was refused.
    pub fn load_file(
        &self,
        path: impl AsRef<Path>,
        options: &LoadOptions,
    ) -> Result<Plugin, LoadError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load(&bytes, options)
    }

    /// Loads a plugin: checks, compiles (or loads precompiled), links,
    /// declares, then resolves its declared types against the cluster's
    /// and checks them against the operator's grants.
    ///
    /// # Errors
    /// [`LoadError`] says why the component was refused.
    #[tracing::instrument(name = "kubewasm.runtime.load", skip_all, fields(size = bytes.len()))]
    pub fn load(&self, bytes: &[u8], options: &LoadOptions) -> Result<Plugin, LoadError> {
        let (bootstrap, declaration, timing) = self.declare(bytes)?;
        let mut declaration = declaration
            .resolve(&options.mapper)
            .map_err(LoadError::Declaration)?;
        if let Some(name) = &options.name {
            if !is_plugin_name(name) {
                return Err(LoadError::Declaration(DeclarationError::InvalidName(
                    name.clone(),
                )));
            }
            declaration.name.clone_from(name);
        }
        let grants = Grants::new(&declaration, &options.grants)?;
        let config_validator = declaration
            .config_validator()
            .map_err(LoadError::Declaration)?
            .map(Arc::new);
        let reuse = self.inner.config.instance_reuse == InstanceReuse::Reuse;
        tracing::info!(
            plugin = %declaration.name,
            version = %declaration.version,
            contract = bootstrap.code.contract.version(),
            digest = %bootstrap.code.digest,
            cached = timing.cached,
            compile_time = ?timing.compile_time,
            instantiate_time = ?timing.instantiate_time,
            reuse,
            "component compiled and declared (the host checks its configuration next)"
        );
        let host_limits = self.inner.config.call_limits();
        Ok(Plugin {
            runtime: self.clone(),
            code: Arc::clone(&bootstrap.code),
            id: self.next_plugin(),
            name: Arc::from(declaration.name.as_str()),
            limits: options
                .limits
                .map_or(host_limits, |limits| limits.within(host_limits)),
            grants: Arc::new(grants),
            declaration: Arc::new(declaration),
            reads_denied: Arc::default(),
            reuse,
            config_validator,
            valid_config: Mutex::new(None),
        })
    }

    /// What a component declares, unchecked against any cluster or grants:
    /// what `kubewasm inspect` prints.
    ///
    /// # Errors
    /// [`LoadError`] says why the component was refused.
    pub fn inspect(&self, bytes: &[u8]) -> Result<Declaration, LoadError> {
        Ok(self.declare(bytes)?.1)
    }

    /// What [`Self::inspect`] says, with the interfaces the component
    /// imports and exports (what its OCI artifact's config records).
    ///
    /// # Errors
    /// [`LoadError`] says why the component was refused.
    pub fn interfaces(&self, bytes: &[u8]) -> Result<Interfaces, LoadError> {
        let (plugin, declaration, _) = self.declare(bytes)?;
        let engine = &self.inner.engine;
        let ty = plugin.code.pre.component().component_type();
        Ok(Interfaces {
            declaration,
            imports: ty
                .imports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
            exports: ty
                .exports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
        })
    }

    /// Compiles, links and instantiates a component and calls `declare`
    /// (or shares the code and declaration of the same component loaded
    /// already): the plugin (granting nothing yet), its declaration, and the
    /// time compiling (with whether it was cached) and instantiating took.
    fn declare(&self, bytes: &[u8]) -> Result<(Plugin, Declaration, LoadTiming), LoadError> {
        check_header(bytes)?;
        let digest = hex::encode(Sha256::digest(bytes));
        let gate = self.gate(&digest);
        let _compiling = gate.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((code, declaration)) = self.shared(&digest) {
            let timing = LoadTiming {
                cached: true,
                compile_time: Duration::ZERO,
                instantiate_time: Duration::ZERO,
            };
            return Ok((self.bootstrap(code), declaration, timing));
        }
        let started = Instant::now();
        let cached = self
            .inner
            .compiled
            .as_ref()
            .and_then(|cache| cache.load(&self.inner.engine, &digest));
        let from_cache = cached.is_some();
        let (component, linker, baseline) = match (cached, &self.inner.baseline) {
            (Some(component), _) => (component, &self.inner.linker, None),
            (None, Some((engine, linker))) => (
                Component::new(engine, bytes).map_err(LoadError::Compile)?,
                linker,
                Some(Arc::from(bytes)),
            ),
            (None, None) => {
                // Long first compiles say so (the result is cached).
                tracing::info!(size = bytes.len(), digest = %digest,
                    "compiling the component with the optimizing compiler, once (an interpreted \
                     Python or JavaScript plugin takes 10 to 30 s; the result is cached)");
                (self.compile(bytes, &digest)?, &self.inner.linker, None)
            }
        };
        let compile_time = started.elapsed();
        let contract = check_world(component.engine(), &component)?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(LoadError::Link)?;
        let pre = ControllerPre::new(contract, instance_pre).map_err(LoadError::Link)?;

        let bootstrap = self.bootstrap(Arc::new(Code {
            pre,
            contract,
            digest,
            baseline,
        }));
        let started = Instant::now();
        let checkout = bootstrap.checkout(Arc::new(MemoryCache::default()), None);
        let checkout = checkout.map_err(|error| match error {
            // Exports are type-checked at instantiation: a mismatch means
            // another revision of the contract.
            CallError::Instantiate(error) if error.to_string().contains("type mismatch") => {
                LoadError::Incompatible {
                    contract,
                    source: error,
                }
            }
            other => LoadError::Declare(other),
        })?;
        let instantiate_time = started.elapsed();
        let (declaration, _) = bootstrap
            .with_instance(checkout, |controller, store| controller.declare(store))
            .map_err(LoadError::Declare)?;
        let declaration = Declaration::try_from(declaration).map_err(LoadError::Declaration)?;
        let mut loaded = self.loaded();
        loaded.insert(
            bootstrap.code.digest.clone(),
            (Arc::downgrade(&bootstrap.code), declaration.clone()),
        );
        drop(loaded);
        Ok((
            bootstrap,
            declaration,
            LoadTiming {
                cached: from_cache,
                compile_time,
                instantiate_time,
            },
        ))
    }
}

impl Runtime {
    /// Compiles a component with the optimizing compiler, through the
    /// precompiled cache when there is one.
    fn compile(&self, bytes: &[u8], digest: &str) -> Result<Component, LoadError> {
        match &self.inner.compiled {
            Some(cache) => cache.compile(&self.inner.engine, bytes, digest),
            None => Component::new(&self.inner.engine, bytes).map_err(LoadError::Compile),
        }
    }

    /// The code and declaration of the component with this digest, if a
    /// plugin still holds it; forgets the components no plugin holds.
    fn shared(&self, digest: &str) -> Option<(Arc<Code>, Declaration)> {
        let loaded = self
            .inner
            .loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (code, declaration) = loaded.get(digest)?;
        Some((code.upgrade()?, declaration.clone()))
    }

    /// The gate of the component with this digest (see `Inner::compiling`).
    fn gate(&self, digest: &str) -> Arc<Mutex<()>> {
        let mut gates = self
            .inner
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

    /// A new plugin's id: its instances' owner in the pool.
    fn next_plugin(&self) -> Owner {
        self.inner.plugins.fetch_add(1, Ordering::Relaxed)
    }

    /// A plugin of `code` granting nothing, for `declare` to run in.
    fn bootstrap(&self, code: Arc<Code>) -> Plugin {
        Plugin {
            runtime: self.clone(),
            code,
            id: self.next_plugin(),
            declaration: Arc::new(placeholder_declaration()),
            name: Arc::from("(loading)"),
            grants: Arc::new(Grants::none("(loading)")),
            limits: self.inner.config.call_limits(),
            reads_denied: Arc::default(),
            reuse: false,
            config_validator: None,
            valid_config: Mutex::new(None),
        }
    }
}

/// How long loading took, for the log.
struct LoadTiming {
    cached: bool,
    compile_time: Duration,
    instantiate_time: Duration,
}

/// Refuses what is not a component before wasmtime sees it, with a message
/// that says what it is instead.
fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(LoadError::CoreModule),
        Some([0, b'a', b's', b'm', ..]) => Ok(()),
        _ => Err(LoadError::NotWasm),
    }
}

/// Checks the component's imports and exports against the worlds; returns
/// the contract version it targets.
fn check_world(engine: &Engine, component: &Component) -> Result<Contract, LoadError> {
    let ty = component.component_type();
    if let Some((import, _)) = ty
        .imports(engine)
        .find(|(name, _)| !PROVIDED_IMPORTS.iter().any(|p| name.starts_with(p)))
    {
        return Err(LoadError::UnsupportedImport {
            import: import.to_owned(),
        });
    }
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    Contract::of_exports(&exports).ok_or(LoadError::WrongWorld { exports })
}

/// Declaration used only while `declare` runs (it grants nothing).
fn placeholder_declaration() -> Declaration {
    Declaration {
        name: String::new(),
        version: String::new(),
        primary: ResourceType {
            group: String::new(),
            version: String::new(),
            kind: String::new(),
            plural: String::new(),
            namespaced: false,
        },
        primary_verbs: Default::default(),
        primary_selector: String::new(),
        secondaries: Vec::new(),
        managed_finalizer: false,
        resync_seconds: None,
        max_concurrency: None,
        config_schema: None,
    }
}

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

/// A live instance and its store.
struct Instance {
    store: Store<PluginState>,
    controller: Controller,
    calls: u32,
}

/// A slot checked out for one call, holding its instance, and what getting
/// it took.
struct Checkout {
    busy: Busy<Instance>,
    wait: Duration,
    instantiate: Duration,
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

    /// This plugin on optimized code: the optimizing compiler's (and
    /// cached) if it runs baseline code, shared with another plugin of the
    /// component that has it already, or its own if it has. Same name,
    /// declaration, grants, limits; its own instances.
    ///
    /// # Errors
    /// [`LoadError`] if the optimizing compiler refuses what the baseline
    /// one took.
    pub fn optimized(&self) -> Result<Self, LoadError> {
        let runtime = &self.runtime;
        let digest = &self.code.digest;
        let gate = runtime.gate(digest);
        let _compiling = gate.lock().unwrap_or_else(PoisonError::into_inner);
        let code = match (&self.code.baseline, runtime.shared(digest)) {
            (None, _) => Arc::clone(&self.code),
            (Some(_), Some((code, _))) if code.baseline.is_none() => code,
            (Some(bytes), _) => {
                let started = Instant::now();
                let component = runtime.compile(bytes, digest)?;
                let instance_pre = runtime
                    .inner
                    .linker
                    .instantiate_pre(&component)
                    .map_err(LoadError::Link)?;
                let code = Arc::new(Code {
                    pre: ControllerPre::new(self.code.contract, instance_pre)
                        .map_err(LoadError::Link)?,
                    contract: self.code.contract,
                    digest: digest.clone(),
                    baseline: None,
                });
                if let Some((shared, _)) = runtime.loaded().get_mut(digest) {
                    *shared = Arc::downgrade(&code);
                }
                tracing::info!(plugin = %self.name, digest = %digest,
                    compile_time = ?started.elapsed(), "optimized code compiled");
                code
            }
        };
        Ok(Self {
            runtime: runtime.clone(),
            code,
            id: runtime.next_plugin(),
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

    /// Reconciles one key against `cache`, returning checked actions.
    ///
    /// # Errors
    /// [`ReconcileError`]: the call failed, the plugin reported a failure, or
    /// an action was refused.
    #[tracing::instrument(name = "kubewasm.plugin.reconcile", skip_all, fields(plugin = %self.name, key = %request.key))]
    pub fn reconcile(
        &self,
        cache: Arc<dyn Cache>,
        request: &Request,
    ) -> Result<Outcome, ReconcileError> {
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
    ) -> Result<Outcome, ReconcileError> {
        self.run(cache, request, Call::Finalize)
    }

    /// Maps a changed secondary object to primary keys (the `custom` mapping).
    /// The call reads `cache` under the plugin's grants, as a reconcile does.
    ///
    /// # Errors
    /// [`MapError`] if the call fails, the plugin reports a failure or
    /// returns an invalid key.
    pub fn map(
        &self,
        cache: Arc<dyn Cache>,
        resource: &ResourceType,
        object: &str,
        config: &str,
    ) -> Result<Vec<ObjectKey>, MapError> {
        let limits = self.limits.output;
        let request = exports::MapRequest {
            type_: resource.into(),
            object: object.to_owned(),
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
    ) -> Result<Outcome, ReconcileError> {
        let wit_request = exports::Request {
            key: (&request.key).into(),
            type_: (&self.declaration.primary).into(),
            config: request.config.clone(),
            retries: request.retries,
            last_failure: request.last_failure.clone(),
        };
        self.check_config(&request.config)?;
        let limits = self.limits.output;
        let busy = self.checkout(Arc::clone(&cache), Some(&request.key))?;
        let (outcome, spent) = self.with_instance(busy, |c, store| {
            store.data().clock.set(Some(request.now));
            let outcome = c.call(store, &wit_request, call);
            store.data().clock.set(None);
            let outcome = outcome?;
            if let Ok(outcome) = &outcome {
                check_outcome(&limits, outcome)?;
            }
            Ok(outcome)
        })?;
        let outcome = outcome.map_err(|failure| ReconcileError::Failed {
            message: action::truncate(failure.message, MAX_FAILURE_BYTES),
        })?;
        let planning = Instant::now();
        let primary = cache.get(&self.declaration.primary, &request.key);
        let desired = outcome.actions.into_iter().map(Desired::from).collect();
        let actions = action::plan(
            PlanContext {
                declaration: &self.declaration,
                grants: &self.grants,
                key: &request.key,
                primary: primary.as_ref().map(|p| p.value()),
                cache: cache.as_ref(),
                now: request.now,
            },
            desired,
        )?;
        Ok(Outcome {
            actions,
            requeue_after: outcome.requeue_after_ms.map(Duration::from_millis),
            finalizer: outcome
                .finalizer
                .filter(|_| self.declaration.managed_finalizer),
            stats: CallStats {
                wait: spent.wait,
                instantiate: spent.instantiate,
                call: spent.call,
                imports: spent.imports,
                plan: planning.elapsed(),
                memory: spent.memory,
            },
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
        let controller = self.code.pre.instantiate(&mut store).map_err(|error| {
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
    fn checkout(
        &self,
        cache: Arc<dyn Cache>,
        key: Option<&ObjectKey>,
    ) -> Result<Checkout, CallError> {
        let pool = &self.runtime.inner.pool;
        let deadline = Instant::now() + self.runtime.inner.config.instance_wait;
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
    fn with_instance<R>(
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
                    self.runtime.inner.pool.checkin(busy);
                }
                Ok((value, spent))
            }
            Err(error) => {
                // The instance is dropped with its slot, never entered again.
                let error = classify(instance.store.data(), error, deadline, &stderr);
                if let CallError::LimitExceeded(exceeded) = &error {
                    self.runtime.inner.limit_counts.record(exceeded.limit);
                }
                Err(error)
            }
        }
    }
}

/// Most bytes of a plugin's failure message kept.
const MAX_FAILURE_BYTES: usize = 4096;

/// Checks an outcome against the output limits before anything of it is
/// parsed or planned.
fn check_outcome(limits: &Limits, outcome: &exports::Outcome) -> Result<(), LimitExceeded> {
    limits.check(Limit::Actions, outcome.actions.len() as u64)?;
    let mut total: u64 = 0;
    for action in &outcome.actions {
        let bytes = match action {
            exports::Action::Apply(apply) => apply.object.len(),
            exports::Action::ApplyStatus(object) => object.len(),
            exports::Action::Delete(d) => {
                let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
                d.key.name.len()
                    + text(&d.key.namespace)
                    + text(&d.preconditions.uid)
                    + text(&d.preconditions.resource_version)
            }
            exports::Action::Event(e) => e.reason.len() + e.action.len() + e.note.len(),
        } as u64;
        limits.check(Limit::ObjectBytes, bytes)?;
        total = total.saturating_add(bytes);
        limits.check(Limit::OutcomeBytes, total)?;
    }
    Ok(())
}

/// Epoch ticks for a deadline. The first tick may come at once (the ticker
/// runs at its own phase), so one more is added: a call is interrupted after
/// at least its deadline and at most one tick more.
fn deadline_ticks(deadline: Duration) -> u64 {
    let ticks = deadline.as_micros().div_ceil(EPOCH_TICK.as_micros());
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}

/// Turns a wasmtime error into the [`CallError`] that says what happened.
fn classify(
    state: &PluginState,
    error: wasmtime::Error,
    deadline: Duration,
    stderr: &str,
) -> CallError {
    let stderr = stderr.trim().to_owned();
    if state.limiter.exhausted {
        return CallError::MemoryExhausted {
            detail: format!("{error:#}"),
        };
    }
    if let Some(exceeded) = error.downcast_ref::<LimitExceeded>() {
        return CallError::LimitExceeded(*exceeded);
    }
    if error
        .downcast_ref::<blocking::BlockedPastDeadline>()
        .is_some()
    {
        return CallError::DeadlineExceeded { deadline };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => return CallError::DeadlineExceeded { deadline },
        Some(Trap::AllocationTooLarge) => {
            return CallError::MemoryExhausted {
                detail: format!("{error:#}"),
            };
        }
        _ => {}
    }
    if let Some(at) = stderr.find("panicked at") {
        return CallError::Panicked {
            message: stderr[at..].to_owned(),
        };
    }
    CallError::Trapped {
        trap: format!("{error:#}"),
        stderr,
    }
}

/// Forwards what the plugin printed during a call to `tracing`, line by
/// line, and returns its stderr (which carries panic messages and
/// interpreter tracebacks).
fn forward_output(state: &PluginState) -> String {
    let key = state
        .key
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let lines = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for line in lines(&state.stdout.drain()) {
        tracing::info!(target: "kubewasm::plugin", plugin = %state.plugin, key = %key, stream = "stdout", "{line}");
    }
    let stderr = lines(&state.stderr.drain());
    for line in &stderr {
        tracing::warn!(target: "kubewasm::plugin", plugin = %state.plugin, key = %key, stream = "stderr", "{line}");
    }
    stderr.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_header_should_name_what_the_bytes_are() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0rest"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0rest").is_ok());
    }

    #[test]
    fn the_default_instance_budget_should_follow_memory_never_a_constant() {
        let memory = machine_memory().expect("/proc/meminfo is readable here");
        let at_default = default_max_instances(256 << 20);
        let expected = u32::try_from(memory / (256 << 20)).unwrap_or(MAX_INSTANCES);
        assert_eq!(at_default, expected.clamp(MIN_INSTANCES, MAX_INSTANCES));
        // A smaller limit fits more instances, a huge one the floor.
        assert!(default_max_instances(16 << 20) >= at_default);
        assert_eq!(default_max_instances(1 << 45), MIN_INSTANCES);
        assert_eq!(RuntimeConfig::default().max_instances(5).instances(), 5);
    }

    #[test]
    fn deadline_ticks_should_cover_the_whole_deadline() {
        assert_eq!(deadline_ticks(Duration::from_millis(1)), 2);
        assert_eq!(deadline_ticks(Duration::from_millis(12)), 4);
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
    }

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
