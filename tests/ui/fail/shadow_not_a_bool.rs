use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 100, key = user, shadow = "yes")]
async fn search(user: u64) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
