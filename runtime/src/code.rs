//! A component's code: checked, compiled (or loaded precompiled, or first
//! compiled by the baseline compiler and tiered up later), linked and
//! declared once, and shared by every plugin loaded from the same bytes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::cache::MemoryCache;
use crate::declaration::{Declaration, DeclarationError};
use crate::grants::Grants;
use crate::resource::ResourceType;

use super::bindings::ControllerPre;
use super::config::is_plugin_name;
use super::contract::{check_header, check_world};
use super::pool::Owner;
use super::{CallError, Contract, InstanceReuse, LoadError, LoadOptions, Plugin, Runtime};

/// A component compiled and linked: its code, shared by every plugin
/// loaded from the same bytes (each keeps its own instances).
pub(super) struct Code {
    pub(super) pre: ControllerPre,
    /// The contract version the component targets.
    pub(super) contract: Contract,
    pub(super) digest: String,
    /// The component's bytes while this is the baseline compiler's code,
    /// for [`Plugin::optimized`] to compile.
    pub(super) baseline: Option<Arc<[u8]>>,
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

impl Runtime {
    /// Distinct components loaded now (a component loaded as several
    /// plugins counts once: they share its compiled code).
    pub fn components(&self) -> usize {
        self.loaded().len()
    }

    /// The components loaded now, those no plugin holds any more forgotten.
    pub(super) fn loaded(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (Weak<Code>, Declaration)>> {
        let mut loaded = self
            .inner
            .loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loaded.retain(|_, (code, _)| code.strong_count() > 0);
        loaded
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
        let mut hasher = Sha256::new();
        let mut file = std::fs::File::open(path).map_err(read)?;
        std::io::copy(&mut file, &mut hasher).map_err(read)?;
        let digest = hex::encode(hasher.finalize());
        if let Some((code, declaration)) = self.shared(&digest) {
            let plugin = self.bootstrap(code);
            return self.finish(plugin, declaration, LoadTiming::shared(), options);
        }
        let bytes = std::fs::read(path).map_err(read)?;
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
        let (bootstrap, declaration, timing) = self.declare(bytes)?;
        self.finish(bootstrap, declaration, timing, options)
    }

    /// A declared component as the plugin `options` load it: its types
    /// resolved against the cluster's, checked against the operator's
    /// grants.
    fn finish(
        &self,
        bootstrap: Plugin,
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
        let reuse = self.inner.config.instance_reuse == InstanceReuse::Reuse;
        tracing::info!(
            plugin = %declaration.name,
            version = %declaration.version,
            contract = bootstrap.code.contract.version(),
            digest = %bootstrap.code.digest,
            cached = timing.cached,
            compile_time = ?timing.compile_time,
            instantiate_time = ?timing.instantiate_time,
            reuse,
            "component compiled and declared (the host checks its configuration next)"
        );
        let host_limits = self.inner.config.call_limits();
        Ok(Plugin {
            runtime: self.clone(),
            code: Arc::clone(&bootstrap.code),
            id: self.next_plugin(),
            name: Arc::from(declaration.name.as_str()),
            limits: options
                .limits
                .map_or(host_limits, |limits| limits.within(host_limits)),
            grants: Arc::new(grants),
            declaration: Arc::new(declaration),
            reads_denied: Arc::default(),
            reuse,
            config_validator,
            valid_config: Mutex::new(None),
        })
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
        let (plugin, declaration, _) = self.declare(bytes)?;
        let engine = &self.inner.engine;
        let ty = plugin.code.pre.component().component_type();
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
    /// already): the plugin (granting nothing yet), its declaration, and the
    /// time compiling (with whether it was cached) and instantiating took.
    fn declare(&self, bytes: &[u8]) -> Result<(Plugin, Declaration, LoadTiming), LoadError> {
        check_header(bytes)?;
        let digest = hex::encode(Sha256::digest(bytes));
        let gate = self.gate(&digest);
        let _compiling = gate.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((code, declaration)) = self.shared(&digest) {
            return Ok((self.bootstrap(code), declaration, LoadTiming::shared()));
        }
        let started = Instant::now();
        let cached = self
            .inner
            .compiled
            .as_ref()
            .and_then(|cache| cache.load(&self.inner.engine, &digest));
        let from_cache = cached.is_some();
        let (component, linker, baseline) = match (cached, &self.inner.baseline) {
            (Some(component), _) => (component, &self.inner.linker, None),
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
                (self.compile(bytes, &digest)?, &self.inner.linker, None)
            }
        };
        let compile_time = started.elapsed();
        let contract = check_world(component.engine(), &component)?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(LoadError::Link)?;
        let pre = ControllerPre::new(contract, instance_pre).map_err(LoadError::Link)?;

        let bootstrap = self.bootstrap(Arc::new(Code {
            pre,
            contract,
            digest,
            baseline,
        }));
        let started = Instant::now();
        let checkout = bootstrap.checkout(Arc::new(MemoryCache::default()), None);
        let checkout = checkout.map_err(|error| match error {
            // Exports are type-checked once instantiated: a mismatch means
            // another revision of the contract.
            CallError::Exports(error) => LoadError::Incompatible {
                contract,
                source: error,
            },
            other => LoadError::Declare(other),
        })?;
        let instantiate_time = started.elapsed();
        let (declaration, _) = bootstrap
            .with_instance(checkout, |controller, store| controller.declare(store))
            .map_err(LoadError::Declare)?;
        let declaration = Declaration::try_from(declaration).map_err(LoadError::Declaration)?;
        let mut loaded = self.loaded();
        loaded.insert(
            bootstrap.code.digest.clone(),
            (Arc::downgrade(&bootstrap.code), declaration.clone()),
        );
        drop(loaded);
        Ok((
            bootstrap,
            declaration,
            LoadTiming {
                cached: from_cache,
                compile_time,
                instantiate_time,
            },
        ))
    }
    /// Compiles a component with the optimizing compiler, through the
    /// precompiled cache when there is one.
    fn compile(&self, bytes: &[u8], digest: &str) -> Result<Component, LoadError> {
        match &self.inner.compiled {
            Some(cache) => cache.compile(&self.inner.engine, bytes, digest),
            None => Component::new(&self.inner.engine, bytes).map_err(LoadError::Compile),
        }
    }

    /// The code and declaration of the component with this digest, if a
    /// plugin still holds it; forgets the components no plugin holds.
    fn shared(&self, digest: &str) -> Option<(Arc<Code>, Declaration)> {
        let loaded = self
            .inner
            .loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (code, declaration) = loaded.get(digest)?;
        Some((code.upgrade()?, declaration.clone()))
    }

    /// The gate of the component with this digest (see `Inner::compiling`).
    fn gate(&self, digest: &str) -> Arc<Mutex<()>> {
        let mut gates = self
            .inner
            .compiling
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        gates.retain(|_, gate| gate.strong_count() > 0);
        if let Some(gate) = gates.get(digest).and_then(Weak::upgrade) {
            return gate;
        }
        let gate = Arc::new(Mutex::new(()));
        gates.insert(digest.to_owned(), Arc::downgrade(&gate));
        gate
    }

    /// A new plugin's id: its instances' owner in the pool.
    fn next_plugin(&self) -> Owner {
        self.inner.plugins.fetch_add(1, Ordering::Relaxed)
    }

    /// A plugin of `code` granting nothing, for `declare` to run in.
    pub(super) fn bootstrap(&self, code: Arc<Code>) -> Plugin {
        Plugin {
            runtime: self.clone(),
            code,
            id: self.next_plugin(),
            declaration: Arc::new(placeholder_declaration()),
            name: Arc::from("(loading)"),
            grants: Arc::new(Grants::none("(loading)")),
            limits: self.inner.config.call_limits(),
            reads_denied: Arc::default(),
            reuse: false,
            config_validator: None,
            valid_config: Mutex::new(None),
        }
    }
}

/// How long loading took, for the log.
pub(super) struct LoadTiming {
    cached: bool,
    compile_time: Duration,
    instantiate_time: Duration,
}

impl LoadTiming {
    /// A load that shared the code of a component loaded already.
    fn shared() -> Self {
        Self {
            cached: true,
            compile_time: Duration::ZERO,
            instantiate_time: Duration::ZERO,
        }
    }
}

/// Declaration used only while `declare` runs (it grants nothing).
fn placeholder_declaration() -> Declaration {
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

impl Plugin {
    /// This plugin on optimized code: the optimizing compiler's (and
    /// cached) if it runs baseline code, shared with another plugin of the
    /// component that has it already, or its own if it has. Same name,
    /// declaration, grants, limits; its own instances.
    ///
    /// # Errors
    /// [`LoadError`] if the optimizing compiler refuses what the baseline
    /// one took.
    pub fn optimized(&self) -> Result<Self, LoadError> {
        let runtime = &self.runtime;
        let digest = &self.code.digest;
        let gate = runtime.gate(digest);
        let _compiling = gate.lock().unwrap_or_else(PoisonError::into_inner);
        let code = match (&self.code.baseline, runtime.shared(digest)) {
            (None, _) => Arc::clone(&self.code),
            (Some(_), Some((code, _))) if code.baseline.is_none() => code,
            (Some(bytes), _) => {
                let started = Instant::now();
                let component = runtime.compile(bytes, digest)?;
                let instance_pre = runtime
                    .inner
                    .linker
                    .instantiate_pre(&component)
                    .map_err(LoadError::Link)?;
                let code = Arc::new(Code {
                    pre: ControllerPre::new(self.code.contract, instance_pre)
                        .map_err(LoadError::Link)?,
                    contract: self.code.contract,
                    digest: digest.clone(),
                    baseline: None,
                });
                if let Some((shared, _)) = runtime.loaded().get_mut(digest) {
                    *shared = Arc::downgrade(&code);
                }
                tracing::info!(plugin = %self.name, digest = %digest,
                    compile_time = ?started.elapsed(), "optimized code compiled");
                code
            }
        };
        Ok(Self {
            runtime: runtime.clone(),
            code,
            id: runtime.next_plugin(),
            declaration: Arc::clone(&self.declaration),
            name: Arc::clone(&self.name),
            grants: Arc::clone(&self.grants),
            limits: self.limits,
            reads_denied: Arc::clone(&self.reads_denied),
            reuse: self.reuse,
            config_validator: self.config_validator.clone(),
            valid_config: Mutex::new(None),
        })
    }
}
