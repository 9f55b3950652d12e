use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, key = __ratelimit)]
async fn reserved(__ratelimit: u64) -> Result<u64, RateLimitError> {
    Ok(__ratelimit)
}

#[rate_limit(period = 30, threshold = 2, key = ids.clone())]
async fn not_display(ids: Vec<u32>) -> Result<(), RateLimitError> {
    let _ = ids;
    Ok(())
}

fn main() {
    let _ = reserved(1);
}
