use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = -5, threshold = 2)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
