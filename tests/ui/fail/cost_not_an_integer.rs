use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 100, cost = weight)]
async fn signed(weight: i64) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
