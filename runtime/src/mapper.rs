//! The REST mapper: how the cluster serves each resource type.
//!
//! A plugin names types by group, version and kind; the URL of an object
//! also needs the type's plural and scope. Those come from the cluster,
//! never from the plugin: a plugin that declared `{v1, ConfigMap, plural:
//! secrets}` would otherwise be granted ConfigMaps and write Secrets.
//!
//! # Expected flow
//! The host builds a [`RestMapper`] from the cluster's discovery documents
//! ([`RestMapper::add_discovery`], one `APIResourceList` per group version,
//! as the embedded API server and every real one serve them). `kubewasm
//! replay`, which has no cluster, uses [`RestMapper::for_fixtures`]: every
//! built-in type of the Kubernetes version kubewasm speaks, plus the
//! CustomResourceDefinitions among the fixtures. At load,
//! [`Declaration::resolve`](crate::declaration::Declaration::resolve) checks
//! every declared type against the mapper.
//!
//! # Guarantees
//! - A type the mapper does not know, or one whose declared plural or scope
//!   disagrees with it, is refused at load with an error naming the type.
//! - Every path the host builds uses the mapper's plural and scope.

use std::collections::BTreeMap;

use serde_json::Value;

use kubewasm_core::resource::{ResourceType, split_api_version};

/// Group, version, kind.
type Gvk = (String, String, String);

/// How the cluster serves one type.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Served {
    plural: String,
    namespaced: bool,
}

/// The types a cluster serves, by group, version and kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestMapper {
    types: BTreeMap<Gvk, Served>,
}

/// Why a type could not be mapped, or a discovery document not read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MapperError {
    /// The cluster does not serve the type.
    #[error(
        "{resource} is not served by the cluster (no such group, version and kind in discovery)"
    )]
    Unknown {
        /// The type, `apiVersion Kind`.
        resource: String,
    },
    /// The declared plural or scope is not the served one.
    #[error(
        "{resource} is declared as `{declared}` but the cluster serves it as `{served}`: the plural and scope come from discovery"
    )]
    Disagrees {
        /// The type, `apiVersion Kind`.
        resource: String,
        /// Plural and scope as declared.
        declared: String,
        /// Plural and scope as served.
        served: String,
    },
    /// A discovery document or CRD is malformed.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// `discovery document` or `CustomResourceDefinition`.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn scope(plural: &str, namespaced: bool) -> String {
    format!(
        "{plural}, {}",
        if namespaced {
            "namespaced"
        } else {
            "cluster-scoped"
        }
    )
}

impl RestMapper {
    /// Every built-in type of the Kubernetes version kubewasm speaks: those
    /// the embedded API server serves, and those a real Kubernetes release
    /// serves by default (its discovery as recorded in
    /// `types/src/release.json` by `tests/real-cluster/discovery`; create-only
    /// types such as `bindings` and the reviews among them).
    pub fn builtin() -> Self {
        let mut mapper = Self::release();
        for info in kubewasm_types::registry::Registry::builtin().all() {
            mapper.insert(
                &info.group,
                &info.version,
                &info.kind,
                &info.plural,
                info.namespaced,
            );
        }
        mapper
    }

    /// The types a real Kubernetes release serves by default, as recorded
    /// ([`kubewasm_types::release`]).
    fn release() -> Self {
        let release = kubewasm_types::release::release();
        let mut mapper = Self::default();
        for (group, version, _) in release.lists() {
            for entry in release
                .entries(group, version)
                .filter(|e| e.subresource().is_none())
            {
                mapper.insert(
                    group,
                    version,
                    entry.kind(),
                    entry.name(),
                    entry.namespaced(),
                );
            }
        }
        mapper
    }

    /// The built-in types plus those the CustomResourceDefinitions among
    /// `objects` serve: what `kubewasm replay` and tests resolve against.
    ///
    /// # Errors
    /// [`MapperError::Invalid`] for a malformed CRD.
    pub fn for_fixtures(objects: &[Value]) -> Result<Self, MapperError> {
        let mut mapper = Self::builtin();
        for object in objects {
            if object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition") {
                mapper.add_crd(object)?;
            }
        }
        Ok(mapper)
    }

    /// Adds the types a CustomResourceDefinition serves.
    ///
    /// # Errors
    /// [`MapperError::Invalid`] with the reason the API server would give.
    pub fn add_crd(&mut self, crd: &Value) -> Result<(), MapperError> {
        let served =
            kubewasm_types::crd::served_types(crd).map_err(|reason| MapperError::Invalid {
                what: "CustomResourceDefinition",
                reason,
            })?;
        for info in served {
            self.insert(
                &info.group,
                &info.version,
                &info.kind,
                &info.plural,
                info.namespaced,
            );
        }
        Ok(())
    }

    /// Adds the types of one discovery document (`APIResourceList`, as served
    /// at `/api/v1` or `/apis/GROUP/VERSION`); subresources are skipped.
    ///
    /// # Errors
    /// [`MapperError::Invalid`] if the document lacks `groupVersion` or a
    /// resource lacks its name, kind or scope.
    pub fn add_discovery(&mut self, list: &Value) -> Result<(), MapperError> {
        let invalid = |reason: String| MapperError::Invalid {
            what: "discovery document",
            reason,
        };
        let group_version = list
            .get("groupVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("no `groupVersion`".into()))?;
        let (group, version) = split_api_version(group_version);
        let resources = list
            .get("resources")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(format!("{group_version}: no `resources`")))?;
        for resource in resources {
            let field = |name: &str| resource.get(name).and_then(Value::as_str);
            let (Some(plural), Some(kind), Some(namespaced)) = (
                field("name"),
                field("kind"),
                resource.get("namespaced").and_then(Value::as_bool),
            ) else {
                return Err(invalid(format!(
                    "{group_version}: a resource lacks `name`, `kind` or `namespaced`"
                )));
            };
            if !plural.contains('/') {
                self.insert(group, version, kind, plural, namespaced);
            }
        }
        Ok(())
    }

    /// Serves `resource` as it says (a recorded fixture's types).
    pub fn serve(&mut self, resource: &ResourceType) {
        self.insert(
            &resource.group,
            &resource.version,
            &resource.kind,
            &resource.plural,
            resource.namespaced,
        );
    }

    fn insert(&mut self, group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) {
        self.types.insert(
            (group.to_owned(), version.to_owned(), kind.to_owned()),
            Served {
                plural: plural.to_owned(),
                namespaced,
            },
        );
    }

    /// The type as served: `declared` with the cluster's plural and scope.
    /// An empty declared plural takes the served one; any other must match.
    ///
    /// # Errors
    /// [`MapperError::Unknown`] or [`MapperError::Disagrees`], naming the type.
    pub fn resolve(&self, declared: &ResourceType) -> Result<ResourceType, MapperError> {
        let gvk = (
            declared.group.clone(),
            declared.version.clone(),
            declared.kind.clone(),
        );
        let served = self.types.get(&gvk).ok_or_else(|| MapperError::Unknown {
            resource: declared.to_string(),
        })?;
        let agrees = (declared.plural.is_empty() || declared.plural == served.plural)
            && declared.namespaced == served.namespaced;
        if !agrees {
            return Err(MapperError::Disagrees {
                resource: declared.to_string(),
                declared: scope(&declared.plural, declared.namespaced),
                served: scope(&served.plural, served.namespaced),
            });
        }
        Ok(ResourceType {
            plural: served.plural.clone(),
            ..declared.clone()
        })
    }

    /// The type `group/version` `kind` as the cluster serves it, if it does.
    pub fn lookup(&self, group: &str, version: &str, kind: &str) -> Option<ResourceType> {
        let served = self
            .types
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))?;
        Some(ResourceType {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            plural: served.plural.clone(),
            namespaced: served.namespaced,
        })
    }

    /// Whether the cluster serves the type `group/version` `kind`.
    pub fn serves(&self, group: &str, version: &str, kind: &str) -> bool {
        self.types
            .contains_key(&(group.to_owned(), version.to_owned(), kind.to_owned()))
    }

    /// Number of types known.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether no type is known.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::declaration::tests::ty;

    #[test]
    fn resolve_should_refuse_a_plural_that_is_not_served() {
        let mapper = RestMapper::builtin();
        let lying = ty("v1", "ConfigMap", "secrets", true);
        let err = mapper.resolve(&lying).expect_err("plural lies");
        assert_eq!(
            err.to_string(),
            "v1 ConfigMap is declared as `secrets, namespaced` but the cluster serves it as `configmaps, namespaced`: the plural and scope come from discovery"
        );
        let wrong_scope = ty("v1", "Namespace", "namespaces", true);
        assert!(matches!(
            mapper.resolve(&wrong_scope),
            Err(MapperError::Disagrees { .. })
        ));
        let cm = ty("v1", "ConfigMap", "configmaps", true);
        assert_eq!(mapper.resolve(&cm), Ok(cm));
        let unknown = ty("example.com/v1", "MyApp", "myapps", true);
        assert_eq!(
            mapper.resolve(&unknown).expect_err("unknown").to_string(),
            "example.com/v1 MyApp is not served by the cluster (no such group, version and kind in discovery)"
        );
    }

    #[test]
    fn the_recorded_release_should_read_whole_and_agree_with_the_built_in_types() {
        let release = RestMapper::release();
        let builtin = RestMapper::builtin();
        assert!(release.len() > 60, "{} types", release.len());
        // What only a real server serves: create-only types, 1.37's GA groups.
        for served in [
            ty("v1", "Binding", "bindings", true),
            ty(
                "authorization.k8s.io/v1",
                "SubjectAccessReview",
                "subjectaccessreviews",
                false,
            ),
            ty("resource.k8s.io/v1", "DeviceClass", "deviceclasses", false),
        ] {
            assert_eq!(release.resolve(&served), Ok(served.clone()));
            assert_eq!(builtin.resolve(&served), Ok(served));
        }
        // Where both know a type, they agree on its plural and scope.
        let embedded = kubewasm_types::registry::Registry::builtin();
        for (gvk, served) in &release.types {
            if let Some(info) = embedded
                .all()
                .find(|i| (&i.group, &i.version, &i.kind) == (&gvk.0, &gvk.1, &gvk.2))
            {
                assert_eq!(
                    (&info.plural, info.namespaced),
                    (&served.plural, served.namespaced)
                );
            }
        }
    }

    #[test]
    fn crds_and_discovery_should_add_types() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "myapps.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "myapps", "singular": "myapp", "kind": "MyApp"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]}});
        let mapper = RestMapper::for_fixtures(&[crd]).expect("valid crd");
        let myapp = ty("example.com/v1", "MyApp", "myapps", true);
        assert_eq!(mapper.resolve(&myapp), Ok(myapp));

        let mut mapper = RestMapper::default();
        mapper
            .add_discovery(
                &json!({"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
                {"name": "deployments", "kind": "Deployment", "namespaced": true, "verbs": []},
                {"name": "deployments/scale", "kind": "Scale", "namespaced": true, "verbs": []}]}),
            )
            .expect("valid discovery");
        assert_eq!(mapper.len(), 1);
        let err = mapper
            .add_discovery(&json!({"resources": []}))
            .expect_err("no groupVersion");
        assert!(err.to_string().contains("groupVersion"), "{err}");
    }
}
