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

mod loads;

use std::path::{Path, PathBuf};

use crate::discovery::Discovered;
use crate::oci::{self, Artifacts, OciError};
use crate::plugin_dir::PluginFiles;
use crate::signature::{self, PublicKeys, SignatureError};
use kubewasm_runtime::declaration::DeclarationError;
use kubewasm_runtime::grants::{GrantsFileError, OperatorGrants};
use kubewasm_runtime::mapper::MapperError;
use kubewasm_runtime::{CallLimits, LoadError, LoadOptions, Plugin, Runtime};
pub use loads::{Interrupter, Loads, Slot, TENANT_LOADS};

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
