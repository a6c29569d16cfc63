//! What makes the server a cluster clients trust: a generated CA, a serving
//! certificate for the listen address, a bearer token, and the kubeconfig
//! that carries them.

use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::store::private::{create_private_dir, write_private};

/// Why credentials could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("failed to generate a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("failed to configure TLS: {0}")]
    Config(#[from] rustls::Error),
    /// Saved credentials could not be read or written.
    #[error("failed to keep credentials: {0}")]
    Store(String),
}

/// A CA, a serving certificate signed by it, and a bearer token.
#[derive(Clone)]
pub struct Credentials {
    ca_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
    token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

impl Credentials {
    /// Fresh credentials for a server reachable at `ip` (and `localhost`).
    ///
    /// # Errors
    /// [`TlsError::Certificate`] if generation fails.
    pub fn generate(ip: IpAddr) -> Result<Self, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name
            .push(DnType::CommonName, "kubewasm-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.subject_alt_names.push(SanType::IpAddress(ip));
        let cert = serving.signed_by(&key, &issuer)?;
        let token =
            uuid::Uuid::new_v4().simple().to_string() + &uuid::Uuid::new_v4().simple().to_string();
        Ok(Self {
            ca_pem: ca_cert.pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
            token,
        })
    }

    /// The credentials kept in `dir` (`credentials.json`), or fresh ones
    /// saved there (owner-only permissions), so a restarted server keeps its
    /// CA and token and its clients keep working.
    ///
    /// # Errors
    /// [`TlsError`] if generation fails or the file cannot be read or written.
    pub fn load_or_generate(dir: &std::path::Path, ip: IpAddr) -> Result<Self, TlsError> {
        use base64::engine::general_purpose::STANDARD;
        let path = dir.join("credentials.json");
        let io = |e: std::io::Error| TlsError::Store(format!("{}: {e}", path.display()));
        if path.is_file() {
            let text = std::fs::read_to_string(&path).map_err(io)?;
            let saved: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| TlsError::Store(format!("{}: {e}", path.display())))?;
            let field = |f: &str| {
                saved
                    .get(f)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let decode = |f: &str| {
                STANDARD
                    .decode(field(f))
                    .map_err(|e| TlsError::Store(format!("{}: {f}: {e}", path.display())))
            };
            let token = field("token");
            if token.trim().is_empty() {
                return Err(TlsError::Store(format!(
                    "{}: the bearer token is missing or empty",
                    path.display()
                )));
            }
            return Ok(Self {
                ca_pem: field("caPem"),
                cert_der: CertificateDer::from(decode("certDer")?),
                key_der: decode("keyDer")?,
                token,
            });
        }
        let fresh = Self::generate(ip)?;
        let saved = serde_json::json!({
            "caPem": fresh.ca_pem,
            "certDer": STANDARD.encode(fresh.cert_der.as_ref()),
            "keyDer": STANDARD.encode(&fresh.key_der),
            "token": fresh.token,
        });
        create_private_dir(dir).map_err(io)?;
        write_private(&path, saved.to_string().as_bytes()).map_err(io)?;
        Ok(fresh)
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The rustls server configuration (HTTP/2 and HTTP/1.1).
    ///
    /// # Errors
    /// [`TlsError::Config`] if rustls refuses the key.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert_der.clone()], key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A kubeconfig for `server` (an `https://` URL), context namespace `default`.
    pub fn kubeconfig(&self, server: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubewasm\n  cluster:\n    server: {server}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: kubewasm\n  user:\n    token: {token}\ncontexts:\n\
             - name: kubewasm\n  context:\n    cluster: kubewasm\n    user: kubewasm\n    namespace: default\n\
             current-context: kubewasm\n",
            token = self.token
        )
    }
}
