//! Registry credentials from a docker config file: the one
//! `--docker-config` names, `$DOCKER_CONFIG/config.json` or
//! `~/.docker/config.json`, or a Kubernetes pull secret's
//! `.dockerconfigjson`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use serde_json::Value;

use super::error::OciError;

/// Credentials by registry, from a docker config file.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    basic: BTreeMap<String, (String, String)>,
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
        Self::parse(&text).map_err(|reason| OciError::Credentials { path, reason })
    }

    /// Parses a docker config (`{"auths": {"HOST": {"auth": base64 of
    /// "user:password"}}}`, or `username` and `password` fields): a
    /// `config.json`, or a Kubernetes pull secret's `.dockerconfigjson`.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut basic = BTreeMap::new();
        let auths = config.get("auths").and_then(Value::as_object);
        for (host, entry) in auths.into_iter().flatten() {
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
            let host = host
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .trim_end_matches('/');
            basic.insert(host.to_owned(), pair);
        }
        Ok(Self { basic })
    }

    /// These credentials, with `first`'s taking precedence for the
    /// registries it names.
    #[must_use]
    pub fn overridden_by(&self, first: &Self) -> Self {
        let mut basic = self.basic.clone();
        basic.extend(first.basic.clone());
        Self { basic }
    }

    pub(super) fn auth(&self, reference: &Reference) -> RegistryAuth {
        match self.basic.get(reference.resolve_registry()) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
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
    use super::*;
    use crate::oci::parse_reference;

    #[test]
    fn credentials_should_come_from_auth_or_username_and_password() {
        let encoded = base64::engine::general_purpose::STANDARD.encode("robot:s3cret");
        let config = format!(
            r#"{{"auths": {{"https://registry.example:5000/": {{"auth": "{encoded}"}},
                "other.example": {{"username": "u", "password": "p"}}}}}}"#
        );
        let credentials = Credentials::parse(&config).expect("parses");
        let auth = |r: &str| credentials.auth(&parse_reference(r).expect("reference"));
        assert!(matches!(auth("registry.example:5000/a/b:1"),
            RegistryAuth::Basic(u, p) if u == "robot" && p == "s3cret"));
        assert!(matches!(auth("oci://other.example/x:1"), RegistryAuth::Basic(u, _) if u == "u"));
        assert!(matches!(auth("third.example/x:1"), RegistryAuth::Anonymous));
        assert!(Credentials::parse(r#"{"auths": {"h": {"auth": "bm9jb2xvbg=="}}}"#).is_err());
        assert!(Credentials::parse("not json").is_err());
    }
}
