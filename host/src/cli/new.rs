//! `kubewasm new`: a plugin project of its own (Rust, Python, JavaScript or
//! Go) that builds, tests and replays.

use std::path::{Path, PathBuf};

use super::error::CliError;
use crate::scaffold::{Language, Project};

/// `kubewasm new`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The plugin's name (a DNS label); also the directory's, unless
    /// --dir says otherwise.
    name: String,
    /// The language.
    #[arg(long, value_enum)]
    lang: Language,
    /// The primary type: GROUP/VERSION/KIND, or VERSION/KIND for the
    /// core group. A type kubewasm does not know is a custom one: the
    /// project gets its CRD.
    #[arg(long, default_value = "v1/ConfigMap")]
    primary: String,
    /// A custom primary is cluster-scoped (its CRD's scope `Cluster`, its
    /// keys without a namespace).
    #[arg(long)]
    cluster_scoped: bool,
    /// Where to create it [default: ./NAME].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The kubewasm checkout the SDK comes from (the Rust crate, and the
    /// packages `make sdk` builds) [default: the one this binary was
    /// built from].
    #[arg(long)]
    sdk: Option<PathBuf>,
}

/// Creates the project and says what to run next.
///
/// # Errors
/// [`CliError::Scaffold`] when the project cannot be created.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let project = Project {
        name: args.name,
        language: args.lang,
        primary: args.primary,
        cluster_scoped: args.cluster_scoped,
        sdk: args.sdk.unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_owned)
        }),
        kubewasm: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("kubewasm")),
    };
    let files = project.create(&dir)?;
    println!("created {} ({} files):", dir.display(), files.len());
    for file in files {
        println!("  {file}");
    }
    println!("next: cd {} && make setup test build replay", dir.display());
    Ok(())
}
