//! What a plugin may do: the verbs it declared on each resource type.
//!
//! **Architecture Invariant:** every read a plugin makes through the cache
//! and every action it returns is checked here first. A plugin sees and
//! writes only what it declared; nothing else reaches it or leaves it.

use std::collections::BTreeSet;

use crate::declaration::{Declaration, Verb};
use crate::resource::ResourceType;

/// A refused read or write.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("plugin `{plugin}` may not {verb} {resource}: {why}", verb = verb.as_str())]
pub struct Denied {
    /// The plugin.
    pub plugin: String,
    /// What it tried.
    pub verb: Verb,
    /// On what (`apiVersion Kind`).
    pub resource: String,
    /// Why not.
    pub why: &'static str,
}

/// The verbs a plugin holds on each resource type. A plugin declares a
/// handful of types, so a linear scan beats hashing (no allocation per check).
#[derive(Clone, Debug, Default)]
pub struct Grants {
    plugin: String,
    verbs: Vec<(ResourceType, BTreeSet<Verb>)>,
}

impl Grants {
    /// Grants exactly what a declaration asks for.
    pub fn from_declaration(declaration: &Declaration) -> Self {
        let verbs = std::iter::once((
            declaration.primary.clone(),
            declaration.primary_verbs.clone(),
        ))
        .chain(
            declaration
                .secondaries
                .iter()
                .map(|s| (s.resource.clone(), s.verbs.clone())),
        )
        .collect();
        Self {
            plugin: declaration.name.clone(),
            verbs,
        }
    }

    /// Grants nothing: used while a plugin declares itself.
    pub fn none(plugin: impl Into<String>) -> Self {
        Self {
            plugin: plugin.into(),
            verbs: Vec::new(),
        }
    }

    /// Checks that the plugin holds `verb` on `resource`.
    ///
    /// # Errors
    /// [`Denied`] names the plugin, the verb and the resource type.
    pub fn check(&self, verb: Verb, resource: &ResourceType) -> Result<(), Denied> {
        // Group, version and kind identify a type; the plural and scope a
        // plugin passes are not trusted.
        let held = self
            .verbs
            .iter()
            .find(|(ty, _)| {
                ty.group == resource.group
                    && ty.version == resource.version
                    && ty.kind == resource.kind
            })
            .map(|(_, verbs)| verbs);
        match held {
            Some(verbs) if verbs.contains(&verb) => Ok(()),
            Some(_) => Err(self.deny(verb, resource, "the verb was not declared for this type")),
            None => Err(self.deny(verb, resource, "the type was not declared")),
        }
    }

    fn deny(&self, verb: Verb, resource: &ResourceType, why: &'static str) -> Denied {
        Denied {
            plugin: self.plugin.clone(),
            verb,
            resource: resource.to_string(),
            why,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declaration::tests::{sample, ty};

    #[test]
    fn grants_should_follow_the_declaration_exactly() {
        let decl = sample().validate().expect("valid");
        let grants = Grants::from_declaration(&decl);
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
}
