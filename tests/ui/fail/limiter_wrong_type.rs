use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, limiter = &"redis://127.0.0.1:6379/")]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = limited();
}
