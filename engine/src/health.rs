//! Whether the engine is wedged: what `/healthz` answers.
//!
//! # Rules
//! `/healthz` fails (503, saying why) while
//! - a guest call has run longer than its plugin's deadline and
//!   [`CALL_MARGIN`]: the deadline interrupts a call (epoch interruption),
//!   so one still running holds a worker that will not come back;
//! - an informer's watch has kept failing (retried with backoff, no event
//!   between) for [`WATCH_DOWN`]: its cache no longer follows the cluster.
//!
//! Nothing else fails it: an API server that refuses writes, a plugin
//! that traps, a queue that grows are not mended by restarting the process
//! (metrics and alerts tell them). `/readyz` is apart: caches synced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::informer::Informers;
use crate::listing::Key;

/// How long past its plugin's deadline a guest call may run before the
/// engine is called wedged.
pub const CALL_MARGIN: Duration = Duration::from_secs(30);

/// How long an informer's watch may fail with no event before the engine
/// is called wedged.
pub const WATCH_DOWN: Duration = Duration::from_secs(300);

/// The guest calls under way (see the module documentation).
#[derive(Debug, Default)]
pub struct Calls {
    running: Mutex<HashMap<u64, Running>>,
    next: AtomicU64,
}

#[derive(Debug)]
struct Running {
    plugin: String,
    key: Key,
    /// When it is wedged: its start, its deadline and the margin.
    wedged_at: Instant,
}

/// A guest call under way, until dropped.
#[derive(Debug)]
pub struct Call {
    calls: Arc<Calls>,
    id: u64,
}

impl Drop for Call {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.id);
    }
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call of `plugin` for `key` starts now, interrupted after
    /// `deadline`.
    pub fn start(self: &Arc<Self>, plugin: &str, key: &Key, deadline: Duration) -> Call {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let running = Running {
            plugin: plugin.to_owned(),
            key: Arc::clone(key),
            wedged_at: Instant::now() + deadline + CALL_MARGIN,
        };
        self.lock().insert(id, running);
        Call {
            calls: Arc::clone(self),
            id,
        }
    }

    /// The longest-running call past its deadline and margin, told.
    fn stuck(&self) -> Option<String> {
        let now = Instant::now();
        self.lock()
            .values()
            .filter(|call| call.wedged_at <= now)
            .min_by_key(|call| call.wedged_at)
            .map(|call| {
                format!(
                    "a call of plugin {} for {} has run {:?} past its deadline",
                    call.plugin,
                    call.key,
                    now - call.wedged_at + CALL_MARGIN
                )
            })
    }
}

/// Why the engine is wedged, if it is (see the module documentation).
pub fn wedged(calls: &Calls, informers: &Informers) -> Option<String> {
    calls.stuck().or_else(|| {
        informers.running().into_iter().find_map(|(key, store)| {
            let down = store.watch_down_for().filter(|down| *down >= WATCH_DOWN)?;
            Some(format!(
                "the watch of {} (namespace {:?}, selector {:?}) has failed for {down:?}",
                key.resource, key.namespace, key.selector
            ))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::resource::ObjectKey;

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_and_margin_should_wedge_the_engine_until_it_ends() {
        let calls = Arc::new(Calls::default());
        let key: Key = Arc::new(ObjectKey::namespaced("default", "demo"));
        let informers = Informers::new(
            kube::Client::try_from(kube::Config::new(
                "http://127.0.0.1:1".parse().expect("url"),
            ))
            .expect("client"),
        );
        let slow = calls.start("myapp", &key, Duration::from_secs(2));
        let quick = calls.start("other", &key, Duration::from_secs(60));
        assert_eq!(wedged(&calls, &informers), None, "within its deadline");
        tokio::time::advance(Duration::from_secs(2) + CALL_MARGIN - Duration::from_millis(1)).await;
        assert_eq!(wedged(&calls, &informers), None, "within the margin");
        tokio::time::advance(Duration::from_millis(1)).await;
        let why = wedged(&calls, &informers).expect("wedged");
        assert!(
            why.contains("myapp") && why.contains("default/demo"),
            "{why}"
        );
        drop(quick);
        assert!(
            wedged(&calls, &informers).is_some(),
            "the stuck one still runs"
        );
        drop(slow);
        assert_eq!(wedged(&calls, &informers), None, "it ended");
        assert!(calls.lock().is_empty());
    }
}
