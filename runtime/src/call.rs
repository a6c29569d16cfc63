//! One call on an instance: a slot of the budget checked out (a warm
//! instance, or a fresh one made in it), the call run under its deadline
//! and limits, its output forwarded, and the instance checked back in warm
//! or dropped; a wasmtime error turned into the [`CallError`] that says
//! what happened.

use std::time::Duration;

use wasmtime::{Store, Trap};

use crate::bindings::Controller;
use crate::blocking;
use crate::error::CallError;
use crate::limits::LimitExceeded;
use crate::pool::Busy;
use crate::state::PluginState;

/// How often the epoch ticks; deadlines are rounded up to it.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// A warm instance is retired after this many calls, bounding what a leaky
/// plugin can accumulate.
pub const MAX_CALLS_PER_INSTANCE: u32 = 10_000;

/// What one call on an instance spent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spent {
    pub(crate) wait: Duration,
    pub(crate) instantiate: Duration,
    pub(crate) call: Duration,
    pub(crate) imports: Duration,
    pub(crate) memory: u64,
}

/// A live instance and its store.
pub(crate) struct Instance {
    pub(crate) store: Store<PluginState>,
    pub(crate) controller: Controller,
    pub(crate) calls: u32,
}

/// A slot checked out for one call, holding its instance, and what getting
/// it took.
pub(crate) struct Checkout {
    pub(crate) busy: Busy<Instance>,
    pub(crate) wait: Duration,
    pub(crate) instantiate: Duration,
}

/// Epoch ticks for a deadline. The first tick may come at once (the ticker
/// runs at its own phase), so one more is added: a call is interrupted after
/// at least its deadline and at most one tick more.
pub(crate) fn deadline_ticks(deadline: Duration) -> u64 {
    let ticks = deadline.as_micros().div_ceil(EPOCH_TICK.as_micros());
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}

/// Turns a wasmtime error into the [`CallError`] that says what happened.
pub(crate) fn classify(
    state: &PluginState,
    error: wasmtime::Error,
    deadline: Duration,
    stderr: &str,
) -> CallError {
    let stderr = stderr.trim().to_owned();
    if state.limiter.exhausted {
        return CallError::MemoryExhausted {
            detail: format!("{error:#}"),
        };
    }
    if let Some(exceeded) = error.downcast_ref::<LimitExceeded>() {
        return CallError::LimitExceeded(*exceeded);
    }
    if error
        .downcast_ref::<blocking::BlockedPastDeadline>()
        .is_some()
    {
        return CallError::DeadlineExceeded { deadline };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => return CallError::DeadlineExceeded { deadline },
        Some(Trap::AllocationTooLarge) => {
            return CallError::MemoryExhausted {
                detail: format!("{error:#}"),
            };
        }
        // What a Rust panic (and any abort) compiles to; its message is
        // what the guest wrote, told as such, never read for a verdict.
        Some(Trap::UnreachableCodeReached) => {
            return CallError::Panicked {
                message: if stderr.is_empty() {
                    format!("{error:#}")
                } else {
                    stderr
                },
            };
        }
        _ => {}
    }
    CallError::Trapped {
        trap: format!("{error:#}"),
        stderr,
    }
}

/// Forwards what the plugin printed during a call to `tracing`, line by
/// line, and returns its stderr (which carries panic messages and
/// interpreter tracebacks).
pub(crate) fn forward_output(state: &PluginState) -> String {
    let key = state
        .key
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let lines = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for line in lines(&state.stdout.drain()) {
        tracing::info!(target: "kubewasm::plugin", plugin = %state.plugin, key = %key, stream = "stdout", "{line}");
    }
    let stderr = lines(&state.stderr.drain());
    for line in &stderr {
        tracing::warn!(target: "kubewasm::plugin", plugin = %state.plugin, key = %key, stream = "stderr", "{line}");
    }
    stderr.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_ticks_should_cover_the_whole_deadline() {
        assert_eq!(deadline_ticks(Duration::from_millis(1)), 2);
        assert_eq!(deadline_ticks(Duration::from_millis(12)), 4);
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
    }
}
