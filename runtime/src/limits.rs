//! Output limits: how much one call may return, log and ask of the host.
//!
//! CPU and memory bound what a plugin can burn; these bound what it can
//! hand the host. Each has a default sized for real controllers (an object
//! as large as the API server stores, hundreds of actions, a chatty log)
//! and a flag of `kubewasm` to change it.
//!
//! # Guarantees
//! - An overrun is a [`LimitExceeded`] naming the limit, the maximum and
//!   what was asked; the call fails as a whole (no action of it is
//!   performed) and its instance is dropped, never reused.
//! - Host calls (`cache` reads and `log` records) are counted as they
//!   happen: the call traps at the first one past its budget, so a flood
//!   stops at once rather than at the deadline.
//! - An outcome is checked whole ([`Limits::check_outcome`]) before any of
//!   it is parsed or planned.
//! - Every overrun is counted per limit ([`LimitCounts`]) for metrics.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::action::Desired;

/// One output limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Limit {
    /// Actions in one outcome.
    Actions,
    /// Bytes of one object (an apply or status body).
    ObjectBytes,
    /// Bytes of one outcome, every action together.
    OutcomeBytes,
    /// `log` records in one call.
    LogRecords,
    /// Bytes of `log` records (message and fields) in one call.
    LogBytes,
    /// Keys returned by one `map-keys` call.
    MapKeys,
    /// Host calls (`cache` reads and `log` records) in one call: hostcall fuel.
    Hostcalls,
}

impl Limit {
    /// Every limit.
    pub const ALL: [Self; 7] = [
        Self::Actions,
        Self::ObjectBytes,
        Self::OutcomeBytes,
        Self::LogRecords,
        Self::LogBytes,
        Self::MapKeys,
        Self::Hostcalls,
    ];

    /// The limit's name, as metrics and flags spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Actions => "actions-per-outcome",
            Self::ObjectBytes => "bytes-per-object",
            Self::OutcomeBytes => "bytes-per-outcome",
            Self::LogRecords => "log-records-per-call",
            Self::LogBytes => "log-bytes-per-call",
            Self::MapKeys => "keys-per-map",
            Self::Hostcalls => "hostcalls-per-call",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plugin went past a limit.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
#[error("limit {limit} exceeded: {actual} > {max}")]
pub struct LimitExceeded {
    /// Which.
    pub limit: Limit,
    /// The maximum.
    pub max: u64,
    /// What the plugin asked for (at least; counting stops at the overrun).
    pub actual: u64,
}

/// What one call of a plugin may spend and return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallLimits {
    /// CPU deadline.
    pub deadline: std::time::Duration,
    /// Largest linear memory, in bytes (all its memories).
    pub memory: usize,
    /// Output limits.
    pub output: Limits,
}

impl CallLimits {
    /// Each limit the lower of `self`'s and `host`'s: a plugin may be held
    /// tighter than the host's limits, never looser.
    #[must_use]
    pub fn within(self, host: Self) -> Self {
        Self {
            deadline: self.deadline.min(host.deadline),
            memory: self.memory.min(host.memory),
            output: self.output.min(host.output),
        }
    }
}

/// The output limits of every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Actions per outcome (default 500).
    pub actions: u64,
    /// Bytes per object (default 1.5 MiB, the API server's own bound).
    pub object_bytes: u64,
    /// Bytes per outcome (default 16 MiB).
    pub outcome_bytes: u64,
    /// Log records per call (default 1,000).
    pub log_records: u64,
    /// Log bytes per call (default 256 KiB).
    pub log_bytes: u64,
    /// Keys per `map-keys` call (default 10,000).
    pub map_keys: u64,
    /// Host calls per call (default 100,000).
    pub hostcalls: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            actions: 500,
            object_bytes: 3 << 19,
            outcome_bytes: 16 << 20,
            log_records: 1_000,
            log_bytes: 256 << 10,
            map_keys: 10_000,
            hostcalls: 100_000,
        }
    }
}

impl Limits {
    /// Each limit the lower of `self`'s and `other`'s.
    #[must_use]
    pub fn min(self, other: Self) -> Self {
        Self {
            actions: self.actions.min(other.actions),
            object_bytes: self.object_bytes.min(other.object_bytes),
            outcome_bytes: self.outcome_bytes.min(other.outcome_bytes),
            log_records: self.log_records.min(other.log_records),
            log_bytes: self.log_bytes.min(other.log_bytes),
            map_keys: self.map_keys.min(other.map_keys),
            hostcalls: self.hostcalls.min(other.hostcalls),
        }
    }

    /// The maximum of `limit`.
    pub fn max(&self, limit: Limit) -> u64 {
        match limit {
            Limit::Actions => self.actions,
            Limit::ObjectBytes => self.object_bytes,
            Limit::OutcomeBytes => self.outcome_bytes,
            Limit::LogRecords => self.log_records,
            Limit::LogBytes => self.log_bytes,
            Limit::MapKeys => self.map_keys,
            Limit::Hostcalls => self.hostcalls,
        }
    }

    /// Checks `actual` against `limit`.
    ///
    /// # Errors
    /// [`LimitExceeded`] when `actual` is past the maximum.
    pub fn check(&self, limit: Limit, actual: u64) -> Result<(), LimitExceeded> {
        let max = self.max(limit);
        if actual > max {
            Err(LimitExceeded { limit, max, actual })
        } else {
            Ok(())
        }
    }

    /// Checks a plugin's desired actions against the output limits
    /// (actions, bytes of each and of the whole) before anything of them
    /// is parsed or planned.
    ///
    /// # Errors
    /// [`LimitExceeded`] for the first limit it is past.
    pub(crate) fn check_desired(&self, desired: &[Desired]) -> Result<(), LimitExceeded> {
        self.check(Limit::Actions, desired.len() as u64)?;
        let mut total: u64 = 0;
        for action in desired {
            let bytes = match action {
                Desired::Apply { object, .. } | Desired::ApplyStatus(object) => object.len(),
                Desired::Delete(_, key, preconditions) => {
                    let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
                    key.name.len()
                        + text(&key.namespace)
                        + text(&preconditions.uid)
                        + text(&preconditions.resource_version)
                }
                Desired::Event(e) => e.reason.len() + e.action.len() + e.note.len(),
            } as u64;
            self.check(Limit::ObjectBytes, bytes)?;
            total = total.saturating_add(bytes);
            self.check(Limit::OutcomeBytes, total)?;
        }
        Ok(())
    }
}

/// What one call has used so far of the limits counted as it runs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Usage {
    hostcalls: u64,
    log_records: u64,
    log_bytes: u64,
}

impl Usage {
    /// Charges one host call.
    pub(crate) fn hostcall(&mut self, limits: &Limits) -> Result<(), LimitExceeded> {
        self.hostcalls += 1;
        limits.check(Limit::Hostcalls, self.hostcalls)
    }

    /// Charges one log record of `bytes`.
    pub(crate) fn log(&mut self, limits: &Limits, bytes: usize) -> Result<(), LimitExceeded> {
        self.hostcall(limits)?;
        self.log_records += 1;
        self.log_bytes = self.log_bytes.saturating_add(bytes as u64);
        limits.check(Limit::LogRecords, self.log_records)?;
        limits.check(Limit::LogBytes, self.log_bytes)
    }
}

/// How many times each limit was hit since the runtime started.
#[derive(Debug, Default)]
pub struct LimitCounts([AtomicU64; Limit::ALL.len()]);

impl LimitCounts {
    pub(crate) fn record(&self, limit: Limit) {
        self.0[limit as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Hits of `limit`.
    pub fn get(&self, limit: Limit) -> u64 {
        self.0[limit as usize].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_should_stop_at_the_first_overrun() {
        let limits = Limits {
            log_records: 2,
            hostcalls: 5,
            ..Limits::default()
        };
        let mut usage = Usage::default();
        assert!(usage.log(&limits, 10).is_ok());
        assert!(usage.log(&limits, 10).is_ok());
        let err = usage.log(&limits, 10).expect_err("third record");
        assert_eq!(
            err.to_string(),
            "limit log-records-per-call exceeded: 3 > 2"
        );
        assert!(usage.hostcall(&limits).is_ok());
        assert!(usage.hostcall(&limits).is_ok());
        assert_eq!(
            usage.hostcall(&limits).expect_err("sixth call").limit,
            Limit::Hostcalls
        );
        let counts = LimitCounts::default();
        counts.record(Limit::MapKeys);
        assert_eq!(counts.get(Limit::MapKeys), 1);
        assert_eq!(counts.get(Limit::Actions), 0);
    }
}
