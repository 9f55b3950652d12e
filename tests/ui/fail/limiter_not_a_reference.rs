use std::sync::LazyLock;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

static LIMITER: LazyLock<Limiter> = LazyLock::new(Limiter::memory);

#[rate_limit(period = 30, threshold = 2, limiter = LIMITER.clone())]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
