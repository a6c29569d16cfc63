//! Faults the server injects on purpose (`kubewasm apiserver --faults
//! SPEC`): a test facility for the host and for plugin authors who want to
//! see their controller survive what a real cluster does on a bad day.
//!
//! # The specification
//! A comma-separated list of `name=value`; every probability is per
//! request (per event for `cut`), from 0 to 1, and 0 when not named:
//! ```text
//! seed=N            the draws' seed (default 1): the same seed draws the same sequence
//! throttle=P        any request: 429 TooManyRequests, Retry-After: retry-after, not served
//! conflict=P        a write: 409 Conflict, not applied
//! error=P           a write: 500 InternalError, not applied
//! timeout=P         a write: held for `hold`, then 504 Timeout, not applied
//! error-after=P     a write: applied, then answered 500
//! timeout-after=P   a write: applied, held for `hold`, then answered 504
//! cut=P             a watch event: the stream ends after it
//! expire=P          a watch from a resourceVersion: 410 Expired (the client lists again)
//! pause=P           any request: answered only after `pause-for`
//! retry-after=S     the seconds a 429 asks for (default 1)
//! hold=DURATION     how long a timeout holds the request (default 1s)
//! pause-for=DURATION  how long a pause lasts (default 2s)
//! ```
//! A duration is a number with `ms` or `s` (`250ms`, `2s`). For example
//! `seed=7,throttle=0.02,conflict=0.02,error=0.01,error-after=0.01,cut=0.01,expire=0.05`.
//!
//! # Guarantees
//! - **Seeded.** Draws come from SplitMix64 over the seed and a counter:
//!   one client sending one request at a time meets the same faults again
//!   with the same seed (several at once meet them in arrival order).
//! - **As a real server fails.** A write failed *before* applying changed
//!   nothing; one failed *after* applying changed the object as answered
//!   (the client cannot tell, and must read again, as after a lost
//!   response). Every refusal is a `Status` a client can read; 429s carry
//!   `Retry-After` and `details.retryAfterSeconds`.
//! - Faults never reach the server's own controllers (garbage collection,
//!   namespaces, the simulated cluster): they act on the store directly.
//!
//! Every fault injected is logged at DEBUG with `fault` (its name).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::http::error::ApiError;

/// Why a fault specification was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FaultSpecError {
    /// A term is not `name=value`.
    #[error("`{0}` is not name=value")]
    Term(String),
    /// A name no fault has.
    #[error("unknown fault `{0}` (see `kubewasm apiserver --help`)")]
    Unknown(String),
    /// A probability outside 0..=1, or not a number.
    #[error("{name}={value}: a probability is a number from 0 to 1")]
    Probability {
        /// The fault.
        name: String,
        /// What was given.
        value: String,
    },
    /// A number or duration that does not parse.
    #[error("{name}={value}: {expected}")]
    Value {
        /// The setting.
        name: String,
        /// What was given.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
}

/// A fault on a request, before it is served or after it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 429 TooManyRequests with Retry-After.
    Throttle,
    /// 409 Conflict.
    Conflict,
    /// 500 InternalError.
    Error,
    /// Held, then 504 Timeout.
    Timeout,
}

impl Fault {
    /// Its name in logs and the specification.
    pub fn name(self) -> &'static str {
        match self {
            Self::Throttle => "throttle",
            Self::Conflict => "conflict",
            Self::Error => "error",
            Self::Timeout => "timeout",
        }
    }
}

/// Probabilities and settings of the faults (see the module documentation).
#[derive(Debug)]
pub struct Faults {
    seed: u64,
    draws: AtomicU64,
    throttle: f64,
    conflict: f64,
    error: f64,
    timeout: f64,
    error_after: f64,
    timeout_after: f64,
    cut: f64,
    expire: f64,
    pause: f64,
    retry_after: u32,
    hold: Duration,
    pause_for: Duration,
}

impl Default for Faults {
    /// No fault at all.
    fn default() -> Self {
        Self {
            seed: 1,
            draws: AtomicU64::new(0),
            throttle: 0.0,
            conflict: 0.0,
            error: 0.0,
            timeout: 0.0,
            error_after: 0.0,
            timeout_after: 0.0,
            cut: 0.0,
            expire: 0.0,
            pause: 0.0,
            retry_after: 1,
            hold: Duration::from_secs(1),
            pause_for: Duration::from_secs(2),
        }
    }
}

fn duration(name: &str, value: &str) -> Result<Duration, FaultSpecError> {
    let invalid = || FaultSpecError::Value {
        name: name.to_owned(),
        value: value.to_owned(),
        expected: "a duration is a whole number of ms or s (250ms, 2s), at most 300s",
    };
    let (number, unit) = if let Some(ms) = value.strip_suffix("ms") {
        (ms, 1)
    } else if let Some(s) = value.strip_suffix('s') {
        (s, 1000)
    } else {
        return Err(invalid());
    };
    let millis = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|ms| *ms <= 300_000)
        .ok_or_else(invalid)?;
    Ok(Duration::from_millis(millis))
}

impl std::str::FromStr for Faults {
    type Err = FaultSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let mut faults = Self::default();
        for term in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (name, value) = term
                .split_once('=')
                .map(|(n, v)| (n.trim(), v.trim()))
                .ok_or_else(|| FaultSpecError::Term(term.to_owned()))?;
            let probability = || {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| FaultSpecError::Probability {
                        name: name.to_owned(),
                        value: value.to_owned(),
                    })
            };
            let number = |expected| FaultSpecError::Value {
                name: name.to_owned(),
                value: value.to_owned(),
                expected,
            };
            match name {
                "seed" => faults.seed = value.parse().map_err(|_| number("a whole number"))?,
                "retry-after" => {
                    faults.retry_after = value
                        .parse()
                        .ok()
                        .filter(|s| (1..=600).contains(s))
                        .ok_or_else(|| number("whole seconds from 1 to 600"))?;
                }
                "hold" => faults.hold = duration(name, value)?,
                "pause-for" => faults.pause_for = duration(name, value)?,
                "throttle" => faults.throttle = probability()?,
                "conflict" => faults.conflict = probability()?,
                "error" => faults.error = probability()?,
                "timeout" => faults.timeout = probability()?,
                "error-after" => faults.error_after = probability()?,
                "timeout-after" => faults.timeout_after = probability()?,
                "cut" => faults.cut = probability()?,
                "expire" => faults.expire = probability()?,
                "pause" => faults.pause = probability()?,
                other => return Err(FaultSpecError::Unknown(other.to_owned())),
            }
        }
        Ok(faults)
    }
}

impl Faults {
    /// The next draw, uniform in `[0, 1)`: SplitMix64 of the seed and the
    /// draw's number.
    fn draw(&self) -> f64 {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let mut z = self
            .seed
            .wrapping_add(n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // The top 53 bits as a fraction.
        #[expect(clippy::cast_precision_loss, reason = "53 bits fit an f64 exactly")]
        let fraction = (z >> 11) as f64 / (1u64 << 53) as f64;
        fraction
    }

    fn hits(&self, probability: f64) -> bool {
        probability > 0.0 && self.draw() < probability
    }

    /// How long to hold a request before serving it, if it is paused.
    pub fn pause(&self) -> Option<Duration> {
        self.hits(self.pause).then_some(self.pause_for)
    }

    /// The fault a request meets before it is served: throttling for any
    /// request, a conflict, an error or a timeout for a write.
    pub fn before(&self, write: bool) -> Option<Fault> {
        if self.hits(self.throttle) {
            return Some(Fault::Throttle);
        }
        if !write {
            return None;
        }
        [
            (self.conflict, Fault::Conflict),
            (self.error, Fault::Error),
            (self.timeout, Fault::Timeout),
        ]
        .into_iter()
        .find(|(p, _)| self.hits(*p))
        .map(|(_, fault)| fault)
    }

    /// The fault a write meets once it was applied: an error or a timeout.
    pub fn after(&self, write: bool) -> Option<Fault> {
        if !write {
            return None;
        }
        [
            (self.error_after, Fault::Error),
            (self.timeout_after, Fault::Timeout),
        ]
        .into_iter()
        .find(|(p, _)| self.hits(*p))
        .map(|(_, fault)| fault)
    }

    /// Whether a watch from a resourceVersion finds it expired (410).
    pub fn expires(&self) -> bool {
        self.hits(self.expire)
    }

    /// Whether a watch stream ends after the event it just sent.
    pub fn cuts(&self) -> bool {
        self.hits(self.cut)
    }

    /// The answer a fault gives, once its hold (for a timeout) is over.
    pub async fn answer(&self, fault: Fault, applied: bool) -> ApiError {
        tracing::debug!(fault = fault.name(), applied, "fault injected");
        match fault {
            Fault::Throttle => ApiError::too_many_requests(
                "the server has received too many requests and has asked us to try again later (injected fault)",
            )
            .retry_after(self.retry_after),
            Fault::Conflict => ApiError::new(
                409,
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again (injected fault)",
            ),
            Fault::Error => ApiError::new(
                500,
                "InternalError",
                if applied {
                    "an error on the server (injected fault, after the write was applied)"
                } else {
                    "an error on the server (injected fault)"
                },
            ),
            Fault::Timeout => {
                tokio::time::sleep(self.hold).await;
                ApiError::timeout(
                    "the server was unable to return a response in the time allotted, but may still be processing the request (injected fault)",
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_specification_should_parse_every_fault_and_refuse_what_is_wrong() {
        let faults: Faults =
            "seed=7, throttle=0.5,conflict=1,error=0,timeout=0.1,error-after=0.2,timeout-after=0.3,cut=0.4,expire=0.05,pause=0.01,retry-after=3,hold=250ms,pause-for=2s"
                .parse()
                .expect("valid");
        assert_eq!(faults.seed, 7);
        assert_eq!(faults.retry_after, 3);
        assert_eq!(faults.hold, Duration::from_millis(250));
        assert_eq!(faults.pause_for, Duration::from_secs(2));
        assert!((faults.expire - 0.05).abs() < f64::EPSILON);
        for (bad, error) in [
            ("throttle", FaultSpecError::Term("throttle".into())),
            ("nonsense=1", FaultSpecError::Unknown("nonsense".into())),
            (
                "error=1.5",
                FaultSpecError::Probability {
                    name: "error".into(),
                    value: "1.5".into(),
                },
            ),
            (
                "cut=NaN",
                FaultSpecError::Probability {
                    name: "cut".into(),
                    value: "NaN".into(),
                },
            ),
        ] {
            assert_eq!(bad.parse::<Faults>().expect_err(bad), error);
        }
        for bad in [
            "hold=2",
            "hold=1h",
            "pause-for=301s",
            "retry-after=0",
            "seed=-1",
        ] {
            assert!(bad.parse::<Faults>().is_err(), "{bad}");
        }
        assert_eq!("".parse::<Faults>().map(|f| f.before(true)), Ok(None));
    }

    #[test]
    fn the_same_seed_should_draw_the_same_faults_at_their_rates() {
        let draw = |seed: u64| {
            let faults: Faults = format!("seed={seed},conflict=0.3,throttle=0.1")
                .parse()
                .expect("valid");
            (0..2000).map(|_| faults.before(true)).collect::<Vec<_>>()
        };
        let (a, b, c) = (draw(7), draw(7), draw(8));
        assert_eq!(a, b, "repeatable");
        assert_ne!(a, c, "another seed, other faults");
        let throttled = a.iter().filter(|f| **f == Some(Fault::Throttle)).count();
        let conflicts = a.iter().filter(|f| **f == Some(Fault::Conflict)).count();
        // 10% of 2000, and 30% of the 90% left.
        assert!((150..250).contains(&throttled), "{throttled}");
        assert!((460..620).contains(&conflicts), "{conflicts}");
        // Reads meet only throttling.
        let faults: Faults = "conflict=1,error=1,timeout=1".parse().expect("valid");
        assert_eq!(faults.before(false), None);
        assert_eq!(faults.after(false), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_should_hold_then_answer_504_and_a_throttle_ask_to_wait() {
        let faults: Faults = "hold=3s,retry-after=5".parse().expect("valid");
        let started = tokio::time::Instant::now();
        let timeout = faults.answer(Fault::Timeout, false).await;
        assert_eq!(
            (timeout.code, started.elapsed()),
            (504, Duration::from_secs(3))
        );
        let throttled = faults.answer(Fault::Throttle, false).await;
        assert_eq!(throttled.code, 429);
        assert_eq!(throttled.status()["details"]["retryAfterSeconds"], 5);
    }
}
