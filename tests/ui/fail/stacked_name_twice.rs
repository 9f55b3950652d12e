use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 1, threshold = 5, key = user, name = "search")]
#[rate_limit(period = "1d", threshold = 1000, key = user, name = "search")]
async fn search(user: &str) -> Result<usize, RateLimitError> {
    Ok(user.len())
}

fn main() {}
