//! The Tokio side of the runtime seam in `runtime/mod.rs`: a Tokio runtime (with its I/O and
//! time drivers, as `#[tokio::main]` sets up), its tasks and its timers.

use std::future::Future;
use std::time::Duration;

/// The Tokio runtime a check runs on: a handle to it, cheap to clone.
#[derive(Clone)]
pub(super) struct Tokio(::tokio::runtime::Handle);

impl Tokio {
    /// The Tokio runtime the caller runs on; `None` outside any.
    pub(super) fn current() -> Option<Tokio> {
        ::tokio::runtime::Handle::try_current().ok().map(Tokio)
    }

    /// This runtime's identity, for state kept per runtime.
    pub(super) fn id(&self) -> ::tokio::runtime::Id {
        self.0.id()
    }

    /// Runs `future` as a task of this runtime, detached. On a runtime that is shutting down
    /// the future is dropped at once.
    pub(super) fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        drop(self.0.spawn(future));
    }
}

/// Waits `duration`, on the Tokio runtime's time driver.
pub(super) async fn sleep(duration: Duration) {
    ::tokio::time::sleep(duration).await;
}

/// Lets the runtime's other tasks run before this one goes on.
pub(super) async fn yield_now() {
    ::tokio::task::yield_now().await;
}

/// `future`'s output, or `None` (and the future dropped) once `limit` passes first, on the
/// Tokio runtime's time driver.
pub(super) async fn timeout<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    ::tokio::time::timeout(limit, future).await.ok()
}
