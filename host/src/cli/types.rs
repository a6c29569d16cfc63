//! `kubewasm types`: resource-type constants for Python, JavaScript or Go
//! plugins.

use std::path::PathBuf;

use kubewasm_runtime::replay;

use super::error::CliError;
use super::process::read_text;
use crate::typegen::{self, Language};

/// `kubewasm types`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The language.
    #[arg(long, value_enum)]
    lang: Language,
    /// Files of CustomResourceDefinitions: their types instead of the
    /// built-in ones; repeatable.
    #[arg(long)]
    crd: Vec<PathBuf>,
}

/// Prints the constants of every built-in type, or of the CRDs' types.
///
/// # Errors
/// [`CliError::Read`], [`CliError::Replay`] or [`CliError::Typegen`] for a
/// CRD file that cannot be read, parsed or served.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    if args.crd.is_empty() {
        print!("{}", typegen::builtin(args.lang));
        return Ok(());
    }
    let mut objects = Vec::new();
    for path in args.crd {
        objects.extend(replay::parse_objects(&read_text(path)?)?);
    }
    print!("{}", typegen::from_crds(args.lang, &objects)?);
    Ok(())
}
