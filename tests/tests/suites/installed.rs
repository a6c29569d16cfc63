//! kubewasm as its users run it, on a real node (`tests/real-cluster/up
//! --real-nodes 1`): the host's image (`deploy/build-image` of the tests'
//! binary) pushed to the node's registry, the chart installed by `helm
//! install` with its defaults but the image, the registry's CA and the rules
//! of its plugin; a registry running as a Pod of the cluster (TLS by a CA of
//! the test's, a user) holding the plugin, pushed there through its Service;
//! a `ClusterPlugin` naming it with a pull secret, signed by a key the chart's
//! `requireSignatures` names (an unsigned one beside it refused). Both replicas Running and
//! Ready through the chart's probes, one leader, the plugin loaded in each, a
//! MyApp converged with its Pods running as real containers, a real
//! Prometheus scraping both replicas (the chart's metrics Service's
//! endpoints) over HTTPS with a token bound to the chart's metrics-reader
//! role, the
//! leader's Pod deleted and the standby leading within the Lease and 2 s,
//! converging what changes next. Real cluster only (`make test-real`), as
//! root.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kubewasm_tests::host::get_json;
use kubewasm_tests::prometheus::{Prometheus, Target};
use kubewasm_tests::{
    Apiserver, TestCluster, compiled_cache_dir, example_plugin, helm, kubewasm_bin, test_plugin,
    wait_until, workspace_root,
};
use serde_json::Value;

/// The in-cluster registry's Service address (in the Service range).
const REGISTRY_IP: &str = "10.96.0.50";
const NAMESPACE: &str = "kubewasm-system";

/// `program ARGS`, which must succeed: its output.
fn run(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl get ARGS -o json`, parsed (`Null` if it failed).
fn get(server: &Apiserver, args: &[&str]) -> Value {
    get_json(server, args).unwrap_or_default()
}

/// `kubectl apply` of `yaml`.
fn apply(server: &Apiserver, yaml: &str) {
    let file = tempfile::NamedTempFile::new().expect("tempfile");
    std::fs::write(file.path(), yaml).expect("written");
    server.ok(&["apply", "-f", file.path().to_str().expect("UTF-8")]);
}

/// The Pods `selector` selects in `namespace` that are Ready.
fn ready_pods(server: &Apiserver, namespace: &str, selector: &str) -> Vec<String> {
    get(server, &["pods", "-n", namespace, "-l", selector])["items"]
        .as_array()
        .map(|pods| {
            pods.iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter(|p| {
                    p["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A CA, and a serving certificate for `ip` it signed, in `dir`:
/// `ca.crt`, `tls.crt`, `tls.key`.
fn certificates(dir: &Path, ip: &str) {
    let openssl = Path::new("openssl");
    let at = |name: &str| dir.join(name).to_str().expect("UTF-8").to_owned();
    run(
        openssl,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=a registry's CA",
            "-keyout",
            &at("ca.key"),
            "-out",
            &at("ca.crt"),
        ],
    );
    run(
        openssl,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=registry",
            "-keyout",
            &at("tls.key"),
            "-out",
            &at("tls.csr"),
        ],
    );
    std::fs::write(
        dir.join("tls.ext"),
        format!("subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth\n"),
    )
    .expect("written");
    run(
        openssl,
        &[
            "x509",
            "-req",
            "-in",
            &at("tls.csr"),
            "-CA",
            &at("ca.crt"),
            "-CAkey",
            &at("ca.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &at("tls.ext"),
            "-out",
            &at("tls.crt"),
        ],
    );
}

/// What [`install`] made.
struct Installed {
    server: Apiserver,
    /// The node's registry, `host:port`.
    node_registry: String,
    /// The Ready replicas' Pods.
    replicas: Vec<String>,
    /// The one of them that leads.
    leader: String,
    /// An unsigned component's reference in the cluster's registry.
    unsigned: String,
}

impl Installed {
    fn logs(&self, pod: &str) -> String {
        self.server.kubectl(&["logs", "-n", NAMESPACE, pod]).1
    }

    /// The Lease's holder.
    fn holder(&self) -> String {
        get(&self.server, &["lease", "kubewasm", "-n", NAMESPACE])["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The MyApp `demo`, of `replicas` Pods of the node's `echo`, applied.
    fn myapp(&self, replicas: u32) {
        apply(
            &self.server,
            &format!(
                "apiVersion: example.com/v1\nkind: MyApp\nmetadata: {{name: demo, namespace: default}}\n\
                 spec: {{replicas: {replicas}, image: \"{}/echo:1\", port: 8080}}\n",
                self.node_registry
            ),
        );
    }

    /// Waits for `demo`'s Pods: `replicas` of them Ready.
    fn wait_app_pods(&self, what: &str, replicas: usize) {
        wait_until(
            what,
            Duration::from_secs(120),
            || {
                self.server
                    .kubectl(&["describe", "deployment,pods", "-n", "default"])
                    .1
            },
            || {
                ready_pods(&self.server, "default", "app.kubernetes.io/instance=demo").len()
                    == replicas
            },
        );
    }
}

/// A real cluster with a real node, the host's image in the node's
/// registry, a registry in the cluster holding `myapp` signed (and another
/// component unsigned), the chart installed by helm, both replicas Ready,
/// one leading, and `myapp` from the cluster's registry loaded in each.
fn install() -> Installed {
    let server = Apiserver::start_real(&["--nodes", "0", "--real-nodes", "1"]);
    let node_registry = server.node_registry().expect("the node's registry");
    let work = tempfile::tempdir().expect("tempdir");
    let at = |name: &str| work.path().join(name).to_str().expect("UTF-8").to_owned();
    let kubeconfig = server.kubeconfig.to_str().expect("UTF-8").to_owned();

    // The host's image, pushed where the node pulls from.
    run(
        &workspace_root().join("deploy/build-image"),
        &[
            "--binary",
            kubewasm_bin().to_str().expect("UTF-8"),
            "--out",
            &at("image"),
        ],
    );
    let version = run(&kubewasm_bin(), &["--version"]);
    let version = version
        .split_whitespace()
        .last()
        .expect("a version")
        .to_owned();
    run(
        Path::new("skopeo"),
        &[
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            &format!("oci:{}:{version}", at("image")),
            &format!("docker://{node_registry}/kubewasm:{version}"),
        ],
    );

    // A registry in the cluster: TLS, one user.
    certificates(work.path(), REGISTRY_IP);
    let (user, password) = ("ci", "a password of the cluster's registry");
    std::fs::write(
        work.path().join("htpasswd"),
        format!("{user}:{}\n", bcrypt::hash(password, 4).expect("bcrypt")),
    )
    .expect("written");
    server.ok(&["create", "namespace", "registry"]);
    server.ok(&[
        "-n",
        "registry",
        "create",
        "secret",
        "tls",
        "registry-tls",
        "--cert",
        &at("tls.crt"),
        "--key",
        &at("tls.key"),
    ]);
    server.ok(&[
        "-n",
        "registry",
        "create",
        "secret",
        "generic",
        "registry-users",
        &format!("--from-file=htpasswd={}", at("htpasswd")),
    ]);
    apply(
        &server,
        &format!(
            r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: registry, namespace: registry}}
data:
  config.yml: |
    version: 0.1
    log: {{level: info}}
    storage: {{filesystem: {{rootdirectory: /var/lib/registry}}}}
    http: {{addr: ":5000", tls: {{certificate: /certs/tls.crt, key: /certs/tls.key}}}}
    auth: {{htpasswd: {{realm: registry, path: /users/htpasswd}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: registry, namespace: registry}}
spec:
  selector: {{matchLabels: {{app: registry}}}}
  template:
    metadata: {{labels: {{app: registry}}}}
    spec:
      containers:
      - name: registry
        image: {node_registry}/registry:1
        ports: [{{containerPort: 5000}}]
        readinessProbe: {{tcpSocket: {{port: 5000}}, periodSeconds: 1}}
        securityContext: {{readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}}
        volumeMounts:
        - {{name: config, mountPath: /etc/registry}}
        - {{name: certs, mountPath: /certs}}
        - {{name: users, mountPath: /users}}
        - {{name: data, mountPath: /var/lib/registry}}
      volumes:
      - {{name: config, configMap: {{name: registry}}}}
      - {{name: certs, secret: {{secretName: registry-tls}}}}
      - {{name: users, secret: {{secretName: registry-users}}}}
      - {{name: data, emptyDir: {{}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: registry, namespace: registry}}
spec:
  clusterIP: {REGISTRY_IP}
  selector: {{app: registry}}
  ports: [{{port: 443, targetPort: 5000}}]
"#
        ),
    );
    // Answering through its Service, from this machine: 401 without a user.
    let v2 = || {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-m",
                "2",
                "--cacert",
                &at("ca.crt"),
            ])
            .arg(format!("https://{REGISTRY_IP}/v2/"))
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_until(
        "the cluster's registry answering through its Service",
        Duration::from_secs(120),
        || server.kubectl(&["describe", "pods", "-n", "registry"]).1,
        || v2() == "401",
    );

    // The plugin pushed there, with the registry's CA and user.
    std::fs::write(
        work.path().join("docker-config.json"),
        serde_json::json!({"auths": {REGISTRY_IP: {"username": user, "password": password}}})
            .to_string(),
    )
    .expect("written");
    let openssl = Path::new("openssl");
    run(
        openssl,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &at("cosign.key"),
        ],
    );
    run(
        openssl,
        &[
            "ec",
            "-in",
            &at("cosign.key"),
            "-pubout",
            "-out",
            &at("cosign.pub"),
        ],
    );
    let source = format!("oci://{REGISTRY_IP}/plugins/myapp:1");
    // Another component (a signature is a digest's: the same one
    // pushed unsigned under another tag is signed), unsigned.
    let unsigned = format!("oci://{REGISTRY_IP}/plugins/myapp-go:unsigned");
    for (reference, component, sign) in [
        (&source, example_plugin("myapp"), true),
        (&unsigned, test_plugin("myapp-go"), false),
    ] {
        let mut args = vec![
            "push".to_owned(),
            component.to_str().expect("UTF-8").to_owned(),
            reference.clone(),
            "--registry-ca".to_owned(),
            at("ca.crt"),
            "--docker-config".to_owned(),
            at("docker-config.json"),
            "--cache-dir".to_owned(),
            compiled_cache_dir().to_str().expect("UTF-8").to_owned(),
        ];
        if sign {
            args.extend(["--sign".to_owned(), at("cosign.key")]);
        }
        run(
            &kubewasm_bin(),
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
    }

    // The chart: its defaults, but the image, the registry's CA and what
    // the plugin reads and writes.
    server.ok(&["create", "namespace", NAMESPACE]);
    server.ok(&[
        "-n",
        NAMESPACE,
        "create",
        "configmap",
        "registry-ca",
        &format!("--from-file=ca.crt={}", at("ca.crt")),
    ]);
    server.ok(&[
        "-n",
        NAMESPACE,
        "create",
        "secret",
        "docker-registry",
        "registry-pull",
        &format!("--docker-server={REGISTRY_IP}"),
        &format!("--docker-username={user}"),
        &format!("--docker-password={password}"),
    ]);
    server.ok(&[
        "-n",
        NAMESPACE,
        "create",
        "configmap",
        "signers",
        &format!("--from-file=cosign.pub={}", at("cosign.pub")),
    ]);
    server.ok(&[
        "apply",
        "-f",
        workspace_root()
            .join("plugins/myapp/crd.yaml")
            .to_str()
            .expect("UTF-8"),
    ]);
    let rules = serde_json::json!([
        {"apiGroups": ["example.com"], "resources": ["myapps"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["example.com"], "resources": ["myapps/status"], "verbs": ["get", "patch"]},
        {"apiGroups": ["apps"], "resources": ["deployments"],
         "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
        {"apiGroups": [""], "resources": ["services"],
         "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
    ]);
    let (ok, out, err) = helm(&[
        "install",
        "kubewasm",
        workspace_root()
            .join("deploy/chart/kubewasm")
            .to_str()
            .expect("UTF-8"),
        "--kubeconfig",
        &kubeconfig,
        "-n",
        NAMESPACE,
        "--set",
        &format!("image.repository={node_registry}/kubewasm"),
        "--set",
        &format!("image.tag={version}"),
        "--set",
        "registryCA.configMap=registry-ca",
        "--set",
        "requireSignatures.configMap=signers",
        "--set-json",
        &format!("pluginRules={rules}"),
    ]);
    assert!(ok, "helm install: {out}{err}");

    let selector = "app.kubernetes.io/name=kubewasm";
    let describe = || server.kubectl(&["describe", "pods", "-n", NAMESPACE]).1;
    wait_until(
        "both replicas Ready through the chart's probes",
        Duration::from_secs(180),
        describe,
        || ready_pods(&server, NAMESPACE, selector).len() == 2,
    );
    let holder = || {
        get(&server, &["lease", "kubewasm", "-n", NAMESPACE])["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let replicas = ready_pods(&server, NAMESPACE, selector);
    wait_until("a leader", Duration::from_secs(60), holder, || {
        replicas.iter().any(|p| holder().starts_with(p.as_str()))
    });
    let logs = |pod: &str| server.kubectl(&["logs", "-n", NAMESPACE, pod]).1;
    // The holder logs that it leads once its Lease is written: awaited.
    let leaders = || -> Vec<&String> {
        replicas
            .iter()
            .filter(|p| logs(p).contains("became the leader"))
            .collect()
    };
    wait_until(
        "the leader saying so",
        Duration::from_secs(10),
        || format!("holder {}", holder()),
        || !leaders().is_empty(),
    );
    let leaders = leaders();
    assert_eq!(leaders.len(), 1, "one leader: {leaders:?}");

    // The plugin from the cluster's registry, loaded in every replica.
    apply(
        &server,
        &format!(
            "apiVersion: kubewasm.dev/v1alpha1\nkind: ClusterPlugin\nmetadata: {{name: myapp}}\n\
             spec:\n  source: {source}\n  imagePullSecrets: [{{name: registry-pull, namespace: {NAMESPACE}}}]\n"
        ),
    );
    let loaded = |pod: &str| {
        logs(pod)
            .lines()
            .any(|l| l.contains("plugin loaded") && l.contains(r#""plugin":"myapp""#))
    };
    for pod in &replicas {
        wait_until(
            "the plugin loaded from the cluster's registry",
            Duration::from_secs(120),
            || {
                format!(
                    "{}\n{}",
                    server
                        .kubectl(&["get", "clusterplugin", "myapp", "-o", "yaml"])
                        .1,
                    logs(pod)
                )
            },
            || loaded(pod),
        );
    }

    let leader = leaders[0].clone();
    Installed {
        server,
        node_registry,
        replicas,
        leader,
        unsigned,
    }
}

#[test]
fn the_chart_should_install_on_a_real_node_run_a_plugin_from_the_clusters_registry_and_fail_over() {
    if !TestCluster::real_only("the chart on a real node") {
        return;
    }
    let installed = install();
    let Installed {
        server,
        replicas,
        unsigned,
        ..
    } = &installed;

    // The unsigned component: refused, saying why.
    apply(
        server,
        &format!(
            "apiVersion: kubewasm.dev/v1alpha1\nkind: ClusterPlugin\nmetadata: {{name: unsigned}}\n\
             spec:\n  source: {unsigned}\n  imagePullSecrets: [{{name: registry-pull, namespace: {NAMESPACE}}}]\n"
        ),
    );
    let refused = || {
        get(server, &["clusterplugin", "unsigned"])["status"]["conditions"]
            .as_array()
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Degraded" && c["reason"] == "SignatureRefused")
            })
    };
    wait_until(
        "the unsigned plugin refused",
        Duration::from_secs(60),
        || {
            server
                .kubectl(&["get", "clusterplugin", "unsigned", "-o", "yaml"])
                .1
        },
        refused,
    );

    // A MyApp converged: its Deployment's Pods real containers, Ready.
    installed.myapp(2);
    installed.wait_app_pods("the MyApp's two Pods Ready", 2);

    // Prometheus, as a cluster's scrapes the host: each endpoint of the
    // chart's metrics Service over HTTPS with a token of an account bound
    // to the chart's kubewasm-metrics-reader. (Debian's Prometheus is built
    // without Kubernetes service discovery: the endpoints are read here,
    // from the Service's EndpointSlice, as that discovery reads them.)
    server.ok(&["create", "namespace", "monitoring"]);
    server.ok(&["-n", "monitoring", "create", "serviceaccount", "prometheus"]);
    server.ok(&[
        "create",
        "clusterrolebinding",
        "prometheus-kubewasm-metrics",
        "--clusterrole=kubewasm-metrics-reader",
        "--serviceaccount=monitoring:prometheus",
    ]);
    let token = server.ok(&[
        "-n",
        "monitoring",
        "create",
        "token",
        "prometheus",
        "--duration=1h",
    ]);
    // The Service's endpoints, Ready ones, as a discovery reads them: both
    // replicas' once the EndpointSlice controller has caught up.
    let slices = || {
        get(
            server,
            &[
                "endpointslices",
                "-n",
                NAMESPACE,
                "-l",
                "kubernetes.io/service-name=kubewasm-metrics",
            ],
        )
    };
    let endpoints_of = |slices: &Value| -> Vec<(String, String)> {
        let port = slices["items"][0]["ports"][0]["port"]
            .as_u64()
            .unwrap_or_default();
        slices["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|slice| slice["endpoints"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["conditions"]["ready"] == true)
            .filter_map(|e| {
                let ip = e["addresses"][0].as_str()?;
                let pod = e["targetRef"]["name"].as_str()?;
                Some((format!("{ip}:{port}"), pod.to_owned()))
            })
            .collect()
    };
    wait_until(
        "both replicas among the metrics Service's endpoints",
        Duration::from_secs(30),
        || slices().to_string(),
        || endpoints_of(&slices()).len() == 2,
    );
    let endpoints = endpoints_of(&slices());
    let labels: Vec<[(&str, &str); 1]> = endpoints
        .iter()
        .map(|(_, pod)| [("pod", pod.as_str())])
        .collect();
    let targets: Vec<Target<'_>> = endpoints
        .iter()
        .zip(&labels)
        .map(|((addr, _), labels)| Target {
            addr,
            labels,
            token: Some(token.trim()),
        })
        .collect();
    let prometheus = Prometheus::start(&targets, &[]);
    let scraped = || {
        prometheus
            .query(r#"count by (pod) ({__name__=~"kubewasm_.+"})"#)
            .into_iter()
            .filter_map(|(labels, _)| labels["pod"].as_str().map(str::to_owned))
            .collect::<std::collections::BTreeSet<_>>()
    };
    wait_until(
        "Prometheus scraping both replicas' kubewasm_ series",
        Duration::from_secs(60),
        || format!("{}\n{}", prometheus.api("targets"), prometheus.log()),
        || scraped() == replicas.iter().cloned().collect(),
    );

    // The leader's Pod deleted: the standby leads within the Lease + 2 s,
    // and converges what changes next.
    let leader = &installed.leader;
    let started = Instant::now();
    server.ok(&["delete", "pod", "-n", NAMESPACE, leader, "--wait=false"]);
    let lease = Duration::from_secs(15);
    wait_until(
        "the standby leading",
        lease + Duration::from_secs(2),
        || installed.holder(),
        || {
            let now = installed.holder();
            !now.is_empty() && !now.starts_with(leader.as_str())
        },
    );
    eprintln!(
        "the standby led {:?} after the leader's Pod was deleted",
        started.elapsed()
    );
    installed.myapp(3);
    installed.wait_app_pods("the MyApp's third Pod Ready, by the new leader", 3);
}

/// The Pods of the chart's Deployment, not being deleted: name, phase,
/// image.
fn host_pods(server: &Apiserver) -> Vec<(String, String, String)> {
    get(
        server,
        &[
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/name=kubewasm",
        ],
    )["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&p["metadata"]["name"]),
                text(&p["status"]["phase"]),
                text(&p["spec"]["containers"][0]["image"]),
            )
        })
        .collect()
}

/// The containers of `demo`'s Pods: each one's ID and restarts.
fn app_containers(server: &Apiserver) -> Vec<(String, u64)> {
    get(
        server,
        &[
            "pods",
            "-n",
            "default",
            "-l",
            "app.kubernetes.io/instance=demo",
        ],
    )["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let status = &p["status"]["containerStatuses"][0];
            (
                status["containerID"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                status["restartCount"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn an_installation_should_keep_its_budget_outlive_containerd_roll_an_upgrade_and_uninstall_cleanly()
{
    if !TestCluster::real_only("the chart on a real node") {
        return;
    }
    let installed = install();
    let server = &installed.server;
    installed.myapp(2);
    installed.wait_app_pods("the MyApp's two Pods Ready", 2);

    // kubectl drain: the chart's PodDisruptionBudget lets one replica go,
    // never both.
    let (drained, _, err) = server.kubectl(&[
        "drain",
        "real-node-0",
        "--pod-selector=app.kubernetes.io/name=kubewasm",
        // The chart's emptyDirs are caches, rebuilt by a new Pod.
        "--delete-emptydir-data",
        "--timeout=20s",
    ]);
    assert!(!drained, "the drain evicted both replicas: {err}");
    assert!(err.contains("disruption budget"), "{err}");
    let running: Vec<String> = host_pods(server)
        .into_iter()
        .filter(|(name, phase, _)| phase == "Running" && installed.replicas.contains(name))
        .map(|(name, ..)| name)
        .collect();
    assert_eq!(
        running.len(),
        1,
        "one replica kept: {:?}",
        host_pods(server)
    );
    server.ok(&["uncordon", "real-node-0"]);
    wait_until(
        "two replicas Ready again",
        Duration::from_secs(120),
        || format!("{:?}", host_pods(server)),
        || ready_pods(server, NAMESPACE, "app.kubernetes.io/name=kubewasm").len() == 2,
    );

    // containerd killed under the running Pods: they run on (the same
    // containers, no restart), it comes back, and a new Pod starts.
    let before = app_containers(server);
    let containerd = |signal: &str| {
        Command::new("pkill")
            .args([signal, "-f", "real-cluster/bin/containerd --config"])
            .status()
            .expect("pkill runs")
            .success()
    };
    assert!(containerd("-KILL"), "no containerd to kill");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        app_containers(server),
        before,
        "the Pods' containers changed"
    );
    installed.myapp(3);
    installed.wait_app_pods("a third Pod started by the restarted containerd", 3);
    let after = app_containers(server);
    assert!(
        before.iter().all(|c| after.contains(c)),
        "{before:?} -> {after:?}"
    );

    // helm upgrade to a new image: a rolling update; a change made while it
    // rolls is converged, by the replicas of the new image.
    let image = tempfile::tempdir().expect("tempdir");
    let layout = image.path().join("layout");
    let layout = layout.to_str().expect("UTF-8");
    run(
        &workspace_root().join("deploy/build-image"),
        &[
            "--binary",
            kubewasm_bin().to_str().expect("UTF-8"),
            "--version",
            "next",
            "--out",
            layout,
        ],
    );
    let next = format!("{}/kubewasm:next", installed.node_registry);
    run(
        Path::new("skopeo"),
        &[
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            &format!("oci:{layout}:next"),
            &format!("docker://{next}"),
        ],
    );
    let chart = workspace_root().join("deploy/chart/kubewasm");
    let kubeconfig = server.kubeconfig.to_str().expect("UTF-8");
    let (ok, out, err) = helm(&[
        "upgrade",
        "kubewasm",
        chart.to_str().expect("UTF-8"),
        "--kubeconfig",
        kubeconfig,
        "-n",
        NAMESPACE,
        "--reuse-values",
        "--set",
        "image.tag=next",
    ]);
    assert!(ok, "helm upgrade: {out}{err}");
    installed.myapp(4);
    wait_until(
        "the rollout done: two Ready replicas of the new image, the old ones gone",
        Duration::from_secs(180),
        || format!("{:?}", host_pods(server)),
        || {
            let pods = host_pods(server);
            pods.len() == 2
                && pods.iter().all(|(_, _, image)| *image == next)
                && ready_pods(server, NAMESPACE, "app.kubernetes.io/name=kubewasm").len() == 2
        },
    );
    installed.wait_app_pods("the MyApp changed during the rollout converged", 4);
    // The last old replica releases the Lease as it stops; a new one takes
    // it within the Lease's duration.
    let new_leader = || {
        let holder = installed.holder();
        host_pods(server)
            .into_iter()
            .find(|(name, ..)| !holder.is_empty() && holder.starts_with(name.as_str()))
            .map(|(name, ..)| name)
    };
    wait_until(
        "a replica of the new image leading",
        Duration::from_secs(17),
        || {
            format!(
                "holder {:?}, pods {:?}",
                installed.holder(),
                host_pods(server)
            )
        },
        || new_leader().is_some(),
    );
    let new_leader = new_leader().unwrap_or_default();
    assert!(installed.logs(&new_leader).contains("became the leader"));

    // helm uninstall: nothing of the release is left but its CRDs.
    let (ok, out, err) = helm(&[
        "uninstall",
        "kubewasm",
        "--kubeconfig",
        kubeconfig,
        "-n",
        NAMESPACE,
        "--wait",
    ]);
    assert!(ok, "helm uninstall: {out}{err}");
    wait_until(
        "the host's Pods gone",
        Duration::from_secs(60),
        || format!("{:?}", host_pods(server)),
        || {
            host_pods(server).is_empty()
                && server
                    .kubectl(&["get", "pods", "-n", NAMESPACE, "-o", "name"])
                    .1
                    .trim()
                    .is_empty()
        },
    );
    let left = server
        .kubectl(&[
            "get",
            "all,leases,configmaps,secrets,serviceaccounts,roles,rolebindings,poddisruptionbudgets,networkpolicies",
            "-n",
            NAMESPACE,
            "-o",
            "name",
        ])
        .1;
    // What the test made itself (the registry's CA, the signers, the pull
    // secret) and what every namespace has stay.
    let left: Vec<&str> = left
        .lines()
        .filter(|l| {
            ![
                "configmap/registry-ca",
                "configmap/signers",
                "configmap/kube-root-ca.crt",
                "secret/registry-pull",
                "serviceaccount/default",
            ]
            .contains(l)
        })
        .collect();
    assert!(left.is_empty(), "left after helm uninstall: {left:?}");
    let cluster_wide = server
        .kubectl(&[
            "get",
            "clusterroles,clusterrolebindings",
            "-l",
            "app.kubernetes.io/instance=kubewasm",
            "-o",
            "name",
        ])
        .1;
    assert!(cluster_wide.trim().is_empty(), "left: {cluster_wide}");
    assert!(
        server
            .kubectl(&["get", "crd", "clusterplugins.kubewasm.dev"])
            .0,
        "the CRDs stay"
    );
}
