use ratelimit_runtime::{Rate, RateLimitError, rate_limit};

#[rate_limit(rate = per_minute, key = user)]
async fn not_a_rate(user: &str, per_minute: u32) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(rate = tier, period = 60)]
async fn with_period(tier: Rate) -> Result<Rate, RateLimitError> {
    Ok(tier)
}

fn main() {}
