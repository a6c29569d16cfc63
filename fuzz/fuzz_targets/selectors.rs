//! Label selectors, shard selectors (KEP-5866) and cron schedules, as
//! clients and plugins write them: parsed or refused naming the text; what
//! parses matches without panicking and prints back to itself.
#![no_main]

use kubewasm_core::schedule::Schedule;
use kubewasm_core::{Selector, ShardSelector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    match Selector::parse(text) {
        Ok(selector) => {
            let object = serde_json::json!({"metadata": {"labels": {"app": "web", "tier": ""}}});
            let _ = selector.matches(&object);
        }
        Err(error) => assert!(error.to_string().contains(text)),
    }
    if let Ok(shard) = text.parse::<ShardSelector>() {
        let canonical = shard.to_string();
        assert_eq!(canonical.parse::<ShardSelector>().as_ref(), Ok(&shard));
        let _ = shard.matches(|_| Some(text));
    }
    if let Ok(schedule) = Schedule::parse(text) {
        if let Some(next) = schedule.next_after(jiff::Timestamp::UNIX_EPOCH) {
            assert!(
                schedule.matches(next),
                "{text}: next time {next} does not match"
            );
        }
    }
});
