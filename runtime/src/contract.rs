//! The versions of the `kubewasm:controller` contract the host speaks
//! (the checks that a component is one of them are `code`'s).

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
    pub(crate) fn of_exports(exports: &[String]) -> Option<Self> {
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
pub(crate) fn accepted_exports() -> String {
    Contract::ALL
        .map(|c| format!("`{}`", c.plugin_export()))
        .join(" or ")
}
