use ratelimit_runtime::{Rate, RateLimitError, rate_limit};

#[rate_limit(period = "1h", threshold = 100_000, key = api_key, algorithm = sliding_window_counter)]
async fn not_a_string(api_key: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "1h", threshold = 100_000, key = api_key, algorithm = "counter")]
async fn unknown(api_key: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(rate = plan, key = api_key, algorithm = "sliding_window_counter")]
async fn with_rate(plan: Rate, api_key: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
