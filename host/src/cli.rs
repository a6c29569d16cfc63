//! The `kubewasm` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::cache::MemoryCache;
use crate::engine::informer::InitialList;
use crate::engine::leader::LeaseConfig;
use crate::grants::{GrantsFileError, OperatorGrants};
use crate::mapper::{MapperError, RestMapper};
use crate::oci;
use crate::replay::{self, ReplayError};
use crate::resource::{InvalidKey, ObjectKey};
use crate::runtime::{
    InstanceReuse, Limits, LoadError, LoadOptions, Request, Runtime, RuntimeConfig, RuntimeError,
};

/// kubewasm: Kubernetes controllers whose reconcile logic runs in sandboxed
/// WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "kubewasm", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Directory of precompiled plugins [default: $XDG_CACHE_HOME/kubewasm or ~/.cache/kubewasm].
    #[arg(long, global = true, env = "KUBEWASM_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// CPU deadline of one plugin call, in milliseconds.
    #[arg(long, global = true, default_value_t = 1000)]
    deadline_ms: u64,
    /// Memory limit of one plugin instance (all its memories), in MiB.
    #[arg(long, global = true, default_value_t = 256)]
    memory_limit_mib: usize,
    /// Run and dev: instances alive at once across every plugin, warm or in
    /// a call (the least recently used warm one makes room; a call finding
    /// every one busy waits its turn) [default: as many at the memory limit
    /// as this machine's memory, or its cgroup's limit, holds; 16 at least].
    #[arg(long, global = true)]
    max_instances: Option<u32>,
    #[command(flatten)]
    limits: LimitFlags,
    /// Run and dev: compile a component not precompiled yet with the
    /// optimizing compiler before it runs, rather than run it at once on
    /// baseline code (Winch) and swap in its optimized code once compiled.
    #[arg(long, global = true)]
    no_baseline_compiler: bool,
}

/// Output limits of every plugin call.
#[derive(Debug, clap::Args)]
struct LimitFlags {
    /// Most actions in one outcome.
    #[arg(long, global = true, default_value_t = Limits::default().actions)]
    max_actions: u64,
    /// Most bytes of one object a plugin returns.
    #[arg(long, global = true, default_value_t = Limits::default().object_bytes)]
    max_object_bytes: u64,
    /// Most bytes of one outcome.
    #[arg(long, global = true, default_value_t = Limits::default().outcome_bytes)]
    max_outcome_bytes: u64,
    /// Most log records per call.
    #[arg(long, global = true, default_value_t = Limits::default().log_records)]
    max_log_records: u64,
    /// Most bytes of log records per call.
    #[arg(long, global = true, default_value_t = Limits::default().log_bytes)]
    max_log_bytes: u64,
    /// Most keys one map-keys call returns.
    #[arg(long, global = true, default_value_t = Limits::default().map_keys)]
    max_map_keys: u64,
    /// Most host calls (cache reads, log records) per call.
    #[arg(long, global = true, default_value_t = Limits::default().hostcalls)]
    max_hostcalls: u64,
}

impl From<&LimitFlags> for Limits {
    fn from(f: &LimitFlags) -> Self {
        Self {
            actions: f.max_actions,
            object_bytes: f.max_object_bytes,
            outcome_bytes: f.max_outcome_bytes,
            log_records: f.max_log_records,
            log_bytes: f.max_log_bytes,
            map_keys: f.max_map_keys,
            hostcalls: f.max_hostcalls,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded Kubernetes API server until SIGTERM or Ctrl-C.
    Apiserver {
        /// Address to listen on; port 0 picks a free one (the kubeconfig says which).
        #[arg(long, default_value = "127.0.0.1:6443")]
        listen: std::net::SocketAddr,
        /// Where to write the kubeconfig that kubectl and kube-rs use as is.
        #[arg(long)]
        kubeconfig_out: PathBuf,
        /// Simulate workloads: mark Deployments, ReplicaSets and StatefulSets
        /// available shortly after their spec changes (no pod runs).
        #[arg(long)]
        simulate_workloads: bool,
        /// Keep state (objects, resource versions, credentials) in this
        /// directory across restarts; without it, state is in memory.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Add this many milliseconds to every request before answering it
        /// (a client here then waits on round trips as against a remote
        /// cluster: for benchmarks).
        #[arg(long, default_value_t = 0)]
        request_latency_ms: u64,
        /// Serve KEP-5866 shard selectors (`shardSelector` on lists and
        /// watches); `false` ignores them, as a server without the feature
        /// does (the hosts then filter their shares themselves).
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        shard_selectors: bool,
    },
    /// Run every plugin in a directory as a controller against a cluster,
    /// until SIGTERM or Ctrl-C.
    Run {
        /// The kubeconfig to use [default: $KUBECONFIG, ~/.kube/config, or
        /// the in-cluster configuration].
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        #[command(flatten)]
        host: HostFlags,
        /// Grant a plugin with no grants file exactly what it declares.
        #[arg(long)]
        trust_declarations: bool,
        /// Reconcile only while holding the Lease (one active replica).
        #[arg(long, conflicts_with = "sharding")]
        leader_elect: bool,
        /// Join the replicas sharing `--leader-election-id` into a ring and
        /// reconcile only this replica's share of every plugin's primaries
        /// (each replica holds a member Lease; the hash space's slots move
        /// between replicas without overlap).
        #[arg(long)]
        sharding: bool,
        /// With --sharding: place primaries by the hash of their uid, or of
        /// their namespace (a namespace's objects stay on one replica).
        #[arg(long, value_enum, default_value_t = ShardBy::Uid)]
        shard_by: ShardBy,
        /// Namespace of the Lease [default: the pod's namespace in a
        /// cluster, else `default`].
        #[arg(long)]
        leader_election_namespace: Option<String>,
        /// Name of the Lease.
        #[arg(long, default_value = "kubewasm")]
        leader_election_id: String,
        /// How long the Lease holds without renewal, in seconds (renewals
        /// every 2/15 of it; a leader steps down after 2/3 of it).
        #[arg(long, default_value_t = 15)]
        lease_duration_seconds: u64,
        /// Get informers' lists as watch streams (`sendInitialEvents`), not
        /// paged lists: only for a server that serves them (Kubernetes 1.32+
        /// with `WatchList` on; `kubewasm dev` always does).
        #[arg(long)]
        streaming_lists: bool,
    },
    /// The embedded API server (workload simulation on) and the host in one
    /// process, with the CRDs found in the plugin directory installed; serves
    /// until Ctrl-C.
    Dev {
        /// Address of the API server; port 0 picks a free one.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Where to write the kubeconfig for kubectl.
        #[arg(long, default_value = "target/kubewasm-dev.kubeconfig")]
        kubeconfig_out: PathBuf,
        #[command(flatten)]
        host: HostFlags,
    },
    /// Publish a plugin component to an OCI registry (CNCF Wasm layout);
    /// prints the manifest's digest.
    Push {
        /// The plugin component.
        plugin: PathBuf,
        /// Where: `[oci://]REGISTRY/REPOSITORY:TAG`.
        reference: String,
        #[command(flatten)]
        registry: RegistryFlags,
    },
    /// Fetch a plugin component from an OCI registry by tag or digest,
    /// verify it and write it to a file; prints the manifest's digest.
    Pull {
        /// What: `[oci://]REGISTRY/REPOSITORY(:TAG|@sha256:DIGEST)`.
        reference: String,
        /// The file to write.
        #[arg(short = 'o', long)]
        output: PathBuf,
        #[command(flatten)]
        registry: RegistryFlags,
    },
    /// Print the CustomResourceDefinitions of `Plugin` and `ClusterPlugin`
    /// (`deploy/crds.yaml`).
    Crds,
    /// Create a plugin project of its own (Rust, Python or JavaScript) that
    /// builds, tests and replays: `make setup test build replay`.
    New {
        /// The plugin's name (a DNS label); also the directory's, unless
        /// --dir says otherwise.
        name: String,
        /// The language.
        #[arg(long, value_enum)]
        lang: crate::scaffold::Language,
        /// The primary type: GROUP/VERSION/KIND, or VERSION/KIND for the
        /// core group. A type kubewasm does not know is a custom one: the
        /// project gets its CRD.
        #[arg(long, default_value = "v1/ConfigMap")]
        primary: String,
        /// Where to create it [default: ./NAME].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The kubewasm checkout the SDK comes from (the Rust crate, and the
        /// packages `make sdk` builds) [default: the one this binary was
        /// built from].
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Print resource-type constants for Python or JavaScript plugins: every
    /// built-in type (what the SDKs ship as `kubewasm_guest.types` and
    /// `@kubewasm/guest/types`), or the types of CRDs.
    Types {
        /// The language.
        #[arg(long, value_enum)]
        lang: crate::typegen::Language,
        /// Files of CustomResourceDefinitions: their types instead of the
        /// built-in ones; repeatable.
        #[arg(long)]
        crd: Vec<PathBuf>,
    },
    /// Print a plugin's declaration as JSON.
    Inspect {
        /// The plugin component.
        plugin: PathBuf,
    },
    /// Run one reconcile against objects from a file and print the requests
    /// the host would send.
    Replay {
        /// The plugin component.
        plugin: PathBuf,
        /// Objects to fill the cache with (multi-document YAML or JSON);
        /// repeatable. CustomResourceDefinitions among them say how their
        /// types are served, as discovery would.
        #[arg(long, required = true)]
        objects: Vec<PathBuf>,
        /// The plugin's configuration (YAML or JSON).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The primary to reconcile: NAMESPACE/NAME, or NAME when cluster-scoped.
        #[arg(long, required_unless_present = "map")]
        key: Option<String>,
        /// Run `map-keys` instead, for the first object of FILE, of type
        /// TYPE (`GROUP/VERSION/KIND`, `v1/KIND` for the core group), and
        /// print the primary keys it maps to.
        #[arg(long, num_args = 2, value_names = ["TYPE", "FILE"], conflicts_with = "key")]
        map: Option<Vec<String>>,
        /// The operator's grants file, narrowing what the plugin may do
        /// (see README, "Grants").
        #[arg(long)]
        grants: Option<PathBuf>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Format::Yaml)]
        output: Format,
        /// The time the reconcile runs at (RFC 3339, `2026-01-01T00:00:00Z`)
        /// [default: now]: with it, two replays print the same bytes.
        #[arg(long)]
        now: Option<jiff::Timestamp>,
    },
}

/// How to reach a registry, shared by `push` and `pull`.
#[derive(Debug, clap::Args)]
struct RegistryFlags {
    /// Plain HTTP rather than HTTPS (a registry on loopback).
    #[arg(long)]
    plain_http: bool,
    /// Docker config file with the registry's credentials [default:
    /// $DOCKER_CONFIG/config.json, else ~/.docker/config.json].
    #[arg(long)]
    docker_config: Option<PathBuf>,
}

impl RegistryFlags {
    fn access(&self) -> Result<oci::Access, CliError> {
        Ok(oci::Access {
            plain_http: self.plain_http,
            credentials: oci::Credentials::load(self.docker_config.as_deref())?,
        })
    }
}

/// The host's flags, shared by `run` and `dev`.
#[derive(Debug, clap::Args)]
struct HostFlags {
    /// Directory of plugin components (`NAME.wasm`, grants in `NAME.grants.yaml`).
    #[arg(long, default_value = "target/plugins")]
    plugins: PathBuf,
    /// Where `/metrics`, `/healthz` and `/readyz` listen; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: std::net::SocketAddr,
    /// Reconciles running at once, across all plugins.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Instances kept when a call ends, across all plugins, those in calls
    /// counted (the least recently used idle one goes first). More keeps
    /// more plugins warm (a warm call of the JavaScript example is about
    /// five times cheaper than one on a fresh instance) for the memory of
    /// each (some 3.5 MiB for it) [default: --workers, one for each
    /// reconcile that can run at once].
    #[arg(long)]
    max_warm_instances: Option<u32>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// How plugins named by OCI references (`NAME.oci`) are fetched.
    #[command(flatten)]
    registry: RegistryFlags,
    /// Make a namespaced Plugin's writes as the ServiceAccount
    /// `--tenant-service-account` of its namespace (the host's account
    /// needs the `impersonate` verb on it).
    #[arg(long)]
    impersonate_tenants: bool,
    /// The ServiceAccount a tenant's writes are made as.
    #[arg(long, default_value = "kubewasm-tenant")]
    tenant_service_account: String,
}

impl HostFlags {
    /// The instances the runtime keeps warm.
    fn warm_instances(&self) -> u32 {
        self.max_warm_instances
            .unwrap_or_else(|| u32::try_from(self.workers).unwrap_or(u32::MAX))
    }

    /// The host's options; pulled artifacts are cached under `cache_dir`.
    fn options(
        &self,
        trust_declarations: bool,
        cache_dir: Option<PathBuf>,
    ) -> Result<crate::daemon::HostOptions, CliError> {
        let artifacts = cache_dir
            .unwrap_or_else(|| std::env::temp_dir().join("kubewasm"))
            .join("artifacts");
        Ok(crate::daemon::HostOptions {
            artifacts: oci::Artifacts::new(artifacts, self.registry.access()?),
            plugins: self.plugins.clone(),
            metrics_addr: self.metrics_addr,
            trust_declarations,
            workers: self.workers,
            shutdown_grace: Duration::from_secs(30),
            leader_election: None,
            sharding: None,
            initial_list: InitialList::Paged,
            resources: crate::plugin_resource::ResourceOptions {
                host_namespace: pod_namespace(),
                impersonate: self
                    .impersonate_tenants
                    .then(|| self.tenant_service_account.clone()),
            },
        })
    }
}

/// The namespace of the pod this runs in, or `default` outside a cluster.
fn pod_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|ns| ns.trim().to_owned())
        .ok()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// This process's identity among Lease candidates: the host name and a
/// random suffix, as client-go's examples make it.
fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "kubewasm".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// What `--sharding` places a primary by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ShardBy {
    /// `metadata.uid`.
    Uid,
    /// `metadata.namespace`.
    Namespace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    Yaml,
    Json,
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The runtime did not start.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The plugin was refused.
    #[error("failed to load {path}: {source}")]
    Load {
        /// The plugin file.
        path: PathBuf,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// An input file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The key did not parse.
    #[error(transparent)]
    Key(#[from] InvalidKey),
    /// `--map`'s type is not `GROUP/VERSION/KIND` of a type the fixtures
    /// serve.
    #[error(
        "unknown type `{0}`: expected GROUP/VERSION/KIND (v1/KIND for the core group) of a built-in type or of a CRD among the objects"
    )]
    UnknownType(String),
    /// Neither `--key` nor `--map` was given.
    #[error("replay needs --key NAMESPACE/NAME (or --map TYPE FILE)")]
    NoKey,
    /// `--map`'s file holds no object.
    #[error("{} holds no object", .0.display())]
    NoObject(PathBuf),
    /// The replay failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The grants file was refused.
    #[error(transparent)]
    Grants(#[from] GrantsFileError),
    /// The fixtures' CRDs were refused.
    #[error(transparent)]
    Mapper(#[from] MapperError),
    /// The output could not be encoded.
    #[error("failed to encode the output: {0}")]
    Encode(#[source] BoxError),
    /// The async runtime did not start.
    #[error("failed to start the async runtime: {0}")]
    AsyncRuntime(#[source] std::io::Error),
    /// The embedded API server failed.
    #[error("apiserver: failed to {during}: {source}")]
    Apiserver {
        /// What it was doing.
        during: &'static str,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The host failed.
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    /// A push or a pull failed.
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    /// No client could be configured for the cluster.
    #[error("failed to configure the cluster client: {0}")]
    Client(#[source] BoxError),
    /// `kubewasm types` failed.
    #[error(transparent)]
    Typegen(#[from] crate::typegen::TypegenError),
    /// `kubewasm new` failed.
    #[error(transparent)]
    Scaffold(#[from] crate::scaffold::ScaffoldError),
    /// A file could not be written.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Any error, kept whole as a source.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Turns an error of the embedded API server into a [`CliError`] saying
/// what it was doing.
fn apiserver_failed<E: std::error::Error + Send + Sync + 'static>(
    during: &'static str,
) -> impl FnOnce(E) -> CliError {
    move |e| CliError::Apiserver {
        during,
        source: Box::new(e),
    }
}

/// Parses the command line, runs it, and reports errors on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = match &cli.command {
        Command::Run { host, .. } | Command::Dev { host, .. } => host.log_format == LogFormat::Json,
        _ => false,
    };
    init_tracing(json);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("KUBEWASM_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,kubewasm=info,kubewasm::plugin=info")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .map(|dir| dir.join("kubewasm"))
}

/// Runs a parsed command line.
///
/// # Errors
/// [`CliError`] says what failed.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let cache_dir = || cli.cache_dir.clone().or_else(default_cache_dir);
    let plugin_runtime = |reuse, baseline, idle: Option<u32>| {
        let mut config = RuntimeConfig::default()
            .baseline(baseline)
            .deadline(Duration::from_millis(cli.deadline_ms))
            .memory_limit(cli.memory_limit_mib << 20)
            .instance_reuse(reuse)
            .limits(Limits::from(&cli.limits));
        if let Some(count) = cli.max_instances {
            config = config.max_instances(count);
        }
        if let Some(count) = idle {
            config = config.max_warm_instances(count);
        }
        if let Some(dir) = cache_dir() {
            config = config.cache_dir(dir);
        }
        Runtime::new(config)
    };
    let runtime = match &cli.command {
        Command::New {
            name,
            lang,
            primary,
            dir,
            sdk,
        } => {
            let dir = dir.clone().unwrap_or_else(|| PathBuf::from(name));
            let project = crate::scaffold::Project {
                name: name.clone(),
                language: *lang,
                primary: primary.clone(),
                sdk: sdk.clone().unwrap_or_else(|| {
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .parent()
                        .map_or_else(|| PathBuf::from("."), Path::to_owned)
                }),
                kubewasm: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("kubewasm")),
            };
            let files = project.create(&dir)?;
            println!("created {} ({} files):", dir.display(), files.len());
            for file in files {
                println!("  {file}");
            }
            println!("next: cd {} && make setup test build replay", dir.display());
            return Ok(());
        }
        Command::Crds => {
            print!("{}", crate::plugin_resource::crds_yaml());
            return Ok(());
        }
        Command::Types { lang, crd } => {
            if crd.is_empty() {
                print!("{}", crate::typegen::builtin(*lang));
                return Ok(());
            }
            let mut objects = Vec::new();
            for path in crd {
                let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
                    path: path.clone(),
                    source,
                })?;
                objects.extend(replay::parse_objects(&text)?);
            }
            print!("{}", crate::typegen::from_crds(*lang, &objects)?);
            return Ok(());
        }
        Command::Apiserver {
            listen,
            kubeconfig_out,
            simulate_workloads,
            data_dir,
            request_latency_ms,
            shard_selectors,
        } => {
            let config = kubewasm_apiserver::api::ApiConfig {
                simulate_workloads: simulate_workloads.then_some(Duration::from_secs(1)),
                request_latency: Duration::from_millis(*request_latency_ms),
                shard_selectors: *shard_selectors,
                ..kubewasm_apiserver::api::ApiConfig::default()
            };
            return apiserver(*listen, kubeconfig_out, config, data_dir.as_deref());
        }
        Command::Run {
            kubeconfig,
            host,
            trust_declarations,
            leader_elect,
            sharding,
            shard_by,
            leader_election_namespace,
            leader_election_id,
            lease_duration_seconds,
            streaming_lists,
        } => {
            let runtime = plugin_runtime(
                InstanceReuse::Reuse,
                !cli.no_baseline_compiler,
                Some(host.warm_instances()),
            )?;
            let mut options = host.options(*trust_declarations, cache_dir())?;
            if *streaming_lists {
                options.initial_list = InitialList::Streaming;
            }
            let namespace = leader_election_namespace
                .clone()
                .unwrap_or_else(pod_namespace);
            let lease_duration = Duration::from_secs((*lease_duration_seconds).max(1));
            if *leader_elect {
                options.leader_election = Some(
                    LeaseConfig::new(&namespace, leader_election_id, &identity())
                        .with_lease_duration(lease_duration),
                );
            }
            if *sharding {
                let mut ring = crate::engine::ring::RingConfig::new(
                    &namespace,
                    leader_election_id,
                    &identity(),
                    lease_duration,
                );
                ring.field = match shard_by {
                    ShardBy::Uid => kubewasm_core::shard::ShardField::Uid,
                    ShardBy::Namespace => kubewasm_core::shard::ShardField::Namespace,
                };
                options.sharding = Some(ring);
            }
            return block_on(async move {
                let client = client(kubeconfig.as_deref()).await?;
                crate::daemon::run(client, runtime, options, wait_for_shutdown()).await?;
                Ok(())
            });
        }
        Command::Dev {
            listen,
            kubeconfig_out,
            host,
        } => {
            let runtime = plugin_runtime(
                InstanceReuse::Reuse,
                !cli.no_baseline_compiler,
                Some(host.warm_instances()),
            )?;
            // The embedded server streams lists.
            let options = crate::daemon::HostOptions {
                initial_list: InitialList::Streaming,
                ..host.options(true, cache_dir())?
            };
            return block_on(dev(*listen, kubeconfig_out, runtime, options));
        }
        // One call or none: the baseline compiler makes a first replay of an
        // interpreted plugin take a second, not twenty (a cached optimized
        // build is still preferred).
        _ => plugin_runtime(InstanceReuse::Fresh, !cli.no_baseline_compiler, None)?,
    };
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).map_err(|source| CliError::Read { path, source })
    };
    let read_bytes = |path: &PathBuf| {
        std::fs::read(path).map_err(|source| CliError::Read {
            path: path.clone(),
            source,
        })
    };
    match cli.command {
        Command::Apiserver { .. }
        | Command::Run { .. }
        | Command::Dev { .. }
        | Command::Crds
        | Command::Types { .. }
        | Command::New { .. } => {}
        Command::Push {
            plugin,
            reference,
            registry,
        } => {
            let bytes = read_bytes(&plugin)?;
            let interfaces = runtime
                .interfaces(&bytes)
                .map_err(|source| CliError::Load {
                    path: plugin,
                    source,
                })?;
            let reference = oci::parse_reference(&reference)?;
            let access = registry.access()?;
            let component = oci::Component {
                bytes: &bytes,
                interfaces: &interfaces,
            };
            let digest = block_on_value(oci::push(&component, &reference, &access))??;
            println!("{digest}");
        }
        Command::Pull {
            reference,
            output,
            registry,
        } => {
            let reference = oci::parse_reference(&reference)?;
            let access = registry.access()?;
            let pulled = block_on_value(oci::pull(&reference, &access))??;
            // Only a plugin is written: a component of the contract's world.
            runtime
                .inspect(&pulled.bytes)
                .map_err(|source| CliError::Load {
                    path: PathBuf::from(reference.whole()),
                    source,
                })?;
            oci::write_atomically(&output, &pulled.bytes).map_err(|source| CliError::Write {
                path: output.clone(),
                source,
            })?;
            println!("{}", pulled.digest);
        }
        Command::Inspect { plugin } => {
            let declaration =
                runtime
                    .inspect(&read_bytes(&plugin)?)
                    .map_err(|source| CliError::Load {
                        path: plugin,
                        source,
                    })?;
            let json = serde_json::to_string_pretty(&declaration)
                .map_err(|e| CliError::Encode(Box::new(e)))?;
            println!("{json}");
        }
        Command::Replay {
            plugin,
            objects,
            config,
            key,
            grants,
            output,
            now,
            map,
        } => {
            // Parsed first: a bad key is reported before any compile.
            let key: Option<ObjectKey> = key.as_deref().map(str::parse).transpose()?;
            let mut fixtures = Vec::new();
            for path in objects {
                fixtures.extend(replay::parse_objects(&read(path)?)?);
            }
            let objects = fixtures;
            let cache =
                MemoryCache::from_objects(objects.iter().cloned()).map_err(ReplayError::from)?;
            let mapper = std::sync::Arc::new(RestMapper::for_fixtures(&objects)?);
            let mut options = LoadOptions::new(std::sync::Arc::clone(&mapper));
            if let Some(path) = grants {
                options = options.grants(OperatorGrants::from_file(&path)?);
            }
            let plugin = runtime
                .load(&read_bytes(&plugin)?, &options)
                .map_err(|source| CliError::Load {
                    path: plugin,
                    source,
                })?;
            let config = match config {
                Some(path) => replay::parse_config(&read(path)?)?,
                None => "{}".to_owned(),
            };
            if let Some([resource, file]) = map.as_deref() {
                let resource = mapped_type(&mapper, resource)?;
                let object = replay::parse_objects(&read(PathBuf::from(file))?)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| CliError::NoObject(PathBuf::from(file)))?;
                let report = replay::map(&plugin, cache, &resource, &object, &config)?;
                return print_report(&report, output);
            }
            let key = key.ok_or(CliError::NoKey)?;
            let mut request = Request {
                config,
                ..Request::new(key)
            };
            if let Some(now) = now {
                request.now = now;
            }
            print_report(&replay::replay(&plugin, cache, &request)?, output)?;
        }
    }
    Ok(())
}

/// Prints a replay's report as `output` says.
fn print_report(report: &impl serde::Serialize, output: Format) -> Result<(), CliError> {
    let text = match output {
        Format::Yaml => serde_yaml::to_string(report).map_err(|e| CliError::Encode(Box::new(e)))?,
        Format::Json => {
            serde_json::to_string_pretty(report).map_err(|e| CliError::Encode(Box::new(e)))? + "\n"
        }
    };
    print!("{text}");
    Ok(())
}

/// The type `GROUP/VERSION/KIND` (or `VERSION/KIND`) names, as `mapper`
/// serves it.
fn mapped_type(mapper: &RestMapper, text: &str) -> Result<crate::resource::ResourceType, CliError> {
    let parts: Vec<&str> = text.split('/').collect();
    let (group, version, kind) = match parts.as_slice() {
        [version, kind] => ("", *version, *kind),
        [group, version, kind] => (*group, *version, *kind),
        _ => return Err(CliError::UnknownType(text.to_owned())),
    };
    mapper
        .lookup(group, version, kind)
        .ok_or_else(|| CliError::UnknownType(text.to_owned()))
}

/// Runs `future` on a new multi-threaded tokio runtime.
fn block_on(future: impl Future<Output = Result<(), CliError>>) -> Result<(), CliError> {
    block_on_value(future)?
}

/// Runs `future` on a new multi-threaded tokio runtime; its output.
fn block_on_value<T>(future: impl Future<Output = T>) -> Result<T, CliError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::AsyncRuntime)?
        .block_on(future))
}

/// A client from `kubeconfig`, or the default configuration.
async fn client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client, CliError> {
    let failed = |e: BoxError| CliError::Client(e);
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| failed(e.into()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| failed(e.into()))?
        }
        None => kube::Config::infer().await.map_err(|e| failed(e.into()))?,
    };
    kube::Client::try_from(config).map_err(|e| failed(e.into()))
}

/// A running embedded API server and what it needs to be stopped cleanly.
struct Embedded {
    server: kubewasm_apiserver::server::ApiServer,
    store: kubewasm_apiserver::store::Store,
    url: String,
}

impl Embedded {
    /// Starts the embedded API server and writes its kubeconfig.
    async fn start(
        listen: std::net::SocketAddr,
        kubeconfig_out: &std::path::Path,
        config: kubewasm_apiserver::api::ApiConfig,
        data_dir: Option<&std::path::Path>,
    ) -> Result<Self, CliError> {
        use kubewasm_apiserver::api::Api;
        use kubewasm_apiserver::{seed, server::ApiServer, store::Store, tls::Credentials};

        let (store, credentials) = match data_dir {
            Some(dir) => (
                Store::open(dir, kubewasm_apiserver::store::DEFAULT_HISTORY)
                    .map_err(apiserver_failed("open the data directory"))?,
                Credentials::load_or_generate(dir, listen.ip())
                    .map_err(apiserver_failed("load the credentials"))?,
            ),
            None => (
                Store::default(),
                Credentials::generate(listen.ip())
                    .map_err(apiserver_failed("generate the credentials"))?,
            ),
        };
        seed::seed(&store).map_err(apiserver_failed("seed the store"))?;
        let server = ApiServer::start(
            listen,
            Api::new(store.clone(), config),
            Some(credentials.clone()),
        )
        .await
        .map_err(apiserver_failed("listen"))?;
        let url = format!("https://{}", server.addr());
        // The kubeconfig holds the admin token: owner-only, written atomically.
        kubewasm_apiserver::tls::write_private(
            kubeconfig_out,
            credentials.kubeconfig(&url).as_bytes(),
        )
        .map_err(|source| CliError::Write {
            path: kubeconfig_out.to_owned(),
            source,
        })?;
        Ok(Self { server, store, url })
    }

    /// Stops serving and flushes the store.
    async fn stop(self) -> Result<(), CliError> {
        drop(self.server);
        self.store.flush().await.map_err(|e| CliError::Apiserver {
            during: "flush the store",
            source: Box::new(e),
        })
    }
}

/// Serves the embedded API server until SIGTERM or Ctrl-C.
fn apiserver(
    listen: std::net::SocketAddr,
    kubeconfig_out: &std::path::Path,
    config: kubewasm_apiserver::api::ApiConfig,
    data_dir: Option<&std::path::Path>,
) -> Result<(), CliError> {
    block_on(async {
        let embedded = Embedded::start(listen, kubeconfig_out, config, data_dir).await?;
        eprintln!(
            "kubewasm apiserver: serving {}; kubeconfig in {}",
            embedded.url,
            kubeconfig_out.display()
        );
        wait_for_shutdown().await;
        eprintln!("kubewasm apiserver: shutting down");
        embedded.stop().await
    })
}

/// `kubewasm dev`: the embedded API server and the host, until Ctrl-C.
async fn dev(
    listen: std::net::SocketAddr,
    kubeconfig_out: &std::path::Path,
    runtime: Runtime,
    options: crate::daemon::HostOptions,
) -> Result<(), CliError> {
    if let Some(parent) = kubeconfig_out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(|source| CliError::Write {
            path: parent.to_owned(),
            source,
        })?;
    }
    let config = kubewasm_apiserver::api::ApiConfig {
        simulate_workloads: Some(Duration::from_secs(1)),
        ..kubewasm_apiserver::api::ApiConfig::default()
    };
    let embedded = Embedded::start(listen, kubeconfig_out, config, None).await?;
    let client = client(Some(kubeconfig_out)).await?;
    let mut crds = crate::daemon::install_plugin_crds(&client).await?;
    crds.extend(crate::daemon::install_crds(&client, &options.plugins).await?);
    let kubeconfig = kubeconfig_out.display();
    eprintln!(
        "kubewasm dev: API server at {} (workload simulation on); CRDs installed: {}\n\
         \x20 export KUBECONFIG={kubeconfig}\n\
         \x20 kubectl apply -f plugins/myapp/demo.yaml\n\
         \x20 kubectl get myapps,deployments,services\n\
         \x20 kubectl get myapp demo -o jsonpath='{{.status}}'\n\
         Ctrl-C stops it.",
        embedded.url,
        if crds.is_empty() {
            "none".to_owned()
        } else {
            crds.join(", ")
        },
    );
    let result = crate::daemon::run(client, runtime, options, wait_for_shutdown()).await;
    embedded.stop().await?;
    result.map_err(CliError::from)
}

/// Resolves on SIGTERM or Ctrl-C.
async fn wait_for_shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
