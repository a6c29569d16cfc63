//! A real node beside the real control plane (`tests/real-cluster/up
//! --real-nodes 1`, what `make real-cluster REAL_NODES=1` starts): containerd,
//! runc, the CNI plugins, a kubelet and kube-proxy. The Node is Ready; Pods of
//! an image built here (`echo`, from the node's own registry) run as real
//! containers; `kubectl logs` and `kubectl exec` reach them through the API
//! server and the kubelet; a ClusterIP Service routes to them, from the
//! machine and from a Pod; a Pod reaches the API server through the
//! `kubernetes` Service with its ServiceAccount's token. Real cluster only
//! (`make test-real`), as root.

use std::time::Duration;

use kubewasm_tests::host::{apply_text, get_json};
use kubewasm_tests::resources::ready;
use kubewasm_tests::{Apiserver, TestCluster, wait_until};
use serde_json::Value;

/// `kubectl get ARGS -o json`, parsed (`Null` if it failed).
fn get(server: &Apiserver, args: &[&str]) -> Value {
    get_json(server, args).unwrap_or_default()
}

#[test]
fn a_real_node_should_run_pods_reached_by_logs_exec_services_and_reaching_the_api_server() {
    if !TestCluster::real_only("a real node") {
        return;
    }
    let server = Apiserver::start_real(&["--nodes", "0", "--real-nodes", "1"]);
    let registry = server.node_registry().expect("the node's registry");

    // The Node: Ready (up waited for it), a real kubelet on containerd.
    let node = get(&server, &["node", "real-node-0"]);
    let info = &node["status"]["nodeInfo"];
    assert!(
        info["containerRuntimeVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("containerd://2.")),
        "{info}"
    );
    assert!(
        info["kubeletVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1."))
    );

    let manifest = format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: echo, namespace: default}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: echo}}}}
  template:
    metadata: {{labels: {{app: echo}}}}
    spec:
      containers:
      - name: echo
        image: {registry}/echo:1
        env: [{{name: ECHO_KUBERNETES, value: "1"}}]
        ports: [{{containerPort: 8080}}]
        readinessProbe: {{httpGet: {{path: /ready, port: 8080}}, periodSeconds: 1}}
---
apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: default}}
spec:
  selector: {{app: echo}}
  ports: [{{port: 80, targetPort: 8080}}]
"#
    );
    apply_text(&server, &manifest);
    let pods = || get(&server, &["pods", "-n", "default", "-l", "app=echo"]);
    let describe = || server.kubectl(&["describe", "pods", "-n", "default"]).1;
    wait_until(
        "both echo Pods Ready on the real node",
        Duration::from_secs(120),
        describe,
        || {
            let items = pods()["items"].as_array().cloned().unwrap_or_default();
            items.len() == 2
                && items
                    .iter()
                    .all(|p| p["spec"]["nodeName"] == "real-node-0" && ready(p))
        },
    );
    let names: Vec<String> = pods()["items"]
        .as_array()
        .expect("Pods")
        .iter()
        .map(|p| p["metadata"]["name"].as_str().expect("a name").to_owned())
        .collect();

    // kubectl logs: what the container wrote (its start, its probes, and the
    // API server's answer through the `kubernetes` Service).
    let logs = |pod: &str| server.kubectl(&["logs", "-n", "default", pod]).1;
    for pod in &names {
        wait_until(
            "the Pod reaching the API server through the kubernetes Service",
            Duration::from_secs(30),
            || logs(pod),
            || {
                let logs = logs(pod);
                logs.contains(&format!("echo {pod} listening on :8080"))
                    && logs.contains("kubernetes: 200 OK")
            },
        );
    }

    // The ClusterIP from this machine (kube-proxy's rules): both Pods answer.
    let service = get(&server, &["service", "echo", "-n", "default"]);
    let ip = service["spec"]["clusterIP"]
        .as_str()
        .expect("a ClusterIP")
        .to_owned();
    let mut answered = std::collections::BTreeSet::new();
    wait_until(
        "both Pods answering on the ClusterIP",
        Duration::from_secs(30),
        || {
            server
                .kubectl(&["get", "endpointslices", "-n", "default", "-o", "yaml"])
                .1
        },
        || {
            let out = std::process::Command::new("curl")
                .args(["-sf", "-m", "2", &format!("http://{ip}/from-the-node")])
                .output()
                .expect("curl runs");
            if let Some(pod) = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .next()
            {
                answered.insert(pod.to_owned());
            }
            answered.len() == 2
        },
    );
    assert_eq!(answered, names.iter().cloned().collect());

    // kubectl exec: the client in one Pod asks the Service, by its ClusterIP.
    let exec_get = |url: &str| {
        server.kubectl(&[
            "exec",
            "-n",
            "default",
            &names[0],
            "--",
            "/usr/local/bin/echo",
            "get",
            url,
        ])
    };
    let (ok, out, err) = exec_get(&format!("http://{ip}/from-a-pod"));
    assert!(ok, "kubectl exec: {err}");
    let answer: Vec<&str> = out.split_whitespace().collect();
    assert!(names.iter().any(|n| n == answer[0]), "{out}");
    assert_eq!(answer.get(1), Some(&"/from-a-pod"), "{out}");
    wait_until(
        "the request from a Pod in the answering Pod's log",
        Duration::from_secs(10),
        || logs(answer[0]),
        || logs(answer[0]).contains("request /from-a-pod"),
    );
    // A failing command's status comes back through exec.
    let (ok, _, err) = exec_get(&format!("http://{ip}:81/closed"));
    assert!(!ok && err.contains("exit code 1"), "{err}");

    // Stopped, the node leaves nothing on the machine: no container, no
    // bridge, no iptables rule, no cgroup.
    drop(server);
    let run = |program: &str, args: &[&str]| {
        let out = std::process::Command::new(program)
            .args(args)
            .output()
            .expect(program);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert!(
        !run("ip", &["link", "show", "kwbr0"]).0,
        "the bridge is left"
    );
    let (_, rules) = run("iptables-save", &[]);
    assert!(
        !rules.contains("KUBE-"),
        "iptables rules are left:\n{rules}"
    );
    let (_, cgroups) = run(
        "find",
        &["/sys/fs/cgroup", "-maxdepth", "2", "-name", "kubepods"],
    );
    assert!(cgroups.trim().is_empty(), "cgroups are left: {cgroups}");
    let (left, processes) = run("pgrep", &["-fa", "^/usr/local/bin/(echo|pause)"]);
    assert!(!left, "the Pods' processes are left: {processes}");
}
