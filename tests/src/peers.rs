//! The MyApp operator three ways, each as the process its users run: the
//! `kubewasm run` binary with the `myapp` component, the native kube-runtime
//! controller (`bench/peers/kube-runtime`) and the controller-runtime one
//! (`bench/peers/controller-runtime`), and what such a process used of the
//! machine, read from `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::{compiled_cache_dir, example_plugin, target_dir};

/// Who reconciles the MyApps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `kubewasm run` over a directory holding `myapp.wasm`.
    Kubewasm,
    /// The same logic natively in a kube-runtime `Controller`.
    KubeRuntime,
    /// The same logic in a controller-runtime manager (Go).
    ControllerRuntime,
}

impl Driver {
    /// The three, in the order a table lists them.
    pub const ALL: [Driver; 3] = [Self::Kubewasm, Self::KubeRuntime, Self::ControllerRuntime];

    /// Its name in a table.
    pub fn name(self) -> &'static str {
        match self {
            Self::Kubewasm => "kubewasm (myapp as Wasm)",
            Self::KubeRuntime => "kube-runtime",
            Self::ControllerRuntime => "controller-runtime",
        }
    }

    /// Starts it against the server of `kubeconfig`, the Rust binaries from
    /// cargo's `profile` directory (`debug`, `release`), logging to `log`.
    /// `scratch` holds the plugin directory kubewasm runs from.
    pub fn spawn(
        self,
        kubeconfig: &Path,
        profile: &str,
        scratch: &Path,
        log: &Path,
    ) -> std::io::Result<Running> {
        let mut command = match self {
            Self::Kubewasm => {
                let plugins = scratch.join("plugins");
                std::fs::create_dir_all(&plugins)?;
                std::fs::copy(example_plugin("myapp"), plugins.join("myapp.wasm"))?;
                let mut command = Command::new(rust_binary(profile, "kubewasm"));
                command
                    .arg("run")
                    .arg("--plugins")
                    .arg(&plugins)
                    // Grants exactly what the plugin declares (the other two
                    // run as the admin), its metrics on a free port.
                    .args(["--trust-declarations", "--metrics-addr", "127.0.0.1:0"])
                    .arg("--cache-dir")
                    .arg(compiled_cache_dir());
                command
            }
            Self::KubeRuntime => Command::new(rust_binary(profile, "kube-runtime-myapp")),
            Self::ControllerRuntime => Command::new(controller_runtime_built()?),
        };
        let child = command
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBEWASM_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()?;
        Ok(Running { child })
    }
}

/// MyApps of `default`, as the example's CRD serves them, and their type.
pub fn myapps(client: &kube::Client) -> (Api<DynamicObject>, ApiResource) {
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "MyApp".into(),
        plural: "myapps".into(),
    };
    (
        Api::namespaced_with(client.clone(), "default", &resource),
        resource,
    )
}

/// Creates `n` MyApps (`app-000000` on) in `default`, each asking for
/// `replicas`, 32 requests in flight.
///
/// # Errors
/// The first create that fails.
pub async fn create_myapps(client: &kube::Client, n: usize, replicas: u32) -> kube::Result<()> {
    let (apps, resource) = myapps(client);
    futures_util::stream::iter(0..n)
        .map(|i| {
            let (apps, mut app) = (
                apps.clone(),
                DynamicObject::new(&format!("app-{i:06}"), &resource),
            );
            app.data = serde_json::json!({
                "spec": {"replicas": replicas, "image": "nginx:1.27", "port": 8080}});
            async move { apps.create(&PostParams::default(), &app).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Resolves once `n` MyApps of `default` report their Deployment: the
/// first condition of each has `reason`, at the MyApp's generation.
///
/// # Errors
/// The watch failing, or ending.
pub async fn converged(client: &kube::Client, n: usize, reason: &str) -> anyhow::Result<()> {
    let (apps, _) = myapps(client);
    let mut done = std::collections::HashSet::new();
    let mut events = watcher(apps, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(app) = events.try_next().await? {
        let condition = app.data.pointer("/status/conditions/0");
        let reports = condition.is_some_and(|c| {
            c["reason"] == reason && c["observedGeneration"].as_i64() == app.metadata.generation
        });
        if reports {
            done.insert(app.name_any());
            if done.len() == n {
                return Ok(());
            }
        }
    }
    anyhow::bail!("the watch of MyApps ended")
}

/// A Rust binary of the workspace built in `profile`.
pub fn rust_binary(profile: &str, name: &str) -> PathBuf {
    let path = target_dir().join(profile).join(name);
    assert!(
        path.is_file(),
        "{} is missing: cargo build --workspace{}",
        path.display(),
        if profile == "release" {
            " --release"
        } else {
            ""
        }
    );
    path
}

/// The controller-runtime peer, built with `go build` (seconds once Go's
/// build cache holds its modules): call it before timing a start.
pub fn controller_runtime_built() -> std::io::Result<PathBuf> {
    crate::go_built("bench/peers/controller-runtime", "controller-runtime-myapp")
}

/// A driver's process, stopped with SIGTERM when dropped.
pub struct Running {
    child: Child,
}

impl From<Child> for Running {
    fn from(child: Child) -> Self {
        Self { child }
    }
}

impl Running {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it has used so far.
    pub fn usage(&self) -> Usage {
        Usage::of(self.child.id())
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if !self.running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a process used of the machine.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User and system CPU time.
    pub cpu: Duration,
    /// Its peak resident memory (`VmHWM`), in KiB.
    pub peak_rss_kib: u64,
}

impl Usage {
    /// Process `pid`'s, from `/proc` (zeros if it is gone).
    pub fn of(pid: u32) -> Self {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        Self::parse(&stat, &status)
    }

    /// From the text of `/proc/PID/stat` and `/proc/PID/status`: utime and
    /// stime are the 14th and 15th fields of the first, in clock ticks of
    /// 10 ms (the fields are counted after the command, which may hold
    /// spaces, in parentheses).
    fn parse(stat: &str, status: &str) -> Self {
        let ticks = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect::<Vec<_>>())
            .and_then(|fields| {
                let utime: u64 = fields.get(11)?.parse().ok()?;
                let stime: u64 = fields.get(12)?.parse().ok()?;
                Some(utime + stime)
            })
            .unwrap_or(0);
        let peak_rss_kib = crate::kib_field(status, "VmHWM:");
        Self {
            cpu: Duration::from_millis(ticks * 10),
            peak_rss_kib,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_should_be_read_from_proc_whatever_the_command_holds() {
        let stat = "4242 (kube runtime) myapp) S 1 4242 4242 0 -1 4194560 2710 0 0 0 \
                    150 25 0 0 20 0 9 0 1000 123456 789 18446744073709551615";
        let status = "Name:\tkube\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n";
        assert_eq!(
            Usage::parse(stat, status),
            Usage {
                cpu: Duration::from_millis(1750),
                peak_rss_kib: 51200
            }
        );
        assert_eq!(Usage::parse("", ""), Usage::default());
    }

    #[test]
    fn this_process_should_have_used_something() {
        let usage = Usage::of(std::process::id());
        assert!(usage.peak_rss_kib > 0, "{usage:?}");
    }
}
