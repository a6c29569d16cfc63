//! Loading plugins: one plugin from its files ([`load`]) or from any
//! component and setup ([`prepare`], which `Plugin` resources load through
//! as well), and the loads in flight ([`Loads`]).
//!
//! # Expected flow
//! A source of plugins ([`crate::lifecycle`]) starts loading a plugin
//! ([`Loads::spawn`]) on a blocking thread: grants, component (compiled, or
//! precompiled from the cache; pulled from its registry for a `NAME.oci`
//! reference, or taken from the artifact cache when pinned by a digest it
//! holds), configuration checked against its schema. Several load at
//! once. [`Loads::next`] waits for the next load to finish.
//!
//! # Guarantees
//! - **Only the latest counts.** A plugin that changes again while it loads
//!   is loaded again; the older load's result is dropped, and so is the
//!   result of a plugin removed meanwhile ([`Loads::cancel`]). So the caller
//!   never swaps in a version older than one it already has, nor revives a
//!   removed plugin.
//! - **Bounded, and fair between tenants.** At most one load per core
//!   compiles at once (a directory of a thousand new components compiles a
//!   core's worth at a time, not a thousand at once), and each tenant (a
//!   `Plugin`'s namespace; the operator's plugins, a directory's and
//!   `ClusterPlugin`s, are one tenant, with a core's worth of turns or
//!   [`TENANT_LOADS`], whichever is more) runs at most [`TENANT_LOADS`]
//!   loads at once, its others queued behind them: a
//!   load waiting on a registry holds its tenant's turn, never a compile
//!   slot, so one tenant's stalled or slow pulls wait behind its own and
//!   delay no other tenant's. A load superseded while it waits does no
//!   work; one superseded or cancelled while it pulls stops pulling at once
//!   ([`Slot::wait`]), freeing its tenant's turn.
//! - **Refusals are results.** A plugin that fails to load comes back as
//!   [`Loaded::Refused`] with its reason; what the caller runs meanwhile is
//!   its business (the daemon keeps the running version).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::discovery::Discovered;
use crate::oci::{self, Artifacts, OciError};
use crate::plugin_dir::PluginFiles;
use crate::signature::{self, PublicKeys, SignatureError};
use kubewasm_runtime::declaration::DeclarationError;
use kubewasm_runtime::grants::{GrantsFileError, OperatorGrants};
use kubewasm_runtime::mapper::MapperError;
use kubewasm_runtime::{CallLimits, LoadError, LoadOptions, Plugin, Runtime};

/// Why a plugin was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// No grants file, and declarations are not trusted.
    #[error(
        "no grants file {grants} beside it (pass --trust-declarations to grant what it declares)"
    )]
    NoGrants {
        /// The grants file it needs.
        grants: PathBuf,
    },
    /// The grants file was refused.
    #[error(transparent)]
    Grants(#[from] GrantsFileError),
    /// The component could not be read.
    #[error("failed to read it: {0}")]
    Read(#[source] std::io::Error),
    /// Its OCI reference could not be fetched.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The configuration was refused.
    #[error("its configuration {origin}: {source}")]
    Config {
        /// Where it came from (the file, `spec.config`).
        origin: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The component was refused.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The other source runs a plugin under this name: a load does not
    /// displace it, whichever source it comes from.
    #[error("{holder} runs a plugin named `{name}`; this one does not displace it")]
    NameTaken {
        /// The name.
        name: String,
        /// Who runs it.
        holder: crate::lifecycle::owner::Owner,
    },
    /// A plugin resource's spec cannot be run as it is.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A tenant's account may not read what its plugin declares.
    #[error(transparent)]
    Rights(#[from] crate::rights::RightsError),
    /// Its artifact's signature was not accepted.
    #[error("signature refused: {0}")]
    Signature(#[from] SignatureError),
    /// The load was cancelled (the plugin changed again, or went) before it
    /// finished: its result is never used.
    #[error("cancelled: the plugin changed or went while it loaded")]
    Cancelled,
    /// A type it declares is not served (as declared) by the cluster now:
    /// it waits, and loads again when the cluster's types change.
    #[error("declared type refused: {source}; it loads once the cluster serves it")]
    Unserved {
        /// Why, naming the type.
        #[source]
        source: MapperError,
        /// The epoch of the types it was refused at
        /// ([`crate::discovery::Snapshot::epoch`]).
        epoch: u64,
    },
}

impl Refused {
    /// How the load is counted.
    pub fn result(&self) -> crate::lifecycle::owner::LoadResult {
        match self {
            Self::Unserved { .. } => crate::lifecycle::owner::LoadResult::Unserved,
            _ => crate::lifecycle::owner::LoadResult::Refused,
        }
    }

    /// Whether the same load may pass with time alone (a registry not
    /// reached, a pull secret not readable yet, an access review that
    /// failed): it is tried again with backoff.
    pub fn may_pass(&self) -> bool {
        matches!(
            self,
            Self::Oci(OciError::Registry { .. } | OciError::Deadline { .. })
                | Self::Spec(SpecError::PullSecret { .. })
                | Self::Rights(crate::rights::RightsError::Review { .. })
                | Self::Signature(SignatureError::Oci(
                    OciError::Registry { .. } | OciError::Deadline { .. }
                ))
        )
    }

    /// The epoch of the cluster's types at which a type this plugin
    /// declares was not served, if that is why it was refused: it loads
    /// again at any later one.
    pub fn unserved_at(&self) -> Option<u64> {
        match self {
            Self::Unserved { epoch, .. } => Some(*epoch),
            _ => None,
        }
    }
}

/// Why a plugin resource's spec cannot be run as it is.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The plugin name it would run as is not one.
    #[error(
        "it would run as `{0}`, which is no plugin name (a DNS label; a Plugin's `NAMESPACE.NAME`, 63 characters at most)"
    )]
    Name(String),
    /// A limit is not one.
    #[error("spec.limits.memory `{0}` is not a quantity of bytes (`64Mi`, `1Gi`, `500000`)")]
    Memory(String),
    /// A tenant named a Secret in another namespace.
    #[error(
        "{name}: a Plugin reads Secrets and ConfigMaps of its own namespace only, not of `{namespace}`"
    )]
    ForeignSecret {
        /// The Secret.
        name: String,
        /// The namespace it named.
        namespace: String,
    },
    /// A pull secret could not be read or is no docker config.
    #[error("pull secret {namespace}/{name}: {reason}")]
    PullSecret {
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A key `spec.verify` names could not be read or is none.
    #[error("verify key {origin}: {reason}")]
    VerifyKey {
        /// Where it is.
        origin: String,
        /// Why.
        reason: String,
    },
    /// The configuration is not JSON text (never: it came as JSON).
    #[error("spec.config: {0}")]
    Config(#[source] serde_json::Error),
}

/// A plugin loaded and ready to run.
#[derive(Debug)]
pub struct Prepared {
    /// The plugin.
    pub plugin: Plugin,
    /// Its configuration (JSON text), checked against its schema.
    pub config: String,
    /// The manifest digest of the OCI artifact it came from, if it did.
    pub artifact: Option<String>,
    /// Whether this is a running plugin's optimized code ([`Loads::tier_up`]),
    /// not a new version.
    pub tier_up: bool,
}

/// The end of one load of something from `O` (a plugin's files, a
/// `Plugin` resource).
#[derive(Debug)]
pub enum Loaded<O> {
    /// Loaded.
    Ready {
        /// What it was loaded from.
        origin: O,
        /// The plugin and its configuration.
        prepared: Prepared,
    },
    /// Refused.
    Refused {
        /// What it was loaded from.
        origin: O,
        /// Why.
        error: Refused,
    },
}

impl<O> Loaded<O> {
    /// What the load gives under the cluster's types as they are now: a
    /// plugin loaded before they changed may declare a type no longer
    /// served, and is refused as its load would be now.
    pub fn under(self, discovered: &Discovered) -> Self {
        match self {
            Self::Ready { origin, prepared } => {
                let types = discovered.now();
                match prepared.plugin.declaration().unserved(&types.mapper) {
                    Some(source) => Self::Refused {
                        origin,
                        error: Refused::Unserved {
                            source,
                            epoch: types.epoch,
                        },
                    },
                    None => Self::Ready { origin, prepared },
                }
            }
            refused @ Self::Refused { .. } => refused,
        }
    }
}

/// What plugins are loaded with.
#[derive(Clone)]
pub struct Sources {
    /// The runtime that compiles and runs them.
    pub runtime: Runtime,
    /// How the cluster serves each type, now.
    pub discovered: Discovered,
    /// Grant a plugin with no grants file what it declares.
    pub trust: bool,
    /// Where `NAME.oci` references are fetched from and cached.
    pub artifacts: Artifacts,
    /// Every artifact (a `NAME.oci`, a plugin resource's) must be signed by
    /// one of these keys (none: no signature is required host-wide).
    pub required_signatures: PublicKeys,
}

/// Where a component comes from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A file, read only if no plugin runs its component already
    /// ([`Runtime::load_file`](kubewasm_runtime::Runtime::load_file)).
    File(&'a Path),
    /// Bytes in memory (a pulled artifact).
    Bytes(&'a [u8]),
}

/// The artifact a `NAME.oci` file names (a reference on its first line),
/// fetched within the tokio runtime this blocking thread belongs to: its
/// bytes and digest.
fn pull(sources: &Sources, files: &PluginFiles, slot: &Slot) -> Result<(Vec<u8>, String), Refused> {
    // A reference is one short line: what is past the first KiB is not read.
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(&files.component).map_err(Refused::Read)?,
            1024,
        ),
        &mut text,
    )
    .map_err(Refused::Read)?;
    let reference = oci::parse_reference(text.lines().next().unwrap_or_default().trim())?;
    let pulled = slot.wait(sources.artifacts.fetch(&reference))??;
    if !sources.required_signatures.is_empty() {
        let access = sources
            .artifacts
            .access_for(&oci::Puller::Operator(oci::Credentials::default()));
        slot.wait(signature::verify(
            &reference,
            &pulled.digest,
            &sources.required_signatures,
            &access,
        ))??;
    }
    tracing::info!(plugin = %files.name, reference = %reference, digest = %pulled.digest,
        "plugin artifact fetched");
    Ok((pulled.bytes, pulled.digest))
}

/// What a component is loaded as.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The plugin's name.
    pub name: String,
    /// What the operator grants it.
    pub grants: OperatorGrants,
    /// Its limits, within the host's; `None`: the host's.
    pub limits: Option<CallLimits>,
    /// Its configuration (JSON text) and where it came from; `None`: `{}`.
    pub config: Option<(String, String)>,
}

/// Loads a component as `setup` says (compiled holding one of `slot`'s
/// compile slots): the plugin and its configuration, checked against its
/// schema.
///
/// # Errors
/// [`Refused`] says why.
pub fn prepare(
    sources: &Sources,
    source: Source<'_>,
    setup: Setup,
    slot: &Slot,
) -> Result<Prepared, Refused> {
    let types = sources.discovered.now();
    let mut options = LoadOptions::new(types.mapper)
        .grants(setup.grants)
        .name(&setup.name);
    if let Some(limits) = setup.limits {
        options = options.limits(limits);
    }
    let plugin = slot
        .compile(|| match source {
            Source::File(path) => sources.runtime.load_file(path, &options),
            Source::Bytes(bytes) => sources.runtime.load(bytes, &options),
        })?
        .map_err(|error| match error {
            // Not served at all (a CRD not applied yet): it waits. A type
            // served otherwise than declared (a lying plural) is the
            // component's fault, refused as such.
            LoadError::Declaration(DeclarationError::Mapping(
                source @ MapperError::Unknown { .. },
            )) => Refused::Unserved {
                source,
                epoch: types.epoch,
            },
            other => Refused::Load(other),
        })?;
    let config = match setup.config {
        Some((config, origin)) => {
            plugin
                .check_config(&config)
                .map_err(|source| Refused::Config {
                    origin,
                    source: Box::new(source),
                })?;
            config
        }
        None => "{}".to_owned(),
    };
    Ok(Prepared {
        plugin,
        config,
        artifact: None,
        tier_up: false,
    })
}

/// Loads one plugin from its files, under `slot`.
///
/// # Errors
/// [`Refused`] says why.
pub fn load(sources: &Sources, files: &PluginFiles, slot: &Slot) -> Result<Prepared, Refused> {
    // A dotted name is a tenant's (`NAMESPACE.NAME`): no file takes one.
    if !kubewasm_core::validation::is_dns_label(&files.name) {
        return Err(Refused::Load(LoadError::Declaration(
            kubewasm_runtime::declaration::DeclarationError::InvalidName(files.name.clone()),
        )));
    }
    let grants = if files.grants.exists() {
        OperatorGrants::from_file(&files.grants)?
    } else if sources.trust {
        OperatorGrants::unrestricted()
    } else {
        return Err(Refused::NoGrants {
            grants: files.grants.clone(),
        });
    };
    let pulled = files
        .is_reference()
        .then(|| pull(sources, files, slot))
        .transpose()?;
    let config = if files.config.exists() {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| Refused::Config {
            origin: files.config.display().to_string(),
            source,
        };
        let text = std::fs::read_to_string(&files.config).map_err(|e| failed(Box::new(e)))?;
        let config =
            kubewasm_runtime::replay::parse_config(&text).map_err(|e| failed(Box::new(e)))?;
        Some((config, files.config.display().to_string()))
    } else {
        None
    };
    let setup = Setup {
        name: files.name.clone(),
        grants,
        limits: None,
        config,
    };
    let source = match &pulled {
        Some((bytes, _)) => Source::Bytes(bytes),
        None => Source::File(&files.component),
    };
    let mut prepared = prepare(sources, source, setup, slot)?;
    prepared.artifact = pulled.map(|(_, digest)| digest);
    Ok(prepared)
}

/// How many loads of one tenant run at once (pulling or compiling); its
/// others wait behind them. The operator's plugins have as many as the
/// compile slots if that is more.
pub const TENANT_LOADS: usize = 2;

/// The tenant a plugin's loads are queued under: a tenant plugin's
/// namespace (`NAMESPACE.NAME`), or the operator's (empty) for the rest.
fn tenant_of(plugin: &str) -> &str {
    plugin
        .split_once('.')
        .map_or("", |(namespace, _)| namespace)
}

/// What one load runs under, on its blocking thread: the host's compile
/// slots, and its own cancellation.
pub struct Slot {
    compiling: Arc<tokio::sync::Semaphore>,
    cancelled: tokio::sync::watch::Receiver<bool>,
}

impl Slot {
    /// A slot of its own, never cancelled: one load run outside [`Loads`].
    pub fn alone() -> Self {
        Self {
            compiling: Arc::new(tokio::sync::Semaphore::new(1)),
            cancelled: tokio::sync::watch::channel(false).1,
        }
    }

    /// Waits for `future` (a pull, a review) within the tokio runtime this
    /// blocking thread belongs to, unless the load is cancelled meanwhile.
    ///
    /// # Errors
    /// [`Refused::Cancelled`] once the plugin changed again or went.
    pub fn wait<F: std::future::Future>(&self, future: F) -> Result<F::Output, Refused> {
        let mut cancelled = self.cancelled.clone();
        let told = async move {
            if cancelled.wait_for(|c| *c).await.is_err() {
                // No one left to tell it (a slot alone): never.
                std::future::pending::<()>().await;
            }
        };
        tokio::runtime::Handle::current().block_on(async move {
            tokio::select! {
                // Told first: a cancelled load does no more work, even when
                // what it waits for is ready too.
                biased;
                () = told => Err(Refused::Cancelled),
                output = future => Ok(output),
            }
        })
    }

    /// Runs `compile` holding one of the host's compile slots (one per core).
    ///
    /// # Errors
    /// [`Refused::Cancelled`] when cancelled while waiting for a slot.
    pub fn compile<T>(&self, compile: impl FnOnce() -> T) -> Result<T, Refused> {
        let _permit = self.wait(Arc::clone(&self.compiling).acquire_owned())?;
        Ok(compile())
    }
}

/// A finished load task: its number, what it loaded, what it gave.
type LoadDone<O> = (u64, O, Result<Prepared, Refused>);

/// The latest load of a plugin: its number, and what cancels it.
struct Latest {
    id: u64,
    cancel: tokio::sync::watch::Sender<bool>,
}

/// The latest load of each plugin (a later one makes earlier ones void).
#[derive(Default)]
struct Latests(std::sync::Mutex<HashMap<String, Latest>>);

impl Latests {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Latest>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether load `id` is still the latest of `name`.
    fn is_latest(&self, name: &str, id: u64) -> bool {
        self.lock().get(name).is_some_and(|l| l.id == id)
    }

    /// Makes `latest` the latest of `name`, cancelling the one before.
    fn replace(&self, name: &str, latest: Latest) {
        if let Some(before) = self.lock().insert(name.to_owned(), latest) {
            before.cancel.send_replace(true);
        }
    }

    /// Cancels the latest of `name`, leaving none.
    fn cancel(&self, name: &str) {
        if let Some(before) = self.lock().remove(name) {
            before.cancel.send_replace(true);
        }
    }
}

/// Stops a plugin's load in flight where it waits, from outside the loop
/// that owns the [`Loads`] (a watch that saw the plugin's resource change or
/// go while its key is processing): the load ends at once as
/// [`Refused::Cancelled`], handed back by [`Loads::next`] as any result, so
/// that its owner finishes with the key and looks at it again.
#[derive(Clone)]
pub struct Interrupter(Arc<Latests>);

impl Interrupter {
    /// Stops the latest load of `name`, if one is in flight.
    pub fn interrupt(&self, name: &str) {
        if let Some(latest) = self.0.lock().get(name) {
            latest.cancel.send_replace(true);
        }
    }
}

/// Loads in flight, each on a blocking thread, the latest of each plugin
/// counting, fair between tenants (see the module documentation). `O` says
/// where a load came from (a plugin's files, a `Plugin` resource), handed
/// back with it.
pub struct Loads<O> {
    latest: Arc<Latests>,
    /// One per load allowed to compile at once.
    compiling: Arc<tokio::sync::Semaphore>,
    /// How many: one per core.
    compiling_slots: usize,
    /// Each tenant's turns ([`TENANT_LOADS`]), while it has loads.
    tenants: HashMap<String, Arc<tokio::sync::Semaphore>>,
    next_load: u64,
    /// Loads in flight; `None` for one superseded before it ran.
    loads: JoinSet<Option<(String, LoadDone<O>)>>,
    /// The loads in flight of new code: tier-ups aside, which only make
    /// code that already runs faster.
    awaited: HashSet<tokio::task::Id>,
}

impl<O: Send + 'static> Default for Loads<O> {
    fn default() -> Self {
        let compiling_slots =
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Self {
            latest: Arc::default(),
            compiling: Arc::new(tokio::sync::Semaphore::new(compiling_slots)),
            compiling_slots,
            tenants: HashMap::new(),
            next_load: 0,
            loads: JoinSet::new(),
            awaited: HashSet::new(),
        }
    }
}

impl<O: Send + 'static> Loads<O> {
    /// Starts loading the plugin `name` with `load`, making any earlier
    /// load of it void (and stopping it where it waits).
    pub fn spawn(
        &mut self,
        name: &str,
        origin: O,
        load: impl FnOnce(&Slot) -> Result<Prepared, Refused> + Send + 'static,
    ) {
        let task = self.start(name, origin, load);
        self.awaited.insert(task);
    }

    /// Starts `load` as the latest load of `name`; its task's id.
    fn start(
        &mut self,
        name: &str,
        origin: O,
        load: impl FnOnce(&Slot) -> Result<Prepared, Refused> + Send + 'static,
    ) -> tokio::task::Id {
        self.next_load += 1;
        let id = self.next_load;
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        self.latest.replace(name, Latest { id, cancel });
        // Tenants with no load left give their entry up.
        self.tenants.retain(|_, turns| Arc::strong_count(turns) > 1);
        let tenant = tenant_of(name);
        let count = if tenant.is_empty() {
            TENANT_LOADS.max(self.compiling_slots)
        } else {
            TENANT_LOADS
        };
        let turns = Arc::clone(
            self.tenants
                .entry(tenant.to_owned())
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(count))),
        );
        let slot = Slot {
            compiling: Arc::clone(&self.compiling),
            cancelled,
        };
        let (name, latest) = (name.to_owned(), Arc::clone(&self.latest));
        let task = self.loads.spawn(async move {
            // Closed never: the semaphore lives as long as the task.
            let _turn = turns.acquire_owned().await.ok();
            if !latest.is_latest(&name, id) {
                return None;
            }
            match tokio::task::spawn_blocking(move || (id, origin, load(&slot))).await {
                Ok(done) => Some((name, done)),
                Err(error) => {
                    tracing::error!(%error, "a plugin load task failed");
                    None
                }
            }
        });
        task.id()
    }

    /// When `plugin` (just started as `name`) runs baseline code, starts
    /// compiling its optimized code: the load gives it back, with the same
    /// configuration, as a [`Prepared::tier_up`] to swap in. A newer load of
    /// the plugin makes it void, as any other.
    pub fn tier_up(
        &mut self,
        name: &str,
        origin: O,
        plugin: &Arc<Plugin>,
        config: &str,
        artifact: Option<String>,
    ) {
        if !plugin.is_baseline() {
            return;
        }
        let (plugin, config) = (Arc::clone(plugin), config.to_owned());
        self.start(name, origin, move |slot| {
            Ok(Prepared {
                plugin: slot.compile(|| plugin.optimized())??,
                config,
                artifact,
                tier_up: true,
            })
        });
    }

    /// What stops a load in flight from elsewhere.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(Arc::clone(&self.latest))
    }

    /// Makes every load of `name` in flight void (the plugin went), and
    /// stops it where it waits.
    pub fn cancel(&mut self, name: &str) {
        self.latest.cancel(name);
    }

    /// Loads of new code not finished yet (a plugin's first version, a
    /// change): what a host waits for before it says it is ready. A tier-up
    /// does not count: the plugin it speeds up already runs.
    pub fn pending(&self) -> usize {
        self.awaited.len()
    }

    /// The next load to finish that is still the latest of its plugin,
    /// with the plugin's name; `None` when none is in flight.
    pub async fn next(&mut self) -> Option<(String, Loaded<O>)> {
        loop {
            let (name, (id, origin, loaded)) = match self.loads.join_next_with_id().await? {
                Ok((task, Some(done))) => {
                    self.awaited.remove(&task);
                    done
                }
                Ok((task, None)) => {
                    self.awaited.remove(&task);
                    continue;
                }
                Err(error) => {
                    self.awaited.remove(&error.id());
                    tracing::error!(%error, "a plugin load task failed");
                    continue;
                }
            };
            if !self.latest.is_latest(&name, id) {
                tracing::debug!(plugin = %name, "a newer load superseded this one");
                continue;
            }
            self.latest.lock().remove(&name);
            let loaded = match loaded {
                Ok(prepared) => Loaded::Ready { origin, prepared },
                Err(error) => Loaded::Refused { origin, error },
            };
            return Some((name, loaded));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bounds each wait of the tests below: a load that never ends fails
    /// them rather than hanging.
    const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

    async fn next_of<O: Send + 'static>(loads: &mut Loads<O>) -> Option<(String, Loaded<O>)> {
        tokio::time::timeout(WAIT, loads.next())
            .await
            .expect("a load ends, or none is left, within 10 s")
    }

    fn refused(_: &Slot) -> Result<Prepared, Refused> {
        Err(Refused::NameTaken {
            name: "taken".to_owned(),
            holder: crate::lifecycle::owner::Owner::Directory,
        })
    }

    #[tokio::test]
    async fn only_the_latest_load_of_a_plugin_should_count() {
        let mut loads = Loads::<u32>::default();
        let (release, held) = std::sync::mpsc::channel::<()>();
        // a's first load runs while a second one starts; b is cancelled.
        loads.spawn("a", 1, move |slot| {
            let _ = held.recv();
            refused(slot)
        });
        loads.spawn("a", 2, refused);
        loads.spawn("b", 1, refused);
        loads.cancel("b");
        release.send(()).expect("the first load waits");
        let (name, loaded) = loads.next().await.expect("a");
        assert_eq!(name, "a");
        assert!(
            matches!(loaded, Loaded::Refused { origin: 2, .. }),
            "{loaded:?}"
        );
        assert!(loads.next().await.is_none(), "one result for a, none for b");
        assert_eq!(loads.pending(), 0);
    }

    #[tokio::test]
    async fn only_loads_of_new_code_should_be_pending() {
        let mut loads = Loads::<()>::default();
        let (release, held) = std::sync::mpsc::channel::<()>();
        // A tier-up of `a` (started as `tier_up` does) and a new `b`.
        loads.start("a", (), move |slot| {
            let _ = held.recv();
            refused(slot)
        });
        loads.spawn("b", (), refused);
        assert_eq!(loads.pending(), 1, "b only: a's code already runs");
        let (first, _) = loads.next().await.expect("b");
        assert_eq!(first, "b");
        assert_eq!(loads.pending(), 0);
        release.send(()).expect("a waits");
        let (second, _) = loads.next().await.expect("a");
        assert_eq!(second, "a");
    }

    /// A load that waits on a registry which never answers, until it is
    /// cancelled; it says when it starts.
    fn stalled(
        started: std::sync::mpsc::Sender<&'static str>,
        name: &'static str,
    ) -> impl FnOnce(&Slot) -> Result<Prepared, Refused> + Send + 'static {
        move |slot| {
            let _ = started.send(name);
            slot.wait(std::future::pending::<()>())?;
            refused(slot)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tenants_stalled_loads_should_wait_behind_its_own_and_delay_no_other() {
        let mut loads = Loads::<()>::default();
        let (started, starts) = std::sync::mpsc::channel();
        for name in ["team-a.one", "team-a.two", "team-a.three"] {
            loads.spawn(name, (), stalled(started.clone(), name));
        }
        // Two of team-a's take its turns (whichever task ran first); the
        // third waits behind them.
        let first = [
            starts.recv_timeout(WAIT).expect("a first starts"),
            starts.recv_timeout(WAIT).expect("a second starts"),
        ];
        let team_a = ["team-a.one", "team-a.two", "team-a.three"];
        let third = team_a
            .iter()
            .find(|n| !first.contains(n))
            .expect("one waits");
        // Another tenant's load, and the operator's, run meanwhile.
        loads.spawn("team-b.mover", (), refused);
        loads.spawn("replicator", (), refused);
        let mut done = Vec::new();
        for _ in 0..2 {
            let (name, loaded) = next_of(&mut loads).await.expect("a load ends");
            assert!(matches!(
                loaded,
                Loaded::Refused {
                    error: Refused::NameTaken { .. },
                    ..
                }
            ));
            done.push(name);
        }
        done.sort_unstable();
        assert_eq!(done, ["replicator", "team-b.mover"]);
        assert!(
            starts.try_recv().is_err(),
            "team-a's third still waits its turn"
        );
        // Deleting a stalled plugin stops its pull at once: the third starts.
        loads.cancel(first[0]);
        assert_eq!(starts.recv_timeout(WAIT).expect("the third starts"), *third);
        for name in team_a {
            loads.cancel(name);
        }
        assert!(
            next_of(&mut loads).await.is_none(),
            "a cancelled load gives nothing"
        );
        assert_eq!(loads.pending(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_load_superseded_while_it_pulls_should_stop_pulling() {
        let mut loads = Loads::<u32>::default();
        let (started, starts) = std::sync::mpsc::channel();
        loads.spawn("team-a.one", 1, stalled(started, "first"));
        assert_eq!(
            starts.recv_timeout(WAIT).expect("the first starts"),
            "first"
        );
        loads.spawn("team-a.one", 2, refused);
        let (name, loaded) = next_of(&mut loads).await.expect("the second ends");
        assert_eq!(name, "team-a.one");
        assert!(
            matches!(loaded, Loaded::Refused { origin: 2, .. }),
            "{loaded:?}"
        );
        assert!(
            next_of(&mut loads).await.is_none(),
            "the first stopped, and gave nothing"
        );
    }

    #[test]
    fn a_tenant_should_be_its_plugins_namespace() {
        assert_eq!(tenant_of("team-a.mover"), "team-a");
        assert_eq!(tenant_of("replicator"), "");
    }
}
