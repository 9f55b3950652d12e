//! The Tokio side of the runtime seam in `runtime/mod.rs`: a Tokio runtime (with its I/O and
//! time drivers, as `#[tokio::main]` sets up), its tasks and its timers.

use std::future::Future;
use std::time::Duration;

/// The Tokio runtime a check runs on: a handle to it, cheap to clone.
#[derive(Clone)]
pub(super) struct Tokio(::tokio::runtime::Handle);

impl Tokio {
    /// The Tokio runtime the caller runs on; `None` outside any, and on one built without
    /// its time or I/O driver (which the store's timeouts and redis-rs need: Tokio panics when
    /// they are used there), which is then taken for no runtime.
    pub(super) fn current() -> Option<Tokio> {
        let handle = ::tokio::runtime::Handle::try_current().ok()?;
        has_drivers(&handle).then_some(Tokio(handle))
    }

    /// This runtime's identity, for state kept per runtime.
    pub(super) fn id(&self) -> ::tokio::runtime::Id {
        self.0.id()
    }

    /// Runs `future` as a task of this runtime, detached. On a runtime that is shutting down
    /// the future is dropped at once.
    /// Whether its tasks run while nobody blocks on it: a multi-thread runtime's workers do,
    /// a current-thread runtime's run only inside `block_on`.
    pub(super) fn runs_by_itself(&self) -> bool {
        !matches!(
            self.0.runtime_flavor(),
            ::tokio::runtime::RuntimeFlavor::CurrentThread
        )
    }

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

/// `future`'s output, or an error (and the future dropped) once `limit` passes first, on the
/// Tokio runtime's time driver.
pub(super) fn timeout<F: Future>(limit: Duration, future: F) -> ::tokio::time::Timeout<F> {
    ::tokio::time::timeout(limit, future)
}

/// Whether `handle`'s runtime has its time and I/O drivers. Tokio tells only by panicking
/// when one is used, so a look makes a timer and registers a socket under `catch_unwind`
/// (where one is missing the panic hook still sees that panic, once per runtime). The answer
/// is kept per thread for the runtime it last saw, and a runtime found without them for the
/// process (a misconfiguration: few), so that a process making many runtimes keeps no
/// table of them.
fn has_drivers(handle: &::tokio::runtime::Handle) -> bool {
    use std::cell::Cell;
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock, PoisonError};

    thread_local! {
        static LAST: Cell<Option<(::tokio::runtime::Id, bool)>> = const { Cell::new(None) };
    }
    static WITHOUT: OnceLock<Mutex<HashSet<::tokio::runtime::Id>>> = OnceLock::new();

    let id = handle.id();
    if let Some((last, drivers)) = LAST.get()
        && last == id
    {
        return drivers;
    }
    let without = WITHOUT.get_or_init(Mutex::default);
    let known_without = without
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&id);
    let drivers = !known_without && {
        // A socket that cannot be made here tells nothing: the driver is taken to be there.
        let drivers = std::panic::catch_unwind(|| {
            let _entered = handle.enter();
            drop(::tokio::time::sleep(Duration::ZERO));
            if let Ok(socket) = std::net::UdpSocket::bind("127.0.0.1:0")
                && socket.set_nonblocking(true).is_ok()
            {
                drop(::tokio::net::UdpSocket::from_std(socket));
            }
        })
        .is_ok();
        if !drivers {
            tracing::warn!(
                "a Redis rate limit check on a Tokio runtime without its time or I/O driver: \
                 answered as outside a runtime (build the runtime with enable_all(), as \
                 #[tokio::main] does)"
            );
            without
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id);
        }
        drivers
    };
    LAST.set(Some((id, drivers)));
    drivers
}
