//! What one client connection may hold: the bounds that keep slow, idle or
//! greedy clients from starving the others.
//!
//! # Bounds ([`ConnectionLimits`])
//! - At most `max_connections` connections are served at once; past that
//!   the server stops accepting (the kernel's backlog holds the rest) until
//!   one closes.
//! - A TLS handshake must finish within `handshake_timeout`.
//! - An HTTP/1 request's headers must arrive within `header_read_timeout`.
//! - A connection with no request in flight and no byte read or written
//!   for `idle_timeout` is closed ([`Guarded`]): this covers a client that
//!   connects and says nothing, one that idles between requests, and idle
//!   HTTP/2 connections. A watch in flight keeps its connection.
//! - An HTTP/2 connection carries at most `max_streams` concurrent
//!   requests.
//! - Accept errors (out of file descriptors) back off from 10 ms to 1 s
//!   instead of spinning.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The bounds of client connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time to finish a TLS handshake.
    pub handshake_timeout: Duration,
    /// Time to send an HTTP/1 request's headers.
    pub header_read_timeout: Duration,
    /// Time a connection may sit with nothing in flight.
    pub idle_timeout: Duration,
    /// Concurrent requests on one HTTP/2 connection.
    pub max_streams: u32,
}

impl Default for ConnectionLimits {
    /// The real API server's values where it has them (32 s to read
    /// headers, 90 s idle).
    fn default() -> Self {
        Self {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_streams: 250,
        }
    }
}

/// Counts a connection's requests in flight; a [`Busy`] guard per request.
#[derive(Clone, Debug, Default)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// Marks a request in flight until the guard is dropped.
    pub fn start(&self) -> Busy {
        self.0.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(&self.0))
    }

    fn idle(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

/// One request in flight (a watch holds it as long as it streams).
#[derive(Debug)]
pub struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's stream, closed (reads fail with `TimedOut`) once idle
/// for the idle timeout.
pub struct Guarded<S> {
    inner: S,
    in_flight: InFlight,
    idle_timeout: Duration,
    last_activity: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<S> Guarded<S> {
    /// Wraps `inner`; `in_flight` counts its requests.
    pub fn new(inner: S, in_flight: InFlight, idle_timeout: Duration) -> Self {
        let now = Instant::now();
        Self {
            inner,
            in_flight,
            idle_timeout,
            last_activity: now,
            timer: Box::pin(tokio::time::sleep_until(now + idle_timeout)),
        }
    }

    fn touch(&mut self) {
        self.last_activity = Instant::now();
    }

    /// Whether the connection has been idle too long; arms the timer to
    /// wake the reader when it will have been.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.in_flight.idle() {
            return false;
        }
        let deadline = self.last_activity + self.idle_timeout;
        if Instant::now() >= deadline {
            return true;
        }
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx).is_ready()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.touch();
                }
                Poll::Ready(result)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "idle connection closed",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The pause after the `n`th accept error in a row: 10 ms, doubling, at
/// most 1 s.
pub fn accept_backoff(n: u32) -> Duration {
    Duration::from_millis(10u64.saturating_mul(1 << n.min(7))).min(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_should_close_and_a_busy_one_stay() {
        let (client, server) = tokio::io::duplex(64);
        let in_flight = InFlight::default();
        let mut guarded = Guarded::new(server, in_flight.clone(), Duration::from_secs(90));
        let busy = in_flight.start();
        let mut buf = [0u8; 8];
        // Busy: a read waits past the idle timeout.
        let read = tokio::time::timeout(Duration::from_secs(300), guarded.read(&mut buf)).await;
        assert!(read.is_err(), "a busy connection was closed");
        drop(busy);
        // Idle: the read fails once 90 s pass with nothing read or written.
        let started = Instant::now();
        let error = guarded.read(&mut buf).await.expect_err("closed");
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() <= Duration::from_secs(90));
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn activity_should_postpone_the_idle_close() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut guarded = Guarded::new(server, InFlight::default(), Duration::from_secs(90));
        let mut buf = [0u8; 1];
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(60)).await;
            client.write_all(b"x").await.expect("writes");
            guarded
                .read_exact(&mut buf)
                .await
                .expect("read before the timeout");
        }
    }

    #[test]
    fn accept_backoff_should_double_up_to_a_second() {
        assert_eq!(accept_backoff(0), Duration::from_millis(10));
        assert_eq!(accept_backoff(1), Duration::from_millis(20));
        assert_eq!(accept_backoff(30), Duration::from_secs(1));
    }
}
