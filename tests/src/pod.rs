//! A Deployment's Pod run as a kubelet runs it, on this machine, without a
//! kubelet: what a process started by hand never meets.
//!
//! [`Pod::start`] runs the Pod template's first container, its arguments
//! unchanged, in namespaces of its own:
//! - a network namespace with its loopback alone: its ports are its own
//!   (two replicas listen on the same port), and the `kubernetes` Service
//!   is a port of that loopback forwarded to the API server
//!   (`KUBERNETES_SERVICE_HOST`/`_PORT`, as kube-proxy routes the
//!   Service's ClusterIP);
//! - a UTS namespace named after the Pod (its hostname, as a kubelet sets);
//! - a mount namespace where the root file system is read-only when the
//!   container says so, `/var` is empty but for the container's mounts,
//!   every `emptyDir` a fresh directory of mode 0777 owned by root (as a
//!   kubelet makes them), and the ServiceAccount's token, CA and namespace
//!   projected read-only at `/var/run/secrets/kubernetes.io/serviceaccount`;
//! - the Pod's user and group, every capability dropped, `no_new_privs`,
//!   and an environment of the kubelet's making only.
//!
//! The kubelet's probes are made from inside the Pod's network namespace
//! ([`Pod::probe`], over HTTPS without verifying, as a kubelet does). It
//! needs root, as a kubelet does. Volumes other than `emptyDir` and mounts
//! outside `/var` are not simulated: the Pod refuses to start.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;

use crate::{Apiserver, kubewasm_bin};

/// The port of the `kubernetes` Service.
const SERVICE_PORT: u16 = 443;
/// Where the ServiceAccount's files are projected.
const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Where the image's binary is, in the Pod.
const IMAGE_BINARY: &str = "/var/.image/kubewasm";

/// A running Pod, killed and its namespaces removed when dropped.
pub struct Pod {
    /// Its name (and hostname).
    pub name: String,
    child: Child,
    netns: String,
    service: TcpListener,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Pod {
    /// Runs `deployment`'s Pod template as the Pod `name`, with the
    /// ServiceAccount `token`, against `server`.
    ///
    /// # Panics
    /// If the template asks for what is not simulated, or a namespace
    /// cannot be made (not root).
    pub fn start(server: &Apiserver, deployment: &Value, name: &str, token: &str) -> Self {
        let namespace = deployment["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let spec = &deployment["spec"]["template"]["spec"];
        let container = &spec["containers"][0];
        let dir = tempfile::tempdir().expect("tempdir");

        // The ServiceAccount's projected files.
        let account = dir.path().join("serviceaccount");
        std::fs::create_dir(&account).expect("mkdir");
        let (ca, api) = api_server(server);
        for (file, text) in [
            ("token", token.as_bytes()),
            ("ca.crt", &ca),
            ("namespace", namespace.as_bytes()),
        ] {
            std::fs::write(account.join(file), text).expect("projected");
        }
        chmod(dir.path(), 0o755);
        chmod(&account, 0o755);

        // Each emptyDir as the kubelet makes it.
        let mut mounts = Vec::new();
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            let volume = mount["name"].as_str().unwrap_or_default();
            let path = mount["mountPath"].as_str().unwrap_or_default();
            let is_empty_dir = spec["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["name"] == volume && v.get("emptyDir").is_some());
            assert!(is_empty_dir, "volume {volume}: only emptyDir is simulated");
            assert!(
                path.starts_with("/var/"),
                "{path}: only mounts in /var are simulated"
            );
            let source = dir.path().join("volumes").join(volume);
            std::fs::create_dir_all(&source).expect("mkdir");
            chmod(&source, 0o777);
            mounts.push((source, path.to_owned()));
        }

        static NEXT: AtomicU64 = AtomicU64::new(0);
        let netns = format!(
            "kubewasm-pod-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &netns]);
        run("ip", &["-n", &netns, "link", "set", "lo", "up"]);
        let service = forward_into(&netns, SERVICE_PORT, api);

        let security = |field: &str| {
            container["securityContext"][field]
                .as_i64()
                .or_else(|| spec["securityContext"][field].as_i64())
        };
        let user = security("runAsUser").unwrap_or(0);
        let group = security("runAsGroup").unwrap_or(user);
        let read_only = container["securityContext"]["readOnlyRootFilesystem"] == true;
        let mut script = String::from(
            "set -eu\n\
             hostname \"$POD_NAME\"\n\
             mount -t tmpfs -o mode=0755 tmpfs /var\n\
             mkdir -p \"$SA\" /var/.image\n\
             mount --bind \"$ACCOUNT\" \"$SA\"\n\
             mount -o remount,bind,ro \"$SA\"\n\
             touch \"$BIN\"\n\
             mount --bind \"$IMAGE\" \"$BIN\"\n",
        );
        for (source, path) in &mounts {
            script.push_str(&format!(
                "mkdir -p '{path}'\nmount --bind '{}' '{path}'\n",
                source.display()
            ));
        }
        if read_only {
            script.push_str("mount -o remount,bind,ro /var\nmount -o remount,bind,ro /\n");
        }
        script.push_str(
            "exec env -i PATH=/usr/bin:/bin HOME=/ HOSTNAME=\"$POD_NAME\" \
             KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=\"$PORT\" \
             KUBERNETES_PORT=\"tcp://127.0.0.1:$PORT\" \
             setpriv --reuid \"$USER_ID\" --regid \"$GROUP_ID\" --clear-groups \
             --inh-caps=-all --bounding-set=-all --no-new-privs -- \"$BIN\" \"$@\"\n",
        );
        let args: Vec<&str> = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let log = dir.path().join("pod.log");
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .args(["unshare", "--mount", "--uts", "--propagation", "private"])
            .args(["sh", "-c", &script, "pod"])
            .args(&args)
            .env("POD_NAME", name)
            .env("SA", SERVICE_ACCOUNT)
            .env("ACCOUNT", &account)
            .env("BIN", IMAGE_BINARY)
            .env("IMAGE", kubewasm_bin())
            .env("PORT", SERVICE_PORT.to_string())
            .env("USER_ID", user.to_string())
            .env("GROUP_ID", group.to_string())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("nsenter runs");
        Self {
            name: name.to_owned(),
            child,
            netns,
            service,
            log,
            dir,
        }
    }

    /// What its container wrote (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether its container still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The directory behind its volume `name` (an emptyDir).
    pub fn volume(&self, name: &str) -> PathBuf {
        self.dir.path().join("volumes").join(name)
    }

    /// The HTTP status of `GET https://127.0.0.1:PORT/PATH` from inside the
    /// Pod's network (certificates not verified, as a kubelet's probes),
    /// with `token` as a bearer token; `000` when nothing answers.
    pub fn probe(&self, port: u16, path: &str, token: Option<&str>) -> String {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net=/run/netns/{}", self.netns))
            .args([
                "curl",
                "-sk",
                "-m",
                "5",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ]);
        if let Some(token) = token {
            command.args(["-H", &format!("Authorization: Bearer {token}")]);
        }
        let out = command
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits up to `within` for `probe` on the container's readiness
    /// probe's port and path to answer 200.
    pub fn wait_ready(&mut self, deployment: &Value, within: Duration) {
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let probe = &container["readinessProbe"]["httpGet"];
        assert_eq!(probe["scheme"], "HTTPS", "{probe}");
        let port = container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == probe["port"] || p["containerPort"] == probe["port"])
            .and_then(|p| p["containerPort"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .expect("the probe's port");
        let path = probe["path"].as_str().unwrap_or("/");
        let deadline = Instant::now() + within;
        loop {
            let status = self.probe(port, path, None);
            if status == "200" {
                return;
            }
            let running = self.running();
            assert!(
                running && Instant::now() < deadline,
                "{} not ready ({path}: {status}; running: {running}):\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Sends `signal` (`TERM`, `KILL`) to its container and waits for it.
    pub fn stop(&mut self, signal: &str) -> ExitStatus {
        // The container is the only process of the Pod's UTS namespace
        // under nsenter and unshare, which exec: the child itself.
        let pid = self.child.id().to_string();
        run("kill", &[&format!("-{signal}"), &pid]);
        self.child.wait().expect("waited")
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = rustix::net::shutdown(&self.service, rustix::net::Shutdown::Both);
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.netns])
            .status();
    }
}

/// The server's CA (PEM) and its address, from its kubeconfig.
fn api_server(server: &Apiserver) -> (Vec<u8>, String) {
    let config = kube::config::Kubeconfig::read_from(&server.kubeconfig).expect("kubeconfig");
    let cluster = config
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .expect("a cluster");
    let ca = match (
        cluster.certificate_authority_data,
        cluster.certificate_authority,
    ) {
        (Some(data), _) => base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64 CA"),
        (None, Some(path)) => std::fs::read(path).expect("CA file"),
        (None, None) => panic!("the kubeconfig names no CA"),
    };
    (ca, server.listen())
}

/// A listener on `127.0.0.1:port` in network namespace `netns`, each
/// connection forwarded to `to` (in this process's namespace).
fn forward_into(netns: &str, port: u16, to: String) -> TcpListener {
    let path = format!("/run/netns/{netns}");
    // A thread of its own enters the namespace, binds, and ends: the
    // socket stays in the namespace it was made in.
    let listener = std::thread::spawn(move || {
        let ns = std::fs::File::open(&path).expect("the namespace");
        rustix::thread::move_into_link_name_space(
            ns.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .expect("setns (root)");
        TcpListener::bind(("127.0.0.1", port)).expect("bound in the Pod's network")
    })
    .join()
    .expect("binding thread");
    let accepting = listener.try_clone().expect("listener");
    std::thread::spawn(move || {
        for client in accepting.incoming() {
            let Ok(client) = client else { return };
            let Ok(upstream) = TcpStream::connect(&to) else {
                continue;
            };
            pipe(client, upstream);
        }
    });
    listener
}

/// Copies bytes both ways between `a` and `b` until either ends.
fn pipe(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    for (mut from, mut to) in [(a, b2), (b, a2)] {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.flush();
            let _ = to.shutdown(std::net::Shutdown::Both);
        });
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
