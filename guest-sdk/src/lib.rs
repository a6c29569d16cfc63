//! Write kubewasm controller plugins in Rust.
//!
//! A plugin is one type implementing [`Reconciler`] and one [`export!`]:
//!
//! ```no_run
//! use kubewasm_guest::k8s_openapi::api::core::v1::ConfigMap;
//! use kubewasm_guest::{Context, Declaration, Event, Outcome, Reconciler, Result};
//!
//! struct Hello;
//!
//! impl Reconciler for Hello {
//!     fn declare() -> Declaration {
//!         Declaration::new::<ConfigMap>("hello", "0.1.0")
//!     }
//!
//!     fn reconcile(ctx: &Context) -> Result<Outcome> {
//!         let Some(_cm) = ctx.primary::<ConfigMap>()? else {
//!             return Ok(Outcome::new());
//!         };
//!         Ok(Outcome::new().event(Event::normal("Seen", "Reconcile", "hello")))
//!     }
//! }
//!
//! kubewasm_guest::export!(Hello);
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2`: the result is a
//! component of the `kubewasm:controller` world. Test it natively with
//! [`testing::Harness`].
//!
//! Reads come from the host's caches and are limited to the declared types;
//! writes are desired actions the host checks and performs. A plugin never
//! holds a client.
//!
//! # The Kubernetes release of the types
//!
//! [`k8s_openapi`]'s types are those of the newest Kubernetes release the
//! host speaks (1.37) by default. A plugin written against another release
//! k8s-openapi covers chooses it, one at a time:
//!
//! ```toml
//! kubewasm-guest = { version = "0.1", default-features = false, features = ["v1_33"] }
//! ```
//!
//! The host runs a plugin built with any of them unchanged: objects cross
//! the boundary as JSON, and what a server of the host's release sends that
//! the plugin's types lack is ignored when it decodes them.

mod backend;
mod context;
mod error;
#[cfg(not(target_arch = "wasm32"))]
mod fixtures;
pub mod log;
mod outcome;
mod reconciler;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod types;

pub use context::Context;
pub use error::{Error, Result};
pub use outcome::{Action, Event, EventType, Outcome, Preconditions};
pub use reconciler::Reconciler;
pub use types::{Declaration, Mapping, ObjectKey, ResourceType, Secondary, Verb};
pub use {k8s_openapi, serde_json};

/// The generated bindings. Not part of the API.
#[doc(hidden)]
pub mod wit;

/// The time of the call, for timestamps such as a condition's
/// `lastTransitionTime`: in the host, the wall clock it gives the call
/// (frozen for the call: `replay --now` sets it); in a native test, the
/// [`testing::Harness::now`] clock if one is set, else the system's.
pub fn now() -> k8s_openapi::jiff::Timestamp {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(now) = fixtures::now() {
        return now;
    }
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    let nanos = i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0);
    k8s_openapi::jiff::Timestamp::new(seconds, nanos)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// Exports a [`Reconciler`] as the plugin's implementation of the world.
///
/// The export exists only in wasm builds; a native build (for `cargo test`)
/// compiles the reconciler alone.
#[macro_export]
macro_rules! export {
    ($reconciler:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct KubewasmExport;
            impl $crate::__private::Guest for KubewasmExport {
                fn declare() -> $crate::__private::WitDeclaration {
                    $crate::__private::declare::<$reconciler>()
                }
                fn reconcile(
                    request: $crate::__private::WitRequest,
                ) -> ::core::result::Result<
                    $crate::__private::WitOutcome,
                    $crate::__private::WitFailure,
                > {
                    $crate::__private::run(request, <$reconciler as $crate::Reconciler>::reconcile)
                }
                fn finalize(
                    request: $crate::__private::WitRequest,
                ) -> ::core::result::Result<
                    $crate::__private::WitOutcome,
                    $crate::__private::WitFailure,
                > {
                    $crate::__private::run(request, <$reconciler as $crate::Reconciler>::finalize)
                }
                fn map_keys(
                    request: $crate::__private::WitMapRequest,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<$crate::__private::WitObjectKey>,
                    $crate::__private::WitFailure,
                > {
                    $crate::__private::map_keys::<$reconciler>(request)
                }
                fn scheduled(
                    request: $crate::__private::WitScheduledRequest,
                ) -> ::core::result::Result<
                    $crate::__private::WitOutcome,
                    $crate::__private::WitFailure,
                > {
                    $crate::__private::scheduled::<$reconciler>(request)
                }
            }
    $crate::wit::__export_plugin!(KubewasmExport with_types_in $crate::wit);
        };
    };
}

/// Glue used by [`export!`]. Not part of the API.
#[doc(hidden)]
pub mod __private {
    use crate::wit::exports::kubewasm::controller::plugin as p;
    use crate::wit::kubewasm::controller::types as t;
    use crate::{
        Action, Context, Declaration, EventType, Mapping, ObjectKey, Outcome, Reconciler,
        ResourceType, Result, Verb,
    };

    pub use p::{
        Declaration as WitDeclaration, Failure as WitFailure, Guest, MapRequest as WitMapRequest,
        Outcome as WitOutcome, Request as WitRequest, ScheduledRequest as WitScheduledRequest,
    };
    pub use t::ObjectKey as WitObjectKey;

    impl From<&ResourceType> for t::ResourceType {
        fn from(r: &ResourceType) -> Self {
            Self {
                group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
                plural: r.plural.clone(),
                namespaced: r.namespaced,
            }
        }
    }

    impl From<t::ResourceType> for ResourceType {
        fn from(r: t::ResourceType) -> Self {
            Self {
                group: r.group,
                version: r.version,
                kind: r.kind,
                plural: r.plural,
                namespaced: r.namespaced,
            }
        }
    }

    impl From<&ObjectKey> for t::ObjectKey {
        fn from(k: &ObjectKey) -> Self {
            Self {
                namespace: k.namespace.clone(),
                name: k.name.clone(),
            }
        }
    }

    fn verb(v: Verb) -> t::Verb {
        match v {
            Verb::Get => t::Verb::Get,
            Verb::List => t::Verb::List,
            Verb::Watch => t::Verb::Watch,
            Verb::Apply => t::Verb::Apply,
            Verb::ApplyStatus => t::Verb::ApplyStatus,
            Verb::Delete => t::Verb::Delete,
        }
    }

    /// The declaration in WIT form.
    pub fn declare<R: Reconciler>() -> p::Declaration {
        let d: Declaration = R::declare();
        p::Declaration {
            name: d.name,
            version: d.version,
            primary: (&d.primary).into(),
            primary_verbs: d.primary_verbs.into_iter().map(verb).collect(),
            primary_selector: d.primary_selector,
            secondaries: d
                .secondaries
                .into_iter()
                .map(|s| p::Secondary {
                    type_: (&s.resource).into(),
                    verbs: s.verbs.into_iter().map(verb).collect(),
                    label_selector: s.label_selector,
                    mapping: match s.mapping {
                        Mapping::None => p::Mapping::None,
                        Mapping::OwnerReferences => p::Mapping::OwnerReferences,
                        Mapping::Label(key) => p::Mapping::Label(key),
                        Mapping::Custom => p::Mapping::Custom,
                        Mapping::Reads => p::Mapping::Reads,
                    },
                    prune: s.prune,
                })
                .collect(),
            managed_finalizer: d.managed_finalizer,
            resync_seconds: d.resync_seconds,
            max_concurrency: d.max_concurrency,
            config_schema: d.config_schema,
            schedule: d.schedule,
        }
    }

    fn action(a: Action) -> p::Action {
        match a {
            Action::Apply {
                object,
                owned,
                force,
            } => p::Action::Apply(p::Apply {
                object: object.to_string(),
                owned,
                force,
            }),
            Action::ApplyStatus(object) => p::Action::ApplyStatus(object.to_string()),
            Action::Delete(resource, key, preconditions) => p::Action::Delete(p::Deletion {
                type_: (&resource).into(),
                key: (&key).into(),
                preconditions: p::Preconditions {
                    uid: preconditions.uid,
                    resource_version: preconditions.resource_version,
                },
            }),
            Action::Event(e) => p::Action::Event(p::Event {
                regarding: e.regarding.map(|(r, k)| ((&r).into(), (&k).into())),
                type_: match e.event_type {
                    EventType::Normal => p::EventType::Normal,
                    EventType::Warning => p::EventType::Warning,
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            }),
        }
    }

    /// Runs a reconcile or finalize and converts its result.
    pub fn run(
        request: p::Request,
        f: fn(&Context) -> Result<Outcome>,
    ) -> Result<p::Outcome, p::Failure> {
        let ctx = Context {
            key: ObjectKey {
                namespace: request.key.namespace,
                name: request.key.name,
            },
            resource: request.type_.into(),
            config: request.config,
            retries: request.retries,
            last_failure: request.last_failure,
            previous: None,
            deleted: false,
            scheduled_at: None,
        };
        answer(&ctx, f)
    }

    /// Runs `scheduled`: a context with no primary (an empty key of the
    /// primary's type) and the time it was scheduled for.
    pub fn scheduled<R: Reconciler>(
        request: p::ScheduledRequest,
    ) -> Result<p::Outcome, p::Failure> {
        let mut ctx = Context::new(R::declare().primary, ObjectKey::cluster(""));
        ctx.config = request.config;
        ctx.scheduled_at = request.scheduled_at.parse().ok();
        answer(&ctx, R::scheduled)
    }

    /// Runs `f` and converts its result.
    fn answer(ctx: &Context, f: fn(&Context) -> Result<Outcome>) -> Result<p::Outcome, p::Failure> {
        match f(ctx).and_then(Outcome::into_result) {
            Ok(outcome) => Ok(p::Outcome {
                actions: outcome.actions.into_iter().map(action).collect(),
                requeue_after_ms: outcome
                    .requeue_after
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                finalizer: outcome.finalizer,
            }),
            Err(error) => Err(p::Failure {
                message: error.to_string(),
            }),
        }
    }

    /// Runs `map_keys` on the parsed object.
    pub fn map_keys<R: Reconciler>(
        request: p::MapRequest,
    ) -> Result<Vec<t::ObjectKey>, p::Failure> {
        let failure = |error: crate::Error| p::Failure {
            message: error.to_string(),
        };
        let object: serde_json::Value =
            serde_json::from_str(&request.object).map_err(|e| failure(e.into()))?;
        let key = ObjectKey::of(&object)
            .ok_or_else(|| failure(crate::Error::msg("the changed object has no metadata.name")))?;
        let mut ctx = Context::new(request.type_.into(), key);
        ctx.config = request.config;
        ctx.previous = request
            .previous
            .map(|previous| serde_json::from_str(&previous))
            .transpose()
            .map_err(|e| failure(e.into()))?;
        ctx.deleted = request.deleted;
        R::map_keys(&ctx, &object)
            .map(|keys| keys.iter().map(t::ObjectKey::from).collect())
            .map_err(failure)
    }
}
