use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, name = "login")]
async fn login() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, name = "login", key = 42)]
async fn login_again() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = login();
    let _ = login_again();
}
