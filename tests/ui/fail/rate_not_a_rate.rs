use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(rate = per_minute, key = user)]
async fn tiered(user: &str, per_minute: u32) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
