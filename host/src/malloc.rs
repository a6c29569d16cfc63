//! glibc's malloc, told how the host uses memory: few arenas, and the memory
//! freed by a burst of work given back once the process goes quiet.
//!
//! glibc keeps what a program frees for its next allocations: only the top
//! of a heap goes back to the system by itself, and a heap's pages freed
//! under a chunk still in use stay resident. A host's work comes in bursts
//! (a list of 10,000 objects handed to fifty plugins, a resync) and then
//! waits; what a burst allocated and freed would stay resident through the
//! wait. So a thread of its own watches the process's CPU time, once a
//! [`TICK`], and after a burst of [`WORTH`] CPU, at the first tick that
//! spent at most [`QUIET`], asks glibc to give back every free page of
//! every arena (`malloc_trim(0)`): once per burst, never while busy. A host
//! that compiled four components and ran them over 10,000 ConfigMaps held
//! 489 MiB a minute later without it, 243 MiB with it.

use std::time::Duration;

/// How often the process's CPU time is read.
const TICK: Duration = Duration::from_secs(1);
/// A tick that spent at most this (2% of a core) is quiet.
const QUIET: Duration = Duration::from_millis(20);
/// The CPU a burst must have spent since the last trim to be worth one.
const WORTH: Duration = Duration::from_millis(500);

/// Caps the arenas and starts the trimming thread (glibc only; elsewhere
/// nothing).
pub(crate) fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        glibc::cap_arenas();
        glibc::start_trimming();
    }
}

/// When to trim: a state machine fed the process's CPU time at each tick.
#[derive(Debug, Default)]
struct Quiet {
    /// The CPU time read at the last tick.
    last: Duration,
    /// The CPU spent since the last trim.
    burst: Duration,
}

impl Quiet {
    /// The process's CPU time now: whether to trim now. After a burst worth
    /// it, the first quiet tick trims, and the burst starts again from nothing.
    fn tick(&mut self, cpu: Duration) -> bool {
        let spent = cpu.saturating_sub(self.last);
        self.last = cpu;
        self.burst += spent;
        let trim = spent <= QUIET && self.burst >= WORTH;
        if trim {
            self.burst = Duration::ZERO;
        }
        trim
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(
    unsafe_code,
    reason = "mallopt and malloc_trim are C calls taking integers only"
)]
mod glibc {
    use super::{Quiet, TICK};

    /// Caps glibc's malloc arenas at one per core the process may use, unless
    /// `MALLOC_ARENA_MAX` says otherwise.
    ///
    /// glibc gives a thread that finds the heap locked an arena of its own, up
    /// to eight per core, and memory freed in an arena stays there. The host's
    /// threads are many (the runtime's workers, a blocking thread per guest
    /// call running, the informers' decoders), and each plugin's work touches
    /// several: 50 idle plugins over 10,000 ConfigMaps held 1.56 times the
    /// memory of one with glibc's default, 1.38 times with the two arenas of a
    /// two-core machine (BENCHMARKS.md, the fleet's idle plugins).
    pub(super) fn cap_arenas() {
        if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
            return;
        }
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt reads its two integer arguments only; it is called
        // before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }

    /// The trimming thread: a tick a second, a trim after each burst.
    pub(super) fn start_trimming() {
        let started = std::thread::Builder::new()
            .name("kubewasm-trim".into())
            .spawn(|| {
                let mut quiet = Quiet::default();
                loop {
                    std::thread::sleep(TICK);
                    let cpu = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
                    let cpu = std::time::Duration::new(
                        u64::try_from(cpu.tv_sec).unwrap_or(0),
                        u32::try_from(cpu.tv_nsec).unwrap_or(0),
                    );
                    if quiet.tick(cpu) {
                        // SAFETY: malloc_trim takes the padding to leave
                        // at a heap's top; it locks each arena in turn.
                        unsafe {
                            libc::malloc_trim(0);
                        }
                    }
                }
            });
        // No thread (the system refuses one): memory is not trimmed, the
        // host works the same.
        drop(started);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_trim_should_follow_a_burst_at_its_first_quiet_tick_once() {
        let mut quiet = Quiet::default();
        let mut cpu = Duration::ZERO;
        let mut tick = |spent: Duration| {
            cpu += spent;
            quiet.tick(cpu)
        };
        assert!(!tick(ms(5)), "quiet, but no burst yet");
        assert!(!tick(ms(300)), "busy");
        assert!(!tick(ms(10)), "quiet after 300 ms: not worth a trim");
        assert!(!tick(ms(400)), "busy again: 710 ms since the start");
        assert!(!tick(ms(900)), "still busy");
        assert!(tick(ms(20)), "the first quiet tick after the burst");
        assert!(!tick(ms(0)), "once per burst");
        assert!(!tick(ms(15)), "still once");
        assert!(!tick(ms(480)), "busy: 495 ms since the trim");
        assert!(!tick(ms(1)), "quiet, but 496 ms is short of worth");
        assert!(tick(ms(10)), "quiet, and the burst reached worth with it");
    }
}
