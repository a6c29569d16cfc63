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

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

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

/// The inputs of each key's last successful reconcile (see the module
/// documentation).
#[derive(Default)]
pub(super) struct Memo(Mutex<HashMap<Key, Ran>>);

/// The primary's resourceVersion as `version`'s cache holds it now.
pub(super) fn primary_version(version: &Version, key: &ObjectKey) -> Option<Box<str>> {
    let primary = version
        .cache
        .get(&version.plugin.declaration().primary, key)?;
    primary
        .value()
        .pointer("/metadata/resourceVersion")
        .and_then(serde_json::Value::as_str)
        .map(Into::into)
}

impl Memo {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Ran>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
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
                self.lock().insert(std::sync::Arc::clone(key), ran);
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
