//! Loading the plugins of a directory, and again whenever it changes.
//!
//! # Expected flow
//! [`Loader::rescan`] looks at the directory ([`plugin_dir::scan`]) and, for
//! each plugin added or changed since the last look, starts loading it on a
//! blocking thread: grants, component (compiled, or precompiled from the
//! cache; pulled from its registry for a `NAME.oci` reference, or taken
//! from the artifact cache when pinned by a digest it holds), configuration
//! checked against its schema. Several load at once.
//! It returns the plugins removed. [`Loader::next`] waits for the next load
//! to finish.
//!
//! # Guarantees
//! - **Only the latest counts.** A plugin that changes again while it loads
//!   is loaded again; the older load's result is dropped, and so is the
//!   result of a plugin removed meanwhile. So the caller never swaps in a
//!   version older than one it already has, nor revives a removed plugin.
//! - **Bounded.** At most one load per core runs at once (a directory of a
//!   thousand new components compiles a core's worth at a time, not a
//!   thousand at once); a load superseded while it waits does no work.
//! - **Refusals are results.** A plugin that fails to load comes back as
//!   [`Loaded::Refused`] with its reason; what the caller runs meanwhile is
//!   its business (the daemon keeps the running version).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::grants::{GrantsFileError, OperatorGrants};
use crate::mapper::RestMapper;
use crate::oci::{self, Artifacts, OciError};
use crate::plugin_dir::{self, Change, Listing, PluginFiles, ScanError};
use crate::runtime::{LoadError, LoadOptions, Plugin, Runtime};

/// Why a plugin was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// No grants file, and declarations are not trusted.
    #[error(
        "no grants file {grants} beside it (pass --trust-declarations to grant what it declares)"
    )]
    NoGrants {
        /// The grants file it needs.
        grants: PathBuf,
    },
    /// The grants file was refused.
    #[error(transparent)]
    Grants(#[from] GrantsFileError),
    /// The component could not be read.
    #[error("failed to read it: {0}")]
    Read(#[source] std::io::Error),
    /// Its OCI reference could not be fetched.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The configuration was refused.
    #[error("its configuration {path}: {source}")]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The component was refused.
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// The end of one load.
#[derive(Debug)]
pub enum Loaded {
    /// Loaded, with its configuration (JSON text).
    Ready {
        /// The plugin's files.
        files: PluginFiles,
        /// The plugin.
        plugin: Plugin,
        /// Its configuration.
        config: String,
    },
    /// Refused.
    Refused {
        /// The plugin's files.
        files: PluginFiles,
        /// Why.
        error: Refused,
    },
}

/// What plugins are loaded with.
#[derive(Clone)]
pub struct Sources {
    /// The runtime that compiles and runs them.
    pub runtime: Runtime,
    /// How the cluster serves each type.
    pub mapper: Arc<RestMapper>,
    /// Grant a plugin with no grants file what it declares.
    pub trust: bool,
    /// Where `NAME.oci` references are fetched from and cached.
    pub artifacts: Artifacts,
}

/// The component's bytes: the file, or the artifact its `NAME.oci` names
/// (a reference on its first line), fetched within the tokio runtime this
/// blocking thread belongs to.
fn component(sources: &Sources, files: &PluginFiles) -> Result<Vec<u8>, Refused> {
    if !files.is_reference() {
        return std::fs::read(&files.component).map_err(Refused::Read);
    }
    // A reference is one short line: what is past the first KiB is not read.
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(&files.component).map_err(Refused::Read)?,
            1024,
        ),
        &mut text,
    )
    .map_err(Refused::Read)?;
    let reference = oci::parse_reference(text.lines().next().unwrap_or_default().trim())?;
    let pulled = tokio::runtime::Handle::current().block_on(sources.artifacts.fetch(&reference))?;
    tracing::info!(plugin = %files.name, reference = %reference, digest = %pulled.digest,
        "plugin artifact fetched");
    Ok(pulled.bytes)
}

/// Loads one plugin from its files.
///
/// # Errors
/// [`Refused`] says why.
pub fn load(sources: &Sources, files: &PluginFiles) -> Result<(Plugin, String), Refused> {
    let operator = if files.grants.exists() {
        OperatorGrants::from_file(&files.grants)?
    } else if sources.trust {
        OperatorGrants::unrestricted()
    } else {
        return Err(Refused::NoGrants {
            grants: files.grants.clone(),
        });
    };
    let bytes = component(sources, files)?;
    let options = LoadOptions::new(Arc::clone(&sources.mapper))
        .grants(operator)
        .name(&files.name);
    let plugin = sources.runtime.load(&bytes, &options)?;
    let config = if files.config.exists() {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| Refused::Config {
            path: files.config.clone(),
            source,
        };
        let text = std::fs::read_to_string(&files.config).map_err(|e| failed(Box::new(e)))?;
        let config = crate::replay::parse_config(&text).map_err(|e| failed(Box::new(e)))?;
        plugin
            .check_config(&config)
            .map_err(|e| failed(Box::new(e)))?;
        config
    } else {
        "{}".to_owned()
    };
    Ok((plugin, config))
}

/// A finished load task: its number, the plugin's files, what it gave.
type LoadDone = (u64, PluginFiles, Result<(Plugin, String), Refused>);

/// The plugins of one directory, loaded as it changes (see the module
/// documentation).
pub struct Loader {
    dir: PathBuf,
    sources: Sources,
    listing: Listing,
    /// The latest load of each plugin (a later one makes earlier ones void).
    latest: Arc<std::sync::Mutex<HashMap<String, u64>>>,
    /// One per load allowed to run at once.
    permits: Arc<tokio::sync::Semaphore>,
    next_load: u64,
    /// Loads in flight; `None` for one superseded before it ran.
    loads: JoinSet<Option<LoadDone>>,
}

impl Loader {
    /// A loader of `dir` that has looked at nothing yet.
    pub fn new(dir: &Path, sources: Sources) -> Self {
        Self {
            dir: dir.to_owned(),
            sources,
            listing: Listing::default(),
            latest: Arc::default(),
            permits: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            )),
            next_load: 0,
            loads: JoinSet::new(),
        }
    }

    /// Looks at the directory: starts loading what was added or changed,
    /// and returns the names of the plugins removed.
    ///
    /// # Errors
    /// [`ScanError`] if the directory cannot be read (nothing changes).
    pub fn rescan(&mut self) -> Result<Vec<String>, ScanError> {
        let now = plugin_dir::scan(&self.dir)?;
        let mut removed = Vec::new();
        for change in self.listing.changes(&now) {
            match change {
                Change::Added(files) | Change::Changed(files) => self.spawn(files),
                Change::Removed(name) => {
                    self.latest().remove(&name);
                    removed.push(name);
                }
            }
        }
        self.listing = now;
        Ok(removed)
    }

    fn latest(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn spawn(&mut self, files: PluginFiles) {
        self.next_load += 1;
        let id = self.next_load;
        self.latest().insert(files.name.clone(), id);
        tracing::info!(plugin = %files.name, path = %files.component.display(),
            "loading plugin (compiled on first load, cached after)");
        let (sources, permits, latest) = (
            self.sources.clone(),
            Arc::clone(&self.permits),
            Arc::clone(&self.latest),
        );
        self.loads.spawn(async move {
            // Closed never: the semaphore lives as long as the loader.
            let _permit = permits.acquire_owned().await.ok();
            let current = latest
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&files.name)
                == Some(&id);
            if !current {
                return None;
            }
            let loaded = tokio::task::spawn_blocking(move || {
                let loaded = load(&sources, &files);
                (id, files, loaded)
            })
            .await;
            match loaded {
                Ok(done) => Some(done),
                Err(error) => {
                    tracing::error!(%error, "a plugin load task failed");
                    None
                }
            }
        });
    }

    /// Loads not finished yet.
    pub fn pending(&self) -> usize {
        self.loads.len()
    }

    /// The next load to finish that is still the latest of its plugin;
    /// `None` when none is in flight.
    pub async fn next(&mut self) -> Option<Loaded> {
        loop {
            let (id, files, loaded) = match self.loads.join_next().await? {
                Ok(Some(done)) => done,
                Ok(None) => continue,
                Err(error) => {
                    tracing::error!(%error, "a plugin load task failed");
                    continue;
                }
            };
            if self.latest().get(&files.name) != Some(&id) {
                tracing::debug!(plugin = %files.name, "a newer load superseded this one");
                continue;
            }
            return Some(match loaded {
                Ok((plugin, config)) => Loaded::Ready {
                    files,
                    plugin,
                    config,
                },
                Err(error) => Loaded::Refused { files, error },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::RuntimeConfig;

    fn loader(dir: &Path, trust: bool) -> Loader {
        let runtime = Runtime::new(RuntimeConfig::default().pooling(false)).expect("engine");
        let sources = Sources {
            runtime,
            mapper: Arc::new(RestMapper::builtin()),
            trust,
            artifacts: Artifacts::new(dir.join("artifacts"), oci::Access::default()),
        };
        Loader::new(dir, sources)
    }

    fn refused_names(loaded: Option<Loaded>) -> Option<String> {
        match loaded? {
            Loaded::Refused { files, .. } => Some(files.name),
            Loaded::Ready { files, .. } => panic!("{} is no component", files.name),
        }
    }

    #[tokio::test]
    async fn only_the_latest_load_of_a_plugin_should_count() {
        let dir = tempfile::tempdir().expect("dir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("written");
        };
        let mut loader = loader(dir.path(), true);
        write("a.wasm", "not wasm");
        write("b.wasm", "not wasm either");
        assert!(loader.rescan().expect("scanned").is_empty());
        // a changes while its first load may still run; b goes.
        write("a.wasm", "still not wasm, but longer");
        std::fs::remove_file(dir.path().join("b.wasm")).expect("removed");
        assert_eq!(loader.rescan().expect("scanned"), ["b"]);
        assert_eq!(refused_names(loader.next().await).as_deref(), Some("a"));
        assert_eq!(
            refused_names(loader.next().await),
            None,
            "one result for a, none for b"
        );
        assert_eq!(loader.pending(), 0);
    }

    #[tokio::test]
    async fn a_refusal_should_say_why() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("a.wasm"), "not wasm").expect("written");
        let mut untrusted = loader(dir.path(), false);
        untrusted.rescan().expect("scanned");
        match untrusted.next().await {
            Some(Loaded::Refused {
                error: Refused::NoGrants { grants },
                ..
            }) => {
                assert_eq!(grants, dir.path().join("a.grants.yaml"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reference_that_cannot_be_fetched_should_be_refused_with_the_registry_named() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("bad.oci"), "oci://Not A Reference\n").expect("written");
        std::fs::write(dir.path().join("gone.oci"), "127.0.0.1:1/plugins/gone:1\n")
            .expect("written");
        let mut loader = loader(dir.path(), true);
        loader.rescan().expect("scanned");
        let mut errors = Vec::new();
        while let Some(loaded) = loader.next().await {
            match loaded {
                Loaded::Refused { files, error } => errors.push((files.name, error.to_string())),
                Loaded::Ready { files, .. } => panic!("{} loaded", files.name),
            }
        }
        errors.sort();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].1.contains("invalid OCI reference"), "{errors:?}");
        assert!(errors[1].1.contains("registry 127.0.0.1:1"), "{errors:?}");
    }
}
