//! What one load ends in: a plugin [`Prepared`] to run, or the reason it
//! was [`Refused`], each tied to what it was loaded from ([`Loaded`]).

use std::path::PathBuf;

use crate::discovery::Discovered;
use crate::oci::OciError;
use crate::signature::SignatureError;
use kubewasm_runtime::grants::GrantsFileError;
use kubewasm_runtime::mapper::MapperError;
use kubewasm_runtime::{LoadError, Plugin};

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
