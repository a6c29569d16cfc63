//! RBAC escalation prevention, as Kubernetes' rbac registry has it
//! (`escalation_check.go`, `policybased/storage.go`): nobody grants what
//! they do not hold.
//!
//! # Rules
//! - `system:masters` is never refused.
//! - Writing a Role or a ClusterRole needs every permission in its rules,
//!   where it applies (a Role's namespace; everywhere for a ClusterRole), or
//!   the `escalate` verb on it. A ClusterRole with an `aggregationRule`
//!   needs every permission there is (it may aggregate any), or `escalate`.
//! - Writing a RoleBinding or a ClusterRoleBinding needs the `bind` verb on
//!   the role it references, or every permission of that role where the
//!   binding applies.
//! - A permission is held when one of the writer's rules covers it: each
//!   verb, group, resource and name of a rule asked for is matched by a rule
//!   held, a `*` asked for only by a `*` held, an unrestricted rule (no
//!   `resourceNames`) only by an unrestricted one.
//!
//! A refusal says what is missing as the real server words it: `user "U"
//! (groups=["G"]) is attempting to grant RBAC permissions not currently
//! held:` and one `{APIGroups:[…], Resources:[…], Verbs:[…]}` per line.

use std::sync::Arc;

use serde_json::{Value, json};

use super::rbac::{Attributes, Policy, all, matches};
use super::user::User;
use crate::objects::{strings_at, text_at as text};
use crate::store::Store;

/// The API group of RBAC.
const RBAC: &str = "rbac.authorization.k8s.io";

/// Every permission there is: what an `aggregationRule` asks for.
fn full_authority() -> Vec<Value> {
    vec![
        json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
        json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
    ]
}

/// What a writer holds, read before its write (the store is not read
/// again while the write holds it).
pub struct Writer {
    user: User,
    namespace: String,
    /// Every rule granted to the writer, cluster-wide and in `namespace`.
    held: Vec<Value>,
    /// The Roles of `namespace`.
    roles: Vec<Arc<Value>>,
    /// The ClusterRoles.
    policy: Policy,
}

impl Writer {
    /// What `user` holds for a write in `namespace` (empty when
    /// cluster-scoped).
    pub fn of(store: &Store, user: &User, namespace: &str) -> Self {
        let policy = Policy::of(store);
        Self {
            held: policy.rules(user, Some(namespace)),
            roles: if namespace.is_empty() {
                Vec::new()
            } else {
                all(store, "roles", Some(namespace))
            },
            user: user.clone(),
            namespace: namespace.to_owned(),
            policy,
        }
    }

    /// Whether the writer holds `verb` on the RBAC object `resource/name`.
    fn may(&self, verb: &str, resource: &str, name: &str) -> bool {
        let asked = Attributes {
            verb: verb.to_owned(),
            group: RBAC.to_owned(),
            resource: resource.to_owned(),
            name: name.to_owned(),
            namespace: self.namespace.clone(),
            ..Attributes::default()
        };
        self.user.is_master() || self.held.iter().any(|rule| matches(rule, &asked))
    }

    /// Checks that the writer may write `object`, of `resource` (`roles`,
    /// `clusterroles`, `rolebindings` or `clusterrolebindings`; anything
    /// else passes).
    ///
    /// # Errors
    /// What the refusal says, without the resource and name before it.
    pub fn check(&self, resource: &str, object: &Value) -> Result<(), String> {
        if self.user.is_master() {
            return Ok(());
        }
        let name = text(object, "/metadata/name");
        let asked = match resource {
            "roles" | "clusterroles" => {
                if self.may("escalate", resource, name) {
                    return Ok(());
                }
                if resource == "clusterroles" && object.get("aggregationRule").is_some() {
                    full_authority()
                } else {
                    rules_of(object)
                }
            }
            "rolebindings" | "clusterrolebindings" => {
                let role = text(object, "/roleRef/name");
                let (role_resource, role_rules) = match text(object, "/roleRef/kind") {
                    "Role" => (
                        "roles",
                        self.roles
                            .iter()
                            .find(|r| text(r, "/metadata/name") == role)
                            .map(|r| rules_of(r))
                            .unwrap_or_default(),
                    ),
                    _ => ("clusterroles", self.policy.cluster_role_rules(role)),
                };
                if self.may("bind", role_resource, role) {
                    return Ok(());
                }
                role_rules
            }
            _ => return Ok(()),
        };
        let mut missing: Vec<String> = asked
            .iter()
            .flat_map(|rule| missing(&self.held, rule))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort();
        missing.dedup();
        Err(format!(
            "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            self.user.name,
            quoted(&self.user.groups),
            missing.join("\n")
        ))
    }
}

/// A role's rules.
fn rules_of(role: &Value) -> Vec<Value> {
    role.get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The permissions of `rule` none of `held` covers, as the real server
/// prints them once compacted: one line per resource (or URL) and name, its
/// missing verbs together.
fn missing(held: &[Value], rule: &Value) -> Vec<String> {
    let verbs = strings_at(rule, "/verbs");
    let not_held = |asked: &dyn Fn(&str) -> Attributes| -> Vec<String> {
        verbs
            .iter()
            .filter(|verb| !held.iter().any(|h| matches(h, &asked(verb))))
            .cloned()
            .collect()
    };
    let mut missing = Vec::new();
    for url in strings_at(rule, "/nonResourceURLs") {
        let verbs = not_held(&|verb| Attributes {
            verb: verb.to_owned(),
            path: Some(url.clone()),
            ..Attributes::default()
        });
        if !verbs.is_empty() {
            missing.push(format!(
                "{{NonResourceURLs:{}, Verbs:{}}}",
                quoted(std::slice::from_ref(&url)),
                quoted(&verbs)
            ));
        }
    }
    let names = strings_at(rule, "/resourceNames");
    // No name asked: every object, held only by a rule naming none.
    let names: Vec<Option<&String>> = if names.is_empty() {
        vec![None]
    } else {
        names.iter().map(Some).collect()
    };
    for group in strings_at(rule, "/apiGroups") {
        for resource in strings_at(rule, "/resources") {
            let (plural, subresource) = resource.split_once('/').unwrap_or((resource.as_str(), ""));
            for name in &names {
                let verbs = not_held(&|verb| Attributes {
                    verb: verb.to_owned(),
                    group: group.clone(),
                    resource: plural.to_owned(),
                    subresource: subresource.to_owned(),
                    name: name.cloned().unwrap_or_default(),
                    ..Attributes::default()
                });
                if verbs.is_empty() {
                    continue;
                }
                let named = name.map_or_else(String::new, |n| {
                    format!(", ResourceNames:{}", quoted(std::slice::from_ref(n)))
                });
                missing.push(format!(
                    "{{APIGroups:{}, Resources:{}{named}, Verbs:{}}}",
                    quoted(std::slice::from_ref(&group)),
                    quoted(std::slice::from_ref(&resource)),
                    quoted(&verbs)
                ));
            }
        }
    }
    missing
}

/// Strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
fn quoted(values: &[String]) -> String {
    let inner: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", inner.join(" "))
}
