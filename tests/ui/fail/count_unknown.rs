use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = "15m", threshold = 5, key = ip, count = "failures")]
async fn login(ip: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
