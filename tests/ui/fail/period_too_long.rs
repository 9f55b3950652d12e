use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 3155760001, threshold = 2)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
