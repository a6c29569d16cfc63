//! The one place generated code lives: a `bindgen!` for each version of
//! the `controller` world the host speaks, the dispatch between them, and
//! conversions between generated types and the host's own.
//!
//! The host works in the types of the newest contract (0.3.0). A component
//! of an older one is called through [`Controller`], which converts its
//! requests down and its answers up, one version at a time (0.1.0 through
//! 0.2.0): 0.2.0's `map-keys` sees one state of an object per call (the
//! host calls it for the new state, then the previous one); 0.1.0 knows no
//! primary selector (every primary), no unforced apply (every apply
//! forces), no delete preconditions beyond the cached uid, and a `map-keys`
//! that cannot fail. The versions share the `types` interface's Rust types
//! (the records are the same), each links its own `cache` and `log`.

use std::collections::BTreeSet;

use wasmtime::component::{Component, InstancePre};
use wasmtime::{Engine, Store};

use super::Contract;
use super::state::PluginState;
use crate::action::{Desired, DesiredEvent, EventType, Preconditions};
use crate::declaration::{Declaration, DeclarationError, Mapping, Secondary, Verb};
use crate::resource::{ObjectKey, ResourceType};

mod v0_3 {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "controller",
        // Host functions are plain synchronous Rust: cache reads are memory
        // lookups and logging never blocks, so no async machinery per call.
        // They may trap (a plugin out of hostcall fuel is stopped at once).
        // Generated types derive nothing beyond the defaults.
        imports: { default: trappable },
    });
}

mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0",
        world: "controller",
        imports: { default: trappable },
        with: {
            "kubewasm:controller/types@0.2.0": crate::bindings::v0_3::kubewasm::controller::types,
        },
    });
}

mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0",
        world: "controller",
        imports: { default: trappable },
        with: {
            "kubewasm:controller/types@0.1.0": crate::bindings::v0_3::kubewasm::controller::types,
        },
    });
}

pub(crate) use v0_3::exports::kubewasm::controller::plugin as exports;
pub(crate) use v0_3::kubewasm::controller::{cache, log, types};

/// The 0.2.0 imports, linked beside the current ones.
pub(crate) mod v0_2_imports {
    pub(crate) use super::v0_2::kubewasm::controller::{cache, log};
}

/// The 0.1.0 imports, linked beside the current ones.
pub(crate) mod v0_1_imports {
    pub(crate) use super::v0_1::kubewasm::controller::{cache, log};
}

use v0_1::exports::kubewasm::controller::plugin as v1;
use v0_2::exports::kubewasm::controller::plugin as v2;

/// A component linked, ready to instantiate: of one contract version, with
/// the indices of its exports.
pub(crate) enum ControllerPre {
    V0_1(InstancePre<PluginState>, v0_1::ControllerIndices),
    V0_2(InstancePre<PluginState>, v0_2::ControllerIndices),
    V0_3(InstancePre<PluginState>, v0_3::ControllerIndices),
}

/// Why an instance could not be made.
pub(crate) enum Instantiation {
    /// Instantiating failed: a trap in its start, a limit, the pool.
    Failed(wasmtime::Error),
    /// It instantiated, but an export's type is not the contract's (a
    /// component built against another revision of the WIT package).
    Exports(wasmtime::Error),
}

impl ControllerPre {
    /// Wraps a linked component of `contract`, finding its exports.
    pub(crate) fn new(contract: Contract, pre: InstancePre<PluginState>) -> wasmtime::Result<Self> {
        Ok(match contract {
            Contract::V0_1 => {
                let indices = v0_1::ControllerIndices::new(&pre)?;
                Self::V0_1(pre, indices)
            }
            Contract::V0_2 => {
                let indices = v0_2::ControllerIndices::new(&pre)?;
                Self::V0_2(pre, indices)
            }
            Contract::V0_3 => {
                let indices = v0_3::ControllerIndices::new(&pre)?;
                Self::V0_3(pre, indices)
            }
        })
    }

    fn instance_pre(&self) -> &InstancePre<PluginState> {
        match self {
            Self::V0_1(pre, _) | Self::V0_2(pre, _) | Self::V0_3(pre, _) => pre,
        }
    }

    pub(crate) fn component(&self) -> &Component {
        self.instance_pre().component()
    }

    pub(crate) fn engine(&self) -> &Engine {
        self.instance_pre().engine()
    }

    /// A fresh instance in `store`, its exports type-checked.
    pub(crate) fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> Result<Controller, Instantiation> {
        let instance = self
            .instance_pre()
            .instantiate(&mut *store)
            .map_err(Instantiation::Failed)?;
        let loaded = match self {
            Self::V0_1(_, indices) => indices.load(&mut *store, &instance).map(Controller::V0_1),
            Self::V0_2(_, indices) => indices.load(&mut *store, &instance).map(Controller::V0_2),
            Self::V0_3(_, indices) => indices.load(&mut *store, &instance).map(Controller::V0_3),
        };
        loaded.map_err(Instantiation::Exports)
    }
}

/// A live instance's exports, called in the current contract's types.
pub(crate) enum Controller {
    V0_1(v0_1::Controller),
    V0_2(v0_2::Controller),
    V0_3(v0_3::Controller),
}

/// The two calls about a primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// `reconcile`.
    Reconcile,
    /// `finalize`.
    Finalize,
}

/// What a reconcile or finalize returns.
pub(crate) type Answer = Result<exports::Outcome, exports::Failure>;

/// What a `map-keys` returns.
pub(crate) type Keys = Result<Vec<types::ObjectKey>, exports::Failure>;

impl Controller {
    pub(crate) fn declare(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<exports::Declaration> {
        Ok(match self {
            Self::V0_1(c) => {
                v2::Declaration::from(c.kubewasm_controller_plugin().call_declare(store)?).into()
            }
            Self::V0_2(c) => c.kubewasm_controller_plugin().call_declare(store)?.into(),
            Self::V0_3(c) => c.kubewasm_controller_plugin().call_declare(store)?,
        })
    }

    /// Runs `reconcile` or `finalize`, as `call` says.
    pub(crate) fn call(
        &self,
        store: &mut Store<PluginState>,
        request: &exports::Request,
        call: Call,
    ) -> wasmtime::Result<Answer> {
        Ok(match self {
            Self::V0_1(c) => {
                let plugin = c.kubewasm_controller_plugin();
                let request = v1::Request::from(&v2::Request::from(request));
                upgrade(upgrade_v1(match call {
                    Call::Reconcile => plugin.call_reconcile(store, &request)?,
                    Call::Finalize => plugin.call_finalize(store, &request)?,
                }))
            }
            Self::V0_2(c) => {
                let (plugin, request) = (c.kubewasm_controller_plugin(), request.into());
                upgrade(match call {
                    Call::Reconcile => plugin.call_reconcile(store, &request)?,
                    Call::Finalize => plugin.call_finalize(store, &request)?,
                })
            }
            Self::V0_3(c) => {
                let plugin = c.kubewasm_controller_plugin();
                match call {
                    Call::Reconcile => plugin.call_reconcile(store, request)?,
                    Call::Finalize => plugin.call_finalize(store, request)?,
                }
            }
        })
    }

    /// Runs `scheduled` (0.3.0 on; an older component declares no
    /// schedule, so is never called for one).
    pub(crate) fn scheduled(
        &self,
        store: &mut Store<PluginState>,
        request: &exports::ScheduledRequest,
    ) -> wasmtime::Result<Answer> {
        match self {
            Self::V0_3(c) => c
                .kubewasm_controller_plugin()
                .call_scheduled(store, request),
            Self::V0_1(_) | Self::V0_2(_) => Err(wasmtime::Error::msg(
                "a component of a contract before 0.3.0 has no `scheduled` export",
            )),
        }
    }

    /// Runs `map-keys`. Before 0.3.0 a call sees one state: the new one,
    /// then the previous one if there is one; the keys of both are
    /// returned (the first failure, if one fails).
    pub(crate) fn map_keys(
        &self,
        store: &mut Store<PluginState>,
        request: &exports::MapRequest,
    ) -> wasmtime::Result<Keys> {
        let states = match self {
            Self::V0_3(_) => 1,
            Self::V0_1(_) | Self::V0_2(_) => 1 + usize::from(request.previous.is_some()),
        };
        let mut keys = Vec::new();
        for object in std::iter::once(&request.object)
            .chain(&request.previous)
            .take(states)
        {
            let mapped = match self {
                Self::V0_1(c) => Ok(c.kubewasm_controller_plugin().call_map_keys(
                    &mut *store,
                    &request.type_,
                    object,
                )?),
                Self::V0_2(c) => {
                    let request = v2::MapRequest {
                        type_: request.type_.clone(),
                        object: object.clone(),
                        config: request.config.clone(),
                    };
                    c.kubewasm_controller_plugin()
                        .call_map_keys(&mut *store, &request)?
                        .map_err(|failure| exports::Failure {
                            message: failure.message,
                        })
                }
                Self::V0_3(c) => c
                    .kubewasm_controller_plugin()
                    .call_map_keys(&mut *store, request)?,
            };
            match mapped {
                Ok(mapped) => keys.extend(mapped),
                Err(failure) => return Ok(Err(failure)),
            }
        }
        Ok(Ok(keys))
    }
}

/// A 0.1.0 answer in 0.2.0's types.
fn upgrade_v1(answer: Result<v1::Outcome, v1::Failure>) -> Result<v2::Outcome, v2::Failure> {
    answer
        .map(|outcome| v2::Outcome {
            actions: outcome.actions.into_iter().map(v2::Action::from).collect(),
            requeue_after_ms: outcome.requeue_after_ms,
            finalizer: outcome.finalizer,
        })
        .map_err(|failure| v2::Failure {
            message: failure.message,
        })
}

/// A 0.2.0 answer in the current types.
fn upgrade(answer: Result<v2::Outcome, v2::Failure>) -> Answer {
    answer
        .map(|outcome| exports::Outcome {
            actions: outcome
                .actions
                .into_iter()
                .map(exports::Action::from)
                .collect(),
            requeue_after_ms: outcome.requeue_after_ms,
            finalizer: outcome.finalizer,
        })
        .map_err(|failure| exports::Failure {
            message: failure.message,
        })
}

impl From<&exports::Request> for v2::Request {
    fn from(r: &exports::Request) -> Self {
        Self {
            key: r.key.clone(),
            type_: r.type_.clone(),
            config: r.config.clone(),
            retries: r.retries,
            last_failure: r.last_failure.clone(),
        }
    }
}

impl From<&v2::Request> for v1::Request {
    fn from(r: &v2::Request) -> Self {
        Self {
            key: r.key.clone(),
            type_: r.type_.clone(),
            config: r.config.clone(),
            retries: r.retries,
            last_failure: r.last_failure.clone(),
        }
    }
}

/// A declaration of one version in the next one's types, the primary
/// selector given (0.1.0 has none) and the secondaries' new fields (0.3.0's
/// `prune`, never for an older component).
macro_rules! upgrade_declaration {
    ($d:ident: $from:ident -> $to:ident, primary_selector: $selector:expr
     $(, secondary: { $($field:ident: $value:expr),* }, declaration: { $($new:ident: $new_value:expr),* })?) => {
        $to::Declaration {
            name: $d.name,
            version: $d.version,
            primary: $d.primary,
            primary_verbs: $d.primary_verbs,
            primary_selector: $selector,
            secondaries: $d
                .secondaries
                .into_iter()
                .map(|s| $to::Secondary {
                    type_: s.type_,
                    verbs: s.verbs,
                    label_selector: s.label_selector,
                    mapping: match s.mapping {
                        $from::Mapping::None => $to::Mapping::None,
                        $from::Mapping::OwnerReferences => $to::Mapping::OwnerReferences,
                        $from::Mapping::Label(key) => $to::Mapping::Label(key),
                        $from::Mapping::Custom => $to::Mapping::Custom,
                    },
                    $($($field: $value,)*)?
                })
                .collect(),
            managed_finalizer: $d.managed_finalizer,
            resync_seconds: $d.resync_seconds,
            max_concurrency: $d.max_concurrency,
            config_schema: $d.config_schema,
            $($($new: $new_value,)*)?
        }
    };
}

/// An action of one version in the next one's types, an apply's `force`
/// and a delete's preconditions given (0.1.0 has neither).
macro_rules! upgrade_action {
    ($a:ident: $from:ident -> $to:ident, force: |$apply:ident| $force:expr,
     preconditions: |$delete:ident| $preconditions:expr) => {
        match $a {
            $from::Action::Apply($apply) => $to::Action::Apply($to::Apply {
                force: $force,
                object: $apply.object,
                owned: $apply.owned,
            }),
            $from::Action::ApplyStatus(object) => $to::Action::ApplyStatus(object),
            $from::Action::Delete($delete) => $to::Action::Delete($to::Deletion {
                preconditions: $preconditions,
                type_: $delete.type_,
                key: $delete.key,
            }),
            $from::Action::Event(e) => $to::Action::Event($to::Event {
                regarding: e.regarding,
                type_: match e.type_ {
                    $from::EventType::Normal => $to::EventType::Normal,
                    $from::EventType::Warning => $to::EventType::Warning,
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            }),
        }
    };
}

impl From<v1::Declaration> for v2::Declaration {
    fn from(d: v1::Declaration) -> Self {
        upgrade_declaration!(d: v1 -> v2, primary_selector: String::new())
    }
}

impl From<v2::Declaration> for exports::Declaration {
    fn from(d: v2::Declaration) -> Self {
        upgrade_declaration!(d: v2 -> exports, primary_selector: d.primary_selector,
            secondary: { prune: false }, declaration: { schedule: None })
    }
}

impl From<v1::Action> for v2::Action {
    fn from(a: v1::Action) -> Self {
        upgrade_action!(a: v1 -> v2,
        // 0.1.0 knew no other apply.
        force: |apply| true,
        // The uid the cache held, as 0.1.0 did.
        preconditions: |delete| v2::Preconditions {
            uid: None,
            resource_version: None,
        })
    }
}

impl From<v2::Action> for exports::Action {
    fn from(a: v2::Action) -> Self {
        upgrade_action!(a: v2 -> exports,
        force: |apply| apply.force,
        preconditions: |delete| exports::Preconditions {
            uid: delete.preconditions.uid,
            resource_version: delete.preconditions.resource_version,
        })
    }
}

impl From<types::ResourceType> for ResourceType {
    fn from(t: types::ResourceType) -> Self {
        Self {
            group: t.group,
            version: t.version,
            kind: t.kind,
            plural: t.plural,
            namespaced: t.namespaced,
        }
    }
}

impl From<&ResourceType> for types::ResourceType {
    fn from(t: &ResourceType) -> Self {
        Self {
            group: t.group.clone(),
            version: t.version.clone(),
            kind: t.kind.clone(),
            plural: t.plural.clone(),
            namespaced: t.namespaced,
        }
    }
}

impl From<types::ObjectKey> for ObjectKey {
    fn from(k: types::ObjectKey) -> Self {
        Self {
            namespace: k.namespace,
            name: k.name,
        }
    }
}

impl From<&ObjectKey> for types::ObjectKey {
    fn from(k: &ObjectKey) -> Self {
        Self {
            namespace: k.namespace.clone(),
            name: k.name.clone(),
        }
    }
}

impl From<types::Verb> for Verb {
    fn from(v: types::Verb) -> Self {
        match v {
            types::Verb::Get => Self::Get,
            types::Verb::List => Self::List,
            types::Verb::Watch => Self::Watch,
            types::Verb::Apply => Self::Apply,
            types::Verb::ApplyStatus => Self::ApplyStatus,
            types::Verb::Delete => Self::Delete,
        }
    }
}

fn verbs(verbs: Vec<types::Verb>) -> BTreeSet<Verb> {
    verbs.into_iter().map(Verb::from).collect()
}

impl TryFrom<exports::Declaration> for Declaration {
    type Error = DeclarationError;

    fn try_from(d: exports::Declaration) -> Result<Self, Self::Error> {
        let config_schema = d
            .config_schema
            .map(|schema| serde_json::from_str(&schema))
            .transpose()
            .map_err(DeclarationError::ConfigSchema)?;
        Self {
            name: d.name,
            version: d.version,
            primary: d.primary.into(),
            primary_verbs: verbs(d.primary_verbs),
            primary_selector: d.primary_selector,
            secondaries: d
                .secondaries
                .into_iter()
                .map(|s| Secondary {
                    resource: s.type_.into(),
                    verbs: verbs(s.verbs),
                    label_selector: s.label_selector,
                    mapping: match s.mapping {
                        exports::Mapping::None => Mapping::None,
                        exports::Mapping::OwnerReferences => Mapping::OwnerReferences,
                        exports::Mapping::Label(key) => Mapping::Label(key),
                        exports::Mapping::Custom => Mapping::Custom,
                        exports::Mapping::Reads => Mapping::Reads,
                    },
                    prune: s.prune,
                })
                .collect(),
            managed_finalizer: d.managed_finalizer,
            resync_seconds: d.resync_seconds,
            max_concurrency: d.max_concurrency,
            config_schema,
            schedule: d.schedule,
        }
        .validate()
    }
}

impl From<exports::Action> for Desired {
    fn from(a: exports::Action) -> Self {
        match a {
            exports::Action::Apply(apply) => Self::Apply {
                object: apply.object,
                owned: apply.owned,
                force: apply.force,
            },
            exports::Action::ApplyStatus(object) => Self::ApplyStatus(object),
            exports::Action::Delete(d) => Self::Delete(
                d.type_.into(),
                d.key.into(),
                Preconditions {
                    uid: d.preconditions.uid,
                    resource_version: d.preconditions.resource_version,
                },
            ),
            exports::Action::Event(e) => Self::Event(DesiredEvent {
                regarding: e.regarding.map(|(t, k)| (t.into(), k.into())),
                event_type: match e.type_ {
                    exports::EventType::Normal => EventType::Normal,
                    exports::EventType::Warning => EventType::Warning,
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            }),
        }
    }
}
