//! Who a request acts as: a user, its groups, and the groups RBAC knows
//! by name.

use serde_json::{Value, json};

/// The group of cluster administrators, allowed everything.
pub const MASTERS: &str = "system:masters";
/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The admin user of the kubeconfig.
pub const ADMIN: &str = "kubewasm-admin";

/// An authenticated user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// User name (`system:serviceaccount:<ns>:<name>` for an account).
    pub name: String,
    /// Uid, when known.
    pub uid: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
}

impl User {
    /// The admin: the kubeconfig's token, and in-process servers without
    /// authentication.
    pub fn admin() -> Self {
        Self {
            name: ADMIN.to_owned(),
            uid: None,
            groups: vec![MASTERS.to_owned(), AUTHENTICATED.to_owned()],
        }
    }

    /// A ServiceAccount's user.
    pub fn service_account(namespace: &str, name: &str, uid: Option<String>) -> Self {
        Self {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            uid,
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.to_owned(),
            ],
        }
    }

    /// Whether the user is a cluster administrator.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// The `UserInfo` of reviews.
    pub fn info(&self) -> Value {
        let mut info = json!({"username": self.name, "groups": self.groups});
        if let Some(uid) = &self.uid {
            info["uid"] = uid.clone().into();
        }
        info
    }
}
