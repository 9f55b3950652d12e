use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, key = user, decision = user)]
async fn list(user: &str) -> Result<usize, RateLimitError> {
    Ok(user.len())
}

fn main() {}
