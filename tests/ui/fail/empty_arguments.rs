use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit()]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
