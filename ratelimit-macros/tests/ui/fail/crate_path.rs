use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, crate = "not a path")]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
