use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(concurrency = 0)]
async fn zero() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = 2.5)]
async fn fractional() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = "4")]
async fn quoted_number() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = limits.exports)]
async fn expression() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = 100001)]
async fn above_the_maximum() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1, threshold = 10, concurrency = 4)]
async fn with_a_rate() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = 4, cost = 2)]
async fn with_a_cost() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = 4, count = "errors")]
async fn counted_by_outcome() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1, threshold = 10, slot_time = "10s")]
async fn slot_time_without_concurrency() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = 4, slot_time = "500ms")]
async fn slot_time_too_short() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = 4, slot_time = "2d")]
async fn slot_time_too_long() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(concurrency = 4, slot_time = "1500us")]
async fn slot_time_unit() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
