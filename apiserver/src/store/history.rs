//! What the store remembers: list snapshots at an RV (kept for later
//! pages, or rebuilt from the event history) and watches that replay the
//! history from an RV, then follow it.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubewasm_core::ObjectKey;
use serde_json::Value;

use super::{
    Event, EventType, ListAt, Objects, ResourceKey, SNAPSHOTS_KEPT, Snapshot, SnapshotKey, State,
    Store, StoreError, Watcher,
};

impl Store {
    /// The objects of `resource` in `namespace` (all when `None`) at `at`.
    ///
    /// # Errors
    /// [`StoreError::Expired`] when an exact RV is no longer in the history,
    /// [`StoreError::TooLarge`] when it is newer than the store.
    pub fn list(
        &self,
        resource: &ResourceKey,
        namespace: Option<&str>,
        at: ListAt,
    ) -> Result<Snapshot, StoreError> {
        let mut state = self.state();
        let requested = match at {
            ListAt::Latest => None,
            ListAt::NotOlderThan(requested) | ListAt::Exact(requested) if requested > state.rv => {
                return Err(StoreError::TooLarge {
                    requested,
                    current: state.rv,
                });
            }
            ListAt::NotOlderThan(_) => None,
            ListAt::Exact(requested) if requested < state.compacted => {
                return Err(StoreError::Expired {
                    requested,
                    oldest: state.compacted,
                });
            }
            ListAt::Exact(requested) => Some(requested),
        };
        let rv = requested.unwrap_or(state.rv);
        let wanted = SnapshotKey {
            resource: resource.clone(),
            namespace: namespace.map(str::to_owned),
            rv,
        };
        if let Some((_, items)) = state.snapshots.iter().find(|(k, _)| *k == wanted) {
            return Ok(Snapshot {
                rv,
                items: Arc::clone(items),
            });
        }
        let items: Arc<[Arc<Value>]> = match requested {
            None => state.current(resource, namespace).map(Arc::clone).collect(),
            Some(requested) => state.rebuild(resource, namespace, requested),
        };
        if state.snapshots.len() == SNAPSHOTS_KEPT {
            state.snapshots.pop_front();
        }
        state.snapshots.push_back((wanted, Arc::clone(&items)));
        Ok(Snapshot { rv, items })
    }

    /// A watcher of `resource` (every type when `None`) from RV `from`:
    /// it yields the events with an RV above `from`.
    ///
    /// # Errors
    /// [`StoreError::Expired`] when the history no longer reaches `from`,
    /// [`StoreError::TooLarge`] when `from` is newer than the store.
    pub fn watch(&self, resource: Option<ResourceKey>, from: u64) -> Result<Watcher, StoreError> {
        let state = self.state();
        if from > state.rv {
            return Err(StoreError::TooLarge {
                requested: from,
                current: state.rv,
            });
        }
        if from < state.compacted {
            return Err(StoreError::Expired {
                requested: from,
                oldest: state.compacted,
            });
        }
        Ok(Watcher {
            store: self.clone(),
            resource,
            position: from,
        })
    }
}

impl State {
    /// The current objects of `resource` in `namespace` (all when `None`),
    /// in key order.
    pub(super) fn current<'a>(
        &'a self,
        resource: &ResourceKey,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<Value>> + 'a {
        let objects = self.objects.get(resource);
        let all = objects
            .filter(|_| namespace.is_none())
            .into_iter()
            .flat_map(BTreeMap::values);
        let start = ObjectKey::namespaced(namespace.unwrap_or_default(), "");
        let one = objects
            .filter(|_| namespace.is_some())
            .into_iter()
            .flat_map(move |o| o.range(start.clone()..))
            .take_while(move |(k, _)| k.namespace.as_deref() == namespace)
            .map(|(_, v)| v);
        all.chain(one)
    }

    /// The objects of `resource` in `namespace` as they were at RV
    /// `requested`: the current ones, with every later change undone.
    fn rebuild(
        &self,
        resource: &ResourceKey,
        namespace: Option<&str>,
        requested: u64,
    ) -> Arc<[Arc<Value>]> {
        let mut objects: Objects = self
            .objects
            .get(resource)
            .into_iter()
            .flatten()
            .filter(|(k, _)| namespace.is_none() || k.namespace.as_deref() == namespace)
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        // Undo, newest first, every change of this type after `requested`.
        for (event, _) in self
            .history
            .iter()
            .rev()
            .take_while(|(e, _)| e.rv > requested)
        {
            if &event.resource != resource {
                continue;
            }
            let Some(key) = ObjectKey::of(&event.object) else {
                continue;
            };
            if namespace.is_some() && key.namespace.as_deref() != namespace {
                continue;
            }
            match (&event.kind, &event.previous) {
                (EventType::Added, _) | (_, None) => {
                    objects.remove(&key);
                }
                (_, Some(previous)) => {
                    objects.insert(key, Arc::clone(previous));
                }
            }
        }
        objects.into_values().collect()
    }
}

impl Watcher {
    /// The RV up to which this watcher has seen everything: a valid
    /// bookmark, since no later event can have a lower RV.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The next event, if one is ready; advances past events of other types.
    ///
    /// # Errors
    /// [`StoreError::Expired`] when the history moved past this watcher.
    pub fn try_next(&mut self) -> Result<Option<Event>, StoreError> {
        let state = self.store.state();
        if self.position < state.compacted {
            return Err(StoreError::Expired {
                requested: self.position,
                oldest: state.compacted,
            });
        }
        let visible = self.store.visible_rv(&state);
        let start = state
            .history
            .partition_point(|(e, _)| e.rv <= self.position);
        for (event, _) in state
            .history
            .range(start..)
            .take_while(|(e, _)| e.rv <= visible)
        {
            self.position = event.rv;
            if self.resource.as_ref().is_none_or(|r| r == &event.resource) {
                return Ok(Some(event.clone()));
            }
        }
        Ok(None)
    }

    /// The next event, waiting for it.
    ///
    /// # Errors
    /// [`StoreError::Expired`] when the history moved past this watcher.
    pub async fn next(&mut self) -> Result<Event, StoreError> {
        let shared = Arc::clone(&self.store.shared);
        loop {
            let changed = shared.changed.notified();
            tokio::pin!(changed);
            // Registered before looking, so no write can slip between the
            // look and the wait.
            changed.as_mut().enable();
            if let Some(event) = self.try_next()? {
                return Ok(event);
            }
            changed.await;
        }
    }
}
