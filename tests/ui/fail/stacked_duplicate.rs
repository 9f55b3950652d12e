use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 100, key = user)]
#[rate_limit(period = 60, threshold = 100, key = user)]
async fn twice(user: &str) -> Result<usize, RateLimitError> {
    Ok(user.len())
}

fn main() {}
