//! A real OCI registry for the tests: Debian's `docker-registry` (CNCF
//! distribution 2.8), on a free loopback port with a configuration of its
//! own (never Debian's, which listens on every interface), its storage in a
//! temporary directory, stopped by its PID when dropped.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry's binary.
const BINARY: &str = "docker-registry";

/// A running registry, stopped (SIGTERM, then waited for) on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    dir: tempfile::TempDir,
    /// A docker config with the registry's user, if it has one.
    docker_config: Option<PathBuf>,
}

impl Registry {
    /// Starts one and waits until it answers `/v2/`.
    ///
    /// # Panics
    /// If `docker-registry` is not installed (`.ci/setup` installs it) or
    /// does not answer within 20 s.
    pub fn start() -> Self {
        Self::start_in(tempfile::tempdir().expect("tempdir"), "")
    }

    /// Starts one that serves only `user` with `password` (HTTP basic
    /// authentication from an htpasswd file).
    ///
    /// # Panics
    /// As [`Self::start`].
    pub fn start_with_user(user: &str, password: &str) -> Self {
        let hash = bcrypt::hash(password, 4).expect("bcrypt");
        let dir = tempfile::tempdir().expect("tempdir");
        let htpasswd = dir.path().join("htpasswd");
        std::fs::write(&htpasswd, format!("{user}:{hash}\n")).expect("htpasswd written");
        let auth = format!(
            "auth:\n  htpasswd:\n    realm: kubewasm-tests\n    path: {}\n",
            htpasswd.display()
        );
        let mut registry = Self::start_in(dir, &auth);
        let config = registry.dir.path().join("docker-config.json");
        std::fs::write(&config, registry.docker_config_json(user, password))
            .expect("docker config written");
        registry.docker_config = Some(config);
        registry
    }

    /// A docker config (`config.json`, or a pull secret's
    /// `.dockerconfigjson`) holding `user` and `password` for this registry.
    pub fn docker_config_json(&self, user: &str, password: &str) -> String {
        serde_json::json!({"auths": {&self.addr: {"username": user, "password": password}}})
            .to_string()
    }

    /// Pushes `component` as `REPOSITORY:TAG` with `kubewasm push` (with
    /// the registry's user, if it has one): its `oci://` reference and the
    /// digest printed.
    ///
    /// # Panics
    /// If the push fails.
    pub fn push(&self, component: &std::path::Path, repository_tag: &str) -> (String, String) {
        self.push_with(component, repository_tag, &[])
    }

    /// The same, with more flags for `kubewasm push` (`--sign KEY`).
    ///
    /// # Panics
    /// If the push fails.
    pub fn push_with(
        &self,
        component: &std::path::Path,
        repository_tag: &str,
        flags: &[&str],
    ) -> (String, String) {
        let reference = format!("oci://{}/{repository_tag}", self.addr);
        let mut push = Command::new(crate::kubewasm_bin());
        push.arg("push")
            .arg(component)
            .arg(&reference)
            .arg("--plain-http")
            .arg("--cache-dir")
            .arg(crate::compiled_cache_dir())
            .args(flags);
        if let Some(config) = &self.docker_config {
            push.arg("--docker-config").arg(config);
        }
        let out = push.output().expect("kubewasm push runs");
        assert!(
            out.status.success(),
            "push {reference}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let digest = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (reference, digest)
    }

    fn start_in(dir: tempfile::TempDir, extra: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
                 delete:\n    enabled: true\nhttp:\n  addr: {addr}\n  draintimeout: 5s\n{extra}",
                dir.path().join("data").display()
            ),
        )
        .expect("config written");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("registry.log")).expect("log"))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{BINARY} does not start ({e}): install it (.ci/setup does, as root)")
            });
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "{BINARY} not listening after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            addr,
            dir,
            docker_config: None,
        }
    }

    /// The file holding the blob `digest` (`sha256:...`) on the registry's
    /// disk: what an attacker with access to its storage would alter.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.data()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `GET path` over plain HTTP with `accept`: status code and body.
    pub fn get(&self, path: &str, accept: &str) -> (u16, Vec<u8>) {
        use std::io::{Read, Write};
        let mut stream = TcpStream::connect(&self.addr).expect("registry answers");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .expect("request sent");
        let mut response = Vec::new();
        stream.read_to_end(&mut response).expect("response read");
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(response.len());
        let head = String::from_utf8_lossy(&response[..split]).into_owned();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = response.get(split + 4..).unwrap_or_default().to_vec();
        // Chunked bodies are not expected: the registry sends lengths.
        (status, body)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }
}

/// A registry that accepts connections and never answers, as a hostile
/// tenant's: it holds every connection open, saying nothing, and notes
/// when each came.
pub struct Silent {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    accepted: std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
}

impl Silent {
    /// Listens on a free loopback port, on a thread of its own.
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("bound").to_string();
        let accepted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let noted = std::sync::Arc::clone(&accepted);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                noted.lock().expect("noted").push(Instant::now());
                held.push(stream);
            }
        });
        Self { addr, accepted }
    }

    /// When each connection came, in order.
    pub fn accepted(&self) -> Vec<Instant> {
        self.accepted.lock().expect("accepted").clone()
    }
}
