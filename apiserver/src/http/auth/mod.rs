//! Who is asking, and may they: authentication, impersonation and RBAC, as
//! a real cluster does them.
//!
//! - [`Authenticator`]: a bearer token is the admin's (from the kubeconfig:
//!   `kubewasm-admin` in `system:masters`), or a ServiceAccount token the
//!   server signed ([`token`]) for an account that still exists with the
//!   same uid. Anything else is 401.
//! - Impersonation (`Impersonate-User`, `Impersonate-Group`,
//!   `Impersonate-Uid`): the requester must be allowed the `impersonate`
//!   verb on `users`, `groups`, `serviceaccounts` or `uids` for each value;
//!   then the request runs as the impersonated user.
//! - [`rbac`]: every request is authorized against Roles, ClusterRoles
//!   (with aggregation) and their bindings; `system:masters` may do
//!   anything. Refusals are 403 with the real server's message.

pub mod escalation;
pub mod rbac;
pub mod token;
mod user;

use std::sync::Arc;

use crate::store::Store;

pub use user::{ADMIN, AUTHENTICATED, MASTERS, User};

/// What a request asks to act as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: Option<String>,
    /// `Impersonate-Group`, each.
    pub groups: Vec<String>,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
}

impl Impersonation {
    /// Whether the request impersonates anyone.
    pub fn is_empty(&self) -> bool {
        self.user.is_none() && self.groups.is_empty() && self.uid.is_none()
    }
}

/// Why a request was not authenticated.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// No bearer token.
    #[error("no bearer token")]
    Missing,
    /// A token that is neither the admin's nor a valid account token.
    #[error("invalid bearer token: {0}")]
    Invalid(#[from] token::TokenError),
}

/// Turns bearer tokens into users.
#[derive(Clone)]
pub struct Authenticator {
    admin_token: Arc<str>,
    signer: token::Signer,
    store: Store,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Accepts `admin_token` and the account tokens `signer` signs for
    /// accounts in `store`.
    pub fn new(admin_token: &str, signer: token::Signer, store: Store) -> Self {
        Self {
            admin_token: Arc::from(admin_token),
            signer,
            store,
        }
    }

    /// The user a bearer token stands for.
    ///
    /// # Errors
    /// [`AuthError`]: the token is missing, or neither the admin's (compared
    /// in constant time) nor a valid account token.
    pub fn authenticate(&self, bearer: Option<&str>) -> Result<User, AuthError> {
        let presented = bearer.ok_or(AuthError::Missing)?;
        // Constant time: the comparison must not tell how much of a guess
        // was right.
        if bool::from(subtle::ConstantTimeEq::ct_eq(
            presented.as_bytes(),
            self.admin_token.as_bytes(),
        )) {
            return Ok(User::admin());
        }
        Ok(self.signer.verify(presented, &self.store)?)
    }

    /// A TokenReview of `token`: its user and the audiences it is valid
    /// for among `wanted` (the API server's own when `wanted` is empty).
    ///
    /// # Errors
    /// [`AuthError::Invalid`] when the token is invalid, or valid for none
    /// of `wanted`.
    pub fn review(&self, token: &str, wanted: &[String]) -> Result<(User, Vec<String>), AuthError> {
        let wanted = if wanted.is_empty() {
            vec![token::API_AUDIENCE.to_owned()]
        } else {
            wanted.to_vec()
        };
        let (user, audiences) = if bool::from(subtle::ConstantTimeEq::ct_eq(
            token.as_bytes(),
            self.admin_token.as_bytes(),
        )) {
            (User::admin(), vec![token::API_AUDIENCE.to_owned()])
        } else {
            self.signer.review(token, &self.store)?
        };
        // A token recorded with no audience predates them: the API's own.
        let audiences = if audiences.is_empty() {
            vec![token::API_AUDIENCE.to_owned()]
        } else {
            audiences
        };
        let valid: Vec<String> = wanted
            .iter()
            .filter(|w| audiences.contains(w))
            .cloned()
            .collect();
        if valid.is_empty() {
            return Err(token::TokenError::Audience {
                token: audiences,
                wanted,
            }
            .into());
        }
        Ok((user, valid))
    }

    /// The signer of account tokens.
    pub fn signer(&self) -> &token::Signer {
        &self.signer
    }
}
