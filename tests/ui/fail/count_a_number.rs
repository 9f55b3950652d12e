use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, count = 10)]
async fn hello() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
