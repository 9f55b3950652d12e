use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, cost = 0)]
async fn free() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
