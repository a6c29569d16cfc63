//! The versions of the `kubewasm:controller` contract the host speaks, and
//! the checks that a component is one of them: its header, its imports (the
//! contract's and capability-less WASI only) and its plugin export.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::LoadError;

/// A version of the `kubewasm:controller` contract the host speaks. A
/// component targets exactly one, read from its exports; the host links
/// them all, so a plugin built against an older version keeps loading and
/// behaving as it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Contract {
    /// `kubewasm:controller@0.1.0` (`wit/0.1.0/`), frozen.
    V0_1,
    /// `kubewasm:controller@0.2.0` (`wit/0.2.0/`), frozen: primary
    /// selectors, cache reads and failures in `map-keys`, unforced applies,
    /// delete preconditions.
    V0_2,
    /// `kubewasm:controller@0.3.0` (`wit/`): `map-keys` sees an object's
    /// previous state and its deletion.
    V0_3,
}

impl Contract {
    /// Every version the host links, newest first.
    pub const ALL: [Self; 3] = [Self::V0_3, Self::V0_2, Self::V0_1];

    /// The version new plugins target.
    pub const CURRENT: Self = Self::V0_3;

    /// The package version, e.g. `0.2.0`.
    pub fn version(self) -> &'static str {
        match self {
            Self::V0_1 => "0.1.0",
            Self::V0_2 => "0.2.0",
            Self::V0_3 => "0.3.0",
        }
    }

    /// The export a component of this version provides.
    pub fn plugin_export(self) -> &'static str {
        match self {
            Self::V0_1 => "kubewasm:controller/plugin@0.1.0",
            Self::V0_2 => "kubewasm:controller/plugin@0.2.0",
            Self::V0_3 => "kubewasm:controller/plugin@0.3.0",
        }
    }

    /// The version whose plugin export is among `exports`.
    pub(super) fn of_exports(exports: &[String]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|contract| exports.iter().any(|e| e == contract.plugin_export()))
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kubewasm:controller@{}", self.version())
    }
}

/// The plugin exports the host accepts, for messages.
pub(super) fn accepted_exports() -> String {
    Contract::ALL
        .map(|c| format!("`{}`", c.plugin_export()))
        .join(" or ")
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
pub(super) fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(LoadError::CoreModule),
        Some([0, b'a', b's', b'm', ..]) => Ok(()),
        _ => Err(LoadError::NotWasm),
    }
}

/// Checks the component's imports and exports against the worlds; returns
/// the contract version it targets.
pub(super) fn check_world(engine: &Engine, component: &Component) -> Result<Contract, LoadError> {
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
