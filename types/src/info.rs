//! What one served resource type is: its names, scope, subresources and
//! schemas ([`ResourceInfo`]), and where its objects are filed
//! ([`ResourceKey`]).
//!
//! # Caveat
//! Versions of one resource share one storage ([`ResourceInfo::storage_key`]
//! is group and plural). Objects are served with the requested `apiVersion`
//! but are not converted between schemas: what is read through another
//! version is what was written. One resource is served by two groups, as
//! by a real server: `events.k8s.io` Events are stored with core Events
//! (the API server converts the fields between the two views).

/// The group of the second view of Events.
pub const EVENTS_GROUP: &str = "events.k8s.io";

/// Where a resource type's objects are filed: its group and plural.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name.
    pub plural: String,
}

impl ResourceKey {
    /// The key of `group`'s `plural`.
    pub fn new(group: impl Into<String>, plural: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            plural: plural.into(),
        }
    }
}

impl std::fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.plural)
        } else {
            write!(f, "{}.{}", self.plural, self.group)
        }
    }
}

/// Decodes an object into its typed form and encodes it back.
pub type TypedRoundTrip = fn(&serde_json::Value) -> Result<serde_json::Value, String>;

/// One served resource type at one version.
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Kind of its lists.
    pub list_kind: String,
    /// Plural name (the URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names (`cm`, `deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether it has a `status` subresource.
    pub status: bool,
    /// Whether it has a `scale` subresource.
    pub scale: bool,
    /// Whether the server keeps `metadata.generation`: 1 on create, one more
    /// at each change of anything but metadata and status. Custom resources
    /// and the built-in types whose registry strategy sets it (Deployments,
    /// Pods, Jobs, …); not ConfigMaps, Leases, Services or Namespaces.
    pub generation: bool,
    /// Whether a PUT of an object that does not exist creates it (the
    /// registry strategy's `AllowCreateOnUpdate`): Leases, Services, Events,
    /// Endpoints, LimitRanges, RuntimeClasses and RBAC's four types; never
    /// a custom resource.
    pub create_on_update: bool,
    /// Whether a PUT without `metadata.resourceVersion` updates (the
    /// registry strategy's `AllowUnconditionalUpdate`); otherwise it is
    /// refused as invalid. Not for Leases, PodDisruptionBudgets, CSI and
    /// admission types, CRDs, APIServices and custom resources.
    pub unconditional_update: bool,
    /// Whether it is a custom resource (served for a CRD).
    pub custom: bool,
    /// A custom resource's storage version hash, as a real server lists it
    /// in discovery (built-in types' are the release's recorded ones).
    pub storage_version_hash: Option<String>,
    /// A custom resource's structural schema (`openAPIV3Schema`).
    pub schema: Option<std::sync::Arc<serde_json::Value>>,
    /// A built-in type's typed round trip (decode into its k8s-openapi type,
    /// encode back): what survives it is what the type knows, so strict field
    /// validation reports what does not.
    pub typed: Option<TypedRoundTrip>,
    /// A built-in kind's field-level OpenAPI schema: its own schema (a
    /// reference) and the definitions it uses.
    pub field_schema: Option<fn() -> FieldSchema>,
    /// A CRD version's `additionalPrinterColumns`, for tables.
    pub printer_columns: Vec<serde_json::Value>,
}

/// A kind's OpenAPI v3 schema: a `$ref` to it, and the component schemas
/// it refers to, by name (`io.k8s.api.apps.v1.Deployment`).
pub type FieldSchema = (
    serde_json::Value,
    serde_json::Map<String, serde_json::Value>,
);

impl ResourceInfo {
    /// Where its objects are stored: shared by all its versions, and by
    /// both views of Events.
    pub fn storage_key(&self) -> ResourceKey {
        if self.is_events_view() {
            return ResourceKey::new("", "events");
        }
        ResourceKey::new(self.group.clone(), self.plural.clone())
    }

    /// Whether this is `events.k8s.io`'s view of the core Events.
    pub fn is_events_view(&self) -> bool {
        self.group == EVENTS_GROUP && self.plural == "events"
    }

    /// Whether it (or its `subresource`) serves `verb`: a built-in type
    /// what its release's discovery lists (a Namespace has no
    /// `deletecollection`, a ComponentStatus only `get` and `list`, a
    /// Namespace's `finalize` only `update`), a custom resource every verb
    /// (the routes say which subresources it has).
    pub fn serves(&self, subresource: Option<&str>, verb: &str) -> bool {
        if self.custom {
            return true;
        }
        let release = crate::release::release();
        let recorded = match subresource {
            None => release.resource(&self.group, &self.version, &self.plural),
            Some(sub) => release
                .subresources(&self.group, &self.version, &self.plural)
                .find(|entry| entry.subresource() == Some(sub)),
        };
        recorded.is_none_or(|entry| entry.has_verb(verb))
    }

    /// The `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}
