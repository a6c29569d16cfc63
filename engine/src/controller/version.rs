//! The version of a plugin a controller runs, and the handle steps start
//! on: swapped whole, a step that began on a version finishes on it.

use std::sync::{Arc, PoisonError, RwLock};

use kubewasm_runtime::Plugin;

use crate::fair::Flow;
use crate::informer::Subscription;
use crate::plugin_cache::InformerCache;

/// What a controller runs now: one version of its plugin with the
/// subscriptions it declared and its configuration. A swap replaces it
/// whole; a step that began on a version finishes on it (it holds the
/// `Arc`), and the version's subscriptions go with its last step.
pub(super) struct Version {
    /// Told apart from every other version of every plugin: a key's
    /// remembered inputs hold it ([`memo`]).
    pub(super) serial: u64,
    pub(super) plugin: Arc<Plugin>,
    pub(super) cache: Arc<InformerCache>,
    pub(super) config: String,
    pub(super) flow: Flow,
    pub(super) _subscriptions: Vec<Subscription>,
}

/// The version steps start on.
#[derive(Clone)]
pub(super) struct Current(pub(super) Arc<RwLock<Arc<Version>>>);

impl Current {
    pub(super) fn get(&self) -> Arc<Version> {
        Arc::clone(&self.0.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the version by the one `subscribe` makes, holding steps
    /// from starting meanwhile: the keys the new version's subscriptions
    /// list are handed out only to it.
    pub(super) fn replace(&self, subscribe: impl FnOnce() -> Version) {
        let mut current = self.0.write().unwrap_or_else(PoisonError::into_inner);
        *current = Arc::new(subscribe());
    }
}
