//! The async runtime seam: what the check path and the Redis store ask of an executor, in one
//! place, so that a second runtime is one file beside `tokio.rs` with the same items (and a
//! choice between the two in `Runtime::current`), plus redis-rs's connections for it (today
//! they are built for Tokio: its `tokio-comp` feature, in `store/redis/target.rs`).
//!
//! - [`Runtime::current`]: the runtime the caller is on; `None` outside any (such a check is
//!   answered by the failure policy, as [`StoreError::NoRuntime`](crate::StoreError::NoRuntime)).
//! - [`Runtime::id`]: tells runtimes apart, for state kept per runtime (the Redis store's
//!   connection, whose driver task lives on the runtime that made it).
//! - [`Runtime::spawn`]: a detached task: the hand-off below, a cluster's slot lookup, the
//!   watch that forgets a runtime's connection when the runtime shuts down.
//! - [`timeout`]: the bound on every Redis check, connecting included.
//! - [`HandOff`]: a future its caller polls in place which, when dropped unfinished, runs to
//!   its end as a task of its runtime.
//!
//! The in-process store needs none of this: it answers on the caller's thread, under any
//! executor or none.

mod tokio;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

pub(crate) use self::tokio::{Instant, Runtime, RuntimeId, sleep, timeout, yield_now};

/// A future polled by its caller which, dropped before it finished, is handed to its runtime
/// and runs to its end there: a Redis call whose caller stopped waiting (a deadline of the
/// caller's shorter than the limiter's timeout) still ends, and still tells the circuit
/// breakers how it went (otherwise such callers would keep a stalled Redis from ever opening
/// them).
pub(crate) struct HandOff<T: Send + 'static> {
    /// `None` once it completed.
    future: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
    runtime: Runtime,
}

impl<T: Send + 'static> HandOff<T> {
    /// `future`, to be handed to `runtime` if dropped unfinished.
    pub(crate) fn new(future: impl Future<Output = T> + Send + 'static, runtime: Runtime) -> Self {
        HandOff {
            future: Some(Box::pin(future)),
            runtime,
        }
    }
}

impl<T: Send + 'static> Future for HandOff<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let future = self
            .future
            .as_mut()
            .expect("a rate limit `HandOff` polled after it completed");
        let output = ready!(future.as_mut().poll(cx));
        self.future = None;
        Poll::Ready(output)
    }
}

impl<T: Send + 'static> Drop for HandOff<T> {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            // On a runtime that is shutting down, the task is dropped at once, and with it
            // what the future owns.
            self.runtime.spawn(async move {
                let _ = future.await;
            });
        }
    }
}
