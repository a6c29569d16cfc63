//! The REST API over the store: routing, discovery and the verbs, generic
//! over every resource type. Independent of the HTTP server: a request in,
//! a [`Reply`] out.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use kubewasm_core::{ObjectKey, Selector};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::apply;
use crate::crd;
use crate::error::ApiError;
use crate::objects::{
    canonical_order, generate_name, metadata_mut, new_uid, now, spec_changed, strings_at,
    validate_name,
};
use crate::registry::{Registry, ResourceInfo};
use crate::store::{Event, EventType, ListAt, Store, StoreError};

/// Largest request body accepted, as the real server's limit.
pub const MAX_BODY: usize = 3 << 20;

/// What a request gets back.
#[derive(Debug)]
pub enum Reply {
    /// A JSON document with an HTTP status code.
    Json(u16, Value),
    /// Plain text (health checks).
    Text(u16, String),
    /// An aggregated discovery document (`apidiscovery.k8s.io/v2`).
    Discovery(Value),
    /// A watch: newline-delimited JSON events, until the channel closes.
    Watch(mpsc::Receiver<Bytes>),
}

/// A parsed request.
#[derive(Debug)]
pub struct Request<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Path, without the query.
    pub path: &'a str,
    /// Decoded query parameters.
    pub query: HashMap<String, String>,
    /// Content type of the body.
    pub content_type: &'a str,
    /// What the client accepts (aggregated discovery is asked for here).
    pub accept: &'a str,
    /// The body.
    pub body: Bytes,
}

/// Settings of the API.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// How often a watch with bookmarks sends one.
    pub bookmark_interval: Duration,
    /// Watch timeout when the client sets none.
    pub default_watch_timeout: Duration,
    /// Run the workload simulator ([`crate::simulator`]) with this delay.
    pub simulate_workloads: Option<Duration>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            simulate_workloads: None,
        }
    }
}

/// The API: a store, the registry of served types, settings.
#[derive(Clone, Debug)]
pub struct Api {
    store: Store,
    registry: Arc<RwLock<Registry>>,
    config: ApiConfig,
}

/// Where a request lands.
enum Route {
    Version,
    Health,
    OpenApiIndex,
    OpenApi(String, String),
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    Resource(Box<Target>),
}

/// A request on a resource: collection or object, maybe a subresource.
struct Target {
    info: ResourceInfo,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

/// Decodes `%XX` and `+` in a query component.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string.
pub fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// A field selector: `metadata.name` and `metadata.namespace`, with `=`,
/// `==` and `!=`.
#[derive(Debug, Default)]
struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

/// Fields a type can be selected by beyond `metadata.name` and
/// `metadata.namespace`, as the API server registers them per type.
fn selectable_fields(plural: &str) -> &'static [&'static str] {
    match plural {
        "events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
        ],
        "pods" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "secrets" => &["type"],
        "namespaces" => &["status.phase"],
        "nodes" => &["spec.unschedulable"],
        "replicasets" | "replicationcontrollers" => &["status.replicas"],
        "jobs" => &["status.successful"],
        "certificatesigningrequests" => &["spec.signerName"],
        _ => &[],
    }
}

impl FieldSelector {
    fn parse_for(s: &str, plural: &str) -> Result<Self, ApiError> {
        let selector = Self::parse(s)?;
        if let Some((field, _, _)) = selector.terms.iter().find(|(f, _, _)| {
            !matches!(f.as_str(), "metadata.name" | "metadata.namespace")
                && !selectable_fields(plural).contains(&f.as_str())
        }) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {field}"
            )));
        }
        Ok(selector)
    }

    fn parse(s: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term}"
                )));
            };
            let field = field.trim();
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self { terms })
    }

    fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, value)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

/// Label and field selectors together.
struct Filter {
    labels: Selector,
    fields: FieldSelector,
}

impl Filter {
    fn from_query(query: &HashMap<String, String>, plural: &str) -> Result<Self, ApiError> {
        let labels = Selector::parse(query.get("labelSelector").map_or("", String::as_str))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let fields = FieldSelector::parse_for(
            query.get("fieldSelector").map_or("", String::as_str),
            plural,
        )?;
        Ok(Self { labels, fields })
    }

    fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }
}

/// The object with `apiVersion` and `kind` of the version served, in the
/// API server's field order.
fn served(info: &ResourceInfo, object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), info.api_version().into());
        map.insert("kind".into(), info.kind.clone().into());
    }
    canonical_order(object)
}

/// What `/version` says: the Kubernetes release whose API this serves.
fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-kubewasm", "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0", "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// A request body as JSON, or 400.
fn json_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the body of the request is not valid JSON: {e}"))
    })
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
}

fn rv_of(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

impl Api {
    /// An API over `store` serving the built-in types.
    pub fn new(store: Store, config: ApiConfig) -> Self {
        Self {
            store,
            registry: Arc::new(RwLock::new(Registry::builtin())),
            config,
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &ApiConfig {
        &self.config
    }

    fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers one request.
    pub async fn handle(&self, request: Request<'_>) -> Reply {
        match self.dispatch(request).await {
            Ok(reply) => reply,
            Err(error) => Reply::Json(error.code, error.status()),
        }
    }

    async fn dispatch(&self, mut request: Request<'_>) -> Result<Reply, ApiError> {
        if request.body.len() > MAX_BODY {
            return Err(ApiError::too_large(MAX_BODY));
        }
        if request
            .content_type
            .starts_with("application/vnd.kubernetes.protobuf")
        {
            let object = crate::protobuf::decode(&request.body).map_err(|e| ApiError {
                code: 415,
                reason: "UnsupportedMediaType",
                message: e.to_string(),
                details: None,
            })?;
            request.body = Bytes::from(object.to_string());
            request.content_type = "application/json";
        }
        match self.route(request.path)? {
            Route::Version => Ok(Reply::Json(200, version())),
            Route::Health => Ok(Reply::Text(200, "ok".into())),
            Route::OpenApiIndex => Ok(Reply::Json(200, crate::openapi::index(&self.registry()))),
            Route::OpenApi(group, version) => {
                crate::openapi::document(&self.registry(), &group, &version)
                    .map(|doc| Reply::Json(200, doc))
                    .ok_or_else(|| ApiError::no_route(request.path))
            }
            Route::CoreVersions | Route::Groups
                if request.accept.contains("as=APIGroupDiscoveryList") =>
            {
                Ok(Reply::Discovery(
                    self.aggregated(request.path.trim_end_matches('/') == "/api"),
                ))
            }
            Route::CoreVersions => Ok(Reply::Json(
                200,
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}),
            )),
            Route::Groups => Ok(Reply::Json(200, self.group_list())),
            Route::Group(name) => self
                .group_list()
                .get("groups")
                .and_then(Value::as_array)
                .and_then(|groups| groups.iter().find(|g| g["name"] == name.as_str()).cloned())
                .map(|mut group| {
                    group["kind"] = "APIGroup".into();
                    group["apiVersion"] = "v1".into();
                    Reply::Json(200, group)
                })
                .ok_or_else(|| ApiError::no_route(request.path)),
            Route::ResourceList(group, version) => {
                Ok(Reply::Json(200, self.resource_list(&group, &version)))
            }
            Route::Resource(target) => self.resource(*target, request).await,
        }
    }

    fn route(&self, path: &str) -> Result<Route, ApiError> {
        let segments: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let (group, version, rest) = match segments.as_slice() {
            ["version"] => return Ok(Route::Version),
            ["healthz" | "readyz" | "livez", ..] => return Ok(Route::Health),
            ["openapi", "v3"] => return Ok(Route::OpenApiIndex),
            ["openapi", "v3", "api", version] => {
                return Ok(Route::OpenApi(String::new(), (*version).to_owned()));
            }
            ["openapi", "v3", "apis", group, version] => {
                return Ok(Route::OpenApi((*group).to_owned(), (*version).to_owned()));
            }
            ["api"] => return Ok(Route::CoreVersions),
            ["apis"] => return Ok(Route::Groups),
            ["apis", group] => return Ok(Route::Group((*group).to_owned())),
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return Err(ApiError::no_route(path)),
        };
        if rest.is_empty() {
            if self.registry().in_version(group, version).next().is_none() {
                return Err(ApiError::no_route(path));
            }
            return Ok(Route::ResourceList(group.to_owned(), version.to_owned()));
        }
        let registry = self.registry();
        let resolve = |plural: &str| {
            registry
                .get(group, version, plural)
                .cloned()
                .ok_or_else(|| ApiError::no_route(path))
        };
        let target = |info: ResourceInfo,
                      namespace: Option<&str>,
                      rest: &[&str]|
         -> Result<Route, ApiError> {
            if rest.len() > 2 {
                return Err(ApiError::no_route(path));
            }
            Ok(Route::Resource(Box::new(Target {
                info,
                namespace: namespace.map(str::to_owned),
                name: rest.first().map(|s| (*s).to_owned()),
                subresource: rest.get(1).map(|s| (*s).to_owned()),
            })))
        };
        match rest {
            // A namespaced collection or object: namespaces/{ns}/{plural}/…
            ["namespaces", namespace, plural, tail @ ..]
                if !matches!(*plural, "status" | "finalize") =>
            {
                let info = resolve(plural)?;
                if !info.namespaced {
                    return Err(ApiError::no_route(path));
                }
                target(info, Some(namespace), tail)
            }
            [plural, tail @ ..] => {
                let info = resolve(plural)?;
                if info.namespaced && !tail.is_empty() {
                    return Err(ApiError::no_route(path));
                }
                target(info, None, tail)
            }
            [] => Err(ApiError::no_route(path)),
        }
    }

    fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .registry()
            .groups()
            .into_iter()
            .filter(|g| !g.name.is_empty())
            .map(|g| {
                let versions: Vec<Value> = g
                    .versions
                    .iter()
                    .map(|v| json!({"groupVersion": format!("{}/{v}", g.name), "version": v}))
                    .collect();
                json!({"name": g.name, "versions": versions, "preferredVersion": versions[0]})
            })
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// Aggregated discovery: every group (the core group for `/api`, the
    /// named ones for `/apis`) with its versions and resources in one reply.
    fn aggregated(&self, core: bool) -> Value {
        let registry = self.registry();
        let items: Vec<Value> = registry
            .groups()
            .into_iter()
            .filter(|g| g.name.is_empty() == core)
            .map(|g| {
                let versions: Vec<Value> = g
                    .versions
                    .iter()
                    .map(|v| {
                        let resources: Vec<Value> = registry
                            .in_version(&g.name, v)
                            .map(|r| {
                                let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
                                let mut subresources = Vec::new();
                                if r.status {
                                    subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
                                }
                                if r.scale {
                                    subresources.push(json!({"subresource": "scale",
                                        "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                                        "verbs": ["get", "patch", "update"]}));
                                }
                                json!({
                                    "resource": r.plural,
                                    "responseKind": kind,
                                    "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                                    "singularResource": r.singular,
                                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                                    "shortNames": r.short_names,
                                    "categories": r.categories,
                                    "subresources": subresources,
                                })
                            })
                            .collect();
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": g.name}, "versions": versions})
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
    }

    fn resource_list(&self, group: &str, version: &str) -> Value {
        let group_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        let mut resources = Vec::new();
        for r in self.registry().in_version(group, version) {
            resources.push(json!({
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                "shortNames": r.short_names,
                "categories": r.categories,
            }));
            for (sub, kind) in [("status", r.status), ("scale", r.scale)] {
                if kind {
                    resources.push(json!({
                        "name": format!("{}/{sub}", r.plural),
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": if sub == "scale" { "Scale" } else { r.kind.as_str() },
                        "verbs": ["get", "patch", "update"],
                    }));
                }
            }
        }
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
    }

    async fn resource(&self, target: Target, request: Request<'_>) -> Result<Reply, ApiError> {
        let watching = request
            .query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1");
        match (request.method, &target.name, target.subresource.as_deref()) {
            ("GET", None, None) if watching => self.watch(&target, &request.query),
            ("GET", None, None) => self.list(&target, &request.query),
            ("GET", Some(name), None | Some("status")) => self.get(&target, name),
            ("GET", Some(name), Some("scale")) if target.info.scale => {
                self.get_scale(&target, name)
            }
            ("PUT" | "PATCH", Some(name), Some("scale")) if target.info.scale => {
                self.update_scale(&target, name, &request)
            }
            // A CertificateSigningRequest's approval is a write of its status
            // conditions, like `/status`.
            ("PUT", Some(name), Some("approval"))
                if target.info.plural == "certificatesigningrequests" =>
            {
                let status = Target {
                    subresource: Some("status".to_owned()),
                    info: target.info.clone(),
                    namespace: target.namespace.clone(),
                    name: target.name.clone(),
                };
                self.update(&status, name, &request)
            }
            ("POST", None, None) => self.create(&target, &request),
            ("PUT", Some(name), None | Some("status")) => self.update(&target, name, &request),
            ("PATCH", Some(name), None | Some("status")) => self.patch(&target, name, &request),
            ("DELETE", Some(name), None) => self.delete(&target, name, &request),
            (method, _, _) => Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method} {})",
                request.path
            ))),
        }
    }

    fn key(&self, target: &Target, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: target.namespace.clone(),
            name: name.to_owned(),
        }
    }

    fn get(&self, target: &Target, name: &str) -> Result<Reply, ApiError> {
        let object = self
            .store
            .get(&target.info.storage_key(), &self.key(target, name))
            .ok_or_else(|| ApiError::not_found(&target.info, name))?;
        Ok(Reply::Json(200, served(&target.info, &object)))
    }

    fn list(&self, target: &Target, query: &HashMap<String, String>) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(query, &target.info.plural)?;
        let limit: usize = match query.get("limit").map(String::as_str) {
            None | Some("") | Some("0") => usize::MAX,
            Some(l) => l
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?,
        };
        // A continue token: the snapshot's RV and the last key returned.
        let (at, after) = match query.get("continue").filter(|c| !c.is_empty()) {
            Some(token) => {
                let (rv, last) = token
                    .split_once(':')
                    .ok_or_else(|| ApiError::bad_request("invalid continue token"))?;
                let rv = parse_rv(rv)?;
                if rv < self.store.oldest_rv() {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter.",
                    ));
                }
                (ListAt::Exact(rv), Some(last.to_owned()))
            }
            None => {
                let rv = query.get("resourceVersion").filter(|v| !v.is_empty());
                let at = match (rv, query.get("resourceVersionMatch").map(String::as_str)) {
                    (None, _) => ListAt::Latest,
                    (Some(rv), Some("Exact")) => ListAt::Exact(parse_rv(rv)?),
                    (Some(rv), _) if rv == "0" => ListAt::Latest,
                    (Some(rv), _) => ListAt::NotOlderThan(parse_rv(rv)?),
                };
                (at, None)
            }
        };
        let snapshot =
            self.store
                .list(&target.info.storage_key(), target.namespace.as_deref(), at)?;
        let key_of = |v: &Value| {
            format!(
                "{}/{}",
                v.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                v.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        };
        let mut matching = snapshot
            .items
            .iter()
            .filter(|o| after.as_ref().is_none_or(|a| key_of(o) > *a))
            .filter(|o| filter.matches(o));
        let items: Vec<Value> = matching
            .by_ref()
            .take(limit)
            .map(|o| served(&target.info, o))
            .collect();
        let remaining = matching.count();
        let mut metadata = json!({"resourceVersion": snapshot.rv.to_string()});
        if remaining > 0
            && let Some(last) = items.last()
        {
            metadata["continue"] = format!("{}:{}", snapshot.rv, key_of(last)).into();
            metadata["remainingItemCount"] = remaining.into();
        }
        Ok(Reply::Json(
            200,
            json!({"kind": target.info.list_kind, "apiVersion": target.info.api_version(),
                   "metadata": metadata, "items": items}),
        ))
    }

    fn body(info: &ResourceInfo, request: &Request<'_>) -> Result<Value, ApiError> {
        let body: Value = json_body(&request.body)?;
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        let field = |f: &str| body.get(f).and_then(Value::as_str);
        if let Some(api_version) = field("apiVersion")
            && api_version != info.api_version()
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                info.api_version()
            )));
        }
        if let Some(kind) = field("kind")
            && kind != info.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                info.kind
            )));
        }
        Ok(body)
    }

    fn dry_run(query: &HashMap<String, String>) -> bool {
        query.get("dryRun").is_some_and(|d| d == "All")
    }

    fn create(&self, target: &Target, request: &Request<'_>) -> Result<Reply, ApiError> {
        let info = &target.info;
        let mut object = Self::body(info, request)?;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.shift_remove("managedFields");
        }
        // The creator owns every field it set (`Update` in `managedFields`).
        apply::record_update(
            &json!({}),
            &mut object,
            &Self::manager(&request.query),
            &info.api_version(),
            info.custom,
        );
        self.insert(target, object, &request.query)
    }

    /// Stores a new object: names, uid, timestamps, generation, status rules.
    fn insert(
        &self,
        target: &Target,
        mut object: Value,
        query: &HashMap<String, String>,
    ) -> Result<Reply, ApiError> {
        let info = &target.info;
        let metadata = metadata_mut(&mut object)
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        let name = match metadata
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(name) => name.to_owned(),
            None => match metadata.get("generateName").and_then(Value::as_str) {
                Some(prefix) => generate_name(prefix),
                None => String::new(),
            },
        };
        validate_name(&name).map_err(|why| ApiError::invalid(info, &name, why))?;
        match (
            &target.namespace,
            metadata
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty()),
        ) {
            (Some(url), Some(body)) if url != body => {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object does not match the namespace sent on the request ({body} != {url})"
                )));
            }
            _ => {}
        }
        if let Some(namespace) = &target.namespace {
            if self
                .store
                .get(
                    &crate::store::ResourceKey::new("", "namespaces"),
                    &ObjectKey::cluster(namespace.clone()),
                )
                .is_none()
            {
                return Err(ApiError {
                    code: 404,
                    reason: "NotFound",
                    message: format!("namespaces \"{namespace}\" not found"),
                    details: Some(json!({"name": namespace, "kind": "namespaces"})),
                });
            }
            metadata.insert("namespace".into(), namespace.clone().into());
        }
        metadata.insert("name".into(), name.clone().into());
        metadata.insert("uid".into(), new_uid().into());
        metadata.insert("creationTimestamp".into(), now().into());
        metadata.insert("generation".into(), 1.into());
        for server_owned in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            metadata.remove(server_owned);
        }
        if info.status
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        let object = Self::checked(info, &name, served(info, &object), Self::strict(query))?;
        if crd::is_crd(info) {
            crd::served_types(&object).map_err(|why| ApiError::invalid(info, &name, why))?;
        }
        if Self::dry_run(query) {
            return Ok(Reply::Json(201, object));
        }
        let key = self.key(target, &name);
        let mut created = self
            .store
            .create(&info.storage_key(), &key, object)
            .map_err(|e| match e {
                StoreError::AlreadyExists { .. } => ApiError::already_exists(info, &name),
                other => other.into(),
            })?;
        if crd::is_crd(info) {
            created = self.establish(&key, &created)?;
        }
        Ok(Reply::Json(201, served(info, &created)))
    }

    /// Serves a CRD's versions and marks it established, before the reply.
    fn establish(&self, key: &ObjectKey, crd: &Value) -> Result<Arc<Value>, ApiError> {
        let types = crd::served_types(crd).map_err(ApiError::bad_request)?;
        {
            let mut registry = self
                .registry
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(first) = types.first() {
                registry.remove(&first.group, &first.plural);
            }
            for t in types {
                registry.insert(t);
            }
        }
        let status = crd::established_status(crd);
        let storage = crate::store::ResourceKey::new(crd::GROUP, crd::PLURAL);
        let written = self.store.update::<ApiError>(&storage, key, |current| {
            let mut next = current.clone();
            next["status"] = status;
            Ok(next)
        })?;
        Ok(written.object)
    }

    /// Stops serving a deleted CRD's resource and deletes its objects.
    fn retire(&self, crd: &Value) {
        let (Some(group), Some(plural)) = (
            crd.pointer("/spec/group").and_then(Value::as_str),
            crd.pointer("/spec/names/plural").and_then(Value::as_str),
        ) else {
            return;
        };
        self.registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(group, plural);
        let storage = crate::store::ResourceKey::new(group, plural);
        if let Ok(snapshot) = self.store.list(&storage, None, ListAt::Latest) {
            for object in snapshot.items {
                if let Some(key) = ObjectKey::of(&object) {
                    // Gone already is fine: another delete won the race.
                    let _ = self.store.delete::<StoreError>(&storage, &key, |_| Ok(()));
                }
            }
        }
    }

    /// Merges what a write may change into the current object: the rules
    /// of the main resource and of `/status`, finalizers during deletion,
    /// generation bumps.
    fn next_version(
        info: &ResourceInfo,
        name: &str,
        subresource: Option<&str>,
        current: &Value,
        mut desired: Value,
    ) -> Result<Value, ApiError> {
        let current_meta = current
            .get("metadata")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if subresource == Some("status") {
            let mut next = current.clone();
            match desired.get_mut("status").map(Value::take) {
                Some(status) => next["status"] = status,
                None => {
                    if let Some(map) = next.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
            return Ok(next);
        }
        if info.status {
            match current.get("status") {
                Some(status) => desired["status"] = status.clone(),
                None => {
                    if let Some(map) = desired.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        }
        let metadata = metadata_mut(&mut desired)
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        for immutable in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match current_meta.get(immutable) {
                Some(v) => metadata.insert(immutable.into(), v.clone()),
                None => metadata.remove(immutable),
            };
        }
        if current_meta.get("deletionTimestamp").is_some() {
            let before = strings_at(&current_meta, "/finalizers");
            let after = metadata
                .get("finalizers")
                .map(|f| strings_at(f, ""))
                .unwrap_or_default();
            if after.iter().any(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    info,
                    name,
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
                ));
            }
        }
        if spec_changed(current, &desired) {
            let generation = current_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            if let Some(m) = metadata_mut(&mut desired) {
                m.insert("generation".into(), generation.into());
            }
        }
        Ok(served(info, &desired))
    }

    /// [`Api::next_version`], with the fields the write changed recorded as
    /// `manager`'s (`Update` in `managedFields`).
    fn updated(
        info: &ResourceInfo,
        name: &str,
        subresource: Option<&str>,
        current: &Value,
        desired: Value,
        manager: &str,
        strict: bool,
    ) -> Result<Value, ApiError> {
        let mut next = Self::next_version(info, name, subresource, current, desired)?;
        apply::record_update(
            current,
            &mut next,
            manager,
            &info.api_version(),
            info.custom,
        );
        Self::checked(info, name, next, strict)
    }

    /// Defaults, prunes and validates a custom resource against its schema
    /// ([`crate::schema`]); under `fieldValidation=Strict` an unknown field
    /// is refused rather than pruned.
    fn checked(
        info: &ResourceInfo,
        name: &str,
        mut object: Value,
        strict: bool,
    ) -> Result<Value, ApiError> {
        crate::objects::normalize_builtin(info, &mut object);
        let Some(schema) = &info.schema else {
            if let (true, Some(typed)) = (strict, info.typed) {
                let known = typed(&object)
                    .map_err(|e| ApiError::bad_request(format!("strict decoding error: {e}")))?;
                let unknown = crate::schema::unknown_fields(&object, &known);
                if !unknown.is_empty() {
                    let fields: Vec<String> = unknown
                        .iter()
                        .map(|f| format!("unknown field \"{f}\""))
                        .collect();
                    return Err(ApiError::bad_request(format!(
                        "strict decoding error: {}",
                        fields.join(", ")
                    )));
                }
            }
            return Ok(object);
        };
        let findings = crate::schema::process(&mut object, schema);
        if strict && !findings.unknown.is_empty() {
            let fields: Vec<String> = findings
                .unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect();
            return Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                fields.join(", ")
            )));
        }
        if !findings.errors.is_empty() {
            let mut error =
                ApiError::invalid(info, name, format!("[{}]", findings.errors.join(", ")));
            let causes: Vec<Value> = findings
                .errors
                .iter()
                .map(|e| {
                    let (field, message) = e.split_once(": ").unwrap_or(("", e));
                    json!({"reason": "FieldValueInvalid", "message": message, "field": field})
                })
                .collect();
            if let Some(details) = error.details.as_mut() {
                details["causes"] = Value::Array(causes);
                details["kind"] = info.kind.clone().into();
            }
            return Err(error);
        }
        Ok(object)
    }

    /// Whether the request asks for strict field validation.
    fn strict(query: &HashMap<String, String>) -> bool {
        query.get("fieldValidation").is_some_and(|v| v == "Strict")
    }

    /// Stores `update(current)` for the object, then removes it if it is
    /// being deleted and has no finalizer left.
    fn write(
        &self,
        target: &Target,
        name: &str,
        dry_run: bool,
        update: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Reply, ApiError> {
        let info = &target.info;
        let key = self.key(target, name);
        let not_found = |e: ApiError| {
            if e.code == 404 && e.reason == "NotFound" {
                ApiError::not_found(info, name)
            } else {
                e
            }
        };
        if dry_run {
            let current = self
                .store
                .get(&info.storage_key(), &key)
                .ok_or_else(|| ApiError::not_found(info, name))?;
            return Ok(Reply::Json(200, update(&current)?));
        }
        let written = self
            .store
            .update(&info.storage_key(), &key, update)
            .map_err(not_found)?;
        let object = &written.object;
        let finalizers_left = object
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if object.pointer("/metadata/deletionTimestamp").is_some() && !finalizers_left {
            let last = self
                .store
                .delete::<ApiError>(&info.storage_key(), &key, |_| Ok(()))
                .map_err(not_found)?;
            if crd::is_crd(info) {
                self.retire(&last);
            }
            return Ok(Reply::Json(200, served(info, &last)));
        }
        if crd::is_crd(info) && written.changed && target.subresource.is_none() {
            let established = self.establish(&key, object)?;
            return Ok(Reply::Json(200, served(info, &established)));
        }
        Ok(Reply::Json(200, served(info, object)))
    }

    fn update(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let desired = Self::body(&info, request)?;
        if desired
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .is_some_and(|n| n != name)
        {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        let subresource = target.subresource.clone();
        let wanted_rv = rv_of(&desired).map(str::to_owned);
        let custom = info.custom;
        let manager = Self::manager(&request.query);
        let strict = Self::strict(&request.query);
        self.write(target, name, Self::dry_run(&request.query), |current| {
            match (&wanted_rv, rv_of(current)) {
                (Some(wanted), Some(actual)) if wanted != actual => {
                    return Err(ApiError::conflict(
                        &info,
                        name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
                (None, _) if custom => {
                    return Err(ApiError::invalid(&info, name, "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"));
                }
                _ => {}
            }
            Self::updated(&info, name, subresource.as_deref(), current, desired, &manager, strict)
        })
    }

    fn patch(&self, target: &Target, name: &str, request: &Request<'_>) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let content_type = request.content_type.split(';').next().unwrap_or("").trim();
        if content_type == "application/apply-patch+yaml" {
            return self.server_side_apply(target, name, request);
        }
        let patch: Value = json_body(&request.body)?;
        let apply: fn(&mut Value, &Value) -> Result<(), String> = match content_type {
            "application/merge-patch+json" => |doc, patch| {
                merge_patch(doc, patch);
                Ok(())
            },
            "application/json-patch+json" => json_patch,
            // Built-in types only, as the API server: custom resources have no
            // patch strategy.
            "application/strategic-merge-patch+json" if !info.custom => crate::strategic::apply,
            other => return Err(ApiError::unsupported_media_type(other)),
        };
        let subresource = target.subresource.clone();
        let manager = Self::manager(&request.query);
        let strict = Self::strict(&request.query);
        self.write(target, name, Self::dry_run(&request.query), |current| {
            let mut desired = current.clone();
            apply(&mut desired, &patch).map_err(|why| ApiError::invalid(&info, name, why))?;
            Self::updated(
                &info,
                name,
                subresource.as_deref(),
                current,
                desired,
                &manager,
                strict,
            )
        })
    }

    /// The `autoscaling/v1` Scale of an object.
    fn scale_of(object: &Value) -> Value {
        let selector = object
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let meta = |f: &str| {
            object
                .pointer(&format!("/metadata/{f}"))
                .cloned()
                .unwrap_or(Value::Null)
        };
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta("name"), "namespace": meta("namespace"), "uid": meta("uid"),
                         "resourceVersion": meta("resourceVersion"), "creationTimestamp": meta("creationTimestamp")},
            "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
            "status": {"replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)), "selector": selector},
        })
    }

    fn get_scale(&self, target: &Target, name: &str) -> Result<Reply, ApiError> {
        let object = self
            .store
            .get(&target.info.storage_key(), &self.key(target, name))
            .ok_or_else(|| ApiError::not_found(&target.info, name))?;
        Ok(Reply::Json(200, Self::scale_of(&object)))
    }

    /// A write to `/scale`: the new Scale's `spec.replicas` becomes the
    /// object's.
    fn update_scale(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let body: Value = json_body(&request.body)?;
        let content_type = request
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        let manager = Self::manager(&request.query);
        let strict = Self::strict(&request.query);
        let reply = self.write(target, name, Self::dry_run(&request.query), |current| {
            let mut scale = Self::scale_of(current);
            match (request.method, content_type.as_str()) {
                ("PUT", _) => scale = body.clone(),
                (_, "application/json-patch+json") => {
                    json_patch(&mut scale, &body)
                        .map_err(|why| ApiError::invalid(&info, name, why))?;
                }
                _ => merge_patch(&mut scale, &body),
            }
            let replicas = scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .filter(|r| *r >= 0)
                .ok_or_else(|| {
                    ApiError::invalid(
                        &info,
                        name,
                        "spec.replicas: Invalid value: must be a non-negative integer",
                    )
                })?;
            let mut desired = current.clone();
            desired["spec"]["replicas"] = replicas.into();
            Self::updated(&info, name, None, current, desired, &manager, strict)
        })?;
        match reply {
            Reply::Json(code, object) => Ok(Reply::Json(code, Self::scale_of(&object))),
            other => Ok(other),
        }
    }

    /// The field manager of a write: `fieldManager`, or `unknown`.
    fn manager(query: &HashMap<String, String>) -> String {
        query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .cloned()
            .unwrap_or_else(|| "unknown".to_owned())
    }

    /// Server-side apply: create or merge with field ownership (see [`apply`]).
    fn server_side_apply(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let Some(manager) = request
            .query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .cloned()
        else {
            return Err(ApiError::invalid(
                &info,
                name,
                "fieldManager: Required value: is required for apply patch",
            ));
        };
        let force = request.query.get("force").is_some_and(|f| f == "true");
        let strict = Self::strict(&request.query);
        // YAML is the declared format; JSON (what kubectl and kube-rs send) is YAML.
        let applied: Value = match serde_json::from_slice(&request.body) {
            Ok(v) => v,
            Err(_) => serde_yaml::from_slice(&request.body).map_err(|e| {
                ApiError::bad_request(format!("the body of the request is not valid YAML: {e}"))
            })?,
        };
        let body_request = Request {
            method: request.method,
            path: request.path,
            query: HashMap::new(),
            content_type: "application/json",
            accept: request.accept,
            body: Bytes::from(applied.to_string()),
        };
        let applied = Self::body(&info, &body_request)?;
        if applied
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .is_some_and(|n| n != name)
        {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        let api_version = info.api_version();
        let apply_request = apply::ApplyRequest {
            manager: &manager,
            force,
            api_version: &api_version,
            custom: info.custom,
        };
        let conflict = |conflicts: Vec<apply::Conflict>| {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{}\"", c.manager), "field": c.field}))
                .collect();
            let listed: Vec<String> = conflicts
                .iter()
                .map(|c| format!("- {}: {}", c.manager, c.field))
                .collect();
            let mut error = ApiError::conflict(
                &info,
                name,
                &format!(
                    "Apply failed with {} conflict(s):\n{}",
                    conflicts.len(),
                    listed.join("\n")
                ),
            );
            if let Some(details) = error.details.as_mut() {
                details["causes"] = Value::Array(causes);
            }
            error
        };
        let key = self.key(target, name);
        if self.store.get(&info.storage_key(), &key).is_none() {
            if target.subresource.is_some() {
                return Err(ApiError::not_found(&info, name));
            }
            let created = apply::apply(&json!({}), &applied, apply_request).map_err(conflict)?;
            return self.insert(target, created, &request.query);
        }
        let subresource = target.subresource.clone();
        self.write(target, name, Self::dry_run(&request.query), |current| {
            let merged = apply::apply(current, &applied, apply_request).map_err(conflict)?;
            let next = Self::next_version(&info, name, subresource.as_deref(), current, merged)?;
            Self::checked(&info, name, next, strict)
        })
    }

    fn delete(
        &self,
        target: &Target,
        name: &str,
        request: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let info = target.info.clone();
        let options: Value = if request.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            json_body(&request.body)?
        };
        let dry_run = Self::dry_run(&request.query)
            || options
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|v| v == "All"));
        let key = self.key(target, name);
        let current = self
            .store
            .get(&info.storage_key(), &key)
            .ok_or_else(|| ApiError::not_found(&info, name))?;
        let precondition = |field: &str| {
            options
                .pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
        };
        if let Some(uid) = precondition("uid")
            && current.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
        {
            return Err(ApiError::conflict(
                &info,
                name,
                &format!("Precondition failed: UID in precondition: {uid}"),
            ));
        }
        if let Some(rv) = precondition("resourceVersion")
            && rv_of(&current) != Some(rv)
        {
            return Err(ApiError::conflict(
                &info,
                name,
                &format!("Precondition failed: ResourceVersion in precondition: {rv}"),
            ));
        }
        let policy = options
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Background");
        let mut finalizers: Vec<Value> = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let gc_finalizer = match policy {
            "Foreground" => Some("foregroundDeletion"),
            "Orphan" => Some("orphan"),
            _ => None,
        };
        if let Some(f) = gc_finalizer
            && !finalizers.iter().any(|x| x == f)
        {
            finalizers.push(f.into());
        }
        // A namespace is emptied by the namespace controller (`gc`) first.
        let is_namespace = info.group.is_empty() && info.plural == "namespaces";
        if !finalizers.is_empty() || is_namespace {
            // Graceful: mark, and let the finalizers' owners finish.
            let deleting = move |object: &Value| -> Result<Value, ApiError> {
                let mut next = object.clone();
                if let Some(m) = metadata_mut(&mut next) {
                    m.entry("deletionTimestamp").or_insert_with(|| now().into());
                    m.entry("deletionGracePeriodSeconds")
                        .or_insert_with(|| 0.into());
                    if !finalizers.is_empty() {
                        m.insert("finalizers".into(), Value::Array(finalizers));
                    }
                }
                if is_namespace {
                    next["status"] = json!({"phase": "Terminating"});
                }
                Ok(next)
            };
            if dry_run {
                return Ok(Reply::Json(200, served(&info, &deleting(&current)?)));
            }
            let written = self.store.update(&info.storage_key(), &key, deleting)?;
            return Ok(Reply::Json(200, served(&info, &written.object)));
        }
        if !dry_run {
            let last = self
                .store
                .delete::<ApiError>(&info.storage_key(), &key, |_| Ok(()))
                .map_err(|_| ApiError::not_found(&info, name))?;
            if crd::is_crd(&info) {
                self.retire(&last);
            }
        }
        Ok(Reply::Json(
            200,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                   "details": {"name": name, "group": info.group, "kind": info.plural,
                               "uid": current.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)}}),
        ))
    }

    fn watch(&self, target: &Target, query: &HashMap<String, String>) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(query, &target.info.plural)?;
        let bookmarks = query
            .get("allowWatchBookmarks")
            .is_some_and(|b| b == "true");
        let initial_events = query.get("sendInitialEvents").is_some_and(|b| b == "true");
        let timeout = match query.get("timeoutSeconds").filter(|t| !t.is_empty()) {
            Some(t) => Duration::from_secs(
                t.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {t}")))?,
            ),
            None => self.config.default_watch_timeout,
        };
        let rv = query
            .get("resourceVersion")
            .filter(|v| !v.is_empty())
            .cloned();
        let (tx, rx) = mpsc::channel(256);
        let job = WatchJob {
            api: self.clone(),
            info: target.info.clone(),
            namespace: target.namespace.clone(),
            filter,
            bookmarks,
            initial_events,
            timeout,
            rv,
            tx,
        };
        tokio::spawn(job.run());
        Ok(Reply::Watch(rx))
    }
}

/// One watch connection's work.
struct WatchJob {
    api: Api,
    info: ResourceInfo,
    namespace: Option<String>,
    filter: Filter,
    bookmarks: bool,
    initial_events: bool,
    timeout: Duration,
    rv: Option<String>,
    tx: mpsc::Sender<Bytes>,
}

impl WatchJob {
    async fn send(&self, kind: &str, object: Value) -> bool {
        let mut line = json!({"type": kind, "object": object}).to_string();
        line.push('\n');
        self.tx.send(Bytes::from(line)).await.is_ok()
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Value {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": metadata})
    }

    fn in_scope(&self, object: &Value) -> bool {
        self.namespace.as_deref().is_none_or(|ns| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                == Some(ns)
        }) && self.filter.matches(object)
    }

    /// The event a client of this watch sees, with selector transitions:
    /// an object leaving the selection is DELETED, one entering is ADDED.
    fn translate(&self, event: &Event) -> Option<(&'static str, Value)> {
        let now = self.in_scope(&event.object);
        let before = event.previous.as_deref().is_some_and(|p| self.in_scope(p));
        let stamped = |object: &Value| {
            let mut object = object.clone();
            if let Some(m) = metadata_mut(&mut object) {
                m.insert("resourceVersion".into(), event.rv.to_string().into());
            }
            served(&self.info, &object)
        };
        match event.kind {
            EventType::Added if now => Some(("ADDED", served(&self.info, &event.object))),
            EventType::Modified if now && before => {
                Some(("MODIFIED", served(&self.info, &event.object)))
            }
            EventType::Modified if now => Some(("ADDED", served(&self.info, &event.object))),
            EventType::Modified if before => {
                event.previous.as_deref().map(|p| ("DELETED", stamped(p)))
            }
            EventType::Deleted if before => Some(("DELETED", served(&self.info, &event.object))),
            _ => None,
        }
    }

    async fn fail(&self, error: ApiError) {
        self.send("ERROR", error.status()).await;
    }

    async fn run(self) {
        let store = self.api.store.clone();
        let key = self.info.storage_key();
        let deadline = tokio::time::Instant::now() + self.timeout;
        let start = match self.rv.as_deref() {
            // From a given version: only what happened after it.
            Some(rv) if rv != "0" && !self.initial_events => match parse_rv(rv) {
                Ok(rv) => rv,
                Err(e) => return self.fail(e).await,
            },
            // From "now" or "any": the current state as ADDED events first.
            _ => {
                let snapshot = match store.list(&key, self.namespace.as_deref(), ListAt::Latest) {
                    Ok(s) => s,
                    Err(e) => return self.fail(e.into()).await,
                };
                for object in snapshot.items.iter().filter(|o| self.filter.matches(o)) {
                    if !self.send("ADDED", served(&self.info, object)).await {
                        return;
                    }
                }
                if self.initial_events
                    && !self
                        .send("BOOKMARK", self.bookmark(snapshot.rv, true))
                        .await
                {
                    return;
                }
                snapshot.rv
            }
        };
        let mut watcher = match store.watch(Some(key), start) {
            Ok(w) => w,
            Err(e @ StoreError::Expired { .. }) => {
                return self.fail(ApiError::expired(e.to_string())).await;
            }
            Err(e) => return self.fail(e.into()).await,
        };
        let mut ticker = tokio::time::interval(self.api.config.bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                event = watcher.next() => match event {
                    Ok(event) => {
                        if let Some((kind, object)) = self.translate(&event)
                            && !self.send(kind, object).await {
                                return;
                            }
                    }
                    Err(e) => return self.fail(ApiError::expired(e.to_string())).await,
                },
                _ = ticker.tick(), if self.bookmarks => {
                    if !self.send("BOOKMARK", self.bookmark(watcher.position(), false)).await {
                        return;
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    if self.bookmarks {
                        self.send("BOOKMARK", self.bookmark(watcher.position(), false)).await;
                    }
                    return;
                }
                () = self.tx.closed() => return,
            }
        }
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(doc: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    if let Value::Object(map) = doc {
        for (key, value) in patch {
            if value.is_null() {
                map.shift_remove(key);
            } else {
                merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// RFC 6902 JSON patch, with the API server's semantics: `test` of an
/// absent path against `null` succeeds.
pub fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let ops = patch
        .as_array()
        .ok_or("a JSON patch must be an array of operations")?;
    for (i, op) in ops.iter().enumerate() {
        let field = |f: &str| op.get(f).and_then(Value::as_str);
        let path = field("path").ok_or(format!("operation {i}: missing path"))?;
        match field("op").ok_or(format!("operation {i}: missing op"))? {
            "add" => add(doc, path, value_of(op, i)?)?,
            "remove" => {
                remove(doc, path).ok_or(format!("operation {i}: path {path} does not exist"))?;
            }
            "replace" => {
                remove(doc, path).ok_or(format!("operation {i}: path {path} does not exist"))?;
                add(doc, path, value_of(op, i)?)?;
            }
            "test" => {
                let expected = value_of(op, i)?;
                let actual = doc.pointer(path).cloned().unwrap_or(Value::Null);
                if actual != expected {
                    return Err(format!("testing value {path} failed"));
                }
            }
            "move" | "copy" => {
                let from = field("from").ok_or(format!("operation {i}: missing from"))?;
                let value = if field("op") == Some("move") {
                    remove(doc, from)
                } else {
                    doc.pointer(from).cloned()
                }
                .ok_or(format!("operation {i}: path {from} does not exist"))?;
                add(doc, path, value)?;
            }
            other => return Err(format!("operation {i}: unknown op {other}")),
        }
    }
    Ok(())
}

fn value_of(op: &Value, i: usize) -> Result<Value, String> {
    op.get("value")
        .cloned()
        .ok_or(format!("operation {i}: missing value"))
}

fn split_pointer(path: &str) -> Result<(&str, String), String> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or(format!("invalid path {path}"))?;
    Ok((parent, last.replace("~1", "/").replace("~0", "~")))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(last, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| format!("invalid index in {path}"))?
            };
            if index > items.len() {
                return Err(format!("index out of range in {path}"));
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(format!("path {parent} does not exist")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Option<Value> {
    let (parent, last) = split_pointer(path).ok()?;
    match doc.pointer_mut(parent)? {
        Value::Object(map) => map.shift_remove(&last),
        Value::Array(items) => {
            let index: usize = last.parse().ok()?;
            (index < items.len()).then(|| items.remove(index))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_should_follow_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
    }

    #[test]
    fn json_patch_should_test_absent_paths_against_null() {
        let mut doc = json!({"metadata": {"name": "x"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["a"]},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
            {"op": "remove", "path": "/metadata/finalizers/0"}
        ]);
        json_patch(&mut doc, &patch).expect("applies");
        assert_eq!(doc["metadata"]["finalizers"], json!(["b"]));
        let failing = json!([{"op": "test", "path": "/metadata/name", "value": "y"}]);
        assert!(json_patch(&mut doc, &failing).is_err());
    }

    #[test]
    fn queries_should_be_percent_decoded() {
        let q = parse_query("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=true");
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "true");
    }

    #[test]
    fn field_selectors_should_support_name_and_namespace_only() {
        let f = FieldSelector::parse_for("metadata.name=a,metadata.namespace!=b", "configmaps")
            .expect("valid");
        assert!(f.matches(&json!({"metadata": {"name": "a", "namespace": "c"}})));
        assert!(!f.matches(&json!({"metadata": {"name": "a", "namespace": "b"}})));
        assert!(FieldSelector::parse_for("spec.nodeName=x", "configmaps").is_err());
        let events = FieldSelector::parse_for("involvedObject.name=web,type!=Normal", "events")
            .expect("valid");
        assert!(events.matches(&json!({"involvedObject": {"name": "web"}, "type": "Warning"})));
        assert!(!events.matches(&json!({"involvedObject": {"name": "web"}, "type": "Normal"})));
    }
}
