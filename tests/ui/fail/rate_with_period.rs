use ratelimit_runtime::{Rate, RateLimitError, rate_limit};

#[rate_limit(rate = tier, period = 60)]
async fn tiered(tier: Rate) -> Result<Rate, RateLimitError> {
    Ok(tier)
}

fn main() {}
