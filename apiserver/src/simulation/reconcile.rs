//! The loop every simulated controller runs, as kube-runtime's
//! `Controller` does for a real one, reduced to one process and one store:
//!
//! 1. **Watch**: every change of the store is mapped to keys of the
//!    controller's primary type ([`Reconciler::keys`]): the object itself,
//!    or the controller named in its `ownerReferences`, or what the
//!    reconciler says (a Pod to the Services selecting it).
//! 2. **Queue**: a key waits once however often it is named (dedup), in
//!    the order first named; a key asked back later waits in a timer list,
//!    once too, for the earliest time it was asked back for (as client-go's
//!    delaying queue keeps a key's earliest `AddAfter`).
//! 3. **Reconcile**: one key at a time, against the store's current state
//!    (level-triggered: what changed does not matter, what is does).
//!    [`Next::Done`] forgets the key, [`Next::After`] asks it back, an
//!    error asks it back after [`RETRY`].
//!
//! When the watch falls behind the store's history, every primary object
//! is queued again (a relist).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use kubewasm_core::ObjectKey;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::client::{ClientError, Kind};
use crate::store::{Event, ListAt, Store};

/// How long a failed reconcile waits before it is tried again.
pub const RETRY: Duration = Duration::from_secs(1);

/// How long the key of a reconcile that panicked waits.
const PANIC_RETRY: Duration = Duration::from_secs(60);

/// What a reconcile asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing more until something changes.
    Done,
    /// Come back after this long (a kubelet's container run, a schedule).
    After(Duration),
}

/// A simulated controller.
pub trait Reconciler: Send + Sync + 'static {
    /// The type it reconciles.
    fn primary(&self) -> Kind;

    /// The keys of the primary type that `event` concerns: by default the
    /// object itself, or its controlling owner of the primary kind.
    fn keys(&self, _store: &Store, event: &Event) -> Vec<ObjectKey> {
        own_or_owner(self.primary(), event)
    }

    /// Brings the world in line with the object at `key` (gone or not).
    fn reconcile(&self, key: &ObjectKey) -> impl Future<Output = Result<Next, ClientError>> + Send;
}

/// The key `event` names of the `primary` type: its object's own, or that
/// of its controlling owner of that kind.
pub fn own_or_owner(primary: Kind, event: &Event) -> Vec<ObjectKey> {
    if event.resource == primary.key() {
        return ObjectKey::of(&event.object).into_iter().collect();
    }
    controller_of(&event.object, primary.kind)
        .into_iter()
        .collect()
}

/// The key of the owner of `object` that controls it, if of `kind`.
pub fn controller_of(object: &Value, kind: &str) -> Option<ObjectKey> {
    let owner = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("controller") == Some(&Value::Bool(true)))?;
    if owner.get("kind").and_then(Value::as_str) != Some(kind) {
        return None;
    }
    let name = owner.get("name").and_then(Value::as_str)?;
    Some(
        match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(ns) => ObjectKey::namespaced(ns, name),
            None => ObjectKey::cluster(name),
        },
    )
}

/// Keys waiting: ready ones in order, delayed ones by when.
#[derive(Debug, Default)]
struct Queue {
    ready: VecDeque<ObjectKey>,
    queued: HashSet<ObjectKey>,
    delayed: BTreeMap<Instant, Vec<ObjectKey>>,
    /// When each delayed key is due: one timer per key.
    due: HashMap<ObjectKey, Instant>,
}

impl Queue {
    fn add(&mut self, key: ObjectKey) {
        if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    /// Asks `key` back after `after`, unless it is already due sooner.
    fn later(&mut self, key: ObjectKey, after: Duration) {
        let when = Instant::now() + after;
        match self.due.get(&key) {
            Some(due) if *due <= when => return,
            Some(due) => {
                if let Some(keys) = self.delayed.get_mut(due) {
                    keys.retain(|k| *k != key);
                    if keys.is_empty() {
                        self.delayed.remove(due);
                    }
                }
            }
            None => {}
        }
        self.due.insert(key.clone(), when);
        self.delayed.entry(when).or_default().push(key);
    }

    /// The next ready key (moving due timers first), or when to look again.
    fn next(&mut self) -> Result<ObjectKey, Option<Instant>> {
        let now = Instant::now();
        while let Some(entry) = self.delayed.first_entry() {
            if *entry.key() > now {
                break;
            }
            for key in entry.remove() {
                self.due.remove(&key);
                self.add(key);
            }
        }
        match self.ready.pop_front() {
            Some(key) => {
                self.queued.remove(&key);
                Ok(key)
            }
            None => Err(self.delayed.keys().next().copied()),
        }
    }
}

/// Runs `reconciler` over `store` until the task is aborted.
pub async fn run<R: Reconciler>(reconciler: R, store: Store) {
    let queue = (Mutex::new(Queue::default()), Notify::new());
    fn lock(q: &(Mutex<Queue>, Notify)) -> std::sync::MutexGuard<'_, Queue> {
        q.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
    let feed = async {
        loop {
            // List (at start, and after falling behind), then watch.
            let Ok(snapshot) = store.list(&reconciler.primary().key(), None, ListAt::Latest) else {
                tokio::time::sleep(RETRY).await;
                continue;
            };
            {
                let mut q = lock(&queue);
                for key in snapshot.items.iter().filter_map(|o| ObjectKey::of(o)) {
                    q.add(key);
                }
            }
            queue.1.notify_one();
            let Ok(mut watcher) = store.watch(None, snapshot.rv) else {
                continue;
            };
            while let Ok(event) = watcher.next().await {
                let keys = reconciler.keys(&store, &event);
                if keys.is_empty() {
                    continue;
                }
                let mut q = lock(&queue);
                for key in keys {
                    q.add(key);
                }
                drop(q);
                queue.1.notify_one();
            }
        }
    };
    let work = async {
        loop {
            let next = lock(&queue).next();
            let key = match next {
                Ok(key) => key,
                Err(Some(when)) => {
                    tokio::select! {
                        () = queue.1.notified() => {}
                        () = tokio::time::sleep_until(when) => {}
                    }
                    continue;
                }
                Err(None) => {
                    queue.1.notified().await;
                    continue;
                }
            };
            // A reconcile that panics (a bug) loses its key for a while,
            // never the controller.
            let outcome = std::panic::AssertUnwindSafe(reconciler.reconcile(&key))
                .catch_unwind()
                .await;
            let Ok(outcome) = outcome else {
                tracing::error!(controller = reconciler.primary().plural, %key, "reconcile panicked; retrying later");
                lock(&queue).later(key, PANIC_RETRY);
                continue;
            };
            match outcome {
                Ok(Next::Done) => {}
                Ok(Next::After(after)) => lock(&queue).later(key, after),
                Err(error) => {
                    tracing::debug!(controller = reconciler.primary().plural, %key, %error, "reconcile failed; retrying");
                    lock(&queue).later(key, RETRY);
                }
            }
        }
    };
    tokio::join!(feed, work);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test(start_paused = true)]
    async fn the_queue_should_dedup_and_bring_keys_back_when_due() {
        let mut q = Queue::default();
        let (a, b) = (
            ObjectKey::namespaced("n", "a"),
            ObjectKey::namespaced("n", "b"),
        );
        q.add(a.clone());
        q.add(b.clone());
        q.add(a.clone());
        assert_eq!(q.next(), Ok(a.clone()));
        assert_eq!(q.next(), Ok(b.clone()));
        q.later(a.clone(), Duration::from_secs(2));
        let due = q.next().expect_err("nothing ready");
        assert_eq!(due, Some(Instant::now() + Duration::from_secs(2)));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.next(), Ok(a));
        assert_eq!(q.next(), Err(None));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_asked_back_twice_should_wait_once_for_the_earliest_time() {
        let mut q = Queue::default();
        let a = ObjectKey::namespaced("n", "a");
        q.later(a.clone(), Duration::from_secs(5));
        q.later(a.clone(), Duration::from_secs(2));
        q.later(a.clone(), Duration::from_secs(9));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.next(), Ok(a));
        // No timer left behind to bring it back again.
        assert_eq!(q.next(), Err(None));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(q.next(), Err(None));
    }

    #[test]
    fn an_object_should_map_to_its_controller_of_that_kind() {
        let pod = json!({"metadata": {"namespace": "n", "ownerReferences": [
            {"kind": "ReplicaSet", "name": "web-1", "controller": false},
            {"kind": "ReplicaSet", "name": "web-2", "controller": true}]}});
        assert_eq!(
            controller_of(&pod, "ReplicaSet"),
            Some(ObjectKey::namespaced("n", "web-2"))
        );
        assert_eq!(controller_of(&pod, "Job"), None);
    }
}
