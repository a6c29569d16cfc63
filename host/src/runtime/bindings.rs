//! The one place generated code lives: `bindgen!` for the `controller` world,
//! plus conversions between generated types and the host's own.

use std::collections::BTreeSet;

use crate::action::{Desired, DesiredEvent, EventType};
use crate::declaration::{Declaration, DeclarationError, Mapping, Secondary, Verb};
use crate::resource::{ObjectKey, ResourceType};

mod generated {
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

pub(crate) use generated::Controller;
pub(crate) use generated::ControllerPre;
pub(crate) use generated::exports::kubewasm::controller::plugin as exports;
pub(crate) use generated::kubewasm::controller::{cache, log, types};

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
            },
            exports::Action::ApplyStatus(object) => Self::ApplyStatus(object),
            exports::Action::Delete(d) => Self::Delete(d.type_.into(), d.key.into()),
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
