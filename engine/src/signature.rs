//! Signed plugins, in cosign's layout: a plugin artifact's signature is the
//! artifact tagged `sha256-<digest>.sig` in its repository, whose layers
//! (`application/vnd.dev.cosign.simplesigning.v1+json`) each hold a
//! simple-signing payload naming the signed manifest digest, signed with
//! ECDSA P-256 over SHA-256 (the signature in the layer's
//! `dev.cosignproject.cosign/signature` annotation, base64 of its DER).
//! `cosign sign --key` writes that, `cosign verify --key` reads it, and so
//! do [`sign`] and [`verify`].
//!
//! Keys are PEM: public keys as cosign writes `cosign.pub` (`PUBLIC KEY`,
//! PKIX), private keys as PKCS#8 (`PRIVATE KEY`) or SEC1 (`EC PRIVATE
//! KEY`), as `openssl` writes them (cosign's own encrypted private keys
//! are not read: `cosign import-key-pair` makes one from these).
//!
//! # Guarantees
//! - A signature is checked against the manifest **digest**, never a tag:
//!   the payload must name exactly the digest the host is about to run.
//! - A signature counts only if it verifies with one of the keys given,
//!   over the payload's exact bytes (fetched by digest, so tampering with
//!   a payload shows as a signature that does not verify).
//! - Signature artifacts are bounded: at most [`MAX_SIGNATURES`] layers of
//!   at most [`MAX_PAYLOAD_BYTES`] each are read.

use base64::Engine as _;
use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{DerSignature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey};
use serde_json::{Value, json};

use crate::oci::{self, Access, OciError};

/// The media type of a signature layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation of a signature layer holding the signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The type a simple-signing payload names.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The largest payload read.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 10;
/// The most signature layers read.
pub const MAX_SIGNATURES: usize = 16;
/// The config of a signature artifact.
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// Why a plugin's signature was not accepted, or could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// A key is not one.
    #[error("key {origin}: {reason}")]
    Key {
        /// Where it came from.
        origin: String,
        /// Why it is refused.
        reason: String,
    },
    /// No signature artifact for the digest.
    #[error("{digest} is not signed (no {tag} in {repository})")]
    Unsigned {
        /// The digest.
        digest: String,
        /// The signature tag looked for.
        tag: String,
        /// The repository.
        repository: String,
    },
    /// Signatures exist, none verifies with the keys given.
    #[error("no signature of {digest} verifies with the keys given ({found}; keys: {keys})")]
    NotVerified {
        /// The digest.
        digest: String,
        /// What was found, signature by signature.
        found: String,
        /// The keys tried.
        keys: String,
    },
    /// The registry failed or refused.
    #[error(transparent)]
    Oci(#[from] OciError),
}

impl SignatureError {
    fn key(origin: &str, reason: impl std::fmt::Display) -> Self {
        Self::Key {
            origin: origin.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// Public keys a signature may verify with, each with where it came from.
#[derive(Clone, Debug, Default)]
pub struct PublicKeys(Vec<(String, VerifyingKey)>);

impl PublicKeys {
    /// Adds every `PUBLIC KEY` of the PEM text `pem` (from `origin`).
    ///
    /// # Errors
    /// [`SignatureError::Key`] when it holds none, or one that is no ECDSA
    /// P-256 key.
    pub fn add_pem(&mut self, origin: &str, pem: &str) -> Result<(), SignatureError> {
        let mut added = 0;
        for block in pem_blocks(pem) {
            let key = VerifyingKey::from_public_key_pem(&block).map_err(|e| {
                SignatureError::key(origin, format!("not an ECDSA P-256 public key: {e}"))
            })?;
            self.0.push((origin.to_owned(), key));
            added += 1;
        }
        if added == 0 {
            return Err(SignatureError::key(origin, "no `PUBLIC KEY` PEM block"));
        }
        Ok(())
    }

    /// Whether no key is held (nothing to check).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These keys and `more`.
    #[must_use]
    pub fn with(&self, more: &Self) -> Self {
        Self(self.0.iter().chain(&more.0).cloned().collect())
    }

    fn names(&self) -> String {
        self.0
            .iter()
            .map(|(origin, _)| origin.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Each `-----BEGIN PUBLIC KEY-----` block of `text`, whole.
fn pem_blocks(text: &str) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN PUBLIC KEY-----";
    const END: &str = "-----END PUBLIC KEY-----";
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let Some(length) = rest[start..].find(END) else {
            break;
        };
        let end = start + length + END.len();
        blocks.push(format!("{}\n", &rest[start..end]));
        rest = &rest[end..];
    }
    blocks
}

/// A private key to sign with.
#[derive(Clone, Debug)]
pub struct PrivateKey(SigningKey);

impl PrivateKey {
    /// The key of the PEM text `pem` (from `origin`): PKCS#8 or SEC1.
    ///
    /// # Errors
    /// [`SignatureError::Key`] when it is neither, or no P-256 key.
    pub fn from_pem(origin: &str, pem: &str) -> Result<Self, SignatureError> {
        let key = if pem.contains("-----BEGIN EC PRIVATE KEY-----") {
            use p256::elliptic_curve::SecretKey;
            SecretKey::<p256::NistP256>::from_sec1_pem(pem)
                .map(SigningKey::from)
                .map_err(|e| SignatureError::key(origin, e))?
        } else if pem.contains("ENCRYPTED") {
            return Err(SignatureError::key(
                origin,
                "an encrypted key: give it unencrypted (PKCS#8 or SEC1 PEM)",
            ));
        } else {
            SigningKey::from_pkcs8_pem(pem).map_err(|e| {
                SignatureError::key(origin, format!("not an ECDSA P-256 PKCS#8 key: {e}"))
            })?
        };
        Ok(Self(key))
    }

    /// Its public key, PEM (as `cosign.pub`).
    ///
    /// # Errors
    /// [`SignatureError::Key`] if it cannot be encoded (never for P-256).
    pub fn public_pem(&self) -> Result<String, SignatureError> {
        use p256::pkcs8::EncodePublicKey;
        self.0
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .map_err(|e| SignatureError::key("public key", e))
    }
}

/// The tag of `digest`'s signature artifact: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replace(':', "-"))
}

/// The simple-signing payload for `digest` in `reference`'s repository.
fn payload(reference: &Reference, digest: &str) -> Vec<u8> {
    let identity = format!("{}/{}", reference.registry(), reference.repository());
    let payload = json!({
        "critical": {
            "identity": {"docker-reference": identity},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    });
    // A JSON value always serializes.
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// The signature artifact's reference for `digest`.
fn signature_reference(reference: &Reference, digest: &str) -> Reference {
    Reference::with_tag(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        signature_tag(digest),
    )
}

/// Signs `digest` (a manifest in `reference`'s repository) with `key` and
/// pushes the signature artifact; returns its tag.
///
/// # Errors
/// [`SignatureError::Oci`] when the registry refuses it.
pub async fn sign(
    reference: &Reference,
    digest: &str,
    key: &PrivateKey,
    access: &Access,
) -> Result<String, SignatureError> {
    let payload = payload(reference, digest);
    let signature: DerSignature = key.0.sign(&payload);
    let encoded = base64::engine::general_purpose::STANDARD.encode(signature.as_bytes());
    let payload_digest = oci::digest_of(&payload);
    let config = json!({
        "architecture": "", "os": "", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [payload_digest]},
    });
    let config = serde_json::to_vec(&config).unwrap_or_default();
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(oci::MANIFEST_MEDIA_TYPE.to_owned()),
        config: OciDescriptor {
            media_type: CONFIG_MEDIA_TYPE.to_owned(),
            digest: oci::digest_of(&config),
            size: i64::try_from(config.len()).unwrap_or(i64::MAX),
            ..OciDescriptor::default()
        },
        layers: vec![OciDescriptor {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
            digest: payload_digest.clone(),
            size: i64::try_from(payload.len()).unwrap_or(i64::MAX),
            annotations: Some([(SIGNATURE_ANNOTATION.to_owned(), encoded)].into()),
            ..OciDescriptor::default()
        }],
        ..OciImageManifest::default()
    };
    let target = signature_reference(reference, digest);
    oci::push_manifest(
        &target,
        &manifest,
        vec![
            (payload.into(), payload_digest),
            (config.into(), manifest.config.digest.clone()),
        ],
        access,
    )
    .await?;
    Ok(signature_tag(digest))
}

/// Checks that `digest` (a manifest in `reference`'s repository) carries a
/// signature that verifies with one of `keys` (see the module
/// documentation).
///
/// # Errors
/// [`SignatureError::Unsigned`], [`SignatureError::NotVerified`] (saying
/// what each signature found was), [`SignatureError::Oci`].
pub async fn verify(
    reference: &Reference,
    digest: &str,
    keys: &PublicKeys,
    access: &Access,
) -> Result<(), SignatureError> {
    let target = signature_reference(reference, digest);
    let unsigned = || SignatureError::Unsigned {
        digest: digest.to_owned(),
        tag: signature_tag(digest),
        repository: format!("{}/{}", reference.registry(), reference.repository()),
    };
    let manifest = match oci::fetch_manifest(&target, access).await {
        Ok(manifest) => manifest,
        Err(error) if error.is_not_found() => return Err(unsigned()),
        Err(error) => return Err(error.into()),
    };
    let layers: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
        .take(MAX_SIGNATURES)
        .collect();
    if layers.is_empty() {
        return Err(unsigned());
    }
    let mut found = Vec::new();
    for layer in layers {
        let payload = oci::fetch_blob(&target, layer, MAX_PAYLOAD_BYTES, access).await?;
        match check(&payload, layer, digest, keys) {
            Ok(()) => return Ok(()),
            Err(why) => found.push(why),
        }
    }
    Err(SignatureError::NotVerified {
        digest: digest.to_owned(),
        found: found.join("; "),
        keys: keys.names(),
    })
}

/// Whether one signature layer, its payload fetched, signs `digest` with
/// one of `keys`; else what is wrong with it (what a registry sends for a
/// signature is read here).
///
/// # Errors
/// What is wrong with the signature, its payload or what it names.
pub fn check(
    payload: &[u8],
    layer: &OciDescriptor,
    digest: &str,
    keys: &PublicKeys,
) -> Result<(), String> {
    let encoded = layer
        .annotations
        .as_ref()
        .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        .ok_or("a layer without a signature annotation")?;
    let der = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| "a signature that is not base64")?;
    let signature =
        DerSignature::from_bytes(&der).map_err(|_| "a signature that is not ECDSA DER")?;
    if !keys
        .0
        .iter()
        .any(|(_, key)| key.verify(payload, &signature).is_ok())
    {
        return Err("a signature made by another key, or over another payload".to_owned());
    }
    let parsed: Value =
        serde_json::from_slice(payload).map_err(|_| "a payload that is not JSON")?;
    if parsed.pointer("/critical/type").and_then(Value::as_str) != Some(PAYLOAD_TYPE) {
        return Err("a payload of another type".to_owned());
    }
    match parsed
        .pointer("/critical/image/docker-manifest-digest")
        .and_then(Value::as_str)
    {
        Some(signed) if signed == digest => Ok(()),
        Some(signed) => Err(format!("a signature of another digest ({signed})")),
        None => Err("a payload naming no digest".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::pkcs8::EncodePrivateKey;

    /// A key made from `seed` (tests need no randomness).
    pub(crate) fn key(seed: u8) -> PrivateKey {
        let bytes = sha2::Digest::finalize(sha2::Digest::chain_update(
            <sha2::Sha256 as sha2::Digest>::new(),
            [seed],
        ));
        PrivateKey(SigningKey::from_bytes(&bytes).expect("a valid scalar"))
    }

    fn layer(payload: &[u8], signature: &[u8]) -> OciDescriptor {
        let encoded = base64::engine::general_purpose::STANDARD.encode(signature);
        OciDescriptor {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
            digest: oci::digest_of(payload),
            annotations: Some([(SIGNATURE_ANNOTATION.to_owned(), encoded)].into()),
            ..OciDescriptor::default()
        }
    }

    fn keys_of(key: &PrivateKey) -> PublicKeys {
        let mut keys = PublicKeys::default();
        keys.add_pem("test.pub", &key.public_pem().expect("pem"))
            .expect("a key");
        keys
    }

    #[test]
    fn a_signature_should_verify_with_its_key_for_its_digest_only() {
        let reference = oci::parse_reference("127.0.0.1:5000/plugins/p:1").expect("reference");
        let digest = format!("sha256:{}", "a".repeat(64));
        let signer = key(1);
        let payload = payload(&reference, &digest);
        let signature: DerSignature = signer.0.sign(&payload);
        let good = layer(&payload, signature.as_bytes());
        assert_eq!(check(&payload, &good, &digest, &keys_of(&signer)), Ok(()));
        let other = format!("sha256:{}", "b".repeat(64));
        assert!(
            check(&payload, &good, &other, &keys_of(&signer))
                .is_err_and(|e| e.contains("another digest"))
        );
        assert!(
            check(&payload, &good, &digest, &keys_of(&key(2)))
                .is_err_and(|e| e.contains("another key"))
        );
        let mut tampered = payload.clone();
        tampered.extend_from_slice(b" ");
        assert!(check(&tampered, &good, &digest, &keys_of(&signer)).is_err());
        assert!(
            check(
                &payload,
                &layer(&payload, b"junk"),
                &digest,
                &keys_of(&signer)
            )
            .is_err_and(|e| e.contains("DER"))
        );
    }

    #[test]
    fn keys_should_read_as_cosign_and_openssl_write_them() {
        let signer = key(3);
        let pkcs8 = signer
            .0
            .to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
            .expect("pkcs8");
        assert!(PrivateKey::from_pem("k", &pkcs8).is_ok());
        let sec1 = p256::SecretKey::from(signer.0.as_nonzero_scalar())
            .to_sec1_pem(p256::pkcs8::LineEnding::LF)
            .expect("sec1");
        assert!(PrivateKey::from_pem("k", &sec1).is_ok());
        let encrypted = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nxx\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        assert!(
            matches!(PrivateKey::from_pem("k", encrypted), Err(SignatureError::Key { reason, .. }) if reason.contains("encrypted"))
        );
        // Two public keys in one file, as a key ring.
        let ring = format!(
            "{}{}",
            key(4).public_pem().expect("pem"),
            key(5).public_pem().expect("pem")
        );
        let mut keys = PublicKeys::default();
        keys.add_pem("ring.pub", &ring).expect("two keys");
        assert_eq!(keys.0.len(), 2);
        assert!(PublicKeys::default().add_pem("none", "hello").is_err());
    }
}
