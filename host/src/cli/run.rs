//! `kubewasm run`: every plugin in a directory as a controller against a
//! cluster, until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use kubewasm_core::shard::ShardField;
use kubewasm_engine::informer::InitialList;
use kubewasm_engine::leader::LeaseConfig;
use kubewasm_engine::ring::RingConfig;
use kubewasm_runtime::InstanceReuse;

use super::error::CliError;
use super::flags::{HostFlags, RuntimeFlags, pod_namespace};
use super::process::{block_on, cluster, wait_for_shutdown};

/// `kubewasm run`'s flags.
#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The kubeconfig to use [default: $KUBECONFIG, ~/.kube/config, or
    /// the in-cluster configuration].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub(super) host: HostFlags,
    #[command(flatten)]
    runtime: RuntimeFlags,
    /// Grant a plugin with no grants file exactly what it declares.
    #[arg(long)]
    trust_declarations: bool,
    /// Reconcile only while holding the Lease (one active replica).
    #[arg(long, conflicts_with = "sharding")]
    leader_elect: bool,
    /// Join the replicas sharing `--leader-election-id` into a ring and
    /// reconcile only this replica's share of every plugin's primaries
    /// (each replica holds a member Lease; the hash space's slots move
    /// between replicas without overlap).
    #[arg(long)]
    sharding: bool,
    /// With --sharding: place primaries by the hash of their uid, or of
    /// their namespace (a namespace's objects stay on one replica).
    #[arg(long, value_enum, default_value_t = ShardBy::Uid)]
    shard_by: ShardBy,
    /// Namespace of the Lease [default: the pod's namespace in a
    /// cluster, else `default`].
    #[arg(long)]
    leader_election_namespace: Option<String>,
    /// Name of the Lease.
    #[arg(long, default_value = "kubewasm")]
    leader_election_id: String,
    /// How long the Lease holds without renewal, in seconds (renewals
    /// every 2/15 of it; a leader steps down after 2/3 of it).
    #[arg(long, default_value_t = 15)]
    lease_duration_seconds: u64,
    /// Get informers' lists as watch streams (`sendInitialEvents`), not
    /// paged lists: only for a server that serves them (Kubernetes 1.32+
    /// with `WatchList` on; `kubewasm dev` always does).
    #[arg(long)]
    streaming_lists: bool,
}

/// What `--sharding` places a primary by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ShardBy {
    /// `metadata.uid`.
    Uid,
    /// `metadata.namespace`.
    Namespace,
}

/// Runs the host until SIGTERM or Ctrl-C.
///
/// # Errors
/// [`CliError`] when the runtime, the client or the host fails.
pub(super) fn run(args: Args) -> Result<(), CliError> {
    let runtime = args
        .runtime
        .runtime(InstanceReuse::Reuse, Some(&args.host))?;
    let initial_list = if args.streaming_lists {
        InitialList::Streaming
    } else {
        InitialList::Paged
    };
    let mut options = args.host.options(
        args.trust_declarations,
        initial_list,
        args.runtime.cache_dir(),
    )?;
    let namespace = args
        .leader_election_namespace
        .clone()
        .unwrap_or_else(pod_namespace);
    let lease_duration = Duration::from_secs(args.lease_duration_seconds.max(1));
    if args.leader_elect {
        options.leader_election = Some(
            LeaseConfig::new(&namespace, &args.leader_election_id, &identity())
                .with_lease_duration(lease_duration),
        );
    }
    if args.sharding {
        let mut ring = RingConfig::new(
            &namespace,
            &args.leader_election_id,
            &identity(),
            lease_duration,
        );
        ring.field = match args.shard_by {
            ShardBy::Uid => ShardField::Uid,
            ShardBy::Namespace => ShardField::Namespace,
        };
        options.sharding = Some(ring);
    }
    block_on(async move {
        let cluster = cluster(args.kubeconfig.as_deref()).await?;
        crate::daemon::run(cluster, runtime, options, wait_for_shutdown()).await?;
        Ok(())
    })
}

/// This process's identity among Lease candidates: the host name and a
/// random suffix, as client-go's examples make it.
fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "kubewasm".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}
