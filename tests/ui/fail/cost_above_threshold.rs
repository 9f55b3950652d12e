use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, cost = 6)]
async fn too_costly() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
