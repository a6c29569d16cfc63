//! What a plugin may do: what it declared, narrowed by what the operator of
//! the host grants it.
//!
//! **Architecture Invariant:** every read a plugin makes through the cache
//! and every action it returns is checked here first. A plugin sees and
//! writes only what it declared and was granted; nothing else reaches it or
//! leaves it.
//!
//! # The operator's grants file
//! The operator narrows a plugin with a YAML file (`--grants FILE` of
//! `kubewasm replay` and `kubewasm run`), in the shape of an RBAC rule list:
//!
//! ```yaml
//! namespaces: [default, team-a]     # omitted: every namespace (writes: but the system ones)
//! rules:                            # omitted: every type and verb the plugin declares
//!   - apiGroups: ["", apps]         # "" is the core group, "*" any group
//!     kinds: [ConfigMap, Deployment] # "*" any kind
//!     verbs: [get, list, watch, apply] # "*" any verb
//! ```
//!
//! # Rules
//! - A plugin that declares a verb on a type that no rule grants is refused
//!   at load, with every excess named ([`Excess`]).
//! - A plugin confined to namespaces (a `namespaces` list, every tenant's
//!   `Plugin`) may declare no cluster-scoped type but `v1 Namespace`: a
//!   cluster-scoped object is in no namespace, so it is outside any list.
//!   Such a declaration is refused at load the same way. One exception: an
//!   operator's grants (a file, a `ClusterPlugin`'s) may list namespaces
//!   for a plugin whose *primary* is cluster-scoped (a "copy this into
//!   these namespaces" controller): the primary is read and written
//!   cluster-wide, everything else within the list, system namespaces
//!   included when named. A tenant's never.
//! - Reads (`get`, `list`) and writes (apply, status, delete, events) of
//!   namespaced objects are confined to the granted namespaces; a list
//!   across all namespaces returns only objects of granted ones. A
//!   Namespace object counts as being in itself.
//! - Without a `namespaces` list, reads may see every namespace and writes
//!   may reach every namespace but the system ones ([`SYSTEM_NAMESPACES`]);
//!   an operator who wants a plugin to write there lists them.
//! - A secondary's declared label selector restricts what reads of it
//!   return ([`Grants::selector`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::declaration::{Declaration, Verb};
use kubewasm_core::resource::ResourceType;
use kubewasm_core::rules::{self, Holdings};
use kubewasm_core::selector::Selector;

/// Namespaces no plugin writes to unless the operator lists them.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

pub use kubewasm_core::rules::{Denied, Reason};

/// A declaration that asks for more than the operator grants.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("plugin `{plugin}` declares more than the operator grants it: {}", excess.join(", "))]
pub struct Excess {
    /// The plugin.
    pub plugin: String,
    /// Each verb and type declared but not granted (`apply v1 Secret`).
    pub excess: Vec<String>,
}

/// Why a grants file was refused.
#[derive(Debug, thiserror::Error)]
pub enum GrantsFileError {
    /// The file could not be read.
    #[error("failed to read grants file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a grants document.
    #[error("invalid grants file: {0}")]
    Parse(#[source] serde_yaml::Error),
    /// A verb is unknown.
    #[error(
        "invalid grants: unknown verb `{0}` (expected get, list, watch, apply, apply-status, delete or *)"
    )]
    Verb(String),
    /// A namespace is not a DNS label.
    #[error("invalid grants: namespace `{0}` is not a valid namespace name")]
    Namespace(String),
    /// A file was read but refused.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: Box<GrantsFileError>,
    },
}

/// One rule of a grants file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// API groups (`""` core, `*` any).
    pub api_groups: Vec<String>,
    /// Kinds (`*` any).
    pub kinds: Vec<String>,
    /// Verbs (`*` any).
    pub verbs: Vec<String>,
}

impl Rule {
    fn allows(&self, verb: Verb, resource: &ResourceType) -> bool {
        let any = |list: &[String], value: &str| list.iter().any(|v| v == "*" || v == value);
        any(&self.api_groups, &resource.group)
            && any(&self.kinds, &resource.kind)
            && any(&self.verbs, verb.as_str())
    }
}

/// What the operator grants a plugin: an upper bound on its declaration.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorGrants {
    /// Namespaces the plugin may read and write; `None`: every namespace
    /// (writes: but [`SYSTEM_NAMESPACES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<BTreeSet<String>>,
    /// Types and verbs; `None`: whatever the plugin declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<Rule>>,
    /// A tenant's grants (a namespaced `Plugin`'s), never a file's: no
    /// cluster-scoped type but `v1 Namespace`, its primary included.
    #[serde(skip)]
    #[schemars(skip)]
    pub tenant: bool,
}

impl OperatorGrants {
    /// Grants whatever a plugin declares, in every namespace but the system
    /// ones for writes.
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// Parses a grants file's text.
    ///
    /// # Errors
    /// [`GrantsFileError`] says what is wrong.
    pub fn parse(text: &str) -> Result<Self, GrantsFileError> {
        let grants: Self = serde_yaml::from_str(text).map_err(GrantsFileError::Parse)?;
        grants.validate()?;
        Ok(grants)
    }

    /// Checks every verb and namespace (what a schema cannot).
    ///
    /// # Errors
    /// [`GrantsFileError::Verb`] or [`GrantsFileError::Namespace`].
    pub fn validate(&self) -> Result<(), GrantsFileError> {
        for rule in self.rules.iter().flatten() {
            if let Some(verb) = rule
                .verbs
                .iter()
                .find(|v| v.as_str() != "*" && v.parse::<Verb>().is_err())
            {
                return Err(GrantsFileError::Verb(verb.clone()));
            }
        }
        if let Some(ns) = self
            .namespaces
            .iter()
            .flatten()
            .find(|ns| !kubewasm_core::validation::is_dns_label(ns))
        {
            return Err(GrantsFileError::Namespace(ns.clone()));
        }
        Ok(())
    }

    /// Reads and parses a grants file.
    ///
    /// # Errors
    /// [`GrantsFileError`], naming the file.
    pub fn from_file(path: &Path) -> Result<Self, GrantsFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| GrantsFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|source| GrantsFileError::InFile {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }

    fn allows(&self, verb: Verb, resource: &ResourceType) -> bool {
        self.rules
            .as_ref()
            .is_none_or(|rules| rules.iter().any(|r| r.allows(verb, resource)))
    }
}

/// Whether objects of `resource` are in a namespace: namespaced ones, and
/// Namespaces (each in itself).
fn in_a_namespace(resource: &ResourceType) -> bool {
    resource.namespaced || (resource.group.is_empty() && resource.kind == "Namespace")
}

/// One declared type with what the plugin holds on it.
#[derive(Clone, Debug)]
struct Held {
    resource: ResourceType,
    verbs: BTreeSet<Verb>,
    selector: Selector,
}

/// The verbs a plugin holds on each resource type, and where. A plugin
/// declares a handful of types, so a linear scan beats hashing.
#[derive(Clone, Debug, Default)]
pub struct Grants {
    plugin: String,
    held: Vec<Held>,
    namespaces: Option<BTreeSet<String>>,
}

impl Grants {
    /// What a declaration holds under `operator`'s grants.
    ///
    /// # Errors
    /// [`Excess`] lists every declared verb the operator does not grant.
    pub fn new(declaration: &Declaration, operator: &OperatorGrants) -> Result<Self, Excess> {
        let primary = Held {
            resource: declaration.primary.clone(),
            verbs: declaration.primary_verbs.clone(),
            // Validated with the declaration.
            selector: Selector::parse(&declaration.primary_selector).unwrap_or_default(),
        };
        let held: Vec<Held> = std::iter::once(primary)
            .chain(declaration.secondaries.iter().map(|s| Held {
                resource: s.resource.clone(),
                verbs: s.verbs.clone(),
                // Validated with the declaration.
                selector: Selector::parse(&s.label_selector).unwrap_or_default(),
            }))
            .collect();
        let excess: Vec<String> = held
            .iter()
            .flat_map(|h| h.verbs.iter().map(move |v| (*v, &h.resource)))
            .filter_map(|(verb, resource)| {
                let what = format!("{} {resource}", verb.as_str());
                if !operator.allows(verb, resource) {
                    Some(what)
                } else if operator.namespaces.is_some()
                    && !in_a_namespace(resource)
                    && (operator.tenant || *resource != declaration.primary)
                {
                    Some(format!(
                        "{what} (cluster-scoped, and it is confined to namespaces)"
                    ))
                } else {
                    None
                }
            })
            .collect();
        if !excess.is_empty() {
            return Err(Excess {
                plugin: declaration.name.clone(),
                excess,
            });
        }
        Ok(Self {
            plugin: declaration.name.clone(),
            held,
            namespaces: operator.namespaces.clone(),
        })
    }

    /// Grants nothing: used while a plugin declares itself.
    pub fn none(plugin: impl Into<String>) -> Self {
        Self {
            plugin: plugin.into(),
            held: Vec::new(),
            namespaces: Some(BTreeSet::new()),
        }
    }

    fn find(&self, resource: &ResourceType) -> Option<&Held> {
        // Group, version and kind identify a type; the plural and scope a
        // plugin passes are not trusted.
        self.held.iter().find(|h| {
            h.resource.group == resource.group
                && h.resource.version == resource.version
                && h.resource.kind == resource.kind
        })
    }

    /// Checks that the plugin holds `verb` on `resource`, and returns the
    /// type as the host resolved it (its plural and scope from discovery).
    ///
    /// # Errors
    /// [`Denied`] names the plugin, the verb and the resource type.
    pub fn check(&self, verb: Verb, resource: &ResourceType) -> Result<&ResourceType, Denied> {
        rules::check(self, verb, resource)
    }

    /// Checks that `verb` may reach an object of `resource` in `namespace`
    /// (for a Namespace object, its name).
    ///
    /// # Errors
    /// [`Denied`] when the namespace is not granted.
    pub fn check_namespace(
        &self,
        verb: Verb,
        resource: &ResourceType,
        namespace: &str,
    ) -> Result<(), Denied> {
        rules::check_namespace(self, verb, resource, namespace)
    }

    /// The namespaces the plugin is confined to; `None`: every namespace.
    pub fn namespaces(&self) -> Option<&BTreeSet<String>> {
        self.namespaces.as_ref()
    }

    /// Whether reads may see objects of `namespace`.
    pub fn reads_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|granted| granted.contains(namespace))
    }

    /// The label selector the plugin declared for a type: reads of it return
    /// only the objects it matches.
    pub fn selector(&self, resource: &ResourceType) -> Option<&Selector> {
        self.find(resource).map(|h| &h.selector)
    }
}

impl Holdings for Grants {
    fn plugin(&self) -> &str {
        &self.plugin
    }

    fn held(&self, resource: &ResourceType, verb: Verb) -> Option<(&ResourceType, bool)> {
        self.find(resource)
            .map(|h| (&h.resource, h.verbs.contains(&verb)))
    }

    /// A confined plugin reaches its namespaces only; an unconfined one
    /// writes everywhere but the system namespaces.
    fn refuses_namespace(&self, verb: Verb, namespace: &str) -> Option<Reason> {
        let write = !matches!(verb, Verb::Get | Verb::List | Verb::Watch);
        match &self.namespaces {
            Some(granted) if !granted.contains(namespace) => {
                Some(Reason::NamespaceNotGranted(namespace.to_owned()))
            }
            None if write && SYSTEM_NAMESPACES.contains(&namespace) => {
                Some(Reason::SystemNamespace(namespace.to_owned()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declaration::tests::{sample, ty};
    use kubewasm_core::resource::ObjectKey;

    #[test]
    fn grants_should_follow_the_declaration_exactly() {
        let decl = sample().validate().expect("valid");
        let grants = Grants::new(&decl, &OperatorGrants::unrestricted()).expect("granted");
        let deployments = ty("apps/v1", "Deployment", "deployments", true);
        assert!(grants.check(Verb::Apply, &deployments).is_ok());
        assert!(grants.check(Verb::Get, &decl.primary).is_ok());

        let err = grants
            .check(Verb::Delete, &deployments)
            .expect_err("not declared");
        assert_eq!(
            err.to_string(),
            "plugin `myapp` may not delete apps/v1 Deployment: the verb was not declared for this type"
        );
        let secrets = ty("v1", "Secret", "secrets", true);
        let err = grants.check(Verb::Get, &secrets).expect_err("not declared");
        assert!(
            err.to_string().contains("the type was not declared"),
            "{err}"
        );
        assert!(Grants::none("x").check(Verb::Get, &decl.primary).is_err());
    }

    #[test]
    fn check_should_return_the_host_type_not_the_plugin_one() {
        let decl = sample().validate().expect("valid");
        let grants = Grants::new(&decl, &OperatorGrants::unrestricted()).expect("granted");
        let lying = ty("apps/v1", "Deployment", "secrets", false);
        let resolved = grants.check(Verb::Apply, &lying).expect("granted by gvk");
        assert_eq!(resolved.plural, "deployments");
        assert!(resolved.namespaced);
    }

    #[test]
    fn operator_grants_should_refuse_excess_and_confine_namespaces() {
        let decl = sample().validate().expect("valid");
        let operator = OperatorGrants::parse(
            "namespaces: [team-a]\nrules:\n- apiGroups: [example.com]\n  kinds: ['*']\n  verbs: ['*']\n\
             - apiGroups: [apps]\n  kinds: [Deployment]\n  verbs: [get, watch]\n",
        )
        .expect("valid file");
        let err = Grants::new(&decl, &operator).expect_err("apply not granted");
        assert_eq!(
            err.to_string(),
            "plugin `myapp` declares more than the operator grants it: apply apps/v1 Deployment"
        );

        let operator = OperatorGrants::parse("namespaces: [team-a]\n").expect("valid file");
        let grants = Grants::new(&decl, &operator).expect("granted");
        let deployments = ty("apps/v1", "Deployment", "deployments", true);
        assert!(
            grants
                .check_namespace(Verb::Apply, &deployments, "team-a")
                .is_ok()
        );
        let err = grants
            .check_namespace(Verb::Get, &deployments, "team-b")
            .expect_err("other tenant");
        assert_eq!(
            err.to_string(),
            "plugin `myapp` may not get apps/v1 Deployment: namespace `team-b` is not granted to it"
        );
        assert!(!grants.reads_namespace("team-b"));

        let mut cluster_wide = decl.clone();
        cluster_wide.secondaries[0].resource = ty(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
        );
        let err = Grants::new(&cluster_wide, &operator).expect_err("confined");
        assert!(
            err.to_string().contains(
                "rbac.authorization.k8s.io/v1 ClusterRoleBinding (cluster-scoped, and it is confined to namespaces)"
            ),
            "{err}"
        );
        assert!(Grants::new(&cluster_wide, &OperatorGrants::unrestricted()).is_ok());

        let open = Grants::new(&decl, &OperatorGrants::unrestricted()).expect("granted");
        assert!(open.reads_namespace("kube-system"));
        assert!(matches!(
            open.check_namespace(Verb::Delete, &deployments, "kube-system"),
            Err(Denied {
                why: Reason::SystemNamespace(_),
                ..
            })
        ));
    }

    #[test]
    fn an_operator_should_list_namespaces_for_a_cluster_scoped_primary_and_a_tenant_never() {
        let mut decl = sample().validate().expect("valid");
        decl.primary = ty("example.com/v1", "ClusterSource", "clustersources", false);
        let configmaps = ty("v1", "ConfigMap", "configmaps", true);
        let operator = OperatorGrants::parse("namespaces: [kube-system, team-a]\n").expect("valid");
        let grants =
            Grants::new(&decl, &operator).expect("a cluster-scoped primary, namespaces listed");
        assert!(
            grants
                .check_namespace(Verb::Apply, &configmaps, "kube-system")
                .is_ok(),
            "a system namespace, named"
        );
        assert!(
            grants
                .check_namespace(Verb::Apply, &configmaps, "team-b")
                .is_err()
        );
        let child = ObjectKey::namespaced("team-b", "copy");
        let refused = kubewasm_core::rules::check_target(&grants, Verb::Apply, &configmaps, &child)
            .expect_err("not listed");
        assert!(
            format!("{:?}", refused).contains("v1 ConfigMap `team-b/copy`"),
            "the refusal names the child: {refused:?}"
        );
        // A secondary of a cluster-scoped type stays refused.
        let mut other = decl.clone();
        other.secondaries[0].resource = ty("v1", "Node", "nodes", false);
        assert!(Grants::new(&other, &operator).is_err());
        // A tenant's grants never reach a cluster-scoped type, primary or not.
        let tenant = OperatorGrants {
            tenant: true,
            ..operator
        };
        let err = Grants::new(&decl, &tenant).expect_err("a tenant's");
        assert!(
            err.to_string().contains(
                "example.com/v1 ClusterSource (cluster-scoped, and it is confined to namespaces)"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_refused_file_should_be_named_in_the_error() {
        let dir = std::env::temp_dir().join(format!("kubewasm-grants-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("myapp.grants.yaml");
        std::fs::write(&path, "rules: [oops\n").expect("written");
        let error = OperatorGrants::from_file(&path).expect_err("refused");
        assert!(
            matches!(&error, GrantsFileError::InFile { source, .. } if matches!(**source, GrantsFileError::Parse(_))),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with(&format!("{}: invalid grants file", path.display())),
            "{error}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn parse_should_refuse_unknown_verbs_fields_and_namespaces() {
        assert!(matches!(
            OperatorGrants::parse("rules:\n- {apiGroups: ['*'], kinds: ['*'], verbs: [steal]}\n"),
            Err(GrantsFileError::Verb(v)) if v == "steal"
        ));
        assert!(matches!(
            OperatorGrants::parse("namespace: [a]\n"),
            Err(GrantsFileError::Parse(_))
        ));
        assert!(matches!(
            OperatorGrants::parse("namespaces: [../etc]\n"),
            Err(GrantsFileError::Namespace(_))
        ));
    }
}
