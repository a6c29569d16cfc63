//! The rules a plugin's writes and reads are held to, written once.
//!
//! The host applies them to what the operator granted a plugin (its
//! `Grants`, when it plans an outcome and when it answers a cache read);
//! the Rust SDK's test harness applies them to what the plugin declared, so
//! a unit test refuses what the host would, in the host's words. The
//! Python and JavaScript harnesses are held to the same answers by the
//! shared conformance fixtures (`tests/conformance/`).
//!
//! What a plugin holds is behind [`Holdings`]; the rules:
//! - **Type and verb.** A read or write needs its verb held on its type,
//!   compared by group, version and kind; what is used after is the type as
//!   held (its plural and scope), never the one the plugin passed
//!   ([`check`], [`held_type`]).
//! - **Target.** A namespaced object needs a namespace, a cluster-scoped one
//!   must name none; the namespace and the name must be valid for the type;
//!   the namespace must be one the verb may reach (a Namespace object counts
//!   as being in itself) ([`check_target`]).
//! - **Object.** An applied object names its `apiVersion`, `kind` and
//!   `metadata.name`; a namespaced one without a namespace goes to the
//!   primary's; its labels must be valid ([`object_target`]).
//! - **Owner.** A child the primary owns needs the primary cached, with a
//!   uid, and in the child's namespace: an owner reference cannot cross
//!   namespaces ([`owner_uid`]).

use std::fmt;

use serde_json::Value;

use crate::resource::{ObjectKey, ResourceType, Verb, split_api_version};
use crate::validation;

/// Why a read or write was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The plugin did not declare the type.
    TypeNotDeclared,
    /// The plugin did not declare the verb on the type.
    VerbNotDeclared,
    /// The namespace is not granted to the plugin.
    NamespaceNotGranted(String),
    /// The namespace is a system one and the operator did not list it.
    SystemNamespace(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TypeNotDeclared => f.write_str("the type was not declared"),
            Self::VerbNotDeclared => f.write_str("the verb was not declared for this type"),
            Self::NamespaceNotGranted(ns) => {
                write!(f, "namespace `{ns}` is not granted to it")
            }
            Self::SystemNamespace(ns) => write!(
                f,
                "namespace `{ns}` is a system namespace, written only when the operator grants it"
            ),
        }
    }
}

/// A refused read or write.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("plugin `{plugin}` may not {verb} {resource}: {why}", verb = verb.as_str())]
pub struct Denied {
    /// The plugin.
    pub plugin: String,
    /// What it tried.
    pub verb: Verb,
    /// On what (`apiVersion Kind`; for a write refused by its namespace,
    /// followed by the object's key).
    pub resource: String,
    /// Why not.
    pub why: Reason,
}

/// Why a plugin's outcome was refused: the first action refused, and why.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ActionError {
    /// The plugin holds no grant for the action.
    #[error("action #{index} denied: {denied}")]
    Denied {
        /// Position of the action, from 1.
        index: usize,
        /// The denial.
        #[source]
        denied: Denied,
    },
    /// The action is malformed.
    #[error("action #{index} is invalid: {reason}")]
    Invalid {
        /// Position of the action, from 1.
        index: usize,
        /// What is wrong.
        reason: String,
    },
}

/// An [`ActionError`] before its position is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not held.
    Denied(Denied),
    /// Malformed.
    Invalid(String),
}

impl Refusal {
    /// The refusal of the action at `index` (from 1).
    pub fn at(self, index: usize) -> ActionError {
        match self {
            Self::Denied(denied) => ActionError::Denied { index, denied },
            Self::Invalid(reason) => ActionError::Invalid { index, reason },
        }
    }
}

impl From<Denied> for Refusal {
    fn from(denied: Denied) -> Self {
        Self::Denied(denied)
    }
}

impl From<validation::Invalid> for Refusal {
    fn from(invalid: validation::Invalid) -> Self {
        Self::Invalid(invalid.to_string())
    }
}

/// A malformed action.
pub fn invalid(reason: impl Into<String>) -> Refusal {
    Refusal::Invalid(reason.into())
}

/// What a plugin holds: the host's grants, or in a unit test its
/// declaration.
pub trait Holdings {
    /// The plugin's name (a denial names it).
    fn plugin(&self) -> &str;

    /// The held form of the type `resource` names (by group, version and
    /// kind), and whether `verb` is held on it; `None` if it holds nothing
    /// of the type.
    fn held(&self, resource: &ResourceType, verb: Verb) -> Option<(&ResourceType, bool)>;

    /// Why `verb` may not reach objects in `namespace`; `None` if it may
    /// (the default: every namespace).
    fn refuses_namespace(&self, verb: Verb, namespace: &str) -> Option<Reason> {
        let _ = (verb, namespace);
        None
    }
}

/// A denial of `verb` on `resource`, for `why`.
pub fn deny(
    holdings: &(impl Holdings + ?Sized),
    verb: Verb,
    resource: &ResourceType,
    why: Reason,
) -> Denied {
    Denied {
        plugin: holdings.plugin().to_owned(),
        verb,
        resource: resource.to_string(),
        why,
    }
}

/// The type as held, if `verb` is held on it.
///
/// # Errors
/// [`Denied`] if the type or the verb is not held.
pub fn check<'h>(
    holdings: &'h (impl Holdings + ?Sized),
    verb: Verb,
    resource: &ResourceType,
) -> Result<&'h ResourceType, Denied> {
    match holdings.held(resource, verb) {
        Some((held, true)) => Ok(held),
        Some(_) => Err(deny(holdings, verb, resource, Reason::VerbNotDeclared)),
        None => Err(deny(holdings, verb, resource, Reason::TypeNotDeclared)),
    }
}

/// The held type of objects of `api_version` and `kind`, if `verb` is held
/// on it.
///
/// # Errors
/// [`Denied`] if the type or the verb is not held.
pub fn held_type(
    holdings: &(impl Holdings + ?Sized),
    api_version: &str,
    kind: &str,
    verb: Verb,
) -> Result<ResourceType, Denied> {
    let (group, version) = split_api_version(api_version);
    let named = ResourceType {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
        plural: String::new(),
        namespaced: false,
    };
    check(holdings, verb, &named).cloned()
}

/// Checks that `verb` may reach objects of `resource` in `namespace`.
///
/// # Errors
/// [`Denied`] when the namespace is not one the verb may reach.
pub fn check_namespace(
    holdings: &(impl Holdings + ?Sized),
    verb: Verb,
    resource: &ResourceType,
    namespace: &str,
) -> Result<(), Denied> {
    match holdings.refuses_namespace(verb, namespace) {
        Some(why) => Err(deny(holdings, verb, resource, why)),
        None => Ok(()),
    }
}

/// Checks that a write of `verb` may reach `key`: its scope, its name and
/// namespace by Kubernetes' rules, and the namespace held (a Namespace
/// object counts as being in itself).
///
/// # Errors
/// [`Refusal`]: invalid target, or a namespace not held.
pub fn check_target(
    holdings: &(impl Holdings + ?Sized),
    verb: Verb,
    resource: &ResourceType,
    key: &ObjectKey,
) -> Result<(), Refusal> {
    match (resource.namespaced, &key.namespace) {
        (true, None) => {
            return Err(invalid(format!(
                "{resource} `{}` needs a namespace",
                key.name
            )));
        }
        (false, Some(ns)) => {
            return Err(invalid(format!(
                "{resource} is cluster-scoped but `{}` names namespace `{ns}`",
                key.name
            )));
        }
        _ => {}
    }
    if let Some(namespace) = &key.namespace {
        validation::namespace(namespace)?;
    }
    validation::name(resource, &key.name)?;
    if let Some(namespace) = key.placed_in(resource) {
        // The refusal names the object: one child of many was refused.
        check_namespace(holdings, verb, resource, namespace).map_err(|mut denied| {
            denied.resource = format!("{resource} `{key}`");
            denied
        })?;
    }
    Ok(())
}

/// An object written with `verb`: its held type and its target, the
/// namespace of a namespaced object that names none being `default_namespace`
/// (the primary's), checked with its labels.
///
/// # Errors
/// [`Refusal`] naming the first rule broken.
pub fn object_target(
    holdings: &(impl Holdings + ?Sized),
    verb: Verb,
    object: &Value,
    default_namespace: Option<&str>,
) -> Result<(ResourceType, ObjectKey), Refusal> {
    let field = |name: &str| object.get(name).and_then(Value::as_str);
    let api_version = field("apiVersion").ok_or_else(|| invalid("object lacks `apiVersion`"))?;
    let kind = field("kind").ok_or_else(|| invalid("object lacks `kind`"))?;
    let resource = held_type(holdings, api_version, kind, verb)?;
    let mut key = ObjectKey::of(object).ok_or_else(|| invalid("object lacks `metadata.name`"))?;
    if resource.namespaced && key.namespace.is_none() {
        key.namespace = default_namespace.map(str::to_owned);
    }
    check_target(holdings, verb, &resource, &key)?;
    validation::labels(object)?;
    Ok((resource, key))
}

/// The uid of the primary `key` (of `primary_type`, as cached: `primary`)
/// for an owner reference on `child` (of `child_type`).
///
/// # Errors
/// [`Refusal::Invalid`] if the primary is not cached, has no uid, or lives
/// in another namespace than the child.
pub fn owner_uid<'p>(
    primary_type: &ResourceType,
    key: &ObjectKey,
    primary: Option<&'p Value>,
    child_type: &ResourceType,
    child: &ObjectKey,
) -> Result<&'p str, Refusal> {
    let cannot = |why: String| invalid(format!("cannot own {child_type} `{child}`: {why}"));
    let primary =
        primary.ok_or_else(|| cannot(format!("the primary `{key}` is not in the cache")))?;
    let uid = primary
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .ok_or_else(|| cannot("the primary has no uid".into()))?;
    if primary_type.namespaced && key.namespace != child.namespace {
        return Err(cannot(format!(
            "an owner reference cannot cross namespaces (primary `{key}`)"
        )));
    }
    Ok(uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Holds get and apply on Deployments, in namespace `a` only.
    struct Confined(ResourceType);

    impl Holdings for Confined {
        fn plugin(&self) -> &str {
            "p"
        }

        fn held(&self, resource: &ResourceType, verb: Verb) -> Option<(&ResourceType, bool)> {
            (resource.group == self.0.group && resource.kind == self.0.kind)
                .then_some((&self.0, matches!(verb, Verb::Get | Verb::Apply)))
        }

        fn refuses_namespace(&self, _: Verb, namespace: &str) -> Option<Reason> {
            (namespace != "a").then(|| Reason::NamespaceNotGranted(namespace.to_owned()))
        }
    }

    fn deployments() -> Confined {
        Confined(ResourceType {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            namespaced: true,
        })
    }

    #[test]
    fn check_should_return_the_held_type_and_name_what_is_missing() {
        let held = deployments();
        let asked = held_type(&held, "apps/v1", "Deployment", Verb::Get).expect("held");
        assert_eq!(
            asked.plural, "deployments",
            "the held form, not the asked one"
        );
        let verb = held_type(&held, "apps/v1", "Deployment", Verb::Delete).expect_err("verb");
        assert_eq!(
            verb.to_string(),
            "plugin `p` may not delete apps/v1 Deployment: the verb was not declared for this type"
        );
        let ty = held_type(&held, "v1", "Secret", Verb::Get).expect_err("type");
        assert_eq!(ty.why, Reason::TypeNotDeclared);
    }

    #[test]
    fn object_target_should_fill_the_namespace_and_check_the_target() {
        let held = deployments();
        let object =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let (_, key) = object_target(&held, Verb::Apply, &object, Some("a")).expect("ok");
        assert_eq!(key.namespace.as_deref(), Some("a"));
        let elsewhere = object_target(&held, Verb::Apply, &object, Some("b")).expect_err("b");
        assert!(matches!(
            elsewhere,
            Refusal::Denied(Denied {
                why: Reason::NamespaceNotGranted(_),
                ..
            })
        ));
        let nowhere = object_target(&held, Verb::Apply, &object, None).expect_err("none");
        assert_eq!(
            nowhere,
            invalid("apps/v1 Deployment `web` needs a namespace")
        );
        let nameless = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}});
        assert_eq!(
            object_target(&held, Verb::Apply, &nameless, Some("a")).expect_err("nameless"),
            invalid("object lacks `metadata.name`")
        );
    }

    #[test]
    fn owner_uid_should_need_the_cached_primary_in_the_childs_namespace() {
        let ty = deployments().0;
        let key = ObjectKey::namespaced("a", "web");
        let primary = json!({"metadata": {"name": "web", "namespace": "a", "uid": "u1"}});
        assert_eq!(owner_uid(&ty, &key, Some(&primary), &ty, &key), Ok("u1"));
        let other = ObjectKey::namespaced("b", "web");
        let crossing = owner_uid(&ty, &key, Some(&primary), &ty, &other).expect_err("crossing");
        assert!(format!("{crossing:?}").contains("cannot cross namespaces"));
        let missing = owner_uid(&ty, &key, None, &ty, &key).expect_err("missing");
        assert!(format!("{missing:?}").contains("is not in the cache"));
    }
}
