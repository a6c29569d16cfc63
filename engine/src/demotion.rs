//! Calls of a plugin that ran out its deadline or its memory run, for a
//! while, at the lowest CPU priority.
//!
//! The host's workers bound how many calls run at once, and fair queueing
//! decides whose; neither bounds what a running call costs the machine. A
//! call that loops to its deadline holds a core for all of it, and a tenant
//! whose calls all do (each failure retried, new keys coming) holds as many
//! cores as it may run calls at once: on a node of two cores, every other
//! tenant's latency pays for it. So once a call of a plugin ends by its
//! deadline or its memory limit, the plugin is **demoted** for
//! [`DEMOTED_FOR`] after that call: its calls run on threads of their own
//! at nice 19, which the kernel runs when no thread of the host at the
//! normal priority wants the CPU (as a cgroup's `cpu.weight` would share
//! it). Its calls still run, one each as before, under the same limits;
//! the deadline is wall-clock, so a demoted plugin on a busy host may
//! reach it sooner in CPU time, and stays demoted while it does.
//!
//! Where the thread priority cannot be set (a seccomp profile refusing
//! `setpriority`), demoted calls run on those threads at the normal
//! priority, and the host says so once.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use kubewasm_runtime::{CallError, ReconcileError};

/// How long a plugin stays demoted after a call of it ran out its deadline
/// or its memory.
pub const DEMOTED_FOR: Duration = Duration::from_secs(60);

/// The nice value of demoted calls' threads: the lowest priority.
const NICE: i32 = 19;

/// The demoted plugins and the threads their calls run on (see the module
/// documentation).
pub struct Demotion {
    /// Until when each demoted plugin is.
    until: Mutex<HashMap<String, Instant>>,
    /// A runtime whose blocking threads run at [`NICE`], started when a
    /// demoted plugin first calls (`None` inside: it could not be);
    /// taken on drop.
    low: std::sync::OnceLock<Option<tokio::runtime::Runtime>>,
}

impl Default for Demotion {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Demotion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Demotion")
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

impl Demotion {
    /// No plugin demoted; the low-priority threads started on demand.
    pub fn new() -> Self {
        Self {
            until: Mutex::default(),
            low: std::sync::OnceLock::new(),
        }
    }

    /// The low-priority runtime, started on first use.
    fn low(&self) -> Option<&tokio::runtime::Runtime> {
        self.low
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("kubewasm-demoted")
                    .on_thread_start(lower_priority)
                    .build()
                    .inspect_err(|error| {
                        tracing::warn!(%error, "demoted calls run on the host's threads: no threads of their own");
                    })
                    .ok()
            })
            .as_ref()
    }

    /// Demotes `plugin` for [`DEMOTED_FOR`] from now.
    pub fn demote(&self, plugin: &str) {
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if !until.contains_key(plugin) {
            tracing::info!(
                plugin,
                "ran out its deadline or memory: its calls run at the lowest CPU priority"
            );
        }
        until.insert(plugin.to_owned(), Instant::now() + DEMOTED_FOR);
    }

    /// Demotes `plugin` if `error`, the end of one of its calls, is its
    /// deadline or its memory limit.
    pub fn after(&self, plugin: &str, error: &ReconcileError) {
        if let ReconcileError::Call(
            CallError::DeadlineExceeded { .. } | CallError::MemoryExhausted { .. },
        ) = error
        {
            self.demote(plugin);
        }
    }

    /// Whether `plugin` is demoted now (forgetting it once it is not).
    pub fn demoted(&self, plugin: &str) -> bool {
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        match until.get(plugin) {
            Some(at) if *at > Instant::now() => true,
            Some(_) => {
                until.remove(plugin);
                false
            }
            None => false,
        }
    }

    /// Runs `call`, a call of `plugin`, on a blocking thread: a low-priority
    /// one if the plugin is demoted.
    pub fn spawn_blocking<R: Send + 'static>(
        &self,
        plugin: &str,
        call: impl FnOnce() -> R + Send + 'static,
    ) -> tokio::task::JoinHandle<R> {
        match self.demoted(plugin).then(|| self.low()).flatten() {
            Some(low) => low.spawn_blocking(call),
            None => tokio::task::spawn_blocking(call),
        }
    }
}

impl Drop for Demotion {
    fn drop(&mut self) {
        // Dropped from within the host's runtime: not waited for.
        if let Some(low) = self.low.take().flatten() {
            low.shutdown_background();
        }
    }
}

/// Sets the calling thread's nice value to [`NICE`] (on Linux the nice
/// value is a thread's own).
fn lower_priority() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if let Err(error) = rustix::process::setpriority_process(None, NICE) {
        WARNED.call_once(|| {
            tracing::warn!(%error, "demoted calls run at the normal CPU priority: setpriority failed");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_demoted_plugins_calls_should_run_at_the_lowest_priority_until_it_expires() {
        let demotion = Demotion::new();
        let nice = || rustix::process::getpriority_process(None).expect("getpriority");
        let normal = demotion.spawn_blocking("p", nice).await.expect("ran");
        demotion.demote("p");
        assert!(demotion.demoted("p") && !demotion.demoted("q"));
        assert_eq!(demotion.spawn_blocking("p", nice).await.expect("ran"), NICE);
        assert_eq!(
            demotion.spawn_blocking("q", nice).await.expect("ran"),
            normal,
            "another plugin's calls keep their priority"
        );
        demotion
            .until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert("p".into(), Instant::now());
        assert!(!demotion.demoted("p"), "expired");
        assert_eq!(
            demotion.spawn_blocking("p", nice).await.expect("ran"),
            normal
        );
    }
}
