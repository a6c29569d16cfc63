//! One call on an instance: a slot of the budget checked out (a warm
//! instance, or a fresh one made in it), the call run under its deadline
//! and limits, its output forwarded, and the instance checked back in warm
//! or dropped; a wasmtime error turned into the [`CallError`] that says
//! what happened.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Store, Trap};

use crate::cache::{Cache, MemoryCache};
use crate::resource::ObjectKey;

use super::bindings::{Controller, Instantiation};
use super::pool::Busy;
use super::state::{Limiter, PluginState};
use super::{CallError, EPOCH_TICK, LimitExceeded, Plugin, blocking};

/// A warm instance is retired after this many calls, bounding what a leaky
/// plugin can accumulate.
pub const MAX_CALLS_PER_INSTANCE: u32 = 10_000;

/// What one call on an instance spent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Spent {
    pub(super) wait: Duration,
    pub(super) instantiate: Duration,
    pub(super) call: Duration,
    pub(super) imports: Duration,
    pub(super) memory: u64,
}

/// A live instance and its store.
pub(super) struct Instance {
    store: Store<PluginState>,
    controller: Controller,
    calls: u32,
}

/// A slot checked out for one call, holding its instance, and what getting
/// it took.
pub(super) struct Checkout {
    busy: Busy<Instance>,
    wait: Duration,
    instantiate: Duration,
}

impl Plugin {
    fn instantiate(&self) -> Result<Instance, CallError> {
        let limits = self.limits;
        let state = PluginState::new(
            Arc::clone(&self.name),
            Arc::clone(&self.grants),
            Limiter::new(limits.memory, 100_000),
            limits.output,
            Arc::clone(&self.reads_denied),
        );
        let mut store = Store::new(self.code.pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(deadline_ticks(limits.deadline));
        store.data_mut().call_deadline = Instant::now() + limits.deadline;
        let controller = self.code.pre.instantiate(&mut store).map_err(|failed| {
            let error = match failed {
                Instantiation::Failed(error) => error,
                Instantiation::Exports(error) => return CallError::Exports(error),
            };
            if error.downcast_ref::<Trap>().is_some()
                || error
                    .downcast_ref::<blocking::BlockedPastDeadline>()
                    .is_some()
                || store.data().limiter.exhausted
            {
                let stderr = forward_output(store.data());
                classify(store.data(), error, limits.deadline, &stderr)
            } else {
                CallError::Instantiate(error)
            }
        })?;
        Ok(Instance {
            store,
            controller,
            calls: 0,
        })
    }

    /// A slot of the budget holding a warm instance when reusing (its own,
    /// else a fresh one), primed for one call, with the time waiting for it
    /// and instantiating took.
    pub(super) fn checkout(
        &self,
        cache: Arc<dyn Cache>,
        key: Option<&ObjectKey>,
    ) -> Result<Checkout, CallError> {
        let pool = &self.runtime.inner.pool;
        let deadline = Instant::now() + self.runtime.inner.config.instance_wait;
        let mut busy = pool.checkout(self.id, deadline)?;
        let waited = busy.waited();
        if !self.reuse {
            // Someone else's slot, or a warm instance of this plugin kept
            // from before: either way a fresh instance is wanted.
            drop(busy.take());
        }
        let started = Instant::now();
        let instantiate = if busy.instance().is_none() {
            let instance = loop {
                match self.instantiate() {
                    // The allocator ran out of memories or tables before
                    // instances: make room as for an instance.
                    Err(CallError::Instantiate(error))
                        if error
                            .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                            .is_some()
                            && pool.drop_oldest() => {}
                    other => break other?,
                }
            };
            busy.fill(instance);
            started.elapsed()
        } else {
            Duration::ZERO
        };
        if let Some(instance) = busy.instance() {
            let data = instance.store.data_mut();
            data.cache = cache;
            data.key = key.cloned();
        }
        Ok(Checkout {
            busy,
            wait: waited,
            instantiate,
        })
    }

    /// Runs one call on `instance`, then forwards its output to the log and
    /// either returns the instance to the warm pool or drops it. Returns the
    /// result with what the call spent.
    pub(super) fn with_instance<R>(
        &self,
        checkout: Checkout,
        call: impl FnOnce(&Controller, &mut Store<PluginState>) -> wasmtime::Result<R>,
    ) -> Result<(R, Spent), CallError> {
        let Checkout {
            mut busy,
            wait,
            instantiate,
        } = checkout;
        let Some(instance) = busy.instance() else {
            return Err(CallError::Instantiate(wasmtime::Error::msg(
                "no instance in the slot",
            )));
        };
        let deadline = self.limits.deadline;
        instance.store.set_epoch_deadline(deadline_ticks(deadline));
        let data = instance.store.data_mut();
        data.limiter.exhausted = false;
        data.imports = Duration::ZERO;
        data.usage = Default::default();
        let started = Instant::now();
        data.call_deadline = started + deadline;
        let result = call(&instance.controller, &mut instance.store);
        let spent = Spent {
            wait,
            instantiate,
            call: started.elapsed(),
            imports: instance.store.data().imports,
            memory: instance.store.data().limiter.memory_used() as u64,
        };
        let stderr = forward_output(instance.store.data());
        instance.calls += 1;
        match result {
            Ok(value) => {
                let data = instance.store.data_mut();
                data.cache = Arc::new(MemoryCache::default());
                data.key = None;
                if self.reuse && instance.calls < MAX_CALLS_PER_INSTANCE {
                    self.runtime.inner.pool.checkin(busy);
                }
                Ok((value, spent))
            }
            Err(error) => {
                // The instance is dropped with its slot, never entered again.
                let error = classify(instance.store.data(), error, deadline, &stderr);
                if let CallError::LimitExceeded(exceeded) = &error {
                    self.runtime.inner.limit_counts.record(exceeded.limit);
                }
                Err(error)
            }
        }
    }
}

/// Epoch ticks for a deadline. The first tick may come at once (the ticker
/// runs at its own phase), so one more is added: a call is interrupted after
/// at least its deadline and at most one tick more.
pub(super) fn deadline_ticks(deadline: Duration) -> u64 {
    let ticks = deadline.as_micros().div_ceil(EPOCH_TICK.as_micros());
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}

/// Turns a wasmtime error into the [`CallError`] that says what happened.
fn classify(
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
fn forward_output(state: &PluginState) -> String {
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
