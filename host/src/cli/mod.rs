//! The `kubewasm` command line: one module per command, each with its own
//! flags ([`flags`] holds those several commands take), and the helpers they
//! share (an async runtime, a cluster client, the shutdown signal).
//!
//! `apiserver` and `dev` run the embedded API server: they exist when the
//! binary is built with the `apiserver` feature (the default).

#[cfg(feature = "apiserver")]
mod apiserver;
mod componentize;
mod crds;
#[cfg(feature = "apiserver")]
mod dev;
mod error;
mod flags;
mod inspect;
mod new;
mod process;
mod pull;
mod push;
mod replay;
mod run;
mod telemetry;
mod types;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use flags::LogFormat;
use telemetry::Telemetry;

#[cfg(feature = "apiserver")]
pub use dev::{install_crds, install_plugin_crds};
pub use error::CliError;

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
    /// Create a plugin project of its own (Rust, Python, JavaScript or Go) that
    /// builds, tests and replays: `make setup test build replay`.
    New(new::Args),
    /// Print resource-type constants for Python, JavaScript or Go plugins:
    /// every built-in type (what the SDKs ship as `kubewasm_guest.types`,
    /// `@kubewasm/guest/types` and the Go SDK's table), or the types of CRDs.
    Types(types::Args),
    /// Make a Go plugin's core module (`GOOS=wasip1 go build
    /// -buildmode=c-shared`) a plugin component of the current contract.
    Componentize(componentize::Args),
    /// Print a plugin's declaration as JSON.
    Inspect(inspect::Args),
    /// Run one reconcile against objects from a file and print the requests
    /// the host would send.
    Replay(replay::Args),
}

/// Parses the command line, runs it, and reports errors on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let (json, otlp) = match &cli.command {
        Command::Run(args) => (
            args.host.log_format == LogFormat::Json,
            args.host.otlp_endpoint.clone(),
        ),
        #[cfg(feature = "apiserver")]
        Command::Dev(args) => (
            args.host.log_format == LogFormat::Json,
            args.host.otlp_endpoint.clone(),
        ),
        _ => (false, None),
    };
    let telemetry = match Telemetry::start(json, otlp.as_deref()) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let ran = run(cli);
    telemetry.shutdown();
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
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
        Command::Componentize(args) => componentize::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Replay(args) => replay::run(args),
    }
}
