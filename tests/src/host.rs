//! A `kubewasm run` process for end-to-end tests, and the waits they use.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Apiserver, example_plugin, kubewasm_bin};

/// A `kubewasm run` process over a directory of plugins, killed on drop.
pub struct Host {
    child: Child,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Host {
    /// Runs `kubewasm run` with `plugins` (example plugin names) trusted.
    pub fn run(server: &Apiserver, plugins: &[&str]) -> Self {
        Self::run_with(server, plugins, &[])
    }

    /// The same, with extra flags.
    pub fn run_with(server: &Apiserver, plugins: &[&str], flags: &[&str]) -> Self {
        let plugins: Vec<_> = plugins.iter().map(|p| (*p, example_plugin(p))).collect();
        Self::start(server, &plugins, &[], flags)
    }

    /// Runs `kubewasm run` over a directory holding `plugins` (name and
    /// component) and `files` (name and text: grants, configurations).
    pub fn start(
        server: &Apiserver,
        plugins: &[(&str, PathBuf)],
        files: &[(&str, &str)],
        flags: &[&str],
    ) -> Self {
        Self::start_as(&server.kubeconfig, plugins, files, flags)
    }

    /// The same, as the user of `kubeconfig`.
    pub fn start_as(
        kubeconfig: &Path,
        plugins: &[(&str, PathBuf)],
        files: &[(&str, &str)],
        flags: &[&str],
    ) -> Self {
        Self::start_from(&kubewasm_bin(), kubeconfig, plugins, files, flags)
    }

    /// The same, from `binary` (another build of `kubewasm`: the benches'
    /// release one).
    pub fn start_from(
        binary: &Path,
        kubeconfig: &Path,
        plugins: &[(&str, PathBuf)],
        files: &[(&str, &str)],
        flags: &[&str],
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, path) in plugins {
            std::fs::copy(path, dir.path().join(format!("{name}.wasm")))
                .expect("plugin built (make plugins test-plugins)");
        }
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).expect("file written");
        }
        let log = dir.path().join("host.log");
        let child = Command::new(binary)
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--plugins")
            .arg(dir.path())
            .args(["--metrics-addr", "127.0.0.1:0", "--trust-declarations"])
            .arg("--cache-dir")
            .arg(crate::compiled_cache_dir())
            .args(flags)
            .env("KUBEWASM_LOG", "info,kubewasm_engine=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("kubewasm run starts");
        Self { child, log, dir }
    }

    /// The plugin directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// What the host logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Puts `component` in the plugin directory as `NAME.wasm`, as an
    /// operator should: written beside it, then renamed over it.
    pub fn put_plugin(&self, name: &str, component: &Path) {
        let next = self.dir.path().join(format!("{name}.next"));
        std::fs::copy(component, &next).expect("component copied");
        std::fs::rename(&next, self.dir.path().join(format!("{name}.wasm"))).expect("renamed");
    }

    /// Removes `NAME.wasm` from the plugin directory.
    pub fn remove_plugin(&self, name: &str) {
        std::fs::remove_file(self.dir.path().join(format!("{name}.wasm"))).expect("removed");
    }

    /// The address `/metrics` listens on, from the log.
    pub fn metrics_addr(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(addr) = self.log().lines().find_map(|l| {
                l.split("metrics on ")
                    .nth(1)
                    .and_then(|rest| {
                        rest.strip_prefix("http://")
                            .or_else(|| rest.strip_prefix("https://"))
                    })
                    .and_then(|rest| rest.strip_suffix("/metrics"))
                    .map(str::to_owned)
            }) {
                return addr;
            }
            assert!(
                Instant::now() < deadline,
                "no metrics address: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The value of a metric series (`name{labels}` as printed), if present.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let (_, text) = self.get("/metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    }

    /// Waits until `/readyz` answers 200.
    pub fn wait_ready(&self) {
        eventually("ready", self, || self.get("/readyz").0.contains("200"));
    }

    /// SIGTERM, then the exit status (within 30 s).
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "SIGTERM sent");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "no exit 30 s after SIGTERM: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no chance to release anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// GETs a path of the metrics server: status line and body.
    pub fn get(&self, path: &str) -> (String, String) {
        http_get(&self.metrics_addr(), path)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GETs `path` of the HTTP server at `addr` (`127.0.0.1:PORT`): status
/// line and body.
///
/// # Panics
/// If nothing answers at `addr`.
pub fn http_get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("the server answers");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .expect("request sent");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("response read");
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(bytes.len());
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let body = bytes.get(split + 4..).unwrap_or_default();
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (
        head.lines().next().unwrap_or_default().to_owned(),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// A chunked body's bytes: each chunk's size line (hex), its bytes and a
/// CRLF, until a chunk of size 0.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut whole = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&body[..end]);
        let size = usize::from_str_radix(line.split(';').next().unwrap_or_default().trim(), 16)
            .unwrap_or(0);
        let rest = &body[end + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        whole.extend_from_slice(&rest[..size]);
        body = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
    }
    whole
}

/// `kubectl get ARGS -o json`, parsed; `None` if it failed.
pub fn get_json(server: &Apiserver, args: &[&str]) -> Option<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let (ok, stdout, _) = server.kubectl(&all);
    ok.then(|| serde_json::from_str(&stdout).ok()).flatten()
}

/// Waits up to 60 s for `check` to hold, naming `what` if it never does.
pub fn eventually(what: &str, host: &Host, check: impl FnMut() -> bool) {
    eventually_showing(what, host, String::new, check);
}

/// The same, adding `state()` (what the cluster holds) to the failure.
pub fn eventually_showing(
    what: &str,
    host: &Host,
    state: impl Fn() -> String,
    check: impl FnMut() -> bool,
) {
    wait_for(what, host, Duration::from_secs(60), state, check);
}

/// Waits up to `within` for `check` to hold; the failure names `what` and
/// shows `state()`, the host's log and metrics.
pub fn wait_for(
    what: &str,
    host: &Host,
    within: Duration,
    state: impl Fn() -> String,
    check: impl FnMut() -> bool,
) {
    crate::wait_until(
        what,
        within,
        || {
            format!(
                "{}\nhost log:\n{}\nmetrics:\n{}",
                state(),
                host.log(),
                host.get("/metrics").1
            )
        },
        check,
    );
}

/// The sum of every series of `metric` (`name{...} value` lines of the
/// Prometheus text `metrics`) whose labels contain `having`.
pub fn metric_total(metrics: &str, metric: &str, having: &str) -> f64 {
    metrics
        .lines()
        .filter_map(|l| {
            let (labels, value) = l.strip_prefix(metric)?.rsplit_once(' ')?;
            (labels.starts_with('{') && labels.contains(having))
                .then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// Ten Namespaces `ns-0` .. `ns-9` and `count` ConfigMaps spread over them
/// (`cm-N`, a small `data` each): what the many-plugins benches run over.
pub fn namespaced_config_maps(count: usize) -> Vec<Value> {
    let namespaces = 10;
    let mut items = Vec::new();
    for n in 0..namespaces {
        items.push(serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("ns-{n}")}}));
        for i in 0..count / namespaces {
            items.push(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": format!("ns-{n}")},
                "data": {"i": i.to_string()}}));
        }
    }
    items
}

/// Creates `items` (objects as JSON) with one `kubectl create` of a List
/// (thousands at once, without a round trip each).
pub fn create_all(server: &Apiserver, items: Vec<Value>) {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), list.to_string()).expect("written");
    server.ok(&[
        "create",
        "--validate=false",
        "-f",
        file.path().to_str().unwrap_or_default(),
    ]);
}

/// `kubectl apply -f PATH`.
pub fn apply(server: &Apiserver, path: &Path) {
    server.ok(&["apply", "-f", path.to_str().unwrap_or_default()]);
}

/// `kubectl apply` of a YAML text.
pub fn apply_text(server: &Apiserver, text: &str) {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), text).expect("written");
    apply(server, file.path());
}

/// The notes of events of `reason` in `namespace`, by the name of the
/// object they regard.
pub fn event_notes(
    server: &Apiserver,
    namespace: &str,
    reason: &str,
) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut by_name = std::collections::BTreeMap::<String, Vec<String>>::new();
    let events = get_json(server, &["events.v1.events.k8s.io", "-n", namespace]);
    for event in events
        .iter()
        .flat_map(|e| e["items"].as_array().into_iter().flatten())
        .filter(|e| e["reason"] == reason)
    {
        if let (Some(name), Some(note)) =
            (event["regarding"]["name"].as_str(), event["note"].as_str())
        {
            by_name
                .entry(name.to_owned())
                .or_default()
                .push(note.to_owned());
        }
    }
    by_name
}

/// ConfigMaps created one after the other in a namespace (`t-000`,
/// `t-001`, ...) with kubectl, until stopped (ten at least).
pub struct ConfigMapWriter {
    writing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<String>>,
    namespace: String,
}

impl ConfigMapWriter {
    /// Starts writing into `namespace`.
    pub fn start(server: &Apiserver, namespace: &str) -> Self {
        let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let thread = std::thread::spawn({
            let (kubeconfig, writing) =
                (server.kubeconfig.clone(), std::sync::Arc::clone(&writing));
            let namespace = namespace.to_owned();
            move || {
                let mut created = Vec::new();
                while writing.load(std::sync::atomic::Ordering::Relaxed) || created.len() < 10 {
                    let name = format!("t-{:03}", created.len());
                    let (ok, _, err) = crate::kubectl_with(
                        &kubeconfig,
                        &[
                            "-n",
                            &namespace,
                            "create",
                            "configmap",
                            &name,
                            "--from-literal=a=b",
                        ],
                    );
                    assert!(ok, "{err}");
                    created.push(name);
                }
                created
            }
        });
        Self {
            writing,
            thread,
            namespace: namespace.to_owned(),
        }
    }

    /// Called once a swap to the version saying `language` is seen: keeps
    /// writing a second more, stops, and waits until every ConfigMap
    /// written is reconciled, those written after the swap by the new
    /// version only, and every one by it at least once (a swap lists every
    /// primary once for the new version). `notes` reads the languages by
    /// ConfigMap.
    pub fn assert_swapped(
        self,
        server: &Apiserver,
        host: &Host,
        language: &str,
        notes: impl Fn() -> std::collections::BTreeMap<String, Vec<String>>,
    ) {
        let (ok, out, _) =
            server.kubectl(&["-n", &self.namespace, "get", "configmaps", "-o", "name"]);
        assert!(ok);
        let before_swap: std::collections::BTreeSet<String> = out
            .lines()
            .map(|l| l.trim_start_matches("configmap/").to_owned())
            .collect();
        std::thread::sleep(Duration::from_secs(1));
        self.writing
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let created = self.thread.join().expect("writer");
        let after: Vec<&String> = created
            .iter()
            .filter(|n| !before_swap.contains(*n))
            .collect();
        assert!(!after.is_empty(), "ConfigMaps created after the swap");
        eventually_showing(
            "every ConfigMap reconciled; those created after the swap by the new version only",
            host,
            || format!("{:#?}", notes()),
            || {
                let seen = notes();
                created.iter().all(|n| seen.contains_key(n))
                    && after.iter().all(|n| seen[*n].iter().all(|l| l == language))
                    && created
                        .iter()
                        .all(|n| seen[n].iter().any(|l| l == language))
            },
        );
    }
}
