//! `kubewasm push`: a plugin component published to an OCI registry (CNCF
//! Wasm layout); prints the manifest's digest.

use std::path::PathBuf;

use kubewasm_engine::oci;
use kubewasm_runtime::InstanceReuse;

use super::flags::{RegistryFlags, RuntimeFlags};
use super::{CliError, block_on_value, read_bytes};

/// `kubewasm push`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The plugin component.
    plugin: PathBuf,
    /// Where: `[oci://]REGISTRY/REPOSITORY:TAG`.
    reference: String,
    #[command(flatten)]
    registry: RegistryFlags,
    #[command(flatten)]
    runtime: RuntimeFlags,
}

/// Checks the component is a plugin and pushes it.
///
/// # Errors
/// [`CliError::Load`] for a component that is no plugin, [`CliError::Oci`]
/// when the registry refuses it.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let runtime = args.runtime.runtime(InstanceReuse::Fresh, None)?;
    let bytes = read_bytes(&args.plugin)?;
    let interfaces = runtime
        .interfaces(&bytes)
        .map_err(|source| CliError::Load {
            path: args.plugin,
            source,
        })?;
    let reference = oci::parse_reference(&args.reference)?;
    let access = args.registry.access()?;
    let component = oci::Component {
        bytes: &bytes,
        interfaces: &interfaces,
    };
    let digest = block_on_value(oci::push(&component, &reference, &access))??;
    println!("{digest}");
    Ok(())
}
