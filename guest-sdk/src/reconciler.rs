//! The trait a plugin implements.

use crate::context::Context;
use crate::error::Result;
use crate::outcome::Outcome;
#[cfg(doc)]
use crate::types::Mapping;
use crate::types::{Declaration, ObjectKey};

/// A controller plugin.
pub trait Reconciler {
    /// What the plugin reconciles, reads and writes. Called once, at load.
    fn declare() -> Declaration;

    /// Reconciles the primary named by `ctx.key()`: read what is needed,
    /// return the desired actions. An `Err` is retried with backoff.
    ///
    /// # Errors
    /// Any failure; the host logs it and retries the key.
    fn reconcile(ctx: &Context) -> Result<Outcome>;

    /// Cleans up for a primary being deleted (only with
    /// [`Declaration::managed_finalizer`]). The default does nothing.
    ///
    /// # Errors
    /// Any failure; the finalizer stays and the host retries.
    fn finalize(ctx: &Context) -> Result<Outcome> {
        let _ = ctx;
        Ok(Outcome::new())
    }

    /// Maps a changed secondary object to primary keys (only for
    /// [`Mapping::Custom`]). `ctx` is about the changed object (its type and
    /// key), with the configuration and the cache reads of a reconcile, and
    /// its state before the change ([`Context::previous`]; map it too, so
    /// an object that left a primary reconciles it) or its deletion
    /// ([`Context::deleted`]: `object` is its last state). The default maps
    /// nothing.
    ///
    /// # Errors
    /// Any failure; the host logs it and enqueues nothing.
    fn map_keys(ctx: &Context, object: &serde_json::Value) -> Result<Vec<ObjectKey>> {
        let _ = (ctx, object);
        Ok(Vec::new())
    }

    /// Runs on the declared schedule ([`Declaration::schedule`]): read what
    /// is needed, return actions. There is no primary: `ctx.key()` is
    /// empty, applies must be unowned, events must name what they are
    /// about; [`Context::scheduled_at`] is the time the schedule named. The
    /// default does nothing.
    ///
    /// # Errors
    /// Any failure; the host logs and counts it, and the next call is the
    /// schedule's.
    fn scheduled(ctx: &Context) -> Result<Outcome> {
        let _ = ctx;
        Ok(Outcome::new())
    }
}
