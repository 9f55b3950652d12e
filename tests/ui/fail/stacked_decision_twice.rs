use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 1, threshold = 5, decision = burst)]
#[rate_limit(period = "1d", threshold = 1000, decision = daily)]
async fn twice() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
