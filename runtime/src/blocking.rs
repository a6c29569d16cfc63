//! The WASI calls that can wait, bounded by the call's deadline.
//!
//! wasmtime-wasi's synchronous bindings wait for a pollable by entering a
//! tokio runtime. Two holes follow: epoch interruption stops only running
//! Wasm, so a plugin that sleeps (`wasi:clocks` subscribe, then
//! `wasi:io/poll`) holds a host thread for as long as it asks, past its
//! deadline; and entering tokio from inside a call panics when the call runs
//! on an async worker thread. This module shadows every WASI function that
//! can wait (`poll`, `pollable.block` and `ready`, the monotonic clock's
//! `subscribe-*`, every `blocking-*` stream method) with a version that:
//!
//! - polls the operation without a tokio runtime, sleeping in short steps
//!   between polls, and gives up at the call's deadline with
//!   [`BlockedPastDeadline`], a trap the runtime reports as
//!   `DeadlineExceeded` (so a sleeping guest is stopped within its deadline
//!   plus one step);
//! - backs clock pollables with host timers checked against
//!   [`Instant::now`], so no timer needs a reactor.
//!
//! Nothing else a plugin can reach waits: it has no preopened directory, and
//! sockets and name lookups are denied before any is created.
//!
//! **Architecture Invariant:** no WASI call a plugin makes enters tokio or
//! outlives the deadline of the call it is part of.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::io::poll::{Host as _, HostPollable as _};
use wasmtime_wasi::p2::bindings::io::streams::{
    Host as _, HostInputStream as _, HostOutputStream as _,
};
use wasmtime_wasi::p2::bindings::sync::io::streams::StreamError;
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, StreamResult, subscribe};

use crate::state::PluginState;

/// The WASI version wasmtime-wasi 48 links; guests built against any 0.2.x
/// resolve to it.
const WASI: &str = "0.2.12";

/// The longest sleep between two polls of a waiting operation.
const MAX_STEP: Duration = Duration::from_millis(1);

/// A WASI call waited until the call's deadline.
#[derive(Debug, thiserror::Error)]
#[error("the plugin blocked in a WASI call past its deadline")]
pub(crate) struct BlockedPastDeadline;

/// Shadows wasmtime-wasi's waiting functions in `linker` (which must already
/// hold them, and allow shadowing).
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    let mut poll = linker.instance(&format!("wasi:io/poll@{WASI}"))?;
    poll.func_wrap(
        "poll",
        |mut store: Store<'_>, (pollables,): (Vec<Resource<DynPollable>>,)| {
            let (table, deadline) = parts(&mut store);
            Ok((wait(deadline, table.poll(pollables))??,))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut store: Store<'_>, (pollable,): (Resource<DynPollable>,)| {
            let (table, deadline) = parts(&mut store);
            wait(deadline, table.block(pollable))?
        },
    )?;
    poll.func_wrap(
        "[method]pollable.ready",
        |mut store: Store<'_>, (pollable,): (Resource<DynPollable>,)| {
            let (table, _) = parts(&mut store);
            // `ready` never waits: it answers from one poll.
            Ok((wait(Instant::now(), table.ready(pollable))??,))
        },
    )?;

    let mut clock = linker.instance(&format!("wasi:clocks/monotonic-clock@{WASI}"))?;
    clock.func_wrap(
        "subscribe-duration",
        |mut store: Store<'_>, (nanos,): (u64,)| {
            let at = Instant::now().checked_add(Duration::from_nanos(nanos));
            Ok((timer(store.data_mut().table(), at)?,))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |mut store: Store<'_>, (when,): (u64,)| {
            let state = store.data_mut();
            let now = state.monotonic_now();
            let at = Instant::now().checked_add(Duration::from_nanos(when.saturating_sub(now)));
            Ok((timer(state.table(), at)?,))
        },
    )?;

    let mut streams = linker.instance(&format!("wasi:io/streams@{WASI}"))?;
    macro_rules! blocking {
        ($name:literal, $stream:ty, ($($arg:ident: $ty:ty),*), $method:ident) => {
            streams.func_wrap(
                $name,
                |mut store: Store<'_>, (stream, $($arg,)*): (Resource<$stream>, $($ty,)*)| {
                    let (table, deadline) = parts(&mut store);
                    let result = wait(deadline, table.$method(stream, $($arg),*))?;
                    Ok((stream_result(table, result)?,))
                },
            )?;
        };
    }
    blocking!("[method]input-stream.blocking-read", DynInputStream, (len: u64), blocking_read);
    blocking!("[method]input-stream.blocking-skip", DynInputStream, (len: u64), blocking_skip);
    blocking!(
        "[method]output-stream.blocking-write-and-flush",
        DynOutputStream,
        (bytes: Vec<u8>),
        blocking_write_and_flush
    );
    blocking!(
        "[method]output-stream.blocking-flush",
        DynOutputStream,
        (),
        blocking_flush
    );
    blocking!(
        "[method]output-stream.blocking-write-zeroes-and-flush",
        DynOutputStream,
        (len: u64),
        blocking_write_zeroes_and_flush
    );
    blocking!(
        "[method]output-stream.blocking-splice",
        DynOutputStream,
        (src: Resource<DynInputStream>, len: u64),
        blocking_splice
    );
    Ok(())
}

type Store<'a> = StoreContextMut<'a, PluginState>;

fn parts<'a>(store: &'a mut Store<'_>) -> (&'a mut ResourceTable, Instant) {
    let state = store.data_mut();
    let deadline = state.call_deadline;
    (state.table(), deadline)
}

/// Converts a stream operation's result into the WIT `result<T, stream-error>`,
/// keeping traps as traps.
fn stream_result<T>(
    table: &mut ResourceTable,
    result: StreamResult<T>,
) -> wasmtime::Result<Result<T, StreamError>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(error) => Ok(Err(table.convert_stream_error(error)?.into())),
    }
}

/// Drives `operation` to completion by polling it, sleeping between polls,
/// until `deadline`.
///
/// # Errors
/// [`BlockedPastDeadline`] once the deadline has passed.
fn wait<F: Future>(deadline: Instant, operation: F) -> Result<F::Output, BlockedPastDeadline> {
    let mut operation = pin!(operation);
    let mut cx = Context::from_waker(Waker::noop());
    let mut step = Duration::from_micros(20);
    loop {
        if let Poll::Ready(output) = operation.as_mut().poll(&mut cx) {
            return Ok(output);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(BlockedPastDeadline);
        }
        std::thread::sleep(step.min(deadline - now));
        step = (step * 2).min(MAX_STEP);
    }
}

/// A host timer: ready once `Instant::now()` reaches `at` (never when `None`:
/// a time too far to represent).
struct Timer {
    at: Option<Instant>,
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Timer {
    async fn ready(&mut self) {
        let at = self.at;
        std::future::poll_fn(|_| match at {
            Some(at) if Instant::now() >= at => Poll::Ready(()),
            _ => Poll::Pending,
        })
        .await;
    }
}

fn timer(
    table: &mut ResourceTable,
    at: Option<Instant>,
) -> wasmtime::Result<Resource<DynPollable>> {
    let timer = table.push(Timer { at })?;
    subscribe(table, timer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_should_return_what_completes_and_stop_at_the_deadline() {
        let deadline = Instant::now() + Duration::from_millis(30);
        assert_eq!(wait(deadline, async { 7 }).ok(), Some(7));

        let at = Instant::now() + Duration::from_millis(5);
        let mut soon = Timer { at: Some(at) };
        let ready = {
            use wasmtime_wasi::p2::Pollable as _;
            wait(deadline, soon.ready())
        };
        assert!(ready.is_ok() && Instant::now() >= at);

        let started = Instant::now();
        let mut never = Timer { at: None };
        let blocked = {
            use wasmtime_wasi::p2::Pollable as _;
            wait(started + Duration::from_millis(20), never.ready())
        };
        let waited = started.elapsed();
        assert!(blocked.is_err());
        assert!(
            waited >= Duration::from_millis(20) && waited < Duration::from_millis(200),
            "{waited:?}"
        );
    }
}
