//! The words of a plugin's lifecycle, shared by both its sources: who runs
//! a plugin under its name, the plugin directory or a `Plugin` resource,
//! and what became of a load. A leaf: the engine's table of owners and the
//! loader's refusals name these, and nothing here names them back.

/// The source a running plugin came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A `NAME.wasm` (or `NAME.oci`) of the plugin directory.
    Directory,
    /// A `Plugin` or `ClusterPlugin` resource.
    Resource,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Directory => "the plugin directory",
            Self::Resource => "a Plugin or ClusterPlugin resource",
        })
    }
}

/// What became of a plugin's load (`kubewasm_plugin_loads_total`'s
/// `result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadResult {
    /// Started: it was not running.
    Loaded,
    /// Swapped in for the running version.
    Swapped,
    /// The running version's optimized code swapped in for its baseline
    /// code.
    Optimized,
    /// Refused (a running version keeps serving).
    Refused,
    /// Its component went: stopped.
    Removed,
    /// A type it declares is not served: refused (a running version keeps
    /// serving), or stopped if it ran; it loads again once the type is.
    Unserved,
}

impl LoadResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loaded => "loaded",
            Self::Swapped => "swapped",
            Self::Optimized => "optimized",
            Self::Refused => "refused",
            Self::Removed => "removed",
            Self::Unserved => "unserved",
        }
    }
}
