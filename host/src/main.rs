//! The `kubewasm` binary: a thin shell over [`kubewasm::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    cap_malloc_arenas();
    kubewasm::cli::main()
}

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
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(
    unsafe_code,
    reason = "mallopt is a C call taking two integers, made before any other thread exists"
)]
fn cap_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt reads its two integer arguments only; no other thread
    // allocates yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn cap_malloc_arenas() {}
