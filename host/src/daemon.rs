//! The host as a long-running process: `kubewasm run` (against any
//! cluster) and `kubewasm dev` (the embedded API server and the host in one
//! process).
//!
//! # `run`
//! 1. Reads the cluster's discovery into a [`RestMapper`].
//! 2. Loads every `*.wasm` in the plugin directory as the plugin named by
//!    the file (`NAME.wasm` runs as `NAME`: its field manager, finalizer,
//!    logs and metrics; one component copied under two names runs twice),
//!    each narrowed by the
//!    operator's grants file beside it (`NAME.grants.yaml`). A plugin with
//!    no grants file is refused, saying so, unless `trust_declarations`
//!    grants every plugin exactly what it declared. Its configuration is
//!    `NAME.config.yaml` beside it (YAML or JSON; `{}` without one), checked
//!    against its `config-schema` at load. A plugin that fails to load is
//!    logged and skipped; the others run.
//! 3. Starts each as a controller, serves `/metrics`, `/healthz` and
//!    `/readyz` (ready once every informer has listed once).
//!    With leader election, informers start at once (a standby's caches
//!    are warm) but keys are reconciled only while this process holds the
//!    Lease.
//! 4. On shutdown: stops taking keys, lets in-flight steps finish (within
//!    the grace period), then releases the Lease so a standby takes over at
//!    once.
//!
//! # `dev`
//! Starts the embedded API server (workload simulation on), writes its
//! kubeconfig, applies every CustomResourceDefinition found among the
//! plugin directory's `*.yaml` files, then runs the host against it with
//! `trust_declarations` (the examples run as they declare).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use crate::engine::Engine;
use crate::engine::controller::Settings;
use crate::engine::discovery::{self, DiscoveryError};
use crate::engine::informer::InitialList;
use crate::engine::leader::{self, LeaseConfig};
use crate::engine::serve;
use crate::grants::{GrantsFileError, OperatorGrants};
use crate::mapper::RestMapper;
use crate::runtime::{LoadError, LoadOptions, Runtime};

/// How `run` runs the host.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Where the plugins are.
    pub plugins: PathBuf,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    pub metrics_addr: SocketAddr,
    /// Grant every plugin what it declares when it has no grants file.
    pub trust_declarations: bool,
    /// Steps running at once, host-wide.
    pub workers: usize,
    /// How long in-flight steps may take to finish at shutdown.
    pub shutdown_grace: Duration,
    /// Leader election: reconcile only while holding this Lease.
    pub leader_election: Option<LeaseConfig>,
    /// How informers list.
    pub initial_list: InitialList,
}

/// Why the host could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Discovery failed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The plugin directory could not be read.
    #[error("failed to read the plugin directory {path}: {source}")]
    PluginDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The metrics address could not be bound.
    #[error("failed to listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A CustomResourceDefinition could not be installed.
    #[error("failed to install {path}: {source}")]
    Crd {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Why one plugin was not started.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error(
        "no grants file {grants} beside it (pass --trust-declarations to grant what it declares)"
    )]
    NoGrants { grants: PathBuf },
    #[error(transparent)]
    Grants(#[from] GrantsFileError),
    #[error("failed to read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("its configuration {path}: {source}")]
    Config {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// The components in `dir`, sorted, with the grants file each would use.
fn plugin_files(dir: &Path) -> Result<Vec<(PathBuf, PathBuf)>, DaemonError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DaemonError::PluginDir {
        path: dir.to_owned(),
        source,
    })?;
    let mut files: Vec<(PathBuf, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .map(|p| {
            let grants = p.with_extension("grants.yaml");
            (p, grants)
        })
        .collect();
    files.sort();
    Ok(files)
}

fn load(
    runtime: &Runtime,
    mapper: &Arc<RestMapper>,
    path: &Path,
    grants: &Path,
    trust: bool,
) -> Result<(crate::runtime::Plugin, String), Refused> {
    let operator = if grants.exists() {
        OperatorGrants::from_file(grants)?
    } else if trust {
        OperatorGrants::unrestricted()
    } else {
        return Err(Refused::NoGrants {
            grants: grants.to_owned(),
        });
    };
    let bytes = std::fs::read(path).map_err(Refused::Read)?;
    let mut options = LoadOptions::new(Arc::clone(mapper)).grants(operator);
    if let Some(name) = path.file_stem().and_then(|s| s.to_str()) {
        options = options.name(name);
    }
    let plugin = runtime.load(&bytes, &options)?;
    let config_path = path.with_extension("config.yaml");
    let config = if config_path.exists() {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| Refused::Config {
            path: config_path.clone(),
            source,
        };
        let text = std::fs::read_to_string(&config_path).map_err(|e| failed(Box::new(e)))?;
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

/// Runs the host against the cluster `client` reaches until `shutdown`
/// resolves.
///
/// # Errors
/// [`DaemonError`] if discovery, the plugin directory or the metrics
/// address fail; a plugin that fails to load is logged, not fatal.
pub async fn run(
    client: kube::Client,
    runtime: Runtime,
    options: HostOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let mapper = Arc::new(discovery::mapper(&client).await?);
    let (leading, leading_rx) = tokio::sync::watch::channel(options.leader_election.is_none());
    let (stop_electing, stopped) = tokio::sync::watch::channel(false);
    let elector = options.leader_election.clone().map(|config| {
        let mut stopped = stopped.clone();
        tokio::spawn(leader::run(client.clone(), config, leading, async move {
            let _ = stopped.wait_for(|s| *s).await;
        }))
    });
    let mut engine =
        Engine::new(client, options.workers, leading_rx).with_initial_list(options.initial_list);
    // Probes first: `/healthz` answers while plugins compile, `/readyz`
    // once they run and their caches are synced.
    let ready = Arc::new(AtomicBool::new(false));
    let (addr, server) = serve::serve(options.metrics_addr, engine.probe(Arc::clone(&ready)))
        .await
        .map_err(|source| DaemonError::Listen {
            addr: options.metrics_addr,
            source,
        })?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    eprintln!("kubewasm: metrics on http://{addr}/metrics");
    // Every plugin loads at once, each on a blocking thread: a first load
    // compiles (seconds for an interpreted plugin), later ones read the
    // precompiled cache.
    let mut loads = tokio::task::JoinSet::new();
    for (path, grants) in plugin_files(&options.plugins)? {
        tracing::info!(path = %path.display(), "loading plugin (compiled on first load, cached after)");
        let (runtime, mapper, trust) = (
            runtime.clone(),
            Arc::clone(&mapper),
            options.trust_declarations,
        );
        loads.spawn_blocking(move || {
            let loaded = load(&runtime, &mapper, &path, &grants, trust);
            (path, loaded)
        });
    }
    let mut loaded = Vec::new();
    while let Some(done) = loads.join_next().await {
        match done {
            Ok((path, Ok((plugin, config)))) => {
                tracing::info!(plugin = %plugin.declaration().name, digest = %plugin.digest(),
                    path = %path.display(), "plugin loaded");
                loaded.push((path, plugin, config));
            }
            Ok((path, Err(error))) => {
                tracing::error!(path = %path.display(), %error, "plugin refused");
            }
            Err(error) => tracing::error!(%error, "plugin load failed"),
        }
    }
    // Started in the directory's order, whatever order they compiled in.
    loaded.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, plugin, config) in loaded {
        engine.start(
            Arc::new(plugin),
            Settings {
                config,
                ..Settings::default()
            },
        );
    }
    let mut shutdown = std::pin::pin!(shutdown);
    tokio::select! {
        () = engine.wait_synced() => {
            ready.store(true, Ordering::Relaxed);
            tracing::info!("caches synced; ready");
            shutdown.as_mut().await;
        }
        () = shutdown.as_mut() => {}
    }
    tracing::info!("shutting down: finishing in-flight reconciles");
    ready.store(false, Ordering::Relaxed);
    if tokio::time::timeout(options.shutdown_grace, engine.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(grace = ?options.shutdown_grace, "in-flight reconciles outlived the grace period");
    }
    let _ = stop_electing.send(true);
    if let Some(elector) = elector {
        let _ = elector.await;
    }
    server.abort();
    Ok(())
}

/// Applies every CustomResourceDefinition among `dir`'s `*.yaml` files, and
/// returns their names.
///
/// # Errors
/// [`DaemonError::Crd`] naming the file.
pub async fn install_crds(client: &kube::Client, dir: &Path) -> Result<Vec<String>, DaemonError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DaemonError::PluginDir {
        path: dir.to_owned(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    paths.sort();
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<CustomResourceDefinition>(&()),
    );
    let mut installed = Vec::new();
    for path in paths {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| DaemonError::Crd {
            path: path.clone(),
            source,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| failed(Box::new(e)))?;
        let objects = crate::replay::parse_objects(&text).map_err(|e| failed(Box::new(e)))?;
        for crd in objects
            .into_iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
        {
            let name = crd
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            api.patch(
                &name,
                &PatchParams::apply("kubewasm-dev").force(),
                &Patch::Apply(&crd),
            )
            .await
            .map_err(|e| failed(Box::new(e)))?;
            installed.push(name);
        }
    }
    Ok(installed)
}
