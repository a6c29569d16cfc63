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
mod outcome;

use std::path::Path;

use crate::discovery::Discovered;
use crate::oci::{self, Artifacts};
use crate::plugin_dir::PluginFiles;
use crate::signature::{self, PublicKeys};
use kubewasm_runtime::declaration::DeclarationError;
use kubewasm_runtime::grants::OperatorGrants;
use kubewasm_runtime::mapper::MapperError;
use kubewasm_runtime::{CallLimits, LoadError, LoadOptions, Runtime};
pub use loads::{Interrupter, Loads, Slot, TENANT_LOADS};
pub use outcome::{Loaded, Prepared, Refused, SpecError};

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
            DeclarationError::InvalidName(files.name.clone()),
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
