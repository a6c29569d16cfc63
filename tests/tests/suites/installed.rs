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
//! converging what changes next, and every write of the host's made by the
//! replica then holding the Lease (the real server's audit log). Real
//! cluster only (`make test-real`), as root.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kubewasm_tests::audit;
use kubewasm_tests::host::{apply_text, get_json};
use kubewasm_tests::prometheus::{Prometheus, Target};
use kubewasm_tests::resources::ready;
use kubewasm_tests::{
    Apiserver, TestCluster, compiled_cache_dir, helm, helm_binary, kubewasm_bin, run_ok,
    test_plugin, wait_until, workspace_root,
};
use serde_json::Value;

/// The in-cluster registry's Service address (in the Service range).
const REGISTRY_IP: &str = "10.96.0.50";
const NAMESPACE: &str = "kubewasm-system";

/// `kubectl get ARGS -o json`, parsed (`Null` if it failed).
fn get(server: &Apiserver, args: &[&str]) -> Value {
    get_json(server, args).unwrap_or_default()
}

/// The Pods `selector` selects in `namespace` that are Ready.
fn ready_pods(server: &Apiserver, namespace: &str, selector: &str) -> Vec<String> {
    get(server, &["pods", "-n", namespace, "-l", selector])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| ready(p))
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// A CA, and a serving certificate for `ip` it signed, in `dir`:
/// `ca.crt`, `tls.crt`, `tls.key`.
fn certificates(dir: &Path, ip: &str) {
    let openssl = Path::new("openssl");
    let at = |name: &str| dir.join(name).to_str().expect("UTF-8").to_owned();
    run_ok(
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
    run_ok(
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
    run_ok(
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
    /// The cluster's registry and path (README's `REGISTRY`).
    registry: String,
    /// Its CA (`ca.crt`) and the credentials the guide logged in with
    /// (`docker/config.json`).
    work: tempfile::TempDir,
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

    /// Every write of the host's replicas in `default` (the MyApp's status,
    /// its Deployment and Service, its reconciles' events) was made by the
    /// replica that held the leader Lease when the server received it, as
    /// the real server's audit log tells: nothing reconciled by two
    /// replicas, nothing written by one after it lost the Lease.
    fn assert_written_by_the_leader_alone(&self) {
        let log = self.server.audit_log().expect("a real cluster's audit log");
        let writes = audit::writes(&log, NAMESPACE);
        let (checked, outside) = audit::outside_tenure(&writes, "kubewasm", "default");
        assert!(
            checked > 0,
            "no write of the host's in default in {}",
            log.display()
        );
        assert!(
            outside.is_empty(),
            "written by a replica not holding the Lease:\n{}",
            outside.join("\n")
        );
        eprintln!("{checked} writes of the host's, each by the leader of the time");
    }

    /// The MyApp `demo`, of `replicas` Pods of the node's `echo`, applied.
    fn myapp(&self, replicas: u32) {
        apply_text(
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

/// The commands of README's "Deploy to a cluster" (every line of its
/// ```sh blocks), run as written from the checkout with `env`, `kubewasm`
/// and helm first on the `PATH`: what they printed.
fn deploy_to_a_cluster(env: &[(&str, &str)]) -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let (_, section) = readme
        .split_once("\n## Deploy to a cluster\n")
        .expect("README's \"Deploy to a cluster\"");
    let section = section.split_once("\n## ").map_or(section, |(s, _)| s);
    let mut script = String::new();
    let mut inside = false;
    for line in section.lines() {
        match line {
            "```sh" => inside = true,
            "```" => inside = false,
            _ if inside => {
                script.push_str(line);
                script.push('\n');
            }
            _ => {}
        }
    }
    assert!(
        !script.is_empty(),
        "no ```sh block in \"Deploy to a cluster\""
    );
    let path = std::env::join_paths(
        [
            kubewasm_bin().parent().expect("a directory").to_owned(),
            helm_binary().parent().expect("a directory").to_owned(),
        ]
        .into_iter()
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .expect("a PATH");
    let out = Command::new("bash")
        .args(["-euxo", "pipefail", "-c", &script])
        .current_dir(workspace_root())
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "README's \"Deploy to a cluster\" failed:\n{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

/// A real cluster with a real node, a registry in the cluster (TLS by a
/// CA of the test's, one user, the node's containerd trusting it), then
/// README's "Deploy to a cluster" run as written: the host's image pushed
/// there, the chart installed, `myapp` pushed signed and run by a
/// `ClusterPlugin`, a MyApp converged, `/metrics` read. Then: both replicas
/// Ready, one leading, `myapp` loaded in each, and another component pushed
/// unsigned.
fn install() -> Installed {
    let server = Apiserver::start_real(&["--nodes", "0", "--real-nodes", "1"]);
    let node_registry = server.node_registry().expect("the node's registry");
    let work = tempfile::tempdir().expect("tempdir");
    let at = |name: &str| work.path().join(name).to_str().expect("UTF-8").to_owned();

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
    apply_text(
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

    // The node trusts it, as a cluster's administrator has its nodes trust
    // a private registry.
    server.node_trusts(REGISTRY_IP, &work.path().join("ca.crt"));

    // README's "Deploy to a cluster", as written.
    let registry = format!("{REGISTRY_IP}/platform");
    let app_image = format!("{node_registry}/echo:1");
    let docker = work.path().join("docker");
    let (ca, cache) = (at("ca.crt"), at("cache"));
    let said = deploy_to_a_cluster(&[
        ("KUBECONFIG", server.kubeconfig.to_str().expect("UTF-8")),
        ("REGISTRY", registry.as_str()),
        ("REGISTRY_CA", ca.as_str()),
        ("REGISTRY_USER", user),
        ("REGISTRY_PASSWORD", password),
        ("APP_IMAGE", app_image.as_str()),
        ("DOCKER_CONFIG", docker.to_str().expect("UTF-8")),
        ("XDG_CACHE_HOME", cache.as_str()),
        // The suites' build of the host in the image, not a release build.
        ("IMAGE_BINARY", kubewasm_bin().to_str().expect("UTF-8")),
    ]);
    assert!(
        said.contains("leader_election_master_status"),
        "the replicas' /metrics read: {said}"
    );

    let selector = "app.kubernetes.io/name=kubewasm";
    let replicas = ready_pods(&server, NAMESPACE, selector);
    assert_eq!(replicas.len(), 2, "helm install --wait: {replicas:?}");
    let holder = || {
        get(&server, &["lease", "kubewasm", "-n", NAMESPACE])["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
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

    // Another component (a signature is a digest's: the same one pushed
    // unsigned under another tag is signed), unsigned, with the
    // credentials the guide logged in with.
    let unsigned = format!("oci://{registry}/plugins/myapp-go:unsigned");
    run_ok(
        kubewasm_bin(),
        &[
            "push",
            test_plugin("myapp-go").to_str().expect("UTF-8"),
            &unsigned,
            "--registry-ca",
            &at("ca.crt"),
            "--docker-config",
            docker.join("config.json").to_str().expect("UTF-8"),
            "--cache-dir",
            compiled_cache_dir().to_str().expect("UTF-8"),
        ],
    );

    let leader = leaders[0].clone();
    Installed {
        server,
        node_registry,
        registry,
        replicas,
        leader,
        unsigned,
        work,
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
    apply_text(
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
    installed.assert_written_by_the_leader_alone();
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
    run_ok(
        workspace_root().join("deploy/build-image"),
        &[
            "--binary",
            kubewasm_bin().to_str().expect("UTF-8"),
            "--version",
            "next",
            "--out",
            layout,
        ],
    );
    // Pushed where the guide pushed the first, with its credentials.
    let next = format!("{}/kubewasm:next", installed.registry);
    let certs = installed.work.path().join("certs");
    std::fs::create_dir_all(&certs).expect("a directory");
    std::fs::copy(installed.work.path().join("ca.crt"), certs.join("ca.crt")).expect("copied");
    run_ok(
        "skopeo",
        &[
            "copy",
            "--quiet",
            "--authfile",
            installed
                .work
                .path()
                .join("docker/config.json")
                .to_str()
                .expect("UTF-8"),
            "--dest-cert-dir",
            certs.to_str().expect("UTF-8"),
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
    installed.assert_written_by_the_leader_alone();

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
    // What README's guide made itself (the registry's CA, the signers, the
    // pull secret, Prometheus' account) and what every namespace has stay.
    let left: Vec<&str> = left
        .lines()
        .filter(|l| {
            ![
                "configmap/registry-ca",
                "configmap/signers",
                "configmap/kube-root-ca.crt",
                "secret/registry-pull",
                "serviceaccount/default",
                "serviceaccount/prometheus",
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
