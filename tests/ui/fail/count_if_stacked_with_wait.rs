use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 1, threshold = 10, wait = "30s")]
#[rate_limit(period = 3600, threshold = 100, count_if = |r: &Result<(), RateLimitError>| r.is_ok())]
async fn outbound() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
