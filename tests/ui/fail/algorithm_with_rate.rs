use ratelimit_runtime::{Rate, RateLimitError, rate_limit};

#[rate_limit(rate = plan, key = api_key, algorithm = "sliding_window_counter")]
async fn search(plan: Rate, api_key: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
