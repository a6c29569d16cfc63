//! `kubewasm componentize`: a Go plugin's core module made a component.

use std::path::PathBuf;

use super::error::CliError;
use super::process::read_bytes;
use crate::componentize::componentize;

/// `kubewasm componentize`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The core module (`GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`).
    module: PathBuf,
    /// Where the component goes.
    #[arg(short, long)]
    output: PathBuf,
}

/// Writes the component of `args.module` to `args.output`.
///
/// # Errors
/// [`CliError::Read`], [`CliError::Componentize`] or [`CliError::Write`].
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let component = componentize(&read_bytes(&args.module)?)?;
    std::fs::write(&args.output, &component).map_err(|source| CliError::Write {
        path: args.output.clone(),
        source,
    })?;
    eprintln!(
        "wrote {} ({} bytes)",
        args.output.display(),
        component.len()
    );
    Ok(())
}
