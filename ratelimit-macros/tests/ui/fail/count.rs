use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, count = 10)]
async fn a_number() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors", count_if = |r: &Result<(), RateLimitError>| r.is_err())]
async fn with_count_if(ip: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, count_if = |r: &Result<u16, RateLimitError>| r.is_err())]
async fn small() -> Result<u8, RateLimitError> {
    Ok(5)
}

#[rate_limit(period = 60, threshold = 5, count = "errors")]
async fn total() -> u32 {
    5
}

#[rate_limit(period = "15m", threshold = 5, key = ip, count = errors)]
async fn not_a_string(ip: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "15m", threshold = 5, key = ip, count = "failures")]
async fn unknown(ip: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
