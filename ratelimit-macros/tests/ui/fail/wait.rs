use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 1, threshold = 10, wait = "876601h")]
async fn too_long() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1, threshold = 10, wait = "0s")]
async fn zero() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1, threshold = 10, wait = "30s", count = "ok")]
async fn with_count() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1, threshold = 10, wait = "30s")]
#[rate_limit(period = 3600, threshold = 100, count_if = |r: &Result<(), RateLimitError>| r.is_ok())]
async fn stacked_with_count_if() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
