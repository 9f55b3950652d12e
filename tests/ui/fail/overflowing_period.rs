use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = "99999999999999999999h", threshold = 2)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
