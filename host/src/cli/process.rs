//! What every command does with the process: read files, run an async
//! runtime, reach a cluster, wait for a signal.

use std::path::PathBuf;
use std::time::Duration;

use super::error::{BoxError, CliError};

/// A text file's contents.
pub(super) fn read_text(path: PathBuf) -> Result<String, CliError> {
    std::fs::read_to_string(&path).map_err(|source| CliError::Read { path, source })
}

/// A file's bytes.
pub(super) fn read_bytes(path: &PathBuf) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|source| CliError::Read {
        path: path.clone(),
        source,
    })
}

/// Runs `future` on a new multi-threaded tokio runtime.
pub(super) fn block_on(future: impl Future<Output = Result<(), CliError>>) -> Result<(), CliError> {
    block_on_value(future)?
}

/// How long a command's end waits for blocking work nothing awaits any
/// more: a plugin's optimizing compile still running (a tier-up, tens of
/// seconds for a large component; its result would be dropped, and the
/// compiled cache is written whole or not at all). Without a bound the
/// process outlives SIGTERM by that long, past a Pod's grace period.
const LEFT_BEHIND: Duration = Duration::from_secs(1);

/// Runs `future` on a new multi-threaded tokio runtime; its output. The
/// runtime's blocking work left when `future` ends is given
/// [`LEFT_BEHIND`], then abandoned.
pub(super) fn block_on_value<T>(future: impl Future<Output = T>) -> Result<T, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::AsyncRuntime)?;
    let value = runtime.block_on(future);
    runtime.shutdown_timeout(LEFT_BEHIND);
    Ok(value)
}

/// The cluster of `kubeconfig`, or of the default configuration.
pub(super) async fn cluster(
    kubeconfig: Option<&std::path::Path>,
) -> Result<crate::daemon::Cluster, CliError> {
    let config = config(kubeconfig).await?;
    let host = config
        .cluster_url
        .authority()
        .map(ToString::to_string)
        .unwrap_or_default();
    let client = kube::Client::try_from(config).map_err(|e| CliError::Client(e.into()))?;
    Ok(crate::daemon::Cluster { client, host })
}

/// The configuration of `kubeconfig`, or the default one.
async fn config(kubeconfig: Option<&std::path::Path>) -> Result<kube::Config, CliError> {
    let failed = |e: BoxError| CliError::Client(e);
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| failed(e.into()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| failed(e.into()))?
        }
        None => kube::Config::infer().await.map_err(|e| failed(e.into()))?,
    };
    Ok(config)
}

/// Resolves on SIGTERM or Ctrl-C.
pub(super) async fn wait_for_shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
