//! Helpers shared by the integration tests: where the built plugins and the
//! `kubewasm` binary are, and fixtures.
//!
//! The wasm artifacts are built by `make plugins` (examples, into
//! `target/plugins/`) and `make test-plugins` (test guests, into
//! `target/test-plugins/`); `make test` runs both first.

use std::path::PathBuf;

pub mod bench;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The cargo target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn artifact(dir: &str, file: &str, make_target: &str) -> PathBuf {
    let path = target_dir().join(dir).join(file);
    assert!(
        path.is_file(),
        "{} is missing: run `make {make_target}` (or `make test`) first",
        path.display()
    );
    path
}

/// A directory of precompiled components shared by the tests, so each test
/// binary compiles a plugin once rather than once per load.
pub fn compiled_cache_dir() -> PathBuf {
    target_dir().join("kubewasm-test-cache")
}

/// An example plugin built by `make plugins`.
pub fn example_plugin(name: &str) -> PathBuf {
    artifact("plugins", &format!("{name}.wasm"), "plugins")
}

/// A test guest built by `make test-plugins`.
pub fn test_plugin(name: &str) -> PathBuf {
    artifact("test-plugins", &format!("{name}.wasm"), "test-plugins")
}

/// The `kubewasm` binary built by `make test` (`cargo build --bin kubewasm`).
pub fn kubewasm_bin() -> PathBuf {
    artifact("debug", "kubewasm", "test")
}

/// An example's fixture file in `plugins/<name>/`.
pub fn example_file(plugin: &str, file: &str) -> PathBuf {
    workspace_root().join("plugins").join(plugin).join(file)
}
