use ratelimit_runtime::{RateLimitError, rate_limit};

// A log records a call of cost `c` as `c` entries: a literal cost above 10,000 is refused,
// and the message names the counter, which takes it.
#[rate_limit(period = "1m", threshold = 100_000, key = api_key, cost = 50_000)]
async fn complete(api_key: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, cost = 6)]
async fn too_costly() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 100, cost = weight)]
async fn signed(weight: i64) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, cost = 0)]
async fn free() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
