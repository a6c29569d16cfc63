//! Why a command failed.

use std::path::PathBuf;

use kubewasm_engine::oci;
use kubewasm_runtime::grants::GrantsFileError;
use kubewasm_runtime::mapper::MapperError;
use kubewasm_runtime::private_dir::PrivateDirError;
use kubewasm_runtime::replay::ReplayError;
use kubewasm_runtime::resource::InvalidKey;
use kubewasm_runtime::{LoadError, RuntimeError};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The runtime did not start.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The host's private directory of `--cache-dir` cannot be used.
    #[error("--cache-dir: {0}")]
    CacheDir(#[from] PrivateDirError),
    /// The plugin was refused.
    #[error("failed to load {path}: {source}")]
    Load {
        /// The plugin file.
        path: PathBuf,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// An input file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The key did not parse.
    #[error(transparent)]
    Key(#[from] InvalidKey),
    /// A `--registry-ca` file holds no usable certificate.
    #[error("--registry-ca {}: {reason}", .path.display())]
    RegistryCa {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        reason: String,
    },
    /// `--map`'s type is not `GROUP/VERSION/KIND` of a type the fixtures
    /// serve.
    #[error(
        "unknown type `{0}`: expected GROUP/VERSION/KIND (v1/KIND for the core group) of a built-in type or of a CRD among the objects"
    )]
    UnknownType(String),
    /// Neither `--key` nor `--map` was given.
    #[error("replay needs --key NAMESPACE/NAME (or --map TYPE FILE, or --converged)")]
    NoKey,
    /// `replay --converged` found primaries whose step would change something.
    #[error("{0} primaries not converged (printed above)")]
    NotConverged(usize),
    /// A recorded call replayed otherwise than recorded.
    #[error(
        "the replay differs from the recording in {fixture} (the report printed is the replay's){digest}"
    )]
    Differs {
        /// The fixture.
        fixture: PathBuf,
        /// A note when the component is not the recorded one.
        digest: String,
    },
    /// A recorded call failed, again.
    #[error("the recorded call failed, as it did when recorded: {0}")]
    FailedAgain(String),
    /// `--map`'s file holds no object.
    #[error("{} holds no object", .0.display())]
    NoObject(PathBuf),
    /// The replay failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The grants file was refused.
    #[error(transparent)]
    Grants(#[from] GrantsFileError),
    /// The fixtures' CRDs were refused.
    #[error(transparent)]
    Mapper(#[from] MapperError),
    /// The output could not be encoded.
    #[error("failed to encode the output: {0}")]
    Encode(#[source] BoxError),
    /// The async runtime did not start.
    #[error("failed to start the async runtime: {0}")]
    AsyncRuntime(#[source] std::io::Error),
    /// The embedded API server failed.
    #[error("apiserver: failed to {during}: {source}")]
    Apiserver {
        /// What it was doing.
        during: &'static str,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The host failed.
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    /// A CustomResourceDefinition could not be installed (`kubewasm dev`).
    #[error("failed to install {path}: {source}")]
    Crd {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// A push or a pull failed.
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    /// Signing or verifying failed.
    #[error(transparent)]
    Signature(#[from] kubewasm_engine::signature::SignatureError),
    /// No client could be configured for the cluster.
    #[error("failed to configure the cluster client: {0}")]
    Client(#[source] BoxError),
    /// `kubewasm types` failed.
    #[error(transparent)]
    Typegen(#[from] crate::typegen::TypegenError),
    /// A core module could not be made a component.
    #[error(transparent)]
    Componentize(#[from] crate::componentize::ComponentizeError),
    /// `kubewasm new` failed.
    #[error(transparent)]
    Scaffold(#[from] crate::scaffold::ScaffoldError),
    /// A file could not be written.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Any error, kept whole as a source.
pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;
