//! What a plugin's cache reads return: the rules of the read side.
//!
//! The runtime's `cache` imports and the conformance fixtures both go
//! through [`get`] and [`list`], so the rules are written once:
//!
//! - The plugin must hold the verb (`get` or `list`) on the type, compared
//!   by group, version and kind; the read uses the type as the host resolved
//!   it, never the plural or scope the plugin passed.
//! - A namespace the operator did not grant is denied when named, and its
//!   objects are left out of a list across all namespaces; so is its
//!   `Namespace` object (a plugin confined to `team-a` that lists Namespaces
//!   sees `team-a` alone).
//! - A type declared with a label selector (a secondary's, or the primary's
//!   `primary-selector`) shows only the objects it matches, whatever
//!   selector the read passes.
//! - A name no object can have (`a/b`, `..`) finds nothing.
//! - A list is ordered by namespace, then name.

use std::sync::Arc;

use crate::cache::{Cache, CachedObject};
use crate::declaration::Verb;
use crate::grants::{Denied, Grants};
use kubewasm_core::resource::{ObjectKey, ResourceType};
use kubewasm_core::selector::{Selector, SelectorError};

/// Why a read was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReadError {
    /// The plugin may not read this.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// The label selector does not parse.
    #[error(transparent)]
    InvalidSelector(#[from] SelectorError),
}

/// Whether an object may be returned: in a granted namespace (a
/// `Namespace` is in itself) and matching the type's declared selector.
fn visible(grants: &Grants, resource: &ResourceType, object: &CachedObject) -> bool {
    let key = object.key();
    let namespace = if resource.group.is_empty() && resource.kind == "Namespace" {
        key.map(|k| k.name.as_str())
    } else {
        key.and_then(|k| k.namespace.as_deref())
    };
    namespace.is_none_or(|ns| grants.reads_namespace(ns))
        && grants
            .selector(resource)
            .is_none_or(|selector| object.selected_by(selector))
}

/// Reads one object.
///
/// # Errors
/// [`ReadError::Denied`] when the plugin may not get it.
pub fn get(
    cache: &dyn Cache,
    grants: &Grants,
    resource: &ResourceType,
    key: &ObjectKey,
) -> Result<Option<Arc<CachedObject>>, ReadError> {
    let resource = grants.check(Verb::Get, resource)?;
    if let Some(namespace) = key.namespace.as_deref().filter(|_| resource.namespaced) {
        grants.check_namespace(Verb::Get, resource, namespace)?;
    }
    if kubewasm_core::validation::name(resource, &key.name).is_err() {
        return Ok(None);
    }
    Ok(cache
        .get(resource, key)
        .filter(|o| visible(grants, resource, o)))
}

/// Lists objects of a type in one namespace or all, by label selector.
///
/// # Errors
/// [`ReadError`] when the plugin may not list them or the selector does not
/// parse.
pub fn list(
    cache: &dyn Cache,
    grants: &Grants,
    resource: &ResourceType,
    namespace: Option<&str>,
    label_selector: &str,
) -> Result<Vec<Arc<CachedObject>>, ReadError> {
    let resource = grants.check(Verb::List, resource)?;
    if let Some(namespace) = namespace.filter(|_| resource.namespaced) {
        grants.check_namespace(Verb::List, resource, namespace)?;
    }
    let selector = Selector::parse(label_selector)?;
    let mut found = cache.list(resource, namespace, &selector);
    found.retain(|o| visible(grants, resource, o));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::MemoryCache;
    use crate::declaration::{Declaration, Mapping, Secondary};
    use crate::grants::OperatorGrants;
    use serde_json::json;

    fn namespaces() -> ResourceType {
        ResourceType {
            group: String::new(),
            version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            namespaced: false,
        }
    }

    #[test]
    fn a_confined_plugin_should_see_its_own_namespace_object_only() {
        let primary = ResourceType {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespaced: true,
        };
        let declaration = Declaration {
            name: "demo".into(),
            version: "0.1.0".into(),
            primary,
            primary_verbs: [Verb::Get, Verb::List, Verb::Watch].into(),
            primary_selector: String::new(),
            secondaries: vec![Secondary {
                resource: namespaces(),
                verbs: [Verb::Get, Verb::List].into(),
                label_selector: String::new(),
                mapping: Mapping::None,
                prune: false,
            }],
            managed_finalizer: false,
            resync_seconds: None,
            max_concurrency: None,
            config_schema: None,
            schedule: None,
        };
        let cache = MemoryCache::from_objects(
            ["team-a", "team-b", "kube-system"]
                .iter()
                .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
                .collect::<Vec<_>>(),
        )
        .expect("cached");
        let grants = |namespaces: Option<&[&str]>| {
            let operator = OperatorGrants {
                namespaces: namespaces.map(|n| n.iter().map(|s| (*s).to_owned()).collect()),
                rules: None,
                tenant: false,
            };
            Grants::new(&declaration, &operator).expect("granted")
        };
        let names = |grants: &Grants| -> Vec<String> {
            list(&cache, grants, &namespaces(), None, "")
                .expect("listed")
                .iter()
                .filter_map(|o| Some(o.key()?.name.clone()))
                .collect()
        };
        let confined = grants(Some(&["team-a"]));
        assert_eq!(names(&confined), ["team-a"]);
        let key = |name: &str| ObjectKey {
            namespace: None,
            name: name.into(),
        };
        assert!(
            get(&cache, &confined, &namespaces(), &key("team-a"))
                .expect("read")
                .is_some()
        );
        assert!(
            get(&cache, &confined, &namespaces(), &key("team-b"))
                .expect("read")
                .is_none()
        );
        let unconfined = grants(None);
        assert_eq!(names(&unconfined), ["kube-system", "team-a", "team-b"]);
    }
}
