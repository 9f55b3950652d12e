use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, thresold = 2)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
