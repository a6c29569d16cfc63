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
//!
//! The other calls run on threads of their own too, at most as many as the
//! host's workers (the calls it runs at once): tokio's shared blocking pool
//! starts a thread whenever none is idle at the instant a task is handed
//! over, so a stream of short calls, each handed over as the last ends,
//! grew it to some 130 threads for 50 plugins (each keeping its stack's
//! touched pages and its malloc cache until ten seconds idle), and 50 idle
//! plugins held 1.4 times the memory of one where, bounded, they hold 1.2.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use kubewasm_runtime::{CallError, ReconcileError};

/// How long a plugin stays demoted after a call of it ran out its deadline
/// or its memory.
pub const DEMOTED_FOR: Duration = Duration::from_secs(60);

/// The nice value of demoted calls' threads: the lowest priority.
const NICE: i32 = 19;

/// The demoted plugins and the threads calls run on (see the module
/// documentation).
pub struct Demotion {
    /// Until when each demoted plugin is.
    until: Mutex<HashMap<String, Instant>>,
    /// The threads calls run on at most.
    threads: usize,
    /// A runtime whose blocking threads, [`Self::threads`] at most, run
    /// the calls of plugins not demoted, started on first use (`None`
    /// inside: it could not be, and they run on the host's blocking pool);
    /// taken on drop.
    normal: std::sync::OnceLock<Option<tokio::runtime::Runtime>>,
    /// A runtime whose blocking threads run at [`NICE`], started when a
    /// demoted plugin first calls (`None` inside: it could not be);
    /// taken on drop.
    low: std::sync::OnceLock<Option<tokio::runtime::Runtime>>,
}

impl std::fmt::Debug for Demotion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Demotion")
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

impl Demotion {
    /// No plugin demoted; calls on at most `threads` threads (the host's
    /// workers), started on demand.
    pub fn new(threads: usize) -> Self {
        Self {
            until: Mutex::default(),
            threads: threads.max(1),
            normal: std::sync::OnceLock::new(),
            low: std::sync::OnceLock::new(),
        }
    }

    /// The runtime of the calls of plugins not demoted, started on first use.
    fn normal(&self) -> Option<&tokio::runtime::Runtime> {
        self.normal
            .get_or_init(|| {
                calls_runtime(
                    tokio::runtime::Builder::new_multi_thread()
                        .max_blocking_threads(self.threads)
                        .thread_name("kubewasm-call"),
                )
            })
            .as_ref()
    }

    /// The low-priority runtime, started on first use.
    fn low(&self) -> Option<&tokio::runtime::Runtime> {
        self.low
            .get_or_init(|| {
                calls_runtime(
                    tokio::runtime::Builder::new_multi_thread()
                        .max_blocking_threads(self.threads)
                        .thread_name("kubewasm-demoted")
                        .on_thread_start(lower_priority),
                )
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

    /// Runs `call`, a call of `plugin`, on a thread of the calls: a
    /// low-priority one if the plugin is demoted.
    pub fn spawn_blocking<R: Send + 'static>(
        &self,
        plugin: &str,
        call: impl FnOnce() -> R + Send + 'static,
    ) -> tokio::task::JoinHandle<R> {
        let runtime = if self.demoted(plugin) {
            self.low()
        } else {
            self.normal()
        };
        // The call runs in its caller's span (a reconcile's guest call is
        // its child in a trace).
        let span = tracing::Span::current();
        let call = move || span.in_scope(call);
        match runtime {
            Some(runtime) => runtime.spawn_blocking(call),
            None => tokio::task::spawn_blocking(call),
        }
    }
}

impl Drop for Demotion {
    fn drop(&mut self) {
        // Dropped from within the host's runtime: not waited for.
        for runtime in [self.normal.take(), self.low.take()]
            .into_iter()
            .flatten()
            .flatten()
        {
            runtime.shutdown_background();
        }
    }
}

/// A runtime for calls (its one worker idle: calls run on its blocking
/// threads); `None`, said once, if the system gives no thread.
fn calls_runtime(builder: &mut tokio::runtime::Builder) -> Option<tokio::runtime::Runtime> {
    builder
        .worker_threads(1)
        .build()
        .inspect_err(|error| {
            tracing::warn!(%error, "calls run on the host's blocking threads: no threads of their own");
        })
        .ok()
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
    use std::sync::Arc;

    #[tokio::test]
    async fn a_demoted_plugins_calls_should_run_at_the_lowest_priority_until_it_expires() {
        let demotion = Demotion::new(2);
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

    /// Two workers each handing over 500 short calls, one as the last
    /// ends: on tokio's shared blocking pool they ran on dozens of threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_should_run_on_no_more_threads_than_the_workers() {
        let demotion = Arc::new(Demotion::new(2));
        let threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (demotion, threads) = (Arc::clone(&demotion), Arc::clone(&threads));
                tokio::spawn(async move {
                    for _ in 0..500 {
                        let threads = Arc::clone(&threads);
                        demotion
                            .spawn_blocking("p", move || {
                                threads
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner)
                                    .insert(std::thread::current().id());
                            })
                            .await
                            .expect("ran");
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.await.expect("worker");
        }
        let used = threads.lock().unwrap_or_else(PoisonError::into_inner).len();
        assert!(used <= 2, "{used} threads");
    }
}
