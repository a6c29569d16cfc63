//! The REST API over the store: routing, then one module per concern,
//! generic over every resource type. Independent of the HTTP server: a
//! request in, a [`Reply`] out.
//!
//! - [`query`]: query parameters, parsed and range-checked;
//! - `filter`: label and field selectors;
//! - `discovery`: `/api`, `/apis`, aggregated discovery, `/version`;
//! - `read`: get and list (paged with continue tokens);
//! - `write`: create, update, patch, server-side apply;
//! - `delete`: delete and deletecollection;
//! - `subresource`: `/scale`, `/approval`;
//! - `crds`: serving and retiring CustomResourceDefinitions;
//! - `watch`: watch streams.
//!
//! Body decoding is [`crate::http::decode`], patch algorithms [`crate::mutation::patch`],
//! size and depth bounds [`crate::http::bounds`].

use std::sync::{Arc, RwLock};
use std::time::Duration;

use kubewasm_core::ObjectKey;
use serde_json::{Value, json};

use crate::http::auth::Authenticator;
use crate::http::auth::token::Signer;
use crate::http::error::ApiError;
use crate::http::faults::Faults;
use crate::store::{ResourceKey, Store};
use kubewasm_types::info::ResourceInfo;
use kubewasm_types::registry::Registry;
use representation::As;

mod access;
mod admission;
mod allocate;
mod body;
mod checks;
mod crds;
mod delete;
mod discovery;
mod filter;
pub mod query;
mod read;
mod representation;
mod request;
mod route;
mod server_side_apply;
mod shape;
mod slots;
mod strategy;
mod subresource;
mod table;
mod watch;
mod write;

pub use crate::http::bounds::MAX_BODY;
pub use query::parse_query;
pub use request::{Reply, Request};
use route::{Review, Route, Target};

/// What client-go's `OpenAPISchema()` accepts: gnostic's protobuf of
/// `/openapi/v2` (its Accept header spells the version `@v1.0`).
const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2";
/// The content type a real server answers it with.
const OPENAPI_V2_PROTOBUF_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Settings of the API.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// How often a watch with bookmarks sends one.
    pub bookmark_interval: Duration,
    /// Watch timeout when the client sets none.
    pub default_watch_timeout: Duration,
    /// Run the workload simulator ([`crate::controllers::simulator`]) with this delay.
    pub simulate_workloads: Option<Duration>,
    /// Most watches open at once; past it a watch gets 429.
    pub max_watches: usize,
    /// Most watches one user may have open at once; past it, 429.
    pub max_watches_per_user: usize,
    /// Added to every request before it is answered, so that a client on
    /// this machine is bound by round trips as one of a remote cluster is.
    pub request_latency: Duration,
    /// Serve KEP-5866's `shardSelector` on lists and watches; off, the
    /// parameter is ignored, as by a server without the feature.
    pub shard_selectors: bool,
    /// Faults injected on the requests of connections (never on the
    /// server's own controllers): [`crate::http::faults`].
    pub faults: Option<Arc<Faults>>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            simulate_workloads: None,
            max_watches: 4096,
            max_watches_per_user: 1024,
            request_latency: Duration::ZERO,
            shard_selectors: true,
            faults: None,
        }
    }
}

/// The API: a store, the registry of served types, settings.
#[derive(Clone, Debug)]
pub struct Api {
    store: Store,
    registry: Arc<RwLock<Registry>>,
    config: ApiConfig,
    /// One permit per open watch.
    watches: Arc<slots::WatchSlots>,
    /// None: no authentication, everyone is the admin.
    authenticator: Option<Authenticator>,
    /// Custom resources' first RV served, by storage: the history a watch
    /// of one may start from begins there, as a real server's watch cache
    /// for a CRD begins when the CRD is established.
    served_since: Arc<std::sync::Mutex<std::collections::HashMap<ResourceKey, u64>>>,
}

impl Api {
    /// An API over `store` serving the built-in types and the CRDs the
    /// store holds.
    pub fn new(store: Store, config: ApiConfig) -> Self {
        let api = Self {
            store,
            registry: Arc::new(RwLock::new(Registry::builtin())),
            watches: Arc::new(slots::WatchSlots::new(
                config.max_watches,
                config.max_watches_per_user,
            )),
            config,
            authenticator: None,
            served_since: Arc::default(),
        };
        api.serve_stored_crds();
        api
    }

    /// The API with authentication and authorization: `admin_token` is the
    /// admin's, ServiceAccount tokens are signed with a key derived from it.
    #[must_use]
    pub fn with_authentication(mut self, admin_token: &str) -> Self {
        self.authenticator = Some(Authenticator::new(
            admin_token,
            Signer::derived_from(admin_token),
            self.store.clone(),
        ));
        self
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
    ///
    /// A request that may have written is answered only once what it wrote
    /// is durable (see [`crate::store::persist`]); if it cannot be made durable
    /// the answer is a 500, whatever the verb said.
    pub async fn handle(&self, request: Request<'_>) -> Reply {
        let writes = request.may_write();
        let reply = self.dispatch(request).await;
        if writes && let Err(error) = self.store.flush().await {
            let error = ApiError::from(error);
            return Reply::Json(error.code, error.status());
        }
        match reply {
            Ok(reply) => reply,
            Err(error) => Reply::Json(error.code, error.status()),
        }
    }

    async fn dispatch(&self, mut request: Request<'_>) -> Result<Reply, ApiError> {
        if request.body.len() > MAX_BODY {
            return Err(ApiError::too_large(MAX_BODY));
        }
        request.user = self.acting_user(&request.user, &request.impersonate)?;
        match self.route(request.path)? {
            Route::Review(review) => self.review(review, &request),
            Route::LocalReview(namespace) => self.local_review(&namespace, &request),
            Route::Binding(namespace) => self.create_binding(&namespace, &request),
            Route::Version => Ok(Reply::Json(200, Self::version())),
            Route::Health => Ok(Reply::Text(200, "ok".into())),
            // A real server writes the index without a content type, so Go
            // sniffs one.
            Route::OpenApiIndex => Ok(Reply::Encoded(
                "text/plain; charset=utf-8",
                crate::schema::openapi::v3::index(&self.registry())
                    .to_string()
                    .into_bytes(),
            )),
            Route::OpenApi(path) => crate::schema::openapi::v3::document(&self.registry(), &path)
                .map(|text| Reply::Encoded("application/json", text.into_bytes()))
                .ok_or_else(ApiError::no_route),
            Route::OpenApiV2 => {
                let document = crate::schema::openapi::v2::document(&self.registry());
                // client-go's `OpenAPISchema()` asks for gnostic's protobuf.
                Ok(if request.accept.contains(OPENAPI_V2_PROTOBUF) {
                    Reply::Encoded(
                        OPENAPI_V2_PROTOBUF_TYPE,
                        crate::schema::openapi::gnostic::document(&document),
                    )
                } else {
                    Reply::Json(200, document)
                })
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
                .ok_or_else(ApiError::no_route),
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
            ["openapi", "v2"] => return Ok(Route::OpenApiV2),
            ["openapi", "v3"] => return Ok(Route::OpenApiIndex),
            ["openapi", "v3", document @ ..] => return Ok(Route::OpenApi(document.join("/"))),
            [
                "apis",
                "authorization.k8s.io",
                "v1",
                "selfsubjectaccessreviews",
            ] => {
                return Ok(Route::Review(Review::Access));
            }
            [
                "apis",
                "authorization.k8s.io",
                "v1",
                "selfsubjectrulesreviews",
            ] => {
                return Ok(Route::Review(Review::Rules));
            }
            ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => {
                return Ok(Route::Review(Review::Subject));
            }
            [
                "apis",
                "authorization.k8s.io",
                "v1",
                "namespaces",
                namespace,
                "localsubjectaccessreviews",
            ] => {
                return Ok(Route::LocalReview((*namespace).to_owned()));
            }
            ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] => {
                return Ok(Route::Review(Review::WhoAmI));
            }
            ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => {
                return Ok(Route::Review(Review::Token));
            }
            ["api", "v1", "namespaces", namespace, "bindings"] => {
                return Ok(Route::Binding((*namespace).to_owned()));
            }
            ["api"] => return Ok(Route::CoreVersions),
            ["apis"] => return Ok(Route::Groups),
            ["apis", group] => return Ok(Route::Group((*group).to_owned())),
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return Err(ApiError::no_route()),
        };
        if rest.is_empty() {
            if self.registry().in_version(group, version).next().is_none()
                && route::reviews(group, version).next().is_none()
            {
                return Err(ApiError::no_route());
            }
            return Ok(Route::ResourceList(group.to_owned(), version.to_owned()));
        }
        let registry = self.registry();
        let resolve = |plural: &str| {
            registry
                .get(group, version, plural)
                .cloned()
                .ok_or_else(ApiError::no_route)
        };
        let target = |info: ResourceInfo,
                      namespace: Option<&str>,
                      rest: &[&str]|
         -> Result<Route, ApiError> {
            if rest.len() > 2 {
                return Err(ApiError::no_route());
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
                    return Err(ApiError::no_route());
                }
                target(info, Some(namespace), tail)
            }
            [plural, tail @ ..] => {
                let info = resolve(plural)?;
                if info.namespaced && !tail.is_empty() {
                    return Err(ApiError::no_route());
                }
                target(info, None, tail)
            }
            [] => Err(ApiError::no_route()),
        }
    }
}

impl Api {
    async fn resource(&self, target: Target, request: Request<'_>) -> Result<Reply, ApiError> {
        self.authorize(&target, &request)?;
        let representation = As::of(request.accept);
        let watching = request
            .query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1");
        if request.method == "GET" && target.name.is_none() && target.subresource.is_none() {
            query::list_options(&request.query, watching)?;
        }
        // A verb the type or subresource does not serve, as its release's
        // discovery lists its verbs (a Namespace's collection is not deleted
        // at once; its `finalize` is only replaced).
        let verb = match (request.method, &target.name, target.subresource.as_deref()) {
            ("GET", None, None) if watching => Some("watch"),
            ("GET", None, None) => Some("list"),
            ("GET", Some(_), _) => Some("get"),
            ("POST", _, _) => Some("create"),
            ("PUT", Some(_), _) => Some("update"),
            ("PATCH", Some(_), _) => Some("patch"),
            ("DELETE", Some(_), None) => Some("delete"),
            ("DELETE", None, None) => Some("deletecollection"),
            _ => None,
        };
        if let Some(verb) = verb
            && !target.info.serves(target.subresource.as_deref(), verb)
        {
            return Err(ApiError::not_allowed());
        }
        let reply = match (request.method, &target.name, target.subresource.as_deref()) {
            ("GET", None, None) if watching => {
                self.watch(&target, &request.query, representation, &request.user.name)
            }
            ("GET", None, None) => self.list(&target, &request.query, representation),
            ("GET", Some(name), None) => self.get(&target, name, representation),
            ("GET", Some(name), Some(sub)) if shape::part_of(&target.info, sub).is_some() => {
                self.get(&target, name, representation)
            }
            ("GET", Some(name), Some("log"))
                if target.info.group.is_empty() && target.info.plural == "pods" =>
            {
                self.pod_log(&target, name, &request.query)
            }
            ("GET", Some(name), Some("scale")) if target.info.scale => {
                self.get_scale(&target, name)
            }
            ("PUT" | "PATCH", Some(name), Some("scale")) if target.info.scale => {
                self.update_scale(&target, name, &request)
            }
            ("POST", None, None) => self.create(&target, &request),
            ("PUT", Some(name), None) => self.update(&target, name, &request),
            ("PATCH", Some(name), None) => self.patch(&target, name, &request),
            // Subresources that write a part of the object, by PUT or PATCH.
            ("PUT", Some(name), Some(sub)) if shape::part_of(&target.info, sub).is_some() => {
                self.update(&target, name, &request)
            }
            ("PATCH", Some(name), Some(sub)) if shape::part_of(&target.info, sub).is_some() => {
                self.patch(&target, name, &request)
            }
            ("POST", Some(name), Some("binding"))
                if target.info.group.is_empty() && target.info.plural == "pods" =>
            {
                self.bind(&target, name, &request)
            }
            ("POST", Some(name), Some("token")) if target.info.plural == "serviceaccounts" => {
                self.request_token(&target, name, &request)
            }
            ("DELETE", Some(name), None) => self.delete(&target, name, &request),
            ("DELETE", None, None) => self.delete_collection(&target, &request),
            _ => Err(ApiError::not_allowed()),
        }?;
        Ok(match reply {
            // A write answers with the object in the representation asked
            // for, as reads do (kube-rs's `patch_metadata` expects
            // `PartialObjectMetadata` back); a Status stays a Status.
            Reply::Json(code, object)
                if request.method != "GET"
                    && representation != As::Object
                    && object["kind"] == target.info.kind.as_str() =>
            {
                Reply::Json(
                    code,
                    representation::object(representation, &target.info, &object, true),
                )
            }
            reply => reply,
        })
    }

    fn key(&self, target: &Target, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: target.namespace.clone(),
            name: name.to_owned(),
        }
    }
}
