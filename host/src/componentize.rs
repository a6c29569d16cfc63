//! `kubewasm componentize`: a core WebAssembly module built for WASI
//! preview 1 as a library (Go's `GOOS=wasip1 -buildmode=c-shared`), made a
//! plugin component of the current contract.
//!
//! Go records no world in the module it builds: the contract's world is
//! embedded in it (`component-type` custom section), then the module is
//! wrapped as a component whose WASI preview 1 imports are met by
//! wasmtime's reactor adapter of the wasmtime version the host runs (crate
//! `wasi-preview1-component-adapter-provider`), so a Go plugin needs Go and
//! this binary only.

use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

/// The contract, as the guests build against it.
const CONTRACT: &str = include_str!("../../wit/controller.wit");

/// Why a module could not be made a component.
#[derive(Debug, thiserror::Error)]
pub enum ComponentizeError {
    /// The contract's WIT did not resolve (a build of kubewasm's own mistake).
    #[error("the contract does not resolve: {0}")]
    Contract(String),
    /// The module is no core module the world can be embedded in.
    #[error("cannot embed the contract's world in the module: {0}")]
    Embed(String),
    /// The module does not make a component of the contract (an export
    /// missing, an import the adapter does not meet).
    #[error("the module is no plugin component: {0}")]
    Encode(String),
}

/// The whole chain of a wit-component error, as its text.
fn chain(error: &(impl std::fmt::Display + ?Sized)) -> String {
    format!("{error:#}")
}

/// `module` (a core module) as a component of the world `controller`.
///
/// # Errors
/// [`ComponentizeError`], saying which step refused it.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, ComponentizeError> {
    let mut resolve = Resolve::default();
    let package = resolve
        .push_str("controller.wit", CONTRACT)
        .map_err(|e| ComponentizeError::Contract(chain(&e)))?;
    let world = resolve
        .select_world(&[package], Some("controller"))
        .map_err(|e| ComponentizeError::Contract(chain(&e)))?;
    let mut module = module.to_vec();
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        StringEncoding::UTF8,
        false,
    )
    .map_err(|e| ComponentizeError::Embed(chain(&e)))?;
    ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .map_err(|e| ComponentizeError::Encode(chain(&e)))?
        .adapter(
            "wasi_snapshot_preview1",
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .map_err(|e| ComponentizeError::Encode(chain(&e)))?
        .encode()
        .map_err(|e| ComponentizeError::Encode(chain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_that_is_no_plugin_should_be_refused_with_the_step() {
        assert!(matches!(
            componentize(b"not wasm"),
            Err(ComponentizeError::Embed(_) | ComponentizeError::Encode(_))
        ));
        // A valid module exporting nothing of the contract.
        let empty = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
        assert!(matches!(
            componentize(&empty),
            Err(ComponentizeError::Encode(_))
        ));
    }
}
