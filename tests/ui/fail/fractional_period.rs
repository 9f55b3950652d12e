use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 1.5, threshold = 2)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
