//! The async runtime seam: what the check path and the Redis store ask of an executor, in one
//! place: Tokio (`tokio.rs`), and with the `smol` feature smol's global executor (`smol.rs`).
//! The choice is made per call, as redis-rs makes it for its connections when it is built for
//! both: Tokio when a Tokio runtime is current, else smol (with the feature), else none.
//!
//! - [`Runtime::current`]: the runtime the caller is on; `None` outside any (such a check is
//!   answered by the failure policy, as [`StoreError::NoRuntime`](crate::StoreError::NoRuntime));
//!   with the `smol` feature, smol's global executor outside Tokio, so never `None`.
//! - [`Runtime::id`]: tells runtimes apart, for state kept per runtime (the Redis store's
//!   connection, whose driver task lives on the runtime that made it, and what goes with it).
//! - [`Runtime::shuts_down`]: whether that state must go when the runtime does.
//! - [`Runtime::spawn`]: a detached task: the hand-off below, a cluster's slot lookup and
//!   connection replacement, the Sentinel watch, and the task (ended with the store) whose
//!   drop, when the runtime shuts down first, removes what the Redis store keeps for it.
//! - [`timeout`]: the bound on every Redis check, connecting included.
//! - [`HandOff`]: a future its caller polls in place which, when dropped unfinished, runs to
//!   its end as a task of its runtime.
//!
//! The in-process store needs none of this: it answers on the caller's thread, under any
//! executor or none.

#[cfg(feature = "smol")]
mod smol;
mod tokio;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use self::tokio::Tokio;

/// The runtime a check runs on, cheap to clone.
#[derive(Clone)]
pub(crate) struct Runtime(Which);

#[derive(Clone)]
enum Which {
    Tokio(Tokio),
    /// smol's global executor (feature `smol`).
    #[cfg(feature = "smol")]
    Smol,
}

/// Tells runtimes apart, for state kept per runtime: each Tokio runtime is one; smol's
/// global executor is one for the whole process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RuntimeId {
    Tokio(::tokio::runtime::Id),
    #[cfg(feature = "smol")]
    Smol,
}

impl Runtime {
    /// The runtime the caller runs on: its Tokio runtime, else (feature `smol`) smol's global
    /// executor; `None` outside Tokio without the feature.
    pub(crate) fn current() -> Option<Runtime> {
        if let Some(tokio) = Tokio::current() {
            return Some(Runtime(Which::Tokio(tokio)));
        }
        #[cfg(feature = "smol")]
        return Some(Runtime(Which::Smol));
        #[cfg(not(feature = "smol"))]
        None
    }

    /// This runtime's identity, for state kept per runtime.
    pub(crate) fn id(&self) -> RuntimeId {
        match &self.0 {
            Which::Tokio(tokio) => RuntimeId::Tokio(tokio.id()),
            #[cfg(feature = "smol")]
            Which::Smol => RuntimeId::Smol,
        }
    }

    /// Whether this runtime can shut down, dropping its tasks (a Tokio runtime; smol's global
    /// executor lives as long as the process).
    pub(crate) fn shuts_down(&self) -> bool {
        matches!(self.0, Which::Tokio(_))
    }

    /// Runs `future` as a task of this runtime, detached. On a Tokio runtime that is shutting
    /// down the future is dropped at once; smol's global executor never shuts down.
    /// Whether its tasks (a connection's driver among them) run while nobody blocks on it:
    /// a multi-thread Tokio runtime's, smol's global executor's; not a current-thread Tokio
    /// runtime's, which run only inside its `block_on`.
    pub(crate) fn runs_by_itself(&self) -> bool {
        match &self.0 {
            Which::Tokio(tokio) => tokio.runs_by_itself(),
            #[cfg(feature = "smol")]
            Which::Smol => true,
        }
    }

    pub(crate) fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        match &self.0 {
            Which::Tokio(tokio) => tokio.spawn(future),
            #[cfg(feature = "smol")]
            Which::Smol => smol::spawn(future),
        }
    }
}

/// Waits `duration`, on the current runtime's timers (Tokio's, else smol's).
pub(crate) async fn sleep(duration: Duration) {
    #[cfg(feature = "smol")]
    if Tokio::current().is_none() {
        return smol::sleep(duration).await;
    }
    tokio::sleep(duration).await;
}

/// Lets the current runtime's other tasks run before this one goes on.
pub(crate) async fn yield_now() {
    #[cfg(feature = "smol")]
    if Tokio::current().is_none() {
        return smol::yield_now().await;
    }
    tokio::yield_now().await;
}

/// `future`'s output, or [`Elapsed`] (and the future dropped) once `limit` passes first, on
/// the current runtime's timers (Tokio's, else smol's, as the caller finds them).
///
/// Not an `async fn`: one would keep `future` twice, as its argument and in the timer's
/// future it awaits (and so would each `async fn` around it), which made a Redis check's
/// call 22 KB, copied on every check. Awaited where it is made, as every caller does.
pub(crate) fn timeout<F: Future>(
    limit: Duration,
    future: F,
) -> impl Future<Output = Result<F::Output, Elapsed>> {
    use futures_util::FutureExt as _;
    #[cfg(feature = "smol")]
    if Tokio::current().is_none() {
        return futures_util::future::Either::Right(
            smol::timeout(limit, future).map(|output| output.ok_or(Elapsed)),
        );
    }
    let tokio = tokio::timeout(limit, future).map(|output| output.map_err(|_| Elapsed));
    #[cfg(feature = "smol")]
    let tokio = futures_util::future::Either::Left(tokio);
    tokio
}

/// Tokio's clock, which its sleeps follow (paused in tests under `tokio::time::pause`); outside
/// a Tokio runtime, the system's monotonic clock.
/// Runs `future` to its end even if its caller stops waiting: handed to the current runtime
/// then (see [`HandOff`]), so that what it makes (a call's slots) is dropped, and released, when
/// it ends; inline outside any runtime (where no remote call can be made).
pub(crate) async fn to_the_end<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> T {
    match Runtime::current() {
        Some(runtime) => HandOff::new(future, runtime).await,
        None => future.await,
    }
}

pub(crate) type Instant = ::tokio::time::Instant;

/// The time limit of [`timeout`] passed before its future finished.
#[derive(Debug)]
pub(crate) struct Elapsed;

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

#[cfg(test)]
impl<T: Send + 'static> HandOff<T> {
    /// The size of the future it boxes (0 once it completed).
    pub(crate) fn boxed_size(&self) -> usize {
        self.future
            .as_ref()
            .map_or(0, |future| std::mem::size_of_val(&**future))
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
