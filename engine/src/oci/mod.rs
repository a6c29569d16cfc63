//! Plugins as OCI artifacts: the CNCF Wasm layout, pushed to and pulled
//! from any OCI registry.
//!
//! # Layout
//! [`push`] writes the CNCF TAG Runtime's Wasm artifact layout:
//! - an image manifest ([`MANIFEST_MEDIA_TYPE`]) whose annotations carry the
//!   plugin's name and version (`org.opencontainers.image.title`,
//!   `.version`) and its whole declaration as JSON ([`ANNOTATION_DECLARATION`]);
//! - a config ([`CONFIG_MEDIA_TYPE`]): architecture `wasm`, os `wasip2`, the
//!   layer's digest and the component's imports, exports and world;
//! - one layer ([`LAYER_MEDIA_TYPE`]): the component's bytes as they are.
//!
//! [`pull`] also takes the older layout Kubewarden and proxy-wasm publish
//! ([`LEGACY_CONFIG_MEDIA_TYPE`], [`LEGACY_LAYER_MEDIA_TYPE`]).
//!
//! # Guarantees
//! - A registry's word is never taken: a pull by digest gets the manifest
//!   whose sha256 is that digest, and the layer's bytes hash to the digest
//!   and size the manifest names, or the pull fails
//!   ([`OciError::DigestMismatch`]). A pull by tag reports the digest of the
//!   manifest it got, computed here.
//! - An artifact is a plugin only with exactly one Wasm layer under one of
//!   the two layouts; anything else is refused ([`OciError::NotAPlugin`])
//!   before its layer is fetched. Manifests over [`MAX_MANIFEST_BYTES`]
//!   and layers over [`MAX_LAYER_BYTES`] are refused unread.
//! - Credentials come from a docker config file ([`Credentials`]): the
//!   one `--docker-config` names, `$DOCKER_CONFIG/config.json` or
//!   `~/.docker/config.json`, the format of a Kubernetes
//!   `kubernetes.io/dockerconfigjson` pull secret too. Without an entry for
//!   the registry, access is anonymous.

mod artifacts;
mod credentials;
mod error;
mod registry;

pub use artifacts::{Artifacts, Puller, Receipt};
pub use credentials::Credentials;
pub use error::OciError;
pub use registry::{
    ANNOTATION_DECLARATION, Access, CONFIG_MEDIA_TYPE, Component, DOCKER_MANIFEST_MEDIA_TYPE,
    LAYER_MEDIA_TYPE, LEGACY_CONFIG_MEDIA_TYPE, LEGACY_LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE,
    MAX_LAYER_BYTES, MAX_MANIFEST_BYTES, Pulled, Resolved, Timeouts, digest_of, fetch_blob,
    fetch_manifest, parse_reference, plugin_layer_of, pull, push, push_manifest, resolve,
    write_atomically,
};
