//! `kubewasm push`: a plugin component published to an OCI registry (CNCF
//! Wasm layout), signed with `--sign`; prints the manifest's digest.

use std::path::PathBuf;

use kubewasm_engine::oci;
use kubewasm_engine::signature::{self, PrivateKey};
use kubewasm_runtime::InstanceReuse;

use super::error::CliError;
use super::flags::{RegistryFlags, RuntimeFlags};
use super::process::{block_on_value, read_bytes};

/// `kubewasm push`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The plugin component.
    plugin: PathBuf,
    /// Where: `[oci://]REGISTRY/REPOSITORY:TAG`.
    reference: String,
    /// Sign the pushed manifest digest with this private key (PEM: PKCS#8
    /// or SEC1, ECDSA P-256), in cosign's layout (`sha256-<digest>.sig`).
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryFlags,
    #[command(flatten)]
    runtime: RuntimeFlags,
}

/// Checks the component is a plugin and pushes it (and its signature).
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
    // The key is read before anything is pushed: a bad key pushes nothing.
    let key = match &args.sign {
        Some(path) => {
            let text = String::from_utf8_lossy(&read_bytes(path)?).into_owned();
            Some(PrivateKey::from_pem(&path.display().to_string(), &text)?)
        }
        None => None,
    };
    let digest = block_on_value(oci::push(&component, &reference, &access))??;
    if let Some(key) = key {
        let tag = block_on_value(signature::sign(&reference, &digest, &key, &access))??;
        eprintln!("signed: {tag}");
    }
    println!("{digest}");
    Ok(())
}
