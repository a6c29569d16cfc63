//! A component's code: checked (a component, of the contract, importing
//! only what the host provides), compiled (or loaded precompiled, or first
//! compiled by the baseline compiler and tiered up later), linked, and
//! shared by every plugin loaded from the same bytes.

use std::sync::Arc;
use std::time::Duration;

use kubewasm_core::resource::ResourceType;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::bindings::ControllerPre;
use crate::contract::Contract;
use crate::declaration::Declaration;
use crate::error::LoadError;

/// A component compiled and linked: its code, shared by every plugin
/// loaded from the same bytes (each keeps its own instances).
pub(crate) struct Code {
    pub(crate) pre: ControllerPre,
    /// The contract version the component targets.
    pub(crate) contract: Contract,
    pub(crate) digest: String,
    /// The component's bytes while this is the baseline compiler's code,
    /// for [`crate::Plugin::optimized`] to compile.
    pub(crate) baseline: Option<Arc<[u8]>>,
}

/// A component's declaration and the interfaces it imports and exports.
#[derive(Clone, Debug)]
pub struct Interfaces {
    /// Its validated declaration.
    pub declaration: Declaration,
    /// Imported interfaces, by name (`wasi:io/streams@0.2.6`, ...).
    pub imports: Vec<String>,
    /// Exported ones.
    pub exports: Vec<String>,
}

/// How long loading took, for the log.
pub(crate) struct LoadTiming {
    pub(crate) cached: bool,
    pub(crate) compile_time: Duration,
    pub(crate) instantiate_time: Duration,
}

impl LoadTiming {
    /// A load that shared the code of a component loaded already.
    pub(crate) fn shared() -> Self {
        Self {
            cached: true,
            compile_time: Duration::ZERO,
            instantiate_time: Duration::ZERO,
        }
    }
}

/// Declaration used only while `declare` runs (it grants nothing).
pub(crate) fn placeholder_declaration() -> Declaration {
    Declaration {
        name: String::new(),
        version: String::new(),
        primary: ResourceType {
            group: String::new(),
            version: String::new(),
            kind: String::new(),
            plural: String::new(),
            namespaced: false,
        },
        primary_verbs: Default::default(),
        primary_selector: String::new(),
        secondaries: Vec::new(),
        managed_finalizer: false,
        resync_seconds: None,
        max_concurrency: None,
        config_schema: None,
        schedule: None,
    }
}

/// Interfaces a plugin may import: the contract's own, and the WASI ones
/// toolchains link by default (all given no capability). Anything else,
/// `wasi:http` for one, is refused at load.
const PROVIDED_IMPORTS: [&str; 7] = [
    "kubewasm:controller/",
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// Refuses what is not a component before wasmtime sees it, with a message
/// that says what it is instead.
pub(crate) fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(LoadError::CoreModule),
        Some([0, b'a', b's', b'm', ..]) => Ok(()),
        _ => Err(LoadError::NotWasm),
    }
}

/// Checks the component's imports and exports against the worlds; returns
/// the contract version it targets.
pub(crate) fn check_world(engine: &Engine, component: &Component) -> Result<Contract, LoadError> {
    let ty = component.component_type();
    if let Some((import, _)) = ty
        .imports(engine)
        .find(|(name, _)| !PROVIDED_IMPORTS.iter().any(|p| name.starts_with(p)))
    {
        return Err(LoadError::UnsupportedImport {
            import: import.to_owned(),
        });
    }
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    Contract::of_exports(&exports).ok_or(LoadError::WrongWorld { exports })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_header_should_name_what_the_bytes_are() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0rest"),
            Err(LoadError::CoreModule)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0rest").is_ok());
    }
}
