//! Reads under the tenant's rights: whether a tenant's account may itself
//! read what its plugin declares it reads.
//!
//! A tenant's plugin reads the host's shared caches, which the host fills
//! under its own rights. Without a check the host would read for a tenant
//! what the tenant may not (a confused deputy). So, before a `Plugin` runs
//! with its writes impersonating its namespace's account, the host asks the
//! cluster, one `SubjectAccessReview` per type and verb, whether that
//! account may `get`, `list` and `watch` (as declared) each type the plugin
//! declares, in the plugin's namespace:
//! - a namespaced type: in the plugin's namespace;
//! - `Namespace`s: the plugin's own namespace by name (the only one a
//!   confined plugin's reads show);
//! - any other cluster-scoped type: cluster-wide (a confined plugin's reads
//!   show all of it).
//!
//! The review names the account's user and the groups the API server gives
//! an account (`system:serviceaccounts`, `system:serviceaccounts:NS`,
//! `system:authenticated`), so rights bound to those groups count, as they
//! do for the account's own requests.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kubewasm_runtime::declaration::{Declaration, Verb};
use kubewasm_runtime::resource::ResourceType;

/// The verbs that read.
const READ_VERBS: [Verb; 3] = [Verb::Get, Verb::List, Verb::Watch];

/// Why an account's rights were not confirmed.
#[derive(Debug, thiserror::Error)]
pub enum RightsError {
    /// The account lacks some of them.
    #[error(transparent)]
    Missing(#[from] Missing),
    /// The cluster did not answer a review (the host may lack `create
    /// subjectaccessreviews`, or the server is unreachable).
    #[error("the access review of {account} failed: {source}")]
    Review {
        /// The account reviewed.
        account: String,
        /// What the client said.
        #[source]
        source: Box<kube::Error>,
    },
}

/// The rights an account lacks: per type (`plural.group`), the verbs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Missing {
    /// The account, `NAMESPACE/NAME`.
    pub account: String,
    /// Per type, the verbs it may not.
    pub missing: Vec<(String, Vec<&'static str>)>,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "its reads run under the ServiceAccount {}, which may not ",
            self.account
        )?;
        for (i, (resource, verbs)) in self.missing.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{} {resource}", verbs.join(", "))?;
        }
        Ok(())
    }
}

/// What a plugin declares it reads: per declared type, its read verbs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reads(Vec<(ResourceType, BTreeSet<Verb>)>);

impl Reads {
    /// The reads `declaration` declares.
    pub fn of(declaration: &Declaration) -> Self {
        let primary = (declaration.primary.clone(), &declaration.primary_verbs);
        let secondaries = declaration
            .secondaries
            .iter()
            .map(|s| (s.resource.clone(), &s.verbs));
        let mut reads: Vec<(ResourceType, BTreeSet<Verb>)> = Vec::new();
        for (resource, verbs) in std::iter::once(primary).chain(secondaries) {
            let verbs: BTreeSet<Verb> = READ_VERBS
                .into_iter()
                .filter(|v| verbs.contains(v))
                .collect();
            match reads.iter_mut().find(|(r, _)| *r == resource) {
                Some((_, held)) => held.extend(verbs),
                None if !verbs.is_empty() => reads.push((resource, verbs)),
                None => {}
            }
        }
        Self(reads)
    }

    /// The reviews that confirm these reads for `account` of `namespace`,
    /// each with its type's name and verb.
    fn reviews(&self, namespace: &str, account: &str) -> Vec<(String, Verb, SubjectAccessReview)> {
        let groups = vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_owned(),
        ];
        let mut reviews = Vec::new();
        for (resource, verbs) in &self.0 {
            let is_namespace = resource.group.is_empty() && resource.kind == "Namespace";
            let (scope, name) = match (resource.namespaced, is_namespace) {
                (true, _) => (Some(namespace.to_owned()), None),
                (false, true) => (Some(namespace.to_owned()), Some(namespace.to_owned())),
                (false, false) => (None, None),
            };
            let shown = if resource.group.is_empty() {
                resource.plural.clone()
            } else {
                format!("{}.{}", resource.plural, resource.group)
            };
            for verb in verbs {
                let spec = SubjectAccessReviewSpec {
                    user: Some(format!("system:serviceaccount:{namespace}:{account}")),
                    groups: Some(groups.clone()),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(resource.group.clone()),
                        version: Some(resource.version.clone()),
                        resource: Some(resource.plural.clone()),
                        verb: Some(verb.as_str().to_owned()),
                        namespace: scope.clone(),
                        name: name.clone(),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                };
                let review = SubjectAccessReview {
                    spec,
                    ..SubjectAccessReview::default()
                };
                reviews.push((shown.clone(), *verb, review));
            }
        }
        reviews
    }

    /// Asks the cluster whether the ServiceAccount `account` of `namespace`
    /// may make these reads itself.
    ///
    /// # Errors
    /// [`RightsError::Missing`] naming every type and verb it may not;
    /// [`RightsError::Review`] when the cluster did not answer.
    pub async fn check(
        &self,
        client: &kube::Client,
        namespace: &str,
        account: &str,
    ) -> Result<(), RightsError> {
        let api = Api::<SubjectAccessReview>::all(client.clone());
        let shown_account = format!("{namespace}/{account}");
        let mut missing: Vec<(String, Vec<&'static str>)> = Vec::new();
        for (resource, verb, review) in self.reviews(namespace, account) {
            let answer = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|source| RightsError::Review {
                    account: shown_account.clone(),
                    source: Box::new(source),
                })?;
            if answer.status.is_some_and(|s| s.allowed) {
                continue;
            }
            match missing.iter_mut().find(|(r, _)| *r == resource) {
                Some((_, verbs)) => verbs.push(verb.as_str()),
                None => missing.push((resource, vec![verb.as_str()])),
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Missing {
                account: shown_account,
                missing,
            }
            .into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::declaration::{Mapping, Secondary};

    fn ty(group: &str, kind: &str, plural: &str, namespaced: bool) -> ResourceType {
        ResourceType {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    fn secondary(resource: ResourceType, verbs: &[Verb]) -> Secondary {
        Secondary {
            prune: false,
            resource,
            verbs: verbs.iter().copied().collect(),
            label_selector: String::new(),
            mapping: Mapping::None,
        }
    }

    #[test]
    fn each_declared_read_should_be_reviewed_in_its_scope_for_the_account_and_its_groups() {
        let declaration = Declaration {
            name: "myapp".into(),
            version: "0.1.0".into(),
            primary: ty("example.com", "MyApp", "myapps", true),
            primary_verbs: [Verb::Get, Verb::List, Verb::Watch, Verb::ApplyStatus].into(),
            primary_selector: String::new(),
            secondaries: vec![
                secondary(
                    ty("apps", "Deployment", "deployments", true),
                    &[Verb::Get, Verb::Apply],
                ),
                secondary(ty("", "Namespace", "namespaces", false), &[Verb::List]),
                secondary(ty("", "Node", "nodes", false), &[Verb::Watch]),
                // Written only: nothing to read.
                secondary(ty("", "Event", "events", true), &[Verb::Apply]),
            ],
            managed_finalizer: false,
            resync_seconds: None,
            max_concurrency: None,
            config_schema: None,
            schedule: None,
        };
        let reviews = Reads::of(&declaration).reviews("team-a", "kubewasm-tenant");
        let asked: Vec<(String, &str, Option<String>, Option<String>)> = reviews
            .iter()
            .map(|(shown, verb, review)| {
                let attributes = review.spec.resource_attributes.clone().unwrap_or_default();
                (
                    shown.clone(),
                    verb.as_str(),
                    attributes.namespace,
                    attributes.name,
                )
            })
            .collect();
        let ns = || Some("team-a".to_owned());
        assert_eq!(
            asked,
            [
                ("myapps.example.com".into(), "get", ns(), None),
                ("myapps.example.com".into(), "list", ns(), None),
                ("myapps.example.com".into(), "watch", ns(), None),
                ("deployments.apps".into(), "get", ns(), None),
                ("namespaces".into(), "list", ns(), ns()),
                ("nodes".into(), "watch", None, None),
            ]
        );
        let spec = &reviews[0].2.spec;
        assert_eq!(
            spec.user.as_deref(),
            Some("system:serviceaccount:team-a:kubewasm-tenant")
        );
        assert_eq!(
            spec.groups.as_deref(),
            Some(
                &[
                    "system:serviceaccounts".to_owned(),
                    "system:serviceaccounts:team-a".to_owned(),
                    "system:authenticated".to_owned()
                ][..]
            )
        );
    }

    #[test]
    fn a_refusal_should_name_every_type_and_verb() {
        let missing = Missing {
            account: "team-a/kubewasm-tenant".into(),
            missing: vec![
                ("deployments.apps".into(), vec!["get", "list", "watch"]),
                ("services".into(), vec!["list"]),
            ],
        };
        assert_eq!(
            missing.to_string(),
            "its reads run under the ServiceAccount team-a/kubewasm-tenant, which may not get, \
             list, watch deployments.apps; list services"
        );
    }
}
