//! The host's image as users run it, on a real node (`tests/real-cluster/up
//! --real-nodes 1`, root): its size (the layer compressed, as a registry
//! keeps it, and unpacked, as the node's disk holds it), its push to the
//! node's registry, and the time from `helm install` of the chart with that
//! image to both replicas available: cold (the node pulls the image), then
//! warm (`kubectl rollout restart`, the image on the node).
//!
//! The image is `make image`'s (`target/image`): run with `make bench`;
//! `cargo test --all-targets` skips it (it needs a real node).

use anyhow::Context;
use kubewasm_tests::bench::{is_real_run, ms, out_path, time_once, write_section};
use kubewasm_tests::{Apiserver, helm, run_ok, workspace_root};
use serde_json::Value;

fn json(path: &std::path::Path) -> anyhow::Result<Value> {
    Ok(serde_json::from_slice(
        &std::fs::read(path).with_context(|| path.display().to_string())?,
    )?)
}

fn main() -> anyhow::Result<()> {
    if !is_real_run() {
        eprintln!("skipped: the image bench needs a real node (make bench)");
        return Ok(());
    }
    let layout = workspace_root().join("target/image");
    let index =
        json(&layout.join("index.json")).context("no image in target/image: run make image")?;
    let tag = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .context("the image's tag")?
        .to_owned();
    let blob = |digest: &Value| -> anyhow::Result<std::path::PathBuf> {
        let digest = digest.as_str().context("a digest")?;
        Ok(layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:")))
    };
    let manifest = json(&blob(&index["manifests"][0]["digest"])?)?;
    let layer = &manifest["layers"][0];
    let compressed = layer["size"].as_u64().context("the layer's size")?;
    let unpacked: u64 = run_ok(
        "sh",
        &[
            "-c",
            &format!("gzip -dc '{}' | wc -c", blob(&layer["digest"])?.display()),
        ],
    )
    .trim()
    .parse()?;

    let server = Apiserver::start_real(&["--nodes", "0", "--real-nodes", "1"]);
    let registry = server.node_registry().context("the node's registry")?;
    let reference = format!("{registry}/kubewasm:{tag}");
    let ((), push) = time_once(|| {
        run_ok(
            "skopeo",
            &[
                "copy",
                "--quiet",
                "--dest-tls-verify=false",
                &format!("oci:{}:{tag}", layout.display()),
                &format!("docker://{reference}"),
            ],
        );
    });

    let kubeconfig = server.kubeconfig.to_str().context("UTF-8")?.to_owned();
    let chart = workspace_root().join("deploy/chart/kubewasm");
    // `kubectl rollout ARGS` of the chart's Deployment.
    let rollout = |args: &[&str]| {
        let mut all = vec![
            "--kubeconfig",
            kubeconfig.as_str(),
            "-n",
            "kubewasm-system",
            "rollout",
        ];
        all.extend_from_slice(args);
        all.push("deployment/kubewasm");
        run_ok("kubectl", &all)
    };
    let (installed, cold) = time_once(|| {
        let (ok, out, err) = helm(&[
            "install",
            "kubewasm",
            chart.to_str().unwrap_or_default(),
            "--kubeconfig",
            &kubeconfig,
            "-n",
            "kubewasm-system",
            "--create-namespace",
            "--set",
            &format!("image.repository={registry}/kubewasm"),
            "--set",
            &format!("image.tag={tag}"),
        ]);
        anyhow::ensure!(ok, "helm install: {out}{err}");
        rollout(&["status", "--timeout=300s"]);
        Ok(())
    });
    installed?;
    rollout(&["restart"]);
    let (_, warm) = time_once(|| rollout(&["status", "--timeout=300s"]));

    let mb = |bytes: u64| format!("{:.1} MB", bytes as f64 / 1e6);
    let body = format!(
        "The image `make image` builds (the release binary without the embedded API server, exactly the \
         libraries it loads, user 65532), on the real node of `make real-cluster REAL_NODES=1`, pulled from \
         the node's registry on loopback; the chart installed with its defaults but the image (2 replicas, \
         leader election, secure metrics).\n\n\
         | | |\n|---|---|\n\
         | image, compressed (the registry's layer) | {} |\n\
         | image, unpacked (the node's disk) | {} |\n\
         | push to the node's registry (skopeo) | {} |\n\
         | `helm install` to both replicas available, cold (the image pulled) | {} |\n\
         | `kubectl rollout restart` to both replicas available, warm | {} |\n\n\
         A replica is available once its readiness probe (`/readyz`, over HTTPS) passes: its caches \
         synced. The rollout replaces one replica at a time (the chart's surge of 1).\n\n",
        mb(compressed),
        mb(unpacked),
        ms(push),
        ms(cold),
        ms(warm),
    );
    print!("{body}");
    if let Some(path) = out_path() {
        write_section(
            &path,
            "image",
            "The host's image on a real node: size, push, install to Ready",
            "make image && cargo bench -p kubewasm-tests --bench image -- --write BENCHMARKS.md",
            &body,
        )?;
    }
    drop(server);
    Ok(())
}
