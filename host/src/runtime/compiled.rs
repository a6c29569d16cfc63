//! Compiled components cached on disk.
//!
//! Compiling a component costs milliseconds for a small Rust plugin and
//! seconds for an interpreter-based one; loading a precompiled artifact
//! costs microseconds. Artifacts are keyed by the component's sha256 and by
//! the engine's compatibility hash (wasmtime version, target, and every
//! setting that changes the code, the pooling allocator included), so an
//! artifact is only ever loaded into an engine that produced it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::LoadError;

/// A directory of precompiled components.
#[derive(Clone, Debug)]
pub(crate) struct CompiledCache {
    dir: PathBuf,
}

impl CompiledCache {
    pub(crate) fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, engine: &Engine, digest: &str) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir
            .join(format!("{digest}-{:016x}.cwasm", hasher.finish()))
    }

    /// Loads the artifact for `digest`, or compiles `bytes` and stores it.
    /// Returns the component and whether it came from the cache.
    ///
    /// A cache that cannot be written is not an error: the component is
    /// compiled and used, and a warning says why it was not kept.
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &str,
    ) -> Result<(Component, bool), LoadError> {
        let path = self.path(engine, digest);
        if path.is_file() {
            match deserialize(engine, &path) {
                Ok(component) => return Ok((component, true)),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "discarding unusable precompiled component")
                }
            }
        }
        let component = Component::new(engine, bytes).map_err(LoadError::Compile)?;
        if let Err(error) = self.store(&component, &path) {
            tracing::warn!(path = %path.display(), %error, "failed to cache precompiled component");
        }
        Ok((component, false))
    }

    fn store(&self, component: &Component, path: &Path) -> std::io::Result<()> {
        let artifact = component.serialize().map_err(std::io::Error::other)?;
        std::fs::create_dir_all(&self.dir)?;
        // A name no other writer uses, so concurrent loads (threads or
        // processes) never write the same temporary file.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp.{}.{unique}", std::process::id()));
        std::fs::write(&tmp, artifact)?;
        std::fs::rename(&tmp, path)
    }
}

/// Reads an artifact into memory and deserializes it. Reading (rather than
/// mapping the file, as `deserialize_file` does) costs ~100 µs more per
/// load but means a cache file truncated or rewritten under a running host
/// cannot fault it.
#[expect(
    unsafe_code,
    reason = "wasmtime's deserialization of precompiled code is unsafe"
)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    let bytes = std::fs::read(path)?;
    // SAFETY: the file was written by `CompiledCache::store` for an engine
    // with the same compatibility hash (it is in the file name), and it is
    // replaced atomically, so it is never read half-written. wasmtime also
    // checks the artifact's header against the engine and refuses garbage.
    // Whoever can write the cache directory can run native code as the
    // host: keep it private.
    unsafe { Component::deserialize(engine, bytes) }
}
