use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, key = __ratelimit)]
async fn limited(__ratelimit: u64) -> Result<u64, RateLimitError> {
    Ok(__ratelimit)
}

fn main() {
    let _ = limited(1);
}
