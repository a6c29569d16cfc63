//! `kubewasm pull`: a plugin component fetched from an OCI registry by tag
//! or digest, verified and written to a file; prints the manifest's digest.

use std::path::PathBuf;

use kubewasm_engine::oci;
use kubewasm_runtime::InstanceReuse;

use super::error::CliError;
use super::flags::{RegistryFlags, RuntimeFlags};
use super::process::block_on_value;

/// `kubewasm pull`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// What: `[oci://]REGISTRY/REPOSITORY(:TAG|@sha256:DIGEST)`.
    reference: String,
    /// The file to write.
    #[arg(short = 'o', long)]
    output: PathBuf,
    #[command(flatten)]
    registry: RegistryFlags,
    #[command(flatten)]
    runtime: RuntimeFlags,
}

/// Pulls, verifies and writes the component.
///
/// # Errors
/// [`CliError::Oci`] when the pull fails, [`CliError::Load`] when what it
/// got is no plugin, [`CliError::Write`] when the file cannot be written.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let runtime = args.runtime.runtime(InstanceReuse::Fresh, None)?;
    let reference = oci::parse_reference(&args.reference)?;
    let access = args.registry.access()?;
    let pulled = block_on_value(oci::pull(&reference, &access))??;
    // Only a plugin is written: a component of the contract's world.
    runtime
        .inspect(&pulled.bytes)
        .map_err(|source| CliError::Load {
            path: PathBuf::from(reference.whole()),
            source,
        })?;
    oci::write_atomically(&args.output, &pulled.bytes).map_err(|source| CliError::Write {
        path: args.output.clone(),
        source,
    })?;
    println!("{}", pulled.digest);
    Ok(())
}
