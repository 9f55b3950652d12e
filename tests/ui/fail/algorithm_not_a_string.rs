use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = "1h", threshold = 100_000, key = api_key, algorithm = sliding_window_counter)]
async fn search(api_key: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
