use ratelimit_runtime::{Decisions, RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 100, key = user, shadow = "yes")]
async fn search(user: u64) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, shadow = true, wait = "5s", decision = d)]
async fn trial() -> Result<usize, RateLimitError> {
    let d: &Decisions = d;
    Ok(d.len())
}

fn main() {}
