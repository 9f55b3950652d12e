use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30)]
async fn missing() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = -1)]
async fn negative() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 0)]
async fn zero() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 4294967296)]
async fn overflowing() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = "10")]
async fn quoted_number() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = "x")]
async fn string() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
