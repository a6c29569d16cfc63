//! A fault test: the API server is restarted with `--data-dir` in the middle
//! of a watch-driven workload. Nothing acknowledged is lost, resource
//! versions keep increasing, and the watcher recovers (it relists after the
//! 410 a restarted server's empty history gives it).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubewasm_tests::Apiserver;

fn cm(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.data = Some([("n".to_owned(), name.to_owned())].into());
    cm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_data_dir_should_lose_nothing_and_watchers_should_recover()
-> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let data_dir = data.path().to_str().unwrap_or_default().to_owned();
    let first = Apiserver::start_with(&["--data-dir", &data_dir]);
    let kubeconfig = std::fs::read_to_string(&first.kubeconfig)?;
    let listen = first.listen();

    // A watcher that keeps going across the restart.
    let client_a = first.client().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client_a, "default");
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let sink = Arc::clone(&seen);
    let watch = tokio::spawn(async move {
        let mut objects = watcher(cms, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = objects.next().await {
            if let Ok(cm) = event
                && let Ok(mut seen) = sink.lock()
            {
                seen.insert(cm.metadata.name.unwrap_or_default());
            }
        }
    });

    let writer: Api<ConfigMap> = Api::namespaced(first.client().await?, "default");
    let mut last_rv = 0u64;
    for i in 0..5 {
        let created = writer
            .create(&PostParams::default(), &cm(&format!("before-{i}")))
            .await?;
        last_rv = created
            .metadata
            .resource_version
            .unwrap_or_default()
            .parse()?;
    }
    assert!(first.terminate().success(), "clean exit on SIGTERM");

    let second = Apiserver::start_at(&listen, &["--data-dir", &data_dir]);
    assert_eq!(
        std::fs::read_to_string(&second.kubeconfig)?,
        kubeconfig,
        "same credentials after a restart"
    );
    let writer: Api<ConfigMap> = Api::namespaced(second.client().await?, "default");
    for i in 0..5 {
        let created = writer
            .create(&PostParams::default(), &cm(&format!("after-{i}")))
            .await?;
        let rv: u64 = created
            .metadata
            .resource_version
            .unwrap_or_default()
            .parse()?;
        assert!(
            rv > last_rv,
            "resource versions keep increasing: {rv} after {last_rv}"
        );
        last_rv = rv;
    }
    let names: BTreeSet<String> = writer
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    let expected: BTreeSet<String> = (0..5)
        .flat_map(|i| [format!("before-{i}"), format!("after-{i}")])
        .collect();
    assert_eq!(names, expected, "nothing acknowledged was lost");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let complete = seen.lock().map(|s| expected.is_subset(&s)).unwrap_or(false);
        if complete {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the watcher did not recover: {:?}",
            seen.lock().map(|s| s.clone())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watch.abort();
    assert!(second.terminate().success());
    Ok(())
}

#[test]
fn secrets_at_rest_should_be_private_and_an_empty_token_refused() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir()?;
    let data_dir = data.path().join("state");
    let server = Apiserver::start_with(&["--data-dir", data_dir.to_str().unwrap_or_default()]);
    let mode = |path: &std::path::Path| -> anyhow::Result<u32> {
        Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
    };
    assert_eq!(mode(&server.kubeconfig)?, 0o600, "kubeconfig");
    assert_eq!(mode(&data_dir)?, 0o700, "data directory");
    assert_eq!(
        mode(&data_dir.join("credentials.json"))?,
        0o600,
        "credentials"
    );
    // A token that is close but not equal is refused.
    let (ok, _, stderr) = server.kubectl(&["get", "ns", "--token", "x"]);
    assert!(
        !ok && stderr.contains("You must be logged in to the server"),
        "{stderr}"
    );
    assert!(server.terminate().success());

    // Saved credentials without a token: a clear error at start, not an open server.
    let path = data_dir.join("credentials.json");
    let mut saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    saved["token"] = "".into();
    std::fs::write(&path, saved.to_string())?;
    let out = std::process::Command::new(kubewasm_tests::kubewasm_bin())
        .args(["apiserver", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(data.path().join("kubeconfig"))
        .arg("--data-dir")
        .arg(&data_dir)
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the bearer token is missing or empty"),
        "{stderr}"
    );
    Ok(())
}
