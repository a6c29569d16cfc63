//! Scheduled plugins: a plugin that declares a `schedule` is called on it
//! (`scheduled`, with its declared reads), besides reconciling its
//! primary.
//!
//! # Expected flow
//! One task per controller ([`run`]) waits for the next time of the
//! current version's schedule ([`next_time`]), then, if this host is the one
//! to call it, runs the call as a step with no primary
//! ([`Worker::scheduled`]): under a permit of the host's workers, on a
//! blocking thread, its actions sent through the applier.
//!
//! # Rules
//! - **One host calls it:** the leader; in a ring, the replica holding the
//!   slot of the plugin's name (its writes fenced like a step's).
//! - **No catching up:** times missed (a host not leading, a call that ran
//!   past the next time, a host down) are not made up; the next time is the
//!   first after now, like a CronJob with no starting deadline.
//! - **No retry:** a failed call is logged and counted
//!   (`kubewasm_scheduled_total{result="error"}`); the next call is the
//!   schedule's.
//! - **Swaps:** the schedule is read again at least every [`RECHECK`], so a
//!   version swapped in (a schedule added, changed or removed) takes effect
//!   within it.
//! - The clock is tokio's, mapped to the wall clock once ([`Clock`]): paused
//!   in tests.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kubewasm_runtime::schedule::Schedule;
use tokio::time::Instant;

use super::worker::Worker;

/// How often the current version's schedule is read again while waiting.
pub(super) const RECHECK: Duration = Duration::from_secs(60);

/// The wall clock, following tokio's clock from the moment it was read.
#[derive(Clone, Copy, Debug)]
pub(super) struct Clock {
    wall: Timestamp,
    at: Instant,
}

impl Clock {
    /// The wall clock now, and tokio's.
    pub(super) fn start() -> Self {
        Self::at(Timestamp::now())
    }

    /// A clock reading `wall` at tokio's now.
    fn at(wall: Timestamp) -> Self {
        Self {
            wall,
            at: Instant::now(),
        }
    }

    /// The wall time now.
    pub(super) fn now(&self) -> Timestamp {
        let elapsed = SignedDuration::try_from(self.at.elapsed()).unwrap_or(SignedDuration::MAX);
        self.wall.saturating_add(elapsed).unwrap_or(self.wall)
    }

    /// tokio's instant of the wall time `time` (now, if it has passed).
    fn instant(&self, time: Timestamp) -> Instant {
        let ahead = Duration::try_from(time.duration_since(self.wall)).unwrap_or_default();
        self.at + ahead
    }
}

/// Waits for the next time of the schedule `schedule` gives (none: no
/// schedule now) and returns it; the schedule is asked again at least every
/// [`RECHECK`].
pub(super) async fn next_time(clock: &Clock, schedule: impl Fn() -> Option<Schedule>) -> Timestamp {
    loop {
        let now = clock.now();
        let next = schedule().and_then(|s| s.next_after(now));
        let recheck = now
            .saturating_add(SignedDuration::try_from(RECHECK).unwrap_or(SignedDuration::MAX))
            .unwrap_or(now);
        let wake = next.map_or(recheck, |next| next.min(recheck));
        tokio::time::sleep_until(clock.instant(wake)).await;
        if let Some(next) = next
            && clock.now() >= next
        {
            return next;
        }
    }
}

/// Calls the plugin of `worker` on its schedule, for as long as the
/// controller runs.
pub(super) async fn run(worker: Worker) {
    let clock = Clock::start();
    loop {
        let at = next_time(&clock, || {
            worker
                .current
                .get()
                .plugin
                .declaration()
                .cron()
                .ok()
                .flatten()
        })
        .await;
        worker.scheduled(at).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    fn every_ten_seconds() -> Option<Schedule> {
        Schedule::parse("*/10 * * * * *").ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_next_time_should_come_on_the_schedule_and_missed_ones_not_be_made_up() {
        let clock = Clock::at(at("2026-12-03T10:00:03Z"));
        let started = Instant::now();
        assert_eq!(
            next_time(&clock, every_ten_seconds).await,
            at("2026-12-03T10:00:10Z")
        );
        assert_eq!(started.elapsed(), Duration::from_secs(7));
        assert_eq!(
            next_time(&clock, every_ten_seconds).await,
            at("2026-12-03T10:00:20Z")
        );
        // A call that ran 25 s: 10:00:30 and 10:00:40 are missed.
        tokio::time::advance(Duration::from_secs(25)).await;
        assert_eq!(
            next_time(&clock, every_ten_seconds).await,
            at("2026-12-03T10:00:50Z")
        );
        assert_eq!(started.elapsed(), Duration::from_secs(47));
    }

    #[tokio::test(start_paused = true)]
    async fn a_schedule_swapped_in_should_take_effect_within_the_recheck() {
        let clock = Clock::at(at("2026-12-03T10:00:00Z"));
        let scheduled = Arc::new(AtomicBool::new(false));
        let swap = {
            let scheduled = Arc::clone(&scheduled);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(90)).await;
                scheduled.store(true, Ordering::SeqCst);
            })
        };
        let started = Instant::now();
        let next = next_time(&clock, || {
            scheduled
                .load(Ordering::SeqCst)
                .then(every_ten_seconds)
                .flatten()
        })
        .await;
        // Seen at the second recheck (120 s), then its next time.
        assert_eq!(next, at("2026-12-03T10:02:10Z"));
        assert_eq!(started.elapsed(), Duration::from_secs(130));
        swap.await.expect("swapped");
    }
}
