//! What hosts' logs say of their reconciles: each key's steps as time
//! intervals (from the DEBUG `reconcile started` and `reconcile ended` of
//! `kubewasm_engine`), to check that no key is ever in two steps at once.

use std::collections::BTreeMap;

use crate::host::Host;

/// Every reconcile of a log: `plugin key` → (start, end) intervals, in µs; one still
/// running when the log was read (or its process killed) lasts until
/// `open_until`.
pub fn intervals(log: &str, open_until: i64) -> BTreeMap<String, Vec<(i64, i64)>> {
    // Steps begun and not ended, oldest first: a second start before an
    // end is a step begun while one runs, and shows as an overlap.
    let mut open: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut done: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for line in log.lines() {
        let started = line.contains("reconcile started");
        if !started && !line.contains("reconcile ended") {
            continue;
        }
        // A step whose replica was fenced under it sent nothing after the
        // fence (its writes are gated): what it did, it did before another
        // replica could hold the slot. Its end is its last write, not
        // logged; it is left out.
        let fenced = line.contains("fenced=true");
        let Some(at) = line
            .split_whitespace()
            .next()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        else {
            continue;
        };
        let field = |name: &str| {
            line.split(&format!(" {name}="))
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
        };
        let (Some(plugin), Some(key)) = (field("plugin"), field("key")) else {
            continue;
        };
        let key = format!("{plugin} {key}");
        let key = key.as_str();
        let at = at.as_microsecond();
        if started {
            open.entry(key.to_owned()).or_default().push(at);
        } else if let Some(starts) = open.get_mut(key)
            && !starts.is_empty()
        {
            let start = starts.remove(0);
            if !fenced {
                done.entry(key.to_owned()).or_default().push((start, at));
            }
        }
    }
    for (key, starts) in open {
        for start in starts {
            done.entry(key.clone())
                .or_default()
                .push((start, open_until));
        }
    }
    done
}

/// A replica's log and until when its unfinished reconciles may have run.
pub struct Log {
    /// Its text.
    pub text: String,
    /// Until when its unfinished reconciles may have run, in µs.
    pub until: i64,
}

impl Log {
    /// The log of a replica still running: until now.
    pub fn of(host: &Host) -> Self {
        Self {
            text: host.log(),
            until: jiff::Timestamp::now().as_microsecond(),
        }
    }
}

/// Asserts that no key of a plugin was reconciled twice at overlapping
/// times, by one host or two replicas; returns how many reconciles each
/// log holds.
pub fn assert_no_overlap(logs: &[Log]) -> Vec<usize> {
    if let Some(dir) = std::env::var_os("RING_LOGS") {
        for (i, log) in logs.iter().enumerate() {
            let _ = std::fs::write(
                std::path::Path::new(&dir).join(format!("{i}.log")),
                &log.text,
            );
        }
    }
    let mut all: BTreeMap<String, Vec<(i64, i64, usize)>> = BTreeMap::new();
    let mut counts = vec![0; logs.len()];
    for (replica, log) in logs.iter().enumerate() {
        for (key, spans) in intervals(&log.text, log.until) {
            counts[replica] += spans.len();
            all.entry(key)
                .or_default()
                .extend(spans.into_iter().map(|(s, e)| (s, e, replica)));
        }
    }
    for (key, mut spans) in all {
        spans.sort_unstable();
        for pair in spans.windows(2) {
            let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
            assert!(
                end <= start,
                "{key} reconciled by replicas {a} and {b} at once: {pair:?}"
            );
        }
    }
    counts
}
