use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, name = "")]
async fn empty() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 2, name = login)]
async fn not_a_string() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 3600, threshold = 10_000, name = "login/global")]
async fn a_separator() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
