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
use crate::resource::ObjectKey;

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

/// Enforces a plugin's memory limit and remembers that it was hit, so the
/// failure is reported as [`MemoryExhausted`](super::CallError::MemoryExhausted)
/// rather than as an anonymous trap.
#[derive(Debug)]
pub(crate) struct Limiter {
    memory_bytes: usize,
    table_elements: usize,
    pub(crate) exhausted: bool,
}

impl Limiter {
    pub(crate) fn new(memory_bytes: usize, table_elements: usize) -> Self {
        Self {
            memory_bytes,
            table_elements,
            exhausted: false,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.exhausted = true;
            return Err(wasmtime::format_err!(
                "memory limit of {} bytes exceeded (wanted {desired})",
                self.memory_bytes
            ));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            self.exhausted = true;
            return Err(wasmtime::format_err!(
                "table limit of {} elements exceeded (wanted {desired})",
                self.table_elements
            ));
        }
        Ok(true)
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
    pub(crate) stdout: CapturedOutput,
    pub(crate) stderr: CapturedOutput,
}

impl PluginState {
    pub(crate) fn new(plugin: Arc<str>, grants: Arc<Grants>, limiter: Limiter) -> Self {
        let stdout = CapturedOutput::default();
        let stderr = CapturedOutput::default();
        let wasi = WasiCtxBuilder::new()
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
            stdout,
            stderr,
        }
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
