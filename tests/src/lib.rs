//! Helpers shared by the integration tests: where the built plugins and the
//! `kubewasm` binary are, and fixtures.
//!
//! The wasm artifacts are built by `make plugins` (examples, into
//! `target/plugins/`) and `make test-plugins` (test guests, into
//! `target/test-plugins/`); `make test` runs both first.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod audit;
pub mod bench;
pub mod chart;
pub mod host;
pub mod otlp;
pub mod peers;
pub mod pod;
pub mod prometheus;
pub mod proxy;
pub mod registry;
pub mod resources;
pub mod spans;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// `full` outside CI, `reduced` in it (`CI` set, as `.ci/run` runs): the
/// scale of a heavy test, whose full form runs on a developer's machine
/// and whose reduced form tells the same story in less of CI's 45 minutes.
pub fn scale(full: usize, reduced: usize) -> usize {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") {
        reduced
    } else {
        full
    }
}

/// The cargo target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn artifact(dir: &str, file: &str, make_target: &str) -> PathBuf {
    let path = target_dir().join(dir).join(file);
    assert!(
        path.is_file(),
        "{} is missing: run `make {make_target}` (or `make test`) first",
        path.display()
    );
    path
}

/// A directory of precompiled components shared by the tests, so each test
/// binary compiles a plugin once rather than once per load:
/// `$KUBEWASM_TEST_CACHE` if set (`tests/stress` gives each copy its own,
/// as a test may remove an artifact it then expects its host to cache),
/// else the target directory's.
pub fn compiled_cache_dir() -> PathBuf {
    match std::env::var_os("KUBEWASM_TEST_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => target_dir().join("kubewasm-test-cache"),
    }
}

/// An example plugin built by `make plugins`.
pub fn example_plugin(name: &str) -> PathBuf {
    artifact("plugins", &format!("{name}.wasm"), "plugins")
}

/// A component built against an older contract `version` (`0.1.0`,
/// `0.2.0`), kept as it was built (`tests/fixtures/contract-VERSION/`):
/// what the host must go on loading and running as before.
pub fn contract_fixture(version: &str, name: &str) -> PathBuf {
    workspace_root()
        .join(format!("tests/fixtures/contract-{version}"))
        .join(format!("{name}.wasm"))
}

/// A test guest built by `make test-plugins`.
pub fn test_plugin(name: &str) -> PathBuf {
    artifact("test-plugins", &format!("{name}.wasm"), "test-plugins")
}

/// The `kubewasm` binary built by `make test` (`make test-build`).
pub fn kubewasm_bin() -> PathBuf {
    artifact("debug", "kubewasm", "test")
}

/// What the tests load plugins against: the built-in types and the
/// example plugins' CRDs, as a cluster with them installed serves them.
pub fn load_options() -> kubewasm_runtime::LoadOptions {
    let crd = std::fs::read_to_string(example_file("myapp", "crd.yaml")).expect("myapp crd");
    let objects = kubewasm_runtime::replay::parse_objects(&crd).expect("crd parses");
    let mapper = kubewasm_runtime::mapper::RestMapper::for_fixtures(&objects).expect("crd valid");
    kubewasm_runtime::LoadOptions::new(std::sync::Arc::new(mapper))
}

/// A cache holding a MyApp `default/demo` and its available Deployment: what
/// a myapp reconcile reads.
pub fn myapp_cache() -> std::sync::Arc<dyn kubewasm_runtime::cache::Cache> {
    std::sync::Arc::new(
        kubewasm_runtime::cache::MemoryCache::from_objects([
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "MyApp",
                   "metadata": {"name": "demo", "namespace": "default", "uid": "u-demo", "generation": 1},
                   "spec": {"replicas": 2, "image": "nginx", "port": 80}}),
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "demo", "namespace": "default"},
                   "spec": {"selector": {}, "template": {}}, "status": {"availableReplicas": 2}}),
        ])
        .expect("valid fixture"),
    )
}

/// Runs a call that must be stopped at `deadline`: it fails with
/// `DeadlineExceeded` after at least the deadline and less than twice it.
pub fn assert_stopped_at_deadline<T: std::fmt::Debug>(
    deadline: Duration,
    call: impl FnOnce() -> Result<T, kubewasm_runtime::ReconcileError>,
) {
    use kubewasm_runtime::{CallError, ReconcileError};
    let started = Instant::now();
    let err = call().expect_err("stopped");
    let elapsed = started.elapsed();
    assert!(
        matches!(err, ReconcileError::Call(CallError::DeadlineExceeded { deadline: d }) if d == deadline),
        "{err}"
    );
    assert!(
        elapsed >= deadline && elapsed < 2 * deadline,
        "stopped after {elapsed:?}, not within [{deadline:?}, {:?})",
        2 * deadline
    );
}

/// An example's fixture file in `plugins/<name>/`.
pub fn example_file(plugin: &str, file: &str) -> PathBuf {
    workspace_root().join("plugins").join(plugin).join(file)
}

/// Runs kubectl with `kubeconfig`: success, stdout, stderr.
pub fn kubectl_with(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The embedded API server in this process on a loopback port, over plain
/// HTTP without authentication (benchmarks measure the server and the
/// controllers, not TLS), seeded as a fresh cluster, and a client of it.
pub async fn in_process_cluster(
    store: kubewasm_apiserver::store::Store,
) -> anyhow::Result<(kubewasm_apiserver::http::server::ApiServer, kube::Client)> {
    use kubewasm_apiserver::http::api::{Api, ApiConfig};
    kubewasm_apiserver::store::seed::seed(&store)?;
    let server = kubewasm_apiserver::http::server::ApiServer::start(
        "127.0.0.1:0".parse()?,
        Api::new(store, ApiConfig::default()),
        None,
    )
    .await?;
    let url = format!("http://{}", server.addr()).parse()?;
    Ok((server, kube::Client::try_from(kube::Config::new(url))?))
}

/// Resident memory of process `pid`, in KiB (0 if it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    proc_kib(&format!("/proc/{pid}/status"), "VmRSS:")
}

/// A process's proportional set size in KiB: its resident pages, each
/// counted once however many of its mappings share it (a component's
/// memory image is mapped once per instance: RSS counts it each time).
pub fn pss_kib(pid: u32) -> u64 {
    proc_kib(&format!("/proc/{pid}/smaps_rollup"), "Pss:")
}

/// The KiB figure of the line of `file` that starts with `field`.
fn proc_kib(file: &str, field: &str) -> u64 {
    kib_field(&std::fs::read_to_string(file).unwrap_or_default(), field)
}

/// The KiB figure of the line of a `/proc` file's `text` that starts with
/// `field` (0 if there is none).
pub(crate) fn kib_field(text: &str, field: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `program ARGS`, which must succeed: its standard output (the failure
/// shows its messages).
pub fn run_ok(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    let program = program.as_ref();
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits up to `within` for `check`, every 100 ms; the failure names
/// `what` and shows `state()` (what the cluster holds).
pub fn wait_until(
    what: &str,
    within: Duration,
    state: impl Fn() -> String,
    mut check: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}\n{}", state());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The helm binary: `$HELM`, else the one `.ci/helm` builds into
/// `target/tools`.
pub fn helm_binary() -> PathBuf {
    std::env::var_os("HELM").map_or_else(|| target_dir().join("tools/helm"), PathBuf::from)
}

/// `helm ARGS`: whether it succeeded, its output and its messages
/// ([`helm_binary`]).
pub fn helm(args: &[&str]) -> (bool, String, String) {
    let binary = helm_binary();
    let out = Command::new(&binary)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} runs ({e}): .ci/helm builds it", binary.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The cluster the host's suites run against, chosen by
/// `KUBEWASM_TEST_CLUSTER`: `embedded` (the default: `kubewasm apiserver`,
/// ready in a second) or `real` (Kubernetes' own control plane with kwok
/// Nodes, `tests/real-cluster/up`: the arbiter where the two disagree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestCluster {
    /// `kubewasm apiserver`.
    Embedded,
    /// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.
    Real,
}

impl TestCluster {
    /// The cluster `KUBEWASM_TEST_CLUSTER` names; an unknown name panics.
    pub fn chosen() -> Self {
        match std::env::var("KUBEWASM_TEST_CLUSTER").as_deref() {
            Err(_) | Ok("" | "embedded") => Self::Embedded,
            Ok("real") => Self::Real,
            Ok(other) => panic!("KUBEWASM_TEST_CLUSTER={other}: expected embedded or real"),
        }
    }

    /// Whether the test runs against the embedded server: a test of the
    /// embedded server's own features (its flags, its simulation's
    /// internals, its process) returns early otherwise, saying so.
    pub fn embedded_only(what: &str) -> bool {
        let embedded = Self::chosen() == Self::Embedded;
        if !embedded {
            eprintln!("skipped against the real cluster: {what} is the embedded server's");
        }
        embedded
    }

    /// Whether the test runs against the real cluster: a test of what only
    /// a real cluster has (a real node) returns early otherwise, saying so.
    pub fn real_only(what: &str) -> bool {
        let real = Self::chosen() == Self::Real;
        if !real {
            eprintln!(
                "skipped against the embedded server: {what} needs the real cluster (make test-real)"
            );
        }
        real
    }
}

/// The Go program in `dir` (of the workspace, with its own `go.mod`),
/// built with `go build` into `target/go/NAME` once per test process.
///
/// # Errors
/// If `go` cannot run or the build fails.
pub fn go_built(dir: &str, name: &str) -> std::io::Result<PathBuf> {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, out)) = built.iter().find(|(d, _)| d == dir) {
        return Ok(out.clone());
    }
    let out = target_dir().join("go").join(name);
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(workspace_root().join(dir))
        .status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!("go build of {dir} failed")));
    }
    built.push((dir.to_owned(), out.clone()));
    Ok(out)
}

/// The real control plane's binaries, and with `node` a real node's, built
/// once per test process (minutes the first time, nothing once built).
fn real_cluster_built(node: bool) {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    static NODE_BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let build = |args: &[&str]| {
        let status = Command::new(workspace_root().join("tests/real-cluster/build"))
            .args(args)
            .status()
            .expect("tests/real-cluster/build runs");
        assert!(status.success(), "tests/real-cluster/build {args:?} failed");
    };
    if node {
        NODE_BUILT.get_or_init(|| build(&["--node"]));
    } else {
        BUILT.get_or_init(|| build(&[]));
    }
}

/// The API server of a test, stopped with SIGTERM when dropped: `kubewasm
/// apiserver`, or a real control plane ([`TestCluster`]).
pub struct Apiserver {
    child: Child,
    /// The kubeconfig the server wrote.
    pub kubeconfig: PathBuf,
    cluster: TestCluster,
    _dir: tempfile::TempDir,
    /// With a real node, this process's turn (one real node per machine:
    /// its tests wait for each other), held until the node is gone.
    _node: Option<std::sync::MutexGuard<'static, ()>>,
}

/// The turn of a test that starts a real node.
static REAL_NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Apiserver {
    /// Starts `kubewasm apiserver` on a free loopback port.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts it with extra flags.
    pub fn start_with(flags: &[&str]) -> Self {
        Self::start_at("127.0.0.1:0", flags)
    }

    /// Starts it on `listen` with extra flags. Against the real cluster,
    /// `--simulate-workloads` is what kwok and the controllers do anyway,
    /// `--nodes N` sets the kwok Nodes, `--real-nodes 1` adds a real node
    /// (root) and `--shard-selectors false` turns the `ShardedListAndWatch`
    /// gate off; other flags are the embedded server's own, and panic.
    pub fn start_at(listen: &str, flags: &[&str]) -> Self {
        match TestCluster::chosen() {
            TestCluster::Embedded => Self::embedded(&kubewasm_bin(), listen, flags),
            TestCluster::Real => {
                assert_eq!(listen, "127.0.0.1:0", "the real cluster picks its own port");
                Self::real(flags)
            }
        }
    }

    /// Starts `kubewasm apiserver` with `flags`, whatever
    /// `KUBEWASM_TEST_CLUSTER` says (the difference tool runs both).
    pub fn start_embedded(flags: &[&str]) -> Self {
        Self::embedded(&kubewasm_bin(), "127.0.0.1:0", flags)
    }

    /// Starts `binary apiserver` (another build of `kubewasm`: the
    /// benches' release one) with `flags`.
    pub fn start_embedded_from(binary: &Path, flags: &[&str]) -> Self {
        Self::embedded(binary, "127.0.0.1:0", flags)
    }

    /// Starts a real control plane (flags as for [`Apiserver::start_at`]),
    /// whatever `KUBEWASM_TEST_CLUSTER` says.
    pub fn start_real(flags: &[&str]) -> Self {
        Self::real(flags)
    }

    /// A real control plane (`tests/real-cluster/up`) in its own process
    /// group, watching this process: nothing outlives the test binary.
    fn real(flags: &[&str]) -> Self {
        let mut up: Vec<String> = Vec::new(); // up's default: 3 Nodes
        let mut rest = flags.iter();
        while let Some(flag) = rest.next() {
            match *flag {
                "--simulate-workloads" => {}
                "--nodes" | "--real-nodes" | "--shard-selectors" => {
                    up.push((*flag).to_owned());
                    up.push(rest.next().map(|v| (*v).to_owned()).unwrap_or_default());
                }
                other => panic!("{other}: a flag of the embedded server, not of the real cluster"),
            }
        }
        let node = up.windows(2).any(|f| f == ["--real-nodes", "1"]);
        real_cluster_built(node);
        let turn = node.then(|| {
            REAL_NODE
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("cluster");
        let log = std::fs::File::create(dir.path().join("up.log")).expect("log file");
        let child = Command::new(workspace_root().join("tests/real-cluster/up"))
            .arg(&state)
            .args(&up)
            .arg("--watch-parent")
            .arg(std::process::id().to_string())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("tests/real-cluster/up starts");
        let mut server = Self {
            child,
            kubeconfig: state.join("kubeconfig"),
            cluster: TestCluster::Real,
            _dir: dir,
            _node: turn,
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        let up_log = server._dir.path().join("up.log");
        while !state.join("ready").is_file() {
            let log = || std::fs::read_to_string(&up_log).unwrap_or_default();
            assert!(server.running(), "the real cluster exited: {}", log());
            assert!(
                Instant::now() < deadline,
                "the real cluster not ready after 180 s: {}",
                log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    fn embedded(binary: &Path, listen: &str, flags: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let child = Command::new(binary)
            .args(["apiserver", "--listen", listen, "--kubeconfig-out"])
            .arg(&kubeconfig)
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubewasm apiserver starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !kubeconfig.is_file() {
            assert!(Instant::now() < deadline, "no kubeconfig after 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            kubeconfig,
            cluster: TestCluster::Embedded,
            _dir: dir,
            _node: None,
        }
    }

    /// The address (`host:port`) of the registry a real node pulls its
    /// images from (`--real-nodes 1`), where its `pause` and `echo` are.
    pub fn node_registry(&self) -> Option<String> {
        let state = self.kubeconfig.parent()?;
        let text = std::fs::read_to_string(state.join("registry")).ok()?;
        Some(text.trim().to_owned())
    }

    /// Has a real node's containerd trust `ca` (a PEM file) for the
    /// registry at `host` (`host[:port]`), as a node's administrator writes
    /// it in containerd's `hosts.toml`: read at each pull.
    ///
    /// # Panics
    /// Without a real node (`--real-nodes 1`).
    pub fn node_trusts(&self, host: &str, ca: &Path) {
        let state = self.kubeconfig.parent().expect("the cluster's directory");
        let dir = state.join("node/certs.d").join(host);
        assert!(self.node_registry().is_some(), "no real node");
        std::fs::create_dir_all(&dir).expect("certs.d");
        std::fs::copy(ca, dir.join("ca.crt")).expect("the CA copied");
        std::fs::write(
            dir.join("hosts.toml"),
            format!(
                "server = \"https://{host}\"\n[host.\"https://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"{}\"\n",
                dir.join("ca.crt").display()
            ),
        )
        .expect("hosts.toml written");
    }

    /// A real control plane's audit log: the writes of the ServiceAccounts
    /// of `kubewasm-system` ([`audit`]). None on the embedded server.
    pub fn audit_log(&self) -> Option<PathBuf> {
        let log = self.kubeconfig.parent()?.join("logs/audit.log");
        (self.cluster == TestCluster::Real).then_some(log)
    }

    /// Which cluster this is.
    pub fn cluster(&self) -> TestCluster {
        self.cluster
    }

    /// Runs kubectl against it: success, stdout, stderr.
    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        kubectl_with(&self.kubeconfig, args)
    }

    /// A kubeconfig like the server's, at `path`, with `token` (a
    /// ServiceAccount's, from `kubectl create token`) instead of the admin's.
    pub fn kubeconfig_with_token(&self, token: &str, path: &std::path::Path) -> PathBuf {
        let admin = std::fs::read_to_string(&self.kubeconfig).unwrap_or_default();
        let text: String = admin
            .lines()
            .map(|l| match l.trim_start().strip_prefix("token: ") {
                Some(_) => format!("{}token: {token}", &l[..l.len() - l.trim_start().len()]),
                None => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(path, text).expect("kubeconfig written");
        path.to_owned()
    }

    /// Runs kubectl and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.kubectl(args);
        assert!(ok, "kubectl {args:?} failed: {stderr}");
        stdout
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory of the server process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid())
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The `host:port` it serves, from its kubeconfig.
    pub fn listen(&self) -> String {
        std::fs::read_to_string(&self.kubeconfig)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: https://"))
            .unwrap_or_default()
            .to_owned()
    }

    /// A kube-rs client from its kubeconfig.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(self.config().await?)?)
    }

    /// The kube-rs configuration of its kubeconfig.
    pub async fn config(&self) -> anyhow::Result<kube::Config> {
        let text = std::fs::read_to_string(&self.kubeconfig)?;
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&text)?;
        Ok(kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?)
    }

    /// SIGKILL: no chance to flush anything (the real cluster's whole
    /// process group).
    pub fn kill(mut self) {
        match self.cluster {
            TestCluster::Embedded => {
                let _ = self.child.kill();
            }
            TestCluster::Real => {
                let group = format!("-{}", self.child.id());
                let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            }
        }
        let _ = self.child.wait();
    }

    /// SIGTERM, then the exit status and what it wrote on stderr.
    pub fn terminate_logged(mut self) -> (std::process::ExitStatus, String) {
        let stderr = self.child.stderr.take();
        let status = self.terminate();
        let mut text = String::new();
        if let Some(mut err) = stderr {
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
        }
        (status, text)
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        self.child.wait().expect("exits")
    }
}

impl Drop for Apiserver {
    fn drop(&mut self) {
        // Already exited after `terminate`; otherwise (a failed test) stop it:
        // the real cluster's script stops its processes on SIGTERM.
        if matches!(self.child.try_wait(), Ok(None)) {
            match self.cluster {
                TestCluster::Embedded => {
                    let _ = self.child.kill();
                }
                TestCluster::Real => {
                    let pid = self.child.id().to_string();
                    let _ = Command::new("kill").args(["-TERM", &pid]).status();
                }
            }
        }
        let _ = self.child.wait();
    }
}
