//! The per-instance state a plugin's `Store` holds, and the sandbox around it.
//!
//! **Architecture Invariant:** the WASI context gives a plugin no capability:
//! no preopened directory, no environment, no arguments, no network, empty
//! stdin. Clocks and randomness are real. Stdout and stderr are captured in
//! bounded buffers and forwarded to `tracing` after each call.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::cache::{Cache, MemoryCache};
use crate::grants::Grants;
use crate::limits::{Limits, Usage};
use kubewasm_core::resource::ObjectKey;

/// Most random bytes one WASI call may ask for (wasmtime-wasi's default is
/// 64 MiB, allocated by the host before the guest sees it).
const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Most bytes of stdout or stderr kept per call; the rest is dropped.
const OUTPUT_CAPACITY: usize = 64 * 1024;

/// A bounded, drainable buffer behind a plugin's stdout or stderr.
///
/// Writes past the capacity are dropped rather than refused, so a chatty
/// plugin loses log lines, never its reconcile.
#[derive(Clone, Debug, Default)]
pub(crate) struct CapturedOutput {
    buffer: Arc<Mutex<BytesMut>>,
}

impl CapturedOutput {
    /// Takes what was written since the last drain.
    pub(crate) fn drain(&self) -> Bytes {
        self.buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .split()
            .freeze()
    }

    fn append(&self, bytes: &[u8]) {
        let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
        let room = OUTPUT_CAPACITY.saturating_sub(buffer.len());
        buffer.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(OUTPUT_CAPACITY)
    }
}

/// Enforces a plugin instance's memory budget and remembers that it was hit,
/// so the failure is reported as
/// [`MemoryExhausted`](crate::CallError::MemoryExhausted) rather than as an
/// anonymous trap.
///
/// The budget is per instance, not per memory: a component may define many
/// linear memories and tables, and the bytes of all its memories (and the
/// elements of all its tables) count against one limit. The numbers of core
/// instances, memories and tables are bounded too, so a component cannot
/// spread itself over more of them than a plugin needs.
#[derive(Debug)]
pub(crate) struct Limiter {
    memory_bytes: usize,
    table_elements: usize,
    /// Bytes of every linear memory of the instance so far.
    memory_used: usize,
    /// Elements of every table of the instance so far.
    table_used: usize,
    pub(crate) exhausted: bool,
}

/// Most core instances one plugin instance may create.
pub(crate) const MAX_CORE_INSTANCES: usize = 64;
/// Most linear memories one plugin instance may define.
pub(crate) const MAX_MEMORIES: usize = 16;
/// Most tables one plugin instance may define.
pub(crate) const MAX_TABLES: usize = 32;

impl Limiter {
    /// Bytes of linear memory the instance holds (it never shrinks).
    pub(crate) fn memory_used(&self) -> usize {
        self.memory_used
    }

    pub(crate) fn new(memory_bytes: usize, table_elements: usize) -> Self {
        Self {
            memory_bytes,
            table_elements,
            memory_used: 0,
            table_used: 0,
            exhausted: false,
        }
    }

    /// Accounts a growth from `current` to `desired` against `used`, or
    /// refuses it when the instance's total would pass `limit`.
    fn grow(
        used: &mut usize,
        exhausted: &mut bool,
        (current, desired, limit): (usize, usize, usize),
        (what, unit): (&str, &str),
    ) -> wasmtime::Result<bool> {
        let total = used.saturating_add(desired.saturating_sub(current));
        if total > limit {
            *exhausted = true;
            return Err(wasmtime::format_err!(
                "{what} limit of {limit} {unit} exceeded: the instance's {what} would total {total} {unit}"
            ));
        }
        *used = total;
        Ok(true)
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Self::grow(
            &mut self.memory_used,
            &mut self.exhausted,
            (current, desired, self.memory_bytes),
            ("memory", "bytes"),
        )
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Self::grow(
            &mut self.table_used,
            &mut self.exhausted,
            (current, desired, self.table_elements),
            ("table", "elements"),
        )
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

/// What a `Store` holds for one plugin instance.
pub(crate) struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) plugin: Arc<str>,
    pub(crate) grants: Arc<Grants>,
    /// The cache of the call in progress.
    pub(crate) cache: Arc<dyn Cache>,
    /// The key of the call in progress, for log records.
    pub(crate) key: Option<ObjectKey>,
    /// Time spent in host imports during the call in progress.
    pub(crate) imports: std::time::Duration,
    /// The output limits.
    pub(crate) limits: Limits,
    /// What the call in progress used of them.
    pub(crate) usage: Usage,
    /// Reads the grants refused, counted for the plugin (all its
    /// instances) until the host takes them.
    pub(crate) reads_denied: Arc<std::sync::atomic::AtomicU64>,
    /// When the call in progress must end: no WASI call waits past it.
    pub(crate) call_deadline: std::time::Instant,
    pub(crate) stdout: CapturedOutput,
    pub(crate) stderr: CapturedOutput,
    /// The wall clock the plugin reads.
    pub(crate) clock: CallClock,
    /// What the reconcile or finalize in progress read (`None`: another
    /// call, whose reads are not recorded).
    pub(crate) reads: Option<crate::read_set::ReadSet>,
}

/// The wall clock a plugin reads: during a reconcile or finalize, the time
/// of the call (`Request::now`), frozen for the call, so that what a plugin
/// computes from it (a condition's `lastTransitionTime`) is what a replay
/// with `--now` prints every time; otherwise the host's clock.
#[derive(Clone, Default)]
pub(crate) struct CallClock(Arc<Mutex<Option<std::time::Duration>>>);

impl CallClock {
    /// Freezes the clock at `now` (since the epoch), or lets it run.
    pub(crate) fn set(&self, now: Option<jiff::Timestamp>) {
        let since_epoch = now.map(|t| {
            std::time::Duration::from_nanos(u64::try_from(t.as_nanosecond()).unwrap_or(0))
        });
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = since_epoch;
    }
}

impl wasmtime_wasi::HostWallClock for CallClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(1)
    }

    fn now(&self) -> std::time::Duration {
        let frozen = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        frozen.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
        })
    }
}

impl PluginState {
    pub(crate) fn new(
        plugin: Arc<str>,
        grants: Arc<Grants>,
        limiter: Limiter,
        limits: Limits,
        reads_denied: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        let stdout = CapturedOutput::default();
        let stderr = CapturedOutput::default();
        let clock = CallClock::default();
        let wasi = WasiCtxBuilder::new()
            // A program name, as every process has: Go's runtime and
            // libraries read `os.Args[0]` at start (klog panics without it).
            .arg("plugin")
            .wall_clock(clock.clone())
            .max_random_size(MAX_RANDOM_BYTES)
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter,
            plugin,
            grants,
            cache: Arc::new(MemoryCache::default()),
            key: None,
            imports: std::time::Duration::ZERO,
            limits,
            usage: Usage::default(),
            reads_denied,
            call_deadline: std::time::Instant::now(),
            stdout,
            stderr,
            clock,
            reads: None,
        }
    }
}

impl PluginState {
    /// The resource table WASI resources live in.
    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// The instance's monotonic clock, in nanoseconds, as the guest reads it.
    pub(crate) fn monotonic_now(&mut self) -> u64 {
        use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host as _;
        let mut clocks = wasmtime_wasi::clocks::WasiClocksCtxView {
            ctx: self.wasi.clocks(),
            table: &mut self.table,
        };
        clocks.now().unwrap_or(0)
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_should_count_every_memory_and_table_of_an_instance() {
        let mut limiter = Limiter::new(32 << 20, 100);
        // Two memories of 20 MiB each: the second passes the instance's budget.
        assert!(limiter.memory_growing(0, 20 << 20, None).is_ok());
        let err = limiter
            .memory_growing(0, 20 << 20, None)
            .expect_err("over the instance budget");
        assert!(limiter.exhausted);
        assert!(
            err.to_string()
                .starts_with("memory limit of 33554432 bytes exceeded"),
            "{err}"
        );
        // Growing one memory counts only the growth.
        let mut limiter = Limiter::new(32 << 20, 100);
        assert!(limiter.memory_growing(0, 16 << 20, None).is_ok());
        assert!(limiter.memory_growing(16 << 20, 24 << 20, None).is_ok());
        assert!(limiter.memory_growing(0, 9 << 20, None).is_err());
        // Tables likewise, and the counts of instances, memories and tables.
        assert!(limiter.table_growing(0, 60, None).is_ok());
        assert!(limiter.table_growing(0, 60, None).is_err());
        assert_eq!(
            (limiter.instances(), limiter.memories(), limiter.tables()),
            (MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES)
        );
    }

    /// Instantiates a component of `modules` core modules, each with a
    /// memory of `pages` 64 KiB pages, under a budget of `limit` bytes.
    fn instantiate_memories(modules: usize, pages: u32, limit: usize) -> (bool, bool) {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = wasmtime::Engine::new(&config).expect("engine");
        let mut text = String::from("(component");
        for i in 0..modules {
            text.push_str(&format!(" (core module $m{i} (memory {pages}))"));
        }
        for i in 0..modules {
            text.push_str(&format!(" (core instance (instantiate $m{i}))"));
        }
        text.push(')');
        let bytes = wat::parse_str(&text).expect("valid component text");
        let component = wasmtime::component::Component::new(&engine, bytes).expect("compiles");
        let mut store = wasmtime::Store::new(&engine, Limiter::new(limit, 100));
        store.limiter(|l| l);
        let linker = wasmtime::component::Linker::<Limiter>::new(&engine);
        let ok = linker.instantiate(&mut store, &component).is_ok();
        (ok, store.data().exhausted)
    }

    #[test]
    fn a_component_with_many_memories_should_share_one_budget() {
        // Two memories of 20 MiB: each fits a 32 MiB budget, both do not.
        assert_eq!(instantiate_memories(2, 320, 32 << 20), (false, true));
        assert_eq!(instantiate_memories(2, 320, 64 << 20), (true, false));
        // More memories than an instance may have are refused, however small.
        assert!(!instantiate_memories(MAX_MEMORIES + 1, 1, 256 << 20).0);
        assert!(instantiate_memories(MAX_MEMORIES, 1, 256 << 20).0);
    }
}
