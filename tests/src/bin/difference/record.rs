//! kubectl's requests as sequences (`--record-kubectl`): each scenario of
//! `tests/difference/kubectl.txt` is run by kubectl through a recording
//! proxy to a fresh embedded server, and what kubectl sent, discovery and
//! OpenAPI left out, is written to
//! `tests/difference/sequences/kubectl-<scenario>.txt`; every run of the
//! tool then replays it on both servers. A scenario runs in the namespace
//! `kubectl-<scenario>`, the one its file is replayed in, so that bodies
//! kubectl writes in protobuf, which name it, stay true.
//!
//! The scenarios file: `[name]` starts a scenario, each line after it is
//! the arguments of one kubectl command (run by `bash`, `{ns}` its
//! namespace), `#` starts a comment.

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use kubewasm_tests::proxy::Proxy;
use kubewasm_tests::{Apiserver, workspace_root};

use crate::sequence::{Sequence, Step};

/// The scenarios: name, then kubectl's arguments, a command a line.
fn scenarios(text: &str) -> Vec<(String, Vec<String>)> {
    let mut all: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            Some(name) => all.push((name.to_owned(), Vec::new())),
            None => {
                if let Some((_, commands)) = all.last_mut() {
                    commands.push(line.to_owned());
                }
            }
        }
    }
    all
}

/// Whether kubectl asks this to learn the API (discovery, OpenAPI, the
/// version), which is not what a scenario compares.
fn discovery(method: &str, path: &str) -> bool {
    let segments = path.trim_matches('/').split('/').count();
    method == "GET"
        && (path.starts_with("/openapi")
            || path == "/version"
            || path == "/api"
            || path == "/apis"
            || (path.starts_with("/api/") && segments == 2)
            || (path.starts_with("/apis/") && segments <= 3))
}

/// Records every scenario of `tests/difference/kubectl.txt` against a
/// fresh embedded server.
pub(crate) async fn kubectl() -> anyhow::Result<()> {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("tests/difference/kubectl.txt"))?;
    let server = Apiserver::start_embedded(&["--simulate-workloads", "--pod-step-ms", "100"]);
    let client = server.client().await?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recording = seen.clone();
    let proxy = Proxy::observing(client.clone(), move |request| {
        if !discovery(
            &request.method,
            request.target.split('?').next().unwrap_or_default(),
        ) && let Ok(mut steps) = recording.lock()
        {
            steps.push(Step {
                method: request.method.clone(),
                target: request.target.clone(),
                content_type: request.content_type.clone(),
                accept: request.accept.clone(),
                body: request.body.to_vec(),
            });
        }
    })
    .await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, proxy.kubeconfig())?;
    for (name, commands) in scenarios(&text) {
        let ns = format!("kubectl-{name}");
        crate::namespace::create(&client, &ns)
            .await
            .with_context(|| format!("namespace {ns}"))?;
        seen.lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clear();
        for command in &commands {
            let line = command.replace("{ns}", &ns);
            let output = tokio::process::Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "kubectl --kubeconfig {} {line}",
                    kubeconfig.display()
                ))
                .output()
                .await?;
            eprintln!(
                "kubectl {line}: {}{}",
                String::from_utf8_lossy(&output.stdout)
                    .lines()
                    .next()
                    .unwrap_or_default(),
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .next()
                    .unwrap_or_default()
            );
            // What the simulated controllers do is let happen, as the
            // replay lets each written object settle.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        let steps: Vec<Step> = seen
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .drain(..)
            .map(|mut step| {
                step.target = step
                    .target
                    .replace(&format!("/namespaces/{ns}/"), "/namespaces/{ns}/");
                if !step.protobuf() {
                    step.body = String::from_utf8_lossy(&step.body)
                        .replace(&ns, "{ns}")
                        .into_bytes();
                }
                step
            })
            .collect();
        let sequence = Sequence {
            name: format!("file/kubectl-{name}"),
            steps,
        };
        let path = root.join(format!("tests/difference/sequences/kubectl-{name}.txt"));
        std::fs::write(&path, sequence.text() + "\n")?;
        eprintln!("{}: {} requests", path.display(), sequence.steps.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_should_be_read_by_name_and_discovery_left_out() {
        let read =
            scenarios("# kubectl's basics\n[basics]\ncreate cm a -n {ns}\n\n[apply]\napply -f x\n");
        assert_eq!(
            read,
            vec![
                ("basics".to_owned(), vec!["create cm a -n {ns}".to_owned()]),
                ("apply".to_owned(), vec!["apply -f x".to_owned()]),
            ]
        );
        assert!(discovery("GET", "/apis/apps/v1"));
        assert!(discovery("GET", "/api/v1"));
        assert!(discovery("GET", "/openapi/v3/apis/apps/v1"));
        assert!(!discovery("GET", "/api/v1/namespaces/x/configmaps"));
        assert!(!discovery("GET", "/apis/apps/v1/deployments"));
        assert!(!discovery("POST", "/api/v1"));
    }
}
