//! A reconcile's span: what a trace shows of one step. The host exports
//! tracing's spans as OpenTelemetry spans over OTLP when `--otlp-endpoint`
//! is set; without it no subscriber enables them past `reconcile`'s.
//!
//! # The tree of one step
//! - `reconcile` (INFO), one per key a worker takes and runs: its attributes
//!   `kubewasm.plugin`, `kubewasm.resource` (the primary's apiVersion and
//!   kind), `kubewasm.digest`, `k8s.namespace.name` (absent for a
//!   cluster-scoped primary), `kubewasm.object.name`, `kubewasm.key`,
//!   `kubewasm.queue.wait` (the seconds the key waited, ready, for a
//!   worker), `kubewasm.retries`, and once the step ends
//!   `kubewasm.outcome`: [`Outcome`]'s label, with an error status on
//!   `error`.
//!   - the guest call, `kubewasm.plugin.reconcile` or
//!     `kubewasm.plugin.finalize` (INFO, from the runtime, on the blocking
//!     thread the call runs on: [`crate::demotion::Demotion::spawn_blocking`]
//!     carries the span over), a `kubewasm.cache.get` or `kubewasm.cache.list`
//!     (DEBUG) under it for each cache read;
//!   - `kubewasm.plan` (DEBUG): the reply checked against the grants and made
//!     API requests;
//!   - `kubewasm.write` (INFO, kind client), one per API request sent
//!     ([`crate::applier`]): `kubewasm.action`, `http.request.method`,
//!     `url.path`, `http.response.status_code`, an error status when refused
//!     or lost.
//!
//! A key skipped (its inputs unchanged) or left to its slot's holder runs
//! no step and has no span.

use std::time::Duration;

use crate::listing::Key;
use crate::queue::Done;

/// How a step ended, as its span's `kubewasm.outcome` says (the results of
/// controller-runtime's `controller_runtime_reconcile_total`, and
/// `fenced`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It succeeded.
    Success,
    /// It succeeded and asked to be called again after a while.
    RequeueAfter,
    /// It failed: retried with backoff.
    Error,
    /// It did not run (no instance came free in time): handed out again.
    Requeue,
    /// Its ring slot went while it ran: what it had not written was never
    /// sent, and the slot's next holder reconciles the key.
    Fenced,
}

impl Outcome {
    /// What the queue was told, and whether the step was fenced.
    pub(super) fn of(done: &Done, fenced: bool) -> Self {
        match done {
            _ if fenced => Self::Fenced,
            Done::Forget => Self::Success,
            Done::RequeueAfter(_) => Self::RequeueAfter,
            Done::Retry(_) | Done::Throttled(..) => Self::Error,
            Done::Again => Self::Requeue,
        }
    }

    /// The attribute's value.
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::RequeueAfter => "requeue_after",
            Self::Error => "error",
            Self::Requeue => "requeue",
            Self::Fenced => "fenced",
        }
    }
}

/// The span of one step of `plugin` for `key` of `resource`, which waited
/// `waited` for a worker; [`ended`] completes it.
pub(super) fn reconcile(
    plugin: &str,
    resource: &dyn std::fmt::Display,
    digest: &dyn std::fmt::Display,
    key: &Key,
    waited: Duration,
) -> tracing::Span {
    tracing::info_span!(
        "reconcile",
        kubewasm.plugin = plugin,
        kubewasm.resource = %resource,
        kubewasm.digest = %digest,
        k8s.namespace.name = key.namespace.as_deref(),
        kubewasm.object.name = key.name.as_str(),
        kubewasm.key = %key,
        kubewasm.queue.wait = waited.as_secs_f64(),
        kubewasm.retries = tracing::field::Empty,
        kubewasm.outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    )
}

/// Records on the current step's span how many times the key failed before.
pub(super) fn retries(count: u32) {
    tracing::Span::current().record("kubewasm.retries", count);
}

/// Records how the step of `span` ended.
pub(super) fn ended(span: &tracing::Span, done: &Done, fenced: bool) {
    let outcome = Outcome::of(done, fenced);
    span.record("kubewasm.outcome", outcome.label());
    if let Done::Retry(message) | Done::Throttled(message, _) = done {
        span.record("otel.status_code", "error");
        span.record("otel.status_description", message.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_should_say_what_the_queue_was_told_unless_fenced() {
        let cases = [
            (Done::Forget, false, "success"),
            (
                Done::RequeueAfter(Duration::from_secs(1)),
                false,
                "requeue_after",
            ),
            (Done::Retry("x".into()), false, "error"),
            (
                Done::Throttled("x".into(), Duration::from_secs(1)),
                false,
                "error",
            ),
            (Done::Again, false, "requeue"),
            (Done::Forget, true, "fenced"),
        ];
        for (done, fenced, label) in cases {
            assert_eq!(Outcome::of(&done, fenced).label(), label, "{done:?}");
        }
    }
}
