//! The inputs of each key's last successful reconcile, so that a call whose
//! inputs are unchanged is not made again.
//!
//! # What the inputs are
//! The primary's resourceVersion when the step began, what the call read
//! through the cache (a [`Witness`]: each object's resourceVersion, each
//! list's fingerprint), what its outcome wrote (each object applied, with
//! the resourceVersion the write gave it, each deleted: a child someone
//! deleted or edited since is applied again, read or not), and the version of the plugin it ran on (which
//! holds the component's digest, hence its contract version, its grants
//! and limits, and the configuration: a swap makes a new one, but for the
//! same plugin on its optimized code, which answers alike and keeps the
//! version's serial). The clock is not an input: a
//! plugin that depends on time asks for `requeue-after`.
//!
//! # Rules
//! - Only a `reconcile` that succeeded, whose actions were all applied, with
//!   its primary present and no `requeue-after`, is remembered; anything
//!   else forgets the key (a failure, a finalize, a primary gone), so the
//!   next time it runs.
//! - A key is skipped when it is remembered and its inputs are those
//!   remembered, whatever brought it back, but a resync of a plugin that
//!   declared its own `resync-seconds` (it asked to be called on resyncs).
//!   A skip sends nothing: the last outcome's applies are not resent.
//! - A call that read more than [`MAX_READS`](kubewasm_runtime::read_set::MAX_READS)
//!   has no witness and is never skipped.
//! - One entry per live primary at most: a key whose primary is gone is
//!   forgotten when it runs.
//! - The keys remembered are bounded host-wide ([`Remembered`]): a plugin
//!   holds at most its share, the host's bound divided among the plugins
//!   running; remembering a key past it forgets another of the plugin's
//!   (whose next step then runs). Fifty plugins over the same objects hold
//!   about what the bound allows, not fifty times every key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kubewasm_runtime::cache::Cache;
use kubewasm_runtime::read_set::Queries;
use kubewasm_runtime::resource::ObjectKey;
use kubewasm_runtime::step::{Call, Step};

use super::version::Version;
use crate::applier::Written;
use crate::listing::Key;
use crate::queue::Priority;

/// What a key's last successful reconcile ran with: the queries it made
/// and a hash of their answers and of its version and primary (kept
/// small: one per key per plugin).
struct Ran {
    digest: u64,
    queries: Queries,
}

/// The default bound on keys remembered host-wide: 16,384, some 1.2 MiB
/// (a key's entry is some 72 bytes). It covers one plugin of 10,000 keys;
/// fifty plugins over those keys share it, and each key forgotten runs its
/// next resync as a host without memos runs every one.
pub const DEFAULT_REMEMBERED: usize = 1 << 14;

/// The host-wide bound on remembered keys, shared among the plugins'
/// memos (see the module documentation).
#[derive(Debug)]
pub struct Remembered {
    limit: usize,
    memos: AtomicUsize,
}

impl Remembered {
    /// At most `limit` keys remembered across every plugin.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            ..Self::default()
        })
    }

    /// What one plugin may remember now.
    fn share(&self) -> usize {
        self.limit / self.memos.load(Ordering::Relaxed).max(1)
    }
}

impl Default for Remembered {
    fn default() -> Self {
        Self {
            limit: DEFAULT_REMEMBERED,
            memos: AtomicUsize::new(0),
        }
    }
}

/// The inputs of each key's last successful reconcile (see the module
/// documentation).
pub(super) struct Memo {
    ran: Mutex<HashMap<Key, Ran>>,
    bound: Arc<Remembered>,
}

impl Memo {
    /// A plugin's memo, holding its share of `bound`.
    pub(super) fn new(bound: Arc<Remembered>) -> Self {
        bound.memos.fetch_add(1, Ordering::Relaxed);
        Self {
            ran: Mutex::default(),
            bound,
        }
    }
}

impl Drop for Memo {
    fn drop(&mut self) {
        self.bound.memos.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The primary's resourceVersion as `version`'s cache holds it now.
pub(super) fn primary_version(version: &Version, key: &ObjectKey) -> Option<Box<str>> {
    let primary = version
        .cache
        .get(&version.plugin.declaration().primary, key)?;
    primary.resource_version().map(Into::into)
}

impl Memo {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Ran>> {
        self.ran.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `key`, brought back by `cause`, would run with the inputs
    /// of its last successful reconcile on `version`.
    pub(super) fn unchanged(
        &self,
        key: &ObjectKey,
        cause: Option<Priority>,
        version: &Version,
    ) -> bool {
        if cause == Some(Priority::Resync) && version.plugin.declaration().resync_seconds.is_some()
        {
            return false;
        }
        let memo = self.lock();
        let Some(ran) = memo.get(key) else {
            return false;
        };
        let Some(primary) = primary_version(version, key) else {
            return false;
        };
        ran.queries.digest(
            version.cache.as_ref(),
            version.plugin.grants(),
            (version.serial, &*primary),
        ) == Some(ran.digest)
    }

    /// Remembers (or forgets) what `key`'s step that began with the
    /// primary at `primary` ran with, once its actions were all applied
    /// (`written`: what each action's response carried).
    pub(super) fn succeeded(
        &self,
        key: &Key,
        primary: Option<Box<str>>,
        version: &Version,
        step: &Step,
        written: &[Written],
    ) {
        let witness = |primary: &str| {
            let mut witness = step.reads.witness((version.serial, primary))?;
            // What it wrote is an input too: a child deleted or changed
            // since must be applied again, read or not.
            for (action, written) in step.actions.iter().zip(written) {
                match action.object() {
                    Some((resource, key, true)) => {
                        witness.wrote(resource, key, Some(written.resource_version.as_deref()?));
                    }
                    Some((resource, key, false)) => witness.wrote(resource, key, None),
                    None => {}
                }
            }
            Some(witness)
        };
        let remembered = match (primary, step.call, step.requeue_after) {
            (Some(primary), Call::Reconcile, None) => witness(&primary).map(|witness| Ran {
                digest: witness.digest(),
                queries: witness.into_queries(),
            }),
            _ => None,
        };
        match remembered {
            Some(ran) => {
                let share = self.bound.share();
                let mut memo = self.lock();
                if make_room(&mut memo, key, share) {
                    memo.insert(Arc::clone(key), ran);
                }
            }
            None => self.forget(key),
        }
    }

    /// Forgets `key`: its next step runs.
    pub(super) fn forget(&self, key: &ObjectKey) {
        let mut memo = self.lock();
        memo.remove(key);
        if memo.capacity() > 64 && memo.len() < memo.capacity() / 4 {
            memo.shrink_to_fit();
        }
    }
}

/// Makes room in `memo` for `key` within `share` entries: other keys go
/// (any ones; their next steps run). Whether `key` may be remembered.
fn make_room<V>(memo: &mut HashMap<Key, V>, key: &ObjectKey, share: usize) -> bool {
    if share == 0 {
        return false;
    }
    while !memo.contains_key(key) && memo.len() >= share {
        let Some(other) = memo.keys().next().cloned() else {
            break;
        };
        memo.remove(&other);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Arc::new(ObjectKey::namespaced("ns", name))
    }

    #[test]
    fn a_plugin_should_remember_at_most_its_share_of_the_host_bound() {
        let bound = Remembered::new(10);
        let memos: Vec<Memo> = (0..4).map(|_| Memo::new(Arc::clone(&bound))).collect();
        assert_eq!(bound.share(), 2, "10 keys among 4 plugins");
        drop(memos);
        assert_eq!(bound.share(), 10, "a plugin gone gives its share back");
        let mut memo: HashMap<Key, u8> = HashMap::new();
        for name in ["a", "b", "c", "d"] {
            if make_room(&mut memo, &key(name), 3) {
                memo.insert(key(name), 0);
            }
        }
        assert_eq!(memo.len(), 3, "one forgotten for the fourth");
        assert!(memo.contains_key(&*key("d")));
        // A key remembered already takes no room: nothing else goes.
        assert!(make_room(&mut memo, &key("d"), 3));
        assert_eq!(memo.len(), 3);
        // A share that shrank forgets down to it; a share of none
        // remembers nothing.
        assert!(make_room(&mut memo, &key("e"), 1));
        assert!(memo.is_empty());
        assert!(!make_room(&mut memo, &key("f"), 0));
    }
}
