use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = "10 parsecs", threshold = 2)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
