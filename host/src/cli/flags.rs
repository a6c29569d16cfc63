//! Flags more than one command takes: the sandbox's ([`RuntimeFlags`]: every
//! command that runs a plugin), the host's ([`HostFlags`]: `run` and `dev`)
//! and a registry's ([`RegistryFlags`]: `push`, `pull`, and the host for
//! plugins named by OCI references).

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use kubewasm_engine::informer::InitialList;
use kubewasm_engine::oci;
use kubewasm_engine::plugin_resource::ResourceOptions;
use kubewasm_engine::recorder::RecordOptions;
use kubewasm_engine::signature::PublicKeys;
use kubewasm_runtime::private_dir::PrivateDir;
use kubewasm_runtime::{InstanceReuse, Limits, Runtime, RuntimeConfig};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::error::CliError;
use super::process::read_bytes;
use crate::daemon::{HostOptions, MetricsTls};

/// How every plugin call is run: its deadline, memory and output limits,
/// and where compiled plugins are kept.
#[derive(Debug, clap::Args)]
pub(super) struct RuntimeFlags {
    /// Directory of precompiled plugins [default: $XDG_CACHE_HOME/kubewasm or ~/.cache/kubewasm].
    #[arg(long, env = "KUBEWASM_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// CPU deadline of one plugin call, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    deadline_ms: u64,
    /// Memory limit of one plugin instance (all its memories), in MiB.
    #[arg(long, default_value_t = 256)]
    memory_limit_mib: usize,
    #[command(flatten)]
    limits: LimitFlags,
    /// Compile a component not precompiled yet with the optimizing compiler
    /// before it runs, rather than run it at once on baseline code (Winch)
    /// and swap in its optimized code once compiled.
    #[arg(long)]
    no_baseline_compiler: bool,
}

impl RuntimeFlags {
    /// The directory of precompiled plugins, if there is one.
    pub(super) fn cache_dir(&self) -> Option<PathBuf> {
        self.cache_dir.clone().or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
                .map(|dir| dir.join("kubewasm"))
        })
    }

    /// The runtime these flags describe, its instance budget from `host`
    /// when a host runs it.
    ///
    /// # Errors
    /// [`CliError::Runtime`] when the engine does not start.
    pub(super) fn runtime(
        &self,
        reuse: InstanceReuse,
        host: Option<&HostFlags>,
    ) -> Result<Runtime, CliError> {
        let mut config = RuntimeConfig::default()
            .baseline(!self.no_baseline_compiler)
            .deadline(Duration::from_millis(self.deadline_ms))
            .memory_limit(self.memory_limit_mib << 20)
            .instance_reuse(reuse)
            .limits(Limits::from(&self.limits));
        if let Some(host) = host {
            if let Some(count) = host.max_instances {
                config = config.max_instances(count);
            }
            if let Some(count) = host.max_warm_instances {
                config = config.max_warm_instances(count);
            }
            if let Some(mib) = host.warm_memory_mib {
                config = config.warm_memory(mib.saturating_mul(1 << 20));
            }
        }
        if let Some(dir) = self.cache_dir() {
            config = config.cache_dir(dir);
        }
        Ok(Runtime::new(config)?)
    }
}

/// Output limits of every plugin call.
#[derive(Debug, clap::Args)]
struct LimitFlags {
    /// Most actions in one outcome.
    #[arg(long, default_value_t = Limits::default().actions)]
    max_actions: u64,
    /// Most bytes of one object a plugin returns.
    #[arg(long, default_value_t = Limits::default().object_bytes)]
    max_object_bytes: u64,
    /// Most bytes of one outcome.
    #[arg(long, default_value_t = Limits::default().outcome_bytes)]
    max_outcome_bytes: u64,
    /// Most log records per call.
    #[arg(long, default_value_t = Limits::default().log_records)]
    max_log_records: u64,
    /// Most bytes of log records per call.
    #[arg(long, default_value_t = Limits::default().log_bytes)]
    max_log_bytes: u64,
    /// Most keys one map-keys call returns.
    #[arg(long, default_value_t = Limits::default().map_keys)]
    max_map_keys: u64,
    /// Most host calls (cache reads, log records) per call.
    #[arg(long, default_value_t = Limits::default().hostcalls)]
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

/// How to reach a registry.
#[derive(Debug, clap::Args)]
pub(super) struct RegistryFlags {
    /// Plain HTTP rather than HTTPS (a registry on loopback).
    #[arg(long)]
    plain_http: bool,
    /// PEM file of CA certificates trusted for registries' TLS besides the
    /// system's (a private registry's CA); repeatable.
    #[arg(long, value_name = "FILE")]
    registry_ca: Vec<PathBuf>,
    /// Docker config file with the registry's credentials [default:
    /// $DOCKER_CONFIG/config.json, else ~/.docker/config.json].
    #[arg(long)]
    docker_config: Option<PathBuf>,
    /// Seconds a registry may take to accept a connection, and to send each
    /// part of an answer (for a push, counted from each part's upload on):
    /// one that accepts and says nothing is given up on (a plugin's load is
    /// then tried again with backoff).
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..=3600))]
    registry_timeout: u64,
    /// Seconds a whole pull (a manifest and its layer) may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pull_deadline: u64,
}

impl RegistryFlags {
    /// The registry access these flags describe.
    ///
    /// # Errors
    /// [`CliError::Oci`] when the Docker config cannot be read,
    /// [`CliError::Read`] or [`CliError::RegistryCa`] when a `--registry-ca`
    /// file cannot be read or holds no certificate.
    pub(super) fn access(&self) -> Result<oci::Access, CliError> {
        let mut roots = Vec::new();
        for path in &self.registry_ca {
            let pem = read_bytes(path)?;
            let before = roots.len();
            for certificate in CertificateDer::pem_slice_iter(&pem) {
                let certificate = certificate.map_err(|error| CliError::RegistryCa {
                    path: path.clone(),
                    reason: error.to_string(),
                })?;
                roots.push(certificate.to_vec());
            }
            if roots.len() == before {
                return Err(CliError::RegistryCa {
                    path: path.clone(),
                    reason: "no PEM certificate in it".to_owned(),
                });
            }
        }
        Ok(oci::Access {
            plain_http: self.plain_http,
            roots,
            credentials: oci::Credentials::load(self.docker_config.as_deref())?,
            timeouts: oci::Timeouts {
                request: std::time::Duration::from_secs(self.registry_timeout),
                pull: std::time::Duration::from_secs(self.pull_deadline),
            },
        })
    }
}

/// The host's flags.
#[derive(Debug, clap::Args)]
pub(super) struct HostFlags {
    /// Directory of plugin components (`NAME.wasm`, grants in `NAME.grants.yaml`).
    #[arg(long, default_value = "target/plugins")]
    pub(super) plugins: PathBuf,
    /// Where `/metrics`, `/healthz` and `/readyz` listen; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: std::net::SocketAddr,
    /// Serve the endpoints over TLS, and `/metrics` only to a client whose
    /// bearer token the cluster authenticates (TokenReview) and whose user
    /// it allows to `get` the URL `/metrics` (SubjectAccessReview), as
    /// controller-runtime's secure metrics server; the probes stay open.
    #[arg(long)]
    metrics_secure: bool,
    /// With --metrics-secure: a directory holding `tls.crt` and `tls.key`
    /// (PEM), read again when they change (a renewed Secret is served from
    /// the next handshake; a pair that does not load keeps the one served)
    /// [default: a self-signed certificate made at start].
    #[arg(long, value_name = "DIR", requires = "metrics_secure")]
    metrics_cert_dir: Option<PathBuf>,
    /// Reconciles running at once, across all plugins.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Instances alive at once across every plugin, warm or in a call (the
    /// least recently used warm one makes room; a call finding every one
    /// busy waits its turn) [default: as many at the memory limit as this
    /// machine's memory, or its cgroup's limit, holds; 16 at least].
    #[arg(long)]
    max_instances: Option<u32>,
    /// Linear memory, in MiB, the warm instances of every plugin may hold
    /// between them while they wait for their plugin's next call (the least
    /// recently used idle one goes first). A warm call of the JavaScript
    /// example is about five times cheaper than one on a fresh instance,
    /// which holds some 3.5 MiB; a plugin with no work left lets its
    /// instances go [default: a sixteenth of this machine's memory, or its
    /// cgroup's limit; 64 MiB at least].
    #[arg(long, value_name = "MIB")]
    warm_memory_mib: Option<usize>,
    /// Instances kept when a call ends, across all plugins, those in calls
    /// counted, whatever memory they hold [default: --max-instances].
    #[arg(long)]
    max_warm_instances: Option<u32>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(super) log_format: LogFormat,
    /// Export traces (a span per reconcile, its guest call, cache reads and
    /// writes as children) over OTLP in protobuf over HTTP to this
    /// collector's base URL (`URL/v1/traces`), as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` would name it: `http://collector:4318`
    /// [default: no traces].
    #[arg(long, value_name = "URL")]
    pub(super) otlp_endpoint: Option<String>,
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
    /// Let namespaced Plugins pull with the host's registry credentials
    /// too (by default a tenant pulls with its own pull secrets only; the
    /// host's serve the plugin directory and ClusterPlugins).
    #[arg(long)]
    share_registry_credentials: bool,
    /// A directory plugin's share of the host's workers when plugins
    /// compete for them, `NAME=SHARE` (1 to 1000; default 1), repeated per
    /// plugin. A Plugin or ClusterPlugin sets its own `spec.share`.
    #[arg(long = "share", value_name = "NAME=SHARE", value_parser = parse_share)]
    shares: Vec<(String, u32)>,
    /// Public keys (PEM files, as `cosign.pub`), repeated: every plugin
    /// artifact the host pulls (`NAME.oci`, Plugin, ClusterPlugin) must be
    /// signed by one of them on its manifest digest (cosign's layout).
    #[arg(long = "require-signatures", value_name = "PUB")]
    require_signatures: Vec<PathBuf>,
    /// How often every primary is queued again, for plugins that declare
    /// no `resync-seconds`, in seconds (controller-runtime's SyncPeriod). A
    /// key whose inputs are unchanged since its last successful reconcile
    /// is not called (`kubewasm_reconcile_skipped_total`), unless its
    /// plugin declared its own resync.
    #[arg(long, default_value_t = 36_000, value_parser = clap::value_parser!(u64).range(1..))]
    resync_seconds: u64,
    /// Most keys whose last inputs are remembered (for skipping a call
    /// whose inputs are unchanged), across every plugin: each plugin holds
    /// at most its share, this divided by the plugins running, and a key
    /// forgotten simply runs its next step (some 72 bytes a key).
    #[arg(long, default_value_t = kubewasm_engine::controller::DEFAULT_REMEMBERED)]
    remembered_keys: usize,
    /// Record every reconcile of the plugins into DIR (one directory per
    /// plugin, a JSON fixture per call: key, configuration, clock, every
    /// object read, the requests produced), for `kubewasm replay
    /// --fixture`.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Record only this plugin (repeated; default: all).
    #[arg(long = "record-plugin", value_name = "NAME", requires = "record")]
    record_plugins: Vec<String>,
    /// Fixtures kept per plugin; the oldest go first.
    #[arg(long, default_value_t = 1000, requires = "record")]
    record_max_files: usize,
    /// Bytes of fixtures kept per plugin; the oldest go first.
    #[arg(long, default_value_t = 64 << 20, requires = "record")]
    record_max_bytes: u64,
    /// Keep Secrets' values in fixtures (by default each is replaced by
    /// `redacted`).
    #[arg(long, requires = "record")]
    record_secrets: bool,
}

/// Parses `NAME=SHARE`.
fn parse_share(text: &str) -> Result<(String, u32), String> {
    let (name, share) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=SHARE"))?;
    if !kubewasm_runtime::is_plugin_name(name) {
        return Err(format!("`{name}` is no plugin name (a DNS label)"));
    }
    match share.parse::<u32>() {
        Ok(share @ 1..=1000) => Ok((name.to_owned(), share)),
        _ => Err(format!(
            "the share `{share}` is not a whole number from 1 to 1000"
        )),
    }
}

impl HostFlags {
    /// The host's options; pulled artifacts are cached in the host's
    /// private directory of `cache_dir`.
    ///
    /// # Errors
    /// [`CliError::Oci`] when the registry's Docker config cannot be read,
    /// [`CliError::CacheDir`] when the private directory cannot be used.
    pub(super) fn options(
        &self,
        trust_declarations: bool,
        initial_list: InitialList,
        cache_dir: Option<PathBuf>,
    ) -> Result<HostOptions, CliError> {
        let dir =
            PrivateDir::open(cache_dir.unwrap_or_else(|| std::env::temp_dir().join("kubewasm")))?;
        Ok(HostOptions {
            artifacts: oci::Artifacts::new(dir, self.registry.access()?),
            plugins: self.plugins.clone(),
            metrics_addr: self.metrics_addr,
            metrics_tls: self.metrics_secure.then(|| MetricsTls {
                cert_dir: self.metrics_cert_dir.clone(),
            }),
            trust_declarations,
            workers: self.workers,
            shutdown_grace: Duration::from_secs(30),
            leader_election: None,
            sharding: None,
            initial_list,
            resources: ResourceOptions {
                host_namespace: pod_namespace(),
                impersonate: self
                    .impersonate_tenants
                    .then(|| self.tenant_service_account.clone()),
                share_registry_credentials: self.share_registry_credentials,
            },
            shares: self.shares.iter().cloned().collect(),
            resync: Duration::from_secs(self.resync_seconds),
            remembered: self.remembered_keys,
            record: self.record.clone().map(|dir| RecordOptions {
                dir,
                plugins: (!self.record_plugins.is_empty())
                    .then(|| self.record_plugins.iter().cloned().collect()),
                max_files: self.record_max_files,
                max_bytes: self.record_max_bytes,
                secrets: self.record_secrets,
            }),
            required_signatures: read_keys(&self.require_signatures)?,
        })
    }
}

/// The namespace of the pod this runs in, or `default` outside a cluster.
pub(super) fn pod_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|ns| ns.trim().to_owned())
        .ok()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// How the host logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The public keys of `paths` (PEM files).
///
/// # Errors
/// [`CliError::Read`], [`CliError::Signature`] for a file holding no key.
pub(super) fn read_keys(paths: &[PathBuf]) -> Result<PublicKeys, CliError> {
    let mut keys = PublicKeys::default();
    for path in paths {
        let text = String::from_utf8_lossy(&read_bytes(path)?).into_owned();
        keys.add_pem(&path.display().to_string(), &text)?;
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::parse_share;

    #[test]
    fn a_share_should_name_a_plugin_and_a_weight_from_1_to_1000() {
        assert_eq!(parse_share("reporter=3"), Ok(("reporter".to_owned(), 3)));
        assert_eq!(parse_share("a=1000"), Ok(("a".to_owned(), 1000)));
        for bad in [
            "reporter",
            "reporter=0",
            "reporter=1001",
            "reporter=x",
            "Bad_Name=2",
            "=2",
        ] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
    }
}
