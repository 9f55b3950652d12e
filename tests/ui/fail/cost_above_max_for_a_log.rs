use ratelimit_runtime::{RateLimitError, rate_limit};

// A log records a call of cost `c` as `c` entries: a literal cost above 10,000 is refused,
// and the message names the counter, which takes it.
#[rate_limit(period = "1m", threshold = 100_000, key = api_key, cost = 50_000)]
async fn complete(api_key: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
