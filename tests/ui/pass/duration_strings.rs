use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = "1ms", threshold = 1)]
async fn shortest() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "1500ms", threshold = 10)]
async fn millis() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "30s", threshold = 10)]
async fn seconds() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "5m", threshold = 10)]
async fn minutes() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "876600h", threshold = 4294967295)]
async fn longest() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 3155760000, threshold = 4294967295)]
async fn longest_in_seconds() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = (
        shortest(),
        millis(),
        seconds(),
        minutes(),
        longest(),
        longest_in_seconds(),
    );
}
