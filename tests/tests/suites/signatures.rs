//! Signed plugins against a real registry: `kubewasm push --sign` writes
//! cosign's layout, `kubewasm verify` checks it, and the host runs only
//! what is signed by a key it was given (`spec.verify`, or host-wide
//! `--require-signatures`), refusing the rest with the reason and keeping
//! the last good version running.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kubewasm_engine::oci::{self, Access};
use kubewasm_engine::signature::signature_tag;
use kubewasm_tests::host::{Host, apply_text, wait_for};
use kubewasm_tests::registry::Registry;
use kubewasm_tests::resources::{condition, plugin, server_with_crds, status};
use kubewasm_tests::{kubewasm_bin, test_plugin};
use oci_client::manifest::OciImageManifest;
use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};

/// A key pair made from `seed`, written as `NAME.key` (PKCS#8) and
/// `NAME.pub` (as cosign writes `cosign.pub`) in `dir`: the two paths.
fn key_pair(dir: &Path, name: &str, seed: u8) -> (PathBuf, PathBuf) {
    use sha2::Digest;
    let scalar = sha2::Sha256::digest([seed]);
    let key = p256::ecdsa::SigningKey::from_bytes(&scalar).expect("a valid scalar");
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    std::fs::write(
        &private,
        key.to_pkcs8_pem(LineEnding::LF).expect("pkcs8").as_bytes(),
    )
    .expect("written");
    std::fs::write(
        &public,
        key.verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .expect("pem"),
    )
    .expect("written");
    (private, public)
}

/// `kubewasm verify REFERENCE --key PUB...`: whether it passed, and its
/// output.
fn verify(reference: &str, keys: &[&Path]) -> (bool, String) {
    let mut command = Command::new(kubewasm_bin());
    command.args(["verify", reference, "--plain-http"]);
    for key in keys {
        command.arg("--key").arg(key);
    }
    let out = command.output().expect("kubewasm verify runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The registry's plain-HTTP access (anonymous).
fn access() -> Access {
    Access {
        plain_http: true,
        ..Access::default()
    }
}

/// The signature artifact of `digest` in `repository`: its manifest.
async fn signature_manifest(
    registry: &Registry,
    repository: &str,
    digest: &str,
) -> OciImageManifest {
    let reference = oci::parse_reference(&format!(
        "{}/{repository}:{}",
        registry.addr,
        signature_tag(digest)
    ))
    .expect("reference");
    oci::fetch_manifest(&reference, &access())
        .await
        .expect("a signature")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_should_verify_for_their_key_and_digest_and_nothing_else() -> anyhow::Result<()>
{
    let registry = Registry::start();
    let dir = tempfile::tempdir()?;
    let (key_a, pub_a) = key_pair(dir.path(), "a", 1);
    let (_, pub_b) = key_pair(dir.path(), "b", 2);
    let key_a = key_a.display().to_string();
    let (signed, digest) = registry.push_with(
        &test_plugin("misbehave"),
        "signed/lang:1",
        &["--sign", &key_a],
    );

    // Round trip; the tag is resolved, the digest checked.
    let (ok, out) = verify(&signed, &[&pub_a]);
    assert!(ok && out.contains(&digest), "{out}");
    let (ok, out) = verify(
        &format!("oci://{}/signed/lang@{digest}", registry.addr),
        &[&pub_b, &pub_a],
    );
    assert!(ok, "any of the keys: {out}");
    // Another key.
    let (ok, out) = verify(&signed, &[&pub_b]);
    assert!(
        !ok && out.contains("no signature of") && out.contains("another key"),
        "{out}"
    );
    // Unsigned.
    let (unsigned, other_digest) = registry.push(&test_plugin("selective"), "signed/lang:unsigned");
    let (ok, out) = verify(&unsigned, &[&pub_a]);
    assert!(!ok && out.contains("is not signed"), "{out}");

    // A signature of another digest, copied to the unsigned one's tag.
    let good = signature_manifest(&registry, "signed/lang", &digest).await;
    let copy_to = oci::parse_reference(&format!(
        "{}/signed/lang:{}",
        registry.addr,
        signature_tag(&other_digest)
    ))?;
    oci::push_manifest(&copy_to, &good, Vec::new(), &access()).await?;
    let (ok, out) = verify(&unsigned, &[&pub_a]);
    assert!(!ok && out.contains("another digest"), "{out}");

    // A tampered payload under the signature's tag: the signature kept,
    // the payload changed (its digest with it).
    let layer = good.layers.first().cloned().expect("a signature layer");
    let source = oci::parse_reference(&format!("{}/signed/lang@{digest}", registry.addr))?;
    let payload = oci::fetch_blob(&source, &layer, 1 << 16, &access()).await?;
    let tampered =
        String::from_utf8(payload)?.replace("\"optional\":null", "\"optional\":{\"x\":1}");
    let mut forged = good.clone();
    forged.layers[0].digest = oci::digest_of(tampered.as_bytes());
    forged.layers[0].size = i64::try_from(tampered.len())?;
    let at = oci::parse_reference(&format!(
        "{}/signed/lang:{}",
        registry.addr,
        signature_tag(&digest)
    ))?;
    oci::push_manifest(
        &at,
        &forged,
        vec![(
            tampered.clone().into_bytes().into(),
            forged.layers[0].digest.clone(),
        )],
        &access(),
    )
    .await?;
    let (ok, out) = verify(&signed, &[&pub_a]);
    assert!(!ok && out.contains("over another payload"), "{out}");
    Ok(())
}

#[test]
fn the_host_should_run_only_what_its_keys_signed_and_keep_the_last_good_version() {
    let server = server_with_crds(&[]);
    let registry = Registry::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (key_a, pub_a) = key_pair(dir.path(), "a", 1);
    let (key_b, pub_b) = key_pair(dir.path(), "b", 2);
    let (key_a, key_b) = (key_a.display().to_string(), key_b.display().to_string());
    let (signed, digest) = registry.push_with(
        &test_plugin("misbehave"),
        "team/lang:1",
        &["--sign", &key_a],
    );
    let (unsigned, _) = registry.push(&test_plugin("misbehave"), "other/lang:1");
    let (operators, _) =
        registry.push_with(&test_plugin("misbehave"), "ops/lang:1", &["--sign", &key_b]);
    server.ok(&["create", "namespace", "team"]);
    server.ok(&[
        "-n",
        "team",
        "create",
        "configmap",
        "signers",
        &format!("--from-file=cosign.pub={}", pub_a.display()),
    ]);
    // Host-wide, key b is required; team's Plugin adds key a of its own.
    let pub_b = pub_b.display().to_string();
    // The directory's plugins too: one signed by key b, one unsigned.
    let (good, bad) = (format!("{operators}\n"), format!("{unsigned}\n"));
    let files = [
        ("good.oci", good.as_str()),
        ("good.config.yaml", "mode: language\n"),
        ("bad.oci", bad.as_str()),
        ("bad.config.yaml", "mode: language\n"),
    ];
    let host = Host::start(
        &server,
        &[],
        &files,
        &["--plain-http", "--require-signatures", &pub_b],
    );
    host.wait_ready();
    wait_for(
        "the directory's signed plugin runs, its unsigned one is refused",
        &host,
        Duration::from_secs(60),
        || host.log(),
        || {
            host.metric(r#"kubewasm_plugin_loads_total{plugin="good",result="loaded"}"#)
                .is_some_and(|n| n >= 1.0)
                && host
                    .metric(r#"kubewasm_plugin_loads_total{plugin="bad",result="refused"}"#)
                    .is_some_and(|n| n >= 1.0)
                && host.log().contains("is not signed")
        },
    );
    let verified = "  verify:\n    keys:\n    - configMap: signers\n";
    let config = |mode: &str| format!("  config:\n    mode: {mode}\n");
    apply_text(
        &server,
        &plugin(
            "team",
            "lang",
            &signed,
            &format!("{verified}{}", config("language")),
        ),
    );
    apply_text(
        &server,
        &plugin("team", "bare", &unsigned, &config("language")),
    );
    let statuses = || {
        format!(
            "lang: {:#}\nbare: {:#}",
            status(&server, "team", "lang"),
            status(&server, "team", "bare")
        )
    };
    wait_for(
        "the signed one runs, the unsigned one is refused",
        &host,
        Duration::from_secs(60),
        statuses,
        || {
            let lang = status(&server, "team", "lang");
            let bare = status(&server, "team", "bare");
            lang["phase"] == "Running"
                && lang["digest"] == digest.as_str()
                && bare["phase"] == "Failed"
                && condition(&bare, "Degraded")["reason"] == "SignatureRefused"
                && bare["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("is not signed"))
        },
    );

    // The tag moves to an unsigned digest; the next generation resolves it
    // and is refused, the signed version keeps running.
    registry.push(&test_plugin("selective"), "team/lang:1");
    apply_text(
        &server,
        &plugin(
            "team",
            "lang",
            &signed,
            &format!("{verified}{}", config("count")),
        ),
    );
    wait_for(
        "the moved tag is refused, the last good digest kept",
        &host,
        Duration::from_secs(60),
        statuses,
        || {
            let lang = status(&server, "team", "lang");
            lang["phase"] == "Running"
                && lang["digest"] == digest.as_str()
                && lang["observedGeneration"] == 2
                && condition(&lang, "Degraded")["reason"] == "SignatureRefused"
        },
    );
}
