//! The declaration builder, and the severity of a log record; resource
//! types, keys and verbs come from `kubewasm-core`.

use std::time::Duration;

use k8s_openapi::Resource;

pub use kubewasm_core::{ObjectKey, ResourceType, Verb};

/// How changes of a secondary map to primary keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Read only; changes trigger nothing.
    None,
    /// The owners of the primary's type.
    OwnerReferences,
    /// The value of this label names the primary (`name`, or `namespace.name`
    /// for a namespaced primary: label values cannot hold `/`).
    Label(String),
    /// [`Reconciler::map_keys`](crate::Reconciler::map_keys) computes them.
    Custom,
    /// Reads as triggers: the primaries whose last successful reconcile
    /// read the changed object (by key, or by a list that takes it). No
    /// code to write.
    Reads,
}

/// A resource type other than the primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Secondary {
    pub(crate) resource: ResourceType,
    pub(crate) verbs: Vec<Verb>,
    pub(crate) label_selector: String,
    pub(crate) mapping: Mapping,
    pub(crate) prune: bool,
}

impl Secondary {
    /// A secondary of type `K` with no verbs, no selector and no mapping.
    pub fn of<K: Resource>() -> Self
    where
        K::Scope: 'static,
    {
        Self::of_type(ResourceType::of::<K>())
    }

    /// A secondary of an untyped resource type (one without a Rust type);
    /// the host checks its plural and scope against the cluster's discovery.
    pub fn of_type(resource: ResourceType) -> Self {
        Self {
            resource,
            verbs: Vec::new(),
            label_selector: String::new(),
            mapping: Mapping::None,
            prune: false,
        }
    }

    /// Owned children of type `K`: get, list, watch, apply and delete,
    /// mapped back through owner references.
    fn owned<K: Resource>() -> Self
    where
        K::Scope: 'static,
    {
        Self::of::<K>()
            .verbs([Verb::Get, Verb::List, Verb::Apply, Verb::Delete])
            .mapping(Mapping::OwnerReferences)
    }

    /// Adds verbs.
    #[must_use]
    pub fn verbs(mut self, verbs: impl IntoIterator<Item = Verb>) -> Self {
        self.verbs.extend(verbs);
        self
    }

    /// Caches and maps only objects matching this label selector.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = selector.into();
        self
    }

    /// Sets how changes map to primary keys (and adds `watch` unless `None`).
    #[must_use]
    pub fn mapping(mut self, mapping: Mapping) -> Self {
        if mapping != Mapping::None && !self.verbs.contains(&Verb::Watch) {
            self.verbs.push(Verb::Watch);
        }
        self.mapping = mapping;
        self
    }

    /// Makes the owned children of this type a set (and adds `delete`):
    /// after a reconcile whose actions all succeeded, the host deletes
    /// those it owns for the primary (controller owner reference, this
    /// plugin's field manager) that the outcome did not apply. Without it,
    /// a child the plugin stops returning is left alone.
    #[must_use]
    pub fn prune(mut self) -> Self {
        if !self.verbs.contains(&Verb::Delete) {
            self.verbs.push(Verb::Delete);
        }
        self.prune = true;
        self
    }
}

/// What a plugin declares at load. Start with [`Declaration::new`].
///
/// ```
/// use kubewasm_guest::{Declaration, Verb};
/// use kubewasm_guest::k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
/// let declaration = Declaration::new::<ConfigMap>("example", "0.1.0")
///     .primary_verbs([Verb::ApplyStatus])
///     .owns::<Deployment>()
///     .resync(std::time::Duration::from_secs(600));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declaration {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) primary: ResourceType,
    pub(crate) primary_verbs: Vec<Verb>,
    pub(crate) primary_selector: String,
    pub(crate) secondaries: Vec<Secondary>,
    pub(crate) managed_finalizer: bool,
    pub(crate) resync_seconds: Option<u32>,
    pub(crate) max_concurrency: Option<u32>,
    pub(crate) config_schema: Option<String>,
    pub(crate) schedule: Option<String>,
}

impl Declaration {
    /// A plugin named `name` (a DNS label) reconciling objects of type `K`.
    pub fn new<K: Resource>(name: impl Into<String>, version: impl Into<String>) -> Self
    where
        K::Scope: 'static,
    {
        Self::for_type(name, version, ResourceType::of::<K>())
    }

    /// A declaration whose primary is an untyped resource type; the host
    /// checks its plural and scope against the cluster's discovery.
    pub fn for_type(
        name: impl Into<String>,
        version: impl Into<String>,
        primary: ResourceType,
    ) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            primary,
            primary_verbs: Vec::new(),
            primary_selector: String::new(),
            secondaries: Vec::new(),
            managed_finalizer: false,
            resync_seconds: None,
            max_concurrency: None,
            config_schema: None,
            schedule: None,
        }
    }

    /// Only primaries matching this label selector (`app=web,!legacy`) are
    /// watched, cached and reconciled; the default is every object.
    #[must_use]
    pub fn primary_selector(mut self, selector: impl Into<String>) -> Self {
        self.primary_selector = selector.into();
        self
    }

    /// Verbs on the primary beyond the implied get, list and watch.
    #[must_use]
    pub fn primary_verbs(mut self, verbs: impl IntoIterator<Item = Verb>) -> Self {
        self.primary_verbs.extend(verbs);
        self
    }

    /// Adds a secondary resource type.
    #[must_use]
    pub fn secondary(mut self, secondary: Secondary) -> Self {
        self.secondaries.push(secondary);
        self
    }

    /// Children of type `K` this plugin creates and owns: get, list, watch,
    /// apply and delete, mapped back through owner references.
    #[must_use]
    pub fn owns<K: Resource>(self) -> Self
    where
        K::Scope: 'static,
    {
        self.secondary(Secondary::owned::<K>())
    }

    /// Children of type `K` this plugin owns as a set: as
    /// [`Declaration::owns`], and those an outcome no longer applies are
    /// deleted by the host ([`Secondary::prune`]).
    #[must_use]
    pub fn owns_set<K: Resource>(self) -> Self
    where
        K::Scope: 'static,
    {
        self.secondary(Secondary::owned::<K>().prune())
    }

    /// Objects of type `K` this plugin only reads (get and list).
    #[must_use]
    pub fn reads<K: Resource>(self) -> Self
    where
        K::Scope: 'static,
    {
        self.secondary(Secondary::of::<K>().verbs([Verb::Get, Verb::List]))
    }

    /// Asks the host to manage the finalizer `kubewasm.dev/<name>` and call
    /// [`Reconciler::finalize`](crate::Reconciler::finalize) on deletion.
    #[must_use]
    pub fn managed_finalizer(mut self) -> Self {
        self.managed_finalizer = true;
        self
    }

    /// Reconcile every primary again after this period.
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync_seconds = Some(u32::try_from(period.as_secs()).unwrap_or(u32::MAX));
        self
    }

    /// The most concurrent reconciles wanted.
    #[must_use]
    pub fn max_concurrency(mut self, n: u32) -> Self {
        self.max_concurrency = Some(n);
        self
    }

    /// Asks to be called on a cron schedule, in UTC
    /// ([`Reconciler::scheduled`](crate::Reconciler::scheduled)): five
    /// fields as a CronJob's (`"0 3 * * *"`), six with seconds first, or a
    /// macro (`"@hourly"`). The host refuses one that does not parse.
    #[must_use]
    pub fn schedule(mut self, cron: impl Into<String>) -> Self {
        self.schedule = Some(cron.into());
        self
    }

    /// A JSON Schema the configuration must match.
    #[must_use]
    pub fn config_schema(mut self, schema: serde_json::Value) -> Self {
        self.config_schema = Some(schema.to_string());
        self
    }
}

/// Severity of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Very verbose diagnostics.
    Trace,
    /// Diagnostics.
    Debug,
    /// Normal operation.
    Info,
    /// Handled surprises.
    Warn,
    /// Failures.
    Error,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[test]
    fn children_should_form_a_set_only_when_asked() {
        let declaration = Declaration::new::<ConfigMap>("sets", "0.1.0")
            .owns::<Deployment>()
            .owns_set::<Deployment>();
        let [owned, set] = [&declaration.secondaries[0], &declaration.secondaries[1]];
        assert!(!owned.prune);
        assert!(set.prune && set.verbs.contains(&Verb::Delete));
        assert_eq!(set.mapping, Mapping::OwnerReferences);
        let read_only = Secondary::of::<Deployment>().prune();
        assert!(
            read_only.verbs.contains(&Verb::Delete),
            "a set needs delete"
        );
    }
}
