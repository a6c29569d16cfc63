//! The one place generated code lives: a `bindgen!` for each version of
//! the `controller` world the host speaks, the dispatch between them, and
//! conversions between generated types and the host's own.
//!
//! The host works in the types of the newest contract (0.2.0). A component
//! of an older one is called through [`Controller`], which converts its
//! requests down and its answers up: 0.1.0 knows no primary selector (every
//! primary), no unforced apply (every apply forces), no delete
//! preconditions beyond the cached uid, and a `map-keys` that cannot fail.
//! The versions share the `types` interface's Rust types (the records are
//! the same), each links its own `cache` and `log`.

use std::collections::BTreeSet;

use wasmtime::component::{Component, InstancePre};
use wasmtime::{Engine, Store};

use super::Contract;
use super::state::PluginState;
use crate::action::{Desired, DesiredEvent, EventType, Preconditions};
use crate::declaration::{Declaration, DeclarationError, Mapping, Secondary, Verb};
use crate::resource::{ObjectKey, ResourceType};

mod v0_2 {
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

mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0",
        world: "controller",
        imports: { default: trappable },
        with: {
            "kubewasm:controller/types@0.1.0": crate::bindings::v0_2::kubewasm::controller::types,
        },
    });
}

pub(crate) use v0_2::exports::kubewasm::controller::plugin as exports;
pub(crate) use v0_2::kubewasm::controller::{cache, log, types};

/// The 0.1.0 imports, linked beside the current ones.
pub(crate) mod v0_1_imports {
    pub(crate) use super::v0_1::kubewasm::controller::{cache, log};
}

use v0_1::exports::kubewasm::controller::plugin as old;

/// A component linked, ready to instantiate: of one contract version.
pub(crate) enum ControllerPre {
    V0_1(v0_1::ControllerPre<PluginState>),
    V0_2(v0_2::ControllerPre<PluginState>),
}

impl ControllerPre {
    /// Wraps a linked component of `contract`, type-checking its exports.
    pub(crate) fn new(contract: Contract, pre: InstancePre<PluginState>) -> wasmtime::Result<Self> {
        Ok(match contract {
            Contract::V0_1 => Self::V0_1(v0_1::ControllerPre::new(pre)?),
            Contract::V0_2 => Self::V0_2(v0_2::ControllerPre::new(pre)?),
        })
    }

    pub(crate) fn component(&self) -> &Component {
        match self {
            Self::V0_1(pre) => pre.instance_pre().component(),
            Self::V0_2(pre) => pre.instance_pre().component(),
        }
    }

    pub(crate) fn engine(&self) -> &Engine {
        match self {
            Self::V0_1(pre) => pre.engine(),
            Self::V0_2(pre) => pre.engine(),
        }
    }

    pub(crate) fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Controller> {
        Ok(match self {
            Self::V0_1(pre) => Controller::V0_1(pre.instantiate(store)?),
            Self::V0_2(pre) => Controller::V0_2(pre.instantiate(store)?),
        })
    }
}

/// A live instance's exports, called in the current contract's types.
pub(crate) enum Controller {
    V0_1(v0_1::Controller),
    V0_2(v0_2::Controller),
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

impl Controller {
    pub(crate) fn declare(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<exports::Declaration> {
        Ok(match self {
            Self::V0_1(c) => c.kubewasm_controller_plugin().call_declare(store)?.into(),
            Self::V0_2(c) => c.kubewasm_controller_plugin().call_declare(store)?,
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
                let (plugin, request) = (c.kubewasm_controller_plugin(), request.into());
                answer(match call {
                    Call::Reconcile => plugin.call_reconcile(store, &request)?,
                    Call::Finalize => plugin.call_finalize(store, &request)?,
                })
            }
            Self::V0_2(c) => {
                let plugin = c.kubewasm_controller_plugin();
                match call {
                    Call::Reconcile => plugin.call_reconcile(store, request)?,
                    Call::Finalize => plugin.call_finalize(store, request)?,
                }
            }
        })
    }

    pub(crate) fn map_keys(
        &self,
        store: &mut Store<PluginState>,
        request: &exports::MapRequest,
    ) -> wasmtime::Result<Result<Vec<types::ObjectKey>, exports::Failure>> {
        Ok(match self {
            Self::V0_1(c) => Ok(c.kubewasm_controller_plugin().call_map_keys(
                store,
                &request.type_,
                &request.object,
            )?),
            Self::V0_2(c) => c
                .kubewasm_controller_plugin()
                .call_map_keys(store, request)?,
        })
    }
}

fn answer(answer: Result<old::Outcome, old::Failure>) -> Answer {
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

impl From<&exports::Request> for old::Request {
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

impl From<old::Declaration> for exports::Declaration {
    fn from(d: old::Declaration) -> Self {
        Self {
            name: d.name,
            version: d.version,
            primary: d.primary,
            primary_verbs: d.primary_verbs,
            primary_selector: String::new(),
            secondaries: d
                .secondaries
                .into_iter()
                .map(|s| exports::Secondary {
                    type_: s.type_,
                    verbs: s.verbs,
                    label_selector: s.label_selector,
                    mapping: match s.mapping {
                        old::Mapping::None => exports::Mapping::None,
                        old::Mapping::OwnerReferences => exports::Mapping::OwnerReferences,
                        old::Mapping::Label(key) => exports::Mapping::Label(key),
                        old::Mapping::Custom => exports::Mapping::Custom,
                    },
                })
                .collect(),
            managed_finalizer: d.managed_finalizer,
            resync_seconds: d.resync_seconds,
            max_concurrency: d.max_concurrency,
            config_schema: d.config_schema,
        }
    }
}

impl From<old::Action> for exports::Action {
    fn from(a: old::Action) -> Self {
        match a {
            old::Action::Apply(apply) => Self::Apply(exports::Apply {
                object: apply.object,
                owned: apply.owned,
                force: true,
            }),
            old::Action::ApplyStatus(object) => Self::ApplyStatus(object),
            old::Action::Delete(d) => Self::Delete(exports::Deletion {
                type_: d.type_,
                key: d.key,
                preconditions: exports::Preconditions {
                    uid: None,
                    resource_version: None,
                },
            }),
            old::Action::Event(e) => Self::Event(exports::Event {
                regarding: e.regarding,
                type_: match e.type_ {
                    old::EventType::Normal => exports::EventType::Normal,
                    old::EventType::Warning => exports::EventType::Warning,
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            }),
        }
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
                    },
                })
                .collect(),
            managed_finalizer: d.managed_finalizer,
            resync_seconds: d.resync_seconds,
            max_concurrency: d.max_concurrency,
            config_schema,
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
