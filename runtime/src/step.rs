//! One reconcile step: what the engine and `kubewasm replay` both run for a
//! key, so that replay prints exactly what the engine sends.
//!
//! # The step
//! Given the primary as cached (or its absence), the step chooses the call:
//! - the primary is being deleted and the plugin manages a finalizer: if the
//!   finalizer is still on it, `finalize`; if not, nothing (the host has
//!   already cleaned up, the object is on its way out);
//! - the primary left the plugin's `primary-selector` holding its finalizer
//!   ([`Request::released`]): `finalize` too, and the finalizer goes as
//!   after a deletion's;
//! - otherwise `reconcile` (also when the primary is gone: level-triggered,
//!   the plugin sees that and decides).
//!
//! It then completes the plugin's actions with the host's own, as actions,
//! never as a flag:
//! - after a `reconcile` that did not say `finalizer: false`, the managed
//!   finalizer is **added before** the plugin's actions, so no child is
//!   written for a primary that could be deleted without cleanup;
//! - after a `reconcile` that said `finalizer: false`, it is removed after
//!   them;
//! - after a `finalize` that succeeded with no `requeue-after`, it is
//!   removed after the plugin's actions; a `finalize` that asks for a
//!   requeue keeps it (the contract says the finalizer goes once `finalize`
//!   returns `ok` with no requeue);
//! - after a `reconcile`, the children of the types declared with `prune`
//!   that its outcome no longer applies are deleted after the plugin's
//!   actions (so only once they all succeeded: the applier stops at the
//!   first failure), before the finalizer's removal ([`action::prune`]).
//!
//! Planning happens here and only here: the runtime returns the plugin's
//! [`Reply`] as it said it, and [`plan`] checks and completes its desired
//! actions ([`action::plan`]: grants, names, namespaces, owners) into the
//! [`Action`]s the applier sends.
//!
//! The clock is the request's `now`, injected by the caller.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::action::{self, Action, PlanContext};
use crate::cache::Cache;
use crate::error::{CallError, ReconcileError};
use crate::plugin::Plugin;
use crate::read_set::ReadSet;
use crate::request::{CallStats, Reply, Request, ScheduledRequest};
use kubewasm_core::resource::ObjectKey;

/// Which plugin export a step called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `reconcile`.
    Reconcile,
    /// `finalize`.
    Finalize,
    /// No call: the primary is being deleted and its finalizer is gone.
    None,
    /// `scheduled`: the declared schedule's time came ([`scheduled`]).
    Scheduled,
}

impl Call {
    /// The export's name (`none` when nothing was called).
    pub fn name(self) -> &'static str {
        match self {
            Self::Reconcile => "reconcile",
            Self::Finalize => "finalize",
            Self::None => "none",
            Self::Scheduled => "scheduled",
        }
    }
}

/// What one step decided: the actions to send, in order, and when to call
/// again.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The export called.
    pub call: Call,
    /// Every action to send, the host's finalizer patches included.
    pub actions: Vec<Action>,
    /// Reconcile again after this long.
    pub requeue_after: Option<Duration>,
    /// Where the call's time went (zero when nothing was called).
    pub stats: CallStats,
    /// What the call read through the cache (nothing when nothing was
    /// called).
    pub reads: ReadSet,
}

/// Why a step failed: the plugin's call did.
#[derive(Debug, thiserror::Error)]
#[error("{call} of {key} failed")]
pub struct StepError {
    /// `reconcile` or `finalize`.
    pub call: &'static str,
    /// The primary.
    pub key: ObjectKey,
    /// The failure.
    #[source]
    pub source: Box<ReconcileError>,
    /// When the outcome was refused by the rules (an action denied or
    /// malformed, such as a child in a namespace not granted): the host's
    /// Warning event on the primary saying which, to send beside the retry.
    pub report: Option<Box<Action>>,
}

/// A reply planned: the checked actions the host sends and an optional
/// requeue.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The actions, in order.
    pub actions: Vec<Action>,
    /// Reconcile again after this long.
    pub requeue_after: Option<Duration>,
    /// Whether this primary needs the managed finalizer (`None`: the default,
    /// yes). Meaningful only when the plugin declared one.
    pub finalizer: Option<bool>,
    /// Where the time went, planning included.
    pub stats: CallStats,
    /// What the call read through the cache.
    pub reads: ReadSet,
}

/// Plans a plugin's `reply` to `request`, a `call`: its desired actions
/// checked against the plugin's declaration and grants and completed (field
/// manager, owner, preconditions from the primary as `cache` holds it),
/// then, after a reconcile, the deletes of the children it no longer
/// applies of the types declared with `prune`.
///
/// # Errors
/// [`ReconcileError::Action`]: an action was denied or malformed; nothing
/// of the reply is to be sent.
#[tracing::instrument(name = "kubewasm.plan", level = "debug", skip_all)]
pub fn plan(
    plugin: &Plugin,
    cache: &dyn Cache,
    request: &Request,
    reply: Reply,
    call: Call,
) -> Result<Outcome, ReconcileError> {
    let planning = std::time::Instant::now();
    let declaration = plugin.declaration();
    let primary = cache
        .get(&declaration.primary, &request.key)
        .map(|p| p.value());
    let ctx = PlanContext {
        declaration,
        grants: plugin.grants(),
        key: &request.key,
        primary: primary.as_ref(),
        cache,
        now: request.now,
    };
    let mut actions = action::plan(ctx, reply.desired)?;
    if call == Call::Reconcile {
        let stale = action::prune(ctx, &actions)?;
        actions.extend(stale);
    }
    Ok(Outcome {
        actions,
        requeue_after: reply.requeue_after,
        finalizer: reply.finalizer,
        stats: CallStats {
            plan: planning.elapsed(),
            ..reply.stats
        },
        reads: reply.reads,
    })
}

/// Calls `reconcile` for `request.key` and plans the reply: what a step
/// sends before the host's finalizer patches (what tests and benchmarks of
/// one call look at).
///
/// # Errors
/// As [`Plugin::reconcile`] and [`plan`].
pub fn reconcile(
    plugin: &Plugin,
    cache: Arc<dyn Cache>,
    request: &Request,
) -> Result<Outcome, ReconcileError> {
    let reply = plugin.reconcile(Arc::clone(&cache), request)?;
    plan(plugin, cache.as_ref(), request, reply, Call::Reconcile)
}

/// Runs `plugin`'s `scheduled` export for `request` against `cache` and
/// plans its reply (no primary: [`action::plan_scheduled`]).
///
/// # Errors
/// As [`Plugin::scheduled`], or [`ReconcileError::Action`] when an action
/// is refused; nothing is to be sent then.
pub fn scheduled(
    plugin: &Plugin,
    cache: Arc<dyn Cache>,
    request: &ScheduledRequest,
) -> Result<Step, ReconcileError> {
    let reply = plugin.scheduled(Arc::clone(&cache), request)?;
    let planning = std::time::Instant::now();
    // No primary: a key that is no object's (nothing is owned, no event
    // defaults to it, a namespaced object names its namespace).
    let nobody = ObjectKey::cluster("");
    let ctx = PlanContext {
        declaration: plugin.declaration(),
        grants: plugin.grants(),
        key: &nobody,
        primary: None,
        cache: cache.as_ref(),
        now: request.now,
    };
    let actions = action::plan_scheduled(ctx, reply.desired)?;
    Ok(Step {
        call: Call::Scheduled,
        actions,
        requeue_after: None,
        stats: CallStats {
            plan: planning.elapsed(),
            ..reply.stats
        },
        reads: reply.reads,
    })
}

impl StepError {
    /// The whole failure: which call of which key, and why (what the
    /// engine retries with, and what a recorded call keeps).
    pub fn detail(&self) -> String {
        format!("{self}: {}", self.source)
    }

    /// Whether the plugin was called at all: not when no instance slot came
    /// free in time ([`CallError::NoInstance`]), which is no failure of the
    /// key's.
    pub fn ran(&self) -> bool {
        !matches!(*self.source, ReconcileError::Call(CallError::NoInstance(_)))
    }
}

/// Runs one step of `plugin` for `request.key` against `cache`.
///
/// # Errors
/// [`StepError`] if the plugin's call fails; nothing is to be sent then.
pub fn run(plugin: &Plugin, cache: Arc<dyn Cache>, request: &Request) -> Result<Step, StepError> {
    let declaration = plugin.declaration();
    let primary = cache
        .get(&declaration.primary, &request.key)
        .map(|p| p.value());
    let primary = primary.as_ref();
    let finalizer = declaration
        .managed_finalizer
        .then(|| declaration.finalizer());
    let deleting = primary.is_some_and(|p| {
        p.pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
    });
    let has_finalizer = |finalizer: &str| {
        primary
            .and_then(|p| p.pointer("/metadata/finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|v| v == finalizer))
    };
    let call = match &finalizer {
        Some(f) if (deleting || request.released) && has_finalizer(f) => Call::Finalize,
        Some(_) if deleting => Call::None,
        _ => Call::Reconcile,
    };
    let outcome = match call {
        Call::Reconcile => plugin.reconcile(Arc::clone(&cache), request),
        Call::Finalize => plugin.finalize(Arc::clone(&cache), request),
        // A step about a primary never decides `scheduled` ([`scheduled`]).
        Call::None | Call::Scheduled => {
            return Ok(Step {
                call,
                actions: Vec::new(),
                requeue_after: None,
                stats: CallStats::default(),
                reads: ReadSet::default(),
            });
        }
    }
    .and_then(|reply| plan(plugin, cache.as_ref(), request, reply, call))
    .map_err(|source| StepError {
        call: call.name(),
        key: request.key.clone(),
        report: match (&source, primary) {
            (ReconcileError::Action(refused), Some(primary)) => Some(Box::new(
                Action::refused_outcome(declaration, &request.key, primary, refused, request.now),
            )),
            _ => None,
        },
        source: Box::new(source),
    })?;

    let mut actions = outcome.actions;
    if let (Some(finalizer), Some(primary)) = (&finalizer, primary) {
        let resource = &declaration.primary;
        let key = &request.key;
        match (call, outcome.finalizer) {
            (Call::Reconcile, Some(false)) => {
                actions.extend(Action::remove_finalizer(resource, key, primary, finalizer));
            }
            (Call::Reconcile, _) => {
                if let Some(add) = Action::add_finalizer(resource, key, primary, finalizer) {
                    actions.insert(0, add);
                }
            }
            (Call::Finalize, _) if outcome.requeue_after.is_none() => {
                actions.extend(Action::remove_finalizer(resource, key, primary, finalizer));
            }
            _ => {}
        }
    }
    Ok(Step {
        call,
        actions,
        requeue_after: outcome.requeue_after,
        stats: outcome.stats,
        reads: outcome.reads,
    })
}
