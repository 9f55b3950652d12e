use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 1, threshold = 10, wait = "30s", count = "ok")]
async fn outbound() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
