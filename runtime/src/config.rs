//! What the runtime and each plugin are configured with: [`RuntimeConfig`]
//! (deadline, memory, the instance budget, reuse, tiers, output limits) and
//! [`LoadOptions`] (the cluster's types, the operator's grants, a plugin's
//! instance name and tighter limits).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::grants::OperatorGrants;
use crate::mapper::RestMapper;

use crate::limits::{CallLimits, Limits};

/// Whether calls reuse warm instances or get a fresh one each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InstanceReuse {
    /// Reuse warm instances; a trapped one is dropped.
    #[default]
    Reuse,
    /// A fresh instance per call.
    Fresh,
}

/// Settings of the [`Runtime`].
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    pub(super) deadline: Duration,
    pub(super) memory_limit: usize,
    pub(super) cache_dir: Option<PathBuf>,
    pub(super) instance_reuse: InstanceReuse,
    max_instances: Option<u32>,
    max_warm_instances: Option<u32>,
    warm_memory: Option<usize>,
    pub(super) instance_wait: Duration,
    pub(super) pooling: bool,
    limits: Limits,
    pub(super) baseline: bool,
    pub(super) record_reads: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(1),
            memory_limit: 256 << 20,
            cache_dir: None,
            instance_reuse: InstanceReuse::Reuse,
            max_instances: None,
            max_warm_instances: None,
            warm_memory: None,
            instance_wait: Duration::from_secs(30),
            pooling: true,
            limits: Limits::default(),
            baseline: false,
            record_reads: true,
        }
    }
}

impl RuntimeConfig {
    /// Whether each reconcile's reads are recorded (on by default): the
    /// engine skips a call whose reads and other inputs are unchanged
    /// ([`crate::read_set`]); off, no call is ever skipped. What recording
    /// costs is in BENCHMARKS.md.
    #[must_use]
    pub fn record_reads(mut self, enabled: bool) -> Self {
        self.record_reads = enabled;
        self
    }

    /// What a call may spend and return unless a plugin is held tighter.
    pub(super) fn call_limits(&self) -> CallLimits {
        CallLimits {
            deadline: self.deadline,
            memory: self.memory_limit,
            output: self.limits,
        }
    }

    /// CPU deadline of one call (default 1 s).
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Largest linear memory a plugin instance may grow to (default 256 MiB).
    #[must_use]
    pub fn memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Directory of precompiled components (default: none, compile at load).
    #[must_use]
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Instance reuse policy (default [`InstanceReuse::Reuse`]).
    #[must_use]
    pub fn instance_reuse(mut self, reuse: InstanceReuse) -> Self {
        self.instance_reuse = reuse;
        self
    }

    /// Most component instances alive at once across plugins, warm or in a
    /// call (default: [`default_max_instances`] of the memory limit).
    #[must_use]
    pub fn max_instances(mut self, count: u32) -> Self {
        self.max_instances = Some(count.max(1));
        self
    }

    /// The instance budget this configuration gives.
    pub fn instances(&self) -> u32 {
        self.max_instances
            .unwrap_or_else(|| default_max_instances(self.memory_limit))
    }

    /// Most instances kept when a call ends, across plugins, counting
    /// those in calls (default: the whole budget); past it the least
    /// recently used idle one is dropped. What bounds warm instances by
    /// default is their memory ([`RuntimeConfig::warm_memory`]).
    #[must_use]
    pub fn max_warm_instances(mut self, count: u32) -> Self {
        self.max_warm_instances = Some(count);
        self
    }

    /// The idle cap this configuration gives (never above the budget).
    pub fn warm_instances(&self) -> u32 {
        let budget = self.instances();
        self.max_warm_instances.map_or(budget, |n| n.min(budget))
    }

    /// Most bytes of linear memory the warm (idle) instances of every
    /// plugin hold between them (default [`default_warm_memory`]); past it
    /// the least recently used idle one is dropped. A warm instance makes a
    /// call cheaper (no instantiation, no language runtime started again:
    /// a warm call of the JavaScript example costs about a fifth of one on
    /// a fresh instance) and costs its memory while it waits; a plugin with
    /// no work left lets its instances go whatever this allows.
    #[must_use]
    pub fn warm_memory(mut self, bytes: usize) -> Self {
        self.warm_memory = Some(bytes);
        self
    }

    /// The warm memory this configuration gives.
    pub fn warm_bytes(&self) -> usize {
        self.warm_memory.unwrap_or_else(default_warm_memory)
    }

    /// Longest a call waits for an instance slot when every one is in a
    /// call (default 30 s).
    #[must_use]
    pub fn instance_wait(mut self, wait: Duration) -> Self {
        self.instance_wait = wait;
        self
    }

    /// Output limits of every call (default [`Limits::default`]).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether a component not precompiled yet first runs compiled by the
    /// baseline compiler (Winch: some 25 times faster to compile, slower to
    /// run) until [`Plugin::optimized`] has its optimized code (default
    /// false: what the host runs, `kubewasm run` and `dev`, turns it on).
    #[must_use]
    pub fn baseline(mut self, enabled: bool) -> Self {
        self.baseline = enabled;
        self
    }

    /// Whether to use the pooling allocator (default true).
    #[must_use]
    pub fn pooling(mut self, enabled: bool) -> Self {
        self.pooling = enabled;
        self
    }
}

/// What a plugin is loaded against: the cluster's types and the operator's
/// grants.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub(super) mapper: Arc<RestMapper>,
    pub(super) grants: OperatorGrants,
    pub(super) name: Option<String>,
    pub(super) limits: Option<CallLimits>,
}

impl LoadOptions {
    /// Loads against the types `mapper` knows, with every declared verb
    /// granted (writes to system namespaces excepted).
    pub fn new(mapper: Arc<RestMapper>) -> Self {
        Self {
            mapper,
            grants: OperatorGrants::unrestricted(),
            name: None,
            limits: None,
        }
    }

    /// Runs the plugin as `name`, its instance name, instead of the name it
    /// declares: the field manager (`kubewasm-<name>`), the managed finalizer
    /// (`kubewasm.dev/<name>`), logs, metrics and denials all use it, so one
    /// component can run as several plugins. It must be a DNS label, or a
    /// tenant's `NAMESPACE.NAME` (two DNS labels, 63 characters at most):
    /// see [`is_plugin_name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Narrows plugins to the operator's grants.
    #[must_use]
    pub fn grants(mut self, grants: OperatorGrants) -> Self {
        self.grants = grants;
        self
    }

    /// Holds the plugin's calls to `limits`, within the runtime's own
    /// ([`CallLimits::within`]).
    #[must_use]
    pub fn limits(mut self, limits: CallLimits) -> Self {
        self.limits = Some(limits);
        self
    }
}

/// Whether `name` may name a plugin: a DNS label (a plugin of the
/// directory, a `ClusterPlugin`), or `NAMESPACE.NAME`, two DNS labels (a
/// tenant's `Plugin`; no other plugin's name has a dot, so none collides
/// with it), 63 characters at most either way: the managed finalizer
/// `kubewasm.dev/<name>` is a qualified name.
pub fn is_plugin_name(name: &str) -> bool {
    use kubewasm_core::validation::is_dns_label;
    name.len() <= 63
        && match name.split_once('.') {
            None => is_dns_label(name),
            Some((namespace, rest)) => is_dns_label(namespace) && is_dns_label(rest),
        }
}

/// The default instance budget: as many instances grown to `memory_limit`
/// as the memory this process may use holds (the machine's, or its cgroup's
/// limit if lower), at least [`MIN_INSTANCES`], at most [`MAX_INSTANCES`].
pub fn default_max_instances(memory_limit: usize) -> u32 {
    let memory = machine_memory().unwrap_or(4 << 30);
    let fit = memory / (memory_limit.max(1 << 20) as u64);
    u32::try_from(fit)
        .unwrap_or(MAX_INSTANCES)
        .clamp(MIN_INSTANCES, MAX_INSTANCES)
}

/// The default warm memory: a sixteenth of the memory this process may
/// use (the machine's, or its cgroup's limit if lower), at least 64 MiB:
/// 1.5 GiB on a machine of 24 GiB, room for some four hundred warm
/// instances of the JavaScript example.
pub fn default_warm_memory() -> usize {
    let memory = machine_memory().unwrap_or(4 << 30) / 16;
    usize::try_from(memory).unwrap_or(usize::MAX).max(64 << 20)
}

/// The smallest default budget.
pub const MIN_INSTANCES: u32 = 16;

/// The largest default budget (the pooling allocator reserves address
/// space for each).
pub const MAX_INSTANCES: u32 = 1024;

/// Bytes of memory this process may use: the machine's (`MemTotal`), or its
/// cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) when lower.
pub(super) fn machine_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?
        .saturating_mul(1024);
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| std::fs::read_to_string(path).ok())
    .find_map(|text| text.trim().parse::<u64>().ok());
    Some(cgroup.map_or(total, |limit| limit.min(total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_instance_budget_should_follow_memory_never_a_constant() {
        let memory = machine_memory().expect("/proc/meminfo is readable here");
        let at_default = default_max_instances(256 << 20);
        let expected = u32::try_from(memory / (256 << 20)).unwrap_or(MAX_INSTANCES);
        assert_eq!(at_default, expected.clamp(MIN_INSTANCES, MAX_INSTANCES));
        // A smaller limit fits more instances, a huge one the floor.
        assert!(default_max_instances(16 << 20) >= at_default);
        assert_eq!(default_max_instances(1 << 45), MIN_INSTANCES);
        assert_eq!(RuntimeConfig::default().max_instances(5).instances(), 5);
    }
}
