use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, limiter = Limiter::memory())]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
