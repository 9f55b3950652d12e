use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, count_if = |r: &Result<u16, RateLimitError>| r.is_err())]
async fn small() -> Result<u8, RateLimitError> {
    Ok(5)
}

fn main() {}
