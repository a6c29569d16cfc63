//! The endpoints' TLS when metrics are served securely: the certificate
//! and key of a directory (`tls.crt` and `tls.key`, PEM, as a Secret of
//! type `kubernetes.io/tls` is mounted; controller-runtime's `CertDir`),
//! else a self-signed certificate made at start, as controller-runtime
//! makes one (a scraper then skips verification, or trusts a
//! certificate it was given by mounting one).
//!
//! # Rotation
//! A directory's files are read again when they change, as
//! controller-runtime's certificate watcher does: a handshake at least
//! [`RECHECK`] after the last look checks each file's inode, length and
//! modification time (a mounted Secret is updated by swapping a symlink,
//! cert-manager renews before expiry), and a changed pair is served from
//! then on. A pair that does not load (a key written before its
//! certificate, a file half written) leaves the one served in place, with
//! a warning, and is tried again at the next look: a rotation never takes
//! the endpoints down.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How long a directory's files are trusted unchanged between looks.
pub const RECHECK: Duration = Duration::from_secs(1);

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

/// A server configuration serving `dir`'s `tls.crt` and `tls.key` (read
/// again when they change, see the module documentation), or a
/// self-signed certificate for `localhost` and the host's name.
///
/// # Errors
/// [`TlsError`] if the files cannot be read or used, or generation fails.
pub fn server_config(dir: Option<&Path>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    configured(dir, RECHECK)
}

fn configured(
    dir: Option<&Path>,
    recheck: Duration,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth();
    let mut config = match dir {
        Some(dir) => builder.with_cert_resolver(Arc::new(Reloading::new(dir, provider, recheck)?)),
        None => {
            let (certs, key) = self_signed()?;
            builder.with_single_cert(certs, key)?
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// What identifies a file's content without reading it: its inode,
/// length and modification time (none if it cannot be read).
type Stamp = Option<(u64, u64, std::time::SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.ino(), metadata.len(), metadata.modified().ok()?))
}

/// A directory's certificate and key, read again when they change.
#[derive(Debug)]
struct Reloading {
    dir: PathBuf,
    provider: Arc<CryptoProvider>,
    recheck: Duration,
    held: Mutex<Held>,
}

/// The pair served, the files' stamps it was read from, and when they
/// were last looked at.
#[derive(Debug)]
struct Held {
    served: Arc<CertifiedKey>,
    stamps: [Stamp; 2],
    looked: Instant,
}

impl Reloading {
    fn new(dir: &Path, provider: Arc<CryptoProvider>, recheck: Duration) -> Result<Self, TlsError> {
        let stamps = Self::stamps(dir);
        let served = Arc::new(certified(dir, &provider)?);
        Ok(Self {
            dir: dir.to_owned(),
            provider,
            recheck,
            held: Mutex::new(Held {
                served,
                stamps,
                looked: Instant::now(),
            }),
        })
    }

    fn stamps(dir: &Path) -> [Stamp; 2] {
        [stamp(&dir.join("tls.crt")), stamp(&dir.join("tls.key"))]
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.looked.elapsed() >= self.recheck {
            held.looked = Instant::now();
            let stamps = Self::stamps(&self.dir);
            if stamps != held.stamps {
                match certified(&self.dir, &self.provider) {
                    Ok(pair) => {
                        tracing::info!(dir = %self.dir.display(), "metrics certificate changed: serving the new one");
                        held.served = Arc::new(pair);
                        held.stamps = stamps;
                    }
                    Err(error) => tracing::warn!(
                        dir = %self.dir.display(), %error,
                        "metrics certificate changed but does not load: the one served is kept"
                    ),
                }
            }
        }
        Some(Arc::clone(&held.served))
    }
}

/// `dir`'s pair, its key checked against its certificate.
fn certified(dir: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let (certs, key) = read(dir)?;
    Ok(CertifiedKey::from_der(certs, key, provider)?)
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

    /// A certificate for `localhost` and its key, as PEM.
    fn pair() -> (String, String) {
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        (certified.cert.pem(), certified.signing_key.serialize_pem())
    }

    /// Writes `text` to `dir/name` as a mounted Secret is updated: a new
    /// file renamed over the old.
    fn put(dir: &Path, name: &str, text: &str) {
        let fresh = dir.join(format!(".{name}.new"));
        std::fs::write(&fresh, text).expect("written");
        std::fs::rename(&fresh, dir.join(name)).expect("renamed");
    }

    /// Whether a client trusting only `trusted` (PEM) completes a
    /// handshake with a server of `config`, over loopback.
    async fn trusts(config: &Arc<rustls::ServerConfig>, trusted: &str) -> bool {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bound");
        let addr = listener.local_addr().expect("address");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(config));
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accepted");
            let _ = acceptor.accept(stream).await;
        });
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(trusted.as_bytes()).expect("PEM"))
            .expect("a root");
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connected");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
        let shaken = tokio_rustls::TlsConnector::from(Arc::new(client))
            .connect(name, stream)
            .await
            .is_ok();
        server.abort();
        shaken
    }

    #[tokio::test]
    async fn a_rotated_pair_should_be_served_from_the_next_look_and_a_broken_one_never() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (old, new) = (pair(), pair());
        put(dir.path(), "tls.crt", &old.0);
        put(dir.path(), "tls.key", &old.1);
        let config = configured(Some(dir.path()), Duration::ZERO).expect("configured");
        assert!(trusts(&config, &old.0).await, "the directory's pair served");
        assert!(!trusts(&config, &new.0).await);
        // The new key before its certificate: a pair that does not match
        // keeps the old one served.
        put(dir.path(), "tls.key", &new.1);
        assert!(trusts(&config, &old.0).await, "the old pair kept");
        put(dir.path(), "tls.crt", "-----BEGIN CERTIFICATE-----\nhalf");
        assert!(trusts(&config, &old.0).await, "the old pair kept");
        put(dir.path(), "tls.crt", &new.0);
        assert!(trusts(&config, &new.0).await, "the new pair served");
        assert!(!trusts(&config, &old.0).await, "the old one no longer");
        // Files gone: the last pair stays.
        std::fs::remove_file(dir.path().join("tls.crt")).expect("removed");
        assert!(trusts(&config, &new.0).await);
    }

    #[test]
    fn a_directory_with_a_certificate_and_key_should_configure_tls_and_one_without_should_say_which_file()
     {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = pair();
        std::fs::write(dir.path().join("tls.crt"), cert).expect("written");
        std::fs::write(dir.path().join("tls.key"), key).expect("written");
        assert!(server_config(Some(dir.path())).is_ok());
        std::fs::write(dir.path().join("tls.key"), "not a key").expect("written");
        let error = server_config(Some(dir.path())).expect_err("no key");
        assert!(
            matches!(&error, TlsError::Pem { path, .. } if path.ends_with("tls.key")),
            "{error}"
        );
        let (_, other) = pair();
        std::fs::write(dir.path().join("tls.key"), other).expect("written");
        let error = server_config(Some(dir.path())).expect_err("another pair's key");
        assert!(matches!(&error, TlsError::Config(_)), "{error}");
        let empty = tempfile::tempdir().expect("tempdir");
        let error = server_config(Some(empty.path())).expect_err("no files");
        assert!(
            matches!(&error, TlsError::Pem { path, .. } if path.ends_with("tls.crt")),
            "{error}"
        );
        assert!(server_config(None).is_ok(), "self-signed");
    }
}
