//! Registry credentials from a docker config file: the one
//! `--docker-config` names, `$DOCKER_CONFIG/config.json` or
//! `~/.docker/config.json`, or a Kubernetes pull secret's
//! `.dockerconfigjson`.
//!
//! # Rules (as docker and oras read the file)
//! - A registry is named by its host: an `auths` key's scheme and path are
//!   dropped (`https://index.docker.io/v1/` is `index.docker.io`), and
//!   Docker Hub's names (`docker.io`, `index.docker.io`,
//!   `registry-1.docker.io`) are one registry.
//! - A registry in `credHelpers` is asked of its helper; any other of the
//!   `credsStore` helper if one is set; then the `auths` entry, if any.
//! - A helper is the program `docker-credential-<name>` on `PATH`, run as
//!   `get` with the registry's server URL on its standard input (Docker
//!   Hub's is `https://index.docker.io/v1/`); it answers
//!   `{"Username", "Secret"}`, or fails saying `credentials not found in
//!   native keychain` (the protocol's answer for none). It is asked when a
//!   registry is used, not when the file is read.
//! - An identity token (`Username` `<token>`, or an `auths` entry's
//!   `identitytoken`) is an OAuth2 refresh token the registry client cannot
//!   exchange: a clear error, not an anonymous pull.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use serde_json::Value;

use super::error::OciError;

/// Docker Hub's host, as registry references resolve it.
const DOCKER_HUB: &str = "index.docker.io";

/// The server URL a helper is asked for Docker Hub by (docker's).
const DOCKER_HUB_SERVER: &str = "https://index.docker.io/v1/";

/// What a helper answers when it holds nothing for the server.
const NOT_FOUND: &str = "credentials not found in native keychain";

/// How long a helper may take to answer.
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// Credentials by registry, from a docker config file (see the module
/// documentation).
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    basic: BTreeMap<String, (String, String)>,
    /// Registries whose `auths` entry is an identity token.
    tokens: BTreeSet<String>,
    /// `credHelpers`: a helper's name by registry.
    helpers: BTreeMap<String, String>,
    /// `credsStore`: the helper of every other registry.
    store: Option<String>,
    /// Where helpers are looked for (`None`: on `PATH`).
    helper_dir: Option<PathBuf>,
}

/// A registry's host, from a reference's registry or an `auths` key.
fn registry_host(name: &str) -> &str {
    let name = name
        .strip_prefix("https://")
        .or_else(|| name.strip_prefix("http://"))
        .unwrap_or(name);
    let host = name.split_once('/').map_or(name, |(host, _)| host);
    match host {
        "docker.io" | "registry-1.docker.io" => DOCKER_HUB,
        host => host,
    }
}

impl Credentials {
    /// The credentials of `path`, or of the default docker config file
    /// when `None` (none at all if it does not exist).
    ///
    /// # Errors
    /// [`OciError::Credentials`] if the file exists but is not a docker
    /// config.
    pub fn load(path: Option<&Path>) -> Result<Self, OciError> {
        let path = match path {
            Some(path) => path.to_owned(),
            None => match default_docker_config() {
                Some(path) if path.is_file() => path,
                _ => return Ok(Self::default()),
            },
        };
        let text = std::fs::read_to_string(&path).map_err(|e| OciError::Credentials {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Self::parse_config(&text).map_err(|reason| OciError::Credentials { path, reason })
    }

    /// Parses a Kubernetes pull secret's `.dockerconfigjson`: its `auths`
    /// only, as the kubelet reads it (a tenant's Secret never names a
    /// program the host runs).
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config = Self::parse_config(text)?;
        Ok(Self {
            helpers: BTreeMap::new(),
            store: None,
            ..config
        })
    }

    /// Parses a docker `config.json`: `auths` (`{"HOST": {"auth": base64
    /// of "user:password"}}`, or `username` and `password` fields),
    /// `credHelpers` and `credsStore`.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn parse_config(text: &str) -> Result<Self, String> {
        let config: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut credentials = Self::default();
        let auths = config.get("auths").and_then(Value::as_object);
        for (host, entry) in auths.into_iter().flatten() {
            let host = registry_host(host).to_owned();
            if entry.get("identitytoken").and_then(Value::as_str).is_some() {
                credentials.tokens.insert(host);
                continue;
            }
            let pair = match entry.get("auth").and_then(Value::as_str) {
                Some(encoded) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .map_err(|e| format!("`auth` of {host} is not base64: {e}"))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| format!("`auth` of {host} is not UTF-8"))?;
                    let (user, password) = text
                        .split_once(':')
                        .ok_or_else(|| format!("`auth` of {host} is not user:password"))?;
                    (user.to_owned(), password.to_owned())
                }
                // A placeholder the credentials store fills (docker
                // writes `{}` beside a `credsStore`).
                None if entry.as_object().is_some_and(serde_json::Map::is_empty) => continue,
                None => {
                    let field = |name: &str| {
                        entry
                            .get(name)
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .ok_or_else(|| format!("{host} has neither `auth` nor `{name}`"))
                    };
                    (field("username")?, field("password")?)
                }
            };
            credentials.basic.insert(host, pair);
        }
        let helpers = config.get("credHelpers").and_then(Value::as_object);
        for (host, helper) in helpers.into_iter().flatten() {
            let helper = helper
                .as_str()
                .ok_or_else(|| format!("the credential helper of {host} is not a string"))?;
            credentials
                .helpers
                .insert(registry_host(host).to_owned(), helper.to_owned());
        }
        credentials.store = match config.get("credsStore") {
            None | Some(Value::Null) => None,
            Some(Value::String(store)) if store.is_empty() => None,
            Some(Value::String(store)) => Some(store.clone()),
            Some(_) => return Err("`credsStore` is not a string".to_owned()),
        };
        Ok(credentials)
    }

    /// These credentials, with `first`'s taking precedence for the
    /// registries it names (and its `credsStore`, if it sets one).
    #[must_use]
    pub fn overridden_by(&self, first: &Self) -> Self {
        let mut merged = self.clone();
        merged.basic.extend(first.basic.clone());
        merged.tokens.extend(first.tokens.clone());
        merged.helpers.extend(first.helpers.clone());
        merged.store = first.store.clone().or(merged.store);
        merged
    }

    /// How to authenticate to `reference`'s registry (see the module
    /// documentation).
    ///
    /// # Errors
    /// [`OciError::CredentialHelper`] if its helper cannot be run or
    /// answers no credentials; [`OciError::IdentityToken`] if what it has
    /// is an identity token.
    pub(super) async fn auth(&self, reference: &Reference) -> Result<RegistryAuth, OciError> {
        let host = registry_host(reference.resolve_registry());
        let helper = self.helpers.get(host).or(self.store.as_ref());
        if let Some(helper) = helper
            && let Some((user, secret)) = self.ask(helper, host).await?
        {
            return Ok(RegistryAuth::Basic(user, secret));
        }
        if self.tokens.contains(host) {
            return Err(OciError::IdentityToken {
                registry: host.to_owned(),
            });
        }
        Ok(match self.basic.get(host) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        })
    }

    /// Asks `docker-credential-<helper>` for `host`'s credentials: `None`
    /// if it holds none.
    async fn ask(&self, helper: &str, host: &str) -> Result<Option<(String, String)>, OciError> {
        let failed = |reason: String| OciError::CredentialHelper {
            helper: helper.to_owned(),
            registry: host.to_owned(),
            reason,
        };
        let program = format!("docker-credential-{helper}");
        let program = match &self.helper_dir {
            Some(dir) => dir.join(program),
            None => PathBuf::from(program),
        };
        let server = if host == DOCKER_HUB {
            DOCKER_HUB_SERVER
        } else {
            host
        };
        let mut child = tokio::process::Command::new(&program)
            .arg("get")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("cannot run {}: {e}", program.display())))?;
        if let Some(mut stdin) = child.stdin.take() {
            use tokio::io::AsyncWriteExt as _;
            // A helper that answers without reading (one that holds
            // nothing) may be gone already: its answer decides.
            match stdin.write_all(server.as_bytes()).await {
                Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(failed(format!("cannot write to it: {error}")));
                }
                _ => {}
            }
        }
        let output = tokio::time::timeout(HELPER_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| failed(format!("no answer within {HELPER_TIMEOUT:?}")))?
            .map_err(|e| failed(e.to_string()))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            if stdout.trim() == NOT_FOUND {
                return Ok(None);
            }
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(failed(format!(
                "{}: {}",
                output.status,
                [stdout.trim(), stderr.trim()].join(" ").trim()
            )));
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Answer {
            username: String,
            secret: String,
        }
        let answer: Answer = serde_json::from_str(&stdout)
            .map_err(|e| failed(format!("its answer is not credentials: {e}")))?;
        if answer.username == "<token>" {
            return Err(OciError::IdentityToken {
                registry: host.to_owned(),
            });
        }
        Ok(Some((answer.username, answer.secret)))
    }
}

fn default_docker_config() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => Some(PathBuf::from(dir).join("config.json")),
        None => {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker/config.json"))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::oci::parse_reference;

    async fn auth(credentials: &Credentials, reference: &str) -> Result<RegistryAuth, OciError> {
        credentials
            .auth(&parse_reference(reference).expect("reference"))
            .await
    }

    fn basic(auth: Result<RegistryAuth, OciError>) -> Option<(String, String)> {
        match auth {
            Ok(RegistryAuth::Basic(user, password)) => Some((user, password)),
            _ => None,
        }
    }

    fn pair(user: &str, password: &str) -> Option<(String, String)> {
        Some((user.to_owned(), password.to_owned()))
    }

    #[tokio::test]
    async fn credentials_should_come_from_auth_or_username_and_password() {
        let encoded = base64::engine::general_purpose::STANDARD.encode("robot:s3cret");
        let config = format!(
            r#"{{"auths": {{"https://registry.example:5000/": {{"auth": "{encoded}"}},
                "other.example": {{"username": "u", "password": "p"}}}}}}"#
        );
        let credentials = Credentials::parse(&config).expect("parses");
        assert_eq!(
            basic(auth(&credentials, "registry.example:5000/a/b:1").await),
            pair("robot", "s3cret")
        );
        assert_eq!(
            basic(auth(&credentials, "oci://other.example/x:1").await),
            pair("u", "p")
        );
        assert!(matches!(
            auth(&credentials, "third.example/x:1").await,
            Ok(RegistryAuth::Anonymous)
        ));
        assert!(Credentials::parse(r#"{"auths": {"h": {"auth": "bm9jb2xvbg=="}}}"#).is_err());
        assert!(Credentials::parse("not json").is_err());
        assert!(Credentials::parse_config(r#"{"credsStore": 3}"#).is_err());
    }

    #[tokio::test]
    async fn docker_hubs_key_should_match_its_every_name() {
        // What `docker login` writes for Docker Hub.
        let encoded = base64::engine::general_purpose::STANDARD.encode("hubber:pw");
        let config =
            format!(r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{encoded}"}}}}}}"#);
        let credentials = Credentials::parse(&config).expect("parses");
        for reference in [
            "docker.io/acme/plugin:1",
            "index.docker.io/acme/plugin:1",
            "registry-1.docker.io/acme/plugin:1",
            "acme/plugin:1",
        ] {
            assert_eq!(
                basic(auth(&credentials, reference).await),
                pair("hubber", "pw"),
                "{reference}"
            );
        }
        // A path after the host is no part of the registry's name.
        let config =
            r#"{"auths": {"https://registry.example/v2/": {"username": "u", "password": "p"}}}"#;
        let credentials = Credentials::parse(config).expect("parses");
        assert_eq!(
            basic(auth(&credentials, "registry.example/x:1").await),
            pair("u", "p")
        );
    }

    /// A directory of helpers: `docker-credential-NAME` for each script.
    fn helpers(scripts: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, body) in scripts {
            let path = dir.path().join(format!("docker-credential-{name}"));
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("written");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("mode");
        }
        dir
    }

    #[tokio::test]
    async fn helpers_should_be_asked_per_registry_then_the_store_then_auths() {
        // Each helper answers with its own name as the user and the
        // server URL it was asked for as the secret.
        let answer = |name: &str| {
            format!(
                r#"read server; printf '{{"ServerURL":"%s","Username":"{name}","Secret":"%s"}}' "$server" "$server""#
            )
        };
        let dir = helpers(&[
            ("pass", &answer("pass")),
            ("store", &answer("store")),
            (
                "none",
                "echo 'credentials not found in native keychain'; exit 1",
            ),
            ("broken", "echo 'the keychain is locked' >&2; exit 2"),
            ("garbage", "echo 'not json'"),
            (
                "token",
                r#"printf '{"ServerURL":"x","Username":"<token>","Secret":"t"}'"#,
            ),
        ]);
        let config = r#"{
            "auths": {"empty.example": {}, "filed.example": {"username": "f", "password": "p"}},
            "credHelpers": {"helped.example": "pass", "https://index.docker.io/v1/": "pass",
                "filed.example": "none", "broken.example": "broken",
                "garbage.example": "garbage", "token.example": "token"},
            "credsStore": "store"}"#;
        // A pull secret names no helper the host runs.
        let mut secret = Credentials::parse(config).expect("parses");
        secret.helper_dir = Some(dir.path().to_owned());
        assert!(matches!(
            auth(&secret, "helped.example/x:1").await,
            Ok(RegistryAuth::Anonymous)
        ));
        let mut credentials = Credentials::parse_config(config).expect("parses");
        credentials.helper_dir = Some(dir.path().to_owned());
        for (reference, answer) in [
            ("helped.example/x:1", pair("pass", "helped.example")),
            // Docker Hub's helper is asked by docker's server URL.
            (
                "docker.io/acme/x:1",
                pair("pass", "https://index.docker.io/v1/"),
            ),
            // Any other registry: the store (the `{}` of `auths` is its
            // placeholder).
            ("empty.example/x:1", pair("store", "empty.example")),
            (
                "elsewhere.example:5000/x:1",
                pair("store", "elsewhere.example:5000"),
            ),
            // A helper that holds none: the file's entry.
            ("filed.example/x:1", pair("f", "p")),
        ] {
            assert_eq!(
                basic(auth(&credentials, reference).await),
                answer,
                "{reference}"
            );
        }
        // Failures are told, never taken for anonymous access.
        for (registry, helper) in [("broken.example", "broken"), ("garbage.example", "garbage")] {
            match auth(&credentials, &format!("{registry}/x:1")).await {
                Err(OciError::CredentialHelper {
                    helper: told,
                    registry: asked,
                    reason,
                }) => {
                    assert_eq!((told.as_str(), asked.as_str()), (helper, registry));
                    assert!(!reason.is_empty());
                }
                other => panic!("{registry}: {other:?}"),
            }
        }
        assert!(matches!(
            auth(&credentials, "token.example/x:1").await,
            Err(OciError::IdentityToken { registry }) if registry == "token.example"
        ));
        // A helper that is not installed.
        credentials.helper_dir = Some(dir.path().join("missing"));
        assert!(matches!(
            auth(&credentials, "helped.example/x:1").await,
            Err(OciError::CredentialHelper { .. })
        ));
    }

    #[tokio::test]
    async fn an_identity_token_should_be_refused_clearly() {
        let config = r#"{"auths": {"acr.example": {"auth": "", "identitytoken": "refresh"}}}"#;
        let credentials = Credentials::parse(config).expect("parses");
        assert!(matches!(
            auth(&credentials, "acr.example/x:1").await,
            Err(OciError::IdentityToken { .. })
        ));
    }
}
