//! Compiled components cached on disk, bound to what they were compiled from.
//!
//! Compiling a component costs milliseconds for a small Rust plugin and
//! seconds for an interpreter-based one; loading a precompiled artifact
//! costs microseconds. But a precompiled artifact is native code that
//! wasmtime runs as it is: whoever can change one runs code in the host.
//!
//! # Guarantees
//! - Artifacts live in the host's [`PrivateDir`] of the cache directory
//!   (`DIR/uid-UID`, 0700, held open): the cache directory itself may be
//!   shared (a Pod's `emptyDir` is 0777); another user's or a directory
//!   open to others is refused when the runtime starts, with a message.
//! - Each artifact file carries the sha256 of the component it was compiled
//!   from and an HMAC-SHA256 tag over that digest, the engine's
//!   compatibility hash (wasmtime version, target, every code-changing
//!   setting) and the artifact, keyed by a secret kept in the directory
//!   (0600). An artifact of another component placed under this one's name,
//!   an artifact of another engine, or an altered one fails the check: it is
//!   discarded with a warning and the component compiled again.
//! - Files are replaced atomically, so a reader never sees half an artifact.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::path::PathBuf;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::private_dir::{PrivateDir, PrivateDirError};

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
    /// The host's private directory in it cannot be used.
    #[error("precompiled cache: {0}")]
    Dir(#[from] PrivateDirError),
    /// Its key cannot be read or made.
    #[error("precompiled cache {path}: its key: {source}")]
    Key {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A directory of precompiled components.
#[derive(Clone)]
pub(crate) struct CompiledCache {
    dir: PrivateDir,
    key: [u8; 32],
}

impl std::fmt::Debug for CompiledCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledCache")
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl CompiledCache {
    /// Opens (creating it private if needed) the host's directory in `dir`
    /// and its key.
    ///
    /// # Errors
    /// [`CacheDirError`] if the directory is not private or cannot be used.
    pub(crate) fn open(dir: impl Into<PathBuf>) -> Result<Self, CacheDirError> {
        let dir = PrivateDir::open(dir.into())?;
        let key = read_or_create_key(&dir).map_err(|source| CacheDirError::Key {
            path: dir.path().to_owned(),
            source,
        })?;
        Ok(Self { dir, key })
    }

    fn name(engine: &Engine, digest: &str) -> String {
        format!("{digest}-{:016x}.cwasm", engine_hash(engine))
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
        let name = Self::name(engine, digest);
        match self.read(engine, &name, digest) {
            Ok(found) => found,
            Err(error) => {
                let path = self.dir.path().join(&name);
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
        let name = Self::name(engine, digest);
        let component = Component::new(engine, bytes)?;
        if let Err(error) = self.store(engine, &component, &name, digest) {
            let path = self.dir.path().join(&name);
            tracing::warn!(path = %path.display(), %error, "failed to cache precompiled component");
        }
        Ok(component)
    }

    /// The cached component, `None` when there is no artifact.
    fn read(
        &self,
        engine: &Engine,
        name: &str,
        digest: &str,
    ) -> Result<Option<Component>, ArtifactError> {
        let Some(file) = self.dir.read(name).map_err(ArtifactError::Read)? else {
            return Ok(None);
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
        name: &str,
        digest: &str,
    ) -> std::io::Result<()> {
        let artifact = component.serialize().map_err(std::io::Error::other)?;
        let tag = self.tag(engine, digest, &artifact).finalize().into_bytes();
        let file = [MAGIC.as_slice(), digest.as_bytes(), &tag, &artifact].concat();
        self.dir.write(name, &file)
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

/// The directory's secret key, created from the OS's randomness if absent.
///
/// A new key is written whole, then linked into place: the link either
/// appears with all 32 bytes or fails because another process (or thread)
/// linked its key first, which is then read instead.
fn read_or_create_key(dir: &PrivateDir) -> std::io::Result<[u8; 32]> {
    let read = || -> std::io::Result<Option<[u8; 32]>> {
        dir.read(KEY_FILE)?
            .map(|bytes| {
                <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{KEY_FILE} is not 32 bytes"),
                    )
                })
            })
            .transpose()
    };
    if let Some(key) = read()? {
        return Ok(key);
    }
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    if dir.write_new(KEY_FILE, &key)? {
        return Ok(key);
    }
    read()?.ok_or_else(|| std::io::Error::other(format!("{KEY_FILE} vanished as it was made")))
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
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn open_should_keep_one_key_in_the_hosts_private_directory_of_a_shared_one() {
        let root = tempfile::tempdir().expect("tempdir");
        // Shared, as a kubelet makes an emptyDir.
        let dir = root.path().join("cache");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let cache = CompiledCache::open(&dir).expect("opened");
        let private = cache.dir.path().to_owned();
        let mode = |path: &std::path::Path| {
            std::fs::metadata(path)
                .expect("exists")
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode(&private), 0o700);
        assert_eq!(mode(&private.join(KEY_FILE)), 0o600);
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

        // A key that is not one is an error, not a new key.
        std::fs::write(private.join(KEY_FILE), b"short").expect("truncated");
        match CompiledCache::open(&dir) {
            Err(CacheDirError::Key { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::InvalidData);
            }
            other => panic!("a broken key was used: {other:?}"),
        }

        // The private directory opened to others is refused.
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o757)).expect("chmod");
        assert!(matches!(
            CompiledCache::open(&dir),
            Err(CacheDirError::Dir(PrivateDirError::Insecure {
                mode: 0o757,
                ..
            }))
        ));
    }
}
