//! The `kubewasm` command line: one module per command, each with its own
//! flags ([`flags`] holds those several commands take), and the helpers they
//! share (an async runtime, a cluster client, the shutdown signal).
//!
//! `apiserver` and `dev` run the embedded API server: they exist when the
//! binary is built with the `apiserver` feature (the default).

#[cfg(feature = "apiserver")]
mod apiserver;
mod crds;
#[cfg(feature = "apiserver")]
mod dev;
mod flags;
mod inspect;
mod new;
mod pull;
mod push;
mod replay;
mod run;
mod types;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kubewasm_engine::oci;
use kubewasm_runtime::grants::GrantsFileError;
use kubewasm_runtime::mapper::MapperError;
use kubewasm_runtime::replay::ReplayError;
use kubewasm_runtime::resource::InvalidKey;
use kubewasm_runtime::{LoadError, RuntimeError};

use flags::LogFormat;

/// kubewasm: Kubernetes controllers whose reconcile logic runs in sandboxed
/// WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "kubewasm", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded Kubernetes API server until SIGTERM or Ctrl-C.
    #[cfg(feature = "apiserver")]
    Apiserver(apiserver::Args),
    /// Run every plugin in a directory as a controller against a cluster,
    /// until SIGTERM or Ctrl-C.
    Run(run::Args),
    /// The embedded API server with its simulated cluster (the built-in
    /// workload controllers and a kubelet on simulated Nodes: README lists
    /// what is simulated) and the host in one process, with the CRDs found in
    /// the plugin directory installed; serves until Ctrl-C.
    #[cfg(feature = "apiserver")]
    Dev(dev::Args),
    /// Publish a plugin component to an OCI registry (CNCF Wasm layout);
    /// prints the manifest's digest.
    Push(push::Args),
    /// Fetch a plugin component from an OCI registry by tag or digest,
    /// verify it and write it to a file; prints the manifest's digest.
    Pull(pull::Args),
    /// Check that an artifact's manifest digest is signed (cosign's layout)
    /// by one of the public keys given; prints the digest verified.
    Verify(verify::Args),
    /// Print the CustomResourceDefinitions of `Plugin` and `ClusterPlugin`
    /// (`deploy/crds.yaml`).
    Crds,
    /// Create a plugin project of its own (Rust, Python or JavaScript) that
    /// builds, tests and replays: `make setup test build replay`.
    New(new::Args),
    /// Print resource-type constants for Python or JavaScript plugins: every
    /// built-in type (what the SDKs ship as `kubewasm_guest.types` and
    /// `@kubewasm/guest/types`), or the types of CRDs.
    Types(types::Args),
    /// Print a plugin's declaration as JSON.
    Inspect(inspect::Args),
    /// Run one reconcile against objects from a file and print the requests
    /// the host would send.
    Replay(replay::Args),
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The runtime did not start.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
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
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Parses the command line, runs it, and reports errors on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = match &cli.command {
        Command::Run(args) => args.host.log_format == LogFormat::Json,
        #[cfg(feature = "apiserver")]
        Command::Dev(args) => args.host.log_format == LogFormat::Json,
        _ => false,
    };
    init_tracing(json);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr, filtered by `KUBEWASM_LOG` (by default the host's own
/// records from `info`, and plugins' logs).
fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("KUBEWASM_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,kubewasm=info,kubewasm_engine=info,kubewasm_runtime=info,kubewasm::plugin=info",
        )
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

/// Runs a parsed command line.
///
/// # Errors
/// [`CliError`] says what failed.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        #[cfg(feature = "apiserver")]
        Command::Apiserver(args) => apiserver::run(args),
        Command::Run(args) => run::run(args),
        #[cfg(feature = "apiserver")]
        Command::Dev(args) => dev::run(args),
        Command::Push(args) => push::run(args),
        Command::Pull(args) => pull::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Crds => {
            crds::run();
            Ok(())
        }
        Command::New(args) => new::run(args),
        Command::Types(args) => types::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Replay(args) => replay::run(args),
    }
}

/// A text file's contents.
fn read_text(path: PathBuf) -> Result<String, CliError> {
    std::fs::read_to_string(&path).map_err(|source| CliError::Read { path, source })
}

/// A file's bytes.
fn read_bytes(path: &PathBuf) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|source| CliError::Read {
        path: path.clone(),
        source,
    })
}

/// Runs `future` on a new multi-threaded tokio runtime.
fn block_on(future: impl Future<Output = Result<(), CliError>>) -> Result<(), CliError> {
    block_on_value(future)?
}

/// Runs `future` on a new multi-threaded tokio runtime; its output.
fn block_on_value<T>(future: impl Future<Output = T>) -> Result<T, CliError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::AsyncRuntime)?
        .block_on(future))
}

/// A client from `kubeconfig`, or the default configuration.
async fn client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, CliError> {
    let failed = |e: BoxError| CliError::Client(e);
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| failed(e.into()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| failed(e.into()))?
        }
        None => kube::Config::infer().await.map_err(|e| failed(e.into()))?,
    };
    kube::Client::try_from(config).map_err(|e| failed(e.into()))
}

/// Resolves on SIGTERM or Ctrl-C.
async fn wait_for_shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
