//! The endpoints' TLS when metrics are served securely: the certificate
//! and key of a directory (`tls.crt` and `tls.key`, PEM, as a Secret of
//! type `kubernetes.io/tls` is mounted; controller-runtime's `CertDir`),
//! else a self-signed certificate made at start, as controller-runtime
//! makes one (a scraper then skips verification, or trusts a
//! certificate it was given by mounting one).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why the endpoints' TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or held nothing usable.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The self-signed certificate could not be made.
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate and key.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A server configuration from `dir`'s `tls.crt` and `tls.key`, or a
/// self-signed certificate for `localhost` and the host's name.
///
/// # Errors
/// [`TlsError`] if the files cannot be read or used, or generation fails.
pub fn server_config(dir: Option<&Path>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (certs, key) = match dir {
        Some(dir) => read(dir)?,
        None => self_signed()?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn read(dir: &Path) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    let pem = |path: &Path, message: String| TlsError::Pem {
        path: path.to_owned(),
        message,
    };
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| pem(&cert_path, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(&cert_path, e.to_string()))?;
    if certs.is_empty() {
        return Err(pem(&cert_path, "no certificate".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| pem(&key_path, e.to_string()))?;
    Ok((certs, key))
}

fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let mut names = vec!["localhost".to_owned()];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() && host != "localhost" {
            names.push(host.to_owned());
        }
    }
    let certified = rcgen::generate_simple_self_signed(names)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    Ok((vec![certified.cert.der().clone()], key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_with_a_certificate_and_key_should_configure_tls_and_one_without_should_say_which_file()
     {
        let dir = tempfile::tempdir().expect("tempdir");
        let certified =
            rcgen::generate_simple_self_signed(vec!["metrics.example".to_owned()]).expect("cert");
        std::fs::write(dir.path().join("tls.crt"), certified.cert.pem()).expect("written");
        std::fs::write(
            dir.path().join("tls.key"),
            certified.signing_key.serialize_pem(),
        )
        .expect("written");
        assert!(server_config(Some(dir.path())).is_ok());
        std::fs::write(dir.path().join("tls.key"), "not a key").expect("written");
        let error = server_config(Some(dir.path())).expect_err("no key");
        assert!(
            matches!(&error, TlsError::Pem { path, .. } if path.ends_with("tls.key")),
            "{error}"
        );
        let empty = tempfile::tempdir().expect("tempdir");
        let error = server_config(Some(empty.path())).expect_err("no files");
        assert!(
            matches!(&error, TlsError::Pem { path, .. } if path.ends_with("tls.crt")),
            "{error}"
        );
        assert!(server_config(None).is_ok(), "self-signed");
    }
}
