//! The Tokio runtime, the one the Redis store runs on (with its I/O and time drivers, as
//! `#[tokio::main]` sets up): the items of the seam in `runtime/mod.rs`.

use std::future::Future;
use std::time::Duration;

/// The runtime a check runs on: a handle to it, cheap to clone.
#[derive(Clone)]
pub(crate) struct Runtime(::tokio::runtime::Handle);

/// Tells runtimes apart.
pub(crate) type RuntimeId = ::tokio::runtime::Id;

impl Runtime {
    /// The runtime the caller runs on; `None` outside any.
    pub(crate) fn current() -> Option<Runtime> {
        ::tokio::runtime::Handle::try_current().ok().map(Runtime)
    }

    /// This runtime's identity, for state kept per runtime.
    pub(crate) fn id(&self) -> RuntimeId {
        self.0.id()
    }

    /// Runs `future` as a task of this runtime, detached. On a runtime that is shutting down
    /// the future is dropped at once.
    pub(crate) fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        drop(self.0.spawn(future));
    }
}

/// Waits `duration`, on the Tokio runtime's time driver.
pub(crate) async fn sleep(duration: Duration) {
    ::tokio::time::sleep(duration).await;
}

/// Lets the runtime's other tasks run before this one goes on.
pub(crate) async fn yield_now() {
    ::tokio::task::yield_now().await;
}

/// Tokio's clock, which its sleeps follow (paused in tests under `tokio::time::pause`).
pub(crate) type Instant = ::tokio::time::Instant;

/// The time limit of [`timeout`] passed before its future finished.
#[derive(Debug)]
pub(crate) struct Elapsed;

/// `future`'s output, or [`Elapsed`] (and the future dropped) once `limit` passes first.
/// Polled on a Tokio runtime with its time driver.
pub(crate) async fn timeout<F: Future>(limit: Duration, future: F) -> Result<F::Output, Elapsed> {
    ::tokio::time::timeout(limit, future)
        .await
        .map_err(|_| Elapsed)
}
