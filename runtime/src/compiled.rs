//! Compiled components cached on disk, bound to what they were compiled from.
//!
//! Compiling a component costs milliseconds for a small Rust plugin and
//! seconds for an interpreter-based one; loading a precompiled artifact
//! costs microseconds. But a precompiled artifact is native code that
//! wasmtime runs as it is: whoever can change one runs code in the host.
//!
//! # Guarantees
//! - The directory is created private (0700); a directory that the group or
//!   others can write is refused when the runtime starts, with a message.
//! - Each artifact file carries the sha256 of the component it was compiled
//!   from and an HMAC-SHA256 tag over that digest, the engine's
//!   compatibility hash (wasmtime version, target, every code-changing
//!   setting) and the artifact, keyed by a secret kept in the directory
//!   (0600). An artifact of another component placed under this one's name,
//!   an artifact of another engine, or an altered one fails the check: it is
//!   discarded with a warning and the component compiled again.
//! - Files are replaced atomically, so a reader never sees half an artifact.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

/// What starts every artifact file.
const MAGIC: &[u8; 8] = b"KWCWASM1";
/// Hex sha256 of the component.
const DIGEST_LEN: usize = 64;
/// HMAC-SHA256 tag.
const TAG_LEN: usize = 32;
/// The key's file, in the cache directory.
const KEY_FILE: &str = "key";

/// Why the cache directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CacheDirError {
    /// Creating, reading or securing the directory or its key failed.
    #[error("precompiled cache {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Others could plant native code in it.
    #[error(
        "precompiled cache {path} is writable by its group or others (mode {mode:o}): anyone who can write it could run code in the host; `chmod 700` it or choose another --cache-dir"
    )]
    Insecure {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// A directory of precompiled components.
#[derive(Clone)]
pub(crate) struct CompiledCache {
    dir: PathBuf,
    key: [u8; 32],
}

impl std::fmt::Debug for CompiledCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl CompiledCache {
    /// Opens (creating it private if needed) the cache directory and its key.
    ///
    /// # Errors
    /// [`CacheDirError`] if the directory is not private or cannot be used.
    pub(crate) fn open(dir: impl Into<PathBuf>) -> Result<Self, CacheDirError> {
        let dir = dir.into();
        let io = |source| CacheDirError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        let mode = std::fs::metadata(&dir).map_err(io)?.permissions().mode() & 0o777;
        if mode & 0o022 != 0 {
            return Err(CacheDirError::Insecure { path: dir, mode });
        }
        let key = read_or_create_key(&dir.join(KEY_FILE)).map_err(io)?;
        Ok(Self { dir, key })
    }

    fn path(&self, engine: &Engine, digest: &str) -> PathBuf {
        self.dir
            .join(format!("{digest}-{:016x}.cwasm", engine_hash(engine)))
    }

    fn tag(&self, engine: &Engine, digest: &str, artifact: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .expect("HMAC takes keys of any length");
        mac.update(&engine_hash(engine).to_le_bytes());
        mac.update(digest.as_bytes());
        mac.update(artifact);
        mac
    }

    /// The cached component of `digest`, if a valid artifact is there (an
    /// invalid one is discarded, saying why).
    pub(crate) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(engine, digest);
        match self.read(engine, &path, digest) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "discarding precompiled component");
                None
            }
        }
    }

    /// Compiles the component and caches its artifact. A cache that cannot
    /// be written is not an error: the component is compiled and used, and
    /// a warning says why it was not kept.
    pub(crate) fn compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &str,
    ) -> wasmtime::Result<Component> {
        let path = self.path(engine, digest);
        let component = Component::new(engine, bytes)?;
        if let Err(error) = self.store(engine, &component, &path, digest) {
            tracing::warn!(path = %path.display(), %error, "failed to cache precompiled component");
        }
        Ok(component)
    }

    /// The cached component, `None` when there is no artifact.
    fn read(
        &self,
        engine: &Engine,
        path: &Path,
        digest: &str,
    ) -> Result<Option<Component>, ArtifactError> {
        let file = match std::fs::read(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(ArtifactError::Read(error)),
        };
        let header = MAGIC.len() + DIGEST_LEN + TAG_LEN;
        if file.len() < header || &file[..MAGIC.len()] != MAGIC {
            return Err(ArtifactError::Format);
        }
        let (recorded, rest) = file[MAGIC.len()..].split_at(DIGEST_LEN);
        let (tag, artifact) = rest.split_at(TAG_LEN);
        if recorded != digest.as_bytes() {
            return Err(ArtifactError::Foreign {
                recorded: String::from_utf8_lossy(recorded).into_owned(),
            });
        }
        self.tag(engine, digest, artifact)
            .verify_slice(tag)
            .map_err(|_| ArtifactError::Tampered)?;
        deserialize(engine, artifact).map(Some)
    }

    fn store(
        &self,
        engine: &Engine,
        component: &Component,
        path: &Path,
        digest: &str,
    ) -> std::io::Result<()> {
        let artifact = component.serialize().map_err(std::io::Error::other)?;
        let tag = self.tag(engine, digest, &artifact).finalize().into_bytes();
        // A name no other writer uses, so concurrent loads (threads or
        // processes) never write the same temporary file.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp.{}.{unique}", std::process::id()));
        let mut file = private_file(&tmp)?;
        for part in [MAGIC.as_slice(), digest.as_bytes(), &tag, &artifact] {
            file.write_all(part)?;
        }
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    }
}

/// Why a cached artifact was refused.
#[derive(Debug, thiserror::Error)]
enum ArtifactError {
    #[error("failed to read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("not a kubewasm artifact (no header)")]
    Format,
    #[error("it was compiled from another component ({recorded})")]
    Foreign { recorded: String },
    #[error("its tag does not match: altered, or written by another host or engine")]
    Tampered,
    #[error("wasmtime refused it: {0:#}")]
    Deserialize(#[source] wasmtime::Error),
}

/// The engine's compatibility hash, as a number.
fn engine_hash(engine: &Engine) -> u64 {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.finish()
}

/// Creates a new file readable and writable by the owner only.
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// The directory's secret key, created from the OS's randomness if absent.
///
/// A new key is written whole to a file of its own, then linked into place:
/// the link either appears with all 32 bytes or fails because another
/// process (or thread) linked its key first, which is then read instead.
fn read_or_create_key(path: &Path) -> std::io::Result<[u8; 32]> {
    let read = |path: &Path| -> std::io::Result<[u8; 32]> {
        let mut key = [0u8; 32];
        std::fs::File::open(path)?.read_exact(&mut key)?;
        Ok(key)
    };
    match read(path) {
        Ok(key) => return Ok(key),
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
        Err(_) => {}
    }
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp.{}.{unique}", std::process::id()));
    let mut file = private_file(&tmp)?;
    file.write_all(&key)?;
    file.sync_all()?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => read(path),
        Err(error) => Err(error),
    }
}

/// Deserializes an artifact whose tag was verified.
#[expect(
    unsafe_code,
    reason = "wasmtime's deserialization of precompiled code is unsafe"
)]
fn deserialize(engine: &Engine, artifact: &[u8]) -> Result<Component, ArtifactError> {
    // SAFETY: the artifact's HMAC tag, keyed by this cache's private key,
    // proves that `CompiledCache::store` wrote it for this component digest
    // and an engine with this compatibility hash; wasmtime also checks its
    // header against the engine.
    unsafe { Component::deserialize(engine, artifact) }.map_err(ArtifactError::Deserialize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_should_refuse_a_directory_others_can_write() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("cache");
        let cache = CompiledCache::open(&dir).expect("created private");
        let mode = std::fs::metadata(&dir).expect("dir").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let key_mode = std::fs::metadata(dir.join(KEY_FILE))
            .expect("key")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(key_mode, 0o600);
        // The key survives a reopen.
        assert_eq!(CompiledCache::open(&dir).expect("reopened").key, cache.key);

        // Racing first opens all end with the same, whole key.
        let racing = root.path().join("racing");
        let keys: Vec<[u8; 32]> = std::thread::scope(|s| {
            let opens: Vec<_> = (0..8)
                .map(|_| s.spawn(|| CompiledCache::open(&racing).expect("opens").key))
                .collect();
            opens
                .into_iter()
                .map(|o| o.join().expect("thread"))
                .collect()
        });
        assert!(keys.windows(2).all(|w| w[0] == w[1]));

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = CompiledCache::open(&dir).expect_err("world-writable");
        assert!(
            err.to_string()
                .contains("writable by its group or others (mode 777)"),
            "{err}"
        );
    }
}
