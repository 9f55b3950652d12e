//! The smol side of the runtime seam in `runtime/mod.rs` (feature `smol`): smol's global
//! executor, which runs its tasks on threads of its own (`SMOL_THREADS`, one by default) and
//! drives its I/O and timers (async-io's reactor) whatever executor the caller is on:
//! `smol::block_on`, `futures::executor::block_on`, or another crate's. redis-rs (its
//! `smol-comp` feature) makes its connections there too when no Tokio runtime is current.

use std::future::Future;
use std::time::Duration;

/// Runs `future` as a task of smol's global executor, detached.
pub(super) fn spawn(future: impl Future<Output = ()> + Send + 'static) {
    smol::spawn(future).detach();
}

/// Waits `duration`, on async-io's timers.
pub(super) async fn sleep(duration: Duration) {
    smol::Timer::after(duration).await;
}

/// Lets the executor's other tasks run before this one goes on.
pub(super) async fn yield_now() {
    smol::future::yield_now().await;
}

/// `future`'s output, or `None` (and the future dropped) once `limit` passes first, on
/// async-io's timers. Not an `async fn`, which would keep `future` twice (see
/// [`timeout`](super::timeout)).
pub(super) fn timeout<F: Future>(
    limit: Duration,
    future: F,
) -> impl Future<Output = Option<F::Output>> {
    use smol::future::FutureExt as _;
    // The timer starts now, not once the call first waits; `or` prefers the call's output
    // when both are ready.
    let timer = smol::Timer::after(limit);
    futures_util::FutureExt::map(future, Some).or(async move {
        timer.await;
        None
    })
}
