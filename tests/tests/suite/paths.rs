//! `crate = "path"`: the expansion reaches the runtime through the given path only. The facade
//! below re-exports the runtime but puts its own `check` in `__private`, counting its calls, so
//! a call that went to `::ratelimit_runtime` instead would go uncounted. (A renamed dependency,
//! found without `crate =`, is tested by the `renamed-dependency` member crate.)

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use ratelimit_runtime::{Limiter, RateLimitError};

/// A crate that re-exports the runtime, as a framework would.
mod facade {
    pub mod rl {
        pub use ratelimit_runtime::*;

        pub mod __private {
            use std::sync::atomic::{AtomicUsize, Ordering};

            use ratelimit_runtime::{Limiter, Rate, RateLimitError};

            pub use ratelimit_runtime::__private::*;

            pub static CHECKS: AtomicUsize = AtomicUsize::new(0);

            /// The runtime's `check`, counted.
            ///
            /// # Errors
            ///
            /// As the runtime's.
            pub async fn check(
                limiter: &Limiter,
                scope_and_key: (&'static str, Option<String>),
                rate: Rate,
            ) -> Result<(), RateLimitError> {
                CHECKS.fetch_add(1, Ordering::SeqCst);
                ratelimit_runtime::__private::check(limiter, scope_and_key, rate).await
            }
        }
    }
}

fn limiter() -> &'static Limiter {
    static LIMITER: OnceLock<Limiter> = OnceLock::new();
    LIMITER.get_or_init(Limiter::memory)
}

static RUNS: AtomicUsize = AtomicUsize::new(0);

#[facade::rl::rate_limit(
    period = 60,
    threshold = 1,
    key = id,
    limiter = limiter(),
    crate = "crate::paths::facade::rl"
)]
async fn through_the_facade(id: u8) -> Result<u8, RateLimitError> {
    RUNS.fetch_add(1, Ordering::SeqCst);
    Ok(id)
}

#[tokio::test]
async fn crate_override_routes_every_call_through_the_path() {
    let checks = &facade::rl::__private::CHECKS;
    assert_eq!(through_the_facade(1).await.unwrap(), 1);
    assert_eq!(checks.load(Ordering::SeqCst), 1);
    let err = through_the_facade(1).await.unwrap_err();
    assert_eq!(
        err.as_denied().unwrap().scope(),
        "suite::paths::through_the_facade"
    );
    assert_eq!(checks.load(Ordering::SeqCst), 2);
    assert_eq!(RUNS.load(Ordering::SeqCst), 1);
}
