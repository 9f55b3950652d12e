use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(threshold = 2, name = "login")]
async fn missing() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1.5, threshold = 2)]
async fn fractional() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "1.5m", threshold = 2)]
async fn fractional_string() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = -5, threshold = 2)]
async fn negative() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "0s", threshold = 2)]
async fn zero() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "99999999999999999999h", threshold = 2)]
async fn overflowing() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 3155760001, threshold = 2)]
async fn too_long() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "abc", threshold = 2)]
async fn abc() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "10", threshold = 2)]
async fn missing_unit() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "10 s", threshold = 2)]
async fn space() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1500ms, threshold = 2)]
async fn unit_suffix() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "10 parsecs", threshold = 2)]
async fn unknown_unit() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
