use std::sync::LazyLock;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

static LOCAL: LazyLock<Limiter> = LazyLock::new(Limiter::memory);
static SHARED: LazyLock<Limiter> = LazyLock::new(Limiter::memory);

#[rate_limit(period = 1, threshold = 5, limiter = &LOCAL)]
#[rate_limit(period = "1d", threshold = 1000, limiter = &SHARED)]
async fn two_stores() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
