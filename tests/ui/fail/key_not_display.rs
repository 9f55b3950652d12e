use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, key = ids.clone())]
async fn limited(ids: Vec<u32>) -> Result<(), RateLimitError> {
    let _ = ids;
    Ok(())
}

fn main() {}
