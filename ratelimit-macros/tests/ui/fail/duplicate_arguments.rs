use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, period = 60)]
async fn period() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, cost = 1, cost = 2)]
async fn cost() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, exempt = internal, exempt = true)]
async fn exempt(internal: bool) -> Result<bool, RateLimitError> {
    Ok(internal)
}

#[rate_limit(period = 60, threshold = 5, decision = d, decision = e)]
async fn decision() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, label = "a", label = "b")]
async fn label() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, count = "ok", count = "errors")]
async fn count() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, shadow = true, shadow = false)]
async fn shadow() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
