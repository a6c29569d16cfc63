//! What the host sends a plugin and what it gets back, in the host's own
//! types: a reconcile, finalize or scheduled request, a secondary's change
//! for `map-keys`, and a call's reply with where its time went.

use std::time::Duration;

use kubewasm_core::resource::ObjectKey;

use crate::action::Desired;
use crate::read_set::ReadSet;

/// One reconcile or finalize request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The primary's key.
    pub key: ObjectKey,
    /// The plugin's configuration, JSON text.
    pub config: String,
    /// Consecutive failures of this key before this call.
    pub retries: u32,
    /// Why the previous attempt failed.
    pub last_failure: Option<String>,
    /// The time of the call, as the host's clock gives it (events carry it).
    pub now: jiff::Timestamp,
    /// The primary left the plugin's `primary-selector` holding its managed
    /// finalizer: it is finalized as if deleted ([`crate::step::run`]).
    pub released: bool,
}

impl Request {
    /// A first attempt with no configuration, now.
    pub fn new(key: ObjectKey) -> Self {
        Self {
            key,
            config: "{}".into(),
            retries: 0,
            last_failure: None,
            now: jiff::Timestamp::now(),
            released: false,
        }
    }
}

/// One `scheduled` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledRequest {
    /// The time the schedule named.
    pub at: jiff::Timestamp,
    /// The plugin's configuration, JSON text.
    pub config: String,
    /// The time of the call, as the host's clock gives it (the plugin's
    /// clock during the call; events carry it).
    pub now: jiff::Timestamp,
}

/// A secondary's change, as `map-keys` sees it.
#[derive(Clone, Copy, Debug)]
pub struct MapChange<'a> {
    /// The object as it is now (a deleted one: as it was last), JSON text.
    pub object: &'a str,
    /// A modified object's state before the change, JSON text.
    pub previous: Option<&'a str>,
    /// Whether the object was deleted.
    pub deleted: bool,
}

impl<'a> MapChange<'a> {
    /// `object` as it is now, with no previous state known.
    pub fn of(object: &'a str) -> Self {
        Self {
            object,
            previous: None,
            deleted: false,
        }
    }
}

/// What a successful `reconcile` or `finalize` call returned, as the plugin
/// said it: its desired actions, not yet checked or completed (only
/// [`crate::step`] plans them into the actions the host sends), and when to
/// call again.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The desired actions, in order.
    pub desired: Vec<Desired>,
    /// Reconcile again after this long.
    pub requeue_after: Option<Duration>,
    /// Whether this primary needs the managed finalizer (`None`: the default,
    /// yes). Meaningful only when the plugin declared one.
    pub finalizer: Option<bool>,
    /// Where the call's time went (planning is the step's).
    pub stats: CallStats,
    /// What the call read through the cache.
    pub reads: ReadSet,
}

/// Where the time of one reconcile went: the figures behind the plugin
/// latency metrics and BENCHMARKS.md.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Waiting for an instance slot, every one being in a call.
    pub wait: Duration,
    /// Creating the instance; zero when a warm one was reused.
    pub instantiate: Duration,
    /// The guest call, host imports included.
    pub call: Duration,
    /// Time inside host imports (cache reads, logging) during the call.
    pub imports: Duration,
    /// Checking and completing the returned actions.
    pub plan: Duration,
    /// Bytes of linear memory the instance held after the call: its
    /// high-water mark (a Wasm memory never shrinks).
    pub memory: u64,
}

/// What a plugin answered to `reconcile`, `finalize` or `scheduled`, in
/// the host's types, before any limit or rule is checked: its outcome, or
/// the failure message it reported.
pub(crate) type Answer = Result<Outcome, String>;

/// A plugin's outcome: its desired actions and wishes, as it said them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Outcome {
    /// The desired actions, in order.
    pub(crate) desired: Vec<Desired>,
    /// Reconcile again after this long.
    pub(crate) requeue_after: Option<Duration>,
    /// Whether the primary needs the managed finalizer.
    pub(crate) finalizer: Option<bool>,
}
