//! The process's own series, as Prometheus client libraries export them
//! (client_golang's process collector, which controller-runtime's
//! dashboards read): CPU time, resident and virtual memory, start time,
//! open and allowed file descriptors, read from `/proc` when the metrics
//! are scraped. A file that cannot be read or parsed leaves its series out.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `process_*` series.
#[derive(Debug, Default)]
pub(super) struct Process {
    cpu_seconds: Counter<f64, AtomicU64>,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
    start_time_seconds: Gauge<f64, AtomicU64>,
    open_fds: Gauge,
    max_fds: Gauge,
}

/// What `/proc/self/stat` says, in the units the series have.
#[derive(Debug, PartialEq)]
struct Stat {
    cpu_seconds: f64,
    /// Since the system booted.
    started_seconds: f64,
    virtual_bytes: u64,
    resident_bytes: u64,
}

impl Process {
    /// Registers the series under `process_` in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("process");
        registry.register(
            "cpu_seconds",
            "Total user and system CPU time spent in seconds",
            self.cpu_seconds.clone(),
        );
        registry.register(
            "resident_memory_bytes",
            "Resident memory size in bytes",
            self.resident_bytes.clone(),
        );
        registry.register(
            "virtual_memory_bytes",
            "Virtual memory size in bytes",
            self.virtual_bytes.clone(),
        );
        registry.register(
            "start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            self.start_time_seconds.clone(),
        );
        registry.register(
            "open_fds",
            "Number of open file descriptors",
            self.open_fds.clone(),
        );
        registry.register(
            "max_fds",
            "Maximum number of open file descriptors",
            self.max_fds.clone(),
        );
    }

    /// Reads `/proc` into the series (called while scraping, one scrape at
    /// a time: the CPU counter is moved up to the process's total).
    pub(super) fn sample(&self) {
        let ticks = rustix::param::clock_ticks_per_second();
        let page = rustix::param::page_size() as u64;
        let stat = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|text| parse_stat(&text, ticks, page));
        if let Some(stat) = stat {
            let more = stat.cpu_seconds - self.cpu_seconds.get();
            if more > 0.0 {
                self.cpu_seconds.inc_by(more);
            }
            self.resident_bytes.set(gauge(stat.resident_bytes));
            self.virtual_bytes.set(gauge(stat.virtual_bytes));
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|text| boot_time(&text));
            if let Some(boot) = boot {
                self.start_time_seconds
                    .set(boot as f64 + stat.started_seconds);
            }
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(gauge(fds.count() as u64));
        }
        let limit = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|text| max_open_files(&text));
        if let Some(limit) = limit {
            self.max_fds.set(gauge(limit));
        }
    }
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `/proc/self/stat`: the fields after the command's closing parenthesis
/// (the command may hold spaces and parentheses), by proc(5)'s numbering.
fn parse_stat(text: &str, ticks: u64, page: u64) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // proc(5) field n is fields[n - 3]: the state, field 3, comes first.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = ticks.max(1) as f64;
    Some(Stat {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
        started_seconds: field(22)? as f64 / ticks,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)?.saturating_mul(page),
    })
}

/// `/proc/stat`'s `btime`: when the system booted, in seconds since the
/// epoch.
fn boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// `/proc/self/limits`' soft limit of open files (`unlimited` leaves it
/// out).
fn max_open_files(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_line_should_be_read_past_a_command_with_parentheses_and_spaces() {
        let line = "4242 (kube (wasm) 1) S 1 4242 4242 0 -1 4194560 2000 0 0 0 \
                    250 150 0 0 20 0 9 0 123400 104857600 2560 18446744073709551615 \
                    1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_stat(line, 100, 4096),
            Some(Stat {
                cpu_seconds: 4.0,
                started_seconds: 1234.0,
                virtual_bytes: 104_857_600,
                resident_bytes: 2560 * 4096,
            })
        );
        assert_eq!(parse_stat("4242 (cut", 100, 4096), None);
        assert_eq!(parse_stat("4242 (short) S 1 2", 100, 4096), None);
    }

    #[test]
    fn the_boot_time_and_the_open_files_limit_should_be_read() {
        assert_eq!(
            boot_time("cpu  1 2 3\nintr 5\nbtime 1764900000\nprocesses 9\n"),
            Some(1_764_900_000)
        );
        assert_eq!(boot_time("cpu 1\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             95431                95431                processes \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
    }

    #[test]
    fn a_sample_of_this_process_should_show_its_memory_and_files() {
        let process = Process::default();
        process.sample();
        assert!(process.resident_bytes.get() > 0);
        assert!(process.virtual_bytes.get() >= process.resident_bytes.get());
        assert!(process.open_fds.get() > 0);
        assert!(process.max_fds.get() >= process.open_fds.get());
        assert!(process.start_time_seconds.get() > 1.0e9, "after 2001");
    }
}
