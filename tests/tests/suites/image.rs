//! The host's image (`deploy/build-image`, `make image`): built here with no
//! container engine and no base image, reproducible, exactly the binary and
//! what it loads, labelled with its version and revision, run by a real
//! OCI runtime (runc) as its configuration says (user 65532, a read-only
//! root), and pushed to a real registry unchanged.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kubewasm_tests::registry::Registry;
use kubewasm_tests::{kubewasm_bin, run_ok, workspace_root};
use serde_json::{Value, json};

/// Builds the image of the tests' binary into `out`; its manifest's digest.
fn build(out: &Path) -> String {
    let built = Command::new(workspace_root().join("deploy/build-image"))
        .arg("--binary")
        .arg(kubewasm_bin())
        .arg("--out")
        .arg(out)
        .current_dir(workspace_root())
        .output()
        .expect("build-image runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    String::from_utf8_lossy(&built.stdout).trim().to_owned()
}

/// The blob `digest` of the layout at `out`.
fn blob(out: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    std::fs::read(out.join("blobs/sha256").join(hex)).expect("the blob")
}

fn json_blob(out: &Path, digest: &str) -> Value {
    serde_json::from_slice(&blob(out, digest)).expect("JSON")
}

#[test]
fn the_image_should_hold_the_binary_and_its_libraries_alone_run_as_nonroot_and_push_unchanged() {
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("layout");
    let digest = build(&out);
    // Reproducible: the same inputs, the same digest.
    assert_eq!(build(&work.path().join("again")), digest);

    let index: Value =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).expect("index"))
            .expect("JSON");
    assert_eq!(index["manifests"][0]["digest"], digest.as_str());
    let manifest = json_blob(&out, &digest);
    let config = json_blob(&out, manifest["config"]["digest"].as_str().expect("config"));
    let version = run_ok(kubewasm_bin(), &["--version"]);
    let version = version.split_whitespace().last().expect("a version");
    let revision = run_ok(
        "git",
        &[
            "-C",
            workspace_root().to_str().expect("UTF-8"),
            "rev-parse",
            "HEAD",
        ],
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], version);
    assert_eq!(labels["org.opencontainers.image.revision"], revision.trim());
    assert_eq!(manifest["annotations"], *labels);
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        json!(["/usr/local/bin/kubewasm"])
    );

    // One layer: the binary, exactly the libraries it loads, the user's
    // files and home, the CA bundle; nothing else.
    let [layer] = manifest["layers"].as_array().expect("layers").as_slice() else {
        panic!("one layer: {manifest}");
    };
    let layer_file = work.path().join("layer.tar.gz");
    std::fs::write(
        &layer_file,
        blob(&out, layer["digest"].as_str().expect("digest")),
    )
    .expect("written");
    let layer_path = layer_file.to_str().expect("UTF-8");
    let files: BTreeSet<String> = run_ok("tar", &["-tzf", layer_path])
        .lines()
        .filter(|l| !l.ends_with('/'))
        .map(str::to_owned)
        .collect();
    let ldd = run_ok("ldd", &[kubewasm_bin().to_str().expect("UTF-8")]);
    let mut expected: BTreeSet<String> = ldd
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .map(|l| l.trim_start_matches('/').to_owned())
        .collect();
    expected.extend(
        ["usr/local/bin/kubewasm", "etc/passwd", "etc/group"]
            .into_iter()
            .map(str::to_owned),
    );
    if Path::new("/etc/ssl/certs/ca-certificates.crt").exists() {
        expected.insert("etc/ssl/certs/ca-certificates.crt".to_owned());
    }
    assert_eq!(files, expected);

    // Run by runc as the image says: its user, its entrypoint, a
    // read-only root, no capability.
    let bundle = work.path().join("bundle");
    let rootfs = bundle.join("rootfs");
    std::fs::create_dir_all(&rootfs).expect("mkdir");
    run_ok(
        "tar",
        &["-xzf", layer_path, "-C", rootfs.to_str().expect("UTF-8")],
    );
    let bundle_path = bundle.to_str().expect("UTF-8");
    run_ok("runc", &["spec", "--bundle", bundle_path]);
    let spec_file = bundle.join("config.json");
    let mut spec: Value =
        serde_json::from_slice(&std::fs::read(&spec_file).expect("spec")).expect("JSON");
    let (uid, gid) = config["config"]["User"]
        .as_str()
        .and_then(|u| u.split_once(':'))
        .and_then(|(u, g)| Some((u.parse::<u32>().ok()?, g.parse::<u32>().ok()?)))
        .expect("USER:GROUP");
    let mut args = config["config"]["Entrypoint"]
        .as_array()
        .expect("entrypoint")
        .clone();
    args.push(json!("--version"));
    spec["process"]["args"] = json!(args);
    spec["process"]["terminal"] = json!(false);
    spec["process"]["user"] = json!({"uid": uid, "gid": gid});
    spec["process"]["env"] = config["config"]["Env"].clone();
    spec["process"]["capabilities"] = json!({});
    spec["root"]["readonly"] = json!(true);
    std::fs::write(&spec_file, spec.to_string()).expect("spec written");
    let id = format!("kubewasm-image-{}", std::process::id());
    let said = run_ok("runc", &["run", "--bundle", bundle_path, &id]);
    assert_eq!(said.trim(), format!("kubewasm {version}"));

    // Pushed to a registry, the same manifest: its digest unchanged.
    let registry = Registry::start();
    let reference = format!("docker://{}/kubewasm:{version}", registry.addr);
    run_ok(
        "skopeo",
        &[
            "copy",
            "--dest-tls-verify=false",
            &format!("oci:{}:{version}", out.display()),
            &reference,
        ],
    );
    let pushed = run_ok(
        "skopeo",
        &["inspect", "--tls-verify=false", "--raw", &reference],
    );
    assert_eq!(kubewasm_engine::oci::digest_of(pushed.as_bytes()), digest);
}
