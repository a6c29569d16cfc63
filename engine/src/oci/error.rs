//! Why a push or a pull failed.

use std::path::PathBuf;

/// Why a push or a pull failed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference does not parse.
    #[error("invalid OCI reference `{reference}`: {source}")]
    Reference {
        /// What was given.
        reference: String,
        /// The parser's reason.
        source: oci_client::ParseError,
    },
    /// The registry could not be reached or refused the request.
    #[error("registry {registry}: {}", causes(source.as_ref()))]
    Registry {
        /// The registry's host.
        registry: String,
        /// What the client said.
        #[source]
        source: Box<oci_client::errors::OciDistributionError>,
    },
    /// A pull took longer than its bound ([`super::Timeouts::pull`]).
    #[error("registry {registry}: the pull took over {}s", after.as_secs())]
    Deadline {
        /// The registry's host.
        registry: String,
        /// The bound.
        after: std::time::Duration,
    },
    /// What was fetched does not hash to the digest it was asked by.
    #[error("digest mismatch for the {what}: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The manifest or the layer.
        what: &'static str,
        /// The digest asked for.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// The artifact is not a plugin in either layout.
    #[error("{reference} is not a Wasm plugin artifact: {reason}")]
    NotAPlugin {
        /// The reference pulled.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A docker credential helper could not be run or gave no usable
    /// answer.
    #[error("credential helper docker-credential-{helper} for {registry}: {reason}")]
    CredentialHelper {
        /// The helper's name (`docker-credential-<name>`).
        helper: String,
        /// The registry asked for.
        registry: String,
        /// What went wrong.
        reason: String,
    },
    /// A registry's credentials are an identity token (an OAuth2 refresh
    /// token), which the registry client cannot exchange.
    #[error(
        "the credentials for {registry} are an identity token, which kubewasm cannot use: log in with a user and password"
    )]
    IdentityToken {
        /// The registry.
        registry: String,
    },
    /// The docker config file could not be read or parsed.
    #[error("docker config {path}: {reason}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl OciError {
    /// Whether the registry answered that nothing is there (a 404, or the
    /// registry's `MANIFEST_UNKNOWN`, `NAME_UNKNOWN`).
    pub fn is_not_found(&self) -> bool {
        use oci_client::errors::{OciDistributionError as E, OciErrorCode as C};
        match self {
            Self::Registry { source, .. } => match source.as_ref() {
                E::ImageManifestNotFoundError(_) => true,
                E::ServerError { code, .. } => *code == 404,
                E::RegistryError { envelope, .. } => envelope
                    .errors
                    .iter()
                    .any(|e| matches!(e.code, C::ManifestUnknown | C::NameUnknown | C::NotFound)),
                _ => false,
            },
            _ => false,
        }
    }

    /// Whether the registry could not be reached or failed on its side (a
    /// connection refused or timed out, a 5xx, a pull past its bound),
    /// rather than answered: then nothing was said about who may pull what.
    pub fn is_unreachable(&self) -> bool {
        use oci_client::errors::OciDistributionError as E;
        match self {
            Self::Deadline { .. } => true,
            Self::Registry { source, .. } => match source.as_ref() {
                E::RequestError(error) => error.is_connect() || error.is_timeout(),
                E::ServerError { code, .. } => *code >= 500,
                _ => false,
            },
            _ => false,
        }
    }
}

/// An error and its causes, `: `-separated (the client's own message
/// alone says only which request failed, not why).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}
