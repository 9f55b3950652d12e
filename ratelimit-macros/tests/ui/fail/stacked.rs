use std::sync::LazyLock;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 100, key = user)]
#[rate_limit(period = 60, threshold = 100, key = user)]
async fn duplicate(user: &str) -> Result<usize, RateLimitError> {
    Ok(user.len())
}

#[rate_limit(period = 1, threshold = 5, decision = burst)]
#[rate_limit(period = "1d", threshold = 1000, decision = daily)]
async fn decision_twice() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1, threshold = 5, key = user, name = "search")]
#[rate_limit(period = "1d", threshold = 1000, key = user, name = "search")]
async fn name_twice(user: &str) -> Result<usize, RateLimitError> {
    Ok(user.len())
}

static LOCAL: LazyLock<Limiter> = LazyLock::new(Limiter::memory);
static SHARED: LazyLock<Limiter> = LazyLock::new(Limiter::memory);

#[rate_limit(period = 1, threshold = 5, limiter = &LOCAL)]
#[rate_limit(period = "1d", threshold = 1000, limiter = &SHARED)]
async fn two_stores() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
