//! `kubewasm inspect`: a plugin's declaration, as JSON.

use std::path::PathBuf;

use kubewasm_runtime::InstanceReuse;

use super::error::CliError;
use super::flags::RuntimeFlags;
use super::process::read_bytes;

/// `kubewasm inspect`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The plugin component.
    plugin: PathBuf,
    #[command(flatten)]
    runtime: RuntimeFlags,
}

/// Prints the declaration.
///
/// # Errors
/// [`CliError::Load`] for a component that is no plugin.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let runtime = args.runtime.runtime(InstanceReuse::Fresh, None)?;
    let declaration = runtime
        .inspect(&read_bytes(&args.plugin)?)
        .map_err(|source| CliError::Load {
            path: args.plugin,
            source,
        })?;
    let json =
        serde_json::to_string_pretty(&declaration).map_err(|e| CliError::Encode(Box::new(e)))?;
    println!("{json}");
    Ok(())
}
