//! The one room where generated code lives: a `bindgen!` for each version
//! of the `controller` world the host speaks (`generated`), the dispatch
//! between them (here), conversions between generated types and the
//! host's own (`convert`), and the host's side of the imports (`imports`).
//! Everything that leaves this room is in the host's types.
//!
//! A component of an older contract is called through [`Controller`],
//! which converts its requests down and its answers up, one version at a
//! time (0.1.0 through 0.2.0): 0.2.0's `map-keys` sees one state of an
//! object per call (the host calls it for the new state, then the previous
//! one); 0.1.0 knows no primary selector (every primary), no unforced
//! apply (every apply forces), no delete preconditions beyond the cached
//! uid, and a `map-keys` that cannot fail. The versions share the `types`
//! interface's Rust types (the records are the same), each links its own
//! `cache` and `log`.

mod convert;
mod generated;
mod imports;

pub(crate) use imports::add_to_linker;

use kubewasm_core::resource::{ObjectKey, ResourceType};
use wasmtime::component::{Component, InstancePre};
use wasmtime::{Engine, Store};

use crate::contract::Contract;
use crate::declaration::{Declaration, DeclarationError};
use crate::request::{Answer, MapChange, Request, ScheduledRequest};
use crate::state::PluginState;
use generated::{exports, v0_1, v0_2, v0_3, v1, v2};

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

/// A live instance's exports, called in the host's types.
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

/// What a `map-keys` returns: the keys, or the failure message the plugin
/// reported.
pub(crate) type Keys = Result<Vec<ObjectKey>, String>;

impl Controller {
    /// Runs `declare`: the declaration, checked.
    pub(crate) fn declare(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Result<Declaration, DeclarationError>> {
        let declaration = match self {
            Self::V0_1(c) => {
                v2::Declaration::from(c.kubewasm_controller_plugin().call_declare(store)?).into()
            }
            Self::V0_2(c) => c.kubewasm_controller_plugin().call_declare(store)?.into(),
            Self::V0_3(c) => c.kubewasm_controller_plugin().call_declare(store)?,
        };
        Ok(Declaration::try_from(declaration))
    }

    /// Runs `reconcile` or `finalize`, as `call` says, for a primary of
    /// type `primary`.
    pub(crate) fn call(
        &self,
        store: &mut Store<PluginState>,
        request: &Request,
        primary: &ResourceType,
        call: Call,
    ) -> wasmtime::Result<Answer> {
        let request = convert::request(request, primary);
        Ok(match self {
            Self::V0_1(c) => {
                let plugin = c.kubewasm_controller_plugin();
                let request = v1::Request::from(&v2::Request::from(&request));
                convert::answer_v1(match call {
                    Call::Reconcile => plugin.call_reconcile(store, &request)?,
                    Call::Finalize => plugin.call_finalize(store, &request)?,
                })
            }
            Self::V0_2(c) => {
                let (plugin, request) = (c.kubewasm_controller_plugin(), (&request).into());
                convert::answer_v2(match call {
                    Call::Reconcile => plugin.call_reconcile(store, &request)?,
                    Call::Finalize => plugin.call_finalize(store, &request)?,
                })
            }
            Self::V0_3(c) => {
                let plugin = c.kubewasm_controller_plugin();
                convert::answer(match call {
                    Call::Reconcile => plugin.call_reconcile(store, &request)?,
                    Call::Finalize => plugin.call_finalize(store, &request)?,
                })
            }
        })
    }

    /// Runs `scheduled` (0.3.0 on; an older component declares no
    /// schedule, so is never called for one).
    pub(crate) fn scheduled(
        &self,
        store: &mut Store<PluginState>,
        request: &ScheduledRequest,
    ) -> wasmtime::Result<Answer> {
        let request = exports::ScheduledRequest {
            scheduled_at: request.at.to_string(),
            config: request.config.clone(),
        };
        match self {
            Self::V0_3(c) => c
                .kubewasm_controller_plugin()
                .call_scheduled(store, &request)
                .map(convert::answer),
            Self::V0_1(_) | Self::V0_2(_) => Err(wasmtime::Error::msg(
                "a component of a contract before 0.3.0 has no `scheduled` export",
            )),
        }
    }

    /// Runs `map-keys` for a change of an object of type `resource`.
    /// Before 0.3.0 a call sees one state: the new one, then the previous
    /// one if there is one; the keys of both are returned (the first
    /// failure, if one fails).
    pub(crate) fn map_keys(
        &self,
        store: &mut Store<PluginState>,
        resource: &ResourceType,
        change: MapChange<'_>,
        config: &str,
    ) -> wasmtime::Result<Keys> {
        let request = exports::MapRequest {
            type_: resource.into(),
            object: change.object.to_owned(),
            previous: change.previous.map(str::to_owned),
            deleted: change.deleted,
            config: config.to_owned(),
        };
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
                        .map_err(|failure| failure.message)
                }
                Self::V0_3(c) => c
                    .kubewasm_controller_plugin()
                    .call_map_keys(&mut *store, &request)?
                    .map_err(|failure| failure.message),
            };
            match mapped {
                Ok(mapped) => keys.extend(mapped.into_iter().map(ObjectKey::from)),
                Err(failure) => return Ok(Err(failure)),
            }
        }
        Ok(Ok(keys))
    }
}
