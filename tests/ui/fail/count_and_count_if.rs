use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors", count_if = |r: &Result<(), RateLimitError>| r.is_err())]
async fn login(ip: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
