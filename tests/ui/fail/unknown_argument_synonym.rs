use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(window = 30, threshold = 2)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
