//! Pushing to and pulling from a registry: the layout written and read,
//! every digest checked.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;
use sha2::{Digest, Sha256};

use kubewasm_runtime::Interfaces;

use super::credentials::Credentials;
use super::error::OciError;

/// The manifest's media type (OCI image manifest).
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker's v2 manifest, as older tools push signatures.
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// The CNCF Wasm config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The CNCF Wasm layer: a component, as is.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The older config (Kubewarden, proxy-wasm), accepted on pull.
pub const LEGACY_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";
/// The older layer, accepted on pull.
pub const LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// The manifest annotation holding the plugin's declaration as JSON.
pub const ANNOTATION_DECLARATION: &str = "dev.kubewasm.declaration";
/// Largest manifest read.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Largest layer fetched.
pub const MAX_LAYER_BYTES: u64 = kubewasm_runtime::MAX_COMPONENT_BYTES;

/// An artifact's reference: `[oci://]registry/repository[:tag][@digest]`.
pub fn parse_reference(text: &str) -> Result<Reference, OciError> {
    let bare = text.strip_prefix("oci://").unwrap_or(text);
    bare.parse().map_err(|source| OciError::Reference {
        reference: text.to_owned(),
        source,
    })
}

/// How long a registry may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// To accept a connection, and to send each part of an answer: a
    /// registry that accepts and says nothing is given up on after it.
    pub request: Duration,
    /// For a whole pull (the manifest, then the layer): a registry that
    /// answers a byte at a time is given up on after it.
    pub pull: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            request: Duration::from_secs(30),
            pull: Duration::from_secs(300),
        }
    }
}

/// How to reach registries: the protocol, the certificates trusted, the
/// credentials and how long a registry may take.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// Plain HTTP instead of HTTPS (a loopback registry, a test).
    pub plain_http: bool,
    /// Certificates (DER) trusted as roots for registries' TLS besides the
    /// system's: a private registry's CA.
    pub roots: Vec<Vec<u8>>,
    /// Credentials by registry host.
    pub credentials: Credentials,
    /// How long a registry may take.
    pub timeouts: Timeouts,
}

impl Access {
    fn client(&self) -> Client {
        // The TLS stack is built with ring only; a provider installed
        // already (by the process) is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client::new(ClientConfig {
            protocol: if self.plain_http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: self
                .roots
                .iter()
                .map(|der| Certificate {
                    encoding: CertificateEncoding::Der,
                    data: der.clone(),
                })
                .collect(),
            connect_timeout: Some(self.timeouts.request),
            read_timeout: Some(self.timeouts.request),
            ..ClientConfig::default()
        })
    }

    /// `pull` (of what `reference` names) within [`Timeouts::pull`].
    ///
    /// # Errors
    /// `pull`'s, or [`OciError::Deadline`].
    pub(super) async fn bounded<T>(
        &self,
        reference: &Reference,
        pull: impl Future<Output = Result<T, OciError>>,
    ) -> Result<T, OciError> {
        let after = self.timeouts.pull;
        tokio::time::timeout(after, pull).await.unwrap_or_else(|_| {
            Err(OciError::Deadline {
                registry: reference.resolve_registry().to_owned(),
                after,
            })
        })
    }

    fn registry_error(
        reference: &Reference,
    ) -> impl FnOnce(oci_client::errors::OciDistributionError) -> OciError + '_ {
        move |source| OciError::Registry {
            registry: reference.resolve_registry().to_owned(),
            source: Box::new(source),
        }
    }

    /// As [`Self::registry_error`], but content that does not hash to its
    /// digest (oci-client checks as it reads) is a [`OciError::DigestMismatch`].
    fn fetch_error<'a>(
        reference: &'a Reference,
        what: &'static str,
    ) -> impl FnOnce(oci_client::errors::OciDistributionError) -> OciError + 'a {
        move |source| match source {
            oci_client::errors::OciDistributionError::DigestError(
                oci_client::errors::DigestError::VerificationError { expected, actual },
            ) => OciError::DigestMismatch {
                what,
                expected,
                actual,
            },
            other => Self::registry_error(reference)(other),
        }
    }
}

/// A component to publish: its bytes and what the runtime found in them.
#[derive(Clone, Copy, Debug)]
pub struct Component<'a> {
    /// The component's bytes.
    pub bytes: &'a [u8],
    /// Its declaration and interfaces ([`kubewasm_runtime::Runtime::interfaces`]).
    pub interfaces: &'a Interfaces,
}

/// `sha256:` and the hex digest of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// What [`push`] writes for `component`: the manifest's JSON text, and
/// the blobs it names (layer, then config) with their digests.
fn layout(component: &Component<'_>) -> (Vec<u8>, [(bytes::Bytes, String); 2]) {
    let layer = ImageLayer::new(component.bytes.to_vec(), LAYER_MEDIA_TYPE.to_owned(), None);
    let config = json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [digest_of(component.bytes)],
        "component": {
            "exports": component.interfaces.exports,
            "imports": component.interfaces.imports,
            "target": "kubewasm:controller/controller",
        },
    });
    let config = Config::new(
        config.to_string().into_bytes(),
        CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let declaration = &component.interfaces.declaration;
    let annotations = BTreeMap::from([
        (
            "org.opencontainers.image.title".to_owned(),
            declaration.name.clone(),
        ),
        (
            "org.opencontainers.image.version".to_owned(),
            declaration.version.clone(),
        ),
        (
            ANNOTATION_DECLARATION.to_owned(),
            serde_json::to_string(declaration).unwrap_or_default(),
        ),
    ]);
    let mut manifest =
        OciImageManifest::build(std::slice::from_ref(&layer), &config, Some(annotations));
    manifest.media_type = Some(MANIFEST_MEDIA_TYPE.to_owned());
    // A struct of strings and numbers always serializes.
    let text = serde_json::to_vec(&manifest).unwrap_or_default();
    // The digests `build` computed.
    let layer_digest = manifest
        .layers
        .first()
        .map(|l| l.digest.clone())
        .unwrap_or_default();
    let blobs = [
        (layer.data, layer_digest),
        (config.data, manifest.config.digest),
    ];
    (text, blobs)
}

/// Publishes `component` at `reference`; returns the manifest's digest.
///
/// # Errors
/// [`OciError`]: the reference, or the registry's refusal.
pub async fn push(
    component: &Component<'_>,
    reference: &Reference,
    access: &Access,
) -> Result<String, OciError> {
    let (manifest, blobs) = layout(component);
    push_raw(reference, manifest, blobs.into(), access).await
}

/// Publishes `manifest` and its `blobs` (bytes and digest) at `reference`;
/// returns the manifest's digest.
///
/// # Errors
/// [`OciError`]: the registry's refusal.
pub async fn push_manifest(
    reference: &Reference,
    manifest: &OciImageManifest,
    blobs: Vec<(bytes::Bytes, String)>,
    access: &Access,
) -> Result<String, OciError> {
    // A struct of strings and numbers always serializes.
    let text = serde_json::to_vec(manifest).unwrap_or_default();
    push_raw(reference, text, blobs, access).await
}

async fn push_raw(
    reference: &Reference,
    manifest: Vec<u8>,
    blobs: Vec<(bytes::Bytes, String)>,
    access: &Access,
) -> Result<String, OciError> {
    let client = access.client();
    let auth = access.credentials.auth(reference).await?;
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    for (data, digest) in blobs {
        if !client
            .blob_exists(reference, &digest)
            .await
            .map_err(Access::registry_error(reference))?
        {
            client
                .push_blob(reference, data, &digest)
                .await
                .map_err(Access::registry_error(reference))?;
        }
    }
    let digest = digest_of(&manifest);
    let content_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
    client
        .push_manifest_raw(reference, manifest, content_type)
        .await
        .map_err(Access::registry_error(reference))?;
    Ok(digest)
}

/// Which layout an artifact has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// The CNCF Wasm layout.
    Cncf,
    /// The older one (Kubewarden, proxy-wasm).
    Legacy,
}

/// A pulled component, verified.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    /// The manifest's digest (`sha256:...`): what a tag resolved to.
    pub digest: String,
}

/// A manifest fetched and checked: the plugin's layer it names, and its
/// digest (`sha256:...`, computed here).
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The manifest's digest: what a tag resolved to.
    pub digest: String,
    layer: OciDescriptor,
    /// What the registry was asked with: the layer is fetched with it (a
    /// credential helper is run once per pull).
    auth: RegistryAuth,
}

/// Fetches the manifest at `reference` (by tag or digest) and checks it
/// names a plugin (see the module documentation): the registry, asked with
/// `access`'s credentials, resolved the reference.
///
/// # Errors
/// [`OciError`]: unreachable or refusing registry, digest mismatch, not a
/// plugin.
pub async fn resolve(reference: &Reference, access: &Access) -> Result<Resolved, OciError> {
    let auth = access.credentials.auth(reference).await?;
    let (manifest, digest) = fetch_manifest_raw(reference, access, &auth).await?;
    let not_a_plugin = |reason: String| OciError::NotAPlugin {
        reference: reference.whole(),
        reason,
    };
    let layer = plugin_layer_of(&manifest).map_err(not_a_plugin)?;
    tracing::debug!(reference = %reference, %digest, "resolved the plugin's manifest");
    Ok(Resolved {
        digest,
        layer,
        auth,
    })
}

/// The one Wasm layer a manifest's text names, if it is a plugin's (see the
/// module documentation); else why not. What a registry sends is read here
/// and nowhere else before the layer is fetched.
///
/// # Errors
/// What is wrong: not an image manifest, another config or layer type, not
/// one layer, a layer's size out of bounds.
pub fn plugin_layer_of(manifest: &[u8]) -> Result<OciDescriptor, String> {
    let parsed: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| format!("its manifest is not an OCI image manifest: {e}"))?;
    let (layer, layout) = plugin_layer(&parsed)?;
    tracing::trace!(?layout, "a plugin's manifest");
    Ok(layer.clone())
}

/// The manifest at `reference` (OCI, or Docker's v2 as older tools push
/// it), its text and digest (checked against a digest the reference names).
async fn fetch_manifest_raw(
    reference: &Reference,
    access: &Access,
    auth: &RegistryAuth,
) -> Result<(Vec<u8>, String), OciError> {
    let client = access.client();
    let (manifest, _) = client
        .pull_manifest_raw(
            reference,
            auth,
            &[MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE],
        )
        .await
        .map_err(Access::fetch_error(reference, "manifest"))?;
    if manifest.len() > MAX_MANIFEST_BYTES {
        return Err(OciError::NotAPlugin {
            reference: reference.whole(),
            reason: format!("its manifest is over {MAX_MANIFEST_BYTES} bytes"),
        });
    }
    let digest = digest_of(&manifest);
    if let Some(expected) = reference.digest()
        && expected != digest
    {
        return Err(OciError::DigestMismatch {
            what: "manifest",
            expected: expected.to_owned(),
            actual: digest,
        });
    }
    Ok((manifest.to_vec(), digest))
}

/// The image manifest at `reference`, parsed.
///
/// # Errors
/// [`OciError`]: the registry's, or a manifest that is none.
pub async fn fetch_manifest(
    reference: &Reference,
    access: &Access,
) -> Result<OciImageManifest, OciError> {
    let auth = access.credentials.auth(reference).await?;
    let (manifest, _) = fetch_manifest_raw(reference, access, &auth).await?;
    serde_json::from_slice(&manifest).map_err(|e| OciError::NotAPlugin {
        reference: reference.whole(),
        reason: format!("its manifest is not an image manifest: {e}"),
    })
}

/// The blob `descriptor` names in `reference`'s repository, at most
/// `limit` bytes, verified against its digest and size.
///
/// # Errors
/// [`OciError`]: the registry's, a blob over `limit` or not as named.
pub async fn fetch_blob(
    reference: &Reference,
    descriptor: &OciDescriptor,
    limit: usize,
    access: &Access,
) -> Result<Vec<u8>, OciError> {
    let auth = access.credentials.auth(reference).await?;
    fetch_blob_as(reference, descriptor, limit, access, &auth).await
}

/// [`fetch_blob`], asking the registry with `auth`.
async fn fetch_blob_as(
    reference: &Reference,
    descriptor: &OciDescriptor,
    limit: usize,
    access: &Access,
    auth: &RegistryAuth,
) -> Result<Vec<u8>, OciError> {
    let size = usize::try_from(descriptor.size).unwrap_or(usize::MAX);
    if size > limit {
        return Err(OciError::NotAPlugin {
            reference: reference.whole(),
            reason: format!("a blob of {} bytes, over {limit}", descriptor.size),
        });
    }
    let client = access.client();
    // oci-client authenticates a blob pull with what it stored for the
    // registry when a manifest was pulled: this client pulled none yet.
    client
        .store_auth_if_needed(reference.resolve_registry(), auth)
        .await;
    // The descriptor's size bounds what is read: a registry that sends
    // more is cut off, not buffered.
    let mut bytes = Bounded {
        bytes: Vec::with_capacity(size.min(16 << 20)),
        limit: size,
    };
    client
        .pull_blob(reference, descriptor, &mut bytes)
        .await
        .map_err(Access::fetch_error(reference, "layer"))?;
    let bytes = bytes.bytes;
    let actual = digest_of(&bytes);
    if actual != descriptor.digest || bytes.len() != size {
        return Err(OciError::DigestMismatch {
            what: "layer",
            expected: descriptor.digest.clone(),
            actual,
        });
    }
    Ok(bytes)
}

/// Fetches the layer of a resolved manifest and verifies it.
pub(super) async fn pull_layer(
    reference: &Reference,
    access: &Access,
    resolved: Resolved,
) -> Result<Pulled, OciError> {
    let limit = usize::try_from(MAX_LAYER_BYTES).unwrap_or(usize::MAX);
    let bytes = fetch_blob_as(reference, &resolved.layer, limit, access, &resolved.auth).await?;
    Ok(Pulled {
        bytes,
        digest: resolved.digest,
    })
}

/// Fetches the component at `reference` (by tag or digest) and verifies
/// it (see the module documentation).
///
/// # Errors
/// [`OciError`]: unreachable or refusing registry, digest mismatch, not a
/// plugin.
pub async fn pull(reference: &Reference, access: &Access) -> Result<Pulled, OciError> {
    access
        .bounded(reference, async {
            let resolved = resolve(reference, access).await?;
            pull_layer(reference, access, resolved).await
        })
        .await
}

/// Writes `bytes` beside `path`, then renames it over `path`: a reader
/// never sees half an artifact.
///
/// # Errors
/// The file system's.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, path)
}

/// A buffer that refuses to grow past `limit` bytes.
struct Bounded {
    bytes: Vec<u8>,
    limit: usize,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.bytes.len() + buf.len() > self.limit {
            return std::task::Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {} bytes the manifest names",
                self.limit
            ))));
        }
        self.bytes.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// The one Wasm layer of a plugin artifact, and its layout.
fn plugin_layer(manifest: &OciImageManifest) -> Result<(&OciDescriptor, Layout), String> {
    let layout = match manifest.config.media_type.as_str() {
        CONFIG_MEDIA_TYPE => Layout::Cncf,
        LEGACY_CONFIG_MEDIA_TYPE => Layout::Legacy,
        other => return Err(format!("its config is `{other}`")),
    };
    let wanted = match layout {
        Layout::Cncf => LAYER_MEDIA_TYPE,
        Layout::Legacy => LEGACY_LAYER_MEDIA_TYPE,
    };
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!("it has {} layers, not one", manifest.layers.len()));
    };
    if layer.media_type != wanted {
        return Err(format!(
            "its layer is `{}`, not `{wanted}`",
            layer.media_type
        ));
    }
    if u64::try_from(layer.size).map_or(true, |size| size > MAX_LAYER_BYTES) {
        return Err(format!(
            "its layer's size {} is not within 0..={MAX_LAYER_BYTES}",
            layer.size
        ));
    }
    Ok((layer, layout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[(&str, i64)]) -> OciImageManifest {
        OciImageManifest {
            config: OciDescriptor {
                media_type: config.to_owned(),
                ..OciDescriptor::default()
            },
            layers: layers
                .iter()
                .map(|(media_type, size)| OciDescriptor {
                    media_type: (*media_type).to_owned(),
                    size: *size,
                    ..OciDescriptor::default()
                })
                .collect(),
            ..OciImageManifest::default()
        }
    }

    #[test]
    fn only_one_wasm_layer_under_either_layout_should_be_a_plugin() {
        let ok = manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 10)]);
        assert_eq!(plugin_layer(&ok).map(|(_, l)| l), Ok(Layout::Cncf));
        let legacy = manifest(LEGACY_CONFIG_MEDIA_TYPE, &[(LEGACY_LAYER_MEDIA_TYPE, 10)]);
        assert_eq!(plugin_layer(&legacy).map(|(_, l)| l), Ok(Layout::Legacy));
        for (bad, why) in [
            (
                manifest(
                    "application/vnd.oci.image.config.v1+json",
                    &[(LAYER_MEDIA_TYPE, 1)],
                ),
                "config",
            ),
            (manifest(CONFIG_MEDIA_TYPE, &[]), "0 layers"),
            (
                manifest(
                    CONFIG_MEDIA_TYPE,
                    &[(LAYER_MEDIA_TYPE, 1), (LAYER_MEDIA_TYPE, 1)],
                ),
                "2 layers",
            ),
            (
                manifest(CONFIG_MEDIA_TYPE, &[(LEGACY_LAYER_MEDIA_TYPE, 1)]),
                "not `application/wasm`",
            ),
            (
                manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, -1)]),
                "size -1",
            ),
            (
                manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 1 << 40)]),
                "size",
            ),
        ] {
            let error = plugin_layer(&bad).expect_err(why);
            assert!(error.contains(why), "{error} (expected {why})");
        }
    }

    #[test]
    fn references_should_take_an_oci_scheme_and_refuse_garbage() {
        let r = parse_reference("oci://127.0.0.1:5000/plugins/myapp:1.0").expect("parses");
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("127.0.0.1:5000", "plugins/myapp", Some("1.0"))
        );
        assert!(matches!(
            parse_reference("oci://UPPER/Case:tag"),
            Err(OciError::Reference { .. })
        ));
    }
}
