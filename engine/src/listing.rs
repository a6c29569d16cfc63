//! The listed keys a work queue has not handed out yet.
//!
//! A listing (an informer's first list, or the objects a new subscriber is
//! shown) names every key of a store at once. Holding each listed key in
//! each queue was most of what a plugin added to the host over a large
//! store (50 plugins over 10,000 objects: 500,000 entries at the peak). So
//! a listing of a store is held as a **walk**: a cursor into the store
//! itself, which yields the store's keys in order and holds only the keys
//! it must pass over (queued by other means since the walk began). Keys
//! listed one by one (a secondary's objects mapped to primary keys) are
//! held in an ordered set; the walk and the set are merged in key order,
//! a key in both yielded once.
//!
//! # Guarantees
//! - Every key the walked store holds when a listing of it begins, and
//!   every key listed one by one, is yielded once, in key order, unless
//!   [`Listed::remove`]d first.
//! - A second listing of the walked store (a key at or behind the cursor
//!   is listed again: a new version subscribed) restarts the walk from the
//!   first key, so every key is yielded once more.
//! - The walked store is read by [`Listed::pop`], [`Listed::is_empty`] and
//!   [`Listed::remaining`], also from informers' handlers (a key listed):
//!   the informers never run a handler with a store locked, so the store's
//!   lock is always taken after the queue's, never the other way round.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Debug;
use std::sync::Arc;

use kubewasm_runtime::resource::ObjectKey;

/// A key as a queue holds it: one copy, shared by its indexes (and with the
/// informer's store it came from).
pub type Key = Arc<ObjectKey>;

/// Keys in order, as an informer's store holds them.
pub trait Keys: Send + Sync + Debug {
    /// The first key after `after` (the first of all for `None`).
    fn first_after(&self, after: Option<&ObjectKey>) -> Option<Key>;
    /// How many keys come after `after` (all for `None`).
    fn count_after(&self, after: Option<&ObjectKey>) -> usize;
    /// Whether it holds `key`.
    fn holds(&self, key: &ObjectKey) -> bool;
}

/// A walk over a store's keys.
#[derive(Debug)]
struct Walk {
    source: Arc<dyn Keys>,
    /// The last key yielded; `None` before the first.
    after: Option<Key>,
    /// Keys ahead of the cursor to pass over.
    skip: HashSet<Key>,
}

impl Walk {
    fn ahead(&self, key: &ObjectKey) -> bool {
        self.after.as_deref().is_none_or(|after| key > after)
    }

    /// The next key to yield, passing over (and forgetting) skipped ones.
    fn peek(&mut self) -> Option<Key> {
        loop {
            let next = self.source.first_after(self.after.as_deref())?;
            if !self.skip.remove(&next) {
                return Some(next);
            }
            self.after = Some(next);
        }
    }
}

/// Listed keys not handed out yet (see the module documentation).
#[derive(Debug, Default)]
pub struct Listed {
    walk: Option<Walk>,
    keys: BTreeSet<Key>,
}

impl Listed {
    /// Lists `key`, one of `source`'s keys: the walk over `source` yields
    /// it (starting one, or restarting it if the key is behind its cursor).
    /// A key of a store other than the one walked is held by itself.
    pub fn list_in(&mut self, key: Key, source: &Arc<dyn Keys>) {
        match &mut self.walk {
            None => {
                self.walk = Some(Walk {
                    source: Arc::clone(source),
                    after: None,
                    skip: HashSet::new(),
                });
            }
            Some(walk) if Arc::ptr_eq(&walk.source, source) => {
                if !walk.ahead(&key) {
                    walk.after = None;
                    walk.skip.clear();
                }
            }
            Some(_) => {
                self.keys.insert(key);
            }
        }
    }

    /// Lists `key` by itself.
    pub fn list(&mut self, key: Key) {
        self.keys.insert(key);
    }

    /// Forgets `key`: it was queued by other means.
    pub fn remove(&mut self, key: &Key) {
        self.keys.remove(key);
        if let Some(walk) = &mut self.walk
            && walk.ahead(key)
        {
            walk.skip.insert(Arc::clone(key));
        }
    }

    /// The first listed key, in key order; taken out.
    pub fn pop(&mut self) -> Option<Key> {
        let walked = match &mut self.walk {
            Some(walk) => walk.peek(),
            None => None,
        };
        if walked.is_none() {
            self.walk = None;
        }
        let single = self.keys.first();
        match (walked, single) {
            (Some(w), Some(s)) if **s < *w => self.keys.pop_first(),
            (Some(w), _) => {
                self.keys.remove(&w);
                if let Some(walk) = &mut self.walk {
                    walk.after = Some(Arc::clone(&w));
                }
                Some(w)
            }
            (None, _) => self.keys.pop_first(),
        }
    }

    /// Whether no key is left; ends a walk that has none left.
    pub fn is_empty(&mut self) -> bool {
        if let Some(walk) = &mut self.walk
            && walk.peek().is_none()
        {
            self.walk = None;
        }
        self.walk.is_none() && self.keys.is_empty()
    }

    /// Keys left (a key both walked and held by itself counts twice).
    pub fn remaining(&self) -> usize {
        let walked = self.walk.as_ref().map_or(0, |walk| {
            let skipped = walk.skip.iter().filter(|k| walk.source.holds(k)).count();
            walk.source
                .count_after(walk.after.as_deref())
                .saturating_sub(skipped)
        });
        walked + self.keys.len()
    }
}

/// A store's keys for tests, changeable under a walk.
#[cfg(test)]
#[derive(Debug, Default)]
pub(super) struct KeySet(pub std::sync::Mutex<BTreeSet<Key>>);

#[cfg(test)]
impl KeySet {
    fn keys(&self) -> std::sync::MutexGuard<'_, BTreeSet<Key>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
impl Keys for KeySet {
    fn first_after(&self, after: Option<&ObjectKey>) -> Option<Key> {
        self.keys()
            .iter()
            .find(|k| after.is_none_or(|a| k.as_ref() > a))
            .cloned()
    }
    fn count_after(&self, after: Option<&ObjectKey>) -> usize {
        self.keys()
            .iter()
            .filter(|k| after.is_none_or(|a| k.as_ref() > a))
            .count()
    }
    fn holds(&self, key: &ObjectKey) -> bool {
        self.keys().contains(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Arc::new(ObjectKey::namespaced("default", name))
    }

    fn source(names: &[&str]) -> (Arc<KeySet>, Arc<dyn Keys>) {
        let source = Arc::new(KeySet(std::sync::Mutex::new(
            names.iter().map(|n| key(n)).collect(),
        )));
        let keys: Arc<dyn Keys> = source.clone();
        (source, keys)
    }

    fn drain(listed: &mut Listed) -> Vec<String> {
        std::iter::from_fn(|| listed.pop())
            .map(|k| k.name.clone())
            .collect()
    }

    #[test]
    fn a_walk_should_yield_the_store_in_order_merged_with_single_keys_once_each() {
        let (_, store) = source(&["b", "d", "f"]);
        let mut listed = Listed::default();
        listed.list(key("d"));
        listed.list(key("a"));
        for name in ["b", "d", "f"] {
            listed.list_in(key(name), &store);
        }
        listed.list(key("e"));
        assert_eq!(listed.remaining(), 6, "d counted in both");
        assert_eq!(drain(&mut listed), ["a", "b", "d", "e", "f"]);
        assert!(listed.is_empty());
        assert_eq!(listed.remaining(), 0);
    }

    #[test]
    fn a_removed_key_should_be_passed_over_and_the_walk_follow_the_store() {
        let (held, store) = source(&["a", "b", "c"]);
        let mut listed = Listed::default();
        listed.list_in(key("a"), &store);
        assert_eq!(listed.pop().map(|k| k.name.clone()).as_deref(), Some("a"));
        listed.remove(&key("c"));
        listed.remove(&key("a"));
        assert_eq!(listed.remaining(), 1, "only b left");
        // Deleted from the store before the walk reached it: not yielded.
        held.keys().remove(&*key("b"));
        assert!(listed.is_empty());
        assert_eq!(drain(&mut listed), Vec::<String>::new());
    }

    #[test]
    fn listing_the_walked_store_again_should_restart_the_walk() {
        let (_, store) = source(&["a", "b", "c"]);
        let mut listed = Listed::default();
        listed.list_in(key("a"), &store);
        assert_eq!(listed.pop().map(|k| k.name.clone()).as_deref(), Some("a"));
        assert_eq!(listed.pop().map(|k| k.name.clone()).as_deref(), Some("b"));
        // Ahead of the cursor: already to come.
        listed.list_in(key("c"), &store);
        assert_eq!(listed.remaining(), 1);
        // Behind it: a new listing of every key.
        listed.list_in(key("a"), &store);
        assert_eq!(drain(&mut listed), ["a", "b", "c"]);
    }

    #[test]
    fn a_key_of_another_store_should_be_held_by_itself() {
        let (_, first) = source(&["b"]);
        let (_, second) = source(&["a", "c"]);
        let mut listed = Listed::default();
        listed.list_in(key("b"), &first);
        listed.list_in(key("c"), &second);
        assert_eq!(drain(&mut listed), ["b", "c"]);
    }
}
