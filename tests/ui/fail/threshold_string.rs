use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = "x")]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
