//! `kubewasm verify`: whether an artifact's manifest digest is signed
//! (cosign's layout) by one of the keys given; prints the digest verified.

use std::path::PathBuf;

use kubewasm_engine::oci;
use kubewasm_engine::signature;

use super::error::CliError;
use super::flags::{RegistryFlags, read_keys};
use super::process::block_on_value;

/// `kubewasm verify`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// What: `[oci://]REGISTRY/REPOSITORY(:TAG|@sha256:DIGEST)`; a tag is
    /// resolved to its digest, which is what is checked.
    reference: String,
    /// A public key (PEM, as `cosign.pub`), repeated for several: one must
    /// have signed it.
    #[arg(long = "key", value_name = "PUB", required = true)]
    keys: Vec<PathBuf>,
    #[command(flatten)]
    registry: RegistryFlags,
}

/// Resolves the reference and checks its signature.
///
/// # Errors
/// [`CliError::Read`] for a key file, [`CliError::Oci`] when the registry
/// fails, [`CliError::Signature`] when no signature verifies.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let keys = read_keys(&args.keys)?;
    let reference = oci::parse_reference(&args.reference)?;
    let access = args.registry.access()?;
    let resolved = block_on_value(oci::resolve(&reference, &access))??;
    block_on_value(signature::verify(
        &reference,
        &resolved.digest,
        &keys,
        &access,
    ))??;
    println!("{}", resolved.digest);
    Ok(())
}
