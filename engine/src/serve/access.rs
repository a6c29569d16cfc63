//! Who may read `/metrics` when it is served securely: the client's bearer
//! token is reviewed by the cluster (a TokenReview), and the user it
//! names must be allowed to `get` the non-resource URL `/metrics` (a
//! SubjectAccessReview), as controller-runtime's
//! `filters.WithAuthenticationAndAuthorization` and kube-rbac-proxy do. A
//! Prometheus scraping with its ServiceAccount's token needs a ClusterRole
//! with `nonResourceURLs: ["/metrics"]`, `verbs: ["get"]`.
//!
//! Decisions are kept a while per token (its SHA-256, never the token), as
//! the API server's own webhook authenticator and authorizer cache them:
//! an allowed scraper for [`ALLOWED_FOR`], a refused one for
//! [`REFUSED_FOR`]; a review that fails is not kept.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// How long an allowed token's decision is kept.
pub const ALLOWED_FOR: Duration = Duration::from_secs(120);

/// How long a refused (or unknown) token's decision is kept.
pub const REFUSED_FOR: Duration = Duration::from_secs(30);

/// The most decisions kept; past it, the expired ones go, then all.
const KEPT: usize = 4096;

/// What a request for `/metrics` gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The cluster authenticated its token and allows its user.
    Allowed,
    /// No bearer token, or one the cluster does not authenticate (401).
    Unauthenticated,
    /// Its user may not `get /metrics` (403).
    Forbidden {
        /// The user the token names.
        user: String,
    },
}

/// Why a token could not be reviewed (the request gets a 500 and the
/// decision is not kept).
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The TokenReview failed.
    #[error("TokenReview failed: {0}")]
    TokenReview(#[source] kube::Error),
    /// The SubjectAccessReview failed.
    #[error("SubjectAccessReview failed: {0}")]
    SubjectAccessReview(#[source] kube::Error),
}

/// Reviews of the tokens that ask for `/metrics` (see the module
/// documentation).
pub struct Access {
    client: kube::Client,
    decided: Mutex<HashMap<[u8; 32], (Instant, Decision)>>,
}

impl Access {
    /// Reviews through `client`, whose account needs `create` on
    /// `tokenreviews` and `subjectaccessreviews`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            decided: Mutex::default(),
        }
    }

    /// The decision for a request with this `Authorization` header.
    ///
    /// # Errors
    /// [`AccessError`] if a review could not be made.
    pub async fn check(&self, authorization: Option<&str>) -> Result<Decision, AccessError> {
        let token = authorization
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|token| !token.is_empty());
        let Some(token) = token else {
            return Ok(Decision::Unauthenticated);
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(decision) = self.kept(&key) {
            return Ok(decision);
        }
        let decision = self.review(token).await?;
        self.keep(key, decision.clone());
        Ok(decision)
    }

    fn kept(&self, key: &[u8; 32]) -> Option<Decision> {
        let decided = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        decided
            .get(key)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, decision)| decision.clone())
    }

    fn keep(&self, key: [u8; 32], decision: Decision) {
        let now = Instant::now();
        let until = now
            + if decision == Decision::Allowed {
                ALLOWED_FOR
            } else {
                REFUSED_FOR
            };
        let mut decided = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        if decided.len() >= KEPT {
            decided.retain(|_, (until, _)| *until > now);
            if decided.len() >= KEPT {
                decided.clear();
            }
        }
        decided.insert(key, (until, decision));
    }

    async fn review(&self, token: &str) -> Result<Decision, AccessError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(AccessError::TokenReview)?;
        let status = reviewed.status.unwrap_or_default();
        let user = match status.user {
            Some(user) if status.authenticated == Some(true) => user,
            _ => return Ok(Decision::Unauthenticated),
        };
        let asked = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".to_owned()),
                    verb: Some("get".to_owned()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &asked)
            .await
            .map_err(AccessError::SubjectAccessReview)?;
        Ok(if answered.status.is_some_and(|s| s.allowed) {
            Decision::Allowed
        } else {
            Decision::Forbidden {
                user: user.username.unwrap_or_default(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("url"));
        Access::new(kube::Client::try_from(config).expect("client"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_a_bearer_token_should_be_unauthenticated_unasked() {
        let access = access();
        for header in [
            None,
            Some("Basic dXNlcjpwYXNz"),
            Some("Bearer "),
            Some("Bearer   "),
        ] {
            assert_eq!(
                access.check(header).await.expect("no review needed"),
                Decision::Unauthenticated,
                "{header:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn decisions_should_be_kept_by_token_until_they_expire() {
        let access = access();
        let (allowed, refused) = ([1; 32], [2; 32]);
        access.keep(allowed, Decision::Allowed);
        access.keep(
            refused,
            Decision::Forbidden {
                user: "someone".to_owned(),
            },
        );
        assert_eq!(access.kept(&allowed), Some(Decision::Allowed));
        tokio::time::advance(REFUSED_FOR).await;
        assert_eq!(access.kept(&refused), None, "a refusal is kept briefly");
        assert_eq!(access.kept(&allowed), Some(Decision::Allowed));
        tokio::time::advance(ALLOWED_FOR - REFUSED_FOR).await;
        assert_eq!(access.kept(&allowed), None);
        // Past the bound, what expired goes first.
        for i in 0..KEPT {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            access.keep(key, Decision::Unauthenticated);
        }
        tokio::time::advance(REFUSED_FOR).await;
        access.keep(allowed, Decision::Allowed);
        let decided = access.decided.lock().expect("lock");
        assert_eq!(decided.len(), 1, "the expired went");
    }
}
