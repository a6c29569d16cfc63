//! Plugins as OCI artifacts against a real registry (Debian's
//! `docker-registry` on a loopback port): `kubewasm push` and `kubewasm
//! pull` as an operator runs them, and what a registry under an attacker's
//! control can and cannot make the host accept.

use std::path::Path;
use std::process::Command;

use kubewasm_tests::registry::Registry;
use kubewasm_tests::{example_plugin, kubewasm_bin};
use serde_json::Value;

/// Runs `kubewasm ARGS`: success, stdout, stderr.
fn kubewasm(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(kubewasm_bin())
        .args(args)
        .arg("--cache-dir")
        .arg(kubewasm_tests::compiled_cache_dir())
        .output()
        .expect("kubewasm runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn push(file: &Path, reference: &str) -> String {
    let file = file.to_str().expect("UTF-8 path");
    let (ok, digest, err) = kubewasm(&["push", file, reference, "--plain-http"]);
    assert!(ok, "push {reference}: {err}");
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    digest
}

fn pull(reference: &str, to: &Path) -> (bool, String, String) {
    let to = to.to_str().expect("UTF-8 path");
    kubewasm(&["pull", reference, "-o", to, "--plain-http"])
}

/// The manifest of `repository:reference` as the registry serves it.
fn manifest(registry: &Registry, repository: &str, reference: &str) -> Value {
    let (status, body) = registry.get(
        &format!("/v2/{repository}/manifests/{reference}"),
        kubewasm_engine::oci::MANIFEST_MEDIA_TYPE,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("a JSON manifest")
}

#[test]
fn a_plugin_should_round_trip_through_a_registry_by_tag_and_by_digest() {
    let registry = Registry::start();
    let component = example_plugin("myapp");
    let original = std::fs::read(&component).expect("built (make plugins)");
    let reference = format!("oci://{}/plugins/myapp:1.0", registry.addr);
    let digest = push(&component, &reference);

    // The CNCF Wasm layout, the declaration in the annotations.
    let m = manifest(&registry, "plugins/myapp", "1.0");
    assert_eq!(m["mediaType"], kubewasm_engine::oci::MANIFEST_MEDIA_TYPE);
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(m["layers"].as_array().map(Vec::len), Some(1));
    assert_eq!(m["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(m["annotations"]["org.opencontainers.image.title"], "myapp");
    let declaration: Value = serde_json::from_str(
        m["annotations"]["dev.kubewasm.declaration"]
            .as_str()
            .unwrap_or_default(),
    )
    .expect("the declaration as JSON");
    assert_eq!(declaration["primary"]["kind"], "MyApp");
    let config_digest = m["config"]["digest"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (status, config) = registry.get(&format!("/v2/plugins/myapp/blobs/{config_digest}"), "*/*");
    assert_eq!(status, 200);
    let config: Value = serde_json::from_slice(&config).expect("config JSON");
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"][0], m["layers"][0]["digest"]);
    let exports = config["component"]["exports"].to_string();
    assert!(
        exports.contains("kubewasm:controller/plugin@0.3.0"),
        "{exports}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let by_tag = dir.path().join("by-tag.wasm");
    let (ok, pulled_digest, err) = pull(&reference, &by_tag);
    assert!(ok, "{err}");
    assert_eq!(pulled_digest, digest, "a tag resolves to the digest pushed");
    assert_eq!(
        std::fs::read(&by_tag).ok(),
        Some(original.clone()),
        "byte-identical"
    );

    let by_digest = dir.path().join("by-digest.wasm");
    let pinned = format!("{}/plugins/myapp@{digest}", registry.addr);
    let (ok, pulled_digest, err) = pull(&pinned, &by_digest);
    assert!(ok, "{err}");
    assert_eq!(pulled_digest, digest);
    assert_eq!(std::fs::read(&by_digest).ok(), Some(original.clone()));

    // Pushing the same component again changes nothing.
    assert_eq!(push(&component, &reference), digest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_older_layout_should_be_pulled_and_a_non_plugin_refused() {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    use oci_client::manifest::OciImageManifest;
    use oci_client::secrets::RegistryAuth;

    let registry = Registry::start();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    // As Kubewarden and proxy-wasm publish: the v1 config and layer types.
    let publish = |repository: &'static str, bytes: Vec<u8>| {
        let (client, addr) = (&client, registry.addr.clone());
        async move {
            let reference: oci_client::Reference = format!("{addr}/{repository}:v1")
                .parse()
                .expect("reference");
            let layer = ImageLayer::new(
                bytes,
                kubewasm_engine::oci::LEGACY_LAYER_MEDIA_TYPE.to_owned(),
                None,
            );
            let config = Config::new(
                b"{}".to_vec(),
                kubewasm_engine::oci::LEGACY_CONFIG_MEDIA_TYPE.to_owned(),
                None,
            );
            let mut manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
            manifest.media_type = Some(kubewasm_engine::oci::MANIFEST_MEDIA_TYPE.to_owned());
            client
                .push(
                    &reference,
                    &[layer],
                    config,
                    &RegistryAuth::Anonymous,
                    Some(manifest),
                )
                .await
                .expect("pushed");
            format!("{addr}/{repository}:v1")
        }
    };
    let original = std::fs::read(example_plugin("myapp")).expect("built");
    let legacy = publish("legacy/myapp", original.clone()).await;
    let junk = publish("legacy/junk", b"\0asm not a component".to_vec()).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("legacy.wasm");
    let (ok, digest, err) = pull(&legacy, &out);
    assert!(ok, "{err}");
    assert!(digest.starts_with("sha256:"));
    assert_eq!(std::fs::read(&out).ok(), Some(original));

    let out = dir.path().join("junk.wasm");
    let (ok, _, err) = pull(&junk, &out);
    assert!(!ok, "a layer that is no component is refused");
    assert!(err.contains("failed to load"), "{err}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn a_tampered_blob_or_manifest_should_be_refused_and_nothing_written() {
    let registry = Registry::start();
    let component = example_plugin("myapp");
    let reference = format!("{}/plugins/myapp:1.0", registry.addr);
    let digest = push(&component, &reference);
    let dir = tempfile::tempdir().expect("tempdir");

    // The layer altered on the registry's disk: it serves it unchecked.
    let m = manifest(&registry, "plugins/myapp", "1.0");
    let layer = registry.blob_path(m["layers"][0]["digest"].as_str().unwrap_or_default());
    let mut bytes = std::fs::read(&layer).expect("layer on disk");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&layer, &bytes).expect("tampered");
    let out = dir.path().join("tampered.wasm");
    let (ok, _, err) = pull(&reference, &out);
    assert!(!ok, "a tampered layer is refused");
    assert!(err.contains("digest mismatch for the layer"), "{err}");
    assert!(!out.exists(), "nothing written");

    // The manifest altered (still a valid manifest): pulled by its digest,
    // what comes no longer hashes to it.
    let stored = registry.blob_path(&digest);
    let text = std::fs::read_to_string(&stored).expect("manifest on disk");
    assert!(text.contains("\"myapp\""), "{text}");
    std::fs::write(&stored, text.replacen("\"myapp\"", "\"evil!\"", 1)).expect("tampered");
    let pinned = format!("{}/plugins/myapp@{digest}", registry.addr);
    let (ok, _, err) = pull(&pinned, &out);
    assert!(!ok, "a manifest that does not match its digest is refused");
    assert!(err.contains("digest mismatch for the manifest"), "{err}");
    assert!(!out.exists(), "nothing written");

    // A digest the registry does not hold, and no registry at all.
    let unknown = format!("{}/plugins/myapp@sha256:{}", registry.addr, "0".repeat(64));
    let (ok, _, err) = pull(&unknown, &out);
    assert!(
        !ok && err.contains(&format!("registry {}", registry.addr)),
        "{err}"
    );
    let (ok, _, err) = pull("127.0.0.1:1/plugins/myapp:1.0", &out);
    assert!(!ok, "unreachable");
    assert!(
        err.contains("registry 127.0.0.1:1"),
        "names the registry: {err}"
    );
    assert!(err.contains("Connection refused"), "and why: {err}");
    let (ok, _, err) = pull("oci://Not A Reference", &out);
    assert!(!ok && err.contains("invalid OCI reference"), "{err}");
}
