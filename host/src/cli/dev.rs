//! `kubewasm dev`: the embedded API server (its simulated cluster on) and
//! the host in one process, with the CRDs found in the plugin directory
//! installed; serves until Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kubewasm_apiserver::http::api::ApiConfig;
use kubewasm_engine::informer::InitialList;
use kubewasm_runtime::InstanceReuse;

use super::apiserver::Embedded;
use super::flags::{HostFlags, RuntimeFlags};
use super::{CliError, block_on, client, wait_for_shutdown};

/// `kubewasm dev`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Address of the API server; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write the kubeconfig for kubectl.
    #[arg(long, default_value = "target/kubewasm-dev.kubeconfig")]
    kubeconfig_out: PathBuf,
    /// How many simulated Nodes the dev cluster's Pods are scheduled to
    /// (1 to 100).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=100))]
    nodes: u8,
    #[command(flatten)]
    pub(super) host: HostFlags,
    #[command(flatten)]
    runtime: RuntimeFlags,
}

/// Runs the embedded API server and the host until Ctrl-C.
///
/// # Errors
/// [`CliError`] when the server, the runtime or the host fails.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let runtime = args
        .runtime
        .runtime(InstanceReuse::Reuse, Some(&args.host))?;
    // Every plugin is trusted with what it declares; the embedded server
    // streams lists.
    let options = args
        .host
        .options(true, InitialList::Streaming, args.runtime.cache_dir())?;
    let kubeconfig_out = args.kubeconfig_out;
    if let Some(parent) = kubeconfig_out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(|source| CliError::Write {
            path: parent.to_owned(),
            source,
        })?;
    }
    block_on(async move {
        let config = ApiConfig {
            simulate_workloads: Some(Duration::from_secs(1)),
            ..ApiConfig::default()
        };
        let embedded = Embedded::start(
            args.listen,
            &kubeconfig_out,
            config,
            None,
            usize::from(args.nodes),
        )
        .await?;
        let client = client(Some(&kubeconfig_out)).await?;
        let mut crds = crate::daemon::install_plugin_crds(&client).await?;
        crds.extend(crate::daemon::install_crds(&client, &options.plugins).await?);
        eprintln!(
            "kubewasm dev: API server at {} (simulated cluster on); CRDs installed: {}\n\
             \x20 export KUBECONFIG={}\n\
             \x20 kubectl apply -f plugins/myapp/demo.yaml\n\
             \x20 kubectl get myapps,deployments,services\n\
             \x20 kubectl get replicasets,pods\n\
             \x20 kubectl get myapp demo -o jsonpath='{{.status}}'\n\
             Ctrl-C stops it.",
            embedded.url,
            if crds.is_empty() {
                "none".to_owned()
            } else {
                crds.join(", ")
            },
            kubeconfig_out.display(),
        );
        let result = crate::daemon::run(client, runtime, options, wait_for_shutdown()).await;
        embedded.stop().await?;
        result.map_err(CliError::from)
    })
}
