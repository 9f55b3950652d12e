//! The sliding window counter on the attribute: a fixed rate, a token cost above the log's
//! 10,000, and stacked beside a log.
#![deny(warnings, clippy::pedantic)]

use ratelimit_runtime::{Algorithm, Rate, RateLimitError, rate_limit};

#[rate_limit(period = "1h", threshold = 100_000, key = api_key, algorithm = "sliding_window_counter")]
async fn search(api_key: &str) -> Result<usize, RateLimitError> {
    Ok(api_key.len())
}

#[rate_limit(
    period = "1m",
    threshold = 1_000_000,
    key = api_key,
    cost = 250_000,
    algorithm = "sliding_window_counter"
)]
async fn complete_large(api_key: &str) -> Result<(), RateLimitError> {
    let _ = api_key;
    Ok(())
}

#[rate_limit(period = "1m", threshold = 1_000_000, key = api_key, cost = tokens, algorithm = "sliding_window_counter")]
#[rate_limit(period = 1, threshold = 10, key = api_key, algorithm = "sliding_window_log")]
async fn complete(api_key: &str, tokens: u32) -> Result<u32, RateLimitError> {
    let _ = api_key;
    Ok(tokens)
}

const HOURLY: Rate = Rate::new_const(100_000, std::time::Duration::from_secs(3_600))
    .with_algorithm(Algorithm::SlidingWindowCounter);

#[rate_limit(rate = HOURLY, key = api_key)]
async fn by_const(api_key: &str) -> Result<(), RateLimitError> {
    let _ = api_key;
    Ok(())
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    assert_send(&search("k"));
    assert_send(&complete_large("k"));
    assert_send(&complete("k", 3));
    assert_send(&by_const("k"));
}
