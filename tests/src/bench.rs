//! What the benchmarks share: batched, interleaved measurement and the
//! sections they write into BENCHMARKS.md.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use kubewasm_runtime::CallStats;

/// Whether this is a real run: `cargo bench` passes `--bench`;
/// `cargo test --all-targets` runs the benches as smoke tests.
pub fn is_real_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The value after `--write`, if any: where the report goes.
pub fn out_path() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--write")
        .and_then(|i| args.get(i + 1).cloned())
}

/// A scenario measured in batches; its figure is the median per-call time
/// of its batches.
pub struct Scenario<'a> {
    /// Its name in the report.
    pub name: &'static str,
    run: Box<dyn FnMut() -> Option<CallStats> + 'a>,
    per_iter: Vec<Duration>,
    stats: Vec<CallStats>,
}

impl<'a> Scenario<'a> {
    /// A scenario running `run` once per call; it may return the call's stats.
    pub fn new(name: &'static str, run: impl FnMut() -> Option<CallStats> + 'a) -> Self {
        Self {
            name,
            run: Box::new(run),
            per_iter: Vec::new(),
            stats: Vec::new(),
        }
    }

    /// Runs `calls` calls and records the mean per call.
    pub fn batch(&mut self, calls: usize) {
        let started = Instant::now();
        for _ in 0..calls {
            if let Some(stats) = black_box((self.run)()) {
                self.stats.push(stats);
            }
        }
        self.per_iter.push(started.elapsed().div_f64(calls as f64));
    }

    /// Forgets what was measured (after a warm-up batch).
    pub fn reset(&mut self) {
        self.per_iter.clear();
        self.stats.clear();
    }

    /// Median time per call.
    pub fn median(&self) -> Duration {
        median(self.per_iter.clone())
    }

    /// Median of one field of the recorded stats.
    pub fn median_stat(&self, f: impl Fn(&CallStats) -> Duration) -> Duration {
        median(self.stats.iter().map(f).collect())
    }
}

/// Warms every scenario up, then runs `rounds` rounds, each one batch of
/// every scenario in turn, so drift hits them all alike.
pub fn interleave(
    scenarios: &mut [Scenario<'_>],
    rounds: usize,
    calls: impl Fn(&Scenario<'_>) -> usize,
) {
    for s in scenarios.iter_mut() {
        let n = calls(s);
        s.batch(n);
        s.reset();
    }
    for _ in 0..rounds {
        for s in scenarios.iter_mut() {
            let n = calls(s);
            s.batch(n);
        }
    }
}

/// The median of durations (zero for none).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Microseconds, one decimal.
pub fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Milliseconds, two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Runs `f` once and times it.
pub fn time_once<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed())
}

/// Replaces (or appends) the section `name` of the report at `path`
/// (relative to the workspace root).
pub fn write_section(
    path: &str,
    name: &str,
    title: &str,
    command: &str,
    body: &str,
) -> std::io::Result<()> {
    let path = crate::workspace_root().join(path);
    let (begin, end) = (
        format!("<!-- bench:{name}:begin -->"),
        format!("<!-- bench:{name}:end -->"),
    );
    let section = format!("{begin}\n## {title}\n\nCommand: `{command}`.\n\n{body}{end}");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Benchmarks\n\nFigures from runs on the project machine (2 cores, 24 GiB). Each section says \
         the command that produced it; ratios measured in one run are what to read.\n\n"
            .to_owned()
    });
    let doc = match (doc.find(&begin), doc.find(&end)) {
        (Some(b), Some(e)) if b < e => format!("{}{section}{}", &doc[..b], &doc[e + end.len()..]),
        _ => format!("{}\n\n{section}\n", doc.trim_end()),
    };
    write_file(&path, &doc)
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Polls `done` every 100 ms until it holds, for at most `limit`: how long
/// it took.
pub fn until(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    while !done() {
        anyhow::ensure!(started.elapsed() < limit, "never within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(started.elapsed())
}
