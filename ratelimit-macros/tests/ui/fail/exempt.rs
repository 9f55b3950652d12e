use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, exempt = role)]
async fn exempted(role: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
