//! `kubewasm apiserver`: the embedded Kubernetes API server alone, until
//! SIGTERM or Ctrl-C; and [`Embedded`], the server `dev` starts too.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kubewasm_apiserver::http::api::{Api, ApiConfig};
use kubewasm_apiserver::http::faults::{FaultSpecError, Faults};
use kubewasm_apiserver::http::server::ApiServer;
use kubewasm_apiserver::http::tls::Credentials;
use kubewasm_apiserver::simulation::{Simulation, Workloads};
use kubewasm_apiserver::store::private::write_private;
use kubewasm_apiserver::store::{DEFAULT_HISTORY, Store};

use super::error::CliError;
use super::process::{block_on, wait_for_shutdown};

/// `kubewasm apiserver`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Address to listen on; port 0 picks a free one (the kubeconfig says which).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write the kubeconfig that kubectl and kube-rs use as is.
    #[arg(long)]
    kubeconfig_out: PathBuf,
    /// Simulate a cluster's workloads: the built-in controllers
    /// (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
    /// EndpointSlices, volumes, disruption budgets', quotas' and
    /// autoscalers' status) and a kubelet on simulated Nodes running
    /// Pods through their phases (no container runs). README lists what
    /// is simulated.
    #[arg(long)]
    simulate_workloads: bool,
    /// How many simulated Nodes Pods are scheduled to (1 to 100).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=100),
          requires = "simulate_workloads")]
    nodes: u8,
    /// How long each step of a simulated Pod's life takes (scheduled,
    /// running, ready; a Job's Pod's run), in milliseconds: 1000 shows the
    /// steps as a real kubelet's, a few make Pods ready at once, as kwok's
    /// `fast` stages do.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=60_000),
          requires = "simulate_workloads")]
    pod_step_ms: u64,
    /// Keep state (objects, resource versions, credentials) in this
    /// directory across restarts; without it, state is in memory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Add this many milliseconds to every request before answering it
    /// (a client here then waits on round trips as against a remote
    /// cluster: for benchmarks).
    #[arg(long, default_value_t = 0)]
    request_latency_ms: u64,
    /// Serve KEP-5866 shard selectors (`shardSelector` on lists and
    /// watches); `false` ignores them, as a server without the feature
    /// does (the hosts then filter their shares themselves).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    shard_selectors: bool,
    /// Inject faults into what clients get, seeded so that a failing run
    /// can be repeated: comma-separated `name=value`, e.g.
    /// `seed=7,throttle=0.02,conflict=0.02,error-after=0.01,cut=0.01,expire=0.05`.
    /// Faults: throttle (429 with Retry-After), conflict (409), error
    /// (500), timeout (held, then 504), each before a write is applied;
    /// error-after and timeout-after once it was; cut (a watch stream ends
    /// after an event), expire (410 for a watch from a resourceVersion),
    /// pause (a request answered late). Settings: seed, retry-after
    /// (seconds), hold and pause-for (250ms, 2s). SECURITY.md says more.
    #[arg(long, value_name = "SPEC", value_parser = faults)]
    faults: Option<Arc<Faults>>,
}

fn faults(spec: &str) -> Result<Arc<Faults>, FaultSpecError> {
    spec.parse().map(Arc::new)
}

/// Serves the embedded API server until SIGTERM or Ctrl-C.
///
/// # Errors
/// [`CliError::Apiserver`] says what failed.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let config = ApiConfig {
        simulate_workloads: args
            .simulate_workloads
            .then_some(Duration::from_millis(args.pod_step_ms)),
        request_latency: Duration::from_millis(args.request_latency_ms),
        shard_selectors: args.shard_selectors,
        faults: args.faults,
        ..ApiConfig::default()
    };
    block_on(async {
        let embedded = Embedded::start(
            args.listen,
            &args.kubeconfig_out,
            config,
            args.data_dir.as_deref(),
            usize::from(args.nodes),
        )
        .await?;
        eprintln!(
            "kubewasm apiserver: serving {}; kubeconfig in {}",
            embedded.url,
            args.kubeconfig_out.display()
        );
        wait_for_shutdown().await;
        eprintln!("kubewasm apiserver: shutting down");
        embedded.stop().await
    })
}

/// A running embedded API server and what it needs to be stopped cleanly.
pub(super) struct Embedded {
    server: ApiServer,
    /// The built-in controllers (the workload ones when simulated).
    simulation: Simulation,
    store: Store,
    /// Where it serves (`https://ADDRESS`).
    pub(super) url: String,
}

impl Embedded {
    /// Starts the embedded API server and writes its kubeconfig.
    ///
    /// # Errors
    /// [`CliError::Apiserver`] or [`CliError::Write`] says what failed.
    pub(super) async fn start(
        listen: SocketAddr,
        kubeconfig_out: &Path,
        config: ApiConfig,
        data_dir: Option<&Path>,
        nodes: usize,
    ) -> Result<Self, CliError> {
        let (store, credentials) = match data_dir {
            Some(dir) => (
                Store::open(dir, DEFAULT_HISTORY).map_err(failed("open the data directory"))?,
                Credentials::load_or_generate(dir, listen.ip())
                    .map_err(failed("load the credentials"))?,
            ),
            None => (
                Store::default(),
                Credentials::generate(listen.ip()).map_err(failed("generate the credentials"))?,
            ),
        };
        kubewasm_apiserver::store::seed::seed(&store).map_err(failed("seed the store"))?;
        let api = Api::new(store.clone(), config);
        let workloads = api
            .config()
            .simulate_workloads
            .map(|delay| Workloads { nodes, delay });
        let simulation = Simulation::start(&api, workloads);
        let server = ApiServer::start(listen, api, Some(credentials.clone()))
            .await
            .map_err(failed("listen"))?;
        let url = format!("https://{}", server.addr());
        // The kubeconfig holds the admin token: owner-only, written atomically.
        write_private(kubeconfig_out, credentials.kubeconfig(&url).as_bytes()).map_err(
            |source| CliError::Write {
                path: kubeconfig_out.to_owned(),
                source,
            },
        )?;
        Ok(Self {
            server,
            simulation,
            store,
            url,
        })
    }

    /// Stops serving and flushes the store.
    ///
    /// # Errors
    /// [`CliError::Apiserver`] when the store cannot be flushed.
    pub(super) async fn stop(self) -> Result<(), CliError> {
        drop(self.simulation);
        drop(self.server);
        self.store.flush().await.map_err(failed("flush the store"))
    }
}

/// Turns an error of the embedded API server into a [`CliError`] saying
/// what it was doing.
fn failed<E: std::error::Error + Send + Sync + 'static>(
    during: &'static str,
) -> impl FnOnce(E) -> CliError {
    move |e| CliError::Apiserver {
        during,
        source: Box::new(e),
    }
}
