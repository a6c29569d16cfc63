//! `kubewasm dev`: the embedded API server (its simulated cluster on) and
//! the host in one process, with the CRDs found in the plugin directory
//! installed; serves until Ctrl-C.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kubewasm_apiserver::http::api::ApiConfig;
use kubewasm_engine::informer::InitialList;
use kubewasm_runtime::InstanceReuse;

use super::apiserver::Embedded;
use super::error::CliError;
use super::flags::{HostFlags, RuntimeFlags};
use super::process::{block_on, cluster, wait_for_shutdown};

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
        let cluster = cluster(Some(&kubeconfig_out)).await?;
        let client = cluster.client.clone();
        let mut crds = install_plugin_crds(&client).await?;
        crds.extend(install_crds(&client, &options.plugins).await?);
        let plugins: Vec<String> = kubewasm_engine::plugin_dir::scan(&options.plugins)
            .map(|listing| listing.plugins().map(|p| p.name.clone()).collect())
            .unwrap_or_default();
        eprintln!(
            "kubewasm dev: API server at {} (simulated cluster on)\n\
             \x20 plugins in {}: {}\n\
             \x20 CRDs installed: {}\n\
             \x20 export KUBECONFIG={}\n{}\
             Ctrl-C stops it.",
            embedded.url,
            options.plugins.display(),
            listed(&plugins),
            listed(&crds),
            kubeconfig_out.display(),
            tries(&options.plugins, &crds)
                .iter()
                .map(|line| format!("  {line}\n"))
                .collect::<String>(),
        );
        let result = crate::daemon::run(cluster, runtime, options, wait_for_shutdown()).await;
        embedded.stop().await?;
        result.map_err(CliError::from)
    })
}

/// `items` joined, or `none`.
fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

/// What to try with the plugins of `dir`: for each `NAME.demo.yaml` beside
/// them, the command that applies it and the commands its `# try: `
/// comment lines name; without any, a `kubectl get` of each CRD installed
/// but kubewasm's own.
fn tries(dir: &Path, crds: &[String]) -> Vec<String> {
    let mut demos: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".demo.yaml"))
        })
        .collect();
    demos.sort();
    let mut lines = Vec::new();
    for demo in demos {
        lines.push(format!("kubectl apply -f {}", demo.display()));
        let text = std::fs::read_to_string(&demo).unwrap_or_default();
        lines.extend(
            text.lines()
                .filter_map(|line| line.strip_prefix("# try: "))
                .map(str::to_owned),
        );
    }
    if lines.is_empty() {
        lines.extend(
            crds.iter()
                .filter(|crd| !crd.ends_with(".kubewasm.dev"))
                .map(|crd| format!("kubectl get {crd}")),
        );
    }
    lines
}

/// Applies the CustomResourceDefinitions of `Plugin` and `ClusterPlugin`,
/// and returns their names.
///
/// # Errors
/// [`CliError::Crd`].
pub async fn install_plugin_crds(client: &kube::Client) -> Result<Vec<String>, CliError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = Vec::new();
    for crd in kubewasm_engine::plugin_resource::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply("kubewasm-dev").force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|e| CliError::Crd {
            path: PathBuf::from("kubewasm crds"),
            source: Box::new(e),
        })?;
        installed.push(name);
    }
    Ok(installed)
}

/// Applies every CustomResourceDefinition among `dir`'s `*.yaml` files, and
/// returns their names.
///
/// # Errors
/// [`CliError::Crd`] naming the file.
pub async fn install_crds(client: &kube::Client, dir: &Path) -> Result<Vec<String>, CliError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CliError::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    paths.sort();
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<CustomResourceDefinition>(&()),
    );
    let mut installed = Vec::new();
    for path in paths {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| CliError::Crd {
            path: path.clone(),
            source,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| failed(Box::new(e)))?;
        let objects =
            kubewasm_runtime::replay::parse_objects(&text).map_err(|e| failed(Box::new(e)))?;
        for crd in objects
            .into_iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
        {
            let name = crd
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            api.patch(
                &name,
                &PatchParams::apply("kubewasm-dev").force(),
                &Patch::Apply(&crd),
            )
            .await
            .map_err(|e| failed(Box::new(e)))?;
            installed.push(name);
        }
    }
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_to_try_should_come_from_the_plugin_directory() {
        let dir = tempfile::tempdir().expect("dir");
        let crds = [
            "plugins.kubewasm.dev".to_owned(),
            "widgets.example.com".to_owned(),
        ];
        assert_eq!(
            tries(dir.path(), &crds),
            ["kubectl get widgets.example.com"]
        );
        std::fs::write(
            dir.path().join("widget.demo.yaml"),
            "# A widget.\n# try: kubectl get widgets\nkind: Widget\n",
        )
        .expect("written");
        assert_eq!(
            tries(dir.path(), &crds),
            [
                format!(
                    "kubectl apply -f {}",
                    dir.path().join("widget.demo.yaml").display()
                ),
                "kubectl get widgets".to_owned(),
            ]
        );
        assert!(tries(&dir.path().join("absent"), &[]).is_empty());
    }
}
