//! Test-only: fails on purpose, for fuzz/selftest to check that a finding
//! is reported whole in the log and replays from it. Not fuzzed by CI.
//! An input starting with `PLANT` panics; `PLANT!` spins until libFuzzer's
//! timeout; `PLANT+` grows memory until its RSS limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // Byte by byte, so the fuzzer's comparison tracing finds the prefix.
    if input.len() >= 5
        && input[0] == b'P'
        && input[1] == b'L'
        && input[2] == b'A'
        && input[3] == b'N'
        && input[4] == b'T'
    {
        match input.get(5) {
            Some(b'!') => loop {
                std::hint::spin_loop();
            },
            Some(b'+') => {
                let mut held = Vec::new();
                loop {
                    held.push(vec![1u8; 64 << 20]);
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
            _ => panic!("planted crash: {} bytes starting with PLANT", input.len()),
        }
    }
});
