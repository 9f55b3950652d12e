use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit]
async fn bare() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit()]
async fn empty() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(30, 2)]
async fn positional() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period, threshold = 2)]
async fn missing_value() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 2, colour = "red")]
async fn unknown_listed() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(window = 30, threshold = 2)]
async fn unknown_synonym() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, thresold = 2)]
async fn unknown_typo() -> Result<(), RateLimitError> {
    Ok(())
}

// Several mistakes in one attribute: each is reported.
#[rate_limit(period = "abc", threshold = 0, thresold = 2)]
async fn several_mistakes() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
