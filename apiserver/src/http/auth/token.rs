//! ServiceAccount tokens (TokenRequest, `kubectl create token`): JWTs
//! signed with HMAC-SHA256 by a key only the server holds.
//!
//! # Rules
//! - A token names its account's namespace, name and uid, and expires
//!   (`expirationSeconds`, at least 10 minutes, at most 48 hours, one hour
//!   by default).
//! - It is accepted while unexpired, its signature verifies (in constant
//!   time), and the account still exists with the same uid: deleting the
//!   account revokes its tokens, as bound tokens are revoked.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use kubewasm_core::ObjectKey;
use serde_json::{Value, json};
use sha2::Sha256;

use super::user::User;
use crate::store::{ResourceKey, Store};

/// Shortest lifetime a token may ask for, in seconds.
pub const MIN_EXPIRATION: i64 = 600;
/// Longest lifetime a token may ask for, in seconds.
pub const MAX_EXPIRATION: i64 = 48 * 3600;
/// Lifetime when none is asked for, in seconds.
pub const DEFAULT_EXPIRATION: i64 = 3600;
/// The issuer written in tokens.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Why a token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url parts with JSON claims.
    #[error("malformed token")]
    Malformed,
    /// The signature does not verify.
    #[error("signature does not verify")]
    Signature,
    /// Past its expiry.
    #[error("token has expired")]
    Expired,
    /// Its account is gone, or is another account of the same name.
    #[error("service account {0} no longer exists")]
    Revoked(String),
    /// Issued for other audiences than the one asked for.
    #[error("token audiences {token:?} is invalid for the target audiences {wanted:?}")]
    Audience {
        /// The token's audiences.
        token: Vec<String>,
        /// The audiences asked for.
        wanted: Vec<String>,
    },
}

/// The API server's own audience: tokens requested with no audience get it,
/// and a bearer token must carry it (or, issued before audiences were
/// recorded, none).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Signs and verifies account tokens.
#[derive(Clone)]
pub struct Signer {
    key: [u8; 32],
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length.
    <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!())
}

impl Signer {
    /// A signer whose key is derived from `secret` (the admin token): the
    /// tokens it signed stay valid across restarts with the same data dir.
    pub fn derived_from(secret: &str) -> Self {
        let mut m = mac(secret.as_bytes());
        m.update(b"kubewasm service account token signing key");
        Self {
            key: m.finalize().into_bytes().into(),
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        let mut m = mac(&self.key);
        m.update(message);
        m.finalize().into_bytes().to_vec()
    }

    /// A token for the account `namespace/name` with `uid`, valid for
    /// `seconds` from `now` (Unix seconds).
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        now: i64,
        seconds: i64,
    ) -> String {
        let header = B64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = json!({
            "iss": ISSUER,
            "aud": audiences,
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
            "iat": now, "nbf": now, "exp": now + seconds,
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        });
        let payload = B64.encode(claims.to_string());
        let signed = format!("{header}.{payload}");
        let signature = B64.encode(self.sign(signed.as_bytes()));
        format!("{signed}.{signature}")
    }

    /// The user a bearer token stands for: a valid token that carries the
    /// API server's audience.
    ///
    /// # Errors
    /// [`TokenError`].
    pub fn verify(&self, token: &str, store: &Store) -> Result<User, TokenError> {
        let (user, audiences) = self.review(token, store)?;
        if !audiences.is_empty() && !audiences.iter().any(|a| a == API_AUDIENCE) {
            return Err(TokenError::Audience {
                token: audiences,
                wanted: vec![API_AUDIENCE.to_owned()],
            });
        }
        Ok(user)
    }

    /// The user a token stands for and the audiences it was issued for,
    /// whatever they are (what a TokenReview asks).
    ///
    /// # Errors
    /// [`TokenError`].
    pub fn review(&self, token: &str, store: &Store) -> Result<(User, Vec<String>), TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let signature = B64.decode(signature).map_err(|_| TokenError::Malformed)?;
        let mut m = mac(&self.key);
        m.update(header.as_bytes());
        m.update(b".");
        m.update(payload.as_bytes());
        m.verify_slice(&signature)
            .map_err(|_| TokenError::Signature)?;
        let claims: Value = B64
            .decode(payload)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or(TokenError::Malformed)?;
        let exp = claims
            .get("exp")
            .and_then(Value::as_i64)
            .ok_or(TokenError::Malformed)?;
        if exp <= jiff::Timestamp::now().as_second() {
            return Err(TokenError::Expired);
        }
        let text = |pointer: &str| claims.pointer(pointer).and_then(Value::as_str);
        let (Some(namespace), Some(name), Some(uid)) = (
            text("/kubernetes.io/namespace"),
            text("/kubernetes.io/serviceaccount/name"),
            text("/kubernetes.io/serviceaccount/uid"),
        ) else {
            return Err(TokenError::Malformed);
        };
        let account = store.get(
            &ResourceKey::new("", "serviceaccounts"),
            &ObjectKey::namespaced(namespace, name),
        );
        if account
            .as_ref()
            .and_then(|a| a.pointer("/metadata/uid"))
            .and_then(Value::as_str)
            != Some(uid)
        {
            return Err(TokenError::Revoked(format!("{namespace}/{name}")));
        }
        let audiences = crate::objects::strings_at(&claims, "/aud");
        Ok((
            User::service_account(namespace, name, Some(uid.to_owned())),
            audiences,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_account(uid: &str) -> Store {
        let store = Store::default();
        store
            .create(
                &ResourceKey::new("", "serviceaccounts"),
                &ObjectKey::namespaced("team", "bot"),
                json!({"metadata": {"name": "bot", "namespace": "team", "uid": uid}}),
            )
            .expect("created");
        store
    }

    #[test]
    fn a_token_should_verify_until_it_expires_or_its_account_goes() {
        let signer = Signer::derived_from("admin-secret");
        let store = store_with_account("u1");
        let now = jiff::Timestamp::now().as_second();
        let token = signer.issue("team", "bot", "u1", &[], now, 600);
        let user = signer.verify(&token, &store).expect("valid");
        assert_eq!(user.name, "system:serviceaccount:team:bot");
        assert!(
            user.groups
                .contains(&"system:serviceaccounts:team".to_owned())
        );

        let expired = signer.issue("team", "bot", "u1", &[], now - 1000, 600);
        assert_eq!(signer.verify(&expired, &store), Err(TokenError::Expired));
        let other = Signer::derived_from("another-secret");
        assert_eq!(other.verify(&token, &store), Err(TokenError::Signature));
        // The same name, a new account: the old token is revoked.
        assert!(matches!(
            signer.verify(&token, &store_with_account("u2")),
            Err(TokenError::Revoked(_))
        ));
        let mut forged: Vec<&str> = token.split('.').collect();
        let claims = B64.encode(
            json!({"exp": now + 600, "kubernetes.io": {"namespace": "kube-system", "serviceaccount": {"name": "bot", "uid": "u1"}}})
                .to_string(),
        );
        forged[1] = &claims;
        assert_eq!(
            signer.verify(&forged.join("."), &store),
            Err(TokenError::Signature)
        );
        for garbage in ["", "a.b", "a.b.c.d", "!!.??.**"] {
            assert!(signer.verify(garbage, &store).is_err());
        }
    }
}
