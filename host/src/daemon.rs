//! The host as a long-running process: `kubewasm run` (against any
//! cluster) and `kubewasm dev` (the embedded API server and the host in one
//! process).
//!
//! # `run`
//! 1. Reads the cluster's discovery into a [`RestMapper`](kubewasm_runtime::mapper::RestMapper),
//!    and keeps it up while it runs ([`discovery::keep_up`]: CRDs and
//!    APIServices watched). A plugin declaring a type not served waits
//!    (`kubewasm_plugin_loads_total{result="unserved"}`) and loads once the
//!    type is; one running when a type it declares goes stops, and waits
//!    the same way. `Plugin` resources are watched once their CRDs are
//!    served, at start or later.
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
//!    `/readyz` (ready once the first loads are done and every informer
//!    has listed once).
//! 4. Watches the directory (on change notifications, and twice a second
//!    regardless; [`Lifecycle`]): a plugin added is
//!    started; one whose component, grants or configuration changed is
//!    loaded beside the running version and swapped in place
//!    ([`Engine::replace`]: its queue and keys carry over, in-flight
//!    reconciles finish on the old version); if the new version is refused
//!    the old one keeps serving and the log and
//!    `kubewasm_plugin_loads_total{result="refused"}` say why (a refusal
//!    that may pass, such as a registry not reached, is tried again with
//!    backoff); a plugin whose component is gone is stopped and its
//!    informers released unless another plugin reads them.
//!    With leader election, informers start at once (a standby's caches
//!    are warm) but keys are reconciled only while this process holds the
//!    Lease.
//! 5. On shutdown: stops taking keys, lets in-flight steps finish (within
//!    the grace period), then releases the Lease so a standby takes over at
//!    once.
//!
//! # `dev`
//! `cli/dev.rs` starts the embedded API server (workload simulation on),
//! writes its kubeconfig and installs the CRDs (of `Plugin` and
//! `ClusterPlugin`, and those among the plugin directory's `*.yaml`
//! files) through a client like any other writer, then runs this with
//! `trust_declarations` (the examples run as they declare). The daemon
//! itself writes nothing to the cluster but through the engine.
//!
//! # Plugin resources
//! When the cluster serves `Plugin` and `ClusterPlugin` (`kubewasm crds`),
//! the host also runs what they ask for, beside the directory's plugins,
//! by the same rules ([`Lifecycle`]); a name is never taken from one
//! source by the other, and a name freed by one lets the other's plugin
//! load. Ready waits for their first loads too.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kubewasm_engine::Engine;
use kubewasm_engine::discovery::{self, DiscoveryError};
use kubewasm_engine::informer::InitialList;
use kubewasm_engine::leader::{self, LeaseConfig};
use kubewasm_engine::lifecycle::{self, Lifecycle};
use kubewasm_engine::plugin_dir::ScanError;
use kubewasm_engine::plugin_resource::ResourceOptions;
use kubewasm_engine::ring::{self, RingConfig};
use kubewasm_engine::serve;
use kubewasm_runtime::Runtime;

/// How `run` runs the host.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Where the plugins are.
    pub plugins: PathBuf,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    pub metrics_addr: SocketAddr,
    /// Serve them over TLS, `/metrics` to authorized clients only
    /// (`--metrics-secure`).
    pub metrics_tls: Option<MetricsTls>,
    /// Grant every plugin what it declares when it has no grants file.
    pub trust_declarations: bool,
    /// Steps running at once, host-wide.
    pub workers: usize,
    /// How long in-flight steps may take to finish at shutdown.
    pub shutdown_grace: Duration,
    /// Leader election: reconcile only while holding this Lease.
    pub leader_election: Option<LeaseConfig>,
    /// Sharding: reconcile the primaries of the slots this replica holds in
    /// its ring ([`kubewasm_engine::ring`]); `Plugin` statuses are written by
    /// the holder of slot 0.
    pub sharding: Option<RingConfig>,
    /// How informers list.
    pub initial_list: InitialList,
    /// Where plugins named by OCI references (`NAME.oci`) come from.
    pub artifacts: kubewasm_engine::oci::Artifacts,
    /// How `Plugin` and `ClusterPlugin` resources run (watched when the
    /// cluster serves them).
    pub resources: ResourceOptions,
    /// The shares of the host's workers of the directory's plugins, by
    /// name (default [`kubewasm_engine::fair::DEFAULT_SHARE`]).
    pub shares: BTreeMap<String, u32>,
    /// Every artifact pulled must be signed by one of these keys (none:
    /// only what a resource's `spec.verify` asks).
    pub required_signatures: kubewasm_engine::signature::PublicKeys,
    /// How often every primary is queued again (a plugin's own
    /// `resync-seconds` prevails).
    pub resync: Duration,
    /// Most keys whose inputs are remembered across plugins, each plugin
    /// its share (`--remembered-keys`).
    pub remembered: usize,
    /// Record reconciles as fixtures (`--record`).
    pub record: Option<kubewasm_engine::recorder::RecordOptions>,
}

/// The endpoints served securely ([`kubewasm_engine::serve::Secure`]).
#[derive(Clone, Debug)]
pub struct MetricsTls {
    /// The directory of `tls.crt` and `tls.key`; `None`: self-signed.
    pub cert_dir: Option<PathBuf>,
}

/// Why the host could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Discovery failed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The plugin directory could not be read.
    #[error(transparent)]
    PluginDir(#[from] ScanError),
    /// The endpoints' TLS could not be set up.
    #[error(transparent)]
    MetricsTls(#[from] kubewasm_engine::serve::tls::TlsError),
    /// The metrics address could not be bound.
    #[error("failed to listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The cluster the host talks to.
pub struct Cluster {
    /// A client of its API server.
    pub client: kube::Client,
    /// The API server's `host:port`: the `host` label of
    /// `rest_client_requests_total`, as client-go gives it.
    pub host: String,
}

/// Runs the host against `cluster` until `shutdown` resolves.
///
/// # Errors
/// [`DaemonError`] if discovery, the plugin directory or the metrics
/// address fail; a plugin that fails to load is logged, not fatal.
pub async fn run(
    cluster: Cluster,
    runtime: Runtime,
    options: HostOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    // Every request the host sends is counted, whoever sends it.
    let metrics = Arc::new(kubewasm_engine::metrics::Metrics::default());
    let client = metrics.counting(cluster.client, &cluster.host);
    let (discovered, keeping_up) =
        discovery::keep_up(client.clone(), discovery::mapper(&client).await?);
    let discovery_task = tokio::spawn(keeping_up);
    let client_for_resources = client.clone();
    let client_for_access = client.clone();
    let (leading, leading_rx) = tokio::sync::watch::channel(options.leader_election.is_none());
    let (stop_electing, stopped) = tokio::sync::watch::channel(false);
    let elector = options.leader_election.clone().map(|config| {
        let mut stopped = stopped.clone();
        tokio::spawn(leader::run(client.clone(), config, leading, async move {
            let _ = stopped.wait_for(|s| *s).await;
        }))
    });
    // With sharding, every replica's queues run; each step starts only for
    // a slot the replica holds, and Plugin statuses are written by the
    // holder of slot 0.
    let (status_writer, status_writer_rx) = tokio::sync::watch::channel(options.sharding.is_none());
    let ring = options.sharding.clone().map(|config| {
        let mut stopped = stopped.clone();
        ring::start(client.clone(), config, async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
    });
    let (shard, ring_task) = ring.unzip();
    let mut engine = Engine::measured(client, options.workers, leading_rx.clone(), metrics)
        .with_initial_list(options.initial_list)
        .with_resync(options.resync)
        .with_remembered(options.remembered)
        .with_runtime(&runtime);
    if let Some(shard) = &shard {
        engine = engine.with_shard(Arc::clone(shard));
    }
    if let Some(lease) = &options.leader_election {
        engine = engine.with_lease_name(&lease.name);
    }
    if let Some(record) = options.record.clone() {
        tracing::info!(dir = %record.dir.display(), "recording reconciles as fixtures");
        engine = engine.with_recorder(Arc::new(kubewasm_engine::recorder::Recorder::new(record)));
    }
    let statuses_by = if shard.is_some() {
        status_writer_rx
    } else {
        leading_rx.clone()
    };
    // Probes first: `/healthz` answers while plugins compile, `/readyz`
    // once they run and their caches are synced.
    let ready = Arc::new(AtomicBool::new(false));
    let secure = match &options.metrics_tls {
        Some(tls) => Some(serve::Secure {
            tls: serve::tls::server_config(tls.cert_dir.as_deref())?,
            access: Arc::new(serve::access::Access::new(client_for_access)),
        }),
        None => None,
    };
    let scheme = if secure.is_some() { "https" } else { "http" };
    let (addr, server) = serve::serve(
        options.metrics_addr,
        engine.probe(Arc::clone(&ready)),
        secure,
    )
    .await
    .map_err(|source| DaemonError::Listen {
        addr: options.metrics_addr,
        source,
    })?;
    tracing::info!(%addr, scheme, "serving /metrics, /healthz and /readyz");
    eprintln!("kubewasm: metrics on {scheme}://{addr}/metrics");
    // Every plugin loads at once, each on a blocking thread (a first load
    // compiles: seconds for an interpreted plugin; later ones read the
    // precompiled cache). Then the directory and the plugin resources are
    // watched: a plugin added, changed or removed is loaded, swapped or
    // stopped while the host runs.
    let sources = kubewasm_engine::loader::Sources {
        runtime,
        discovered,
        trust: options.trust_declarations,
        artifacts: options.artifacts.clone(),
        required_signatures: options.required_signatures.clone(),
    };
    let mut plugins = Lifecycle::start(
        client_for_resources,
        lifecycle::Setup {
            sources,
            directory: options.plugins.clone(),
            shares: options.shares.clone(),
            resources: options.resources.clone(),
            writes_statuses: statuses_by,
        },
    )?;
    let mut shutdown = std::pin::pin!(shutdown);
    let mut synced = false;
    loop {
        let event = tokio::select! {
            () = shutdown.as_mut() => break,
            event = plugins.next_event() => event,
        };
        plugins.handle(&mut engine, event).await;
        // Ready once the first loads are done and every informer listed.
        if !synced && plugins.settled() && engine.ready() {
            synced = true;
            tracing::info!("caches synced; ready");
        }
        // A replica of a ring is ready while it holds slots.
        let held = shard.as_ref().map(|s| s.held());
        status_writer.send_if_modified(|writes| {
            let now = held.is_some_and(|h| h & 1 != 0);
            std::mem::replace(writes, now) != now
        });
        ready.store(synced && held.is_none_or(|h| h != 0), Ordering::Relaxed);
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
    if let Some(task) = ring_task {
        // Its slots released after the steps in flight, its Lease deleted.
        let _ = task.await;
    }
    server.abort();
    discovery_task.abort();
    Ok(())
}
