//! The runtime: the one wasmtime engine every plugin shares, and loading a
//! plugin into it (the component checked, compiled or shared, declared,
//! its types resolved and its grants checked).

use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::bindings::ControllerPre;
use crate::code::{Code, Interfaces, LoadTiming, check_header, check_world};
use crate::config::{InstanceReuse, LoadOptions, RuntimeConfig, is_plugin_name};
use crate::declaration::{Declaration, DeclarationError};
use crate::error::{LoadError, RuntimeError};

/// The largest component file a plugin loads from (as the largest layer an
/// OCI pull accepts): a larger file, or one that is not a regular file (a
/// device such as `/dev/zero` would be read forever), is refused unread.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
use crate::grants::Grants;
use crate::limits::{CallLimits, LimitCounts};
use crate::plugin::{Parts, Plugin};
use crate::pool::PoolCounts;
use crate::shared::Shared;

/// The wasm runtime shared by every plugin. Cheap to clone: a handle.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Builds the engine and starts its epoch ticker.
    ///
    /// # Errors
    /// [`RuntimeError`] if wasmtime refuses the configuration.
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        Ok(Self {
            shared: Arc::new(Shared::new(config)?),
        })
    }

    /// What a call may spend and return unless a plugin is held tighter.
    pub fn call_limits(&self) -> CallLimits {
        self.shared.config.call_limits()
    }

    /// How many times each output limit was hit.
    pub fn limit_counts(&self) -> &LimitCounts {
        &self.shared.limit_counts
    }

    /// The instance budget's slots in each state, now.
    pub fn instances(&self) -> PoolCounts {
        self.shared.pool.counts()
    }

    /// Distinct components loaded now (a component loaded as several
    /// plugins counts once: they share its compiled code).
    pub fn components(&self) -> usize {
        self.shared.loaded().len()
    }

    /// Loads a plugin from a file. The file is first hashed in pieces: a
    /// component some plugin already runs (the same bytes under another
    /// name) shares its code without its bytes being read into memory
    /// again (fifty names of a 12 MB component would otherwise churn
    /// 600 MB through the allocator, which keeps much of it).
    ///
    /// # Errors
    /// [`LoadError`] says why the file was refused.
    pub fn load_file(
        &self,
        path: impl AsRef<Path>,
        options: &LoadOptions,
    ) -> Result<Plugin, LoadError> {
        let path = path.as_ref();
        let read = |source| LoadError::Read {
            path: path.to_owned(),
            source,
        };
        let not_a_file = |why: String| LoadError::NotAFile {
            path: path.to_owned(),
            why,
        };
        let open = || {
            let file = std::fs::File::open(path).map_err(read)?;
            let meta = file.metadata().map_err(read)?;
            if !meta.is_file() {
                let what = if meta.is_dir() {
                    "a directory"
                } else {
                    "not a regular file (a device, a pipe or a socket)"
                };
                return Err(not_a_file(what.to_owned()));
            }
            if meta.len() > MAX_COMPONENT_BYTES {
                return Err(not_a_file(format!(
                    "{} bytes, over {MAX_COMPONENT_BYTES}",
                    meta.len()
                )));
            }
            // A file growing while it is read is cut at the limit.
            Ok(std::io::Read::take(file, MAX_COMPONENT_BYTES))
        };
        let mut hasher = Sha256::new();
        std::io::copy(&mut open()?, &mut hasher).map_err(read)?;
        let digest = hex::encode(hasher.finalize());
        if let Some((code, declaration)) = self.shared.find(&digest) {
            return self.finish(code, declaration, LoadTiming::shared(), options);
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut open()?, &mut bytes).map_err(read)?;
        self.load(&bytes, options)
    }

    /// Loads a plugin: checks, compiles (or loads precompiled), links,
    /// declares, then resolves its declared types against the cluster's
    /// and checks them against the operator's grants.
    ///
    /// # Errors
    /// [`LoadError`] says why the component was refused.
    #[tracing::instrument(name = "kubewasm.runtime.load", skip_all, fields(size = bytes.len()))]
    pub fn load(&self, bytes: &[u8], options: &LoadOptions) -> Result<Plugin, LoadError> {
        let (code, declaration, timing) = self.declare(bytes)?;
        self.finish(code, declaration, timing, options)
    }

    /// A declared component as the plugin `options` load it: its types
    /// resolved against the cluster's, checked against the operator's
    /// grants.
    fn finish(
        &self,
        code: Arc<Code>,
        declaration: Declaration,
        timing: LoadTiming,
        options: &LoadOptions,
    ) -> Result<Plugin, LoadError> {
        let mut declaration = declaration
            .resolve(&options.mapper)
            .map_err(LoadError::Declaration)?;
        if let Some(name) = &options.name {
            if !is_plugin_name(name) {
                return Err(LoadError::Declaration(DeclarationError::InvalidName(
                    name.clone(),
                )));
            }
            declaration.name.clone_from(name);
        }
        let grants = Grants::new(&declaration, &options.grants)?;
        let config_validator = declaration
            .config_validator()
            .map_err(LoadError::Declaration)?
            .map(Arc::new);
        let reuse = self.shared.config.instance_reuse == InstanceReuse::Reuse;
        tracing::info!(
            plugin = %declaration.name,
            version = %declaration.version,
            contract = code.contract.version(),
            digest = %code.digest,
            cached = timing.cached,
            compile_time = ?timing.compile_time,
            instantiate_time = ?timing.instantiate_time,
            reuse,
            "component compiled and declared (the host checks its configuration next)"
        );
        let host_limits = self.call_limits();
        let limits = options
            .limits
            .map_or(host_limits, |limits| limits.within(host_limits));
        let parts = Parts {
            declaration,
            grants,
            limits,
            reuse,
            config_validator,
        };
        Ok(Plugin::new(Arc::clone(&self.shared), code, parts))
    }

    /// What a component declares, unchecked against any cluster or grants:
    /// what `kubewasm inspect` prints.
    ///
    /// # Errors
    /// [`LoadError`] says why the component was refused.
    pub fn inspect(&self, bytes: &[u8]) -> Result<Declaration, LoadError> {
        Ok(self.declare(bytes)?.1)
    }

    /// What [`Self::inspect`] says, with the interfaces the component
    /// imports and exports (what its OCI artifact's config records).
    ///
    /// # Errors
    /// [`LoadError`] says why the component was refused.
    pub fn interfaces(&self, bytes: &[u8]) -> Result<Interfaces, LoadError> {
        let (code, declaration, _) = self.declare(bytes)?;
        let engine = &self.shared.engine;
        let ty = code.pre.component().component_type();
        Ok(Interfaces {
            declaration,
            imports: ty
                .imports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
            exports: ty
                .exports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
        })
    }

    /// Compiles, links and instantiates a component and calls `declare`
    /// (or shares the code and declaration of the same component loaded
    /// already): its code, its declaration, and the time compiling (with
    /// whether it was cached) and instantiating took.
    fn declare(&self, bytes: &[u8]) -> Result<(Arc<Code>, Declaration, LoadTiming), LoadError> {
        check_header(bytes)?;
        let digest = hex::encode(Sha256::digest(bytes));
        let shared = &self.shared;
        let gate = shared.gate(&digest);
        let _compiling = gate.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((code, declaration)) = shared.find(&digest) {
            return Ok((code, declaration, LoadTiming::shared()));
        }
        let started = Instant::now();
        let cached = shared
            .compiled
            .as_ref()
            .and_then(|cache| cache.load(&shared.engine, &digest));
        let from_cache = cached.is_some();
        let (component, linker, baseline) = match (cached, &shared.baseline) {
            (Some(component), _) => (component, &shared.linker, None),
            (None, Some((engine, linker))) => (
                Component::new(engine, bytes).map_err(LoadError::Compile)?,
                linker,
                Some(Arc::from(bytes)),
            ),
            (None, None) => {
                // Long first compiles say so (the result is cached).
                tracing::info!(size = bytes.len(), digest = %digest,
                    "compiling the component with the optimizing compiler, once (an interpreted \
                     Python or JavaScript plugin takes 10 to 30 s; the result is cached)");
                (shared.compile(bytes, &digest)?, &shared.linker, None)
            }
        };
        let compile_time = started.elapsed();
        let contract = check_world(component.engine(), &component)?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(LoadError::Link)?;
        let pre = ControllerPre::new(contract, instance_pre).map_err(LoadError::Link)?;
        let code = Arc::new(Code {
            pre,
            contract,
            digest,
            baseline,
        });
        let bootstrap = Plugin::bootstrap(Arc::clone(shared), Arc::clone(&code));
        let (declaration, instantiate_time) = bootstrap.declare()?;
        shared.remember(&code, &declaration);
        Ok((
            code,
            declaration,
            LoadTiming {
                cached: from_cache,
                compile_time,
                instantiate_time,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapper::RestMapper;

    #[test]
    fn load_should_refuse_garbage_and_core_modules() {
        let runtime = Runtime::new(RuntimeConfig::default().pooling(false)).expect("engine");
        let options = LoadOptions::new(Arc::new(RestMapper::builtin()));
        let err = runtime.load(b"not wasm", &options).expect_err("garbage");
        assert!(err.to_string().contains("not a WebAssembly file"), "{err}");
        // The smallest core module: header only.
        let err = runtime
            .load(b"\0asm\x01\0\0\0", &options)
            .expect_err("core module");
        assert!(err.to_string().contains("not a component"), "{err}");
    }

    #[test]
    fn load_file_should_refuse_what_is_not_a_component_file_unread() {
        let runtime = Runtime::new(RuntimeConfig::default().pooling(false)).expect("engine");
        let options = LoadOptions::new(Arc::new(RestMapper::builtin()));
        let dir = tempfile::tempdir().expect("dir");
        // A device would be read forever; a directory cannot be read.
        let zero = dir.path().join("zero.wasm");
        std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
        for path in [zero.as_path(), dir.path()] {
            let err = runtime.load_file(path, &options).expect_err("refused");
            assert!(matches!(err, LoadError::NotAFile { .. }), "{err}");
        }
    }
}
