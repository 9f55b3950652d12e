use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 1, threshold = 4)]
#[rate_limit(period = 60, threshold = 100)]
async fn twice() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = twice();
}
