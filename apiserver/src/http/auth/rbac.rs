//! RBAC authorization: Roles and ClusterRoles granted by RoleBindings and
//! ClusterRoleBindings, as `rbac.authorization.k8s.io/v1` defines them.
//!
//! # Rules
//! - `system:masters` may do anything.
//! - A ClusterRoleBinding grants its ClusterRole everywhere; a RoleBinding
//!   grants its Role, or a ClusterRole, in its namespace only.
//! - A subject is a `User` (by name), a `Group` (by name), or a
//!   `ServiceAccount` (namespace and name, i.e. the user
//!   `system:serviceaccount:<ns>:<name>`).
//! - A ClusterRole with an `aggregationRule` also holds the rules of every
//!   ClusterRole its selectors pick.
//! - A resource rule matches when its `verbs`, `apiGroups` and `resources`
//!   (`*`, `resource`, `resource/subresource`, `*/subresource`) match, and
//!   its `resourceNames`, when given, name the object. A non-resource rule
//!   matches a path exactly or by a `*` suffix.

use serde_json::Value;

use super::user::User;
use crate::objects::{selects, strings_at, text_at as text};
use crate::store::{ListAt, ResourceKey, Store};

/// What a request does, for authorization.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `impersonate`, …; for a non-resource request,
    /// the lowercase HTTP method.
    pub verb: String,
    /// API group (empty for the core group).
    pub group: String,
    /// Resource plural; empty for a non-resource request.
    pub resource: String,
    /// Subresource, or empty.
    pub subresource: String,
    /// Object name, or empty.
    pub name: String,
    /// Namespace, or empty for cluster-scoped requests.
    pub namespace: String,
    /// The path of a non-resource request.
    pub path: Option<String>,
}

impl Attributes {
    /// What a refusal says, as the real server words it.
    pub fn forbidden_message(&self, user: &User) -> String {
        if let Some(path) = &self.path {
            return format!(
                "forbidden: User \"{}\" cannot {} path \"{path}\"",
                user.name, self.verb
            );
        }
        let resource = if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        };
        let qualified = if self.group.is_empty() {
            resource.clone()
        } else {
            format!("{resource}.{}", self.group)
        };
        let name = if self.name.is_empty() {
            String::new()
        } else {
            format!(" \"{}\"", self.name)
        };
        let scope = if self.namespace.is_empty() {
            " at the cluster scope".to_owned()
        } else {
            format!(" in the namespace \"{}\"", self.namespace)
        };
        format!(
            "{qualified}{name} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\"{scope}",
            user.name, self.verb, self.group
        )
    }
}

fn strings(value: &Value, field: &str) -> Vec<String> {
    strings_at(value, &format!("/{field}"))
}

/// Whether a binding's subjects include `user`.
fn binds(binding: &Value, user: &User) -> bool {
    let binding_ns = text(binding, "/metadata/namespace");
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|s| {
            let name = text(s, "/name");
            match text(s, "/kind") {
                "User" => name == user.name,
                "Group" => user.groups.iter().any(|g| g == name),
                "ServiceAccount" => {
                    let ns = match text(s, "/namespace") {
                        "" => binding_ns,
                        ns => ns,
                    };
                    user.name == format!("system:serviceaccount:{ns}:{name}")
                }
                _ => false,
            }
        })
}

/// The RBAC view of the store at one moment.
pub struct Policy {
    cluster_roles: Vec<std::sync::Arc<Value>>,
    cluster_bindings: Vec<std::sync::Arc<Value>>,
    store: Store,
}

pub(crate) fn all(
    store: &Store,
    plural: &str,
    namespace: Option<&str>,
) -> Vec<std::sync::Arc<Value>> {
    store
        .list(
            &ResourceKey::new("rbac.authorization.k8s.io", plural),
            namespace,
            ListAt::Latest,
        )
        .map(|s| s.items.to_vec())
        .unwrap_or_default()
}

impl Policy {
    /// The policy the store holds now.
    pub fn of(store: &Store) -> Self {
        Self {
            cluster_roles: all(store, "clusterroles", None),
            cluster_bindings: all(store, "clusterrolebindings", None),
            store: store.clone(),
        }
    }

    /// A ClusterRole's rules, with those it aggregates, transitively (as
    /// the aggregation controller would have written them into it).
    pub(crate) fn cluster_role_rules(&self, name: &str) -> Vec<Value> {
        let mut rules = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut pending = vec![name.to_owned()];
        while let Some(current) = pending.pop() {
            if !seen.insert(current.clone()) {
                continue;
            }
            let Some(role) = self
                .cluster_roles
                .iter()
                .find(|r| text(r, "/metadata/name") == current)
            else {
                continue;
            };
            rules.extend(
                role.get("rules")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            let selectors = role
                .pointer("/aggregationRule/clusterRoleSelectors")
                .and_then(Value::as_array);
            for selector in selectors.into_iter().flatten() {
                for other in &self.cluster_roles {
                    let labels = other.pointer("/metadata/labels").and_then(Value::as_object);
                    if selects(selector, labels) {
                        pending.push(text(other, "/metadata/name").to_owned());
                    }
                }
            }
        }
        rules
    }

    /// The rules of the Role `name` in `namespace` (none when it does not
    /// exist).
    fn role_rules(&self, namespace: &str, name: &str) -> Vec<Value> {
        all(&self.store, "roles", Some(namespace))
            .into_iter()
            .find(|r| text(r, "/metadata/name") == name)
            .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    }

    /// Every rule granted to `user`: cluster-wide, and in `namespace`.
    pub fn rules(&self, user: &User, namespace: Option<&str>) -> Vec<Value> {
        let mut rules = Vec::new();
        for binding in self.cluster_bindings.iter().filter(|b| binds(b, user)) {
            if text(binding, "/roleRef/kind") == "ClusterRole" {
                rules.extend(self.cluster_role_rules(text(binding, "/roleRef/name")));
            }
        }
        let Some(namespace) = namespace.filter(|ns| !ns.is_empty()) else {
            return rules;
        };
        for binding in all(&self.store, "rolebindings", Some(namespace))
            .iter()
            .filter(|b| binds(b, user))
        {
            let role = text(binding, "/roleRef/name");
            match text(binding, "/roleRef/kind") {
                "ClusterRole" => rules.extend(self.cluster_role_rules(role)),
                "Role" => rules.extend(self.role_rules(namespace, role)),
                _ => {}
            }
        }
        rules
    }

    /// Whether `user` may do what `attributes` describe.
    pub fn allows(&self, user: &User, attributes: &Attributes) -> bool {
        if user.is_master() {
            return true;
        }
        self.rules(user, Some(&attributes.namespace))
            .iter()
            .any(|rule| matches(rule, attributes))
    }
}

/// Whether one PolicyRule covers the request.
pub fn matches(rule: &Value, a: &Attributes) -> bool {
    let has =
        |field: &str, wanted: &str| strings(rule, field).iter().any(|v| v == "*" || v == wanted);
    if !has("verbs", &a.verb) {
        return false;
    }
    if let Some(path) = &a.path {
        return strings(rule, "nonResourceURLs").iter().any(|u| {
            u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        });
    }
    if !has("apiGroups", &a.group) {
        return false;
    }
    let resources = strings(rule, "resources");
    let resource_ok = if a.subresource.is_empty() {
        resources.iter().any(|r| r == "*" || *r == a.resource)
    } else {
        let full = format!("{}/{}", a.resource, a.subresource);
        let any = format!("*/{}", a.subresource);
        resources
            .iter()
            .any(|r| r == "*" || *r == full || *r == any)
    };
    if !resource_ok {
        return false;
    }
    let names = strings(rule, "resourceNames");
    names.is_empty() || names.contains(&a.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_core::ObjectKey;
    use serde_json::json;

    fn put(store: &Store, plural: &str, ns: Option<&str>, object: Value) {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = match ns {
            Some(ns) => ObjectKey::namespaced(ns, name),
            None => ObjectKey::cluster(name),
        };
        store
            .create(
                &ResourceKey::new("rbac.authorization.k8s.io", plural),
                &key,
                object,
            )
            .expect("created");
    }

    fn attributes(verb: &str, resource: &str, namespace: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn bindings_should_grant_what_their_roles_say_where_they_say() {
        let store = Store::default();
        put(
            &store,
            "roles",
            Some("team"),
            json!({"metadata": {"name": "reader", "namespace": "team"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
                      {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["open"], "verbs": ["get"]}]}),
        );
        put(
            &store,
            "rolebindings",
            Some("team"),
            json!({"metadata": {"name": "bot-reads", "namespace": "team"},
            "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}),
        );
        let bot = User::service_account("team", "bot", None);
        let policy = Policy::of(&store);
        assert!(policy.allows(&bot, &attributes("list", "configmaps", "team")));
        assert!(!policy.allows(&bot, &attributes("list", "configmaps", "other")));
        assert!(!policy.allows(&bot, &attributes("delete", "configmaps", "team")));
        assert!(!policy.allows(&bot, &attributes("list", "configmaps", "")));
        let mut open = attributes("get", "secrets", "team");
        open.name = "open".into();
        assert!(policy.allows(&bot, &open));
        open.name = "closed".into();
        assert!(!policy.allows(&bot, &open));
        let other = User::service_account("other", "bot", None);
        assert!(!policy.allows(&other, &attributes("list", "configmaps", "team")));
        assert!(policy.allows(&User::admin(), &attributes("delete", "nodes", "")));
    }

    #[test]
    fn aggregated_cluster_roles_should_hold_the_rules_they_select() {
        let store = Store::default();
        put(
            &store,
            "clusterroles",
            None,
            json!({"metadata": {"name": "monitoring"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}]},
            "rules": []}),
        );
        put(
            &store,
            "clusterroles",
            None,
            json!({"metadata": {"name": "pods-reader",
            "labels": {"example.com/aggregate-to-monitoring": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get"]}]}),
        );
        put(
            &store,
            "clusterrolebindings",
            None,
            json!({"metadata": {"name": "ops-monitor"},
            "roleRef": {"kind": "ClusterRole", "name": "monitoring"},
            "subjects": [{"kind": "Group", "name": "ops"}]}),
        );
        let ops = User {
            name: "alice".into(),
            uid: None,
            groups: vec!["ops".into()],
        };
        let policy = Policy::of(&store);
        assert!(policy.allows(&ops, &attributes("get", "pods", "any")));
        let mut log = attributes("get", "pods", "any");
        log.subresource = "log".into();
        assert!(policy.allows(&ops, &log));
        log.subresource = "exec".into();
        assert!(!policy.allows(&ops, &log));
    }

    #[test]
    fn the_default_roles_should_aggregate_as_a_real_clusters() {
        let store = Store::default();
        crate::store::seed::seed(&store).expect("seeded");
        let user = |role: &str| {
            let name = format!("{role}-user");
            put(
                &store,
                "rolebindings",
                Some("team"),
                json!({"metadata": {"name": format!("{role}-binding"), "namespace": "team"},
                "roleRef": {"kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "User", "name": name}]}),
            );
            User {
                name,
                uid: None,
                groups: vec![],
            }
        };
        let (view, edit, admin) = (user("view"), user("edit"), user("admin"));
        let policy = Policy::of(&store);
        let can = |u: &User, verb: &str, resource: &str| {
            let mut a = attributes(verb, resource, "team");
            if resource == "roles" {
                a.group = "rbac.authorization.k8s.io".into();
            }
            policy.allows(u, &a)
        };
        assert!(
            can(&view, "list", "pods")
                && !can(&view, "get", "secrets")
                && !can(&view, "delete", "pods")
        );
        assert!(
            can(&edit, "list", "pods")
                && can(&edit, "get", "secrets")
                && can(&edit, "delete", "pods")
        );
        assert!(!can(&edit, "create", "roles"));
        assert!(can(&admin, "create", "roles") && can(&admin, "list", "configmaps"));
        let mut elsewhere = attributes("list", "pods", "other");
        elsewhere.namespace = "other".into();
        assert!(!policy.allows(&admin, &elsewhere));
    }

    #[test]
    fn refusals_should_read_as_the_real_servers() {
        let mut a = attributes("list", "configmaps", "team");
        let bot = User::service_account("team", "bot", None);
        assert_eq!(
            a.forbidden_message(&bot),
            "configmaps is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\""
        );
        a.group = "apps".into();
        a.resource = "deployments".into();
        a.namespace = String::new();
        assert!(
            a.forbidden_message(&bot)
                .starts_with("deployments.apps is forbidden")
        );
        assert!(a.forbidden_message(&bot).ends_with("at the cluster scope"));
    }

    #[test]
    fn label_selectors_should_follow_their_operators() {
        let labels = json!({"a": "1", "b": "2"});
        let labels = labels.as_object();
        assert!(selects(&json!({}), labels));
        assert!(selects(&json!({"matchLabels": {"a": "1"}}), labels));
        assert!(!selects(&json!({"matchLabels": {"a": "2"}}), labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "b", "operator": "In", "values": ["2", "3"]}]}),
            labels
        ));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}),
            labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}),
            labels
        ));
    }
}
