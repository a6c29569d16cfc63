//! Conversions between the generated types of every contract version and
//! the host's own: an older version's declaration, actions and answers
//! upgraded one version at a time, then into the host's types.

use std::collections::BTreeSet;
use std::time::Duration;

use kubewasm_core::resource::{ObjectKey, ResourceType};

use super::generated::{exports, types, v1, v2};
use crate::action::{Desired, DesiredEvent, EventType, Preconditions};
use crate::declaration::{Declaration, DeclarationError, Mapping, Secondary, Verb};
use crate::request::{Answer, Outcome, Request};

/// A 0.1.0 answer in the host's types.
pub(super) fn answer_v1(answer: Result<v1::Outcome, v1::Failure>) -> Answer {
    answer_v2(
        answer
            .map(|outcome| v2::Outcome {
                actions: outcome.actions.into_iter().map(v2::Action::from).collect(),
                requeue_after_ms: outcome.requeue_after_ms,
                finalizer: outcome.finalizer,
            })
            .map_err(|failure| v2::Failure {
                message: failure.message,
            }),
    )
}

/// A 0.2.0 answer in the host's types.
pub(super) fn answer_v2(answer: Result<v2::Outcome, v2::Failure>) -> Answer {
    self::answer(
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
            }),
    )
}

/// A current answer in the host's types.
pub(super) fn answer(answer: Result<exports::Outcome, exports::Failure>) -> Answer {
    answer
        .map(|outcome| Outcome {
            desired: outcome.actions.into_iter().map(Desired::from).collect(),
            requeue_after: outcome.requeue_after_ms.map(Duration::from_millis),
            finalizer: outcome.finalizer,
        })
        .map_err(|failure| failure.message)
}

/// A request in the current contract's types.
pub(super) fn request(request: &Request, primary: &ResourceType) -> exports::Request {
    exports::Request {
        key: (&request.key).into(),
        type_: primary.into(),
        config: request.config.clone(),
        retries: request.retries,
        last_failure: request.last_failure.clone(),
    }
}

/// A request in the previous version's types (the same record).
macro_rules! downgrade_request {
    ($from:ty => $to:ty) => {
        impl From<&$from> for $to {
            fn from(r: &$from) -> Self {
                Self {
                    key: r.key.clone(),
                    type_: r.type_.clone(),
                    config: r.config.clone(),
                    retries: r.retries,
                    last_failure: r.last_failure.clone(),
                }
            }
        }
    };
}

downgrade_request!(exports::Request => v2::Request);
downgrade_request!(v2::Request => v1::Request);

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
