//! Plugins as resources: the host runs what `Plugin` and `ClusterPlugin`
//! objects (group `kubewasm.dev`) ask for, and reports how it went in their
//! status.
//!
//! # Expected flow
//! [`PluginResources::start`] watches both kinds (one reflector each).
//! Whenever they change, and on every tick, [`PluginResources::sync`]
//! compares what the objects ask for with what runs, level-triggered:
//! - a generation not acted on yet is loaded ([`Loads`]: pulled from its
//!   `source` with its pull secrets' credentials, compiled or taken from
//!   the precompiled cache, checked against its grants and its
//!   configuration's schema) or, when `suspend` is set, stopped;
//! - a resource gone stops its plugin (informers released unless shared);
//! - a refusal that may pass on its own (a registry or a pull secret not
//!   reachable) is tried again with exponential backoff.
//!
//! [`PluginResources::finish`] runs what a load gave: swapped in for the
//! running version (queue and keys kept) or started; a refusal leaves the
//! running version serving.
//!
//! # Phases ([`Phase`]), one state machine per resource
//! ```text
//!            load ok                  spec changed, load ok
//! Pending ───────────▶ Running ◀────────────────────────────┐
//!    │                  │  │  spec changed, refused          │
//!    │ refused          │  └──▶ Running + Degraded ──────────┘
//!    ▼                  │ suspend
//! Failed ◀─ ─ ─ ─ ─ ─ ─ ▼
//!  (load ok: Running)  Suspended (unset: Pending)
//! ```
//! `Ready` is true exactly while a version runs; `Degraded` is true while
//! the latest generation was refused, its reason and message saying why
//! (a declaration exceeding the grants names every excess verb and type).
//! `observedGeneration` is the generation the status speaks of.
//!
//! # Identity and tenancy
//! A `Plugin` `team-a/mover` runs as the plugin `team-a.mover` (field
//! manager `kubewasm-team-a.mover`, finalizer `kubewasm.dev/team-a.mover`),
//! confined to `team-a` whatever it declares: its informers watch only that
//! namespace, its reads and writes reach only it, and its pull secrets are
//! read only from it. With impersonation on, its writes are made as the
//! ServiceAccount `<account>` of its namespace. A `ClusterPlugin` runs as
//! its name, reaching the namespaces of its grants; a directory plugin of
//! the same name is never displaced by one.
//!
//! # Status and events
//! Written with server-side apply (field manager `kubewasm`) on the status
//! subresource, only by the leader and only when it differs from what the
//! object shows; reconcile counters are refreshed every
//! [`COUNTERS_EVERY`]. A refusal is also a `Warning` event (events.k8s.io,
//! reason as in `Degraded`) regarding the resource, in its namespace (a
//! ClusterPlugin's in `default`), as `kubectl describe` shows it.

pub mod types;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{CustomResourceExt, Resource, ResourceExt};
use serde_json::json;
use tokio::task::JoinSet;

use crate::controller::Settings;
use crate::loader::{self, Loaded, Loads, Prepared, Refused, Setup, Sources};
use crate::oci::{self, Credentials};
use crate::{Engine, LoadResult};
use kubewasm_runtime::CallLimits;
use kubewasm_runtime::grants::OperatorGrants;
pub use types::{
    ClusterPluginResource, CommonSpec, Phase, PluginLimits, PluginResource, PluginStatus,
};

/// How often a running plugin's reconcile counters are written to its
/// status.
pub const COUNTERS_EVERY: Duration = Duration::from_secs(10);

/// First wait before a refusal that may pass is tried again.
const RETRY_FIRST: Duration = Duration::from_secs(2);

/// Longest wait between tries.
const RETRY_MAX: Duration = Duration::from_secs(300);

/// The field manager of status writes.
const MANAGER: &str = "kubewasm";

/// A plugin resource: a namespaced `Plugin` or a `ClusterPlugin`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId {
    /// The Plugin's namespace; `None` for a ClusterPlugin.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl ResourceId {
    /// The name its plugin runs as: `NAMESPACE.NAME` for a Plugin, the
    /// name of a ClusterPlugin.
    pub fn plugin_name(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{namespace}.{}", self.name),
            None => self.name.clone(),
        }
    }

    /// [`Self::plugin_name`], if it can name a plugin: the resource's name
    /// a DNS label (a ClusterPlugin `team-a.mover` would pose as the
    /// Plugin `team-a/mover`), 63 characters at most in all.
    ///
    /// # Errors
    /// [`SpecError::Name`].
    pub fn checked_plugin_name(&self) -> Result<String, SpecError> {
        let name = self.plugin_name();
        if kubewasm_core::validation::is_dns_label(&self.name)
            && kubewasm_runtime::is_plugin_name(&name)
        {
            Ok(name)
        } else {
            Err(SpecError::Name(name))
        }
    }

    fn kind(&self) -> &'static str {
        if self.namespace.is_some() {
            "Plugin"
        } else {
            "ClusterPlugin"
        }
    }
}

impl std::fmt::Display for ResourceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "Plugin {namespace}/{}", self.name),
            None => write!(f, "ClusterPlugin {}", self.name),
        }
    }
}

/// Why a resource's spec cannot be run as it is.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The plugin name it would run as is not one.
    #[error(
        "it would run as `{0}`, which is no plugin name (a DNS label; a Plugin's `NAMESPACE.NAME`, 63 characters at most)"
    )]
    Name(String),
    /// A limit is not one.
    #[error("spec.limits.memory `{0}` is not a quantity of bytes (`64Mi`, `1Gi`, `500000`)")]
    Memory(String),
    /// A tenant named a Secret in another namespace.
    #[error(
        "pull secret {name}: a Plugin reads Secrets of its own namespace only, not of `{namespace}`"
    )]
    ForeignSecret {
        /// The Secret.
        name: String,
        /// The namespace it named.
        namespace: String,
    },
    /// A pull secret could not be read or is no docker config.
    #[error("pull secret {namespace}/{name}: {reason}")]
    PullSecret {
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The configuration is not JSON text (never: it came as JSON).
    #[error("spec.config: {0}")]
    Config(#[source] serde_json::Error),
}

/// One generation of a resource, as a load started for it.
#[derive(Clone, Debug)]
pub struct Generation {
    id: ResourceId,
    uid: String,
    generation: i64,
    concurrency: Option<u32>,
}

/// What the host does of one resource.
#[derive(Debug, Default)]
struct Tracked {
    uid: String,
    /// The generation last acted on (a load started, or stopped for
    /// `suspend`).
    generation: Option<i64>,
    /// The generation the outcome below is of.
    observed: Option<i64>,
    /// The version running: its artifact's digest.
    running: Option<String>,
    suspended: bool,
    /// The latest generation's refusal: reason and message.
    refused: Option<(&'static str, String)>,
    /// When to try a refused generation again, and the wait after that.
    retry: Option<(Instant, Duration)>,
    /// When the counters were last written.
    counted: Option<Instant>,
    /// The status write in flight, if any: one at a time per resource, so a
    /// slow API server does not pile them up.
    writing: Option<tokio::task::AbortHandle>,
}

/// How a refusal reads in a `Degraded` condition's reason.
fn reason(refused: &Refused) -> &'static str {
    match refused {
        Refused::Load(kubewasm_runtime::LoadError::NotGranted(_)) => "ExceedsGrants",
        Refused::Load(_) | Refused::Read(_) => "ComponentRefused",
        Refused::Oci(oci::OciError::Reference { .. }) => "InvalidSpec",
        Refused::Oci(_) => "PullFailed",
        Refused::Config { .. } => "ConfigRefused",
        Refused::Grants(_) | Refused::NoGrants { .. } => "InvalidGrants",
        Refused::NameTaken(_) => "NameTaken",
        Refused::Spec(SpecError::PullSecret { .. }) => "PullSecretUnreadable",
        Refused::Spec(_) => "InvalidSpec",
    }
}

/// Whether a refusal may pass on its own (tried again with backoff).
fn may_pass(refused: &Refused) -> bool {
    matches!(
        refused,
        Refused::Oci(oci::OciError::Registry { .. }) | Refused::Spec(SpecError::PullSecret { .. })
    )
}

/// Parses a quantity of bytes: an integer with an optional binary
/// (`Ki`..`Ei`) or decimal (`k`, `M`..`E`) suffix.
fn bytes_of(quantity: &str) -> Option<u64> {
    let digits = quantity.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let factor: u64 = match &quantity[digits.len()..] {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(factor)
}

/// A resource's limits over the host's.
fn limits(spec: Option<&PluginLimits>, host: CallLimits) -> Result<CallLimits, SpecError> {
    let Some(spec) = spec else {
        return Ok(host);
    };
    let mut limits = host;
    if let Some(memory) = &spec.memory {
        let bytes = bytes_of(memory).ok_or_else(|| SpecError::Memory(memory.clone()))?;
        limits.memory = usize::try_from(bytes).unwrap_or(usize::MAX);
    }
    if let Some(ms) = spec.deadline_milliseconds {
        limits.deadline = Duration::from_millis(ms);
    }
    let output = &mut limits.output;
    for (field, value) in [
        (&mut output.actions, spec.max_actions),
        (&mut output.object_bytes, spec.max_object_bytes),
        (&mut output.outcome_bytes, spec.max_outcome_bytes),
        (&mut output.log_records, spec.max_log_records),
        (&mut output.hostcalls, spec.max_hostcalls),
    ] {
        if let Some(value) = value {
            *field = value;
        }
    }
    Ok(limits)
}

/// What a resource asks for, with the grants its kind implies.
struct Asked {
    id: ResourceId,
    uid: String,
    generation: i64,
    common: CommonSpec,
    grants: OperatorGrants,
    status: Option<PluginStatus>,
}

impl Asked {
    fn of_plugin(object: &PluginResource) -> Option<Self> {
        let namespace = object.namespace()?;
        Some(Self {
            grants: OperatorGrants {
                namespaces: Some([namespace.clone()].into()),
                rules: object.spec.grants.as_ref().and_then(|g| g.rules.clone()),
            },
            id: ResourceId {
                namespace: Some(namespace),
                name: object.name_any(),
            },
            uid: object.uid()?,
            generation: object.metadata.generation.unwrap_or_default(),
            common: object.spec.common.clone(),
            status: object.status.clone(),
        })
    }

    fn of_cluster_plugin(object: &ClusterPluginResource) -> Option<Self> {
        let grants = object.spec.grants.clone().unwrap_or_default();
        Some(Self {
            grants: OperatorGrants {
                namespaces: grants.namespaces,
                rules: grants.rules,
            },
            id: ResourceId {
                namespace: None,
                name: object.name_any(),
            },
            uid: object.uid()?,
            generation: object.metadata.generation.unwrap_or_default(),
            common: object.spec.common.clone(),
            status: object.status.clone(),
        })
    }
}

/// What [`PluginResources::next_event`] gives.
#[derive(Debug)]
pub enum Event {
    /// A load finished: the plugin's name and what it gave.
    Loaded(String, Box<Loaded<Generation>>),
    /// A plugin resource changed.
    Changed,
}

/// How the host runs plugin resources.
#[derive(Clone, Debug, Default)]
pub struct ResourceOptions {
    /// Where a ClusterPlugin's pull secrets are by default: the host's
    /// namespace.
    pub host_namespace: String,
    /// Make a Plugin's writes as this ServiceAccount of its namespace.
    pub impersonate: Option<String>,
}

/// The plugin resources of a cluster and what runs of them (see the module
/// documentation).
pub struct PluginResources {
    client: kube::Client,
    sources: Sources,
    options: ResourceOptions,
    plugins: Store<PluginResource>,
    cluster: Store<ClusterPluginResource>,
    changed: Arc<tokio::sync::Notify>,
    /// Whether each kind's watch has listed once.
    listed: [Arc<AtomicBool>; 2],
    /// The watches: they stop when this goes.
    _watches: JoinSet<()>,
    tracked: BTreeMap<ResourceId, Tracked>,
    loads: Loads<Generation>,
    leading: tokio::sync::watch::Receiver<bool>,
    writes: JoinSet<()>,
}

impl PluginResources {
    /// Watches the plugin resources of the cluster `client` reaches. Must
    /// be called within a tokio runtime.
    pub fn start(
        client: kube::Client,
        sources: Sources,
        options: ResourceOptions,
        leading: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        let changed = Arc::new(tokio::sync::Notify::new());
        let mut watches = JoinSet::new();
        let listed: [Arc<AtomicBool>; 2] = Default::default();
        let plugins = reflect(
            Api::<PluginResource>::all(client.clone()),
            &changed,
            &listed[0],
            &mut watches,
        );
        let cluster = reflect(
            Api::<ClusterPluginResource>::all(client.clone()),
            &changed,
            &listed[1],
            &mut watches,
        );
        Self {
            client,
            sources,
            options,
            plugins,
            cluster,
            changed,
            listed,
            _watches: watches,
            tracked: BTreeMap::new(),
            loads: Loads::default(),
            leading,
            writes: JoinSet::new(),
        }
    }

    /// The next load to finish, or a change of the resources.
    pub async fn next_event(&mut self) -> Event {
        let changed = Arc::clone(&self.changed);
        tokio::select! {
            Some((name, loaded)) = self.loads.next() => Event::Loaded(name, Box::new(loaded)),
            () = changed.notified() => Event::Changed,
        }
    }

    /// Whether both kinds have been listed once.
    pub fn synced(&self) -> bool {
        self.listed.iter().all(|l| l.load(Ordering::Relaxed))
    }

    /// Loads not finished yet.
    pub fn pending(&self) -> usize {
        self.loads.pending()
    }

    /// Whether the plugin `name` runs from a resource.
    pub fn runs(&self, name: &str) -> bool {
        self.tracked
            .iter()
            .any(|(id, t)| t.running.is_some() && id.plugin_name() == name)
    }

    fn asked(&self) -> Vec<Asked> {
        let plugins = self.plugins.state();
        let cluster = self.cluster.state();
        plugins
            .iter()
            .filter_map(|p| Asked::of_plugin(p))
            .chain(cluster.iter().filter_map(|c| Asked::of_cluster_plugin(c)))
            .collect()
    }

    /// Compares what the resources ask for with what runs, and acts (see
    /// the module documentation); then writes the statuses that changed.
    pub async fn sync(&mut self, engine: &mut Engine) {
        if !self.synced() {
            return;
        }
        let asked = self.asked();
        let gone: Vec<ResourceId> = self
            .tracked
            .keys()
            .filter(|id| !asked.iter().any(|a| &a.id == *id))
            .cloned()
            .collect();
        for id in gone {
            let name = id.plugin_name();
            self.loads.cancel(&name);
            if self
                .tracked
                .remove(&id)
                .is_some_and(|t| t.running.is_some())
                && engine.stop(&name).await
            {
                engine.record_load(&name, LoadResult::Removed);
                tracing::info!(resource = %id, plugin = %name, "plugin resource deleted: stopped");
            }
        }
        let now = Instant::now();
        for asked in &asked {
            let tracked = self.tracked.entry(asked.id.clone()).or_default();
            if tracked.uid != asked.uid {
                // A new object (or one deleted and created again).
                *tracked = Tracked {
                    uid: asked.uid.clone(),
                    running: tracked.running.take(),
                    ..Tracked::default()
                };
            }
            let due = tracked.retry.is_some_and(|(at, _)| at <= now);
            if tracked.generation == Some(asked.generation) {
                let loading = tracked.observed != Some(asked.generation);
                if loading || !due {
                    continue;
                }
            } else {
                tracked.retry = None;
            }
            tracked.generation = Some(asked.generation);
            let name = asked.id.plugin_name();
            if asked.common.suspend {
                self.loads.cancel(&name);
                tracked.suspended = true;
                tracked.refused = None;
                tracked.observed = Some(asked.generation);
                if tracked.running.take().is_some() && engine.stop(&name).await {
                    engine.record_load(&name, LoadResult::Removed);
                }
                tracing::info!(resource = %asked.id, plugin = %name, "plugin suspended");
                continue;
            }
            tracked.suspended = false;
            tracked.observed = None;
            self.spawn(asked);
        }
        self.write_statuses(engine, &asked);
    }

    fn spawn(&mut self, asked: &Asked) {
        let name = asked.id.plugin_name();
        tracing::info!(resource = %asked.id, plugin = %name, generation = asked.generation,
            source = %asked.common.source, "loading plugin resource");
        let origin = Generation {
            id: asked.id.clone(),
            uid: asked.uid.clone(),
            generation: asked.generation,
            concurrency: asked.common.limits.as_ref().and_then(|l| l.concurrency),
        };
        let (sources, client, options) = (
            self.sources.clone(),
            self.client.clone(),
            self.options.clone(),
        );
        let (id, common, grants) = (asked.id.clone(), asked.common.clone(), asked.grants.clone());
        self.loads.spawn(&name.clone(), origin, move || {
            load(&sources, &client, &options, &id, name, &common, grants)
        });
    }

    /// Runs what a load gave (see the module documentation).
    pub async fn finish(&mut self, engine: &mut Engine, name: String, loaded: Loaded<Generation>) {
        let origin = match &loaded {
            Loaded::Ready { origin, .. } | Loaded::Refused { origin, .. } => origin.clone(),
        };
        let runs_here = self.runs(&name);
        let Some(tracked) = self
            .tracked
            .get_mut(&origin.id)
            .filter(|t| t.uid == origin.uid && t.generation == Some(origin.generation))
        else {
            return; // superseded by a later generation, or deleted
        };
        tracked.observed = Some(origin.generation);
        match loaded {
            Loaded::Ready { prepared, .. } if engine.running(&name) && !runs_here => {
                drop(prepared);
                let message = format!(
                    "a plugin named `{name}` runs from the plugin directory; this resource does not displace it"
                );
                tracing::error!(resource = %origin.id, plugin = %name, "{message}");
                tracked.refused = Some(("NameTaken", message));
            }
            Loaded::Ready { prepared, .. } => {
                let Prepared {
                    plugin,
                    config,
                    artifact,
                    tier_up,
                } = prepared;
                let applier = match (&self.options.impersonate, &origin.id.namespace) {
                    (Some(account), Some(namespace)) => engine
                        .applier()
                        .impersonating(&format!("system:serviceaccount:{namespace}:{account}")),
                    _ => None,
                };
                let defaults = Settings::default();
                let settings = Settings {
                    config,
                    applier,
                    // Within the host's, as every limit.
                    concurrency: origin.concurrency.map_or(defaults.concurrency, |c| {
                        usize::try_from(c)
                            .unwrap_or(defaults.concurrency)
                            .min(defaults.concurrency)
                    }),
                    ..defaults
                };
                let plugin = Arc::new(plugin);
                self.loads.tier_up(
                    &name,
                    origin.clone(),
                    &plugin,
                    &settings.config,
                    artifact.clone(),
                );
                let result = engine.run_loaded(plugin, settings, tier_up).await;
                tracing::info!(resource = %origin.id, plugin = %name, digest = ?artifact,
                    generation = origin.generation, "plugin {}", result.as_str());
                tracked.running = artifact.or_else(|| Some(String::new()));
                tracked.refused = None;
                tracked.retry = None;
            }
            Loaded::Refused { error, .. } => {
                engine.record_load(&name, LoadResult::Refused);
                if tracked.running.is_some() {
                    tracing::error!(resource = %origin.id, plugin = %name, %error,
                        "new version refused; the running version keeps serving");
                } else {
                    tracing::error!(resource = %origin.id, plugin = %name, %error, "plugin refused");
                }
                if may_pass(&error) {
                    let wait = tracked
                        .retry
                        .map_or(RETRY_FIRST, |(_, wait)| (wait * 2).min(RETRY_MAX));
                    tracked.retry = Some((Instant::now() + wait, wait));
                }
                tracked.refused = Some((reason(&error), error.to_string()));
            }
        }
        if let Some((reason, message)) = tracked.refused.clone() {
            self.report(&origin, reason, &message);
        }
        let asked = self.asked();
        self.write_statuses(engine, &asked);
    }

    /// Posts a `Warning` event regarding the resource a load was of (only
    /// while leading).
    fn report(&mut self, origin: &Generation, reason: &'static str, message: &str) {
        if !*self.leading.borrow() {
            return;
        }
        let id = &origin.id;
        let namespace = id.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let mut regarding = json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": id.kind(), "name": id.name,
            "uid": origin.uid,
        });
        if let Some(own) = &id.namespace {
            regarding["namespace"] = own.clone().into();
        }
        let event = kubewasm_runtime::action::EventBody {
            regarding,
            namespace: &namespace,
            controller: "kubewasm.dev/host",
            event_type: kubewasm_runtime::action::EventType::Warning,
            reason,
            action: "Load",
            note: message.to_owned(),
        }
        .object(jiff::Timestamp::now());
        let (client, id) = (self.client.clone(), id.clone());
        self.writes.spawn(async move {
            let api = Api::<DynamicObject>::namespaced_with(
                client,
                &namespace,
                &ApiResource::erase::<k8s_openapi::api::events::v1::Event>(&()),
            );
            let posted = match serde_json::from_value::<DynamicObject>(event) {
                Ok(event) => api.create(&kube::api::PostParams::default(), &event).await,
                Err(error) => Err(kube::Error::SerdeError(error)),
            };
            if let Err(error) = posted {
                tracing::debug!(resource = %id, %error, "refusal event not written");
            }
        });
    }

    /// Writes every status that differs from what its object shows (only
    /// while leading).
    fn write_statuses(&mut self, engine: &Engine, asked: &[Asked]) {
        while self.writes.try_join_next().is_some() {}
        if !*self.leading.borrow() {
            return;
        }
        let now = Instant::now();
        for asked in asked {
            let Some(tracked) = self.tracked.get_mut(&asked.id) else {
                continue;
            };
            if tracked.writing.as_ref().is_some_and(|w| !w.is_finished()) {
                continue; // the next sync looks again
            }
            let name = asked.id.plugin_name();
            let counters_due = tracked.counted.is_none_or(|at| now - at >= COUNTERS_EVERY);
            let previous = asked.status.clone().unwrap_or_default();
            let mut status = status_of(tracked, &name, &previous);
            if tracked.running.is_some() {
                let (succeeded, failed) = engine.reconcile_counts(&name);
                if counters_due {
                    status.reconciles = Some(succeeded);
                    status.failures = Some(failed);
                } else {
                    status.reconciles = previous.reconciles;
                    status.failures = previous.failures;
                }
            }
            if status == previous {
                continue;
            }
            if counters_due {
                tracked.counted = Some(now);
            }
            let (client, id) = (self.client.clone(), asked.id.clone());
            tracked.writing = Some(self.writes.spawn(async move {
                if let Err(error) = write_status(client, &id, &status).await {
                    tracing::debug!(resource = %id, %error, "status not written (written again on the next sync)");
                }
            }));
        }
    }
}

/// The CustomResourceDefinitions of `Plugin` and `ClusterPlugin`.
pub fn crds() -> [CustomResourceDefinition; 2] {
    [PluginResource::crd(), ClusterPluginResource::crd()]
}

/// [`crds`] as one multi-document YAML text (`deploy/crds.yaml`).
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|crd| format!("---\n{}", serde_yaml::to_string(crd).unwrap_or_default()))
        .collect()
}

/// A reflector of `api`, notifying `changed` on every event and setting
/// `listed` once it listed.
fn reflect<K>(
    api: Api<K>,
    changed: &Arc<tokio::sync::Notify>,
    listed: &Arc<AtomicBool>,
    tasks: &mut JoinSet<()>,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    use futures_util::StreamExt;
    let (store, writer) = reflector::store();
    let (changed, listed) = (Arc::clone(changed), Arc::clone(listed));
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => listed.store(true, Ordering::Relaxed),
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "plugin resource watch failed; retrying"),
            }
            changed.notify_one();
        }
    });
    store
}

/// The status a tracked resource should show; conditions keep their
/// `lastTransitionTime` while their status stays.
fn status_of(tracked: &Tracked, name: &str, previous: &PluginStatus) -> PluginStatus {
    let phase = if tracked.suspended {
        Phase::Suspended
    } else if tracked.running.is_some() {
        Phase::Running
    } else if tracked.observed.is_some() && tracked.refused.is_some() {
        Phase::Failed
    } else {
        Phase::Pending
    };
    let observed = tracked.observed.or(previous.observed_generation);
    let ready = match phase {
        Phase::Running => ("True", "Running", "a version runs and serves".to_owned()),
        Phase::Suspended => ("False", "Suspended", "spec.suspend is set".to_owned()),
        Phase::Failed => (
            "False",
            "Refused",
            "no version runs: the latest was refused".to_owned(),
        ),
        Phase::Pending => ("False", "Loading", "its first version loads".to_owned()),
    };
    let degraded = match &tracked.refused {
        Some((reason, message)) => ("True", *reason, message.clone()),
        None => (
            "False",
            "AsExpected",
            "the latest generation runs".to_owned(),
        ),
    };
    let condition = |kind: &str, (status, reason, message): (&str, &str, String)| {
        let since = previous
            .conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == status)
            .map(|c| c.last_transition_time.clone());
        Condition {
            type_: kind.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message,
            observed_generation: observed,
            last_transition_time: since.unwrap_or_else(|| Time(jiff::Timestamp::now())),
        }
    };
    PluginStatus {
        phase: Some(phase),
        digest: tracked.running.clone().filter(|d| !d.is_empty()),
        plugin_name: Some(name.to_owned()),
        observed_generation: observed,
        conditions: vec![condition("Ready", ready), condition("Degraded", degraded)],
        last_error: tracked.refused.as_ref().map(|(_, message)| message.clone()),
        reconciles: previous.reconciles,
        failures: previous.failures,
    }
}

async fn write_status(
    client: kube::Client,
    id: &ResourceId,
    status: &PluginStatus,
) -> Result<(), kube::Error> {
    let resource = match id.namespace {
        Some(_) => ApiResource::erase::<PluginResource>(&()),
        None => ApiResource::erase::<ClusterPluginResource>(&()),
    };
    let api: Api<DynamicObject> = match &id.namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, &resource),
        None => Api::all_with(client, &resource),
    };
    let patch = json!({
        "apiVersion": resource.api_version,
        "kind": id.kind(),
        "status": status,
    });
    api.patch_status(
        &id.name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
}

/// The credentials of a resource's pull secrets.
fn pull_credentials(
    client: &kube::Client,
    options: &ResourceOptions,
    id: &ResourceId,
    common: &CommonSpec,
) -> Result<Credentials, SpecError> {
    let mut credentials = Credentials::default();
    for secret in &common.image_pull_secrets {
        let namespace = match (&id.namespace, &secret.namespace) {
            (Some(own), Some(named)) if own != named => {
                return Err(SpecError::ForeignSecret {
                    name: secret.name.clone(),
                    namespace: named.clone(),
                });
            }
            (Some(own), _) => own.clone(),
            (None, named) => named
                .clone()
                .unwrap_or_else(|| options.host_namespace.clone()),
        };
        let failed = |reason: String| SpecError::PullSecret {
            namespace: namespace.clone(),
            name: secret.name.clone(),
            reason,
        };
        let api = Api::<Secret>::namespaced(client.clone(), &namespace);
        let found = tokio::runtime::Handle::current()
            .block_on(api.get(&secret.name))
            .map_err(|e| failed(e.to_string()))?;
        let data = found
            .data
            .as_ref()
            .and_then(|d| d.get(".dockerconfigjson"))
            .ok_or_else(|| failed("it has no `.dockerconfigjson`".to_owned()))?;
        let text = std::str::from_utf8(&data.0)
            .map_err(|_| failed("its `.dockerconfigjson` is not UTF-8".to_owned()))?;
        credentials = credentials.overridden_by(&Credentials::parse(text).map_err(failed)?);
    }
    Ok(credentials)
}

/// Loads one generation of a resource (on a blocking thread of the tokio
/// runtime).
fn load(
    sources: &Sources,
    client: &kube::Client,
    options: &ResourceOptions,
    id: &ResourceId,
    name: String,
    common: &CommonSpec,
    grants: OperatorGrants,
) -> Result<Prepared, Refused> {
    id.checked_plugin_name()?;
    grants.validate()?;
    let limits = limits(common.limits.as_ref(), sources.runtime.call_limits())?;
    let credentials = pull_credentials(client, options, id, common)?;
    let reference = oci::parse_reference(&common.source)?;
    let pulled = tokio::runtime::Handle::current()
        .block_on(sources.artifacts.fetch_with(&reference, &credentials))?;
    let config = match &common.config {
        Some(config) => Some((
            serde_json::to_string(config).map_err(SpecError::Config)?,
            "spec.config".to_owned(),
        )),
        None => None,
    };
    let setup = Setup {
        name,
        grants,
        limits: Some(limits),
        config,
    };
    let mut prepared = loader::prepare(sources, loader::Source::Bytes(&pulled.bytes), setup)?;
    prepared.artifact = Some(pulled.digest);
    Ok(prepared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_should_read_as_kubernetes_writes_them() {
        assert_eq!(bytes_of("64Mi"), Some(64 << 20));
        assert_eq!(bytes_of("1Gi"), Some(1 << 30));
        assert_eq!(bytes_of("500000"), Some(500_000));
        assert_eq!(bytes_of("2M"), Some(2_000_000));
        for bad in ["", "Mi", "1.5Gi", "-1", "64MB", "99999999999999999999Ti"] {
            assert_eq!(bytes_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_resource_should_tighten_the_host_limits_and_keep_the_rest() {
        let host = CallLimits {
            deadline: Duration::from_secs(1),
            memory: 256 << 20,
            output: kubewasm_runtime::Limits::default(),
        };
        assert_eq!(limits(None, host).expect("none"), host);
        let spec = PluginLimits {
            memory: Some("32Mi".into()),
            deadline_milliseconds: Some(100),
            max_actions: Some(10),
            ..PluginLimits::default()
        };
        let limits = limits(Some(&spec), host).expect("valid");
        assert_eq!(limits.memory, 32 << 20);
        assert_eq!(limits.deadline, Duration::from_millis(100));
        assert_eq!(limits.output.actions, 10);
        assert_eq!(limits.output.object_bytes, host.output.object_bytes);
        let bad = PluginLimits {
            memory: Some("lots".into()),
            ..PluginLimits::default()
        };
        assert!(matches!(
            super::limits(Some(&bad), host),
            Err(SpecError::Memory(_))
        ));
    }

    #[test]
    fn a_tenant_plugin_should_run_under_a_name_no_other_plugin_can_have() {
        let tenant = ResourceId {
            namespace: Some("team-a".into()),
            name: "mover".into(),
        };
        let cluster = ResourceId {
            namespace: None,
            name: "mover".into(),
        };
        assert_eq!(tenant.plugin_name(), "team-a.mover");
        assert_eq!(cluster.plugin_name(), "mover");
        assert_eq!(tenant.checked_plugin_name().expect("valid"), "team-a.mover");
        // A ClusterPlugin's name may have dots, but then it is no plugin
        // name: it cannot pose as a tenant's.
        let posing = ResourceId {
            namespace: None,
            name: "team-a.mover".into(),
        };
        assert!(matches!(
            posing.checked_plugin_name(),
            Err(SpecError::Name(_))
        ));
        let dotted = ResourceId {
            namespace: Some("team-a".into()),
            name: "mover.x".into(),
        };
        assert!(dotted.checked_plugin_name().is_err());
        assert!(!kubewasm_runtime::is_plugin_name("team-a.mover.x"));
        assert!(!kubewasm_runtime::is_plugin_name(&"a".repeat(64)));
        assert_eq!(tenant.to_string(), "Plugin team-a/mover");
    }

    #[test]
    fn conditions_should_keep_their_transition_time_while_they_hold() {
        let mut tracked = Tracked {
            uid: "u".into(),
            generation: Some(2),
            observed: Some(2),
            running: Some("sha256:abc".into()),
            ..Tracked::default()
        };
        let first = status_of(&tracked, "p", &PluginStatus::default());
        assert_eq!(first.phase, Some(Phase::Running));
        assert_eq!(first.observed_generation, Some(2));
        let again = status_of(&tracked, "p", &first);
        assert_eq!(again, first, "nothing changed: nothing to write");
        tracked.refused = Some(("ExceedsGrants", "declares more".into()));
        let degraded = status_of(&tracked, "p", &first);
        assert_eq!(
            degraded.phase,
            Some(Phase::Running),
            "the old version serves"
        );
        let find = |s: &PluginStatus, kind: &str| {
            s.conditions
                .iter()
                .find(|c| c.type_ == kind)
                .cloned()
                .expect("condition")
        };
        assert_eq!(find(&degraded, "Degraded").status, "True");
        assert_eq!(find(&degraded, "Degraded").reason, "ExceedsGrants");
        assert_eq!(
            find(&degraded, "Ready").last_transition_time,
            find(&first, "Ready").last_transition_time
        );
        tracked.running = None;
        assert_eq!(
            status_of(&tracked, "p", &degraded).phase,
            Some(Phase::Failed)
        );
    }
}
