//! How long a failed key waits before its retry: per-key exponential
//! backoff, and an overall rate on retries (a token bucket), as client-go's
//! `DefaultTypedControllerRateLimiter` has them. The work queue applies
//! both ([`super::queue`]); time is the tokio clock's.

use std::time::Duration;

use tokio::time::Instant;

/// Per-key exponential backoff and the overall retry rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// The largest delay.
    pub max: Duration,
    /// Retries allowed per second, overall.
    pub rate: f64,
    /// Retries allowed at once before the rate applies.
    pub burst: u32,
}

impl Default for Backoff {
    /// client-go's `DefaultTypedControllerRateLimiter`.
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
            rate: 10.0,
            burst: 100,
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (1 for the first).
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(31);
        self.base
            .checked_mul(1 << exponent)
            .map_or(self.max, |d| d.min(self.max))
    }
}

/// The overall retry rate: a token bucket of [`Backoff::burst`] tokens
/// refilled at [`Backoff::rate`] a second.
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    /// Tokens available as of `at`.
    tokens: f64,
    at: Option<Instant>,
}

impl Bucket {
    /// A full bucket.
    pub(crate) fn full(backoff: &Backoff) -> Self {
        Self {
            tokens: f64::from(backoff.burst),
            at: None,
        }
    }

    /// Takes a retry token; the delay until it is available.
    pub(crate) fn take(&mut self, now: Instant, backoff: &Backoff) -> Duration {
        if backoff.rate <= 0.0 {
            return Duration::ZERO;
        }
        let burst = f64::from(backoff.burst.max(1));
        let elapsed = self
            .at
            .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
        self.tokens = (self.tokens + elapsed * backoff.rate).min(burst) - 1.0;
        self.at = Some(now);
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / backoff.rate)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_should_double_from_five_milliseconds_to_a_thousand_seconds() {
        let b = Backoff::default();
        assert_eq!(b.delay(1), Duration::from_millis(5));
        assert_eq!(b.delay(2), Duration::from_millis(10));
        assert_eq!(b.delay(11), Duration::from_millis(5120));
        assert_eq!(b.delay(40), Duration::from_secs(1000));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1000));
    }
}
